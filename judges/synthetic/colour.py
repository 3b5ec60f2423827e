"""A colour-histogram judge: sees only how much of each colour the response's images hold.

Each image is reduced to a coarse palette histogram: every saturated pixel falls into the bin of
the nearest palette hue (red, orange, yellow, green, blue, purple) or, when it is far from all of
them, into ``other``; unsaturated pixels (canvas, banner, ink, greys) are ignored. No shapes, no
positions, no counts: the judge is blind to everything but colour amounts.

The prompt is read with the synthetic world's parser (``generators.synthetic.language.interpret``),
falling back to a bag of colour words and edit verbs for text outside that grammar.

* t2i / reasoning sketches: reward the share of coloured pixels in colours the prompt names
  (coverage of each named colour, and purity = named minus unnamed over all coloured pixels).
* edit: compare the output's histogram with the input image's, and reward the change the
  instruction asks for (a recoloured object's old colour shrinks and the new one grows, an added
  colour grows, a removed one shrinks), penalising every other change; moves and text changes ask
  for the colours to stay as they were.
* interleaved: follow the colours through the steps; image i should hold the colours present after
  step i, and differ from image i-1 by step i's change.

A prompt that names no colour, or a response without images, gives no signal.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from bon.content import Content, ImageItem, Prompt
from bon.errors import BonError
from generators.synthetic.language import interpret
from generators.synthetic.scene import PALETTE

from judges.synthetic._scoring import LruCache, ScoringJudge, image_array

COLOURS = tuple(PALETTE)
OTHER = "other"
SYNONYMS = {"violet": "purple", "crimson": "red", "scarlet": "red"}

REMOVE_VERBS = {"remove", "delete", "erase", "eliminate", "drop", "clear", "take"}
ADD_VERBS = {"add", "insert", "draw", "include"}
RECOLOUR_VERBS = {"make", "turn", "change", "recolor", "recolour", "paint", "colour", "color", "replace", "become"}


def hue_saturation(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hue in degrees, saturation and value (both 0..1) of an ``... x 3`` uint8 array."""
    x = rgb.astype(np.float32) / 255.0
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    mx, mn = np.maximum(np.maximum(r, g), b), np.minimum(np.minimum(r, g), b)  # ~5x faster than max(axis=-1)
    chroma = mx - mn
    safe = np.where(chroma > 0, chroma, 1.0)
    hue = np.where(
        mx == r, ((g - b) / safe) % 6.0, np.where(mx == g, (b - r) / safe + 2.0, (r - g) / safe + 4.0)
    ) * 60.0
    sat = np.where(mx > 0, chroma / np.where(mx > 0, mx, 1.0), 0.0)
    return np.where(chroma > 0, hue, 0.0), sat, mx


PALETTE_HUES = dict(zip(COLOURS, hue_saturation(np.array([list(PALETTE[c]) for c in COLOURS], dtype=np.uint8))[0]))


def palette_histogram(rgb: np.ndarray, min_sat: float = 0.35, min_value: float = 0.25, tolerance: float = 28.0) -> dict[str, float]:
    """Share of all pixels in each palette-hue bin, plus ``other`` for saturated off-palette hues.

    A pixel's bin depends on its colour alone, so each colour is classified once per process
    (:class:`ColourBins`) and the image's pixels are counted by bin."""
    flat = rgb.reshape(-1, 3)
    packed = (flat[:, 0].astype(np.uint32) << 16) | (flat[:, 1].astype(np.uint32) << 8) | flat[:, 2]
    bins = ColourBins.of(min_sat, min_value, tolerance).bins(packed)
    counts = np.bincount(bins, minlength=len(COLOURS) + 2)
    total = float(flat.shape[0])
    hist = {c: float(int(n)) / total for c, n in zip(COLOURS, counts)}
    hist[OTHER] = float(int(counts[len(COLOURS)])) / total
    return hist


