"""``openai-compatible``: a judge behind any OpenAI-style ``/chat/completions`` endpoint.

One client serves OpenAI (``gpt-5``), Gemini's OpenAI-compatible endpoint
(``base_url: https://generativelanguage.googleapis.com/v1beta/openai/``) and local vLLM / SGLang
servers (``base_url: http://localhost:8000/v1``, ``api_key_env: null``), or servers that ``bon run``
starts and stops itself (a ``serve:`` on the judge entry, see :mod:`bon.serve`).

Each comparison is one request: bon's rubric for the task (or the official one from an MMRB2
checkout), then ``[PROMPT]``, response A and response B with their text and images in order, images
as data URLs downscaled to ``max_image_side``. Requests go through the shared client
(:mod:`bon.backends.openai_api`): concurrently (``concurrency``), retried by the ``openai`` SDK on 429 /
5xx / timeouts honouring Retry-After, and each verdict's meta records token usage, cost, latency and
attempts. GPT-5 and o-series models get ``max_completion_tokens`` and no sampling parameters. An answer that cannot be parsed is a
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
  reasoning_model    true for a model that refuses sampling parameters (default: by name, o1/o3/o4/gpt-5)
  concurrency        requests in flight at once (default 8)
  timeout            seconds per request attempt (default 120)
  max_retries        retries after the first attempt (default 5)
  retry_for          how long a failing endpoint keeps retrying, in seconds or "2m" (default 120): past it,
                     what is left is pending (exit 3) instead of every call retried in turn
  price_input, price_output   USD per 1M input / output tokens, for the cost in meta
  preflight          GET /models at construction so a dead endpoint fails at once (default true)
  preflight_timeout  seconds for that check (default 5)
  official_prompts   path to an MMRB2 checkout: use its rubric text instead of bon's, and (unless
                     official: false) the official request (judges/prompts/official.py): one part per
                     segment, original image bytes, no sampling parameters, the official JSON answer
  official           official request conditions (default: on exactly when official_prompts is set)
  keep_answer        keep the model's full answer in meta (default true)
  batch              submit each referee batch as one Batch API job (judges/openai_batch.py; default false)
  batch_poll, batch_window, batch_price_factor   seconds between status polls (30), completion window
                     ("24h"), batch price as a fraction of the synchronous one (0.5)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

from bon.backends.images import api_parts, image_data_url
from bon.backends.openai_api import ApiFailure, OpenAIEndpoint, Reply, chat_text, redact, reply_meta, safe_url
from bon.content import ImageItem
from bon.errors import BonError
from bon.protocol import Comparison, Verdict
from judges.prompts import RubricJudge


class OpenAICompatibleJudge(RubricJudge):
    plugin = "openai-compatible"
    requires = ("openai",)  # optional packages (bon.preflight)

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
        reasoning_model: bool | None = None,
        reasoning_effort: str | None = None,
        seed: int | None = None,
        extra_body: dict[str, Any] | None = None,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 5,
        retry_for: float | str | None = 120.0,
        price_input: float | None = None,
        price_output: float | None = None,
        preflight: bool = True,
        preflight_timeout: float = 5.0,
        official_prompts: str | Path | None = None,
        keep_answer: bool = True,
        batch: bool = False,
        batch_poll: float = 30.0,
        batch_window: str = "24h",
        batch_price_factor: float = 0.5,
        official: bool | None = None,
    ) -> None:
        official = self.setup_rubric(model, name, official_prompts, official)
        if not model:
            raise BonError(f"{self.name}: option 'model' is required (e.g. openai-compatible:gpt-5)")
        if image_format not in ("png", "jpeg", "webp"):
            raise BonError(f"{self.name}: image_format must be png, jpeg or webp, got {image_format!r}")
        if extra_body is not None and not isinstance(extra_body, dict):
            raise BonError(f"{self.name}: extra_body must be a mapping")
        if official and not official_prompts:
            raise BonError(f"{self.name}: official conditions need official_prompts: PATH (a checkout of facebookresearch/MMRB2)")
        if max_image_side == "auto":
            max_image_side = None if official else 1024
        self.max_image_side = int(max_image_side) if max_image_side else None
        self.image_format = image_format
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = int(max_tokens) if max_tokens else None
        self.reasoning_effort = reasoning_effort
        self.seed = seed
        self.extra_body = dict(extra_body or {})
        self.keep_answer = bool(keep_answer)
        self.batch, self.batch_poll, self.batch_window = bool(batch), float(batch_poll), str(batch_window)
        self.batch_price_factor = float(batch_price_factor)
        self.load_rubric()
        self._images: OrderedDict[tuple, str] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.endpoint = OpenAIEndpoint(str(model), self.name, base_url, api_key_env, timeout=timeout,
                                       max_retries=max_retries, concurrency=concurrency, preflight=preflight,
                                       preflight_timeout=preflight_timeout, price_input=price_input,
                                       price_output=price_output, reasoning_model=reasoning_model,
                                       max_tokens_param=max_tokens_param, retry_for=retry_for)
        self.model, self.api_key_env = self.endpoint.model, self.endpoint.api_key_env
        self.totals = self.endpoint.totals
        # stored every few rounds of requests in flight (a kill loses at most that many paid answers);
        # a Batch API job's answers arrive together, so one job per referee batch
        self.store_every = None if self.batch else 4 * self.endpoint.concurrency
        # unless told temperature 0, a provider samples: an unparseable answer may parse when asked again
        self.samples_answers = temperature is None or float(temperature) > 0

    def close(self) -> None:
        self.endpoint.close()

    # --- identity ------------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        sampling = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                    "reasoning_effort": self.reasoning_effort, "seed": self.seed}
        return {
            "model": self.model,
            "base_url": safe_url(self.endpoint.base_url),
            "sampling": {k: v for k, v in sampling.items() if v is not None},
            "extra_body": self.extra_body,
            "max_image_side": self.max_image_side,
            "image_format": self.image_format,
            **self.shared_identity(),
        }

    # --- requests ------------------------------------------------------------------------------
    def messages(self, c: Comparison) -> list[dict[str, Any]]:
        """The chat request for one comparison: one user turn of interleaved text and images."""
        return [{"role": "user", "content": api_parts(self.template(c).segments(c), self._data_url)}]

    def _data_url(self, item: ImageItem) -> str:
        key = (item.digest, self.max_image_side, self.image_format)
        with self._cache_lock:  # requests are built on the client's threads
            if key in self._images:
                self._images.move_to_end(key)
                return self._images[key]
        url = image_data_url(item.load(), self.max_image_side, self.image_format)
        with self._cache_lock:
            self._images[key] = url
            while len(self._images) > 256:
                self._images.popitem(last=False)
        return url

    def request(self, c: Comparison) -> dict[str, Any]:
        if self.official:
            from judges.prompts.official import api_request

            return api_request(self.model, self.template(c), c, self.max_image_side)
        seed = int(self.seed) + c.sample if self.seed is not None else None
        body = self.endpoint.chat_body(self.messages(c), self.max_tokens, temperature=self.temperature, top_p=self.top_p,
                                       reasoning_effort=self.reasoning_effort, seed=seed)
        body.update(self.extra_body)  # provider-specific fields travel in the JSON body itself
        return body

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        if not comparisons:
            return []
        if self.batch:  # how requests travel is not part of the identity: the same questions, the same store keys
            from judges.openai_batch import judge_in_batch

            return judge_in_batch(self, comparisons)
        # images are encoded inside the concurrency bound, so requests start while others encode
        replies = self.endpoint.post_all("/chat/completions", [lambda c=c: self.request(c) for c in comparisons])
        return [self._verdict(r) for r in replies]

    def _verdict(self, reply: Reply | ApiFailure) -> Verdict:
        if isinstance(reply, ApiFailure):
            return Verdict.failed(reply.reason, transient=reply.transient, attempts=reply.attempts)
        meta = reply_meta(reply)
        try:
            text = chat_text(reply)
        except ApiFailure as exc:
            return Verdict.failed(exc.reason, **meta)
        verdict = self.read_answer(text)
        if self.keep_answer:
            meta["answer"] = redact(text, self.endpoint.key())
        verdict.meta = {**meta, **verdict.meta}
        return verdict

