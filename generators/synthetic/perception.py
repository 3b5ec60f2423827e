"""Reading a synthetic scene back from pixels alone: objects, banner text and a damage estimate.

This is the only way the verifier and the scene judges learn what a response shows: quantise every
pixel to the nearest known colour, find connected blobs, name each blob's shape from its geometry,
read the banner with glyph templates. Lower ``resolution`` is a genuinely weaker eye: small and
adjacent things merge or vanish, text becomes mush. Results are cached per image digest, so each
image is parsed once per process however many judges look at it.
"""

from __future__ import annotations

import os
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from bon.content import ImageItem
from generators.synthetic import scene as S

# Quantiser classes: 0 background, 1 banner white, 2 ink, 3 grey (antialiasing, strokes), then the palette.
CLASS_NAMES = ["background", "white", "ink", "grey"] + list(S.PALETTE)
CLASS_RGB = np.array([S.BACKGROUND, S.BANNER, S.INK, (128, 128, 128)] + list(S.PALETTE.values()), dtype=np.float32)
FIRST_COLOUR = 4
LUT_BITS = 6

MIN_AREA = 40  # px at full resolution; smaller blobs are specks
MIN_SIDE = 6.0  # px, canvas units: thinner blobs are strokes
MIN_FILL = 0.3  # blobs filling less of their box are strokes (a diagonal line)
LUT_FLOOR = 3.0  # mean residual of a clean image (the LUT's own rounding)
RESIDUAL_LIMIT = 34.0  # a pixel this far from every known colour is damaged
BANNER_MEDIAN = 245  # a banner row's per-channel median is near-white


@dataclass
class SeenObject:
    shape: str
    colour: str
    x: float  # bounding-box centre, in 128-px canvas units whatever the perception resolution
    y: float
    area: int  # pixels, canvas units


@dataclass
class SeenScene:
    objects: list[SeenObject]
    text: str | None
    artefact: float  # 0 clean .. 1 badly damaged (no-reference estimate)
    background: tuple[float, float, float] = field(default=S.BACKGROUND)  # mean colour of the bare canvas

    def count(self, colour: str | None = None, shape: str | None = None) -> int:
        return len(self.find(colour, shape))

    def find(self, colour: str | None = None, shape: str | None = None) -> list[SeenObject]:
        return [o for o in self.objects if (colour is None or o.colour == colour) and (shape is None or o.shape == shape)]

    def kinds(self) -> list[tuple[str, str]]:
        """Sorted ``(colour, shape)`` multiset: what is there, ignoring where."""
        return sorted((o.colour, o.shape) for o in self.objects)

    def extreme(self, position: str) -> SeenObject | None:
        """The object a position word (leftmost, rightmost, topmost, bottommost) names; None if there is none."""
        return min(self.objects, key=S.POSITION_KEYS[position], default=None)


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
    q = (arr >> (8 - LUT_BITS)).astype(np.int32)
    idx = (q[..., 0] << (2 * LUT_BITS)) | (q[..., 1] << LUT_BITS) | q[..., 2]
    return cls.take(idx), dist.take(idx)


def warm() -> None:
    """Build the quantiser's table and the glyph templates now, and import OpenCV (which :func:`blobs`
    imports when first called): the worker processes forked after this (a study forks
    a few per stage, each of which would do it again) inherit them."""
    import cv2  # noqa: F401

    _lut()
    glyph_templates()


# --- entry points -----------------------------------------------------------------------------

_CACHE: "OrderedDict[tuple[str, int | None], SeenScene]" = OrderedDict()
_CACHE_MAX = 60000
# keys this process parsed since it was forked or last asked (new_scenes); no longer than the cache, whose
# older entries are gone anyway
_NEW: "deque[tuple[str, int | None]]" = deque(maxlen=_CACHE_MAX)


def _forked() -> None:
    _NEW.clear()  # a forked worker's own parses only: the driver has the rest


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def new_scenes() -> list[tuple[tuple[str, int | None], SeenScene]]:
    """The scenes this process parsed since it was forked (or since the last call), still cached: a forked
    worker hands them to the driver (:func:`keep_scenes`), so that the judges forked after it (the
    verifier's twins) find them parsed, as when the driver parses every image itself."""
    found = [(key, _CACHE[key]) for key in _NEW if key in _CACHE]
    _NEW.clear()
    return found


