"""Best-of-n curves from stored judgments: for n = 1, 2, 4, ..., N, the downstream score of a
strategy's pick over many random n-subsets of each prompt's N candidates.

Every subset's tournament goes through the referee, so matches already judged (the full-N
tournament, other subsets) are free and only new match-ups cost calls; the extra calls are reported
per n. Random-pick and oracle levels are computed over the same subsets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bon.content import TASKS, Candidate, Prompt
from bon.referee import Referee
from bon.seeds import derive_seed
from bon.selection import Strategy, run_selection
from bon.stages.select import verifier_utility
from bon.stages.verify import ScoreKey


def powers_of_two(n: int) -> list[int]:
    """1, 2, 4, ... below ``n``, then ``n`` itself."""
    return [1 << i for i in range((n - 1).bit_length())] + [n]


def subsets(cands: list[Candidate], size: int, count: int, seed: int, key: str) -> list[list[Candidate]]:
    """``count`` seeded random subsets (candidate order kept); just one when size is N."""
    if size >= len(cands):
        return [list(cands)]
    rng = np.random.default_rng(derive_seed(seed, "subset", key, size))
    return [[cands[i] for i in sorted(rng.choice(len(cands), size, replace=False))] for _ in range(count)]


def bon_curve(
    referee: Referee,
    strategy: Strategy,
    prompts: list[Prompt],
    candidates: dict[str, dict[str, list[Candidate]]],
    scores: dict[ScoreKey, dict],
    n_subsets: int = 20,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Rows of (task, generator, n, bon_score, random_score, oracle_score, extra_calls, subsets, and the cost of
    one subset's pick: the main judge's ``calls_per_prompt`` and, with a prefilter, ``prefilter_calls_per_prompt``)."""
    n_max = max(len(c) for by_prompt in candidates.values() for c in by_prompt.values())
    tasks = [t for t in TASKS if any(p.task == t for p in prompts)]
    rows = []
    for size in powers_of_two(n_max):
        for task in tasks:
            for gen, by_prompt in candidates.items():
                groups = [(p, sub) for p in prompts if p.task == task
                          for sub in subsets(by_prompt[p.id], size, n_subsets, seed, f"{gen}/{p.id}")]
                made_before = referee.stats.calls_made
                picks = run_selection(strategy, referee, groups, seed=seed, utility=verifier_utility(groups, scores))
                rows.append(_row(task, gen, size, picks, groups, scores, referee.stats.calls_made - made_before))
    return rows


def _row(task: str, gen: str, size: int, picks, groups, scores, extra: int) -> dict[str, Any]:
    bon, random_, oracle = [], [], []
    for pick, (_, sub) in zip(picks, groups):
        vals = [scores[c.key]["score"] for c in sub]
        ok = [v for v in vals if v is not None]
        if vals[pick.index] is not None:
            bon.append(vals[pick.index])
        if ok:
            random_.append(float(np.mean(ok)))
            oracle.append(float(np.max(ok)))
    prefiltered = any(p.kept is not None for p in picks)
    return {"task": task, "generator": gen, "n": size, "subsets": len(groups), "bon_score": _mean(bon),
            "random_score": _mean(random_), "oracle_score": _mean(oracle), "extra_calls": extra,
            "calls_per_prompt": _mean([p.calls for p in picks]),
            **({"prefilter_calls_per_prompt": _mean([p.prefilter_calls for p in picks])} if prefiltered else {})}


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")
