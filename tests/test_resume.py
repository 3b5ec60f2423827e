"""A study survives SIGKILL and call budgets: the rerun finishes with the same picks and files,
and the study's call counts (totals over all invocations) equal those of an uninterrupted one. The
kill comes while a judge in a forked worker is partway through: what it had answered is kept."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bon.cli import main
from bon.referee import KILL_ENV

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


def _stored(run: Path) -> dict[str, int]:
    """Judgments in the store per judge id (empty before the killed run had created the table)."""
    try:
        with sqlite3.connect(run / "judgments.sqlite") as db:
            return dict(db.execute("SELECT judge_id, COUNT(*) FROM judgments GROUP BY judge_id").fetchall())
    except sqlite3.OperationalError:
        return {}


def _same_outputs(a: Path, b: Path) -> None:
    assert (a / "picks.jsonl").read_text() == (b / "picks.jsonl").read_text()
    pd.testing.assert_frame_equal(pd.read_csv(a / "results.csv"), pd.read_csv(b / "results.csv"))
    for f in sorted((a / "mmrb2").rglob("*.json")):
        assert f.read_text() == (b / "mmrb2" / f.relative_to(a / "mmrb2")).read_text(), f


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    """The uninterrupted study both tests compare with."""
    run = tmp_path_factory.mktemp("resume") / "whole"
    assert main(["demo", "--out", str(run), *ARGS]) == 0
    return run


def test_sigkill_while_a_worker_judges_then_rerun_matches_uninterrupted(whole, tmp_path):
    total, full = _calls_made(whole), _stored(whole)
    killed = tmp_path / "killed"
    # judges in forked workers even on one core; a judge that has stored 20 answers kills the whole study
    env = {**os.environ, "BON_QUIET": "1", "BON_WORKERS": "2", KILL_ENV: "20"}
    proc = subprocess.run([sys.executable, "-m", "bon.cli", "demo", "--out", str(killed), *ARGS], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    kept = _stored(killed)
    made_before = sum(kept.values())
    assert 0 < made_before < total
    assert any(0 < k < full[j] for j, k in kept.items())  # a judge killed partway kept what it had answered

    assert main(["demo", "--out", str(killed), *ARGS]) == 0
    assert _calls_made(killed) == total
    assert _calls_made(killed, "last_invocation") < total
    _accounting_adds_up(whole, killed, made_before)
    _same_outputs(whole, killed)


def test_budget_stops_cleanly_and_resumes(whole, tmp_path, capsys):
    total = _calls_made(whole)
    run = tmp_path / "capped"
    assert main(["demo", "--out", str(run), *ARGS, "--max-calls", "150"]) == 3
    err = capsys.readouterr().err
    assert "budget of 150 new judge calls" in err and "Traceback" not in err
    stats = json.loads((run / "stats.json").read_text())
    first = sum(_stored(run).values())
    assert stats["stopped"] and first <= 150
    assert main(["demo", "--out", str(run), *ARGS]) == 0
    assert _calls_made(run) == total
    _accounting_adds_up(whole, run, first)
    _same_outputs(whole, run)
