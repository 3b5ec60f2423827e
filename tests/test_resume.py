"""A study survives SIGKILL and call budgets: the rerun finishes with the same picks and files,
and the study's call counts (totals over all invocations) equal those of an uninterrupted one."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from bon.cli import main

ARGS = ["--prompts", "2", "--n", "4", "--seed", "3"]


def _judges(run: Path) -> dict:
    return json.loads((run / "stats.json").read_text())["judges"]


def _calls_made(run: Path, part: str = "total") -> int:
    return sum(s[part]["calls_made"] for s in _judges(run).values())


def _accounting_adds_up(whole: Path, resumed: Path, made_before: int) -> None:
    """Totals over all invocations equal the uninterrupted run's; the last invocation made the rest."""
    assert _calls_made(resumed) == _calls_made(whole)
    assert _calls_made(resumed, "last_invocation") == _calls_made(whole) - made_before
    for name, s in _judges(resumed).items():
        w = _judges(whole)[name]
        assert s["calls_made"] == s["total"]["calls_made"]  # the top-level counters are the totals
        assert s["total"]["calls_made"] + s["total"]["calls_cached"] == w["total"]["calls_made"] + w["total"]["calls_cached"], name
        assert s["total"]["judge_seconds"] >= s["last_invocation"]["judge_seconds"] - 1e-3
        for stage in ("mmrb2", "selection"):
            assert s[stage]["calls_made"] == w[stage]["calls_made"], (name, stage)
    stats = json.loads((resumed / "stats.json").read_text())
    assert stats["invocations"] == 2
    assert stats["timings_s"]["generate"] >= stats["timings_last_invocation_s"]["generate"]


def _stored(run: Path) -> int:
    try:
        with sqlite3.connect(run / "judgments.sqlite") as db:
            return db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    except sqlite3.OperationalError:  # the killed run had not created the table yet
        return 0


def _same_outputs(a: Path, b: Path) -> None:
    assert (a / "picks.jsonl").read_text() == (b / "picks.jsonl").read_text()
    pd.testing.assert_frame_equal(pd.read_csv(a / "results.csv"), pd.read_csv(b / "results.csv"))
    for f in sorted((a / "mmrb2").rglob("*.json")):
        assert f.read_text() == (b / "mmrb2" / f.relative_to(a / "mmrb2")).read_text(), f


def test_sigkill_midway_then_rerun_matches_uninterrupted(tmp_path):
    whole = tmp_path / "whole"
    assert main(["demo", "--out", str(whole), *ARGS]) == 0
    total = _calls_made(whole)

    killed = tmp_path / "killed"
    env = {**os.environ, "BON_QUIET": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bon.cli", "demo", "--out", str(killed), *ARGS], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if (killed / "judgments.sqlite").exists() and _stored(killed) > total // 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the study finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    made_before = _stored(killed)
    assert 0 < made_before < total

    assert main(["demo", "--out", str(killed), *ARGS]) == 0
    assert _calls_made(killed) == total
    _accounting_adds_up(whole, killed, made_before)
    _same_outputs(whole, killed)


def test_budget_stops_cleanly_and_resumes(tmp_path, capsys):
    whole = tmp_path / "whole"
    assert main(["demo", "--out", str(whole), *ARGS]) == 0
    total = _calls_made(whole)

    run = tmp_path / "capped"
    assert main(["demo", "--out", str(run), *ARGS, "--max-calls", "150"]) == 3
    err = capsys.readouterr().err
    assert "budget of 150 new judge calls" in err and "Traceback" not in err
    stats = json.loads((run / "stats.json").read_text())
    assert stats["stopped"] and _stored(run) <= 150
    first = _stored(run)
    assert main(["demo", "--out", str(run), *ARGS]) == 0
    assert _calls_made(run) == total
    _accounting_adds_up(whole, run, first)
    _same_outputs(whole, run)
