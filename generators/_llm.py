"""Chat back-ends for the generators that write text (the interleaved planner, vlm-answers).

A back-end answers ``chat(messages, seed=..., temperature=..., top_p=..., max_new_tokens=...)`` with
one string. ``messages`` are ``{"role": ..., "content": [{"type": "text", "text": ...} |
{"type": "image", "image": PIL.Image}]}``. Three back-ends, chosen by ``backend`` in a spec mapping:

- ``transformers`` (text): ``AutoTokenizer`` + ``AutoModelForCausalLM``, the tokenizer's chat template
  (a plain ``role: text`` layout when it has none); images are replaced by ``[image i]`` placeholders.
- ``transformers-vlm``: ``AutoProcessor`` + ``AutoModelForImageTextToText`` (LLaVA, Qwen-VL, Gemma 3,
  ...), the processor's chat template with image placeholders, then the processor on text + images.
- ``openai``: an OpenAI-compatible ``/chat/completions`` endpoint (images as PNG data URLs), through
  :mod:`bon.http` (retries, Retry-After, key read from the environment variable named by
  ``api_key_env``). A failed call raises :class:`bon.http.HttpFailure`.

Local sampling is seeded per call (``torch.manual_seed(seed)`` right before ``generate``), so a seed
gives the same text on the same machine and library versions. Models load on the first call, never
with ``trust_remote_code``.
"""

from __future__ import annotations

from typing import Any, Protocol

from bon import http
from bon.content import Content, ImageItem, TextItem
from bon.errors import BonError
from generators._common import (dtype_name, library_versions, model_location, one_line, quiet_loading, resolve_device,
                                resolve_dtype, revision_of_folder, snapshot_revision)

BACKENDS = ("transformers", "transformers-vlm", "openai")


class Chat(Protocol):
    def describe(self) -> dict[str, Any]: ...

    def chat(self, messages: list[dict[str, Any]], *, seed: int, temperature: float, top_p: float | None,
             max_new_tokens: int) -> str: ...


def make_chat(spec: Any, where: str, default_backend: str = "transformers") -> Chat:
    """A back-end from a spec mapping (``backend``, ``model``, ...), or an object that already chats."""
    if hasattr(spec, "chat") and callable(spec.chat):
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
        raise BonError(f"{where}: bad {backend} options ({one_line(exc)})") from None


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


def text_of(messages: list[dict[str, Any]], placeholder: bool = True) -> list[dict[str, str]]:
    """Messages with string content: images become ``[image i]`` placeholders."""
    out, n = [], 0
    for m in messages:
        parts = []
        for c in m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]:
            if c["type"] == "image":
                n += 1
                if placeholder:
                    parts.append(f"[image {n}]")
            else:
                parts.append(c["text"])
        out.append({"role": m["role"], "content": "\n".join(parts)})
    return out


