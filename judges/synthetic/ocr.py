"""An OCR judge: reads the text rendered in each response image and compares it with the text the
prompt quotes (``a sign that says "CAT"``).

Reading uses the pretrained recognition model that ships inside the ``rapidocr`` package (PP-OCR,
ONNX, CPU). Full detection misreads text on 128 px images, so the judge finds the ink itself
(dark, unsaturated pixels, preferring the white banner at the bottom when there is one), crops it
with a margin and runs recognition only. Each distinct image (by pixel digest) is read once per
process.

A response's score is, for each quoted string, the best similarity (one minus the normalised edit
distance, case- and punctuation-insensitive) over the response's images, averaged over the quoted
strings. A prompt without quoted text, or a response without images, gives no signal.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import unicodedata
from typing import Any, Callable

import numpy as np

from bon.content import Content, ImageItem, Prompt
from bon.errors import BonError

from judges.synthetic._scoring import LruCache, ScoringJudge, channel_max, channel_min, image_array, quoted_texts


_ENGINE: Any = None
_ENGINE_ERROR: str | None = None
_ENGINE_LOCK = threading.Lock()
_READ_CACHE = LruCache()  # digest -> text read; strings are small


def _forget_engine() -> None:
    """A forked worker starts its own engine: the parent's ONNX thread pool does not survive a fork."""
    global _ENGINE, _ENGINE_LOCK
    _ENGINE, _ENGINE_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_engine)


def engine() -> Any:
    """The process-wide RapidOCR engine, created on first use; raises BonError when unavailable."""
    global _ENGINE, _ENGINE_ERROR
    with _ENGINE_LOCK:
        if _ENGINE is None and _ENGINE_ERROR is None:
            try:
                import onnxruntime

                onnxruntime.set_default_logger_severity(3)
                logging.getLogger("RapidOCR").setLevel(logging.ERROR)
                from rapidocr import RapidOCR

                # one thread: the crops are tiny, so a thread pool costs more than it saves (about 2x the
                # CPU time on two cores), and the study runs judges side by side anyway
                _ENGINE = RapidOCR(params={"Global.log_level": "error",
                                           "EngineConfig.onnxruntime.intra_op_num_threads": 1,
                                           "EngineConfig.onnxruntime.inter_op_num_threads": 1})
            except ImportError as exc:
                _ENGINE_ERROR = f"rapidocr is not installed ({exc}); pip install rapidocr onnxruntime"
            except Exception as exc:  # a broken install or missing model file
                _ENGINE_ERROR = f"rapidocr could not start: {type(exc).__name__}: {exc}"
        if _ENGINE_ERROR is not None:
            raise BonError(_ENGINE_ERROR)
        return _ENGINE


def ink_crop(rgb: np.ndarray, pad: int = 4) -> np.ndarray | None:
    """The text region: dark unsaturated pixels, inside the white banner when one is found.

    Returns the crop (original pixels, padded by ``pad``), or None when there is no ink.
    """
    import cv2

    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    # speckle-proof masks: a 3x3 median per channel, edges repeated (exactly scipy.ndimage.median_filter's
    # size (3, 3, 1), mode "nearest"; OpenCV's is much faster)
    den = cv2.medianBlur(rgb, 3)
    ink = _dark(rgb) | _dark(den)
    lo = channel_min(den)
    h, w = ink.shape
    # rows that are mostly near-white form the banner (text rows stay mostly white too)
    banner = _longest_run((lo > 245).mean(axis=1) > 0.45, gap=3)
    if banner is not None and banner[1] - banner[0] >= 8 and ink[banner[0] : banner[1]].sum() >= 4:
        keep = np.zeros(h, dtype=bool)
        keep[banner[0] : banner[1]] = True
        ink &= keep[:, None]
    rows = ink.sum(axis=1) >= 2
    run = _longest_run(rows, gap=3)
    if run is None:
        return None
    y0, y1 = run
    cols = np.nonzero(ink[y0:y1].any(axis=0))[0]
    if cols.size == 0:
        return None
    x0, x1 = int(cols[0]), int(cols[-1]) + 1
    y0, y1 = max(y0 - pad, 0), min(y1 + pad, h)
    x0, x1 = max(x0 - pad, 0), min(x1 + pad, w)
    return np.ascontiguousarray(rgb[y0:y1, x0:x1])