def keep_scenes(scenes: list[tuple[tuple[str, int | None], SeenScene]]) -> None:
    """Cache scenes that a worker parsed (:func:`new_scenes`)."""
    for key, seen in scenes:
        _remember(key, seen)


def _remember(key: tuple[str, int | None], seen: SeenScene) -> None:
    _CACHE[key] = seen
    _CACHE.move_to_end(key)
    if len(_CACHE) > _CACHE_MAX:
        _CACHE.popitem(last=False)


def perceive(image: Image.Image | ImageItem, resolution: int | None = None) -> SeenScene:
    """Parse an image into objects, text and an artefact score; ``resolution`` (e.g. 32) looks at
    a downsampled copy first. Cached by pixel digest and resolution."""
    item = image if isinstance(image, ImageItem) else ImageItem.from_pil(image)
    key = (item.digest, resolution)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    seen = _perceive(item.load(), resolution)
    _remember(key, seen)
    _NEW.append(key)
    return seen


def _perceive(pil: Image.Image, resolution: int | None) -> SeenScene:
    if pil.size != (S.SIZE, S.SIZE):
        pil = pil.resize((S.SIZE, S.SIZE), Image.BILINEAR)
    if resolution and resolution < S.SIZE:
        small = pil.resize((resolution, resolution), Image.BOX)
        arr = np.asarray(small)
        scale = S.SIZE / resolution
    else:
        small, arr = None, np.asarray(pil)
        scale = 1.0
    cls, resid = quantise(arr)
    banner = banner_rows(arr)
    region = np.ones(arr.shape[0], dtype=bool)
    if banner is not None:
        region[banner[0]:banner[1]] = False
    clean = despeckle(cls) if scale == 1.0 else cls
    objects, kept = find_objects(clean, region, scale)
    text = None
    if banner is not None:  # the text is read at the canvas size (a reduced resolution blown up again)
        text = read_banner(arr if small is None else np.asarray(small.resize((S.SIZE, S.SIZE), Image.BILINEAR)))
    art = artefact_score(cls, clean, resid, region, kept)
    bg = background_colour(arr, cls, region)
    return SeenScene(objects, text, art, bg)


# --- objects ----------------------------------------------------------------------------------


def banner_rows(arr: np.ndarray) -> tuple[int, int] | None:
    """Rows of the banner, if there is one: the strips above and below the glyph band are near-white.

    The banner has a fixed place in this world; testing only its ink-free strips (per-channel
    medians) keeps the test robust to noise, strokes and whatever text it carries.
    """
    f = arr.shape[0] / S.SIZE
    top, bottom = int(S.BANNER_TOP * f), max(int(S.BANNER_TOP * f) + 1, int(round(S.BANNER_BOTTOM * f)))
    strip = max(1, int(4 * f))
    rows = np.concatenate([arr[top:top + strip], arr[bottom - strip:bottom]], axis=0).reshape(-1, 3)
    # a median reaches the bar only if the upper half of the values does: most pictures (no banner) stop here
    upper_half = len(rows) - len(rows) // 2
    if any(np.count_nonzero(rows[:, c] >= BANNER_MEDIAN) < upper_half for c in range(3)):
        return None
    if (np.median(rows, axis=0) >= BANNER_MEDIAN).all():
        return top, bottom
    return None


def despeckle(cls: np.ndarray, reach: int = 2) -> np.ndarray:
    """Paint over marks at most ``reach`` px thick (strokes, salt) with the class on both sides of
    them, so a line drawn across a shape does not cut it in two."""
    out = cls.copy()
    r2 = 2 * reach
    for view in (out.T, out):  # along each row, then along each column
        before, mid, after = view[:-r2], view[reach:-reach], view[r2:]
        fix = (before == after) & (before != mid)
        mid[fix] = before[fix]  # mid is a view into out
    return out


