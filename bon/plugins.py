"""Every interface a plugin implements, in one place, and the identity the judgment store keys on.

Kinds: :class:`Generator`, :class:`PairwiseJudge` (and :class:`PointwiseJudge`, a reward model),
:class:`Verifier`, :class:`Strategy` (and :class:`PointwiseStrategy`) and :class:`Suite`. The
pairwise question itself (``Comparison``, ``Verdict``, the tie rule) lives in :mod:`bon.protocol`.

Identity is derived, not declared: a plugin's :meth:`Plugin.identity` is its registered name, its
``version`` (a class attribute, default ``"1"``) and every constructor argument as bound (defaults
applied), except the label ``name`` and the run-only settings in :data:`RUN_ONLY` (and a class's own
``run_only``) that never change an answer. A plugin may override ``identity()`` to *add* facts (a
prompt-template hash, a resolved model revision); whatever it returns is merged over the derived part,
so a setting can never be forgotten and a changed setting is always a new judgment.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generator as _Coroutine, Protocol, Sequence

from bon.content import Candidate, Content, Prompt
from bon.protocol import Comparison, MatchResult, Verdict, score_from_margin, seeded_coin
from bon.swap import CascadePolicy, SwapPolicy

# Settings that change how a plugin runs, never what it answers: left out of every identity.
RUN_ONLY = frozenset({
    "name", "device", "device_map", "attn_implementation", "batch_size", "concurrency", "max_concurrency",
    "timeout", "retries", "max_retries", "backoff", "backoff_base", "backoff_max", "max_backoff",
    "max_retry_after", "retry_for", "preflight", "preflight_timeout", "api_key_env", "price_input", "price_output",
})
SECRET = re.compile(r"(^|_)(key|api_key|token|secret|password)$")  # never in an identity (it is logged)
# kind -> (package holding the built-in PLUGINS table, entry-point group for installed packages); the tables
# are names only (module:attribute strings), so reading one imports no plugin
KINDS = {
    "generator": ("generators", "bon.generators"),
    "judge": ("judges", "bon.judges"),
    "verifier": ("verifiers", "bon.verifiers"),
    "strategy": ("bon.selection", "bon.strategies"),
    "suite": ("generators.suites", "bon.suites"),
}


class Plugin:
    """Base of every plugin kind: records its constructor arguments so identity needs no code."""

    kind: ClassVar[str] = "plugin"
    name: str = "plugin"  # the label a study shows (not part of the identity)
    version: Any = "1"  # bump when the same settings would now give different answers
    run_only: ClassVar[tuple[str, ...]] = ()  # this plugin's extra settings that never change an answer
    # options added in a later release, left out of the identity while at their default: judgments
    # stored before they existed (and the tie coins seeded by the identity) stay valid
    added_later: ClassVar[tuple[str, ...]] = ()
    name_key: ClassVar[str] = "plugin"  # the identity key holding the registered name

    def __init__(self) -> None:
        """A plugin without a constructor of its own takes no options (so none can slip by)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        self._bon_arguments = bound_arguments(cls, args, kwargs)
        return self

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("identity")
        if own is not None and not getattr(own, "_merges_derived", False):
            cls.identity = _merged_identity(own)

    def identity(self) -> dict[str, Any]:
        """What the store keys on. Override to add facts; the derived part is always kept."""
        return derived_identity(self)

    def close(self) -> None:
        """Release the models this plugin holds (they load again on next use); none by default."""


def _merged_identity(own: Any) -> Any:
    @functools.wraps(own)
    def identity(self: Plugin) -> dict[str, Any]:
        return {**derived_identity(self), **own(self)}

    identity._merges_derived = True  # type: ignore[attr-defined]
    return identity


