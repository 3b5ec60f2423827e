"""A prompt-blind, no-reference image-quality judge (numpy/scipy only).

It never reads the prompt: it prefers whichever response's images look cleaner. Four defects are
measured on each image and summed into a penalty in [0, 4] (0 = clean):

* **noise**: grain, from the median absolute response of Immerkaer's Laplacian-difference operator
  over pixels away from edges (flat-colour renders score ~0; Gaussian noise of sigma s scores ~s
  grey levels; sparse strokes and specks barely move a median);
* **blur**: edge softness; around contrasty edges, per channel, the steepest one-pixel step is
  compared with the local contrast (a crisp step edge takes its whole contrast in one pixel);
* **compression** (``block``): JPEG-like damage; flat-colour art has small steps only along
  antialiased glyphs, compression spreads low-amplitude ringing and block-wise shade shifts, so the
  density of small steps rises and more of them sit on the 8-pixel block seams than chance says;
* **stray lines**: marks that a 3x3 or 5x5 median erases, in components at least 14 px long and
  at most about three pixels wide; the white text banner is skipped so glyph strokes don't count.

Text-only responses give no signal. A response with several images gets their mean penalty.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from bon.content import Content, Prompt
from bon.errors import BonError

from judges.synthetic._scoring import LruCache, ScoringJudge, channel_max, image_array

def _median(img: np.ndarray, size: int) -> np.ndarray:
    """Median filter of a uint8 image (grey or RGB): OpenCV's is ~50x faster than scipy's here,
    which matters because every candidate image of a study passes through this judge."""
    import cv2

    return cv2.medianBlur(np.ascontiguousarray(img, dtype=np.uint8), size)


def _max_filter(img: np.ndarray, size: int) -> np.ndarray:
    import cv2

    return cv2.dilate(img, np.ones((size, size), np.uint8), borderType=cv2.BORDER_REFLECT)


def _min_filter(img: np.ndarray, size: int) -> np.ndarray:
    import cv2

    return cv2.erode(img, np.ones((size, size), np.uint8), borderType=cv2.BORDER_REFLECT)


LAPLACE_DIFF = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], dtype=np.float64)


def exact_filter(grey: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``scipy.ndimage.convolve(grey, kernel, mode="reflect")`` of a float32 image (a symmetric kernel of small
    whole numbers), the same bits several times faster: scipy sums in float64 and rounds to float32 once, and
    every product and partial sum here is exact in float64 (grey levels are multiples of 2^-27 below
    256), so OpenCV's float64 sums, in whatever order, round to the same float32."""
    import cv2

    out = cv2.filter2D(grey.astype(np.float64), cv2.CV_64F, kernel, borderType=cv2.BORDER_REFLECT)
    return out.astype(np.float32)


def noise_sigma(grey: np.ndarray, skip: np.ndarray) -> float:
    """Noise standard deviation (grey levels) from the Laplacian-difference operator, using the
    median absolute response over pixels away from edges: strokes, specks and seams barely move it."""
    resp = np.abs(exact_filter(grey, LAPLACE_DIFF))
    flat = ~skip
    flat[:1, :] = flat[-1:, :] = False
    flat[:, :1] = flat[:, -1:] = False
    if flat.sum() < 64:
        return 0.0
    # for Gaussian noise of sigma s the response is Gaussian with sigma 6 s (the weights' norm)
    return float(np.median(resp[flat]) / (0.6745 * 6.0))


