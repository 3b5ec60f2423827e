"""A study survives SIGKILL and call budgets: the rerun finishes with the same picks and files,
and the calls of the interrupted runs add up to those of an uninterrupted one."""

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


def _calls_made(run: Path) -> int:
    return sum(s["calls_made"] for s in json.loads((run / "stats.json").read_text())["judges"].values())


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
    assert made_before + _calls_made(killed) == total
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
    assert first + _calls_made(run) == total
    _same_outputs(whole, run)