def find_objects(cls: np.ndarray, region: np.ndarray, scale: float) -> tuple[list[SeenObject], np.ndarray]:
    """Connected blobs of each palette colour outside the banner; returns objects and the kept mask.

    One labelling pass for all colours: pixels where two different colours touch are cut first,
    so blobs of different colours never join.
    """
    min_area = max(3.0, MIN_AREA / scale**2)
    coloured = (cls >= FIRST_COLOUR) & region[:, None]
    seam = np.zeros_like(coloured)
    seam[:, 1:] |= (cls[:, 1:] != cls[:, :-1]) & coloured[:, :-1]
    seam[1:, :] |= (cls[1:, :] != cls[:-1, :]) & coloured[:-1, :]
    lab, boxes = blobs(coloured & ~seam)
    kept = np.zeros(cls.shape, dtype=bool)
    out: list[SeenObject] = []
    for i, (x, y, w, h, area) in enumerate(boxes, start=1):
        if area < min_area:
            continue
        sl = (slice(y, y + h), slice(x, x + w))
        blob = lab[sl] == i
        k = int(cls[sl][blob][0])
        obj = describe_blob(blob, sl, CLASS_NAMES[k], int(area), scale)
        if obj is not None:
            kept[sl] |= blob
            out.append(obj)
    out.sort(key=lambda o: (round(o.y / 8), o.x))
    return out, kept


def blobs(mask: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int, int, int]]]:
    """4-connected blobs of a mask: the label image (1, 2, ... in the raster order of each blob's first
    pixel, as ``scipy.ndimage.label`` numbers them) and each blob's ``(x, y, width, height, area)``.
    OpenCV's labelling is several times faster than scipy's and gives the boxes and areas with it."""
    import cv2

    n, lab, stats, _ = cv2.connectedComponentsWithStats(mask.view(np.uint8), connectivity=4, ltype=cv2.CV_32S)
    return lab, [tuple(int(v) for v in row) for row in stats[1:n, :5]]


def describe_blob(blob: np.ndarray, sl: tuple[slice, slice], colour: str, area: int, scale: float) -> SeenObject | None:
    h, w = blob.shape
    if min(h, w) * scale < MIN_SIDE or area / (h * w) < MIN_FILL:
        return None  # a stroke, not a shape
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


def artefact_score(cls: np.ndarray, clean: np.ndarray, resid: np.ndarray, region: np.ndarray, kept: np.ndarray) -> float:
    """Damage without a reference, from three cues: mean distance to the nearest known colour
    (noise), off-palette pixels per pixel of colour boundary (soft or ringing edges: blur, blocks;
    per boundary so that it does not depend on how many shapes there are) and marks that belong
    to no shape (strokes). The strongest cue counts fully, the others partly.

    At a reduced ``resolution`` the box filter's mixed edge pixels read as damage too: coarse.
    """
    rows = region if not region.all() else slice(None)
    c, q, r, k = cls[rows], clean[rows], resid[rows], kept[rows]
    n = max(1, c.size)
    noise = max(0.0, float(r.mean()) - LUT_FLOOR) / 60.0
    edges = np.count_nonzero(q[:, 1:] != q[:, :-1]) + np.count_nonzero(q[1:] != q[:-1])
    soft = float(np.count_nonzero(r > RESIDUAL_LIMIT)) / max(1, edges) / 6.0
    stray = 10.0 * float(np.count_nonzero((c >= 2) & ~k)) / n
    cues = sorted((noise, soft, stray))
    return float(np.clip(cues[2] + 0.3 * (cues[0] + cues[1]), 0.0, 1.0))


def background_colour(arr: np.ndarray, cls: np.ndarray, region: np.ndarray) -> tuple[float, float, float]:
    """Mean colour of bare-canvas pixels (on a 2x subsample: a tint is uniform, precision is cheap)."""
    sub = arr[::2, ::2].reshape(-1, 3).astype(np.float32)
    mask = ((cls[::2, ::2] == 0) & region[::2, None]).ravel().astype(np.float32)
    n = mask.sum()
    if n == 0:
        return tuple(float(v) for v in S.BACKGROUND)  # type: ignore[return-value]
    # integer sums in float64 are exact in any order; a float32 product's rounding depends on the CPU's kernels
    m = (mask.astype(np.float64) @ sub.astype(np.float64)).astype(np.float32) / n
    return (float(m[0]), float(m[1]), float(m[2]))


