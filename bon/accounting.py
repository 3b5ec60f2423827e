"""What a study cost over all its invocations, not just the last one.

A study is often run several times in one folder (interrupted, budget-capped, resumed). The judgment
store records which invocation and stage paid for every answer (with its judge seconds, tokens and
dollars), and the run folder's ledger (``invocations.json``) lists the study's invocations with their
stage wall times. Together they give per judge and stage the study's totals plus the last invocation's
share, even when an earlier invocation was killed before it could write anything else.
"""

from __future__ import annotations

import json
import time
from typing import Any, Mapping

from bon.errors import BonError
from bon.runfolder import RunFolder, write_json
from bon.store import JudgmentStore

JUDGE_STAGES = ("mmrb2", "selection")  # the preference set (accuracy) and Best-of-N selection


class Ledger:
    """``invocations.json``: one entry per ``bon run``/``bon demo`` of the study, saved as it goes."""

    def __init__(self, run: RunFolder, invocation: str, command: str):
        self.path = run.ledger
        self.entries: list[dict[str, Any]] = _read_entries(run)
        self.previous = len(self.entries)
        self.entry: dict[str, Any] = {"id": invocation, "command": command, "started": _iso(time.time()),
                                      "timings_s": {}, "judges_wall_s": {}}
        self.entries.append(self.entry)
        self.save()

    def save(self) -> None:
        write_json(self.path, {"invocations": self.entries})

    def ids(self) -> list[str]:
        return [str(e["id"]) for e in self.entries]

    def lap(self, stage: str, seconds: float) -> None:
        self.entry["timings_s"][stage] = round(seconds, 2)
        self.save()

    def judge_wall(self, judge: str, stage: str, seconds: float) -> None:
        self.entry["judges_wall_s"].setdefault(judge, {})[stage] = round(seconds, 2)
        self.save()

    def timings(self, last_only: bool = False) -> dict[str, float]:
        """Stage wall times: summed over every invocation, or the last one's."""
        total: dict[str, float] = {}
        for e in [self.entry] if last_only else self.entries:
            for stage, seconds in (e.get("timings_s") or {}).items():
                total[stage] = round(total.get(stage, 0.0) + float(seconds), 2)
        return total

    def judge_wall_total(self, judge: str, stage: str) -> float:
        return round(sum(float((e.get("judges_wall_s") or {}).get(judge, {}).get(stage, 0.0)) for e in self.entries), 2)


def _read_entries(run: RunFolder) -> list[dict[str, Any]]:
    if not run.ledger.exists():
        return []
    try:
        entries = json.loads(run.ledger.read_text(encoding="utf-8"))["invocations"]
    except (OSError, ValueError, KeyError, TypeError):
        raise BonError(f"{run.ledger}: damaged invocation ledger (expected {{\"invocations\": [...]}})") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "id" in e for e in entries):
        raise BonError(f"{run.ledger}: damaged invocation ledger (entries need an 'id')")
    return entries


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def judge_accounting(store: JudgmentStore, judge_id: str, judge: str, ledger: Ledger,
                     last: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Per stage and summed: the study's totals over all invocations, and the last invocation's share.

    ``last`` holds this invocation's counters per stage (``CallStats.as_dict()``). Totals: calls made,
    judge seconds, tokens and dollars are what the store says the study's invocations paid for; calls
    cached are the comparisons the study asked for that it never paid for (repeats, other studies'
    answers); wall seconds add up the ledger; missing answers are those of the last complete asking.
    """
    paid = store.totals(judge_id, ledger.ids())
    walls = ledger.entry["judges_wall_s"].get(judge, {})
    total_by_stage, last_by_stage = {}, {}
    for stage, now in last.items():
        bought = paid.get(stage, {})
        made = int(bought.get("calls_made", 0))
        total_by_stage[stage] = {
            "calls_made": made,
            "calls_cached": max(0, int(now["calls_made"]) + int(now["calls_cached"]) - made),
            "missing": now["missing"],
            "judge_seconds": bought.get("judge_seconds", 0.0),
            "input_tokens": bought.get("input_tokens", 0),
            "output_tokens": bought.get("output_tokens", 0),
            "cost_usd": bought.get("cost_usd", 0.0),
            "wall_seconds": ledger.judge_wall_total(judge, stage),
            "missing_reasons": dict(now.get("missing_reasons") or {}),
            "first_call": _iso(bought.get("first")),
            "last_call": _iso(bought.get("last")),
        }
        last_by_stage[stage] = {**now, "wall_seconds": float(walls.get(stage, 0.0))}
    total, latest = add_counters(*total_by_stage.values()), add_counters(*last_by_stage.values())
    return {**total, "total": total, "last_invocation": {**latest, **last_by_stage},
            "invocations": len(ledger.entries), **total_by_stage}


def add_counters(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """Sum the numeric counters of several stats dicts (count dicts such as reasons merged, text skipped)."""
    total: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, Mapping):
                merged = total.setdefault(key, {})
                for k, v in value.items():
                    if isinstance(v, (int, float)):
                        merged[k] = merged.get(k, 0) + v
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = round(total.get(key, 0) + value, 6)
    return total


def resume_message(run: RunFolder, generators: list[str], n: int) -> str | None:
    """``resuming: 1,204 candidates, 31,880 judgments found`` when the folder holds earlier work."""
    from bon.stages.generate import load_done

    if not run.config.exists():
        return None
    candidates = sum(len(c) for g in generators for c in load_done(run, g, n).values())
    scores = sum(1 for line in run.scores.open(encoding="utf-8") if line.strip()) if run.scores.exists() else 0
    judgments = 0
    if run.store.exists():
        import sqlite3

        try:
            with sqlite3.connect(f"file:{run.store}?mode=ro", uri=True) as db:
                judgments = sum(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("judgments", "scores"))
        except sqlite3.Error:
            judgments = 0
    return f"resuming: {candidates:,} candidates, {scores:,} verifier scores, {judgments:,} judgments found"
