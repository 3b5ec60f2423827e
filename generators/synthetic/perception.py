"""Reading a synthetic scene back from pixels alone: objects, banner text and a damage estimate.

This is the only way the verifier and the scene judges learn what a response shows: quantise every
pixel to the nearest known colour, find connected blobs, name each blob's shape from its geometry,
read the banner with glyph templates. Lower ``resolution`` is a genuinely weaker eye: small and
adjacent things merge or vanish, text becomes mush. Results are cached per image digest, so each
image is parsed once per process however many judges look at it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

from bon.content import ImageItem
from generators.synthetic import scene as S

# Quantiser classes: 0 background, 1 banner white, 2 ink, 3 grey (antialiasing, strokes), then the palette.
CLASS_NAMES = ["background", "white", "ink", "grey"] + list(S.PALETTE)
CLASS_RGB = np.array([S.BACKGROUND, S.BANNER, S.INK, (128, 128, 128)] + list(S.PALETTE.values()), dtype=np.float32)
FIRST_COLOUR = 4
LUT_BITS = 6

MIN_AREA = 40  # px at full resolution; smaller blobs are specks
RESIDUAL_LIMIT = 34.0  # a pixel this far from every known colour is damaged
BANNER_MEDIAN = 245  # a banner row's per-channel median is near-white


@dataclass
class SeenObject:
    shape: str
    colour: str
    x: float  # bounding-box centre, in 128-px canvas units whatever the perception resolution
    y: float
    area: int  # pixels, canvas units

    def to_dict(self) -> dict:
        return {"shape": self.shape, "colour": self.colour, "x": round(self.x, 1), "y": round(self.y, 1), "area": self.area}


@dataclass
class SeenScene:
    objects: list[SeenObject]
    text: str | None
    artefact: float  # 0 clean .. 1 badly damaged (no-reference estimate)
    background: tuple[float, float, float] = field(default=S.BACKGROUND)  # mean colour of the bare canvas
    banner: bool = False

    def count(self, colour: str | None = None, shape: str | None = None) -> int:
        return len(self.find(colour, shape))

    def find(self, colour: str | None = None, shape: str | None = None) -> list[SeenObject]:
        return [o for o in self.objects if (colour is None or o.colour == colour) and (shape is None or o.shape == shape)]

    def kinds(self) -> list[tuple[str, str]]:
        """Sorted ``(colour, shape)`` multiset: what is there, ignoring where."""
        return sorted((o.colour, o.shape) for o in self.objects)

    def leftmost(self) -> SeenObject | None:
        return min(self.objects, key=lambda o: o.x, default=None)

    def rightmost(self) -> SeenObject | None:
        return max(self.objects, key=lambda o: o.x, default=None)

    def topmost(self) -> SeenObject | None:
        return min(self.objects, key=lambda o: o.y, default=None)

    def bottommost(self) -> SeenObject | None:
        return max(self.objects, key=lambda o: o.y, default=None)

    def to_dict(self) -> dict:
        return {"objects": [o.to_dict() for o in self.objects], "text": self.text, "artefact": round(self.artefact, 3)}


# --- quantiser --------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _lut() -> tuple[np.ndarray, np.ndarray]:
    """Nearest class and distance to it for every colour at LUT_BITS per channel (built once)."""
    levels = (np.arange(1 << LUT_BITS, dtype=np.float32) + 0.5) * (256 >> LUT_BITS)
    r, g, b = np.meshgrid(levels, levels, levels, indexing="ij")
    rgb = np.stack([r.ravel(), g.ravel(), b.ravel()], axis=1)
    d2 = ((rgb[:, None, :] - CLASS_RGB[None, :, :]) ** 2).sum(axis=2)
    cls = d2.argmin(axis=1)
    return cls.astype(np.uint8), np.sqrt(d2.min(axis=1)).astype(np.float32)


def quantise(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class map and residual (distance to nearest known colour) for an HxWx3 uint8 array."""
    cls, dist = _lut()
    shift = 8 - LUT_BITS
    q = arr >> shift
    idx = (q[..., 0].astype(np.int32) << (2 * LUT_BITS)) | (q[..., 1].astype(np.int32) << LUT_BITS) | q[..., 2]
    return cls[idx], dist[idx]


# --- entry points -----------------------------------------------------------------------------

_CACHE: "OrderedDict[tuple[str, int | None], SeenScene]" = OrderedDict()
_CACHE_MAX = 60000


def image_digest(image: Image.Image | ImageItem) -> str:
    if isinstance(image, ImageItem):
        return image.digest
    im = image.convert("RGB")
    h = hashlib.sha256(b"image\0")
    h.update(f"{im.mode}:{im.width}x{im.height}\0".encode())
    h.update(im.tobytes())
    return h.hexdigest()


