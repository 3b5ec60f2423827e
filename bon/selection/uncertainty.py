"""Uncertainty-driven selection: ask the comparison where the current ranking is least certain, and stop
once the leader is settled within a tolerance (a Gaussian product of experts, after Liusie et al.).

Every verdict is one expert's noisy look at a score difference: ``y = s_A - s_B + b + e`` with ``y`` the
verdict's signed strength in [-1, 1] (the judge's own margin or P(A)-P(B) where it keeps one, else the
1-6 score's extremity), ``b`` a position bias shared by all comparisons and ``e ~ N(0, noise^2)`` (``noise: auto`` measures it on
the judge's stored two-order judgments: the preference set's when there is one). An
*exact tie* is the observation ``y = 0`` (the two are equal), not a coin. With a Gaussian prior on
the scores the posterior is Gaussian in closed form. One comparison is one judge call: the first
round pairs the candidates once (one order), then each round asks the leader against the candidate
most likely to beat it, each pair's orders alternating (so a position bias shows up and is fitted).
The bracket stops when no candidate's expected margin over the leader, E[max(s_j - s_L, 0)], exceeds
``tolerance``, or at ``max_calls`` (default 2(N-1), the knockout's); the pick reports whether it settled.
``prefilter: JUDGE`` with ``keep: k`` (or ``auto``) runs it only among the k candidates a pointwise judge
scores best (:mod:`bon.selection.prefilter`; the cap is then 2(k-1)).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from bon.errors import BonError
from bon.protocol import MatchResult, Verdict
from bon.selection.base import Bracket, Finish, Strategy
from bon.selection.prefilter import DEFAULT_CALIBRATE, prefilter_policy
from bon.swap import SwapPolicy, confidence, exact_tie, unit_number

ONE_ORDER = SwapPolicy("gated", 0.0, "auto", "settle")  # every answered verdict stands: one call per comparison
BIAS_PRIOR_SD = 0.5
DEFAULT_NOISE = 0.5  # noise: auto without stored two-order judgments to measure it on
NOISE_FLOOR = 0.1  # a judge whose two orders always mirror each other still errs, just consistently


class Uncertainty(Strategy):
    name = "uncertainty"
    added_later = ("prefilter", "keep", "calibrate")  # at their defaults, identities (and labels) stay as before

    def __init__(self, tolerance: float = 0.05, noise: float | str = "auto", max_calls: int | None = None,
                 prefilter: str | None = None, keep: int | str | None = None, calibrate: float = DEFAULT_CALIBRATE) -> None:
        self.tolerance = unit_number(tolerance, "tolerance", "uncertainty")
        self.noise = noise if noise == "auto" else unit_number(noise, "noise", "uncertainty", "a number in (0, 1] or 'auto'")
        if self.noise == 0:
            raise BonError("uncertainty: noise must be above 0 (a judge without noise needs no posterior)")
        self.measured_noise: float | None = None
        if max_calls is not None and (isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1):
            raise BonError(f"uncertainty: max_calls must be a positive whole number, got {max_calls!r}")
        self.max_calls = max_calls
        self.swap = ONE_ORDER
        self.prefilter = prefilter_policy(prefilter, keep, calibrate, "uncertainty")

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "tolerance": self.tolerance, "noise": self.noise, "max_calls": self.max_calls}

    def seed_scores(self, referee: Any, groups: Any) -> None:
        """No seeding; with ``noise: auto``, measure the judge's noise on its stored two-order judgments first."""
        if self.noise == "auto":
            self.measured_noise = measured_noise(referee)
        return None

    def bracket(self, n: int, key: tuple) -> Bracket:
        if n < 1:
            raise BonError(f"uncertainty: no candidates for {key}")
        if n == 1:
            return 0
        cap = self.max_calls or 2 * (n - 1)
        model = Posterior(n, self.noise if self.noise != "auto" else self.measured_noise or DEFAULT_NOISE)
        asked: dict[tuple[int, int], int] = {}
        pending = [(i, i + 1) for i in range(0, n - 1, 2)][:cap]
        while True:
            for x, y in pending:
                asked[(min(x, y), max(x, y))] = asked.get((min(x, y), max(x, y)), 0) + 1
            results = yield pending
            model.add(results)
            leader, regrets = model.leader(key), model.regrets(key)
            worst = max((j for j in range(n) if j != leader), key=lambda j: (regrets[j], -j))
            if regrets[worst] <= self.tolerance or model.calls >= cap:
                settled = bool(regrets[worst] <= self.tolerance)
                note = "every comparison an exact tie: no information" if model.informative == 0 else None
                return Finish(leader, settled=settled, note=note)
            pair = (min(leader, worst), max(leader, worst))
            # alternate the orders of a pair: its first asking shows the lower index as A
            pending = [pair if asked.get(pair, 0) % 2 == 0 else (pair[1], pair[0])]


