"""HTTP plumbing for every API plugin: the image generators, the chat back-ends and the API judges.

Standard library only (PIL is imported by the image helpers when called), so the light install can
call APIs and tests can point it at a local server. One place decides, for all of them:

- What is retried: :func:`retry_sync` / :func:`retry_async` run a call and ask a ``classify``
  callback what each failure means (a :class:`Failure`). HTTP 408, 409, 425, 429 and 5xx, timeouts
  and dropped connections are retried up to ``policy.max_retries`` times, other answers are final.
- How long to wait: exponential backoff with jitter (:class:`RetryPolicy`), or exactly what the
  server's ``Retry-After`` / ``retry-after-ms`` asks (:func:`parse_retry_after`). A server that asks
  for more than ``max_retry_after`` ends the call at once: waiting less would only be refused again.
- :func:`request` is a ``urllib`` client on that loop, for plugins without an SDK (images, chat). It
  raises :class:`HttpFailure` whose ``reason`` is one line fit to store as a missing candidate's
  reason. :func:`post_json`, :func:`get_bytes`, :func:`multipart` and :func:`bounded_map` build on it.
- Keys: plugins take the *name* of an environment variable (:func:`bearer`) and read it when they
  call, so it never sits in options, identity, provenance or files; text that may be stored or
  shown goes through :func:`redact`, URLs through :func:`safe_url`.
- :func:`preflight` fails a dead endpoint or rejected key at construction, not after a long run.
- :func:`image_data_url` sends images inline, downscaled; :func:`chat_content_parts` builds a chat turn's parts.

Every wait goes through ``policy.sleep`` (or ``retry_async``'s ``sleep``) so tests can watch waits
without spending them.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import http.client
import io
import json
import os
import random
import re
import socket
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, Optional, Sequence, TypeVar

from bon.errors import BonError

if TYPE_CHECKING:
    from PIL import Image

T = TypeVar("T")
R = TypeVar("R")

# --- retry policy ---------------------------------------------------------------------------------

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def is_retryable_status(status: int) -> bool:
    """Worth another try: timeouts, conflicts, too early, rate limits and any server error."""
    return status in RETRYABLE_STATUS or 500 <= status <= 599


@dataclass(frozen=True)
class Failure:
    """How one failed attempt should be treated.

    ``retryable``: try again (after ``retry_after`` seconds if the server said so). ``transient``: if
    it is the final failure, is it worth retrying on a later run (rate limits, outages, a rejected
    key) rather than an answer about this input (a 400 for an oversized image)?
    """

    reason: str
    retryable: bool
    transient: bool = True
    retry_after: float | None = None
    status: int | None = None


def status_failure(status: int, message: str = "", headers: Mapping[str, str] | None = None) -> Failure:
    """An HTTP error answer in the policy's terms, the same for every client."""
    reason = f"HTTP {status}: {message}" if message else f"HTTP {status}"
    if is_retryable_status(status):
        return Failure(reason, retryable=True, retry_after=parse_retry_after(headers), status=status)
    # a rejected key or a missing model is a set-up problem: a later run should ask again
    return Failure(reason, retryable=False, transient=status in (401, 403, 404), status=status)


class GaveUp(Exception):
    """The call failed for good: not retryable, or still failing after every retry."""

    def __init__(self, failure: Failure, attempts: int, waited: float):
        self.failure = failure
        self.attempts = attempts
        self.waited = waited
        prefix = f"gave up after {attempts} attempts: " if failure.retryable else ""
        super().__init__(prefix + failure.reason)

    @property
    def transient(self) -> bool:
        return self.failure.transient


