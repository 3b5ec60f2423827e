"""Calls per prompt and P(true best picked) of knockout, calibrated gate + audit, cascade and the
uncertainty-driven strategy, side by side, on simulated judges with known accuracy and position bias
(bon.simulate.SimulatedJudge), for N = 4..32.

Each judge first answers a held-out "preference set" in both orders (stored as stage mmrb2, what
``gate: auto`` and ``cascade_gate: auto`` calibrate on); the cascade's cheap judge is a noisier one.

    python benchmarks/selection_cost.py [--prompts 100] [--n 4 8 16 32]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from bon.referee import Referee
from bon.selection import run_selection
from bon.selection.knockout import Knockout
from bon.selection.round_robin import RoundRobin
from bon.selection.uncertainty import Uncertainty
from bon.simulate import SimulatedJudge, simulated_groups
from bon.store import JudgmentStore

JUDGES = {  # name: (noise, position bias, tie resolution, share of confident 6/1 answers)
    "accurate": (0.05, 0.0, 0.02, 0.0),
    "noisy": (0.25, 0.0, 0.02, 0.0),
    "position-biased": (0.05, 0.15, 0.02, 0.0),
    "confident-biased": (0.05, 0.1, 0.0, 0.3),
    "mostly-tied": (0.05, 0.0, 0.25, 0.0),
}
CHEAP = SimulatedJudge(noise=0.1, resolution=0.02, seed=7, name="cheap")
STRATEGIES = {
    "knockout": lambda: Knockout(),
    "gated+audit": lambda: Knockout(swap="gated", gate="auto"),
    "cascade": lambda: Knockout(cascade="cheap"),
    "uncertainty": lambda: Uncertainty(),
}


def calibrate(judge: SimulatedJudge, store: JudgmentStore) -> None:
    groups, _ = simulated_groups(20, 8, seed=99, prefix="cal")
    run_selection(RoundRobin(), Referee(judge, store, stage="mmrb2"), groups)


def measure(judge: SimulatedJudge, strategy: str, n: int, prompts: int, store: JudgmentStore) -> tuple[float, float, str]:
    groups, best = simulated_groups(prompts, n, seed=n)
    referee = Referee(judge, store)
    referee.judges["cheap"] = CHEAP
    picks = run_selection(STRATEGIES[strategy](), referee, groups)
    notes = [r["note"] for r in referee.gate_reports()]
    return sum(p.calls for p in picks) / prompts, float(np.mean([p.index == b for p, b in zip(picks, best)])), "; ".join(notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--n", type=int, nargs="+", default=[4, 8, 16, 32])
    args = parser.parse_args()
    head = "".join(f"{s + ' calls':>18}{'P(best)':>9}" for s in STRATEGIES)
    print(f"{args.prompts} prompts per N; cheap judge of the cascade: noise {CHEAP.noise}")
    print(f"{'judge':<17}{'N':>3}{head}")
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = JudgmentStore(Path(tmp) / "j.sqlite")
        calibrate(CHEAP, store)
        for name, (noise, bias, resolution, confident) in JUDGES.items():
            judge = SimulatedJudge(noise, bias, resolution, confident, seed=1, name=name)
            calibrate(judge, store)
            for n in args.n:
                row = f"{name:<17}{n:>3}"
                for strategy in STRATEGIES:
                    calls, rate, note = measure(judge, strategy, n, args.prompts, store)
                    row += f"{calls:>18.2f}{rate:>9.2f}"
                    if note and n == args.n[-1] and strategy in ("gated+audit", "cascade"):
                        notes[f"{name} {strategy} (N={n})"] = note
                print(row, flush=True)
        store.close()
    for key, note in notes.items():
        print(f"{key}: {note}")


if __name__ == "__main__":
    main()
