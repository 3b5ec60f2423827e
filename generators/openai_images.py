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
- ``retries`` (4), ``timeout`` (120 s), ``backoff`` (1 s), ``max_backoff`` (60 s), ``max_retry_after``
  (300 s): see :mod:`bon.http` (429/5xx/timeouts retried, ``Retry-After`` honoured)

One request per candidate (``n=1``), so one failure costs one candidate. A candidate whose request
failed after its retries, or whose answer holds no decodable image, is returned with empty content and
``provenance["missing"]`` = the reason; the run goes on.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any, Sequence
from urllib.parse import urlparse

from PIL import Image

from bon import http
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.plugins import Generator
from generators._common import library_versions, positive_int

MODES = ("auto", "generate", "edit")


class OpenAIImages(Generator):
    adapter = "openai-images"

    def __init__(self, model: str | None = None, name: str | None = None, base_url: str = "https://api.openai.com/v1",
                 api_key_env: str | None = "OPENAI_API_KEY", mode: str = "auto", size: str | None = None,
                 quality: str | None = None, response_format: str | None = None, background: str | None = None,
                 output_format: str | None = None, extra: dict[str, Any] | None = None, send_seed: bool = False,
                 image_field: str = "image", max_concurrency: int = 4, retries: int = 4, timeout: float = 120.0,
                 backoff: float = 1.0, max_backoff: float = 60.0, max_retry_after: float = 300.0) -> None:
        if not model:
            raise BonError(f"{self.adapter}: option 'model' is required (e.g. gpt-image-1)")
        if mode not in MODES:
            raise BonError(f"{self.adapter}: mode must be one of {', '.join(MODES)}, got {mode!r}")
        parsed = urlparse(str(base_url))
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BonError(f"{self.adapter}: base_url {base_url!r} is not an http(s) URL")
        if api_key_env is not None and (not isinstance(api_key_env, str) or api_key_env.startswith(("sk-", "Bearer"))):
            raise BonError(f"{self.adapter}: api_key_env is the NAME of an environment variable holding the key, not the key")
        if api_key_env and parsed.netloc.endswith("api.openai.com") and not http.bearer(api_key_env):
            raise BonError(f"{self.adapter}: environment variable {api_key_env} (api_key_env) is not set")
        if extra is not None and not isinstance(extra, dict):
            raise BonError(f"{self.adapter}: extra must be a mapping of request fields")
        self.name = name or self.adapter
        self.model, self.base_url, self.api_key_env, self.mode = str(model), str(base_url).rstrip("/"), api_key_env, mode
        self.fields = {k: v for k, v in {"size": size, "quality": quality, "response_format": response_format,
                                         "background": background, "output_format": output_format,
                                         **(extra or {})}.items() if v is not None}
        self.send_seed, self.image_field = bool(send_seed), image_field
        self.max_concurrency = positive_int(max_concurrency, f"{self.adapter}: max_concurrency", allow_none=False)
        self.policy = http.RetryPolicy.from_options(self.adapter, retries, timeout, backoff, max_backoff, max_retry_after)

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "adapter": self.adapter, "model": self.model, "base_url": self.base_url,
                "mode": self.mode, "fields": self.fields, "send_seed": self.send_seed}

    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        images = prompt.content.images
        mode = self.mode if self.mode != "auto" else ("edit" if images else "generate")
        if mode == "edit" and not images:
            raise BonError(f"prompt {prompt.id}: {self.adapter} in edit mode needs an input image in the prompt content")
        upload = png_bytes(images[0].load()) if mode == "edit" else None
        text = prompt.content.text
        results = http.bounded_map(lambda s: self.one(text, mode, int(s), upload), list(seeds), self.max_concurrency)
        base = {"adapter": self.adapter, "model": self.model, "base_url": self.base_url, "mode": mode,
                "settings": dict(self.fields), "seed_sent": self.send_seed, "versions": library_versions(("bon",))}
        out = []
        for k, (seed, (image, info)) in enumerate(zip(seeds, results)):
            content = Content.of(image) if image is not None else Content([])
            out.append(Candidate(prompt.id, k, self.name, int(seed), content, {**base, "seed": int(seed), **info}))
        return out

    def one(self, text: str, mode: str, seed: int, upload: bytes | None) -> tuple[Image.Image | None, dict[str, Any]]:
        """One request; never raises for a failed call: returns (None, {"missing": reason, ...})."""
        headers = http.bearer(self.api_key_env)
        fields: dict[str, Any] = {"model": self.model, "prompt": text, "n": 1, **self.fields}
        if self.send_seed:
            fields["seed"] = seed
        try:
            if mode == "edit":
                body, ctype = http.multipart({k: str(v) if not isinstance(v, str) else v for k, v in fields.items()},
                                             [(self.image_field, "input.png", upload or b"", "image/png")])
                resp = http.request("POST", http.join_url(self.base_url, "images/edits"), body=body,
                                    headers={"Content-Type": ctype, "Accept": "application/json", **headers}, policy=self.policy)
            else:
                resp = http.request("POST", http.join_url(self.base_url, "images/generations"),
                                    body=json.dumps(fields).encode("utf-8"),
                                    headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
                                    policy=self.policy)
            image, info = self.decode(http.decode_json(resp))
            info["attempts"] = resp.attempts
            return image, info
        except http.HttpFailure as exc:
            return None, {"missing": exc.reason, "attempts": exc.attempts, **({"status": exc.status} if exc.status else {})}

    def decode(self, data: Any) -> tuple[Image.Image, dict[str, Any]]:
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or not items or not isinstance(items[0], dict):
            raise http.HttpFailure("malformed response: no data[0] image")
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
                raise http.HttpFailure("malformed response: b64_json is not base64") from None
        elif isinstance(entry.get("url"), str):
            raw = http.get_bytes(entry["url"], policy=self.policy)
            info["url_fetched"] = True
        else:
            raise http.HttpFailure("malformed response: data[0] has neither b64_json nor url")
        try:
            with Image.open(io.BytesIO(raw)) as im:
                return im.convert("RGB"), info
        except OSError:
            raise http.HttpFailure("malformed response: the image does not decode") from None


def png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
