"""``ocr-text``: is the text a prompt quotes rendered in the image? (text-to-image, packaged OCR)

The prompt's quoted strings (``a sign that says "OPEN"``: straight or curly double quotes, and curly
single quotes) are the targets. Each candidate image is read by the OCR model that ships inside the
``rapidocr`` package (PP-OCR, ONNX, CPU: text detection then recognition); lines read with less than
``min_confidence`` are dropped. A target's similarity is one minus the edit distance between it and
the closest stretch of the read text, divided by the target's length (letters and digits only,
case-folded, accents dropped), so extra text around it costs nothing; the score is the mean over
targets of the best similarity over the candidate's images, in [0, 1].

A prompt that quotes nothing is a missing score (``the prompt quotes no text``): the check does not
apply. A candidate without an image, or an OCR engine that cannot start, is missing too.

Options: ``min_confidence`` (0.5), ``single_quotes`` (false: also read 'straight single' quotes, which
apostrophes make ambiguous), ``case_sensitive`` (false).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from typing import Any

from bon.content import Candidate, Prompt
from bon.errors import BonError
from bon.plugins import Score, Verifier

DOUBLE = re.compile(r"\"([^\"]+)\"|\u201c([^\u201d]+)\u201d|\u2018([^\u2019]+)\u2019")
SINGLE = re.compile(r"(?<![\w])'([^']{2,}?)'(?![\w])")
_cache: dict[tuple[str, float], list[tuple[str, float]]] = {}
_lock = threading.Lock()


def quoted(text: str, single: bool = False) -> list[str]:
    """The strings ``text`` quotes, in order, without repeats."""
    found = [next(g for g in m.groups() if g) for m in DOUBLE.finditer(text)]
    if single:
        found += [m.group(1) for m in SINGLE.finditer(text)]
    return list(dict.fromkeys(q.strip() for q in found if q.strip()))


def fold(text: str, case_sensitive: bool = False) -> str:
    """Letters and digits only, accents dropped (OCR inserts and drops spaces and punctuation at will)."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(ch for ch in t if not unicodedata.combining(ch))
    t = "".join(ch for ch in t if ch.isalnum())
    return t if case_sensitive else t.casefold()


def substring_similarity(target: str, text: str) -> float:
    """1 - (edit distance from ``target`` to the best-matching stretch of ``text``) / len(target)."""
    from judges.synthetic.ocr import edit_distances

    if not target:
        return 1.0
    return max(0.0, 1.0 - min(edit_distances(target, text, anywhere=True)) / len(target))  # best end anywhere


class OcrTextVerifier(Verifier):
    plugin = "ocr-text"
    version = 1

    def __init__(self, name: str | None = None, min_confidence: float = 0.5, single_quotes: bool = False,
                 case_sensitive: bool = False) -> None:
        self.name = name or self.plugin
        if not 0.0 <= float(min_confidence) <= 1.0:
            raise BonError(f"{self.name}: min_confidence must lie in [0, 1], got {min_confidence}")
        self.min_confidence = float(min_confidence)
        self.single_quotes = bool(single_quotes)
        self.case_sensitive = bool(case_sensitive)

    def identity(self) -> dict[str, Any]:
        from importlib import metadata

        try:
            version = metadata.version("rapidocr")
        except metadata.PackageNotFoundError:
            version = None
        return {"name": self.name, "plugin": self.plugin, "reader": f"rapidocr=={version}",
                "min_confidence": self.min_confidence, "single_quotes": self.single_quotes,
                "case_sensitive": self.case_sensitive}

    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        targets = quoted(prompt.content.text, self.single_quotes)
        if not targets:
            return Score(None, {"quotes": []}, missing=f"{self.name}: the prompt quotes no text")
        if not candidate.content.images:
            return Score(None, {"quotes": targets}, missing=f"{self.name}: the candidate has no image")
        try:
            reads = [self.read(item) for item in candidate.content.images]
        except BonError as exc:
            return Score(None, {"quotes": targets}, missing=f"{self.name}: {exc}")
        texts = [fold("".join(t for t, c in lines if c >= self.min_confidence), self.case_sensitive) for lines in reads]
        per = {}
        for q in targets:
            target = fold(q, self.case_sensitive)
            per[q] = max(substring_similarity(target, t) for t in texts) if target else 1.0
        value = sum(per.values()) / len(per)
        details = {"quotes": targets, "similarity": {k: round(v, 4) for k, v in per.items()},
                   "read": [[(t, round(c, 3)) for t, c in lines] for lines in reads], "reader": self.identity()["reader"]}
        return Score(value, details)

    def read(self, item: Any) -> list[tuple[str, float]]:
        """OCR lines ``(text, confidence)`` of one image, cached by pixel digest."""
        key = (item.digest, 0.0)
        with _lock:
            if key in _cache:
                return _cache[key]
        from judges.synthetic.ocr import engine

        eng = engine()
        try:
            out = eng(item.load())
        except BonError:
            raise
        except Exception as exc:  # noqa: BLE001 - a reader crash on one image is that candidate's missing score
            raise BonError(f"OCR failed: {type(exc).__name__}: {exc}") from None
        lines = [(str(t), float(s)) for t, s in zip(out.txts or (), out.scores or ())]
        with _lock:
            if len(_cache) > 4096:
                _cache.clear()
            _cache[key] = lines
        return lines
