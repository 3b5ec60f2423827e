"""``labels``: downstream scores read from a file (human ratings, or another tool's output).

One row per rating, keyed by prompt and candidate:

- CSV or TSV with a header, JSONL, or JSON (a list of objects, or ``{"labels": [...]}``);
- columns ``prompt_id``, ``generator``, ``index`` and ``score`` (names set by ``prompt_column``,
  ``generator_column``, ``index_column``, ``score_column``); instead of generator and index, a
  ``candidate`` column ``"<generator>/<index>"`` also works. A file without a generator column labels
  candidate ``index`` of every generator alike. A study's own ``scores.jsonl`` reads as is.

Several rows for one candidate (several raters) are averaged (``aggregate``: mean | median); rows
with an empty score are skipped. ``scale: [lo, hi]`` maps raw values onto [0, 1] (a 1-5 Likert scale:
``[1, 5]``); without it every value must already lie in [0, 1]. The file is read and checked when the
verifier is made, so a bad file fails at once with the line that is wrong. A candidate without a
label gets a missing score (``no label for ...``), never a zero.

Identity: the file's path and SHA-256, the columns and the scale.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import statistics
from pathlib import Path
from typing import Any

from bon.content import Candidate, Prompt, read_jsonl
from bon.errors import BonError
from bon.plugins import Score, Verifier


class LabelsVerifier(Verifier):
    plugin = "labels"
    version = 1

    def __init__(self, path: str | None = None, name: str | None = None, model: str | None = None,
                 prompt_column: str = "prompt_id", generator_column: str = "generator", index_column: str = "index",
                 score_column: str = "score", candidate_column: str = "candidate", scale: Any = None,
                 aggregate: str = "mean") -> None:
        self.name = name or self.plugin
        path = path or model  # labels:FILE
        if not path:
            raise BonError(f"{self.name}: option 'path' (the labels file) is required")
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise BonError(f"{self.name}: labels file {self.path} not found")
        if aggregate not in ("mean", "median"):
            raise BonError(f"{self.name}: aggregate must be mean or median, got {aggregate!r}")
        self.columns = {"prompt": prompt_column, "generator": generator_column, "index": index_column,
                        "score": score_column, "candidate": candidate_column}
        self.scale = _scale(scale, self.name)
        self.aggregate = aggregate
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()
        self.labels = self._load()

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "plugin": self.plugin, "path": str(self.path), "sha256": self.sha256,
                "columns": self.columns, "scale": self.scale}

    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        for key in ((candidate.generator, prompt.id, candidate.index), (None, prompt.id, candidate.index)):
            if key in self.labels:
                values = self.labels[key]
                raw = statistics.fmean(values) if self.aggregate == "mean" else statistics.median(values)
                return Score(self._norm(raw), {"raw": raw, "ratings": len(values), "labels": self.path.name})
        return Score(None, missing=f"{self.name}: no label for prompt {prompt.id} candidate {candidate.generator}/{candidate.index} "
                                   f"in {self.path.name}")

    def _norm(self, raw: float) -> float:
        if self.scale is None:
            return raw
        lo, hi = self.scale
        return (raw - lo) / (hi - lo)

    # --- reading ---------------------------------------------------------------------------------
    def _load(self) -> dict[tuple[str | None, str, int], list[float]]:
        rows = list(self._rows())
        if not rows:
            raise BonError(f"{self.path}: no labels")
        c = self.columns
        out: dict[tuple[str | None, str, int], list[float]] = {}
        for where, row in rows:
            if row.get(c["prompt"]) in (None, ""):
                raise BonError(f"{where}: no {c['prompt']}")
            gen, idx = row.get(c["generator"]), row.get(c["index"])
            if (gen in (None, "") or idx in (None, "")) and row.get(c["candidate"]) not in (None, ""):
                gen, _, idx = str(row[c["candidate"]]).rpartition("/")
            if idx in (None, ""):
                raise BonError(f"{where}: no {c['index']} (or {c['candidate']} as generator/index)")
            try:
                index = int(float(idx))
            except (TypeError, ValueError):
                raise BonError(f"{where}: {c['index']} {idx!r} is not an integer") from None
            value = row.get(c["score"])
            if value in (None, "") or (isinstance(value, float) and math.isnan(value)):
                continue  # not rated
            try:
                v = float(value)
            except (TypeError, ValueError):
                raise BonError(f"{where}: {c['score']} {value!r} is not a number") from None
            if math.isnan(v):
                continue
            if self.scale is None and not 0.0 <= v <= 1.0:
                raise BonError(f"{where}: score {v:g} outside [0, 1]; give scale: [lo, hi] to map raw ratings")
            if self.scale is not None and not self.scale[0] <= v <= self.scale[1]:
                raise BonError(f"{where}: score {v:g} outside the scale {self.scale}")
            key = (str(gen) if gen not in (None, "") else None, str(row[c["prompt"]]), index)
            out.setdefault(key, []).append(v)
        if not out:
            raise BonError(f"{self.path}: every row's score is empty")
        return out

    def _rows(self):
        suffix = self.path.suffix.lower()
        if suffix == ".jsonl":
            for n, rec in read_jsonl(self.path, torn_tail_ok=False):
                yield f"{self.path}:{n}", rec
            return
        text = self.path.read_text(encoding="utf-8-sig")
        if suffix in (".csv", ".tsv"):
            reader = csv.DictReader(text.splitlines(), delimiter="\t" if suffix == ".tsv" else ",")
            for n, row in enumerate(reader, 2):
                yield f"{self.path}:{n}", row
        elif suffix == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise BonError(f"{self.path}: not valid JSON ({exc.msg})") from None
            if isinstance(data, dict):
                data = data.get("labels")
            if not isinstance(data, list):
                raise BonError(f"{self.path}: expected a list of labels (or {{\"labels\": [...]}})")
            for n, rec in enumerate(data):
                if not isinstance(rec, dict):
                    raise BonError(f"{self.path}: labels[{n}] is not an object")
                yield f"{self.path} labels[{n}]", rec
        else:
            raise BonError(f"{self.path}: labels must be .csv, .tsv, .jsonl or .json")


def _scale(scale: Any, who: str) -> tuple[float, float] | None:
    if scale is None:
        return None
    try:
        lo, hi = (float(v) for v in scale)
    except (TypeError, ValueError):
        raise BonError(f"{who}: scale must be [lo, hi], got {scale!r}") from None
    if not hi > lo:
        raise BonError(f"{who}: scale needs hi > lo, got {scale!r}")
    return lo, hi
