"""Shared plumbing for the score-based synthetic judges.

Each judge here turns one response into an internal score (or ``None``: "this judge has no signal
for that response"), and the pairwise verdict is the difference of the two scores fed through
:func:`bon.protocol.score_from_margin`. Equal scores, and pairs where either side has no signal, are
decided by a coin seeded by the judge's algorithm, its seed and the digests of what it saw, so the
same comparison always gets the same answer and two judges never share their tie coins.

A bad response (a missing or unreadable image file, anything the scorer chokes on) becomes
``Verdict.failed(reason)``; :meth:`ScoringJudge.judge` never raises.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from typing import Any, Callable, Hashable, Sequence, TypeVar

import numpy as np

from bon.content import Content, ImageItem, Prompt
from bon.errors import BonError
from bon.plugins import PairwiseJudge, Score
from bon.protocol import Comparison, Verdict, score_from_margin, seeded_coin

T = TypeVar("T")


def seeded_uniform(*parts: object) -> float:
    """A reproducible number in [0, 1) from any tuple of values (never Python's ``hash()``)."""
    h = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


def image_array(item: ImageItem) -> np.ndarray:
    """The item's pixels as an ``H x W x 3`` uint8 array (raises BonError for a missing file). An RGB image is
    read as is: ``convert("RGB")`` would copy it first, and numpy copies it again."""
    image = item.load()
    return np.asarray(image if image.mode == "RGB" else image.convert("RGB"), dtype=np.uint8)


def channel_max(arr: np.ndarray) -> np.ndarray:
    """Maximum over the colour channels of an ``H x W x 3`` array: ``max(axis=2)``, several times faster
    (numpy is slow at reducing a last axis of three)."""
    return np.maximum(np.maximum(arr[..., 0], arr[..., 1]), arr[..., 2])


def channel_min(arr: np.ndarray) -> np.ndarray:
    """Minimum over the colour channels: ``min(axis=2)``, as :func:`channel_max`."""
    return np.minimum(np.minimum(arr[..., 0], arr[..., 1]), arr[..., 2])


FEATURES = 1 << 17  # entries of a per-image feature memo: a few floats each (well under 1 kB), so at most
# ~100 MB; enough for every image of a paper-size study (128,000 candidates). A smaller memo made `bon
# tradeoff` super-linear: its settings sweep every candidate in turn, and a least-recently-used memo
# smaller than one sweep misses on every image of every sweep (7.9x the time for 4x the prompts).


class LruCache:
    """A bounded memo keyed by image digests (features are cheap to keep, costly to redo)."""

    def __init__(self, size: int = FEATURES) -> None:
        self.size = size
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        if key in self._data:
            self._data.move_to_end(key)
            return self._data[key]
        value = make()
        self._data[key] = value
        if len(self._data) > self.size:
            self._data.popitem(last=False)
        return value


QUOTE_RE = re.compile(r"\"([^\"]+)\"|\u201c([^\u201d]+)\u201d")


def quoted_texts(text: str) -> list[str]:
    """Strings the prompt quotes in double quotes (straight or curly)."""
    return [m.group(1) or m.group(2) for m in QUOTE_RE.finditer(text) if (m.group(1) or m.group(2)).strip()]


class ScoringJudge(PairwiseJudge):
    """A judge that scores each response on its own and compares the two scores.

    Subclasses set ``algorithm`` (the registry name, also used in tie coins), bump ``version`` when
    the algorithm changes its answers, list their settings in :meth:`options`, and implement
    :meth:`response_score`. ``margin_scale`` maps a score difference onto the roughly [-1, 1] range
    :func:`score_from_margin` expects.
    """

    algorithm = "scoring"
    version = 1
    name_key = "algorithm"  # keeps the store keys (and so the tie coins) of run folders made before identities were derived
    margin_scale = 1.0
    forkable = True  # pure CPU, no shared model: bon.stages.pool may run it in a worker process

    def __init__(self, name: str | None = None, seed: int = 0) -> None:
        self.name = name or self.algorithm
        self.seed = int(seed)
        self._scores = LruCache()  # (task, prompt digest, response digest) -> what scored() returns

    # --- what subclasses provide ---------------------------------------------------------------
    def options(self) -> dict[str, Any]:
        """Facts beyond the constructor's arguments that change answers (those are in the identity already)."""
        return {}

    def response_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        """``(score, details)``; score None means this judge sees nothing to grade in the response."""
        raise NotImplementedError

    # --- the protocol --------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        # added to the derived identity (plugin, version, seed, options); the label ``name`` is not in it
        return {"algorithm": self.algorithm, **self.options()}

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        return [self.judge_one(c) for c in comparisons]

    def judge_one(self, c: Comparison) -> Verdict:
        try:
            return self._decide(c)
        except BonError as exc:
            return Verdict.failed(f"{self.name}: {exc}")
        except Exception as exc:  # a judge never raises for a bad response
            return Verdict.failed(f"{self.name}: {type(exc).__name__}: {exc}")

    @property
    def scores_alone(self) -> bool:
        """Its verdicts compare two per-response scores (and so it can prefilter), unless a subclass decides
        pairs another way (a position-biased or random judge has no score of one response)."""
        cls = type(self)
        return cls.response_score is not ScoringJudge.response_score and cls._decide is ScoringJudge._decide

    def score(self, prompt: Prompt, responses: Sequence[Content]) -> list[Score]:
        """Each response's own score (what its verdicts compare); no signal or a bad response: missing."""
        if not self.scores_alone:
            raise BonError(f"{self.name}: gives no score of one response")
        return [self._score_one(prompt, r) for r in responses]

    def scored(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        """:meth:`response_score` with its details as stored (:func:`_jsonable`), once per prompt and response: a
        knockout shows each candidate in several matches, both orders each, so most calls ask for a score again.
        A score depends on the task, the prompt's content and the response's alone; a failure is not kept."""
        key = (prompt.task, prompt.content.digest, response.digest)
        return self._scores.get(key, lambda: self._stored_score(prompt, response))

    def _stored_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        value, details = self.response_score(prompt, response)
        return value, _jsonable(details)

    def _score_one(self, prompt: Prompt, response: Content) -> Score:
        try:
            value, _ = self.scored(prompt, response)
        except BonError as exc:
            return Score(None, missing=f"{self.name}: {exc}")
        except Exception as exc:  # a judge never raises for a bad response
            return Score(None, missing=f"{self.name}: {type(exc).__name__}: {exc}")
        if value is None:
            return Score(None, missing=f"{self.name}: no signal in this response")
        return Score(_round(value))  # as its verdicts record it (``score_a``/``score_b``)

    def coin_key(self, c: Comparison) -> tuple:
        return (self.algorithm, self.seed, c.prompt.content.digest, c.a.digest, c.b.digest, c.sample)

    def _decide(self, c: Comparison) -> Verdict:
        key = self.coin_key(c)  # also loads every image once, so a missing file fails here
        sa, da = self.scored(c.prompt, c.a)
        sb, db = self.scored(c.prompt, c.b)
        signal = sa is not None and sb is not None
        margin = float(np.clip((sa - sb) * self.margin_scale, -1.0, 1.0)) if signal else 0.0
        better, score = score_from_margin(margin, coin=seeded_coin(*key))
        meta = {
            "score_a": _round(sa),
            "score_b": _round(sb),
            "margin": round(margin, 4),
            "signal": signal,
            "tie": margin == 0.0,
        }
        if da or db:
            meta["a"], meta["b"] = da, db
        return Verdict(better=better, score=score, meta=meta)


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def _jsonable(v: Any) -> Any:
    """Verdict meta is stored as JSON: plain floats (rounded), ints, strings, lists and dicts."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return round(float(v), 4)
    return v
