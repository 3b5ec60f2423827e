"""The one OpenAI-compatible client: chat judges, API graders, chat generators and image generators
all reach OpenAI, Gemini's compatible endpoint or a local vLLM / SGLang server through it.

The transport is the ``openai`` SDK's; the retries are bon's, with the SDK's rules (``max_retries``,
``timeout``): timeouts, dropped connections, 408/409/429 and 5xx are retried with exponential backoff
(0.5 s doubling to 8 s) or after the server's ``Retry-After`` (up to two minutes; a longer one is not waited for). bon adds its rules on top:

- **a budget in time:** ``retry_for`` (seconds, default 120; ``"2m"`` also reads) bounds how long an
  endpoint keeps trying once it is failing: from its first transient failure with no answer since,
  no retry is scheduled and no new request sent past the budget, so a dead server ends the command
  (exit 3, every unanswered call pending) in about ``retry_for``, not after every retry of every call;

- **transient or final:** what is still failing after the retries is an :class:`ApiFailure` whose
  ``transient`` says whether a later run should ask again (timeouts, connections, 408/409/425/429,
  5xx, and 401/403/404, which are set-up problems) or the answer is final for this input (any other
  4xx, an answer that is not JSON);
- **keys:** the key is read from the environment variable *named* by ``api_key_env`` when a request
  is made; every reason, log line or error text goes through :func:`redact`, URLs through
  :func:`safe_url`, so the key never lands in a cache, a store, a report or an exception;
- **preflight:** one ``GET {base_url}/models`` at construction, so a dead endpoint or a rejected key
  is a one-line error before a long run;
- **concurrency:** :meth:`OpenAIEndpoint.post_all` keeps at most ``concurrency`` requests in flight;
- **accounting:** each :class:`Reply` carries tokens, cost (from ``price_input``/``price_output`` in
  USD per million tokens), latency and attempts; ``totals`` sums them;
- **GPT-5 / o-series:** :meth:`OpenAIEndpoint.chat_body` sends ``max_completion_tokens`` and leaves
  out the sampling parameters those models refuse (``temperature``, ``top_p``, log-probabilities),
  decided by the model name or the ``reasoning_model`` option.
"""

from __future__ import annotations

import math
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union
from urllib.parse import urlsplit, urlunsplit

from bon.backends import require
from bon.errors import BonError, Stopped, first_line
from bon.redact import check_env_name, redact_text, remember, remember_url

