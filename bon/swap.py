"""When to ask a match's reverse order: always (the MMRB2 protocol) or only when the forward verdict
is not confident (a *gated* swap, roughly halving the calls of a judge that is usually sure).

A forward verdict's confidence is a number in [0, 1], read from what the judge gave:

* logits-mode judges (``p_a`` in the verdict's meta): ``|P(A) - P(B)|``;
* pointwise judges (a reward model compared by score, ``score_a``/``score_b`` in meta): the score
  gap times the judge's ``margin_scale``, capped at 1;
* any other judge: how extreme its 1-6 score is, ``|score - 3.5| / 2.5`` (6 or 1 -> 1.0, 5 or 2 -> 0.6,
  4 or 3 -> 0.2); a letter without a score has confidence 0, so its reverse is always asked.

``confidence: margin`` reads instead the judge's own A-minus-B margin in [-1, 1] (``margin`` in the
verdict's meta, as score-comparing judges keep it), which is finer than the 1-6 score; a margin
whose sign contradicts the letter counts as no confidence, and a verdict without one falls back to
the 1-6 score. ``confidence: score`` always uses the 1-6 score.

The reverse is skipped when every forward sample is answered, agrees on the letter and has
confidence >= ``gate``. The default ``gate: 1.0`` skips only the most extreme answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from bon.errors import BonError
from bon.protocol import Verdict

SWAP_MODES = ("both", "gated")
CONFIDENCE_SOURCES = ("auto", "score", "margin")


@dataclass(frozen=True)
class SwapPolicy:
    """``mode`` both|gated, ``gate`` the confidence a forward verdict needs to stand alone, ``confidence``
    auto (probability, score gap or 1-6 score, whichever the judge gives), score (the 1-6 score only)
    or margin (the judge's internal margin kept in meta)."""

    mode: str = "both"
    gate: float = 1.0
    confidence: str = "auto"

    @property
    def gated(self) -> bool:
        return self.mode == "gated"

    def identity(self) -> dict[str, Any]:
        """Both orders (the protocol) ignore the gate and its confidence source: they read the same
        whatever was given, so picks and labels of an ungated strategy never differ by them."""
        if not self.gated:
            return {"swap": "both", "gate": None, "confidence": None}
        return {"swap": self.mode, "gate": self.gate, "confidence": self.confidence}

    def needs_reverse(self, forward: Sequence[Verdict], judge: Any = None) -> bool:
        if not self.gated:
            return True
        letters = {v.better for v in forward}
        if None in letters or len(letters) != 1:
            return True
        return any(confidence(v, judge, self.confidence) < self.gate for v in forward)


def swap_policy(swap: str = "both", gate: float | int | str = 1.0, confidence: str = "auto", where: str = "strategy") -> SwapPolicy:
    """Validate a strategy's ``swap``/``gate``/``confidence`` options (a one-line error otherwise)."""
    if swap not in SWAP_MODES:
        raise BonError(f"{where}: swap must be one of {', '.join(SWAP_MODES)}, got {swap!r}")
    try:
        gate = float(gate)
    except (TypeError, ValueError):
        raise BonError(f"{where}: gate must be a number in [0, 1], got {gate!r}") from None
    if not 0.0 <= gate <= 1.0:
        raise BonError(f"{where}: gate must lie in [0, 1], got {gate}")
    if confidence not in CONFIDENCE_SOURCES:
        raise BonError(f"{where}: confidence must be one of {', '.join(CONFIDENCE_SOURCES)}, got {confidence!r}")
    return SwapPolicy(swap, gate, confidence)


def confidence(verdict: Verdict, judge: Any = None, source: str = "auto") -> float:
    """The forward verdict's confidence in [0, 1] (0 for a missing verdict or a bare letter)."""
    if verdict.better is None:
        return 0.0
    meta = verdict.meta or {}
    if source == "margin" and isinstance(meta.get("margin"), (int, float)):
        margin = float(meta["margin"]) * (1.0 if verdict.better == "A" else -1.0)
        return min(1.0, max(0.0, margin))
    if source == "auto":
        p_a = meta.get("p_a")
        if isinstance(p_a, (int, float)):
            return min(1.0, abs(2.0 * float(p_a) - 1.0))
        sa, sb = meta.get("score_a"), meta.get("score_b")
        from bon.plugins import PointwiseJudge

        if isinstance(judge, PointwiseJudge) and isinstance(sa, (int, float)) and isinstance(sb, (int, float)):
            return min(1.0, abs(float(sa) - float(sb)) * float(judge.margin_scale))
    return score_confidence(verdict.score)


def score_confidence(score: float | None) -> float:
    """How extreme a 1-6 score is: 1.0 for 6 or 1, 0.6 for 5 or 2, 0.2 for 4 or 3, 0 without a score."""
    if score is None:
        return 0.0
    return round(min(1.0, abs(float(score) - 3.5) / 2.5), 6)