class ColourBins:
    """Each 24-bit colour's bin, found on the colour's first sight and kept in a table of 2^24 bytes: the
    index of its palette hue, ``len(COLOURS)`` for a saturated off-palette hue, one more for an unsaturated
    or dark colour (not counted). Sorting an image's colours to classify each once cost more than all the
    rest of this judge."""

    UNSEEN = 255
    _tables: dict[tuple[float, float, float], "ColourBins"] = {}

    def __init__(self, min_sat: float, min_value: float, tolerance: float) -> None:
        self.min_sat, self.min_value, self.tolerance = min_sat, min_value, tolerance
        self._table = np.full(1 << 24, self.UNSEEN, dtype=np.uint8)

    @classmethod
    def of(cls, min_sat: float, min_value: float, tolerance: float) -> "ColourBins":
        """The process's table for these settings."""
        key = (min_sat, min_value, tolerance)
        if key not in cls._tables:
            cls._tables[key] = cls(*key)
        return cls._tables[key]

    def bins(self, packed: np.ndarray) -> np.ndarray:
        """The bin of each packed ``0xRRGGBB`` colour."""
        bins = self._table[packed]
        unseen = bins == self.UNSEEN
        if unseen.any():
            new = np.unique(packed[unseen])
            self._table[new] = self.classify(new)
            bins = self._table[packed]
        return bins

    def classify(self, packed: np.ndarray) -> np.ndarray:
        """Bins of distinct packed colours: the nearest palette hue within ``tolerance`` degrees."""
        colours = np.stack([packed >> 16, (packed >> 8) & 255, packed & 255], axis=1).astype(np.uint8)
        hue, sat, val = hue_saturation(colours)
        out = np.full(packed.size, len(COLOURS) + 1, dtype=np.uint8)
        coloured = (sat >= self.min_sat) & (val >= self.min_value)
        h = hue[coloured]
        centres = np.array([PALETTE_HUES[c] for c in COLOURS], dtype=np.float32)
        dist = np.abs(h[:, None] - centres[None, :])
        dist = np.minimum(dist, 360.0 - dist)
        nearest = dist.argmin(axis=1)
        near = dist[np.arange(h.size), nearest] <= self.tolerance
        out[coloured] = np.where(near, nearest, len(COLOURS))
        return out


WORD_RE = re.compile(r"[a-z]+")


def colour_words(text: str) -> list[str]:
    """Palette colours named in ``text``, in order of mention (repeats kept)."""
    out = []
    for w in WORD_RE.findall(text.lower()):
        w = SYNONYMS.get(w, w)
        if w in PALETTE:
            out.append(w)
    return out


def edit_request(instruction: str) -> dict[str, int]:
    """The colour change an edit instruction asks for: colour -> +1 (should grow) / -1 (shrink)."""
    words = WORD_RE.findall(instruction.lower())
    named = colour_words(instruction)
    if not named:
        return {}
    verbs = set(words)
    if verbs & REMOVE_VERBS and not verbs & (ADD_VERBS | RECOLOUR_VERBS):
        return {c: -1 for c in named}
    distinct = list(dict.fromkeys(named))
    if verbs & ADD_VERBS and not verbs & RECOLOUR_VERBS:
        return {distinct[0]: +1}  # later colours name where to put it ("next to the red circle")
    if verbs & RECOLOUR_VERBS:
        if len(distinct) >= 2:
            return {distinct[0]: -1, distinct[-1]: +1}  # "make the red circle blue", "change red to blue"
        return {distinct[0]: +1}  # "paint the square green"
    return {}  # moves, swaps, resizes: colour amounts should stay as they were


def op_request(op: dict[str, Any]) -> dict[str, int]:
    """The colour change one parsed edit operation asks for."""
    kind = op.get("op")
    if kind == "recolour" and op["object"]["colour"] != op["new_colour"]:
        return {op["object"]["colour"]: -1, op["new_colour"]: +1}
    if kind == "add":
        return {op["object"]["colour"]: +1}
    if kind == "remove":
        return {op["object"]["colour"]: -1}
    return {}  # move, retext: colour amounts stay


def apply_op(colours: dict[str, int], op: dict[str, Any]) -> dict[str, int]:
    """Object counts per colour after one operation."""
    out = dict(colours)
    kind = op.get("op")
    if kind in ("recolour", "remove"):
        old = op["object"]["colour"]
        out[old] = max(0, out.get(old, 0) - 1)
    if kind == "recolour":
        out[op["new_colour"]] = out.get(op["new_colour"], 0) + 1
    if kind == "add":
        out[op["object"]["colour"]] = out.get(op["object"]["colour"], 0) + 1
    return out


