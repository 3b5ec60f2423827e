"""Pointwise selection: the argmax of a reward model's per-candidate scores (N calls per prompt).

Tie rule: among equal best scores, a coin seeded by the group's key; missing scores never win
unless every score is missing, in which case the seeded coin picks among all candidates.
"""

from __future__ import annotations

import hashlib

from bon.selection.base import PointwiseStrategy


class Pointwise(PointwiseStrategy):
    name = "pointwise"

    def choose(self, scores: list[float | None], key: tuple) -> int:
        valid = [s for s in scores if s is not None]
        top = [i for i, s in enumerate(scores) if s is not None and s == max(valid)] if valid else list(range(len(scores)))
        digest = hashlib.sha256(repr(("pointwise", key)).encode()).digest()
        return top[digest[0] % len(top)]