def bound_arguments(cls: type, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The constructor's arguments by name, defaults applied (empty when they do not bind), as a JSON
    snapshot: a plugin that later edits a dict it was given does not change its identity."""
    try:
        bound = _init_signature(cls).bind(None, *args, **kwargs)
    except TypeError:  # the constructor itself will report it
        return {}
    bound.apply_defaults()
    out: dict[str, Any] = {}
    for key, value in list(bound.arguments.items())[1:]:
        kind = bound.signature.parameters[key].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            out[key] = list(value)
        else:
            out[key] = value
    return json.loads(json.dumps(out, default=str))


@functools.lru_cache(maxsize=None)
def _init_signature(cls: type) -> inspect.Signature:
    return inspect.signature(cls.__init__)


def builtin_names(kind: str) -> dict[str, str]:
    """The built-in ``PLUGINS`` table of a kind: name -> ``module:attribute``."""
    return dict(importlib.import_module(KINDS[kind][0]).PLUGINS)


def registered_name(plugin: Any) -> str:
    """The name a plugin's class is registered under among the built-ins, else ``module:Class``."""
    cls = type(plugin)
    target = f"{cls.__module__}:{cls.__qualname__}"
    kind = getattr(cls, "kind", None)
    if kind in KINDS:
        for name, value in builtin_names(kind).items():
            if value == target:
                return name
    return target


def derived_identity(plugin: Plugin) -> dict[str, Any]:
    """Registered name, version and every answer-changing constructor argument."""
    skip = RUN_ONLY | set(type(plugin).run_only)
    arguments = getattr(plugin, "_bon_arguments", {})
    params = _init_signature(type(plugin)).parameters
    skip |= {k for k in type(plugin).added_later if k in params and arguments.get(k) == params[k].default}
    return {
        type(plugin).name_key: getattr(plugin, "_bon_plugin", None) or registered_name(plugin),
        "version": type(plugin).version,
        **{k: v for k, v in arguments.items() if k not in skip and not SECRET.search(k)},
    }


# --- generators -------------------------------------------------------------------------------


class Generator(Plugin, ABC):
    """Samples candidates for a prompt. ``name`` is the label the study gives this generator."""

    kind = "generator"
    name = "generator"

    @abstractmethod
    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        """One candidate per seed, ``index`` = position in ``seeds``; same seed, same candidate."""


# --- verifiers --------------------------------------------------------------------------------


@dataclass
class Score:
    """A verifier's downstream score of one candidate, in [0, 1]; ``value`` None means grading failed.
    A ``transient`` failure is not stored by the verify stage, so the candidate stays pending until a
    rerun scores it."""

    value: float | None
    details: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None
    transient: bool = False  # a failure worth retrying on a rerun (timeout, 5xx, out of memory)


class Verifier(Plugin, ABC):
    """Scores a candidate's success on its prompt from what the candidate shows (pixels and text)."""

    kind = "verifier"
    name = "verifier"
    # what the benchmark's own evaluation code does with a stored score that failed: "zero" (counted as 0)
    # or "missing" (left out). The Best-of-N metrics' ``on_failure: official`` follows it
    # (analysis.bon_metrics) and so does the verifier's ``aggregate`` (``bon score``), so both count a failed
    # score alike. A verifier option that handles a failed grade inside the score (GEdit's ``on_failure``)
    # acts first; only what is still failed reaches this rule.
    official_on_failure = "missing"

    @abstractmethod
    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        """Never raises for a bad candidate: returns ``Score(None, missing=reason)``."""

    def read_item(self, item: dict[str, Any], base_dir: Any) -> tuple[Prompt, Candidate]:
        """One benchmark item in the benchmark's own fields (plus ``response`` text and/or image paths,
        relative to ``base_dir``) as the prompt and candidate :meth:`score` takes (``bon score``).
        Raises :class:`bon.errors.BonError` naming the item and the field that is missing or wrong."""
        from bon.errors import BonError
        raise BonError(f"verifier {self.name!r} does not read benchmark items (bon score)")

    def item_id(self, item: dict[str, Any]) -> str:
        """The item's own id in its benchmark (EMMA ``pid``, GEdit ``key``, ...)."""
        return str(item.get("id", ""))

    def aggregate(self, scored: Sequence[tuple[Prompt, Score]]) -> dict[str, Any]:
        """The benchmark's headline numbers over scored items, aggregated as its official code does.

        The default (no official rule) is the mean of the scores that exist and the count of failed ones;
        a verifier whose benchmark aggregates otherwise (per category, several levels) overrides it."""
        values = [s.value for _, s in scored if s.value is not None]
        return {"score": sum(values) / len(values) if values else None, "items": len(scored),
                "failed": len(scored) - len(values)}

# --- judges -----------------------------------------------------------------------------------


class PairwiseJudge(Plugin, ABC):
    """A judge speaking the MMRB2 pairwise protocol. Subclasses set ``name`` and answer batches."""

    kind = "judge"
    name = "judge"
    pointwise: ClassVar[bool] = False  # True for PointwiseJudge (bon.swap reads it: score gaps as confidence)
    # the referee asks at most this many new comparisons per call and stores them before the next
    # (a killed run loses at most that many); None: a whole referee batch in one call
    store_every: int | None = 256
    samples_answers: bool = False  # asking again can give another answer (so --retry-missing may re-ask)

    @abstractmethod
    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        """Answer each comparison; failures come back as ``Verdict.failed(reason)``, never raise."""

    @property
    def scores_alone(self) -> bool:
        """Whether this judge also gives one score per response (``score(prompt, responses)``), so it can
        prefilter (:mod:`bon.selection.prefilter`): a reward model, or a judge that compares two such scores."""
        return False


def scores_alone(judge: Any) -> bool:
    """A judge that can score each candidate alone (see :attr:`PairwiseJudge.scores_alone`)."""
    return isinstance(judge, PointwiseJudge) or bool(getattr(judge, "scores_alone", False))


class PointwiseJudge(PairwiseJudge):
    """A judge that scores each response alone (a reward model: CLIPScore, PickScore, VQAScore...).

    Pointwise selection takes the argmax of its scores; its pairwise view compares the two scores
    (``margin_scale`` maps a score difference to the roughly [-1, 1] margin), so the same judge also
    enters knockout, round-robin and MMRB2 scoring.
    """

    margin_scale: float = 1.0
    pointwise: ClassVar[bool] = True

    @property
    def scores_alone(self) -> bool:
        return True

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


# --- selection strategies ---------------------------------------------------------------------

@dataclass
class Finish:
    """What a bracket may return instead of a bare winner: the winner and the matches it chose not to
    ask (an early stop), so the driver can report the calls saved."""

    winner: int
    skipped_matches: int = 0
    settled: bool | None = None  # an adaptive strategy: did the leader settle before its call cap?
    note: str | None = None  # what the strategy saw, in a phrase (e.g. every comparison an exact tie)


Bracket = _Coroutine[list[tuple[int, int]], list[MatchResult], "int | Finish"]


class Strategy(Plugin, ABC):
    """Picks one of N candidates by asking for matches; it never calls a judge itself."""

    kind = "strategy"
    name = "strategy"
    swap: SwapPolicy = SwapPolicy()  # pairwise strategies: both orders (the protocol) or a gated swap
    cascade: CascadePolicy | None = None  # a cheap judge that settles the matches it is sure about
    prefilter: Any = None  # a pointwise judge that keeps the top k candidates (bon.selection.prefilter.PrefilterPolicy)

    def seed_scores(self, referee: Any, groups: Sequence[Any]) -> list[tuple[list[float | None], int]] | None:
        """Per group (:class:`bon.selection.base.Group`), one score per candidate to seed the bracket with
        and the judge decisions that cost (None: no seeding)."""
        return None

    @abstractmethod
    def bracket(self, n: int, key: tuple) -> Bracket:
        """Yield ready matches among candidates 0..n-1, receive their results, return the winner.
        ``key`` identifies the group (seed, prompt, generator) for seeded choices."""


class PointwiseStrategy(Strategy):
    """A strategy that needs one score per candidate instead of matches."""

    @abstractmethod
    def choose(self, scores: list[float | None], key: tuple) -> int:
        """The winner's index given each candidate's score (None = missing)."""

    def bracket(self, n: int, key: tuple) -> Bracket:  # pragma: no cover - never driven as a bracket
        raise NotImplementedError


# --- suites -----------------------------------------------------------------------------------


class Suite(Protocol):
    """A prompt suite: a function from its options to prompts (a module's ``build_suite``).

    Its keyword parameters are its options (checked by name like every plugin's); the study passes
    ``seed`` and ``tasks`` to suites that declare them.
    """

    def __call__(self, **options: Any) -> list[Prompt]: ...
