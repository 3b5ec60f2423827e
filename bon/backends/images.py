"""Images on their way to a model: opening them safely, downscaling, inline data URLs, and a chat
turn's content parts."""

from __future__ import annotations

import base64
import io
import math
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from bon.errors import BonError, first_line

if TYPE_CHECKING:
    from PIL import Image

MAX_PIXELS_ENV = "BON_MAX_IMAGE_PIXELS"
DEFAULT_MAX_PIXELS = 50_000_000  # 50 megapixels: ~150 MB decoded as RGB; MMRB2's largest images are far smaller


def max_image_pixels() -> int:
    """The most pixels (width x height) bon decodes from one image file: ``BON_MAX_IMAGE_PIXELS``, else
    50 million. A file claiming more is refused before its pixels are decoded (a PNG header alone can
    claim 20000 x 20000, which would take gigabytes of memory)."""
    raw = os.environ.get(MAX_PIXELS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_PIXELS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise BonError(f"{MAX_PIXELS_ENV}: expected a positive whole number of pixels, got {raw!r:.40}")
    return value


def open_image(source: Path | bytes, where: str) -> Image.Image:
    """An image file (or its bytes) fully decoded, or a one-line BonError naming ``where``: not found,
    not an image, truncated, or over :func:`max_image_pixels` (checked from the header, before decoding)."""
    return _opened(source, where, decode=True)


def check_image_header(path: Path, where: str) -> None:
    """What :func:`open_image` checks before it decodes (found, an image, within the pixel limit), from the
    file's header alone: for a reader that shows an image without decoding it (``bon view``'s page)."""
    _opened(path, where, decode=False).close()


def _opened(source: Path | bytes, where: str, decode: bool) -> Image.Image:
    from PIL import Image

    limit = max_image_pixels()
    if Image.MAX_IMAGE_PIXELS and limit > Image.MAX_IMAGE_PIXELS:
        Image.MAX_IMAGE_PIXELS = limit  # a limit raised on purpose lifts PIL's own bomb check with it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our limit speaks instead, in one line
            image = Image.open(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source)
            check_pixels(image.width, image.height, where, limit)
            if decode:
                image.load()
    except BonError:
        raise
    except FileNotFoundError:
        raise BonError(f"{where}: image file not found") from None
    except Image.DecompressionBombError as exc:  # PIL's own check, at twice its limit, came first
        claimed = re.search(r"\((\d+) pixels\)", str(exc))
        size = f"{claimed.group(1)} pixels" if claimed else "too many pixels"
        raise BonError(f"{where}: image of {size} exceeds the limit of {limit} pixels; {_raise_hint(limit)}") from None
    except Image.UnidentifiedImageError:
        raise BonError(f"{where}: unreadable image (not an image: no known image format)") from None
    except Exception as exc:  # noqa: BLE001 - any decoder failure on untrusted bytes is the file's fault
        raise BonError(f"{where}: unreadable image ({type(exc).__name__}: {first_line(exc, 120)})") from None
    return image


def check_pixels(width: int, height: int, where: str, limit: int | None = None) -> None:
    """The pixel-limit error for an image of this size, if it is over :func:`max_image_pixels`."""
    limit = limit or max_image_pixels()
    if width * height > limit:
        raise BonError(f"{where}: image of {width}x{height} pixels exceeds the limit of {limit} pixels; {_raise_hint(limit)}")


def _raise_hint(limit: int) -> str:
    return f"set {MAX_PIXELS_ENV} above {limit} to allow it"


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
