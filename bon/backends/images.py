"""Images on their way to a model: downscaling, inline data URLs, and a chat turn's content parts."""

from __future__ import annotations

import base64
import io
import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from bon.errors import BonError

if TYPE_CHECKING:
    from PIL import Image


def fit_pixels(image: Image.Image, max_pixels: int | None) -> Image.Image:
    """Downscale (never upscale) so width x height is at most ``max_pixels``."""
    if not max_pixels or image.width * image.height <= max_pixels:
        return image
    return _resize(image, math.sqrt(max_pixels / (image.width * image.height)), rounding=int)


def _resize(image: Image.Image, scale: float, rounding: Callable[[float], int] = round) -> Image.Image:
    from PIL import Image

    size = (max(1, rounding(image.width * scale)), max(1, rounding(image.height * scale)))
    return image.resize(size, Image.Resampling.BICUBIC)


def image_bytes(image: Image.Image, fmt: str = "png", quality: int = 90) -> bytes:
    """The image (RGB) encoded as PNG, JPEG or WebP."""
    fmt = fmt.lower()
    if fmt not in ("png", "jpeg", "webp"):
        raise BonError(f"image format must be png, jpeg or webp, got {fmt!r}")
    buf = io.BytesIO()
    if fmt == "png":
        image.convert("RGB").save(buf, format="PNG", optimize=False, compress_level=6)
    else:
        image.convert("RGB").save(buf, format=fmt.upper(), quality=quality)
    return buf.getvalue()


def image_data_url(image: Image.Image, max_side: int | None = None, fmt: str = "png", quality: int = 90) -> str:
    """``data:image/...;base64,...`` of the image, downscaled so its longer side is at most ``max_side``
    first: APIs take images inline."""
    if max_side and max(image.size) > max_side:
        image = _resize(image, max_side / max(image.size))
    data = image_bytes(image, fmt, quality)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(data).decode("ascii")


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


def api_parts(items: Iterable[Sequence[Any]], data_url: Callable[[Any], str]) -> list[dict[str, Any]]:
    """OpenAI chat ``content`` parts (:func:`chat_parts`), each image an ``image_url`` part whose URL is ``data_url(value)``."""
    return chat_parts(items, lambda image: {"type": "image_url", "image_url": {"url": data_url(image)}})
