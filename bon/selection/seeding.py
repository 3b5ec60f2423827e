"""Seeding a knockout bracket by a cheap pointwise judgment, so the strongest candidates meet late.

``seed: self`` uses the selecting judge itself: its own scores when it is a pointwise judge (a reward
model), otherwise a *single-order pass* in which every other candidate is shown as A against the
first candidate as B once (N-1 calls, whose 1-6 scores rank them; the first candidate counts as
even, 3.5). ``seed: SPEC`` does the same with another registered judge, through the same store and
call budget. The seeding calls are added to the selecting referee's counts.
"""

from __future__ import annotations

import math
from typing import Sequence

from bon.errors import BonError
from bon.plugins import PointwiseJudge
from bon.protocol import Comparison
from bon.referee import Referee

Scores = list[float | None]


def seed_positions(size: int) -> list[int]:
    """Seed ranks (0 = best) in bracket order for a power-of-two ``size``: 0 and 1 can meet only in
    the final, 0..3 only from the semi-finals on (1v8, 4v5, 2v7, 3v6 for eight)."""
    order = [0]
    while len(order) < size:
        order = [r for seed in order for r in (seed, 2 * len(order) - 1 - seed)]
    return order


def ranked(scores: Scores) -> list[int]:
    """Candidate indices from the highest score down; missing scores last, equal scores by index."""
    return sorted(range(len(scores)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))


def seed_slots(scores: Scores) -> list[int | None]:
    """First-round slots of a seeded bracket (None = a bye), padded to a power of two."""
    n = len(scores)
    size = 1 << max(0, math.ceil(math.log2(max(n, 1))))
    order = ranked(scores)
    return [order[r] if r < n else None for r in seed_positions(size)]


def seed_scores(spec: str, referee: Referee, groups: Sequence) -> list[tuple[Scores, int]]:
    """Per (prompt, candidates) group: one seeding score per candidate and the decisions it took."""
    seeder = referee if spec == "self" else _seed_referee(spec, referee)
    made, cached = seeder.stats.calls_made, seeder.stats.calls_cached
    if isinstance(seeder.judge, PointwiseJudge):
        out = [([s.value for s in seeder.score(p, [c.content for c in cands])], len(cands)) for p, cands in groups]
    else:
        out = _single_order_pass(seeder, groups)
    if seeder is not referee:  # the seeding is part of what this selection cost
        referee.stats.calls_made += seeder.stats.calls_made - made
        referee.stats.calls_cached += seeder.stats.calls_cached - cached
        referee.stats.seconds += seeder.stats.seconds
        referee.stats.cost_usd += seeder.stats.cost_usd
    return out


def _seed_referee(spec: str, referee: Referee) -> Referee:
    from bon import registry

    try:
        judge = registry.create("judge", spec)
    except BonError as exc:
        raise BonError(f"knockout seed {spec!r}: {exc}") from None
    return Referee(judge, referee.store, budget=referee.budget, seed=referee.seed)


def _single_order_pass(referee: Referee, groups: Sequence) -> list[tuple[Scores, int]]:
    comparisons = [Comparison(p, c.content, cands[0].content) for p, cands in groups for c in cands[1:]]
    verdicts = iter(referee.ask(comparisons))
    out = []
    for _, cands in groups:
        scores: Scores = [3.5] + [next(verdicts).score_for_a() for _ in cands[1:]] if cands else []
        out.append((scores, max(0, len(cands) - 1)))
    return out