# --- text -------------------------------------------------------------------------------------

BAND = (S.BANNER_TOP + 2, S.BANNER_TOP + 21)  # rows holding glyph ink
PAD = 1  # search +-PAD px around each cell for the best template alignment
INK_CELL = 10  # clearly dark pixels that make a cell a glyph rather than a space
TEMPLATE_BLURS = (0.0, 1.0, 2.0)


@lru_cache(maxsize=1)
def glyph_templates() -> tuple[str, np.ndarray]:
    """Darkness maps of every glyph drawn exactly as :func:`scene.render` draws it, one cell each,
    crisp and at two blur levels (a blurred glyph is closer to its own blurred template than to
    any crisp one). Returns the character of each template and the stacked maps."""
    chars = S.TEXT_CHARS.replace(" ", "")
    maps, names = [], []
    for radius in TEMPLATE_BLURS:
        for ch in chars:
            im = Image.new("L", (S.ADVANCE + 8, S.SIZE), 255)
            ImageDraw.Draw(im).text((4 + S.glyph_offset(ch), S.TEXT_Y), ch, font=S.font(), fill=0)
            if radius:
                im = im.filter(ImageFilter.GaussianBlur(radius))
            dark = 1.0 - np.asarray(im, dtype=np.float32)[BAND[0]:BAND[1], 4:4 + S.ADVANCE] / 255.0
            maps.append(dark)
            names.append(ch)
    return "".join(names), np.stack(maps)


def read_banner(arr: np.ndarray) -> str | None:
    dark = 1.0 - arr[BAND[0]:BAND[1]].astype(np.float32).mean(axis=2) / 255.0
    strong = (dark > 0.3).sum(axis=0) >= 3
    strong[1:-1] &= strong[:-2] | strong[2:]  # glyph strokes are 2+ px wide; lone specks are not
    cols = np.where(strong)[0]
    if cols.size == 0:
        return None
    n, x0 = text_grid(int(cols.min()), int(cols.max()))
    lefts = [x0 + i * S.ADVANCE for i in range(n)]
    inked = [(dark[:, max(0, x):x + S.ADVANCE] > 0.3).sum() >= INK_CELL for x in lefts]
    chars, templates = glyph_templates()
    picks = iter(best_glyphs(dark, [x for x, ink in zip(lefts, inked) if ink], templates))
    text = "".join(chars[next(picks)] if ink else " " for ink in inked).strip()
    return text or None


def text_grid(ink_min: int, ink_max: int) -> tuple[int, int]:
    """The number of cells and first cell's x: the smallest centred grid that holds all the ink."""
    for n in range(1, S.MAX_TEXT + 1):
        x0 = S.text_origin(n)
        if ink_min >= x0 - 1 and ink_max <= x0 + n * S.ADVANCE:
            return n, x0
    return S.MAX_TEXT, S.text_origin(S.MAX_TEXT)


def best_glyphs(dark: np.ndarray, lefts: list[int], templates: np.ndarray) -> list[int]:
    """Per cell, the template with the least squared difference over small shifts around it."""
    if not lefts:
        return []
    h, w = templates.shape[1:]
    padded = np.pad(dark, ((PAD, PAD), (PAD + w, PAD + w)))
    views = np.lib.stride_tricks.sliding_window_view(padded, (h, w))  # (rows, cols, h, w)
    shifts = 2 * PAD + 1
    wins = np.stack([views[:shifts, x + w:x + w + shifts] for x in lefts])  # (cells, dy, dx, h, w)
    W = wins.reshape(len(lefts), shifts * shifts, h * w)
    T = templates.reshape(len(templates), h * w)
    d = (W * W).sum(-1)[..., None] + (T * T).sum(-1) - 2.0 * (W @ T.T)  # (cells, shifts, glyphs)
    return [int(i) for i in d.min(axis=1).argmin(axis=1)]
