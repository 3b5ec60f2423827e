"""The synthetic world: flat-coloured shapes on a plain canvas, with an optional text banner.

Scenes are small enough to render and parse in about a millisecond, yet rich enough to fail the
way image generators fail (wrong count, colour, shape, layout, spelling) and to be damaged the way
images are damaged (noise, blur, compression blocks, stray strokes). Everything downstream reads
only the pixels; a :class:`Scene` is the ground truth a generator *intended*.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

SIZE = 128
BACKGROUND = (236, 234, 228)
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (214, 32, 32),
    "green": (34, 160, 60),
    "blue": (40, 80, 220),
    "yellow": (232, 212, 24),
    "purple": (146, 56, 186),
    "orange": (248, 128, 8),
}
SHAPES = ("circle", "square", "triangle")
INK = (0, 0, 0)
BANNER = (255, 255, 255)

# Banner and text layout: a white strip near the bottom; glyphs sit in fixed-width cells so that
# they never touch (a reader can then segment by cell, like a monospace OCR).
BANNER_TOP, BANNER_BOTTOM = 100, 124
OBJECT_BOTTOM = 96  # objects stay above this line, clear of the banner
FONT_SIZE = 18
ADVANCE = 17
MAX_TEXT = 7
TEXT_Y = 100  # draw origin; this font's capitals then occupy rows ~105..117
TEXT_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "

MIN_SIZE, MAX_SIZE = 8.0, 14.0
GRID_COLS, GRID_ROWS = 4, 3
CELL_W, CELL_H = SIZE / GRID_COLS, OBJECT_BOTTOM / GRID_ROWS


@dataclass
class SceneObject:
    shape: str
    colour: str
    x: float  # centre, pixels
    y: float
    size: float  # half-width, pixels

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.shape, "colour": self.colour, "x": round(self.x, 2), "y": round(self.y, 2),
                "size": round(self.size, 2)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "SceneObject":
        return cls(str(raw["shape"]), str(raw["colour"]), float(raw["x"]), float(raw["y"]), float(raw["size"]))


@dataclass
class Scene:
    objects: list[SceneObject] = field(default_factory=list)
    text: str | None = None
    background: tuple[int, int, int] = BACKGROUND  # changed only by a clumsy edit

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"objects": [o.to_dict() for o in self.objects], "text": self.text}
        if tuple(self.background) != BACKGROUND:
            out["background"] = list(self.background)
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "Scene":
        bg = tuple(int(v) for v in raw.get("background", BACKGROUND))
        return cls([SceneObject.from_dict(o) for o in raw.get("objects", [])], raw.get("text"), bg)  # type: ignore[arg-type]

    def copy(self) -> "Scene":
        return Scene.from_dict(self.to_dict())


# --- seeds ------------------------------------------------------------------------------------


def seed_of(*parts: object) -> int:
    """A stable 63-bit seed from any values (Python's hash() is salted per process)."""
    h = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


def rng_of(*parts: object) -> np.random.Generator:
    return np.random.default_rng(seed_of(*parts))


# --- layout -----------------------------------------------------------------------------------


def cell_of(x: float, y: float) -> int:
    col = int(np.clip(x // CELL_W, 0, GRID_COLS - 1))
    row = int(np.clip(y // CELL_H, 0, GRID_ROWS - 1))
    return row * GRID_COLS + col


def jittered(cell: int, size: float, rng: np.random.Generator) -> tuple[float, float]:
    """A centre inside ``cell`` that keeps the whole shape in the cell (so cells never overlap)."""
    cx, cy = (cell % GRID_COLS + 0.5) * CELL_W, (cell // GRID_COLS + 0.5) * CELL_H  # the cell's centre
    jx = max(0.0, CELL_W / 2 - size - 2)
    jy = max(0.0, CELL_H / 2 - size - 2)
    return float(cx + rng.uniform(-jx, jx)), float(cy + rng.uniform(-jy, jy))


def place_objects(
    kinds: Sequence[tuple[str, str]],
    rng: np.random.Generator,
    cells: Sequence[int | None] | None = None,
    taken: Sequence[int] = (),
) -> list[SceneObject]:
    """Lay out ``(shape, colour)`` pairs on the grid, one per free cell, with size and jitter.

    ``cells`` pins some objects to chosen cells (None = any free cell); ``taken`` cells are avoided.
    """
    pinned = list(cells) if cells is not None else [None] * len(kinds)
    used = set(taken) | {c for c in pinned if c is not None}
    free = [c for c in range(GRID_COLS * GRID_ROWS) if c not in used]
    rng.shuffle(free)
    out = []
    for (shape, colour), cell in zip(kinds, pinned):
        if cell is None:
            if not free:
                raise ValueError("too many objects for the grid")
            cell = free.pop()
        size = float(rng.uniform(MIN_SIZE, MAX_SIZE))
        x, y = jittered(cell, size, rng)
        out.append(SceneObject(shape, colour, x, y, size))
    return out


def relation_margin(a: Any, rel: str, b: Any) -> float:
    """How far ``a`` stands in relation ``rel`` to ``b`` (negative: violated), in px; any objects with x, y."""
    return {"left of": b.x - a.x, "right of": a.x - b.x, "above": b.y - a.y, "below": a.y - b.y}[rel]


# how each position word ranks objects: the one that sorts first is the one it names
POSITION_KEYS = {"leftmost": lambda o: o.x, "rightmost": lambda o: -o.x, "topmost": lambda o: o.y,
                 "bottommost": lambda o: -o.y}


def free_cells(scene: Scene, exclude: SceneObject | None = None) -> list[int]:
    used = {cell_of(o.x, o.y) for o in scene.objects if o is not exclude}
    return [c for c in range(GRID_COLS * GRID_ROWS) if c not in used]


# --- rendering --------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def font() -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=FONT_SIZE)  # type: ignore[return-value]


@lru_cache(maxsize=64)
def glyph_offset(ch: str) -> int:
    """Horizontal offset that centres a glyph's ink in its cell (so no two glyphs touch)."""
    left, _, right, _ = font().getbbox(ch)
    return int(round((ADVANCE - (right - left)) / 2 - left))


def text_origin(n: int) -> int:
    return (SIZE - n * ADVANCE) // 2


def clean_text(text: str) -> str:
    return "".join(c for c in text.upper() if c in TEXT_CHARS)[:MAX_TEXT]


def draw_shape(draw: ImageDraw.ImageDraw, obj: SceneObject, fill: tuple[int, int, int]) -> None:
    x, y, s = obj.x, obj.y, obj.size
    box = [round(x - s), round(y - s), round(x + s) - 1, round(y + s) - 1]
    if obj.shape == "circle":
        draw.ellipse(box, fill=fill)
    elif obj.shape == "square":
        draw.rectangle(box, fill=fill)
    elif obj.shape == "triangle":
        draw.polygon([(x, box[1]), (box[2], box[3]), (box[0], box[3])], fill=fill)
    else:
        raise ValueError(f"unknown shape {obj.shape!r}")


def draw_text(draw: ImageDraw.ImageDraw, text: str) -> None:
    draw.rectangle([0, BANNER_TOP, SIZE - 1, BANNER_BOTTOM - 1], fill=BANNER)
    x0 = text_origin(len(text))
    for i, ch in enumerate(text):
        if ch != " ":
            draw.text((x0 + i * ADVANCE + glyph_offset(ch), TEXT_Y), ch, font=font(), fill=INK)


def render(scene: Scene, artefacts: dict[str, Any] | None = None, rng: np.random.Generator | None = None) -> Image.Image:
    """Draw the scene, then apply damage. ``artefacts`` keys (all optional, 0 = none):

    ``scribble`` (number of stray strokes), ``blur`` (Gaussian radius, px), ``blocks`` (0..1,
    JPEG-like blockiness), ``noise`` (0..1 speckle strength), ``grain`` (sensor-like noise in grey
    levels, ~1-2: harmless, but no two samples are pixel-identical). ``rng`` drives the damage.
    """
    im = Image.new("RGB", (SIZE, SIZE), tuple(scene.background))
    draw = ImageDraw.Draw(im)
    for obj in scene.objects:
        draw_shape(draw, obj, PALETTE[obj.colour])
    if scene.text is not None:
        draw_text(draw, clean_text(scene.text))
    art = artefacts or {}
    if not any(art.get(k) for k in ("scribble", "blur", "blocks", "noise", "grain")):
        return im
    rng = rng if rng is not None else np.random.default_rng(0)
    if art.get("scribble"):
        scribble(draw, int(round(float(art["scribble"]))), rng)
    if art.get("blur"):
        im = im.filter(ImageFilter.GaussianBlur(float(art["blur"])))
    if art.get("blocks"):
        im = blockify(im, float(art["blocks"]))
    if art.get("noise"):
        im = speckle(im, float(art["noise"]), rng)
    if art.get("grain"):
        im = grain(im, float(art["grain"]), rng)
    return im


def scribble(draw: ImageDraw.ImageDraw, n: int, rng: np.random.Generator) -> None:
    colours = [INK, (90, 90, 90)] + list(PALETTE.values())
    for _ in range(n):
        pts = [tuple(float(v) for v in rng.uniform(0, SIZE, 2)) for _ in range(int(rng.integers(2, 4)))]
        colour = colours[int(rng.integers(len(colours)))]
        draw.line(pts, fill=colour, width=int(rng.integers(1, 3)))


def blockify(im: Image.Image, strength: float) -> Image.Image:
    quality = int(np.clip(round(45 - 42 * strength), 2, 95))
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    with Image.open(buf) as out:
        return out.convert("RGB")


def speckle(im: Image.Image, strength: float, rng: np.random.Generator) -> Image.Image:
    arr = np.asarray(im, dtype=np.int16)
    noise = rng.normal(0.0, 55.0 * strength, size=arr.shape)
    salt = rng.random(arr.shape[:2]) < 0.04 * strength
    out = arr + noise.astype(np.int16)
    out[salt] = rng.integers(0, 256, size=(int(salt.sum()), 3))
    return Image.fromarray(np.clip(out, 0, 255).astype(np.uint8), "RGB")


def grain(im: Image.Image, amount: float, rng: np.random.Generator) -> Image.Image:
    """Faint grey-level grain, uniform in +-``amount`` (cheap: it is applied to every sample)."""
    k = max(1, int(round(amount)))
    arr = np.asarray(im, dtype=np.int16) + rng.integers(-k, k + 1, size=(im.height, im.width, 1), dtype=np.int16)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
