"""The MMRB2 pairwise question and its two-order protocol.

A judge answers one :class:`Comparison` at a time (batched for speed): given the prompt and
responses A and B, which is better, with a 1-6 score where 6 means "A much better" and 1 "B much
better". A *match* between two candidates asks both orders (forward x,y and reverse y,x) and merges
them with a deterministic tie rule. Strategies only ever talk to a :class:`Referee`, which owns the
judgment store, so no judgment is paid for twice.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence

from bon.content import Content, Prompt
from bon.plugins import Score


@dataclass(eq=False)
class Comparison:
    prompt: Prompt
    a: Content
    b: Content
    sample: int = 0


@dataclass
class Verdict:
    """One judge call. ``better`` is None when the call failed or could not be parsed (``missing``
    says why); such a verdict is never counted as a vote."""

    better: str | None
    score: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None
    transient: bool = False  # a failure worth retrying on a later run (timeouts, rate limits)

    def __post_init__(self) -> None:
        if self.better is not None and self.better not in ("A", "B"):
            raise ValueError(f"verdict must be 'A' or 'B', got {self.better!r}")
        if self.better is None and self.missing is None:
            self.missing = "no answer"

    @classmethod
    def failed(cls, reason: str, transient: bool = False, **meta: Any) -> "Verdict":
        return cls(better=None, score=None, meta=meta, missing=reason, transient=transient)

    def score_for_a(self) -> float | None:
        """The 1-6 score, defaulting to 4/3 when a judge gives only a letter."""
        if self.better is None:
            return None
        if self.score is not None:
            return float(self.score)
        return 4.0 if self.better == "A" else 3.0


def score_from_margin(margin: float, coin: bool) -> tuple[str, int]:
    """Map a judge's internal preference margin (A minus B, roughly in [-1, 1]) to a letter and 1-6.

    Equal internal scores still need a letter (MMRB2 has no tie answer); ``coin`` decides it.
    """
    if margin > 0 or (margin == 0 and coin):
        return "A", 4 + int(margin > 0.15) + int(margin > 0.4)
    return "B", 3 - int(margin < -0.15) - int(margin < -0.4)


class PairwiseJudge(ABC):
    """A judge speaking the MMRB2 pairwise protocol. Subclasses set ``name`` and answer batches."""

    name: str = "judge"

    def identity(self) -> dict[str, Any]:
        """What the judgment store keys on: a changed setting is a different judgment."""
        return {"name": self.name}

    @abstractmethod
    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        """Answer each comparison; failures come back as ``Verdict.failed(reason)``, never raise."""

    def close(self) -> None:
        """Release the models this judge holds (they load again on next use)."""


class PointwiseJudge(PairwiseJudge):
    """A judge that scores each response alone (a reward model: CLIPScore, PickScore, VQAScore...).

    Pointwise selection takes the argmax of its scores; its pairwise view compares the two scores
    (``margin_scale`` maps a score difference to the roughly [-1, 1] margin), so the same judge also
    enters knockout, round-robin and MMRB2 scoring.
    """

    margin_scale: float = 1.0

    @abstractmethod
    def score(self, prompt: Prompt, responses: Sequence[Content]) -> list[Score]:
        """One score per response (``Score(None, missing=reason)`` on failure); batch as you like."""

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        by_prompt: dict[str, list[Comparison]] = {}
        for c in comparisons:
            by_prompt.setdefault(c.prompt.content.digest, []).append(c)
        values: dict[tuple[str, str], Score] = {}
        for group in by_prompt.values():
            unique = {r.digest: r for c in group for r in (c.a, c.b)}
            scores = self.score(group[0].prompt, list(unique.values()))
            values.update({(group[0].prompt.content.digest, d): s for d, s in zip(unique, scores)})
        return [self._pairwise(c, values[(c.prompt.content.digest, c.a.digest)], values[(c.prompt.content.digest, c.b.digest)]) for c in comparisons]

    def _pairwise(self, c: Comparison, sa: Score, sb: Score) -> Verdict:
        if sa.value is None or sb.value is None:
            return Verdict.failed(sa.missing or sb.missing or "no score")
        margin = max(-1.0, min(1.0, (sa.value - sb.value) * self.margin_scale))
        better, score = score_from_margin(margin, coin=seeded_coin(self.name, c.prompt.content.digest, c.a.digest, c.b.digest, c.sample))
        return Verdict(better, score, meta={"score_a": sa.value, "score_b": sb.value})


def seeded_coin(*parts: object) -> bool:
    """A reproducible fair coin from any tuple of values."""
    h = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return bool(h[0] & 1)


@dataclass
class MatchResult:
    """Both orders of one match between candidates ``x`` and ``y`` (indices into the prompt's list)."""

    x: int
    y: int
    forward: list[Verdict]  # x shown as A
    reverse: list[Verdict]  # y shown as A
    winner: int
    rule: str  # how the winner was decided: "agree", "score", "coin", "one-sided", "no-verdict"

    @property
    def calls(self) -> int:
        return len(self.forward) + len(self.reverse)


def votes_for_x(forward: Sequence[Verdict], reverse: Sequence[Verdict]) -> tuple[int, int, float, float]:
    """Votes and summed 1-6 scores for x and y, reading the reverse order flipped."""
    vx = vy = 0
    sx = sy = 0.0
    for v in forward:
        s = v.score_for_a()
        if s is None:
            continue
        vx += v.better == "A"
        vy += v.better == "B"
        sx, sy = sx + s, sy + 7 - s
    for v in reverse:
        s = v.score_for_a()
        if s is None:
            continue
        vx += v.better == "B"
        vy += v.better == "A"
        sx, sy = sx + 7 - s, sy + s
    return vx, vy, sx, sy


def decide_match(x: int, y: int, forward: list[Verdict], reverse: list[Verdict], coin_key: tuple) -> MatchResult:
    """The tie rule, in order: more votes over both orders (and all samples) wins; then the higher
    summed 1-6 score (reverse scores mirrored, 7 - s); then a coin seeded by the match's identity."""
    vx, vy, sx, sy = votes_for_x(forward, reverse)
    if vx + vy == 0:
        winner, rule = (x if seeded_coin(*coin_key) else y), "no-verdict"
    elif vx != vy:
        winner = x if vx > vy else y
        rule = "agree" if min(vx, vy) == 0 and all(v.better for v in forward + reverse) else "majority"
    elif sx != sy:
        winner, rule = (x if sx > sy else y), "score"
    else:
        winner, rule = (x if seeded_coin(*coin_key) else y), "coin"
    return MatchResult(x=x, y=y, forward=forward, reverse=reverse, winner=winner, rule=rule)