def perceive(image: Image.Image | ImageItem, resolution: int | None = None) -> SeenScene:
    """Parse an image into objects, text and an artefact score; ``resolution`` (e.g. 32) looks at
    a downsampled copy first. Cached by pixel digest and resolution."""
    key = (image_digest(image), resolution)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    pil = image.load() if isinstance(image, ImageItem) else image.convert("RGB")
    seen = _perceive(pil, resolution)
    _CACHE[key] = seen
    if len(_CACHE) > _CACHE_MAX:
        _CACHE.popitem(last=False)
    return seen


def read_text(image: Image.Image | ImageItem, resolution: int | None = None) -> str | None:
    """The banner text read by glyph template matching, or None if there is no banner or no ink."""
    return perceive(image, resolution).text


def clear_cache() -> None:
    _CACHE.clear()


def _perceive(pil: Image.Image, resolution: int | None) -> SeenScene:
    if pil.size != (S.SIZE, S.SIZE):
        pil = pil.resize((S.SIZE, S.SIZE), Image.BILINEAR)
    if resolution and resolution < S.SIZE:
        small = pil.resize((resolution, resolution), Image.BOX)
        arr = np.asarray(small)
        text_arr = np.asarray(small.resize((S.SIZE, S.SIZE), Image.BILINEAR))
        scale = S.SIZE / resolution
    else:
        arr = text_arr = np.asarray(pil)
        scale = 1.0
    cls, resid = quantise(arr)
    banner = banner_rows(arr)
    region = np.ones(arr.shape[0], dtype=bool)
    if banner is not None:
        region[banner[0]:banner[1]] = False
    objects, kept = find_objects(cls, region, scale)
    text = read_banner(text_arr) if banner is not None else None
    art = artefact_score(cls, resid, region, kept)
    bg = background_colour(arr, cls, region)
    return SeenScene(objects, text, art, bg, banner is not None)


# --- objects ----------------------------------------------------------------------------------


def banner_rows(arr: np.ndarray) -> tuple[int, int] | None:
    """The longest run of near-white rows (per-channel row medians survive noise and text ink)."""
    med = np.median(arr, axis=1)
    white = (med >= BANNER_MEDIAN).all(axis=1)
    best, start = None, None
    for i, w in enumerate(np.append(white, False)):
        if w and start is None:
            start = i
        elif not w and start is not None:
            if best is None or i - start > best[1] - best[0]:
                best = (start, i)
            start = None
    min_rows = max(2, int(round(arr.shape[0] * 8 / S.SIZE)))
    return best if best is not None and best[1] - best[0] >= min_rows else None


def find_objects(cls: np.ndarray, region: np.ndarray, scale: float) -> tuple[list[SeenObject], np.ndarray]:
    """Connected blobs of each palette colour outside the banner; returns objects and the kept mask."""
    min_area = max(3.0, MIN_AREA / scale**2)
    kept = np.zeros(cls.shape, dtype=bool)
    out: list[SeenObject] = []
    counts = np.bincount(cls[region].ravel(), minlength=len(CLASS_NAMES))
    for k in range(FIRST_COLOUR, len(CLASS_NAMES)):
        if counts[k] < min_area:
            continue
        mask = (cls == k) & region[:, None]
        lab, n = ndimage.label(mask)
        areas = np.bincount(lab.ravel(), minlength=n + 1)
        for i, sl in enumerate(ndimage.find_objects(lab), start=1):
            if sl is None or areas[i] < min_area:
                continue
            blob = lab[sl] == i
            kept[sl] |= blob
            out.append(describe_blob(blob, sl, CLASS_NAMES[k], int(areas[i]), scale))
    out.sort(key=lambda o: (round(o.y / 8), o.x))
    return out, kept


def describe_blob(blob: np.ndarray, sl: tuple[slice, slice], colour: str, area: int, scale: float) -> SeenObject:
    h, w = blob.shape
    return SeenObject(
        shape=classify_shape(blob),
        colour=colour,
        x=(sl[1].start + w / 2) * scale,
        y=(sl[0].start + h / 2) * scale,
        area=int(round(area * scale * scale)),
    )


