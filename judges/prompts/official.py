"""MMRB2's official evaluation conditions, for judges run with ``official_prompts`` (``bon mmrb2 judge
--official-prompts PATH``, or a study's ``official: true``).

What the official evaluators do (facts read from ``evaluate/generate_judgements/evaluator_apis/`` of
facebookresearch/MMRB2; its prompt text is read from the user's checkout, never shipped):

- the judge's input is one user turn whose content has one part per segment, in this order: the task's
  rubric, the marker before the prompt, the prompt's own items, the marker before response A, its
  items, the marker before response B, its items; adjacent texts are NOT merged;
- the API evaluator sends each image as its original file bytes, base64 in a data URL whose MIME type
  follows the file's extension (``image/jpeg`` for an extension it does not know), and no sampling
  parameters (only ``n: 1``);
- the local evaluator (Qwen3-VL through the transformers pipeline) gets the opened original images and
  samples with temperature 1.0 and up to 2,000 new tokens;
- the answer is the JSON object with ``better_response`` (the verdict) and ``score`` (kept as metadata).

bon changes none of that unless the user asks: images are downscaled only when the judge's
``max_image_side`` / ``max_image_pixels`` is set explicitly (then re-encoded as PNG, lossless).
"""

from __future__ import annotations

import base64
import io
import json
import re
from typing import TYPE_CHECKING, Any, Callable

from PIL import Image

from bon.content import ImageItem
from bon.protocol import Comparison, Verdict
from judges.prompts.parse import parse_answer

if TYPE_CHECKING:  # the rubric type only; judges.prompts imports this module for the official answers
    from judges.prompts import Template

# The official client's extension -> MIME table; anything else is sent as JPEG, as it does.
MIME = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif", ".webp": "image/webp"}
DEFAULT_MIME = "image/jpeg"
LOCAL_SAMPLING = {"do_sample": True, "temperature": 1.0, "max_new_tokens": 2000}
API_FIELDS = {"n": 1}  # the official API client asks for one choice and sets nothing else
_FENCE_OPEN = re.compile(r"^```(?:json)?\s*\n?")
_FENCE_CLOSE = re.compile(r"\n?```\s*$")


def api_content(template: Template, c: Comparison, max_image_side: int | None = None) -> list[dict[str, Any]]:
    """OpenAI chat content parts, one per segment, each image its original bytes and MIME type."""
    return [{"type": "text", "text": v} if k == "text" else {"type": "image_url", "image_url": {"url": data_url(v, max_image_side)}}
            for k, v in template.segments(c)]


def api_request(model: str, template: Template, c: Comparison, max_image_side: int | None = None) -> dict[str, Any]:
    """The whole request body the official API evaluator sends: no sampling parameters."""
    return {"model": model, "messages": [{"role": "user", "content": api_content(template, c, max_image_side)}], **API_FIELDS}


def local_turn(template: Template, c: Comparison, fit: Callable[[Image.Image], Image.Image] | None = None
               ) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    """Chat-template content parts for a local processor (one per segment) and the images in order:
    the original pixels, passed through ``fit`` only when the user set a size limit."""
    parts: list[dict[str, Any]] = []
    images: list[Image.Image] = []
    for kind, value in template.segments(c):
        if kind == "text":
            parts.append({"type": "text", "text": value})
        else:
            image = value.load()
            images.append(fit(image) if fit else image)
            parts.append({"type": "image"})
    return parts, images


def data_url(item: ImageItem, max_side: int | None = None) -> str:
    """``data:<mime>;base64,...`` of the image file as it is on disk; PNG when it must be re-encoded
    (no file behind it, or larger than ``max_side`` asked for)."""
    if item.path is not None and (max_side is None or max(item.load().size) <= max_side):
        mime = MIME.get(item.path.suffix.lower(), DEFAULT_MIME)
        return f"data:{mime};base64,{base64.b64encode(item.path.read_bytes()).decode('ascii')}"
    image = item.load()
    if max_side is not None and max(image.size) > max_side:
        image = image.copy()
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return f"data:image/png;base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def verdict(text: str) -> Verdict:
    """The official answer: ``better_response`` is the verdict; the JSON object (with ``score``) goes
    into metadata. An answer without ``better_response`` is missing, never guessed from a score."""

    found = parse_answer(text or "")
    if found.better is not None and found.meta.get("parsed_by") not in ("json", "key"):
        return Verdict.failed(f"unparseable: no better_response in the answer ({found.meta.get('parsed_by')})")
    official = _json_object(text or "")
    found.meta = {**found.meta, "official": official} if official is not None else found.meta
    if found.score is not None:
        found.meta["score"] = found.score
    found.score = None  # the official scorer reads the letter only
    return found


def _json_object(text: str) -> dict[str, Any] | None:
    body = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", text.strip()).strip())
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
