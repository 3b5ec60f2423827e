"""How often each strategy picks the true best of N with a noisy judge, and what it costs.

    python benchmarks/strategies_noisy.py [--prompts 400] [--n 8] [--noise 0.5]

The judge compares hidden true qualities through Gaussian noise (a fresh draw per call, seeded by
what it sees), answering with a 1-6 score proportional to its perceived margin.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _common import parser
from bon.selection.knockout import Knockout
from bon.selection.round_robin import RoundRobin
from bon.simulate import NoisyJudge, true_best_rate


def main() -> None:
    args = parser(__doc__, prompts=400, n=8, noise=0.5).parse_args()
    strategies = {
        "knockout": Knockout(),
        "round-robin copeland": RoundRobin("copeland"),
        "round-robin borda": RoundRobin("borda"),
        "round-robin bradley-terry": RoundRobin("bradley-terry"),
    }
    print(f"N = {args.n}, {args.prompts} prompts, judge noise sd = {args.noise} (true qualities ~ U(0, 1))")
    print(f"{'strategy':<28}{'true best picked':>18}{'calls/prompt':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, strategy in strategies.items():
            rate, calls = true_best_rate(strategy, NoisyJudge(args.noise), args.prompts, args.n, Path(tmp) / f"{label}.sqlite")
            print(f"{label:<28}{rate:>17.1%}{calls:>14.1f}")


if __name__ == "__main__":
    main()