def classify_shape(blob: np.ndarray) -> str:
    """Square fills its box, a circle ~0.785 of it, an upright triangle ~0.5 with little in its top half.

    Row spans (first to last pixel of each row) stand in for area, so noise holes do not matter.
    """
    h, w = blob.shape
    rows = blob.any(axis=1)
    first = np.argmax(blob, axis=1)
    last = w - 1 - np.argmax(blob[:, ::-1], axis=1)
    span = np.where(rows, last - first + 1, 0).astype(np.float64)
    total = span.sum()
    if total <= 0:
        return "square"
    fill = total / (h * w)
    top = span[: h // 2].sum() + (span[h // 2] / 2 if h % 2 else 0.0)
    top_share = top / total
    if top_share < 0.37 and fill < 0.75:
        return "triangle"
    if fill > 0.885:
        return "square"
    if fill < 0.6:
        return "triangle"
    return "circle"


# --- damage estimate --------------------------------------------------------------------------


def artefact_score(cls: np.ndarray, resid: np.ndarray, region: np.ndarray, kept: np.ndarray) -> float:
    """Damage without a reference: off-palette pixels (noise, blur, blocks) and stray marks (strokes)."""
    reg = np.broadcast_to(region[:, None], cls.shape)
    n = max(1, int(reg.sum()))
    off = float(((resid > RESIDUAL_LIMIT) & reg).sum()) / n
    stray = float(((cls != 0) & ~kept & reg).sum()) / n
    return float(np.clip(2.5 * off + 12.0 * stray, 0.0, 1.0))


def background_colour(arr: np.ndarray, cls: np.ndarray, region: np.ndarray) -> tuple[float, float, float]:
    mask = (cls == 0) & region[:, None]
    if not mask.any():
        return tuple(float(v) for v in S.BACKGROUND)  # type: ignore[return-value]
    m = arr[mask].mean(axis=0)
    return (float(m[0]), float(m[1]), float(m[2]))


# --- text -------------------------------------------------------------------------------------

BAND = (S.BANNER_TOP + 2, S.BANNER_TOP + 21)  # rows holding glyph ink
PAD = 2  # search +-PAD px around each cell for the best template alignment
INK_COLUMN = 2.5  # summed darkness over the band that marks a column as inked


@lru_cache(maxsize=1)
def glyph_templates() -> tuple[str, np.ndarray]:
    """Darkness maps of every glyph drawn exactly as :func:`scene.render` draws it, one cell each."""
    chars = S.TEXT_CHARS.replace(" ", "")
    h = BAND[1] - BAND[0]
    out = np.zeros((len(chars), h, S.ADVANCE), dtype=np.float32)
    for i, ch in enumerate(chars):
        im = Image.new("L", (S.ADVANCE, S.SIZE), 255)
        ImageDraw.Draw(im).text((S.glyph_offset(ch), S.TEXT_Y), ch, font=S.font(), fill=0)
        out[i] = 1.0 - np.asarray(im, dtype=np.float32)[BAND[0]:BAND[1]] / 255.0
    return chars, out


def read_banner(arr: np.ndarray) -> str | None:
    dark = 1.0 - arr[BAND[0]:BAND[1]].astype(np.float32).mean(axis=2) / 255.0
    cols = np.where(dark.sum(axis=0) > INK_COLUMN)[0]
    if cols.size == 0:
        return None
    n, x0 = text_grid(int(cols.min()), int(cols.max()))
    chars, templates = glyph_templates()
    padded = np.pad(dark, ((PAD, PAD), (PAD, PAD)))
    out = []
    for i in range(n):
        left = x0 + i * S.ADVANCE
        cell = dark[:, max(0, left):left + S.ADVANCE]
        if cell.sum() < 2 * INK_COLUMN:
            out.append(" ")
            continue
        out.append(chars[best_glyph(padded, left, templates)])
    text = "".join(out).strip()
    return text or None


def text_grid(ink_min: int, ink_max: int) -> tuple[int, int]:
    """The number of cells and first cell's x: the smallest centred grid that holds all the ink."""
    for n in range(1, S.MAX_TEXT + 1):
        x0 = S.text_origin(n)
        if ink_min >= x0 - 1 and ink_max <= x0 + n * S.ADVANCE:
            return n, x0
    return S.MAX_TEXT, S.text_origin(S.MAX_TEXT)


def best_glyph(padded: np.ndarray, left: int, templates: np.ndarray) -> int:
    """Index of the template with the least squared difference over small shifts around the cell."""
    h, w = templates.shape[1:]
    windows = []
    for dy in range(2 * PAD + 1):
        for dx in range(2 * PAD + 1):
            x = left + dx
            win = padded[dy:dy + h, max(0, x):x + w]
            if win.shape != (h, w):
                win = np.pad(win, ((0, h - win.shape[0]), (0, w - win.shape[1])))
            windows.append(win)
    W = np.stack(windows).reshape(len(windows), -1)
    T = templates.reshape(len(templates), -1)
    d = (W * W).sum(1)[:, None] + (T * T).sum(1)[None, :] - 2.0 * W @ T.T
    return int(d.min(axis=0).argmin())
