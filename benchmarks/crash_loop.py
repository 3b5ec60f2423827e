"""Crash loop: SIGKILL `bon demo` at seeded random moments, rerun it to the end, compare with one uninterrupted run.

    python benchmarks/crash_loop.py [--runs 20] [--seed 0] [--prompts 8] [--n 4]

First one uninterrupted run (its wall time and judge calls bound the kill moments). Then, ``--runs``
times, a fresh folder: the demo starts as a subprocess in its own process group and the whole group
(driver and forked workers) is SIGKILLed at a moment a seeded generator draws: on odd runs a wall
time uniform in (0, 0.8 x the uninterrupted wall time), anywhere from start-up to the report; on
even runs the moment the store holds K judge answers, K uniform in (1, all the calls), so that half
the kills land while judges are judging. Then the same command is rerun to the end. Each rerun must write the same results.csv and
picks.jsonl as the uninterrupted run and the same call totals in stats.json (per judge and stage:
calls made over all invocations, and calls asked = made + served from the store). Printed per kill:
when, the stage it hit (the first stage the killed invocation had not finished, from its
invocations.json), the judge answers and verifier scores it had kept, and what the rerun still had to
pay for. The last line is ``crash loop: R runs, D differ``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, parser, timed

STAGES = ("prompts", "generate", "verify", "preference_set", "judge_and_select")


def demo(out: Path, prompts: int, n: int) -> list[str]:
    return [sys.executable, "-m", "bon.cli", "demo", "--out", str(out), "--prompts", str(prompts), "--n", str(n)]


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "BON_QUIET": "1"}


def run_to_end(out: Path, prompts: int, n: int) -> None:
    done = subprocess.run(demo(out, prompts, n), cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"crash loop: `bon demo --out {out}` exited {done.returncode}: {done.stderr.strip()[-400:]}")


def kill_at(out: Path, prompts: int, n: int, seconds: float | None = None, answers: int | None = None) -> bool:
    """Start the demo in its own process group and SIGKILL the group after ``seconds``, or once its
    store holds ``answers`` judge answers; False when it had finished first."""
    proc = subprocess.Popen(demo(out, prompts, n), cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    started = time.perf_counter()
    while proc.poll() is None:
        if (seconds is not None and time.perf_counter() - started >= seconds) or (answers is not None and kept(out)[0] >= answers):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.01)
    return False


def stage_hit(out: Path) -> str:
    """The first stage the killed invocation had not finished (``start`` before its ledger existed)."""
    try:
        finished = json.loads((out / "invocations.json").read_text())["invocations"][-1]["timings_s"]
    except (OSError, ValueError, KeyError, IndexError):
        return "start"
    return next((s for s in STAGES if s not in finished), "analysis")


def kept(out: Path) -> tuple[int, int]:
    """(judge answers in the store, verifier scores on disk) a killed run left."""
    answers = 0
    if (out / "judgments.sqlite").exists():
        try:
            with sqlite3.connect(f"file:{out / 'judgments.sqlite'}?mode=ro", uri=True) as db:
                answers = db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
        except sqlite3.Error:  # killed before the tables existed
            answers = 0
    scores = out / "scores.jsonl"
    return answers, sum(1 for line in scores.open(encoding="utf-8") if line.strip()) if scores.exists() else 0


def call_totals(out: Path) -> dict[str, Any]:
    """Per judge and stage: calls made over all invocations and calls asked (made + from the store)."""
    judges = json.loads((out / "stats.json").read_text())["judges"]
    return {name: {stage: (s[stage]["calls_made"], s[stage]["calls_made"] + s[stage]["calls_cached"]) for stage in ("mmrb2", "selection")}
            for name, s in judges.items()}


def last_made(out: Path) -> int:
    judges = json.loads((out / "stats.json").read_text())["judges"]
    return sum(s["last_invocation"]["calls_made"] for s in judges.values())


def differences(got: Path, want: Path) -> list[str]:
    found = [name for name in ("results.csv", "picks.jsonl") if (got / name).read_bytes() != (want / name).read_bytes()]
    return found + (["stats.json call totals"] if call_totals(got) != call_totals(want) else [])


def main() -> None:
    args = parser(__doc__, runs=20, seed=0, prompts=8, n=4).parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "whole"
        _, wall = timed(run_to_end, whole, args.prompts, args.n)
        total = sum(made for judge in call_totals(whole).values() for made, _ in judge.values())
        print(f"uninterrupted: {wall:.1f} s, {total} judge calls (prompts/task {args.prompts}, N {args.n})")
        print(f"{'run':>4} {'kill at':>11}  {'stage hit':<17}{'answers kept':>13}{'scores kept':>12}{'rerun paid':>11}  result")
        differ = 0
        for r in range(args.runs):
            out = Path(tmp) / f"run{r}"
            if r % 2 == 0:
                moment = rng.uniform(0.0, 0.8 * wall)
                when, killed = f"{moment:.1f} s", kill_at(out, args.prompts, args.n, seconds=moment)
            else:
                count = rng.randint(1, total - 1)
                when, killed = f"{count} calls", kill_at(out, args.prompts, args.n, answers=count)
            stage = stage_hit(out) if killed else "(ended first)"
            answers, scores = kept(out)
            started = time.perf_counter()
            run_to_end(out, args.prompts, args.n)
            wrong = differences(out, whole)
            differ += bool(wrong)
            print(f"{r + 1:>4} {when:>11}  {stage:<17}{answers:>13}{scores:>12}{last_made(out):>11}  "
                  f"{'differs: ' + ', '.join(wrong) if wrong else 'same'} ({time.perf_counter() - started:.0f} s rerun)",
                  flush=True)
    print(f"crash loop: {args.runs} runs, {differ} differ")


if __name__ == "__main__":
    main()