class ColourHistogramJudge(ScoringJudge):
    """Options: ``min_share`` (pixel share at which a named colour counts as fully present, default
    0.01) and ``edit_scale`` (histogram change, in pixel share, that counts as a clear edit, 0.03)."""

    algorithm = "colour-hist"
    relative_cost = 2.0  # a histogram of every image (bon.stages.pool starts the costliest first)
    version = 1
    margin_scale = 1.0

    def __init__(self, name: str | None = None, seed: int = 0, min_share: float = 0.01, edit_scale: float = 0.03) -> None:
        super().__init__(name=name, seed=seed)
        self.min_share = float(min_share)
        self.edit_scale = float(edit_scale)
        self._cache = LruCache()

    def options(self) -> dict[str, Any]:
        return {"palette": sorted(COLOURS)}

    def histogram(self, item: ImageItem) -> dict[str, float]:
        return self._cache.get(item.digest, lambda: palette_histogram(image_array(item)))

    def spec(self, prompt: Prompt) -> dict[str, Any] | None:
        """The prompt's public spec, or None for text outside the synthetic world's grammar."""
        try:
            return interpret(prompt)
        except BonError:
            return None

    # --- scoring -----------------------------------------------------------------------------
    def response_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        images = response.images
        if not images:
            return None, {}
        text = prompt.content.text
        spec = self.spec(prompt)
        if prompt.task == "edit" and prompt.content.images:
            request = op_request(spec) if spec is not None else edit_request(text)
            before = self.histogram(prompt.content.images[0])
            return self.edit_score(before, self.histogram(images[-1]), request)
        if prompt.task == "interleaved" and spec is not None and len(images) == len(spec["steps"]):
            return self.steps_score(spec, [self.histogram(im) for im in images])
        named = set(colour_words(text))
        if not named:
            return None, {}
        scores = [self.match_score(self.histogram(im), named, named) for im in images]
        return float(np.mean(scores)), {}

    def steps_score(self, spec: dict[str, Any], hists: list[dict[str, float]]) -> tuple[float, dict[str, Any]]:
        """Image i against the colours present after step i, and against step i's change."""
        colours: dict[str, int] = {}
        for o in spec["start"]:
            colours[o["colour"]] = colours.get(o["colour"], 0) + 1
        scores = []
        for i, (op, hist) in enumerate(zip(spec["steps"], hists)):
            colours = apply_op(colours, op)
            present = {c for c, n in colours.items() if n > 0}
            score = self.match_score(hist, present, present)
            if i > 0:
                score = 0.5 * score + 0.5 * self.edit_score(hists[i - 1], hist, op_request(op))[0]
            scores.append(score)
        return float(np.mean(scores)), {"per_step": scores}

    def match_score(self, hist: dict[str, float], wanted: set[str], allowed: set[str]) -> float:
        """Coverage of the ``wanted`` colours and purity against ``allowed`` ones, in [-0.5, 1]."""
        coloured = sum(hist.values())
        named = sum(hist[c] for c in allowed)
        purity = (2.0 * named - coloured) / coloured if coloured > 0.002 else 0.0
        if wanted:
            coverage = float(np.mean([min(1.0, hist[c] / self.min_share) for c in wanted]))
        else:  # nothing should be there (every object removed)
            coverage = 1.0 if coloured <= 0.002 else 0.0
        return 0.5 * coverage + 0.5 * purity

    def edit_score(self, before: dict[str, float], after: dict[str, float], request: dict[str, int]) -> tuple[float, dict[str, Any]]:
        """Reward the asked-for colour change, penalise every other; in [-1, 1]."""
        delta = {c: after[c] - before[c] for c in before}
        gain = sum(sign * delta[c] for c, sign in request.items())
        collateral = sum(abs(d) for c, d in delta.items() if c not in request)
        change = sum(abs(d) for d in delta.values())
        if not request:  # nothing to recolour: the colours should stay as they were
            return -math.tanh(change / self.edit_scale), {"change": change}
        net = gain - collateral
        focus = net / (change + 0.25 * self.edit_scale)  # how much of the change was the right one
        strength = math.tanh(net / self.edit_scale)  # and whether there was enough of it
        return 0.5 * focus + 0.5 * strength, {"request": request, "gain": gain, "collateral": collateral}
