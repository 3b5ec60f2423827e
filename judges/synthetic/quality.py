"""A prompt-blind, no-reference image-quality judge (numpy/scipy only).

It never reads the prompt: it prefers whichever response's images look cleaner. Four defects are
measured on each image and summed into a penalty in [0, 4] (0 = clean):

* **noise**: sensor-like grain, estimated away from edges with Immerkaer's Laplacian-difference
  operator (flat-colour renders score ~0; Gaussian noise of sigma s scores ~s grey levels);
* **blur**: edge softness; at strong edges the steepest one-pixel step is compared with the local
  contrast (a crisp step edge takes its whole contrast in one pixel, a blurred one spreads it);
* **blockiness**: 8x8 block seams, i.e. small steps that line up on the 8-pixel grid more than
  elsewhere (JPEG-like compression, pixelation);
* **stray lines**: thin (one or two pixel) straight-ish marks that a 3x3 median erases, long enough
  not to be grain; the white text banner at the bottom is ignored so glyph strokes don't count.

Text-only responses give no signal. A response with several images gets their mean penalty.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy import ndimage

from bon.content import Content, Prompt

from judges.synthetic._scoring import LruCache, ScoringJudge, image_array

LAPLACE_DIFF = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], dtype=np.float32)


def noise_sigma(grey: np.ndarray, edges: np.ndarray) -> float:
    """Immerkaer's fast noise estimate over pixels away from edges (grey levels)."""
    resp = np.abs(ndimage.convolve(grey, LAPLACE_DIFF, mode="reflect"))
    flat = ~edges
    flat[:1, :] = flat[-1:, :] = False
    flat[:, :1] = flat[:, -1:] = False
    if flat.sum() < 64:
        return 0.0
    return float(math.sqrt(math.pi / 2.0) / 6.0 * resp[flat].mean())


def edge_mask(grey: np.ndarray, threshold: float = 40.0) -> tuple[np.ndarray, np.ndarray]:
    """Strong edges of the de-noised image, and those edges dilated (the zone to skip for noise)."""
    smooth = ndimage.median_filter(grey, size=5, mode="reflect")
    mag = np.hypot(ndimage.sobel(smooth, axis=0), ndimage.sobel(smooth, axis=1)) / 4.0
    edges = mag > threshold
    return edges, ndimage.binary_dilation(edges, iterations=2)


def blur_amount(grey: np.ndarray, edges: np.ndarray) -> float:
    """0 for crisp edges, towards 1 for soft ones; 0 when the image has no strong edges."""
    den = ndimage.median_filter(grey, size=3, mode="reflect")
    dx = np.abs(np.diff(den, axis=1, append=den[:, -1:]))
    dy = np.abs(np.diff(den, axis=0, append=den[-1:, :]))
    step = ndimage.maximum_filter(np.maximum(dx, dy), size=3)
    contrast = ndimage.maximum_filter(den, size=7) - ndimage.minimum_filter(den, size=7)
    sel = edges & (contrast > 40.0)
    if sel.sum() < 12:
        return 0.0
    sharpness = float(np.median(step[sel] / contrast[sel]))
    return float(np.clip((0.85 - sharpness) / 0.6, 0.0, 1.0))


def blockiness(grey: np.ndarray) -> float:
    """Mean small step across 8-pixel block seams minus the mean small step elsewhere (grey levels)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: nothing there but edges
        for axis in (0, 1):
            out.extend(_seam_excess(grey, axis))
    return max(out) if out else 0.0


def _seam_excess(grey: np.ndarray, axis: int) -> list[float]:
    d = np.abs(np.diff(grey, axis=axis))
    d = np.where(d > 40.0, np.nan, d)  # real object edges are not compression seams
    profile = np.nanmean(d, axis=1 - axis)  # one value per row (or column) boundary
    seam = (np.arange(profile.size) % 8) == 7
    if not np.isfinite(profile[seam]).any() or not np.isfinite(profile[~seam]).any():
        return []
    return [float(np.nanmean(profile[seam]) - np.nanmean(profile[~seam]))]


def banner_rows(rgb: np.ndarray) -> np.ndarray:
    """Rows belonging to a white text banner (mostly near-white rows near the bottom)."""
    white = (rgb.min(axis=2) > 225).mean(axis=1) > 0.45
    rows = ndimage.binary_closing(white, iterations=3) | white
    labels, n = ndimage.label(rows)
    keep = np.zeros_like(rows)
    for i in range(1, n + 1):
        idx = np.nonzero(labels == i)[0]
        if idx.size >= 8:
            keep[max(idx[0] - 2, 0) : idx[-1] + 3] = True
    return keep


def stray_lines(rgb: np.ndarray, noise: float) -> float:
    """Pixels (in units of 64) lying on long thin marks outside the text banner."""
    arr = rgb.astype(np.float32)
    resid = np.max(np.abs(arr - ndimage.median_filter(arr, size=(3, 3, 1), mode="reflect")), axis=2)
    thin = resid > max(30.0, 3.5 * noise)
    thin[banner_rows(rgb)] = False
    labels, n = ndimage.label(thin, structure=np.ones((3, 3)))
    if n == 0:
        return 0.0
    total = 0
    for sl, idx in zip(ndimage.find_objects(labels), range(1, n + 1)):
        extent = max(sl[0].stop - sl[0].start, sl[1].stop - sl[1].start)
        if extent < 12:
            continue
        count = int((labels[sl] == idx).sum())
        if count <= 2.5 * extent:  # thin: about one or two pixels per unit of length
            total += count
    return total / 64.0


def image_defects(rgb: np.ndarray) -> dict[str, float]:
    grey = rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    edges, near_edges = edge_mask(grey)
    noise = noise_sigma(grey, near_edges)
    return {
        "noise": noise,
        "blur": blur_amount(grey, edges),
        "block": blockiness(grey),
        "lines": stray_lines(rgb, noise),
    }


class QualityJudge(ScoringJudge):
    """Options: ``weights`` for the four defects (noise, blur, block, lines), default all 1.0."""

    algorithm = "quality"
    version = 1
    margin_scale = 1.0

    def __init__(self, name: str | None = None, seed: int = 0, weights: dict[str, float] | None = None, **_: Any) -> None:
        super().__init__(name=name, seed=seed)
        w = {"noise": 1.0, "blur": 1.0, "block": 1.0, "lines": 1.0}
        if weights:
            unknown = set(weights) - set(w)
            if unknown:
                raise ValueError(f"unknown quality weights {sorted(unknown)} (known: {sorted(w)})")
            w.update({k: float(v) for k, v in weights.items()})
        self.weights = w
        self._cache = LruCache(size=8192)

    def options(self) -> dict[str, Any]:
        return {"weights": dict(self.weights)}

    def penalty(self, defects: dict[str, float]) -> float:
        parts = {
            "noise": np.clip(defects["noise"] / 12.0, 0.0, 1.0),
            "blur": defects["blur"],
            "block": np.clip(defects["block"] / 3.0, 0.0, 1.0),
            "lines": np.clip(defects["lines"], 0.0, 1.0),
        }
        return float(sum(self.weights[k] * parts[k] for k in parts))

    def response_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        images = response.images
        if not images:
            return None, {}
        defects = [self._cache.get(im.digest, lambda im=im: image_defects(image_array(im))) for im in images]
        penalty = float(np.mean([self.penalty(d) for d in defects]))
        return -penalty, {"defects": defects[0] if len(defects) == 1 else defects}
