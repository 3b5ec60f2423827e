"""Deliberately flawed judges: references for what a biased or useless judge looks like.

* :class:`PositionBiasJudge` answers "A" most of the time whatever it is shown (the position bias
  MMRB2 measures), following a cheap signal otherwise.
* :class:`ImageBiasJudge` prefers whichever response holds more images, then more text, regardless
  of correctness (the bias the MMRB2 paper found in reasoning judges).
* :class:`RandomJudge` flips a seeded coin.

All three are deterministic: every "random" choice is a hash of (algorithm, seed, prompt digest,
A digest, B digest, sample), never Python's ``hash()``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bon.content import Content, Prompt
from bon.errors import BonError
from bon.protocol import Comparison, Verdict, score_from_margin, seeded_coin

from judges.synthetic._scoring import LruCache, ScoringJudge, image_array, seeded_uniform


_INK = LruCache()  # image digest -> its ink: a replay asks the same images again and again


def ink(response: Content) -> float | None:
    """Mean darkness of the response's images in [0, 1] (more drawn on a light canvas = more ink)."""
    images = response.images
    if not images:
        return None
    return float(np.mean([_INK.get(im.digest, lambda im=im: 1.0 - image_array(im).mean() / 255.0) for im in images]))


class PositionBiasJudge(ScoringJudge):
    """Says "A" with probability ``bias``; otherwise prefers the response with more ink (darker
    images), or, when neither side has images, the longer text.

    Options: ``bias`` (default 0.8), the probability of answering "A" without looking; ``confident``
    (default false): its unlooking answers say "A much better" (6), the overconfident kind of bias
    that a confidence-gated swap cannot see.
    """

    algorithm = "position-bias"
    version = 1
    added_later = ("confident",)
    margin_scale = 8.0  # ink differences of a few percent are what this signal sees

    def __init__(self, name: str | None = None, seed: int = 0, bias: float = 0.8, confident: bool = False) -> None:
        super().__init__(name=name, seed=seed)
        if not 0.0 <= float(bias) <= 1.0:
            raise BonError(f"{name or self.algorithm}: bias must lie in [0, 1], got {bias}")
        self.bias = float(bias)
        self.confident = bool(confident)

    def options(self) -> dict[str, Any]:
        return {"bias": self.bias, **({"confident": True} if self.confident else {})}

    def _decide(self, c: Comparison) -> Verdict:  # its own scores: ink, else text length
        key = self.coin_key(c)
        sa, sb = ink(c.a), ink(c.b)
        if sa is None and sb is None:
            la, lb = len(c.a.text), len(c.b.text)
            margin = math.tanh((la - lb) / 200.0)
            signal = "length"
        elif sa is not None and sb is not None:
            margin = float(np.clip((sa - sb) * self.margin_scale, -1.0, 1.0))
            signal = "ink"
        else:
            margin, signal = 0.0, "none"
        biased = seeded_uniform(*key, "position") < self.bias
        if biased:
            better, score = ("A", 6) if self.confident else score_from_margin(max(margin, 0.0), coin=True)
        else:
            better, score = score_from_margin(margin, coin=seeded_coin(*key))
        return Verdict(better=better, score=score, meta={"biased": biased, "signal": signal, "margin": round(margin, 4)})


class ImageBiasJudge(ScoringJudge):
    """Prefers the response with more images; with equal counts, the one with more text."""

    algorithm = "image-bias"
    version = 1

    def response_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        n_images = len(response.images)
        chars = len(response.text.strip())
        # one image outweighs any amount of text: the length term stays below 0.5
        return 0.5 * n_images + 0.45 * math.tanh(chars / 400.0), {"images": n_images, "chars": chars}


class RandomJudge(ScoringJudge):
    """A seeded coin per comparison; usually a mild preference (4 or 3), sometimes a firm one (5 or 2).

    Options: ``firm`` (default 0.2), the share of verdicts given as 5 or 2.
    """

    algorithm = "random"
    version = 1

    def __init__(self, name: str | None = None, seed: int = 0, firm: float = 0.2) -> None:
        super().__init__(name=name, seed=seed)
        self.firm = float(firm)

    def _decide(self, c: Comparison) -> Verdict:
        key = self.coin_key(c)
        a_wins = seeded_coin(*key)
        firm = seeded_uniform(*key, "firm") < self.firm
        if a_wins:
            return Verdict(better="A", score=5 if firm else 4)
        return Verdict(better="B", score=2 if firm else 3)