@dataclass
class RetryPolicy:
    """How hard to try: ``max_retries`` retries after the first attempt, each at most ``timeout`` s
    (for :func:`request`; an SDK client has its own). Backoff is ``base_delay * 2**k`` capped at
    ``max_delay``, less a random ``jitter`` fraction of it (1.0 is "full jitter") so clients that
    failed together do not retry together. A server's Retry-After is waited exactly, up to
    ``max_retry_after`` s. ``sleep`` and ``rng`` are fields so tests can replace them."""

    max_retries: int = 4
    timeout: float = 120.0
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.5
    max_retry_after: float = 300.0
    sleep: Callable[[float], Any] = field(default=time.sleep, repr=False, compare=False)
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise BonError(f"max_retries must be at least 0, got {self.max_retries}")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise BonError("retry delays must not be negative")
        if self.timeout <= 0:
            raise BonError(f"timeout must be positive, got {self.timeout}")
        if not 0.0 <= self.jitter <= 1.0:
            raise BonError(f"jitter must lie in [0, 1], got {self.jitter}")

    @classmethod
    def from_options(cls, where: str, retries: Any = 4, timeout: Any = 120.0, backoff: Any = 1.0,
                     max_backoff: Any = 60.0, max_retry_after: Any = 300.0, jitter: float = 1.0) -> "RetryPolicy":
        """From the generators' user options, checked with messages that name them (full jitter)."""
        for key, value in (("retries", retries), ("timeout", timeout), ("backoff", backoff),
                           ("max_backoff", max_backoff), ("max_retry_after", max_retry_after)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise BonError(f"{where}: {key} must be a non-negative number, got {value!r}")
        if timeout <= 0:
            raise BonError(f"{where}: timeout must be positive, got {timeout!r}")
        return cls(max_retries=int(retries), timeout=float(timeout), base_delay=float(backoff),
                   max_delay=float(max_backoff), jitter=jitter, max_retry_after=float(max_retry_after))

    def delay(self, retry: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if retry_after is not None:
            return max(0.0, retry_after)
        wait = min(self.max_delay, self.base_delay * (2.0**retry))
        return wait * (1.0 - self.jitter * (rng or self.rng).random())


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds a server asks us to wait: ``retry-after-ms``, ``retry-after`` in seconds or an HTTP date."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


Classify = Callable[[BaseException], Optional[Failure]]  # None: not a failed request, re-raise it


class _Tries:
    """The bookkeeping both retry loops share, so the sync and async twins cannot drift apart."""

    def __init__(self, policy: RetryPolicy, classify: Classify) -> None:
        self.policy, self.classify = policy, classify
        self.attempt, self.waited = 1, 0.0

    def pause_after(self, exc: Exception) -> float:
        """The wait before the next attempt; raises :class:`GaveUp` when there is none, or ``exc``
        itself when ``classify`` does not recognise it (a bug, not a failed request)."""
        failure = self.classify(exc)
        if failure is None:
            raise exc
        policy, asked = self.policy, failure.retry_after
        if failure.retryable and asked is not None and asked > policy.max_retry_after:
            reason = (f"{failure.reason} (server asked to retry after {asked:.0f} s, "
                      f"over max_retry_after {policy.max_retry_after:.0f} s)")
            raise GaveUp(replace(failure, reason=reason, retryable=False), self.attempt, self.waited) from None
        if not failure.retryable or self.attempt > policy.max_retries:
            raise GaveUp(failure, self.attempt, self.waited) from None
        pause = policy.delay(self.attempt - 1, asked)
        self.attempt += 1
        self.waited += pause
        return pause


def retry_sync(call: Callable[[], T], policy: RetryPolicy, classify: Classify) -> tuple[T, int, float]:
    """``(result, attempts, seconds waited)``; raises :class:`GaveUp`."""
    tries = _Tries(policy, classify)
    while True:
        try:
            return call(), tries.attempt, tries.waited
        except Exception as exc:  # noqa: BLE001 - classify decides
            policy.sleep(tries.pause_after(exc))


async def retry_async(call: Callable[[], Awaitable[T]], policy: RetryPolicy, classify: Classify,
                      sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> tuple[T, int, float]:
    """The coroutine twin of :func:`retry_sync` (cancellation is never retried)."""
    tries = _Tries(policy, classify)
    while True:
        try:
            return await call(), tries.attempt, tries.waited
        except Exception as exc:  # noqa: BLE001 - classify decides
            await sleep(tries.pause_after(exc))


# --- a urllib client on the retry loop ------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    attempts: int = 1

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


class HttpFailure(Exception):
    """A request that did not succeed, or an answer that makes no sense; ``reason`` is one line,
    ``status`` the last HTTP status (if any)."""

    def __init__(self, reason: str, status: int | None = None, attempts: int = 1):
        super().__init__(reason)
        self.reason, self.status, self.attempts = reason, status, attempts


def bearer(api_key_env: str | None) -> dict[str, str]:
    """``Authorization`` header from the environment variable *named* ``api_key_env`` (none if unset/empty)."""
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env, "")
    return {"Authorization": f"Bearer {key}"} if key else {}


def error_message(body: bytes, limit: int = 200) -> str:
    """The server's error text: ``error.message`` of a JSON body, else the body's first line."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data)
        msg = err.get("message") if isinstance(err, dict) else err
        if isinstance(msg, str) and msg.strip():
            text = msg.strip()
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _classify_urllib(exc: BaseException, timeout: float) -> Failure | None:
    if isinstance(exc, urllib.error.HTTPError):
        data = exc.read() if exc.fp is not None else b""
        return status_failure(exc.code, error_message(data), exc.headers)
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return Failure(f"timed out after {timeout:g} s", retryable=True)
    if isinstance(exc, urllib.error.URLError):
        return Failure(f"connection failed: {reason}", retryable=True)
    if isinstance(exc, (ConnectionError, OSError, http.client.HTTPException)):  # reset, refused, cut short
        return Failure(f"connection failed: {type(exc).__name__}: {exc}", retryable=True)
    return None


def request(method: str, url: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
            policy: RetryPolicy | None = None) -> Response:
    """One HTTP request with retries (see the module doc); returns a 2xx response or raises HttpFailure."""
    policy = policy or RetryPolicy()
    headers = dict(headers or {})

    def attempt() -> Response:
        req = urllib.request.Request(url, data=body, headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=policy.timeout) as resp:  # noqa: S310 - URL is the user's API
            return Response(resp.status, dict(resp.headers.items()), resp.read())

    try:
        resp, attempts, _ = retry_sync(attempt, policy, lambda exc: _classify_urllib(exc, policy.timeout))
    except GaveUp as exc:
        failure = exc.failure
        suffix = f" (after {exc.attempts} attempts)" if failure.retryable and exc.attempts > 1 else ""
        # a server that echoes the key back must not get it into a file
        secret = headers.get("Authorization", "").partition(" ")[2]
        raise HttpFailure(redact(failure.reason + suffix, secret, mask="***"), failure.status, exc.attempts) from None
    resp.attempts = attempts
    return resp


def post_json(url: str, payload: dict[str, Any], headers: dict[str, str] | None = None,
              policy: RetryPolicy | None = None) -> Any:
    """POST a JSON body; return the decoded JSON answer (HttpFailure if it is not JSON)."""
    hdrs = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
    resp = request("POST", url, body=json.dumps(payload).encode("utf-8"), headers=hdrs, policy=policy)
    return decode_json(resp)


def get_bytes(url: str, headers: dict[str, str] | None = None, policy: RetryPolicy | None = None) -> bytes:
    return request("GET", url, headers=headers, policy=policy).body


def decode_json(resp: Response) -> Any:
    try:
        return resp.json()
    except (UnicodeDecodeError, ValueError):
        snippet = resp.body[:60].decode("utf-8", "replace").replace("\n", " ")
        raise HttpFailure(f"malformed response: not JSON ({snippet!r})", resp.status) from None


def multipart(fields: dict[str, Any], files: Sequence[tuple[str, str, bytes, str]]) -> tuple[bytes, str]:
    """Encode form fields and files ``(field, filename, data, content type)`` as multipart/form-data
    (image edit uploads; urllib has no encoder)."""
    boundary = f"bon-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for name, value in fields.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{text}\r\n'.encode())
    for name, filename, data, ctype in files:
        head = (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n").encode()
        parts.append(head + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def bounded_map(fn: Callable[[T], R], items: Iterable[T], max_concurrency: int) -> list[R]:
    """``[fn(x) for x in items]`` on at most ``max_concurrency`` threads, results in input order."""
    items = list(items)
    if max_concurrency <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(max_concurrency, len(items))) as pool:
        return list(pool.map(fn, items))


def join_url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


# --- images -----------------------------------------------------------------------------------


def fit_max_side(image: Image.Image, max_side: int | None) -> Image.Image:
    """Downscale (never upscale) so the longer side is at most ``max_side`` pixels."""
    from PIL import Image

    if not max_side or max(image.size) <= max_side:
        return image
    scale = max_side / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.BICUBIC)


def image_data_url(image: Image.Image, max_side: int | None = None, fmt: str = "png", quality: int = 90) -> str:
    """``data:image/...;base64,...`` of the image (RGB), resized to ``max_side`` first: APIs take images inline."""
    fmt = fmt.lower()
    if fmt not in ("png", "jpeg", "webp"):
        raise BonError(f"image format must be png, jpeg or webp, got {fmt!r}")
    im = fit_max_side(image.convert("RGB"), max_side)
    buf = io.BytesIO()
    if fmt == "png":
        im.save(buf, format="PNG", optimize=False, compress_level=6)
    else:
        im.save(buf, format=fmt.upper(), quality=quality)
    return f"data:image/{fmt};base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def chat_parts(items: Iterable[Sequence[Any]], image_part: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat ``content`` parts from ``(kind, value)`` items in order: consecutive texts merged into one
    ``{"type": "text"}`` part (joined by a newline), any other item the part ``image_part(value)``."""
    parts: list[dict[str, Any]] = []
    for kind, value in items:
        if kind == "text":
            if parts and parts[-1]["type"] == "text":
                parts[-1]["text"] += "\n" + value
            else:
                parts.append({"type": "text", "text": value})
        else:
            parts.append(image_part(value))
    return parts


def chat_content_parts(items: Iterable[Sequence[Any]], data_url: Callable[[Any], str]) -> list[dict[str, Any]]:
    """OpenAI chat ``content`` parts (:func:`chat_parts`), each image an ``image_url`` part whose URL is ``data_url(value)``."""
    return chat_parts(items, lambda image: {"type": "image_url", "image_url": {"url": data_url(image)}})


# --- secrets ----------------------------------------------------------------------------------

_KEYISH = re.compile(r"(?i)(api[\s_-]*key[^:=\n]{0,20}[:=]\s*)(\S+)")
_BEARER = re.compile(r"(?i)(bearer\s+)(\S+)")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}")


def redact(text: str, *secrets: str | None, mask: str = "[redacted]") -> str:
    """``text`` without the given secrets nor anything that looks like a key (servers quote keys,
    often masked as ``sk-ab***yz``, in their errors)."""
    text = str(text)
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, mask)
    text = _KEYISH.sub(lambda m: m.group(1) + mask, text)
    text = _BEARER.sub(lambda m: m.group(1) + mask, text)
    return _SK.sub(mask, text)


