"""``openai-images``: image generation and editing through an OpenAI-compatible images endpoint.

Options:

- ``model`` (required, e.g. gpt-image-1), ``base_url`` (default https://api.openai.com/v1)
- ``api_key_env``: the *name* of the environment variable holding the key (default OPENAI_API_KEY).
  The key is read when a request is sent and never stored in options, identity, provenance or logs;
  a server that echoes it back in an error message has it masked.
- ``mode``: auto (edit when the prompt has an input image, else generate) | generate | edit
- ``size``, ``quality``, ``response_format``, ``background``, ``output_format``: sent when set
- ``extra``: a mapping of further request fields (e.g. ``{moderation: low}``)
- ``send_seed``: also send each candidate's seed as ``seed`` (for servers that accept one; OpenAI's
  own endpoint does not, so candidates there are not reproducible from the seed)
- ``image_field``: the multipart field of the input image for edits (default ``image``)
- ``max_concurrency`` (default 4): requests in flight for one prompt's N candidates
- ``retries`` (4), ``timeout`` (120 s): the ``openai`` SDK's retries through the shared client
  (:mod:`bon.backends.openai_api`: 429/5xx/timeouts retried, ``Retry-After`` honoured)

One request per candidate (``n=1``), so one failure costs one candidate. A candidate whose request
failed after its retries, or whose answer holds no decodable image, is returned with empty content and
``provenance["missing"]`` = the reason (and ``transient: true`` when a rerun should ask again); the run
goes on.
"""

from __future__ import annotations

import base64
import io
from typing import Any, Sequence

from PIL import Image

from bon.backends.images import image_bytes
from bon.backends.openai_api import ApiFailure, OpenAIEndpoint, Reply
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.plugins import Generator
from bon.provenance import library_versions
from generators._common import positive_int

MODES = ("auto", "generate", "edit")


class OpenAIImages(Generator):
    adapter = "openai-images"
    requires = ("openai",)

    def __init__(self, model: str | None = None, name: str | None = None, base_url: str = "https://api.openai.com/v1",
                 api_key_env: str | None = "OPENAI_API_KEY", mode: str = "auto", size: str | None = None,
                 quality: str | None = None, response_format: str | None = None, background: str | None = None,
                 output_format: str | None = None, extra: dict[str, Any] | None = None, send_seed: bool = False,
                 image_field: str = "image", max_concurrency: int = 4, retries: int = 4, timeout: float = 120.0) -> None:
        if not model:
            raise BonError(f"{self.adapter}: option 'model' is required (e.g. gpt-image-1)")
        if mode not in MODES:
            raise BonError(f"{self.adapter}: mode must be one of {', '.join(MODES)}, got {mode!r}")
        if extra is not None and not isinstance(extra, dict):
            raise BonError(f"{self.adapter}: extra must be a mapping of request fields")
        self.max_concurrency = positive_int(max_concurrency, f"{self.adapter}: max_concurrency", allow_none=False)
        self.endpoint = OpenAIEndpoint(str(model), self.adapter, base_url, api_key_env, timeout=timeout, max_retries=retries,
                                       concurrency=self.max_concurrency)
        self.name = name or self.adapter
        self.model, self.base_url, self.api_key_env, self.mode = str(model), self.endpoint.base_url, api_key_env, mode
        self.fields = {k: v for k, v in {"size": size, "quality": quality, "response_format": response_format,
                                         "background": background, "output_format": output_format,
                                         **(extra or {})}.items() if v is not None}
        self.send_seed, self.image_field = bool(send_seed), image_field

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "adapter": self.adapter, "model": self.model, "base_url": self.base_url,
                "mode": self.mode, "fields": self.fields, "send_seed": self.send_seed}

    def close(self) -> None:
        self.endpoint.close()

    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        images = prompt.content.images
        mode = self.mode if self.mode != "auto" else ("edit" if images else "generate")
        if mode == "edit" and not images:
            raise BonError(f"prompt {prompt.id}: {self.adapter} in edit mode needs an input image in the prompt content")
        fields = [{"model": self.model, "prompt": prompt.content.text, "n": 1, **self.fields,
                   **({"seed": int(s)} if self.send_seed else {})} for s in seeds]
        if mode == "edit":
            upload = [(self.image_field, ("input.png", image_bytes(images[0].load()), "image/png"))]
            replies = self.endpoint.post_all("/images/edits", [{k: str(v) for k, v in f.items()} for f in fields], upload)
        else:
            replies = self.endpoint.post_all("/images/generations", fields)
        base = {"adapter": self.adapter, "model": self.model, "base_url": self.base_url, "mode": mode,
                "settings": dict(self.fields), "seed_sent": self.send_seed, "versions": library_versions(("bon",))}
        out = []
        for k, (seed, reply) in enumerate(zip(seeds, replies)):
            image, info = self.decode(reply)
            content = Content.of(image) if image is not None else Content([])
            out.append(Candidate(prompt.id, k, self.name, int(seed), content, {**base, "seed": int(seed), **info}))
        return out

    def decode(self, reply: Reply | ApiFailure) -> tuple[Image.Image | None, dict[str, Any]]:
        """The image of one answer; never raises for a failed call: ``(None, {"missing": reason, ...})``."""
        try:
            if isinstance(reply, ApiFailure):
                raise reply
            image, info = self.image_of(reply.data)
            return image, {**info, "attempts": reply.attempts}
        except ApiFailure as exc:
            return None, exc.info()

    def image_of(self, data: Any) -> tuple[Image.Image, dict[str, Any]]:
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or not items or not isinstance(items[0], dict):
            raise ApiFailure("malformed response: no data[0] image", transient=False)
        entry = items[0]
        info: dict[str, Any] = {}
        if isinstance(entry.get("revised_prompt"), str):
            info["revised_prompt"] = entry["revised_prompt"]
        if isinstance(data.get("usage"), dict):
            info["usage"] = data["usage"]
        if isinstance(entry.get("b64_json"), str):
            try:
                raw = base64.b64decode(entry["b64_json"], validate=True)
            except ValueError:
                raise ApiFailure("malformed response: b64_json is not base64", transient=False) from None
        elif isinstance(entry.get("url"), str):
            raw = self.endpoint.fetch(entry["url"])
            info["url_fetched"] = True
        else:
            raise ApiFailure("malformed response: data[0] has neither b64_json nor url", transient=False)
        try:
            with Image.open(io.BytesIO(raw)) as im:
                return im.convert("RGB"), info
        except OSError:
            raise ApiFailure("malformed response: the image does not decode", transient=False) from None