class LocalChat:
    """A local transformers chat model (text-only causal LM, or image-text-to-text when ``vision``)."""

    def __init__(self, model: Any = None, where: str = "chat", vision: bool = False, revision: str | None = None,
                 dtype: str = "auto", device: str = "auto") -> None:
        self.where, self.vision = where, vision
        self.location, self.model = model_location(model, where)
        self.model_arg, self.revision, self.dtype_arg, self.device_arg = str(model), revision, dtype, device
        self._model: Any = None
        self._proc: Any = None
        self._info: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        base = {"backend": "transformers-vlm" if self.vision else "transformers", "model": self.model_arg}
        return {**base, **self._info} if self._info else {**base, "revision": self.revision}

    def load(self) -> None:
        if self._model is not None:
            return
        import transformers

        device = resolve_device(self.device_arg)
        dtype = resolve_dtype(self.dtype_arg, device)
        kw: dict[str, Any] = {"trust_remote_code": False}
        if self.revision:
            kw["revision"] = self.revision
        try:
            with quiet_loading():
                if self.vision:
                    proc = transformers.AutoProcessor.from_pretrained(self.model, **kw)
                    model = transformers.AutoModelForImageTextToText.from_pretrained(self.model, dtype=dtype, **kw)
                else:
                    proc = transformers.AutoTokenizer.from_pretrained(self.model, **kw)
                    model = transformers.AutoModelForCausalLM.from_pretrained(self.model, dtype=dtype, **kw)
        except Exception as exc:  # noqa: BLE001 - the user's model id or folder
            raise BonError(f"{self.where}: cannot load {self.model_arg!r} with transformers ({one_line(exc)})") from None
        model.to(device).eval()
        self._model, self._proc = model, proc
        rev = revision_of_folder(self.model) if self.location == "local" else snapshot_revision(self.model, "config.json", self.revision)
        self._info = {"revision": rev, "dtype": dtype_name(dtype), "device": device, "class": type(model).__name__,
                      "versions": library_versions(("bon", "torch", "transformers", "tokenizers"))}

    @property
    def tokenizer(self) -> Any:
        return getattr(self._proc, "tokenizer", self._proc)

    def chat(self, messages: list[dict[str, Any]], *, seed: int, temperature: float, top_p: float | None,
             max_new_tokens: int) -> str:
        import torch

        self.load()
        tok = self.tokenizer
        if self.vision:
            images = [c["image"] for m in messages for c in (m["content"] if isinstance(m["content"], list) else [])
                      if c["type"] == "image"]
            chat = [{"role": m["role"], "content": [{"type": "image"} if c["type"] == "image" else c for c in m["content"]]}
                    for m in messages]
            text = self._proc.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
            inputs = self._proc(text=text, images=images or None, return_tensors="pt")
        else:
            plain = text_of(messages)
            if getattr(tok, "chat_template", None):
                text = tok.apply_chat_template(plain, add_generation_prompt=True, tokenize=False)
            else:
                text = "".join(f"{m['role']}: {m['content']}\n" for m in plain) + "assistant: "
            inputs = tok(text, return_tensors="pt", add_special_tokens=False)
        inputs = {k: (v.to(self._model.device) if hasattr(v, "to") else v) for k, v in dict(inputs).items()}
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self._model.dtype)
        sample = temperature is not None and temperature > 0
        gen: dict[str, Any] = {"max_new_tokens": int(max_new_tokens), "do_sample": sample}
        if sample:
            gen["temperature"] = float(temperature)
            if top_p is not None:
                gen["top_p"] = float(top_p)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        if pad is not None:
            gen["pad_token_id"] = pad
        torch.manual_seed(int(seed))
        with torch.inference_mode():
            out = self._model.generate(**inputs, **gen)
        new = out[0, inputs["input_ids"].shape[1]:]
        return tok.decode(new, skip_special_tokens=True)


class ApiChat:
    """An OpenAI-compatible chat completions endpoint."""

    def __init__(self, model: Any = None, where: str = "chat", base_url: str = "https://api.openai.com/v1",
                 api_key_env: str | None = "OPENAI_API_KEY", send_seed: bool = True, extra: dict[str, Any] | None = None,
                 retries: int = 4, timeout: float = 120.0, backoff: float = 1.0, max_backoff: float = 60.0,
                 max_retry_after: float = 300.0) -> None:
        if not model:
            raise BonError(f"{where}: option 'model' is required for the openai back-end")
        if api_key_env is not None and (not isinstance(api_key_env, str) or api_key_env.startswith(("sk-", "Bearer"))):
            raise BonError(f"{where}: api_key_env is the NAME of an environment variable holding the key, not the key")
        self.where, self.model, self.base_url, self.api_key_env = where, str(model), str(base_url).rstrip("/"), api_key_env
        self.send_seed, self.extra = bool(send_seed), dict(extra or {})
        self.policy = http.RetryPolicy.from_options(where, retries, timeout, backoff, max_backoff, max_retry_after)

    def describe(self) -> dict[str, Any]:
        return {"backend": "openai", "model": self.model, "base_url": self.base_url, "extra": self.extra}

    def chat(self, messages: list[dict[str, Any]], *, seed: int, temperature: float, top_p: float | None,
             max_new_tokens: int) -> str:
        payload: dict[str, Any] = {"model": self.model, "messages": [api_message(m) for m in messages],
                                   "temperature": temperature, "max_tokens": int(max_new_tokens), **self.extra}
        if top_p is not None:
            payload["top_p"] = top_p
        if self.send_seed:
            payload["seed"] = int(seed)
        data = http.post_json(http.join_url(self.base_url, "chat/completions"), payload,
                              http.bearer(self.api_key_env), self.policy)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise http.HttpFailure("malformed response: no choices[0].message.content") from None
        if isinstance(content, list):  # some servers answer with content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise http.HttpFailure("malformed response: message content is not text")
        return content


def api_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, str):
        return {"role": message["role"], "content": content}
    parts = []
    for c in content:
        if c["type"] == "image":
            parts.append({"type": "image_url", "image_url": {"url": http.image_data_url(c["image"])}})
        else:
            parts.append({"type": "text", "text": c["text"]})
    return {"role": message["role"], "content": parts}
