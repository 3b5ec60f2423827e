"""Chat back-ends for the generators that write text (the interleaved planner, vlm-answers): thin
adapters over the shared back-ends, so both generators sample N answers in one call.

``chat_many(messages, seeds, temperature=..., top_p=..., max_new_tokens=...)`` answers one
conversation once per seed, each answer a string or an :class:`~bon.backends.openai_api.ApiFailure`.
``messages`` are ``{"role": ..., "content": [{"type": "text", "text": ...} | {"type": "image", "image":
PIL.Image}]}``. Three back-ends, chosen by ``backend`` in a spec mapping:

- ``transformers`` (text) and ``transformers-vlm``: a local model through
  :class:`bon.backends.chat_vlm.ChatVlm` (a text LM sees ``[image i]`` placeholders). The N answers go
  through the model ``batch_size`` at a time (halved on out-of-memory); each batch is seeded from its
  seeds right before sampling, so the same seeds and batch size give the same texts.
- ``openai``: an OpenAI-compatible ``/chat/completions`` endpoint through
  :class:`bon.backends.openai_api.OpenAIEndpoint` (images as PNG data URLs; GPT-5 / o-series get
  ``max_completion_tokens`` and no sampling parameters), ``max_concurrency`` requests at once.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol, Sequence

from bon.content import Content, ImageItem, TextItem
from bon.errors import BonError, first_line
from generators._common import number, positive_int

BACKENDS = ("transformers", "transformers-vlm", "openai")


class Chat(Protocol):
    def describe(self) -> dict[str, Any]: ...

    def chat_many(self, messages: list[dict[str, Any]], seeds: Sequence[int], *, temperature: float,
                  top_p: float | None, max_new_tokens: int) -> list[Any]: ...

    def close(self) -> None: ...


def make_chat(spec: Any, where: str, default_backend: str = "transformers") -> Chat:
    """A back-end from a spec mapping (``backend``, ``model``, ...), or an object that already chats."""
    if hasattr(spec, "chat_many") and callable(spec.chat_many):
        return spec
    if isinstance(spec, str):
        spec = {"model": spec}
    if not isinstance(spec, dict):
        raise BonError(f"{where}: expected a mapping with backend and model, got {spec!r:.80}")
    spec = dict(spec)
    backend = spec.pop("backend", default_backend)
    if backend not in BACKENDS:
        raise BonError(f"{where}: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    try:
        if backend == "openai":
            return ApiChat(where=where, **spec)
        return LocalChat(where=where, vision=backend == "transformers-vlm", **spec)
    except TypeError as exc:
        raise BonError(f"{where}: bad {backend} options ({first_line(exc)})") from None


def sampling(where: str, temperature: Any, top_p: Any, max_new_tokens: Any) -> dict[str, Any]:
    """The sampling settings of a text-writing generator, checked: :meth:`Chat.chat_many`'s keywords."""
    return {"temperature": number(temperature, f"{where}: temperature", allow_none=False),
            "top_p": number(top_p, f"{where}: top_p"),
            "max_new_tokens": positive_int(max_new_tokens, f"{where}: max_new_tokens", allow_none=False)}


def content_parts(content: Content) -> list[dict[str, Any]]:
    """A prompt's items as chat content parts, in order: ``{"type": "text", "text": ...}`` and
    ``{"type": "image", "image": PIL.Image}``."""
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, TextItem):
            parts.append({"type": "text", "text": item.text})
        elif isinstance(item, ImageItem):
            parts.append({"type": "image", "image": item.load()})
    return parts


def _items(content: Any) -> list[tuple[str, Any]]:
    if isinstance(content, str):
        return [("text", content)]
    return [("image", c["image"]) if c["type"] == "image" else ("text", c["text"]) for c in content]


