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


class SimulatedJudge(PairwiseJudge):
    """A judge with known accuracy, position bias and ties: its margin is the true quality gap plus
    Gaussian ``noise`` plus ``bias`` toward the response shown as A, rounded to steps of ``resolution``;
    a margin that rounds to 0 is an exact tie (``tie`` in meta: the letter is its coin). ``confident``
    also sets the share of answers given as 6 or 1 whatever the margin (a confident bias). Seeded by
    what it sees, so a repeated question gets the same answer."""

    name = "simulated"

    def __init__(self, noise: float = 0.1, bias: float = 0.0, resolution: float = 0.0, confident: float = 0.0, seed: int = 0,
                 name: str | None = None):
        self.noise, self.bias, self.resolution, self.confident, self.seed = noise, bias, resolution, confident, seed
        self.name = name or self.name

    def identity(self) -> dict:
        return {"name": "simulated", "noise": self.noise, "bias": self.bias, "resolution": self.resolution,
                "confident": self.confident, "seed": self.seed}

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        out = []
        for c in comparisons:
            rng = np.random.default_rng(derive_seed(self.seed, c.prompt.id, c.a.text, c.b.text, c.sample))
            margin = quality(c.a) - quality(c.b) + rng.normal(0, self.noise) + self.bias
            if self.resolution:
                margin = round(margin / self.resolution) * self.resolution
            margin = float(np.clip(margin, -1, 1))
            coin = bool(rng.integers(2))
            if rng.uniform() < self.confident:
                out.append(Verdict("A" if margin > 0 or (margin == 0 and coin) else "B", 6 if margin > 0 or (margin == 0 and coin) else 1,
                                   meta={"margin": round(margin, 6)}))
                continue
            better, score = score_from_margin(margin, coin=coin)
            out.append(Verdict(better, score, meta={"margin": round(margin, 6), "tie": margin == 0.0}))
        return out


def quality(response: Content) -> float:
    """The true quality a simulated candidate carries as the first word of its text."""
    return float(response.text.split()[0])


def simulated_groups(prompts: int, n: int, seed: int = 0, prefix: str = "p") -> tuple[list, list[int]]:
    """Groups of n candidates with uniform true qualities, and the index of each group's true best."""
    groups, best = [], []
    for i in range(prompts):
        rng = np.random.default_rng(derive_seed(seed, "truth", i))
        values = rng.uniform(0, 1, n)
        prompt = Prompt(f"{prefix}{i}", "t2i", Content.of(f"prompt {i}"))
        groups.append((prompt, [Candidate(prompt.id, k, "g", k, Content.of(f"{v:.6f} c{k}")) for k, v in enumerate(values)]))
        best.append(int(np.argmax(values)))
    return groups, best


def true_best_rate(strategy: Strategy, judge: PairwiseJudge, prompts: int, n: int, store_path: Path, seed: int = 0) -> tuple[float, float]:
    """Share of prompts where the strategy picks the candidate of highest true quality; calls per prompt."""
    groups, best = simulated_groups(prompts, n, seed)
    store = JudgmentStore(store_path)
    try:
        referee = Referee(judge, store)
        picks = run_selection(strategy, referee, groups, seed=seed)
    finally:
        store.close()
    rate = float(np.mean([p.index == b for p, b in zip(picks, best)]))
    return rate, (referee.stats.calls_made + referee.stats.calls_cached) / prompts