class Posterior:
    """The Gaussian posterior over n scores and a position bias, from one-order verdicts."""

    def __init__(self, n: int, noise: float):
        self.n = n
        self.precision = np.diag([1.0] * n + [1.0 / BIAS_PRIOR_SD**2])
        self.info = np.zeros(n + 1)
        self.noise2 = noise * noise
        self.calls = 0
        self.informative = 0  # verdicts that were not exact ties
        self._mean: np.ndarray | None = None

    def add(self, results: list[MatchResult]) -> None:
        for r in results:
            for v in r.forward:  # x shown as A
                self.calls += 1
                y = strength(v)
                if y is None:
                    continue
                self.informative += y != 0.0
                h = np.zeros(self.n + 1)
                h[r.x], h[r.y], h[self.n] = 1.0, -1.0, 1.0
                self.precision += np.outer(h, h) / self.noise2
                self.info += h * y / self.noise2
        self._mean = None

    @property
    def mean(self) -> np.ndarray:
        if self._mean is None:
            self._mean = np.linalg.solve(self.precision, self.info)
        return self._mean

    def leader(self, key: tuple) -> int:
        scores = self.mean[: self.n]
        top = [int(i) for i in np.flatnonzero(np.isclose(scores, scores.max(), atol=1e-9))]
        if len(top) == 1:
            return top[0]
        digest = hashlib.sha256(repr(("uncertainty", key)).encode()).digest()
        return top[digest[0] % len(top)]  # equal scores: a seeded choice, never the lowest index by default

    def regrets(self, key: tuple) -> list[float]:
        """E[max(s_j - s_leader, 0)] for every candidate j (0 for the leader)."""
        cov = np.linalg.inv(self.precision)
        mu, lead = self.mean, self.leader(key)
        out = []
        for j in range(self.n):
            var = cov[j, j] + cov[lead, lead] - 2 * cov[j, lead]
            out.append(0.0 if j == lead else expected_excess(mu[j] - mu[lead], math.sqrt(max(var, 1e-12))))
        return out


def measured_noise(referee: Any) -> float | None:
    """The judge's noise from its stored two-order pairs: y_AB + y_BA = 2 bias + two noises, so the noise
    variance is half their variance (floored at NOISE_FLOOR; None without pairs)."""
    _, pairs = referee.two_order_pairs()
    sums = [a + b for f, r in pairs if (a := strength(f)) is not None and (b := strength(r)) is not None]
    if len(sums) < 2:
        return None
    return float(min(1.0, max(NOISE_FLOOR, math.sqrt(np.var(sums) / 2))))


def expected_excess(mean: float, sd: float) -> float:
    """E[max(D, 0)] for D ~ N(mean, sd^2)."""
    z = mean / sd
    return mean * 0.5 * math.erfc(-z / math.sqrt(2)) + sd * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def strength(v: Verdict) -> float | None:
    """A verdict's signed A-minus-B strength in [-1, 1]: 0 for an exact tie, None when missing."""
    if v.better is None:
        return None
    if exact_tie(v):
        return 0.0
    return (1.0 if v.better == "A" else -1.0) * confidence(v, None, "margin")