class LocalChat:
    """A local transformers chat model (text-only causal LM, or image-text-to-text when ``vision``);
    nothing is read from the model folder or the Hub before the first answer."""

    def __init__(self, model: Any = None, where: str = "chat", vision: bool = False, revision: str | None = None,
                 dtype: str = "auto", device: str = "auto", batch_size: int = 8) -> None:
        from bon.backends.chat_vlm import model_location
        from bon.backends.device import HalvingBatches

        model_location(model, where)
        positive_int(batch_size, f"{where}: batch_size", allow_none=False)
        self.where, self.vision, self.model_arg = where, vision, str(model)
        self.settings = {"revision": revision, "dtype": dtype, "device": device}
        self.batches = HalvingBatches(batch_size, where, str(model))
        self._backend: Any = None

    @property
    def backend(self) -> Any:
        if self._backend is None:
            from bon.backends.chat_vlm import ChatVlm

            self._backend = ChatVlm(self.model_arg, self.where, vision=self.vision, **self.settings)
        return self._backend

    def describe(self) -> dict[str, Any]:
        base = {"backend": "transformers-vlm" if self.vision else "transformers", "model": self.model_arg}
        if self._backend is None:
            return {**base, "revision": self.settings["revision"]}
        return {**base, **self._backend.identity(), "model": self.model_arg, **self._backend.loaded_info}

    def held_modules(self) -> list[Any]:
        return self._backend.held_modules() if self._backend is not None else []

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()

    def chat_many(self, messages: list[dict[str, Any]], seeds: Sequence[int], *, temperature: float,
                  top_p: float | None, max_new_tokens: int) -> list[Any]:
        system = "\n".join(t for m in messages if m["role"] == "system" for k, t in _items(m["content"]) if k == "text")
        parts = [p for m in messages if m["role"] != "system" for p in _items(m["content"])]
        rendered = self.backend.render(parts, system=system or None)
        sample = temperature is not None and temperature > 0
        settings: dict[str, Any] = {"max_new_tokens": int(max_new_tokens), "do_sample": sample}
        if sample:
            settings["temperature"] = float(temperature)
            if top_p is not None:
                settings["top_p"] = float(top_p)

        def batch(chunk: Sequence[int]) -> list[str]:
            inputs = self.backend.encode([rendered] * len(chunk))
            return self.backend.generate(inputs, seed=batch_seed(chunk), **settings)

        return self.batches.run([int(s) for s in seeds], batch)


def batch_seed(seeds: Sequence[int]) -> int:
    """One torch seed for a batch of candidates: the seed itself for one, a hash of all of them otherwise."""
    if len(seeds) == 1:
        return int(seeds[0])
    return int(hashlib.sha256(",".join(map(str, seeds)).encode()).hexdigest()[:8], 16)


class ApiChat:
    """An OpenAI-compatible chat completions endpoint."""

    def __init__(self, model: Any = None, where: str = "chat", base_url: str = "https://api.openai.com/v1",
                 api_key_env: str | None = "OPENAI_API_KEY", send_seed: bool = True, extra: dict[str, Any] | None = None,
                 retries: int = 4, timeout: float = 120.0, max_concurrency: int = 4, reasoning_model: bool | None = None,
                 max_tokens_param: str = "max_completion_tokens") -> None:
        from bon.backends.openai_api import OpenAIEndpoint

        self.endpoint = OpenAIEndpoint(model, where, base_url, api_key_env, timeout=timeout, max_retries=retries,
                                       concurrency=max_concurrency, reasoning_model=reasoning_model,
                                       max_tokens_param=max_tokens_param)
        self.send_seed, self.extra = bool(send_seed), dict(extra or {})

    def describe(self) -> dict[str, Any]:
        return {"backend": "openai", "model": self.endpoint.model, "base_url": self.endpoint.shown_url, "extra": self.extra}

    def close(self) -> None:
        self.endpoint.close()

    def chat_many(self, messages: list[dict[str, Any]], seeds: Sequence[int], *, temperature: float,
                  top_p: float | None, max_new_tokens: int) -> list[Any]:
        from bon.backends.images import api_parts, image_data_url
        from bon.backends.openai_api import ApiFailure, chat_text

        api = [{"role": m["role"], "content": api_parts(_items(m["content"]), image_data_url)} for m in messages]

        def body(seed: int) -> dict[str, Any]:
            return {**self.endpoint.chat_body(api, max_new_tokens, temperature=temperature, top_p=top_p,
                                              seed=int(seed) if self.send_seed else None), **self.extra}

        out: list[Any] = []
        for reply in self.endpoint.post_all("/chat/completions", [lambda s=s: body(s) for s in seeds]):
            try:
                out.append(reply if isinstance(reply, ApiFailure) else chat_text(reply))
            except ApiFailure as exc:
                out.append(exc)
        return out
