"""Round-robin: every pair plays (both orders), N(N-1) judge calls, then an aggregate ranks all.

Aggregates: ``copeland`` (matches won, each decided by the match tie rule), ``borda`` (summed 1-6
scores from each candidate's side over all its comparisons) and ``bradley-terry`` (strengths fitted
with choix on every non-missing verdict). Tie rule: equal aggregates are split by summed score, then
by a coin seeded with the group's key.

``early_stop: true`` (Copeland only) plays the matches in rounds (the circle method) and stops asking
a match once neither of its candidates can still reach the leader's number of wins (or once only one
candidate can): the winner is exactly the one the full round-robin picks, and the matches not
asked are counted as calls saved. ``swap: gated`` asks a match's reverse order only when the forward
verdict is not confident (see :mod:`bon.swap`). ``prefilter: JUDGE`` with ``keep: k`` (or ``auto``) plays
only among the k candidates a pointwise judge scores best (:mod:`bon.selection.prefilter`): k(k-1) calls.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import numpy as np

from bon.errors import BonError
from bon.protocol import MatchResult, votes_for_x
from bon.selection.base import Bracket, Finish, Strategy
from bon.selection.prefilter import DEFAULT_CALIBRATE, prefilter_policy
from bon.swap import swap_policy

AGGREGATES = ("copeland", "borda", "bradley-terry")


class RoundRobin(Strategy):
    name = "round-robin"
    added_later = ("ties", "max_flip", "audit", "prefilter", "keep", "calibrate")  # at their defaults, identities (and labels) stay as before

    def __init__(self, aggregate: str = "copeland", swap: str = "both", gate: float | str = 1.0, confidence: str = "auto",
                 early_stop: bool = False, ties: str = "gate", max_flip: float = 0.02, audit: float | None = None,
                 prefilter: str | None = None, keep: int | str | None = None, calibrate: float = DEFAULT_CALIBRATE) -> None:
        if aggregate not in AGGREGATES:
            raise BonError(f"round-robin: aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        if not isinstance(early_stop, bool):
            raise BonError(f"round-robin: early_stop must be true or false, got {early_stop!r}")
        if early_stop and aggregate != "copeland":
            raise BonError(f"round-robin: early_stop needs aggregate copeland (a {aggregate} total can change until the last match)")
        self.aggregate = aggregate
        self.early_stop = early_stop
        self.swap = swap_policy(swap, gate, confidence, "round-robin", ties, max_flip, audit)
        self.prefilter = prefilter_policy(prefilter, keep, calibrate, "round-robin")

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "aggregate": self.aggregate, **({"early_stop": True} if self.early_stop else {}),
                **self.swap.identity()}

    def bracket(self, n: int, key: tuple) -> Bracket:
        if n < 1:
            raise BonError(f"round-robin: no candidates for {key}")
        if n == 1:
            return 0
        if self.early_stop:
            return (yield from _copeland_early_stop(n, key))
        results = yield list(itertools.combinations(range(n), 2))
        return pick_best(self.aggregate, n, results, key)


def circle_rounds(n: int) -> list[list[tuple[int, int]]]:
    """Every pair of 0..n-1 once, in rounds where each candidate plays at most once (circle method)."""
    players: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    rounds = []
    for _ in range(len(players) - 1):
        half = len(players) // 2
        pairs = [(players[i], players[-1 - i]) for i in range(half)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None])
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _copeland_early_stop(n: int, key: tuple) -> Bracket:
    wins, left = [0] * n, [n - 1] * n
    played: list[MatchResult] = []
    skipped = 0
    for pairs in circle_rounds(n):
        lead = max(wins)
        alive = {c for c in range(n) if wins[c] + left[c] >= lead}
        ask = [(x, y) for x, y in pairs if len(alive) > 1 and (x in alive or y in alive)]
        skipped += len(pairs) - len(ask)
        for x, y in pairs:
            left[x] -= 1
            left[y] -= 1
        if ask:
            results = yield ask
            for r in results:
                wins[r.winner] += 1
            played += results
    return Finish(pick_best("copeland", n, played, key), skipped)


def pick_best(aggregate: str, n: int, results: list[MatchResult], key: tuple) -> int:
    wins, scores = np.zeros(n), np.zeros(n)
    for r in results:
        _, _, sx, sy = votes_for_x(r.forward, r.reverse)
        scores[r.x] += sx
        scores[r.y] += sy
        wins[r.winner] += 1
    tables = {"copeland": wins, "borda": scores}
    primary = tables[aggregate] if aggregate in tables else bradley_terry(n, results)
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
        for verdicts, (a, b) in ((r.forward, (r.x, r.y)), (r.reverse, (r.y, r.x))):  # the reverse shows y as A
            comparisons += [(a, b) if v.better == "A" else (b, a) for v in verdicts if v.better]
    if not comparisons:
        return np.zeros(n)
    return np.asarray(choix.ilsr_pairwise(n, comparisons, alpha=0.01))