def edge_zone(grey: np.ndarray, threshold: float = 30.0) -> np.ndarray:
    """Pixels near strong edges of the de-noised image (left out of the noise estimate). OpenCV's Sobel and
    dilation on the median-filtered (whole-number) image give exactly scipy.ndimage's ``sobel`` (mode
    "reflect") and ``binary_dilation`` (3x3 cross, twice), several times faster. The gradients are whole
    numbers, so ``hypot(gy, gx) / 4 > threshold`` is decided on the exact squared length, without roots."""
    import cv2

    smooth = _median(np.round(grey).astype(np.uint8), 5)
    gy = cv2.Sobel(smooth, cv2.CV_16S, 0, 1, ksize=3, borderType=cv2.BORDER_REFLECT).astype(np.int32)
    gx = cv2.Sobel(smooth, cv2.CV_16S, 1, 0, ksize=3, borderType=cv2.BORDER_REFLECT).astype(np.int32)
    strong = gy * gy + gx * gx > (4.0 * threshold) ** 2
    cross = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))
    return cv2.dilate(strong.view(np.uint8), cross, iterations=2,
                      borderType=cv2.BORDER_CONSTANT, borderValue=0).astype(bool)


def absdiff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` of two uint8 arrays, in uint8."""
    return np.maximum(a, b) - np.minimum(a, b)


def blur_amount(rgb: np.ndarray, denoised: np.ndarray | None = None) -> float:
    """0 for crisp edges, towards 1 for soft ones; 0 when the image has no contrasty edges.

    Per channel, around every edge with a local contrast above 40 levels, compare the steepest
    one-pixel step nearby with that contrast: a crisp edge takes the whole contrast in one step.
    ``denoised``: the image's 3x3 median when already computed.
    """
    # all three channels at once, in whole numbers (the same values as per channel in float32: every
    # step and contrast is an integer below 256, and the percentile does not depend on the order)
    den = np.ascontiguousarray(_median(rgb, 3) if denoised is None else denoised, dtype=np.uint8)
    dx, dy = np.zeros_like(den), np.zeros_like(den)
    dx[:, :-1] = absdiff(den[:, 1:], den[:, :-1])
    dy[:-1] = absdiff(den[1:], den[:-1])
    step = _max_filter(np.maximum(dx, dy), 3)
    contrast = _max_filter(den, 7) - _min_filter(den, 7)
    sel = contrast > 40
    if np.count_nonzero(sel) < 24:
        return 0.0
    ratios = step[sel].astype(np.float32) / contrast[sel].astype(np.float32)
    sharpness = float(np.percentile(ratios, 90))
    return float(np.clip((0.9 - sharpness) / 0.6, 0.0, 1.0))


def compression(rgb: np.ndarray, noise: float) -> float:
    """JPEG-like damage, 0 (clean) to about 1.

    Flat-colour art has small (1..40 level) steps only along antialiased text. Compression smears
    low-amplitude ringing and block-wise shade shifts across the picture, so the density of small
    steps rises, and more of them line up on the 8-pixel block seams than the 1/8 chance predicts.
    Grain raises the density too, so that part is discounted as the noise estimate grows (grain
    has its own measure).
    """
    import cv2

    arr = np.ascontiguousarray(rgb, dtype=np.uint8)
    seam_sum = total = 0.0
    small_steps = 0
    steps = 0
    for axis in (0, 1):
        head, tail = (arr[1:], arr[:-1]) if axis == 0 else (arr[:, 1:], arr[:, :-1])
        d = absdiff(head, tail)  # whole steps: the sums below are exact in any order
        # the small steps (1..40 levels; real object edges are not seams), every other one 0
        kept = cv2.threshold(d, 40, 0, cv2.THRESH_TOZERO_INV)[1]
        small_steps += int(np.count_nonzero(channel_max(kept)))  # places with a small step in any channel
        steps += kept.shape[0] * kept.shape[1]
        # one sum per row (axis 0) or column (axis 1), in an order numpy reduces quickly
        profile = (kept.reshape(kept.shape[0], kept.shape[1] * kept.shape[2]).sum(axis=1, dtype=np.int64) if axis == 0
                   else kept.sum(axis=0, dtype=np.int64).sum(axis=1))
        seam = (np.arange(profile.size) % 8) == 7
        seam_sum += float(profile[seam].sum())
        total += float(profile.sum())
    seam_excess = max(0.0, seam_sum / total - 1.0 / 8.0) if total >= 200.0 else 0.0
    density = small_steps / steps
    texture = max(0.0, density - 0.03) / 0.15 * float(np.clip(1.0 - noise / 3.0, 0.0, 1.0))
    # seams only mean something where there is texture to line up (a few antialiased glyphs can
    # sit on the grid by chance)
    return float(min(1.0, texture + 2.0 * seam_excess * min(1.0, density / 0.08)))


def banner_rows(rgb: np.ndarray) -> np.ndarray:
    """Rows of a white text banner (runs of at least 8 mostly near-white rows), with a margin."""
    # a row's channel median exceeds 245 only if at least half its pixels do (the upper middle value
    # must be 246 or more): the exact median is taken of those rows alone
    half = rgb.shape[1] // 2
    maybe = np.flatnonzero((row_counts(rgb >= 246) >= half).all(axis=1))
    white = np.zeros(rgb.shape[0], dtype=bool)
    keep = np.zeros_like(white)
    if maybe.size:
        white[maybe] = np.median(rgb[maybe], axis=1).min(axis=1) > 245
    if not white.any():  # most pictures: no white row, no banner (closing nothing gives nothing)
        return keep
    rows = closed_runs(white, 3) | white
    for start, stop in true_runs(rows):
        if stop - start >= 8:
            keep[max(start - 2, 0) : stop + 2] = True
    return keep


def row_counts(mask: np.ndarray) -> np.ndarray:
    """``mask.sum(axis=1)`` of an ``H x W x 3`` boolean mask (numpy is slow at reducing that axis)."""
    import cv2

    counts = cv2.reduce(np.ascontiguousarray(mask).view(np.uint8), 1, cv2.REDUCE_SUM, dtype=cv2.CV_32S)
    return counts.reshape(mask.shape[0], mask.shape[2])


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` of every run of True in a 1-D mask."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def closed_runs(mask: np.ndarray, reach: int) -> np.ndarray:
    """``scipy.ndimage.binary_closing(mask, iterations=reach)`` of a 1-D mask: dilation by ``reach`` on
    each side, then erosion by ``reach`` with everything outside the mask counted False."""
    n = mask.size
    padded = np.concatenate((np.zeros(reach, np.int32), mask.astype(np.int32), np.zeros(reach, np.int32)))
    window = 2 * reach + 1
    counts = np.convolve(padded, np.ones(window, np.int32), mode="valid")  # ones within reach of each place
    grown = np.concatenate((np.zeros(reach, np.int32), (counts > 0).astype(np.int32), np.zeros(reach, np.int32)))
    return np.convolve(grown, np.ones(window, np.int32), mode="valid")[:n] == window


