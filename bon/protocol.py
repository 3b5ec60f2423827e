"""The MMRB2 pairwise question and its two-order protocol.

A judge answers one :class:`Comparison` at a time (batched for speed): given the prompt and
responses A and B, which is better, with a 1-6 score where 6 means "A much better" and 1 "B much
better". A *match* between two candidates asks both orders (forward x,y and reverse y,x) and merges
them with a deterministic tie rule. Strategies only ever talk to a :class:`Referee`, which owns the
judgment store, so no judgment is paid for twice. The judge interfaces themselves live with every
other plugin interface in :mod:`bon.plugins`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from bon.content import Content, Prompt
from bon.seeds import derive_seed


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


def seeded_coin(*parts: object) -> bool:
    """A reproducible fair coin from any tuple of values (the lowest bit of their derived seed)."""
    return bool(derive_seed(*parts) & 1)


@dataclass
class MatchResult:
    """Both orders of one match between candidates ``x`` and ``y`` (indices into the prompt's list)."""

    x: int
    y: int
    forward: list[Verdict]  # x shown as A
    reverse: list[Verdict]  # y shown as A
    winner: int
    rule: str  # how the winner was decided: "agree", "score", "coin", "one-sided", "no-verdict", "gated", "cascade"
    cascade: list[Verdict] = field(default_factory=list)  # a cascade's cheap judge, asked first (x shown as A)

    @property
    def calls(self) -> int:
        return len(self.forward) + len(self.reverse) + len(self.cascade)


def votes_for_x(forward: Sequence[Verdict], reverse: Sequence[Verdict]) -> tuple[int, int, float, float]:
    """Votes and summed 1-6 scores for x and y, reading the reverse order flipped.

    Written out per order (no per-verdict tuples or method calls): a trade-off replay decides ~10^6
    matches, and this loop was a tenth of its time. Same sums, in the same order, as
    :meth:`Verdict.score_for_a` per verdict."""
    tally = _tally(forward, "A", "B", (0, 0, 0.0, 0.0))  # x shown as A
    return _tally(reverse, "B", "A", tally)  # y shown as A


def _tally(verdicts: Sequence[Verdict], for_x: str, for_y: str,
           start: tuple[int, int, float, float]) -> tuple[int, int, float, float]:
    """``start`` plus the votes and scores of one order's verdicts, where a verdict of ``for_x`` is a vote for x."""
    vx, vy, sx, sy = start
    for v in verdicts:
        better = v.better
        if better is None:
            continue
        s = float(v.score) if v.score is not None else (4.0 if better == "A" else 3.0)
        vx += better == for_x
        vy += better == for_y
        sx, sy = (sx + s, sy + (7 - s)) if for_x == "A" else (sx + (7 - s), sy + s)
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

