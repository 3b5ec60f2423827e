"""Where everything lives inside a run folder; the one place that knows the layout."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bon.content import slug
from bon.errors import BonError


@dataclass(frozen=True)
class RunFolder:
    root: Path
    create: bool = field(default=True, compare=False)  # False: the folder must exist already (--run DIR)

    def __post_init__(self) -> None:
        if not self.create:
            if not self.root.is_dir():
                raise BonError(f"{self.root}: no such run folder" if not self.root.exists() else f"{self.root}: not a folder")
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BonError(f"{self.root}: cannot create the run folder ({exc.strerror})") from None
        if not os.access(self.root, os.W_OK):
            raise BonError(f"{self.root}: run folder is not writable")

    def check_writable(self) -> None:
        """Fail before any work when files cannot be created here (``os.access`` says yes to root even
        on a read-only mount, so really try)."""
        probe = self.root / f".bon-write-test-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise BonError(f"{self.root}: run folder is not writable ({exc.strerror or exc})") from None

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
    ledger = property(lambda self: self.root / "invocations.json")  # every run of the study: ids, stage times
    picks_dir = property(lambda self: self.root / "picks")

    def picks_file(self, judge: str, strategy_label: str, n: int | None = None) -> Path:
        """Picks of ``bon select``: one file per judge, strategy with its aggregate (``round-robin-borda``) and n."""
        return self.picks_dir / f"{slug(judge)}__{slug(strategy_label)}{f'__n{n}' if n else ''}.jsonl"

    def curve_file(self, judge: str, strategy_label: str) -> Path:
        """A ``bon curve`` result (the report draws every one it finds)."""
        return self.root / "curves" / f"{slug(judge)}__{slug(strategy_label)}.json"

    def picks_files(self) -> list[Path]:
        """The study's ``picks.jsonl`` and every ``bon select`` picks file (for leaderboards and reports)."""
        extra = sorted(self.picks_dir.glob("*.jsonl")) if self.picks_dir.is_dir() else []
        return ([self.picks] if self.picks.exists() else []) + extra

    def candidates_dir(self, generator: str) -> Path:
        return self.root / "candidates" / slug(generator)

    def candidates(self, generator: str) -> Path:
        return self.candidates_dir(generator) / "candidates.jsonl"

    def judgment_file(self, judge: str, task_file: str) -> Path:
        return self.mmrb2 / "judgments" / slug(judge) / task_file


def write_json(path: Path, data: Any) -> None:
    """Atomic JSON write: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    tmp.replace(path)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
