"""Simulated judges with a known truth, for checking strategies (tests and benchmarks)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from bon.content import Candidate, Content, Prompt
from bon.plugins import PairwiseJudge
from bon.protocol import Comparison, Verdict, score_from_margin
from bon.referee import Referee
from bon.seeds import derive_seed
from bon.selection import Strategy, run_selection
from bon.store import JudgmentStore


class NoisyJudge(PairwiseJudge):
    """Reads each response's true quality from its text and compares them through Gaussian noise.
    The noise is seeded by what the judge sees, so a repeated question gets the same answer."""

    name = "noisy"

    def __init__(self, noise: float = 0.5, seed: int = 0):
        self.noise, self.seed = noise, seed

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        out = []
        for c in comparisons:
            rng = np.random.default_rng(derive_seed(self.seed, c.prompt.id, c.a.text, c.b.text, c.sample))
            margin = float(c.a.text.split()[0]) - float(c.b.text.split()[0]) + rng.normal(0, self.noise)
            out.append(Verdict(*score_from_margin(float(np.clip(margin, -1, 1)), coin=bool(rng.integers(2)))))
        return out


def true_best_rate(strategy: Strategy, judge: PairwiseJudge, prompts: int, n: int, store_path: Path, seed: int = 0) -> tuple[float, float]:
    """Share of prompts where the strategy picks the candidate of highest true quality; calls per prompt."""
    groups, best = [], []
    for i in range(prompts):
        rng = np.random.default_rng(derive_seed(seed, "truth", i))
        values = rng.uniform(0, 1, n)
        prompt = Prompt(f"p{i}", "t2i", Content.of(f"prompt {i}"))
        groups.append((prompt, [Candidate(prompt.id, k, "g", k, Content.of(f"{v:.6f} c{k}")) for k, v in enumerate(values)]))
        best.append(int(np.argmax(values)))
    store = JudgmentStore(store_path)
    try:
        referee = Referee(judge, store)
        picks = run_selection(strategy, referee, groups, seed=seed)
    finally:
        store.close()
    rate = float(np.mean([p.index == b for p, b in zip(picks, best)]))
    return rate, (referee.stats.calls_made + referee.stats.calls_cached) / prompts
