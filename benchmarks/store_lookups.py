"""How fast the judgment store serves cached decisions (target: >= 20,000 per second).

    python benchmarks/store_lookups.py [--decisions 50000]

Fills a fresh store with a knockout's worth of judgments for many prompts, then asks for all of
them again through the referee (hashing, lookup and verdict rebuilding included).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _common import parser, timed
from bon.content import Content, Prompt
from bon.plugins import PairwiseJudge
from bon.protocol import Comparison, Verdict
from bon.referee import Referee
from bon.store import JudgmentStore


class Instant(PairwiseJudge):
    name = "instant"

    def judge(self, comparisons):
        return [Verdict("A" if len(c.a.text) >= len(c.b.text) else "B", 4) for c in comparisons]


def main() -> None:
    args = parser(__doc__, decisions=50_000).parse_args()
    per_prompt = 56  # all ordered pairs of N = 8
    prompts = [Prompt(f"p{i}", "t2i", Content.of(f"prompt {i}")) for i in range(args.decisions // per_prompt)]
    cands = [Content.of("x" * (k + 1)) for k in range(8)]
    comps = [Comparison(p, a, b) for p in prompts for a in cands for b in cands if a is not b]
    with tempfile.TemporaryDirectory() as tmp:
        store = JudgmentStore(Path(tmp) / "j.sqlite")
        _, fill = timed(Referee(Instant(), store).ask, comps)
        referee = Referee(Instant(), store)
        started = time.perf_counter()
        for i in range(0, len(comps), 4096):
            referee.ask(comps[i : i + 4096])
        lookup = time.perf_counter() - started
        assert referee.stats.calls_made == 0 and referee.stats.calls_cached == len(comps)
        store.close()
    print(f"decisions: {len(comps)}")
    print(f"first pass (judge + insert): {len(comps) / fill:,.0f} decisions/s")
    print(f"cached lookups:              {len(comps) / lookup:,.0f} decisions/s  (target >= 20,000)")


if __name__ == "__main__":
    main()
