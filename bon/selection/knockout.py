"""Single-elimination knockout: N-1 matches, each asked in both orders, so 2(N-1) judge calls.

Seeding is by candidate index (the default) or a seeded shuffle. When a round has an odd number
of players, the last one gets a bye into the next round.
"""

from __future__ import annotations

import hashlib
import random
from bon.errors import BonError
from bon.selection.base import Bracket, Strategy


class Knockout(Strategy):
    name = "knockout"

    def __init__(self, seeding: str = "index") -> None:
        if seeding not in ("index", "shuffle"):
            raise BonError(f"knockout: seeding must be 'index' or 'shuffle', got {seeding!r}")
        self.seeding = seeding

    def bracket(self, n: int, key: tuple) -> Bracket:
        if n < 1:
            raise BonError(f"knockout: no candidates for {key}")
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
