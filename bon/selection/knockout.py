"""Single-elimination knockout: N-1 matches, each asked in both orders, so 2(N-1) judge calls.

Seeding is by candidate index (the default), a seeded shuffle, or a cheap pointwise pass (``seed:
self`` or ``seed: JUDGE-SPEC``, see :mod:`bon.selection.seeding`) that puts the strongest candidates
in opposite halves. When a round has an odd number of players, the last one gets a bye (seeded
brackets give their byes to the top seeds). ``swap: gated`` with ``gate: T`` asks a match's
reverse order only when the forward verdict is not confident (see :mod:`bon.swap`): as few as N-1
calls; ``gate: auto`` calibrates the gate per judge and audits it (``max_flip``, ``audit``, ``ties``).
``cascade: JUDGE-SPEC`` asks a cheap judge each match first (one order) and sends only the matches it
is not sure about (``cascade_gate``, calibrated by default) to this judge in both orders.
``prefilter: JUDGE`` with ``keep: k`` (or ``auto``) plays the knockout only among the k candidates a
pointwise judge scores best (see :mod:`bon.selection.prefilter`): 2(k-1) calls.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from bon.errors import BonError
from bon.selection.base import Bracket, Strategy
from bon.selection.prefilter import DEFAULT_CALIBRATE, prefilter_policy
from bon.selection.seeding import seed_scores, seed_slots
from bon.swap import cascade_policy, swap_policy


class Knockout(Strategy):
    name = "knockout"
    added_later = ("ties", "max_flip", "audit", "cascade", "cascade_gate", "cascade_confidence", "prefilter", "keep", "calibrate")  # at their defaults, identities (and labels) stay as before

    def __init__(self, seeding: str = "index", swap: str = "both", gate: float | str = 1.0, confidence: str = "auto",
                 seed: str | None = None, ties: str = "gate", max_flip: float = 0.02, audit: float | None = None,
                 cascade: str | None = None, cascade_gate: float | str = "auto", cascade_confidence: str = "auto",
                 prefilter: str | None = None, keep: int | str | None = None, calibrate: float = DEFAULT_CALIBRATE) -> None:
        if seeding not in ("index", "shuffle"):
            raise BonError(f"knockout: seeding must be 'index' or 'shuffle', got {seeding!r}")
        if seed is not None and (not isinstance(seed, str) or not seed):
            raise BonError(f"knockout: seed must be 'self' or a pointwise judge spec, got {seed!r}")
        self.seeding = seeding
        self.seed = seed
        self.swap = swap_policy(swap, gate, confidence, "knockout", ties, max_flip, audit)
        self.cascade = cascade_policy(cascade, cascade_gate, cascade_confidence, max_flip, where="knockout")
        self.prefilter = prefilter_policy(prefilter, keep, calibrate, "knockout")
        if self.cascade and self.swap.gated:
            raise BonError("knockout: cascade sends unsure matches to the main judge in both orders; drop swap: gated")

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "seeding": self.seeding, **({"seed": self.seed} if self.seed else {}), **self.swap.identity(),
                **(self.cascade.identity() if self.cascade else {})}

    def seed_scores(self, referee, groups):
        return seed_scores(self.seed, referee, groups) if self.seed else None

    def bracket(self, n: int, key: tuple, scores: list[float | None] | None = None) -> Bracket:
        if n < 1:
            raise BonError(f"knockout: no candidates for {key}")
        if scores is not None:
            return (yield from _seeded(seed_slots(scores)))
        alive = list(range(n))
        if self.seeding == "shuffle":
            digest = hashlib.sha256(repr(key).encode()).digest()
            random.Random(digest).shuffle(alive)
        while len(alive) > 1:
            pairs = [(alive[i], alive[i + 1]) for i in range(0, len(alive) - 1, 2)]
            bye = [alive[-1]] if len(alive) % 2 else []
            results = yield pairs
            alive = [r.winner for r in results] + bye
        return alive[0]


def _seeded(slots: list[int | None]) -> Bracket:
    """Play a power-of-two bracket in slot order; a player facing an empty slot advances unasked."""
    while len(slots) > 1:
        pairs = [(slots[i], slots[i + 1]) for i in range(0, len(slots), 2)]
        results = iter((yield [(x, y) for x, y in pairs if x is not None and y is not None]))
        slots = [next(results).winner if x is not None and y is not None else (x if x is not None else y) for x, y in pairs]
    return slots[0]