def stray_lines(rgb: np.ndarray, noise: float, median3: np.ndarray | None = None) -> float:
    """Pixels (in units of 64) on long thin marks outside the text banner: what a 3x3 (thin
    strokes) or 5x5 (two-pixel strokes) median erases, in components long and narrow enough.
    ``median3``: the image's 3x3 median when already computed."""
    import cv2

    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    thr = max(60.0, 4.0 * noise)
    resid3 = channel_max(cv2.absdiff(rgb, _median(rgb, 3) if median3 is None else median3))
    resid5 = channel_max(cv2.absdiff(rgb, _median(rgb, 5)))
    thin = (resid3 > thr) | (resid5 > thr)
    thin[banner_rows(rgb)] = False
    # 8-connected components (scipy.ndimage.label with a 3x3 structure), with their boxes and areas; of OpenCV's
    # algorithms, BBDT gives those stats several times faster than the default on these masks
    _, labels, stats, _ = cv2.connectedComponentsWithStatsWithAlgorithm(thin.view(np.uint8), 8, cv2.CV_32S, cv2.CCL_BBDT)
    extents = np.maximum(stats[1:, cv2.CC_STAT_WIDTH], stats[1:, cv2.CC_STAT_HEIGHT])
    total = 0
    for label in np.flatnonzero(extents >= 14) + 1:  # shorter marks are grain, specks, shape corners
        if np.percentile(mark_depths(thin, labels, label, stats[label]), 90) <= 1.5:  # about three pixels across at most
            total += int(stats[label, cv2.CC_STAT_AREA])
    return total / 64.0


