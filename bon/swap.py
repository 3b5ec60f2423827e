"""When to ask a match's reverse order: always (the MMRB2 protocol) or only when the forward verdict
is not confident (a *gated* swap, roughly halving the calls of a judge that is usually sure); and
when to ask the main judge at all (a *cascade*: a cheap judge settles the matches it is sure about).

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

An *exact tie* (the judge saw no difference: ``tie`` in meta, ``p_a`` of exactly 0.5, or a reward
model's two equal scores) is a tie, not a preference: ``ties: settle`` lets a tied forward verdict
stand (its letter is the judge's coin, and the reverse of a symmetric judge's tie is another tie, so
the protocol's outcome would be a coin too), ``ties: ask`` always asks its reverse, and ``ties: gate``
(the default) treats it like any other verdict, by its confidence.

``gate: auto`` picks the gate per judge from its own two-order judgments (:func:`bon.mmrb2.flips.calibrate_gate`):
the lowest gate, and whether ties stand, such that the share of match outcomes the reverse order would
change stays below ``max_flip`` (95% upper bound). ``audit`` (0.1 with ``gate: auto``, else 0) is the
seeded share of matches the gate would settle that are still asked in both orders, so the flip rate
is measured on the run itself; the referee falls back to both orders when it clearly exceeds ``max_flip``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from bon.errors import BonError
from bon.protocol import Verdict

SWAP_MODES = ("both", "gated")
CONFIDENCE_SOURCES = ("auto", "score", "margin")
TIE_RULES = ("gate", "settle", "ask")
AUTO = "auto"
DEFAULT_MAX_FLIP = 0.02
DEFAULT_AUDIT = 0.1


@dataclass(frozen=True)
class SwapPolicy:
    """``mode`` both|gated, ``gate`` the confidence a forward verdict needs to stand alone, ``confidence``
    auto (probability, score gap or 1-6 score, whichever the judge gives), score (the 1-6 score only)
    or margin (the judge's internal margin kept in meta)."""

    mode: str = "both"
    gate: float | str = 1.0  # a confidence in [0, 1], or "auto" (calibrated per judge)
    confidence: str = "auto"
    ties: str = "gate"
    max_flip: float = DEFAULT_MAX_FLIP  # gate: auto's target share of outcomes the reverse would change
    audit: float = 0.0  # share of matches the gate settles that are still asked in both orders

    @property
    def gated(self) -> bool:
        return self.mode == "gated"

    @property
    def calibrated(self) -> bool:
        return self.gated and self.gate == AUTO

    def identity(self) -> dict[str, Any]:
        """Both orders (the protocol) ignore the gate and its confidence source: they read the same
        whatever was given, so picks and labels of an ungated strategy never differ by them."""
        if not self.gated:
            return {"swap": "both", "gate": None, "confidence": None}
        return {"swap": self.mode, "gate": self.gate, "confidence": self.confidence,
                **({"ties": self.ties} if self.ties != "gate" else {}),
                **({"max_flip": self.max_flip} if self.calibrated else {}), **({"audit": self.audit} if self.audit else {})}

    def needs_reverse(self, forward: Sequence[Verdict], judge: Any = None) -> bool:
        if not self.gated:
            return True
        if self.calibrated:
            raise BonError("gate: auto has no threshold until the referee calibrates it (bon.referee.GateState)")
        letters = {v.better for v in forward}
        if None in letters or len(letters) != 1:
            return True
        if self.ties != "gate" and all(exact_tie(v, judge) for v in forward):
            return self.ties == "ask"
        return any(confidence(v, judge, self.confidence) < float(self.gate) for v in forward)


def swap_policy(swap: str = "both", gate: float | int | str = 1.0, confidence: str = "auto", where: str = "strategy",
                ties: str = "gate", max_flip: float | str = DEFAULT_MAX_FLIP, audit: float | str | None = None) -> SwapPolicy:
    """Validate a strategy's ``swap``/``gate``/``confidence``/``ties``/``max_flip``/``audit`` options
    (a one-line error otherwise)."""
    if swap not in SWAP_MODES:
        raise BonError(f"{where}: swap must be one of {', '.join(SWAP_MODES)}, got {swap!r}")
    if gate != AUTO:
        gate = unit_number(gate, "gate", where, "a number in [0, 1] or 'auto'")
    if confidence not in CONFIDENCE_SOURCES:
        raise BonError(f"{where}: confidence must be one of {', '.join(CONFIDENCE_SOURCES)}, got {confidence!r}")
    if ties not in TIE_RULES:
        raise BonError(f"{where}: ties must be one of {', '.join(TIE_RULES)}, got {ties!r}")
    max_flip = unit_number(max_flip, "max_flip", where)
    audit = (DEFAULT_AUDIT if gate == AUTO else 0.0) if audit is None else unit_number(audit, "audit", where)
    if audit and swap != "gated":
        raise BonError(f"{where}: audit needs swap: gated (both orders are always asked otherwise)")
    return SwapPolicy(swap, gate, confidence, ties, max_flip, audit)


def unit_number(value: Any, name: str, where: str, what: str = "a number in [0, 1]") -> float:
    """``value`` as a float in [0, 1], or a one-line error naming the option."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BonError(f"{where}: {name} must be {what}, got {value!r}") from None
    if not 0.0 <= number <= 1.0:
        raise BonError(f"{where}: {name} must lie in [0, 1], got {number:g}")
    return number


def exact_tie(verdict: Verdict, judge: Any = None) -> bool:
    """The judge saw no difference: ``tie`` in its meta, ``p_a`` of exactly 0.5, or a reward model's equal scores."""
    if verdict.better is None:
        return False
    meta = verdict.meta or {}
    if meta.get("tie") is True or meta.get("p_a") == 0.5:
        return True
    sa, sb = meta.get("score_a"), meta.get("score_b")
    return _pointwise(judge) and isinstance(sa, (int, float)) and sa == sb


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
        if _pointwise(judge) and isinstance(sa, (int, float)) and isinstance(sb, (int, float)):
            return min(1.0, abs(float(sa) - float(sb)) * float(judge.margin_scale))
    return score_confidence(verdict.score)


def _pointwise(judge: Any) -> bool:
    """A reward model (:class:`bon.plugins.PointwiseJudge`, which sets ``pointwise``): its verdicts carry two scores.
    Read from the class attribute so the policies below need not import the plugin interfaces above them."""
    return getattr(type(judge), "pointwise", False) is True


def score_confidence(score: float | None) -> float:
    """How extreme a 1-6 score is: 1.0 for 6 or 1, 0.6 for 5 or 2, 0.2 for 4 or 3, 0 without a score."""
    if score is None:
        return 0.0
    return round(min(1.0, abs(float(score) - 3.5) / 2.5), 6)


@dataclass(frozen=True)
class CascadePolicy:
    """``judge`` the cheap judge's spec, asked once (forward order) per match; ``gate`` the confidence
    its verdict needs to settle the match ("auto": calibrated against the main judge's two-order
    decisions on pairs both judged, keeping the share of changed outcomes within ``max_flip``).
    The rest go to the main judge in both orders."""

    judge: str
    gate: float | str = AUTO
    confidence: str = "auto"
    max_flip: float = DEFAULT_MAX_FLIP

    def identity(self) -> dict[str, Any]:
        return {"cascade": self.judge, "cascade_gate": self.gate, "cascade_confidence": self.confidence,
                **({"cascade_max_flip": self.max_flip} if self.gate == AUTO else {})}


def cascade_policy(judge: str | None, gate: float | str = AUTO, confidence: str = "auto",
                   max_flip: float | str = DEFAULT_MAX_FLIP, where: str = "strategy") -> CascadePolicy | None:
    """Validate a strategy's ``cascade``/``cascade_gate``/``cascade_confidence`` options (None: no cascade)."""
    if judge is None:
        return None
    if not isinstance(judge, str) or not judge:
        raise BonError(f"{where}: cascade must be a judge spec, got {judge!r}")
    if gate != AUTO:
        gate = unit_number(gate, "cascade_gate", where, "a number in [0, 1] or 'auto'")
    if confidence not in CONFIDENCE_SOURCES:
        raise BonError(f"{where}: cascade_confidence must be one of {', '.join(CONFIDENCE_SOURCES)}, got {confidence!r}")
    return CascadePolicy(judge, gate, confidence, unit_number(max_flip, "max_flip", where))
