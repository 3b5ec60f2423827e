"""Round-robin: every pair plays (both orders), N(N-1) judge calls, then an aggregate ranks all.

Aggregates: ``copeland`` (matches won, each decided by the match tie rule), ``borda`` (summed 1-6
scores from each candidate's side over all its comparisons) and ``bradley-terry`` (strengths fitted
with choix on every non-missing verdict). Tie rule: equal aggregates are split by summed score, then
by a coin seeded with the group's key.
"""

from __future__ import annotations

import hashlib
import itertools

import numpy as np

from bon.errors import BonError
from bon.protocol import MatchResult, votes_for_x
from bon.selection.base import Bracket, Strategy

AGGREGATES = ("copeland", "borda", "bradley-terry")


class RoundRobin(Strategy):
    name = "round-robin"

    def __init__(self, aggregate: str = "copeland") -> None:
        if aggregate not in AGGREGATES:
            raise BonError(f"round-robin: aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        self.aggregate = aggregate

    def bracket(self, n: int, key: tuple) -> Bracket:
        if n < 1:
            raise BonError(f"round-robin: no candidates for {key}")
        if n == 1:
            return 0
        results = yield list(itertools.combinations(range(n), 2))
        return pick_best(self.aggregate, n, results, key)


def pick_best(aggregate: str, n: int, results: list[MatchResult], key: tuple) -> int:
    wins, scores = np.zeros(n), np.zeros(n)
    for r in results:
        _, _, sx, sy = votes_for_x(r.forward, r.reverse)
        scores[r.x] += sx
        scores[r.y] += sy
        wins[r.winner] += 1
    primary = {"copeland": wins, "borda": scores, "bradley-terry": None}[aggregate]
    if primary is None:
        primary = bradley_terry(n, results)
    tied = [i for i in range(n) if np.isclose(primary[i], primary.max())]
    if len(tied) > 1:
        best = max(scores[i] for i in tied)
        tied = [i for i in tied if np.isclose(scores[i], best)]
    if len(tied) > 1:
        digest = hashlib.sha256(repr(("tie", key)).encode()).digest()
        return tied[digest[0] % len(tied)]
    return tied[0]


def bradley_terry(n: int, results: list[MatchResult]) -> np.ndarray:
    """Strengths from every verdict as a (winner, loser) comparison; a small prior keeps it finite."""
    import choix

    comparisons = []
    for r in results:
        for v in r.forward:
            if v.better:
                comparisons.append((r.x, r.y) if v.better == "A" else (r.y, r.x))
        for v in r.reverse:
            if v.better:
                comparisons.append((r.y, r.x) if v.better == "A" else (r.x, r.y))
    if not comparisons:
        return np.zeros(n)
    return np.asarray(choix.ilsr_pairwise(n, comparisons, alpha=0.01))