def _dark(rgb: np.ndarray) -> np.ndarray:
    """Black-ish, unsaturated pixels (glyph ink; the palette colours are all saturated) of a uint8 image
    (``hi - lo`` cannot wrap: the maximum is never below the minimum)."""
    hi, lo = channel_max(rgb), channel_min(rgb)
    return (hi < 140) & (hi - lo < 45)


def _longest_run(mask: np.ndarray, gap: int) -> tuple[int, int] | None:
    """``(start, stop)`` of the longest run of True, bridging gaps of up to ``gap`` False entries."""
    idx = np.nonzero(mask)[0]
    if idx.size == 0:
        return None
    best = cur = (int(idx[0]), int(idx[0]) + 1)
    for i in idx[1:]:
        i = int(i)
        if i - cur[1] <= gap:
            cur = (cur[0], i + 1)
        else:
            cur = (i, i + 1)
        if cur[1] - cur[0] > best[1] - best[0]:
            best = cur
    return best


def read_image(item: ImageItem) -> str:
    """The text OCR reads in one image, once per process (cached by pixel digest)."""
    return _READ_CACHE.get(item.digest, lambda: _read(image_array(item)))


def _read(rgb: np.ndarray) -> str:
    eng = engine()
    crop = ink_crop(rgb)
    if crop is None:
        return ""
    out = eng(crop, use_det=False, use_cls=False, use_rec=True)
    return " ".join(t for t in out.txts or () if t)


def normalise(text: str) -> str:
    """Upper-case letters and digits only: accents folded, spaces and punctuation dropped (the
    banner's fixed-width cells make a reader insert or drop spaces at random)."""
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return re.sub(r"[^0-9A-Z]+", "", folded.upper())


# glyph pairs this font draws almost alike: a substitution between them costs a quarter
CONFUSABLE = {frozenset("O0"), frozenset("I1")}


def glyph_substitution(x: str, y: str) -> float:
    """The cost of reading ``y`` for ``x``: a quarter for a confusable pair (O/0, I/1)."""
    return 0.0 if x == y else (0.25 if frozenset((x, y)) in CONFUSABLE else 1.0)


def edit_distances(a: str, b: str, substitution: Callable[[str, str], float] = lambda x, y: float(x != y),
                   anywhere: bool = False) -> list[float]:
    """The last row of the edit-distance table from ``a`` to each prefix of ``b``; with ``anywhere``, a
    match may also start anywhere in ``b`` (its minimum is then the distance to the closest stretch)."""
    prev = [0.0 if anywhere else float(j) for j in range(len(b) + 1)]
    for i, ca in enumerate(a, 1):
        cur = [float(i)]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1.0, cur[j - 1] + 1.0, prev[j - 1] + substitution(ca, cb)))
        prev = cur
    return prev


def similarity(a: str, b: str) -> float:
    """1 - edit distance / max length on normalised strings; 1.0 for two empty strings."""
    a, b = normalise(a), normalise(b)
    if not a and not b:
        return 1.0
    return 1.0 - edit_distances(a, b, glyph_substitution)[-1] / max(len(a), len(b))


class OcrJudge(ScoringJudge):
    """Options: none beyond ``name`` and ``seed`` (the OCR model is the one rapidocr ships)."""

    algorithm = "ocr"
    relative_cost = 6.0  # a recognition model run on every image with text (bon.stages.pool starts the costliest first)
    version = 1
    margin_scale = 1.5  # one wrong letter in a 3-letter word is 0.33 apart: a clear preference

    def options(self) -> dict[str, Any]:
        return {"reader": "rapidocr-rec", "crop": "ink"}

    def response_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        targets = quoted_texts(prompt.content.text)
        images = response.images
        if not targets or not images:
            return None, {}
        reads = [read_image(im) for im in images]
        best = [max(similarity(r, t) for r in reads) for t in targets]
        return float(np.mean(best)), {"read": reads}
