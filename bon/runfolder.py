"""Where everything lives inside a run folder; the one place that knows the layout."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bon.content import slug
from bon.errors import BonError
from bon.io import atomic_write


@dataclass(frozen=True)
class RunFolder:
    root: Path

    def __post_init__(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BonError(f"{self.root}: cannot create the run folder ({exc.strerror})") from None
        if not os.access(self.root, os.W_OK):
            raise BonError(f"{self.root}: run folder is not writable")

    config = property(lambda self: self.root / "config.yaml")
    prompts = property(lambda self: self.root / "prompts.jsonl")
    inputs = property(lambda self: self.root / "inputs")
    store = property(lambda self: self.root / "judgments.sqlite")
    scores = property(lambda self: self.root / "scores.jsonl")
    picks = property(lambda self: self.root / "picks.jsonl")
    results = property(lambda self: self.root / "results.csv")
    correlations = property(lambda self: self.root / "correlations.csv")
    stats = property(lambda self: self.root / "stats.json")
    report = property(lambda self: self.root / "report.md")
    figure = property(lambda self: self.root / "correlation.png")
    mmrb2 = property(lambda self: self.root / "mmrb2")

    def candidates_dir(self, generator: str) -> Path:
        return self.root / "candidates" / slug(generator)

    def candidates(self, generator: str) -> Path:
        return self.candidates_dir(generator) / "candidates.jsonl"

    def judgment_file(self, judge: str, task_file: str) -> Path:
        return self.mmrb2 / "judgments" / slug(judge) / task_file


def write_json(path: Path, data: Any) -> None:
    """Atomic JSON write: a reader never sees half a file."""
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False, default=str))


def write_text(path: Path, text: str) -> None:
    atomic_write(path, text)
