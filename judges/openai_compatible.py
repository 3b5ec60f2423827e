"""``openai-compatible``: a judge behind any OpenAI-style ``/chat/completions`` endpoint.

One client serves OpenAI (``gpt-5``), Gemini's OpenAI-compatible endpoint
(``base_url: https://generativelanguage.googleapis.com/v1beta/openai/``) and local vLLM / SGLang
servers (``base_url: http://localhost:8000/v1``, ``api_key_env: null``).

Each comparison is one request: bon's rubric for the task (or the official one from an MMRB2
checkout), then ``[PROMPT]``, response A and response B with their text and images in order, images
as data URLs downscaled to ``max_image_side``. Requests run concurrently (``concurrency``), are
retried on 429 / 5xx / timeouts with exponential backoff and jitter, honouring Retry-After, and each
verdict's meta records token usage, cost, latency and attempts. An answer that cannot be parsed is a
missing verdict with its reason; a request that still fails after the retries is a *transient*
missing verdict, which the store does not keep, so a rerun asks again.

The API key is read from the environment variable *named* by ``api_key_env``; the key never enters
the identity, a verdict, a log line or a file.

Options:
  model              the served model name (``openai-compatible:gpt-5``)
  base_url           endpoint root up to ``/v1`` (default OpenAI's)
  api_key_env        name of the variable holding the key (default OPENAI_API_KEY; null for none)
  max_image_side     longest image side sent, in pixels (default 1024)
  image_format       png (default), jpeg or webp
  temperature, top_p, max_tokens, reasoning_effort, seed, extra_body   sampling / request settings
  max_tokens_param   the request field for max_tokens: max_completion_tokens (default) or max_tokens
  concurrency        requests in flight at once (default 8)
  timeout            seconds per request (default 120)
  max_retries, backoff_base, backoff_max, max_retry_after   retry policy
  price_input, price_output   USD per 1M input / output tokens, for the cost in meta
  preflight          GET /models at construction so a dead endpoint fails at once (default true)
  preflight_timeout  seconds for that check (default 5)
  official_prompts   path to an MMRB2 checkout: use its rubric text instead of bon's, and (unless
                     official: false) the official request (judges/prompts/official.py): one part per
                     segment, original image bytes, no sampling parameters, the official JSON answer
  official           official request conditions (default: on exactly when official_prompts is set)
  keep_answer        keep the model's full answer in meta (default true)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

from bon.content import ImageItem
from bon.errors import BonError
from bon.protocol import Comparison, PairwiseJudge, Verdict
from bon.http import preflight as http_preflight
from bon.http import (Failure, GaveUp, RetryPolicy, chat_content_parts, image_data_url, redact, retry_async, safe_url,
                      status_failure)

OPENAI_URL = "https://api.openai.com/v1"
TASKS = ("image", "edit", "interleaved", "reasoning")


class OpenAICompatibleJudge(PairwiseJudge):
    plugin = "openai-compatible"
    version = 1  # bump when the request built from a comparison changes

    def __init__(
        self,
        model: str | None = None,
        name: str | None = None,
        base_url: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_image_side: int | str | None = "auto",  # 1024, or none under official conditions
        image_format: str = "png",
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        max_tokens_param: str = "max_completion_tokens",
        reasoning_effort: str | None = None,
        seed: int | None = None,
        extra_body: dict[str, Any] | None = None,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        max_retry_after: float = 300.0,
        price_input: float | None = None,
        price_output: float | None = None,
        preflight: bool = True,
        preflight_timeout: float = 5.0,
        official_prompts: str | Path | None = None,
        keep_answer: bool = True,
        official: bool | None = None,
    ) -> None:
        self.name = name or (f"{self.plugin}:{model}" if model else self.plugin)
        if not model:
            raise BonError(f"{self.name}: option 'model' is required (e.g. openai-compatible:gpt-5)")
        self.model = str(model)
        self.base_url = str(base_url or OPENAI_URL).rstrip("/")
        self.api_key_env = api_key_env or None
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise BonError(f"{self.name}: environment variable {self.api_key_env} is not set "
                           f"(it should hold the API key for {safe_url(self.base_url)}; api_key_env: null for a server without keys)")
        if max_tokens_param not in ("max_completion_tokens", "max_tokens"):
            raise BonError(f"{self.name}: max_tokens_param must be max_completion_tokens or max_tokens, got {max_tokens_param!r}")
        if int(concurrency) < 1:
            raise BonError(f"{self.name}: concurrency must be at least 1, got {concurrency}")
        if image_format not in ("png", "jpeg", "webp"):
            raise BonError(f"{self.name}: image_format must be png, jpeg or webp, got {image_format!r}")
        if extra_body is not None and not isinstance(extra_body, dict):
            raise BonError(f"{self.name}: extra_body must be a mapping")
        self.official = bool(official_prompts) if official is None else bool(official)
        if self.official and not official_prompts:
            raise BonError(f"{self.name}: official conditions need official_prompts: PATH (a checkout of facebookresearch/MMRB2)")
        if max_image_side == "auto":
            max_image_side = None if self.official else 1024
        self.max_image_side = int(max_image_side) if max_image_side else None
        self.image_format = image_format
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = int(max_tokens) if max_tokens else None
        self.max_tokens_param = max_tokens_param
        self.reasoning_effort = reasoning_effort
        self.seed = seed
        self.extra_body = dict(extra_body or {})
        self.concurrency = int(concurrency)
        self.timeout = float(timeout)
        self.policy = RetryPolicy(max_retries=int(max_retries), base_delay=float(backoff_base),
                                  max_delay=float(backoff_max), max_retry_after=float(max_retry_after))
        self.price_input = price_input
        self.price_output = price_output
        self.keep_answer = bool(keep_answer)
        self.official_prompts = Path(official_prompts) if official_prompts else None
        from judges.prompts import rubric

        self.templates = {t: rubric(t, self.official_prompts) for t in TASKS}
        self.totals = {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "retries": 0}
        self._images: OrderedDict[tuple, str] = OrderedDict()
        try:
            import openai  # noqa: F401
        except ImportError:
            raise BonError(f"{self.name}: needs the openai package (pip install 'bon[api]')") from None
        if preflight:
            key = self._key() if self.api_key_env else None
            http_preflight(self.base_url, key, float(preflight_timeout), self.name, self.api_key_env)

    # --- identity ------------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        sampling = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                    "reasoning_effort": self.reasoning_effort, "seed": self.seed}
        return {
            "plugin": self.plugin,
            "version": self.version,
            "model": self.model,
            "base_url": safe_url(self.base_url),
            "templates": {t: tpl.sha256 for t, tpl in self.templates.items()},
            "sampling": {k: v for k, v in sampling.items() if v is not None},
            "extra_body": self.extra_body,
            "max_image_side": self.max_image_side,
            "image_format": self.image_format,
            **({"conditions": "official"} if self.official else {}),
        }

    def _key(self) -> str:
        if self.api_key_env is None:
            return "EMPTY"
        key = os.environ.get(self.api_key_env)
        if not key:
            raise BonError(f"{self.name}: environment variable {self.api_key_env} is not set")
        return key

    # --- requests ------------------------------------------------------------------------------
    def messages(self, c: Comparison) -> list[dict[str, Any]]:
        """The chat request for one comparison: one user turn of interleaved text and images."""
        tpl = self.templates[_scorer_task(c.prompt.task)]
        items = tpl.render(_raw(c.prompt.content), _raw(c.a), _raw(c.b))
        return [{"role": "user", "content": chat_content_parts(items, self._data_url)}]

    def _data_url(self, item: ImageItem) -> str:
        key = (item.digest, self.max_image_side, self.image_format)
        if key in self._images:
            self._images.move_to_end(key)
            return self._images[key]
        url = image_data_url(item.load(), self.max_image_side, self.image_format)
        self._images[key] = url
        while len(self._images) > 256:
            self._images.popitem(last=False)
        return url

    def request(self, c: Comparison) -> dict[str, Any]:
        if self.official:
            from judges.prompts.official import api_request

            return api_request(self.model, self.templates[_scorer_task(c.prompt.task)], c, self.max_image_side)
        body: dict[str, Any] = {"model": self.model, "messages": self.messages(c)}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self.max_tokens:
            body[self.max_tokens_param] = self.max_tokens
        if self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        if self.seed is not None:
            body["seed"] = int(self.seed) + c.sample
        if self.extra_body:
            body.update(self.extra_body)  # provider-specific fields travel in the JSON body itself
        return body

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        if not comparisons:
            return []
        return _run(self._judge_all(list(comparisons)))

    async def _judge_all(self, comparisons: list[Comparison]) -> list[Verdict]:
        from openai import AsyncOpenAI

        key = self._key()
        client = AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout)
        gate = asyncio.Semaphore(self.concurrency)
        try:
            return list(await asyncio.gather(*(self._one(client, gate, c, key) for c in comparisons)))
        finally:
            await client.close()

    async def _one(self, client: Any, gate: asyncio.Semaphore, c: Comparison, key: str) -> Verdict:
        body: dict[str, Any] = {}

        async def call() -> Any:
            async with gate:  # images are encoded inside the gate, so requests start while others encode
                if not body:
                    body.update(self.request(c))
                # the low-level post with a plain-JSON result skips the SDK's request transform and
                # response models (~2.5 ms of CPU per call), which capped throughput well below
                # concurrency / latency
                return await client.post("/chat/completions", body=body, cast_to=object)

        started = time.perf_counter()
        try:
            resp, attempts, waited = await retry_async(call, self.policy, lambda e: classify(e, key))
        except GaveUp as exc:
            self.totals["retries"] += exc.attempts - 1
            return Verdict.failed(redact(str(exc), key)[:300], transient=exc.transient,
                                  attempts=exc.attempts, waited_s=round(exc.waited, 3))
        meta = self._meta(resp, attempts, waited, time.perf_counter() - started)
        text = _answer_text(resp)
        from judges.prompts import parse_answer
        from judges.prompts.official import verdict as official_verdict

        verdict = (official_verdict if self.official else parse_answer)(text or "")
        if self.keep_answer:
            meta["answer"] = redact(text or "", key)
        verdict.meta = {**meta, **verdict.meta}
        return verdict

    def _meta(self, resp: Any, attempts: int, waited: float, seconds: float) -> dict[str, Any]:
        self.totals["requests"] += 1
        self.totals["retries"] += attempts - 1
        meta: dict[str, Any] = {"attempts": attempts, "latency_s": round(seconds, 3)}
        if waited:
            meta["waited_s"] = round(waited, 3)
        served = _get(resp, "model")
        if served:
            meta["served_model"] = str(served)
        choices = _get(resp, "choices") or []
        if choices and _get(choices[0], "finish_reason"):
            meta["finish_reason"] = str(_get(choices[0], "finish_reason"))
        usage = _get(resp, "usage")
        if usage is not None:
            tin = int(_get(usage, "prompt_tokens") or 0)
            tout = int(_get(usage, "completion_tokens") or 0)
            meta["usage"] = {"input_tokens": tin, "output_tokens": tout}
            details = _get(usage, "completion_tokens_details")
            reasoning = _get(details, "reasoning_tokens") if details is not None else None
            if reasoning:
                meta["usage"]["reasoning_tokens"] = int(reasoning)
            self.totals["input_tokens"] += tin
            self.totals["output_tokens"] += tout
            if self.price_input is not None or self.price_output is not None:
                cost = (tin * float(self.price_input or 0.0) + tout * float(self.price_output or 0.0)) / 1e6
                meta["cost_usd"] = round(cost, 8)
                self.totals["cost_usd"] += cost
        return meta


def classify(exc: BaseException, key: str | None = None) -> Failure:
    """Map an openai client exception to the retry policy's terms."""
    import openai

    if isinstance(exc, BonError):  # the comparison itself is bad (an unreadable image)
        return Failure(str(exc), retryable=False, transient=False)
    if isinstance(exc, openai.APITimeoutError):
        return Failure("request timed out", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f"{type(cause).__name__}: {cause}" if cause else str(exc)
        return Failure(redact(f"connection failed ({detail})", key)[:200], retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = int(exc.status_code)
        message = redact(_error_message(exc), key)[:200]
        return status_failure(status, message, getattr(getattr(exc, "response", None), "headers", None))
    return Failure(redact(f"{type(exc).__name__}: {exc}", key)[:200], retryable=False, transient=True)


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", "") or "")


def _get(obj: Any, key: str) -> Any:
    """A field of a JSON response, whether it arrived as a dict or as an SDK object."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _answer_text(resp: Any) -> str | None:
    choices = _get(resp, "choices") or []
    if not choices or not isinstance(choices, list):
        return None
    message = _get(choices[0], "message")
    content = _get(message, "content") if message is not None else None
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    if content is None:
        return _get(message, "refusal") if message is not None else None
    return str(content)


def _raw(content: Any) -> list[list[Any]]:
    """Content as ``[kind, value]`` items, images kept as :class:`ImageItem` for later encoding."""
    return [["text", it.text] if it.kind == "text" else ["image", it] for it in content]


def _scorer_task(task: str) -> str:
    from analysis.mmrb2 import scorer_task

    return scorer_task(task)


def _run(coro: Any) -> Any:
    """Run a coroutine to completion, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