def safe_url(url: str) -> str:
    """The URL without user info or query string (either may carry a key)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


# --- preflight --------------------------------------------------------------------------------


def preflight(base_url: str, api_key: str | None, timeout: float, who: str, key_env: str | None = None) -> None:
    """One cheap ``GET {base_url}/models`` so a dead endpoint or a rejected key fails at once.

    Raises a one-line :class:`BonError` when the connection is refused, the host is unknown, nothing
    answers within ``timeout`` or the key is rejected (401/403). Any other answer, even a 404 from a
    server without ``/models``, means the endpoint is alive.
    """
    shown = safe_url(base_url)
    req = urllib.request.Request(join_url(base_url, "models"), method="GET")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    hint = "(set option preflight=false to skip this check)"
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - user-configured endpoint
            resp.read(1024)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            holder = f"${key_env}" if key_env else "the configured key"
            raise BonError(f"{who}: {shown} rejected the key in {holder} (HTTP {exc.code})") from None
        return
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            raise BonError(f"{who}: {shown} refused the connection; is the server running? {hint}") from None
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise BonError(f"{who}: {shown} did not answer within {timeout:g} s {hint}") from None
        raise BonError(f"{who}: cannot reach {shown} ({redact(str(reason), api_key)}) {hint}") from None
    except (socket.timeout, TimeoutError):
        raise BonError(f"{who}: {shown} did not answer within {timeout:g} s {hint}") from None
    except (ConnectionError, OSError, ValueError) as exc:
        raise BonError(f"{who}: cannot reach {shown} ({type(exc).__name__}: {redact(str(exc), api_key)}) {hint}") from None
