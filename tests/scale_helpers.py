"""What 'the same run folder' means for the scale tests: every file a study writes that does not
record wall time, and every row of the judgment store except its timestamp."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import yaml

from bon.demo import demo_raw

SAME_FILES = ("results.csv", "picks.jsonl", "scores.jsonl", "prompts.jsonl", "candidates/strong/candidates.jsonl",
              "candidates/weak/candidates.jsonl")


def tiny_demo_config(folder: Path, prompts: int = 2, n: int = 3, seed: int = 3) -> Path:
    """The demo study at a tiny size, as a config file for ``bon run``."""
    path = folder / "demo.yaml"
    path.write_text(yaml.safe_dump(demo_raw(prompts=prompts, n=n, seed=seed)), encoding="utf-8")
    return path


def store_rows(path: Path) -> dict[str, list[tuple]]:
    db = sqlite3.connect(path)
    try:
        return {
            "judges": sorted(db.execute("SELECT * FROM judges")),
            "judgments": sorted(db.execute("SELECT judge_id, prompt, a, b, sample, better, score, missing, meta FROM judgments")),
            "scores": sorted(db.execute("SELECT judge_id, prompt, response, sample, value, missing, meta FROM scores")),
        }
    finally:
        db.close()


def tree_files(root: Path, sub: str) -> dict[str, bytes]:
    base = root / sub
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def assert_same_run(got: Path, want: Path) -> None:
    """The two run folders hold the same study outcome, file for file."""
    for name in SAME_FILES:
        assert (got / name).read_text(encoding="utf-8") == (want / name).read_text(encoding="utf-8"), name
    for sub in ("mmrb2", "candidates/strong/images", "candidates/weak/images", "inputs"):
        assert tree_files(got, sub) == tree_files(want, sub), sub
    assert store_rows(got / "judgments.sqlite") == store_rows(want / "judgments.sqlite")