OPENAI_URL = "https://api.openai.com/v1"
TOKEN_PARAMS = ("max_completion_tokens", "max_tokens")
# models that take max_completion_tokens and refuse temperature/top_p/logprobs: o1, o3, o4-mini, gpt-5*
# (but not the gpt-5 chat snapshots, which sample like gpt-4o)
REASONING_MODEL = re.compile(r"^(o\d|gpt-5)(?!.*-chat)", re.IGNORECASE)
REFUSED_BY_REASONING = ("temperature", "top_p", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty")
TRANSIENT_STATUS = frozenset({401, 403, 404, 408, 409, 425, 429})
RETRIED_STATUS = frozenset({408, 409, 429})  # and 5xx: the statuses the SDK itself would retry
BACKOFF_FIRST_S, BACKOFF_MAX_S, RETRY_AFTER_MAX_S = 0.5, 8.0, 120.0

Body = Union[dict[str, Any], Callable[[], dict[str, Any]]]


class ApiFailure(Exception):
    """A request that failed for good (after the SDK's retries) or an answer that makes no sense.
    ``reason`` is one redacted line, fit to store as a missing item's reason."""

    def __init__(self, reason: str, transient: bool, attempts: int = 1, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.transient, self.attempts, self.status = reason, transient, attempts, status

    def info(self) -> dict[str, Any]:
        """What a generator records in a missing candidate's provenance."""
        info: dict[str, Any] = {"missing": self.reason, "attempts": self.attempts}
        if self.status:
            info["status"] = self.status
        if self.transient:
            info["transient"] = True
        return info


@dataclass
class Reply:
    """A decoded JSON answer with what it cost."""

    data: Any
    attempts: int = 1
    latency_s: float = 0.0
    usage: dict[str, int] | None = None
    cost_usd: float | None = None

    def get(self, key: str) -> Any:
        return self.data.get(key) if isinstance(self.data, dict) else None


class OpenAIEndpoint:
    """One OpenAI-compatible endpoint as a model: ``post``/``post_all`` JSON (or multipart) bodies."""

    def __init__(self, model: str, who: str, base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY",
                 timeout: float = 120.0, max_retries: int = 4, concurrency: int = 4, preflight: bool = False,
                 preflight_timeout: float = 5.0, price_input: float | None = None, price_output: float | None = None,
                 reasoning_model: bool | None = None, max_tokens_param: str = "max_completion_tokens",
                 retry_for: float | str | None = 120.0) -> None:
        self.who = who
        if not model:
            raise BonError(f"{who}: option 'model' is required")
        self.model = str(model)
        self.base_url = str(base_url or OPENAI_URL).rstrip("/")
        parsed = urlsplit(self.base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BonError(f"{who}: base_url {self.base_url!r} is not an http(s) URL")
        self.shown_url = safe_url(self.base_url)
        remember_url(self.base_url)  # a key inside the URL is masked wherever it would be written
        check_env_name(api_key_env, who)
        self.api_key_env = api_key_env or None
        if self.api_key_env:
            remember(os.environ.get(self.api_key_env))
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise BonError(f"{who}: environment variable {self.api_key_env} is not set (it should hold the API key for "
                           f"{self.shown_url}; api_key_env: null for a server without keys)")
        if max_tokens_param not in TOKEN_PARAMS:
            raise BonError(f"{who}: max_tokens_param must be max_completion_tokens or max_tokens, got {max_tokens_param!r}")
        for key, value in (("timeout", timeout), ("max_retries", max_retries), ("concurrency", concurrency)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < (0 if key == "max_retries" else 1e-9):
                raise BonError(f"{who}: {key} must be a {'non-negative' if key == 'max_retries' else 'positive'} number, got {value!r}")
        self.timeout, self.max_retries, self.concurrency = float(timeout), int(max_retries), max(1, int(concurrency))
        self.retry_for = parse_duration(retry_for, f"{who}: retry_for")
        self._failing_since: float | None = None  # first transient failure with no answer since
        self.price_input, self.price_output = price_input, price_output
        self.reasoning = bool(REASONING_MODEL.match(self.model.rsplit("/", 1)[-1])) if reasoning_model is None else bool(reasoning_model)
        self.max_tokens_param = "max_completion_tokens" if self.reasoning else max_tokens_param
        self.totals = {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "retries": 0}
        self._lock = threading.Lock()
        self._client: Any = None
        require("openai", who)
        if preflight:
            check_endpoint(self.base_url, self.key() if self.api_key_env else None, float(preflight_timeout), who, self.api_key_env)

    # --- requests -------------------------------------------------------------------------------

    def key(self) -> str:
        if self.api_key_env is None:
            return "EMPTY"
        value = os.environ.get(self.api_key_env)
        if not value:
            raise BonError(f"{self.who}: environment variable {self.api_key_env} is not set")
        return value

    def chat_body(self, messages: list[dict[str, Any]], max_tokens: int | None = None, **settings: Any) -> dict[str, Any]:
        """A ``/chat/completions`` body; ``settings`` (temperature, top_p, seed, logprobs, extra fields)
        left out when None, and the ones a reasoning model refuses left out for it."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if max_tokens:
            body[self.max_tokens_param] = int(max_tokens)
        for key, value in settings.items():
            if value is not None and not (self.reasoning and key in REFUSED_BY_REASONING):
                body[key] = value
        return body

    def post(self, path: str, body: Body, files: Any = None) -> Reply:
        """One request; raises :class:`ApiFailure`."""
        result = self.post_all(path, [body], files)[0]
        if isinstance(result, ApiFailure):
            raise result
        return result

    def post_all(self, path: str, bodies: Sequence[Body], files: Any = None) -> list[Reply | ApiFailure]:
        """Every body posted, at most ``concurrency`` at once, results in input order. A body may be a
        function that builds it, called inside the bound (images are encoded while others are in flight)."""
        client = self.client()
        key = self.key()
        if len(bodies) <= 1 or self.concurrency == 1:
            return [self._one(client, key, path, b, files) for b in bodies]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(bodies))) as pool:
            return list(pool.map(lambda b: self._one(client, key, path, b, files), bodies))

    def client(self) -> Any:
        if self._client is None:
            openai = require("openai", self.who)
            self._client = openai.OpenAI(api_key=self.key(), base_url=self.base_url, max_retries=self.max_retries,
                                         timeout=self.timeout)  # the SDK's retries for other calls (Batch API jobs)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _one(self, client: Any, key: str, path: str, body: Body, files: Any) -> Reply | ApiFailure:
        started = time.perf_counter()
        try:
            payload = body() if callable(body) else body
        except BonError as exc:  # the input itself is bad (an unreadable image)
            return ApiFailure(str(exc), transient=False)
        options = {"headers": {"Content-Type": "multipart/form-data"}} if files else {}
        attempts = 0
        while True:
            gave_up = self._gave_up()
            if gave_up:
                self.record(max(attempts, 1), None)
                return ApiFailure(gave_up, transient=True, attempts=attempts)
            attempts += 1
            try:
                resp = client.post(path, cast_to=_httpx().Response, body=payload, files=files,
                                   options={**options, "timeout": self._attempt_timeout(), "max_retries": 0})
                break
            except Exception as exc:  # noqa: BLE001 - classify decides what it means
                failure = self.classify(exc, key, attempts)
                wait = self._retry_wait(exc, attempts) if failure.transient else None
                if wait is None:
                    self.record(attempts, None)
                    return failure
                time.sleep(wait)
        self._answered()
        try:
            data = resp.json()
        except ValueError:
            text = resp.content[:60].decode("utf-8", "replace").replace("\n", " ")
            self.record(attempts, None)
            return ApiFailure(f"malformed response: not JSON ({text!r})", transient=False, attempts=attempts, status=resp.status_code)
        reply = Reply(data, attempts, round(time.perf_counter() - started, 3))
        self.record(attempts, reply)
        return reply

    # --- the retry budget ---------------------------------------------------------------------

    def _retry_wait(self, exc: BaseException, attempts: int) -> float | None:
        """Seconds to wait before the next attempt, or None: not a retried failure, no retries left, or
        the wait would run past ``retry_for`` (the failure starts the endpoint's clock if it is the first)."""
        with self._lock:
            self._failing_since = self._failing_since or time.monotonic()
            left = self._failing_since + self.retry_for - time.monotonic()
        if attempts > self.max_retries or not _retried(exc, require("openai", self.who)):
            return None
        after = _retry_after(getattr(getattr(exc, "response", None), "headers", None))
        wait = after or min(BACKOFF_FIRST_S * 2 ** (attempts - 1), BACKOFF_MAX_S) * (1 - 0.25 * random.random())
        return wait if wait < left else None

    def _gave_up(self) -> str | None:
        """Why no request is sent any more: the endpoint has failed for longer than ``retry_for``."""
        with self._lock:
            since = self._failing_since
        failing = time.monotonic() - since if since is not None else 0.0
        if since is None or failing < self.retry_for:
            return None
        return (f"not sent: {self.shown_url} has failed for {failing:.0f} s with no answer "
                f"(retry_for {self.retry_for:g} s); a rerun asks again")

    def _attempt_timeout(self) -> float:
        """``timeout``, but no longer than what is left of the budget while the endpoint is failing."""
        with self._lock:
            since = self._failing_since
        if since is None:
            return self.timeout
        return min(self.timeout, max(1.0, since + self.retry_for - time.monotonic()))

    def _answered(self) -> None:
        with self._lock:
            self._failing_since = None

    def classify(self, exc: BaseException, key: str | None, attempts: int | None = None) -> ApiFailure:
        """An SDK exception in bon's terms (``attempts``: how many were made, else the SDK's count)."""
        openai = require("openai", self.who)
        request = getattr(exc, "request", None) or getattr(getattr(exc, "response", None), "request", None)
        attempts = attempts or _attempts(request)
        after = f" (after {attempts} attempts)" if attempts > 1 else ""
        if isinstance(exc, openai.APITimeoutError):
            return ApiFailure(f"timed out after {self.timeout:g} s{after}", transient=True, attempts=attempts)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f"{type(cause).__name__}: {first_line(cause)}" if cause else first_line(exc)
            return ApiFailure(redact(f"connection failed ({detail}){after}", key)[:300], transient=True, attempts=attempts)
        if isinstance(exc, openai.APIStatusError):
            status = int(exc.status_code)
            message = _error_message(exc)
            reason = redact(f"HTTP {status}: {message}" if message else f"HTTP {status}", key, mask="***")[:300]
            return ApiFailure(reason + after, transient=status in TRANSIENT_STATUS or status >= 500, attempts=attempts, status=status)
        # anything else (a proxy that cut the answer short, an SDK surprise): worth asking again later
        return ApiFailure(redact(f"{type(exc).__name__}: {first_line(exc)}", key)[:300], transient=True, attempts=attempts)

    def record(self, attempts: int, reply: Reply | None) -> None:
        """Count a request: retries, and the usage and cost of an answer (also for answers that came another way)."""
        with self._lock:
            self.totals["retries"] += attempts - 1
            if reply is None:
                return
            self.totals["requests"] += 1
            usage = reply.get("usage")
            if not isinstance(usage, dict):
                return
            tin, tout = int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0), int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
            reply.usage = {"input_tokens": tin, "output_tokens": tout}
            reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
            if reasoning:
                reply.usage["reasoning_tokens"] = int(reasoning)
            self.totals["input_tokens"] += tin
            self.totals["output_tokens"] += tout
            if self.price_input is not None or self.price_output is not None:
                reply.cost_usd = (tin * float(self.price_input or 0.0) + tout * float(self.price_output or 0.0)) / 1e6
                self.totals["cost_usd"] += reply.cost_usd

    def fetch(self, url: str) -> bytes:
        """The bytes at a URL an answer points to (an image on a CDN): no key is sent there."""
        httpx2 = _httpx()

        try:
            with httpx2.Client(timeout=self.timeout, transport=httpx2.HTTPTransport(retries=self.max_retries)) as http:
                resp = http.get(url)
        except httpx2.HTTPError as exc:
            raise ApiFailure(f"cannot fetch {safe_url(url)} ({type(exc).__name__})", transient=True) from None
        if resp.status_code >= 400:
            code = resp.status_code
            raise ApiFailure(f"cannot fetch {safe_url(url)} (HTTP {code})", transient=code in TRANSIENT_STATUS or code >= 500,
                             status=code)
        return resp.content


def chat_text(reply: Reply) -> str:
    """The assistant's text in a chat answer (content parts joined, a refusal as text);
    :class:`ApiFailure` (final) when the answer holds none."""
    choices = reply.get("choices")
    message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        raise ApiFailure("malformed response: no choices[0].message", transient=False, attempts=reply.attempts)
    content = message.get("content")
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    if content is None:
        content = message.get("refusal")
    if not isinstance(content, str):
        raise ApiFailure("malformed response: message content is not text", transient=False, attempts=reply.attempts)
    return content


def reply_meta(reply: Reply) -> dict[str, Any]:
    """Attempts, latency, served model, finish reason, tokens and cost of a chat answer (for a verdict's meta)."""
    meta: dict[str, Any] = {"attempts": reply.attempts, "latency_s": reply.latency_s}
    if reply.get("model"):
        meta["served_model"] = str(reply.get("model"))
    choices = reply.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict) and choices[0].get("finish_reason"):
        meta["finish_reason"] = str(choices[0]["finish_reason"])
    if reply.usage is not None:
        meta["usage"] = reply.usage
    if reply.cost_usd is not None:
        meta["cost_usd"] = round(reply.cost_usd, 8)
    return meta


def _httpx() -> Any:
    """The HTTP library the installed openai SDK is built on: httpx2 from openai 3 on, httpx before."""
    try:
        import httpx2
    except ImportError:
        import httpx as httpx2
    return httpx2


def _retried(exc: BaseException, openai: Any) -> bool:
    """What the SDK itself retries: timeouts, dropped connections, 408/409/429 and 5xx (unless the
    server says ``x-should-retry: false`` or asks for a wait longer than two minutes)."""
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    response = getattr(exc, "response", None)
    if not isinstance(exc, openai.APIStatusError) or response is None:
        return False
    after = _retry_after(response.headers, limit=math.inf)
    if after is not None and after > RETRY_AFTER_MAX_S:
        return False
    told = response.headers.get("x-should-retry")
    if told in ("true", "false"):
        return told == "true"
    return response.status_code in RETRIED_STATUS or response.status_code >= 500


def _retry_after(headers: Any, limit: float = RETRY_AFTER_MAX_S) -> float | None:
    """The server's ``retry-after-ms`` or ``Retry-After`` in seconds, when positive and at most ``limit``."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            value = float((headers or {}).get(name)) * scale
        except (TypeError, ValueError):
            continue
        if 0 < value <= limit:
            return value
    return None


def parse_duration(value: Any, where: str) -> float:
    """Seconds from a number or a string such as ``"120s"``, ``"2m"``, ``"1h"``; positive; None: no limit."""
    if value is None:
        return math.inf
    scale = 1.0
    if isinstance(value, str):
        text = value.strip().lower()
        for suffix, factor in (("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
            if text.endswith(suffix) and text[: -len(suffix)].strip():
                text, scale = text[: -len(suffix)], factor
                break
        try:
            value = float(text)
        except ValueError:
            raise BonError(f"{where}: expected seconds (a number, or e.g. 120s, 2m), got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise BonError(f"{where}: expected a positive number of seconds, got {value!r}")
    return float(value) * scale


def _attempts(request: Any) -> int:
    """Attempts made, from the retry count the SDK writes on each request."""
    try:
        return int(request.headers.get("x-stainless-retry-count", 0)) + 1
    except (AttributeError, TypeError, ValueError):
        return 1


def _error_message(exc: Any) -> str:
    """The server's ``error.message`` (not the SDK's text, which quotes the whole body)."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    message = inner.get("message") if isinstance(inner, dict) else inner
    return first_line(message, 200) if isinstance(message, str) and message.strip() else ""


# --- secrets ----------------------------------------------------------------------------------

def redact(text: str, *secrets: str | None, mask: str = "[redacted]") -> str:
    """``text`` without the given secrets nor anything that looks like one (:func:`bon.redact.redact_text`)."""
    return redact_text(text, *secrets, mask=mask)


def safe_url(url: str) -> str:
    """The URL without user info or query string (either may carry a key)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def check_endpoint(base_url: str, api_key: str | None, timeout: float, who: str, key_env: str | None = None) -> None:
    """Preflight: ``GET {base_url}/models``. A refused connection or no answer within ``timeout`` is
    transient (:class:`Stopped`, exit 3: start the server and rerun); an unknown host or a rejected key
    (401/403) is a one-line BonError (exit 2); any other answer, even a 404 from a server without
    ``/models``, means the endpoint is alive."""
    httpx2 = _httpx()

    shown = safe_url(base_url)
    hint = "(set option preflight=false to skip this check)"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx2.Client(timeout=timeout) as http:
            resp = http.get(base_url.rstrip("/") + "/models", headers=headers)
    except httpx2.TimeoutException:
        raise Stopped(f"{who}: {shown} did not answer within {timeout:g} s {hint}") from None
    except (httpx2.HTTPError, OSError, ValueError) as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(exc).lower():
            raise Stopped(f"{who}: {shown} refused the connection; is the server running? {hint}") from None
        raise BonError(f"{who}: cannot reach {shown} ({type(exc).__name__}: {redact(first_line(exc), api_key)}) {hint}") from None
    if resp.status_code in (401, 403):
        holder = f"${key_env}" if key_env else "the configured key"
        raise BonError(f"{who}: {shown} rejected the key in {holder} (HTTP {resp.status_code})")