def mark_depths(thin: np.ndarray, labels: np.ndarray, label: int, stat: np.ndarray) -> np.ndarray:
    """Half-widths of one mark: ``scipy.ndimage.distance_transform_edt(thin)`` at the pixels labelled
    ``label`` (``stat``: its box), computed on the box and one pixel around it only. That is exact: beside
    each outermost pixel of a mark lies a pixel off every mark (an 8-neighbour on a mark would be part of
    it), so from any pixel of the mark an off pixel lies at most one past the box in the direction of
    some side, and so the nearest one lies within the box and its margin (or at the image's edge, which
    the margin stops at, as the transform does)."""
    import cv2

    x, y, w, h = (int(v) for v in stat[[cv2.CC_STAT_LEFT, cv2.CC_STAT_TOP, cv2.CC_STAT_WIDTH, cv2.CC_STAT_HEIGHT]])
    y0, x0 = max(y - 1, 0), max(x - 1, 0)
    around = (slice(y0, y + h + 1), slice(x0, x + w + 1))
    depth = ndimage.distance_transform_edt(thin[around])
    return depth[labels[around] == label]


LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32).astype(np.float64)


def luma(rgb: np.ndarray) -> np.ndarray:
    """Grey levels, the same bits on every machine: each 8-bit value times a float32 weight is exact in float64
    and so is the sum of three, rounded to float32 once, whatever order or fused multiply-add a float64
    product uses. A float32 matrix product is not: its rounding depends on the CPU's kernels, which flipped
    this judge's verdicts between machines."""
    return (rgb.astype(np.float64) @ LUMA).astype(np.float32)


def image_defects(rgb: np.ndarray) -> dict[str, float]:
    grey = luma(rgb)
    noise = noise_sigma(grey, edge_zone(grey))
    median3 = _median(rgb, 3)  # shared by the blur and stray-line measures
    return {
        "noise": noise,
        "blur": blur_amount(rgb, median3),
        "block": compression(rgb, noise),
        "lines": stray_lines(rgb, noise, median3),
    }


class QualityJudge(ScoringJudge):
    """Options: ``weights`` for the four defects (noise, blur, block, lines), default all 1.0."""

    algorithm = "quality"
    relative_cost = 8.0  # four defect measures on every image (bon.stages.pool starts the costliest first)
    version = 1
    margin_scale = 1.0

    def __init__(self, name: str | None = None, seed: int = 0, weights: dict[str, float] | None = None) -> None:
        super().__init__(name=name, seed=seed)
        w = {"noise": 1.0, "blur": 1.0, "block": 1.0, "lines": 1.0}
        if weights:
            unknown = set(weights) - set(w)
            if unknown:
                raise BonError(f"{self.name}: unknown quality weights {sorted(unknown)} (known: {sorted(w)})")
            w.update({k: float(v) for k, v in weights.items()})
        self.weights = w
        self._cache = LruCache()

    def options(self) -> dict[str, Any]:
        return {"weights": dict(self.weights)}

    def penalty(self, defects: dict[str, float]) -> float:
        parts = {
            "noise": np.clip(defects["noise"] / 12.0, 0.0, 1.0),
            "blur": defects["blur"],
            "block": np.clip(defects["block"], 0.0, 1.0),
            "lines": np.clip(defects["lines"] / 3.0, 0.0, 1.0),
        }
        return float(sum(self.weights[k] * parts[k] for k in parts))

    def response_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        images = response.images
        if not images:
            return None, {}
        defects = [self._cache.get(im.digest, lambda im=im: image_defects(image_array(im))) for im in images]
        penalty = float(np.mean([self.penalty(d) for d in defects]))
        return -penalty, {"defects": defects[0] if len(defects) == 1 else defects}
