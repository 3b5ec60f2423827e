"""Two-stage reranking: a cheap pointwise prefilter scores all N candidates, the judge decides among the top k.

``prefilter: JUDGE`` (a judge that scores each candidate alone: a reward model, or a judge that compares
two per-response scores, :func:`bon.plugins.scores_alone`) with ``keep: k`` keeps the k best-scored
candidates of each prompt, in their original order, and the strategy runs MMRB2's pairwise protocol
(through the referee, both orders) only among them: 2(k-1) main-judge calls for a knockout instead of
2(N-1). ``keep: N`` (or more) is exactly plain selection. The prefilter's scores live in the judgment
store like every answer (resumable, never asked twice); its calls are counted apart from the main
judge's (``Pick.prefilter_calls``). A missing prefilter score keeps its candidate (a prefilter failure
never drops one), and each pick says how many it kept that way.

``keep: auto`` is calibrated on a held-out share of the prompts (``calibrate``, default 0.25, drawn by a
seeded coin per prompt and generator), as a calibrated gate is audited on the run itself: those prompts
run the full protocol (every candidate kept) and then each k from 2 up with the prefilter, and the
smallest k whose paired-bootstrap 95% interval of the Best-of-N loss against the full protocol shows no
loss (its lower end at most 0) is used on the other prompts (none: every candidate kept). The
calibration prompts keep their full-protocol picks; the k tried there are counted in their calls. It
needs the verifier's score of each candidate (``utility``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from bon.errors import BonError
from bon.seeds import derive_seed

AUTO = "auto"
DEFAULT_CALIBRATE = 0.25
CALIBRATION_BOOTSTRAP = 1000
Utility = Callable[[int, int], float]  # (group index, candidate index) -> the verifier's score (nan: none)


@dataclass(frozen=True)
class PrefilterPolicy:
    """``judge``: the prefilter's spec (or the study's label); ``keep``: how many candidates the main judge
    sees (a whole number, or ``auto``); ``calibrate``: the held-out share of prompts ``auto`` calibrates on."""

    judge: str
    keep: int | str
    calibrate: float = DEFAULT_CALIBRATE


def prefilter_policy(judge: Any, keep: Any, calibrate: Any, where: str) -> PrefilterPolicy | None:
    """Validate a strategy's ``prefilter``/``keep``/``calibrate`` options (None: no prefilter)."""
    if judge is None:
        if keep is not None:
            raise BonError(f"{where}: keep needs a prefilter (prefilter: JUDGE, a judge that scores each candidate alone)")
        return None
    if not isinstance(judge, str) or not judge:
        raise BonError(f"{where}: prefilter must be a judge spec or label, got {judge!r}")
    if keep is None:
        raise BonError(f"{where}: prefilter {judge!r} needs keep: k (candidates the judge sees) or keep: auto")
    if keep != AUTO and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise BonError(f"{where}: keep must be a positive whole number or 'auto', got {keep!r}")
    try:
        share = float(calibrate)
    except (TypeError, ValueError):
        raise BonError(f"{where}: calibrate must be a number in (0, 1), got {calibrate!r}") from None
    if not 0.0 < share < 1.0:
        raise BonError(f"{where}: calibrate must lie in (0, 1), got {calibrate!r}")
    return PrefilterPolicy(judge, keep, share)


def kept_indices(scores: Sequence[float | None], keep: int) -> list[int]:
    """The ``keep`` best-scored candidates (equal scores: the lower index), plus every candidate whose
    score is missing, in their original order."""
    scored = sorted((i for i, s in enumerate(scores) if s is not None), key=lambda i: (-float(scores[i]), i))  # type: ignore[arg-type]
    missing = [i for i, s in enumerate(scores) if s is None]
    return sorted(scored[:keep] + missing)


def restricted(bracket: Any, kept: Sequence[int]) -> Any:
    """The bracket of the kept candidates (numbered 0..k-1) as a bracket of the whole group: its matches
    and its winner in the group's own indices, so a match's tie coin is the one plain selection uses."""
    local = {c: i for i, c in enumerate(kept)}
    try:
        pairs = next(bracket)
        while True:
            results = yield [(kept[x], kept[y]) for x, y in pairs]
            pairs = bracket.send([replace(r, x=local[r.x], y=local[r.y], winner=local[r.winner]) for r in results])
    except StopIteration as stop:
        value = stop.value
        if hasattr(value, "winner"):
            return replace(value, winner=kept[value.winner])
        return kept[value]


def calibration_draw(seed: int, prompt_id: str, generator: str) -> float:
    """A seeded number in [0, 1) per prompt and generator: below ``calibrate``, the prompt is held out."""
    return derive_seed(seed, "prefilter-calibration", prompt_id, generator) / 0x80000000


def paired_interval(diffs: np.ndarray, bootstrap: int, seed: int, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of the mean paired difference, resampling prompts."""
    d = diffs[np.isfinite(diffs)]
    if d.size == 0:
        return None, None
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(bootstrap, d.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha))


def choose_keep(full: Sequence[float], tried: dict[int, Sequence[float]], seed: int,
                bootstrap: int = CALIBRATION_BOOTSTRAP) -> tuple[int | None, list[dict[str, Any]]]:
    """The smallest k of ``tried`` (k -> each held-out prompt's score of its pick) whose loss against
    ``full`` (the full protocol's picks' scores) has a 95% interval whose lower end is at most 0, and
    the audit of every k tried (None: no k without a measured loss)."""
    audit, chosen = [], None
    reference = np.asarray(full, float)
    for k in sorted(tried):
        diffs = reference - np.asarray(tried[k], float)
        lo, hi = paired_interval(diffs, bootstrap, derive_seed(seed, "prefilter-keep", k))
        finite = diffs[np.isfinite(diffs)]
        ok = lo is not None and lo <= 0.0
        audit.append({"keep": k, "loss": float(finite.mean()) if finite.size else None, "loss_lo": lo, "loss_hi": hi,
                      "prompts": int(finite.size), "no_measured_loss": ok})
        if ok and chosen is None:
            chosen = k
    return chosen, audit


def prefilter_scores(policy: PrefilterPolicy, referee: Any, groups: Sequence[Any]) -> list[list[float | None]]:
    """The prefilter's score of every candidate of every group, through the store (asked once ever),
    counted on the prefilter's own referee (``referee.prefilters``)."""
    from bon.plugins import scores_alone

    cheap = prefilter_referee(policy.judge, referee)
    if not scores_alone(cheap.judge):
        raise BonError(f"prefilter {policy.judge!r}: judge {cheap.judge.name} does not score a candidate alone "
                       "(a reward model or a judge that compares two per-candidate scores can prefilter)")
    return [[s.value for s in cheap.score(prompt, [c.content for c in cands])] for prompt, cands in groups]


def prefilter_referee(spec: str, referee: Any) -> Any:
    """The prefilter's referee on the main referee's store and budget (built once per referee): the
    judge the caller registered under ``spec`` (a study's label), else the registry's."""
    if spec not in referee.prefilters:
        from bon import registry
        from bon.referee import Referee

        try:
            judge = referee.judges[spec] if spec in referee.judges else registry.create("judge", spec)
        except BonError as exc:
            raise BonError(f"prefilter {spec!r}: {exc}") from None
        referee.prefilters[spec] = Referee(judge, referee.store, budget=referee.budget, seed=referee.seed,
                                           stage=referee.stage, executor=referee.executor)
    return referee.prefilters[spec]


def run_prefiltered(strategy: Any, referee: Any, groups: Sequence[Any], seed: int, play: Callable,
                    utility: Utility | None = None) -> list[Any]:
    """Score every candidate with the prefilter, keep the top k of each group (``keep: auto``: calibrated
    first), and ``play`` the strategy's brackets among the kept ones (``play(groups, kept)`` -> picks)."""
    policy: PrefilterPolicy = strategy.prefilter
    scores = prefilter_scores(policy, referee, groups)
    if policy.keep == AUTO:
        picks, report = _calibrated(policy, groups, scores, seed, play, utility)
    else:
        picks = play(groups, [kept_indices(s, int(policy.keep)) for s in scores])
        report = {"keep": int(policy.keep)}
    for pick, group_scores in zip(picks, scores):
        pick.prefilter_calls = len(group_scores)
        pick.prefilter_missing = sum(s is None for s in group_scores)
    missing = sum(p.prefilter_missing for p in picks)
    referee.prefilter_reports.append({
        "prefilter": policy.judge, **report, "prompts": len(picks),
        "candidates": sum(len(s) for s in scores), "missing_scores": missing,
        "note": _note(policy, report, picks, missing)})
    return picks


def _calibrated(policy: PrefilterPolicy, groups: Sequence[Any], scores: list[list[float | None]], seed: int,
                play: Callable, utility: Utility | None) -> tuple[list[Any], dict[str, Any]]:
    if utility is None:
        raise BonError(f"prefilter {policy.judge!r}: keep: auto calibrates on the verifier's scores of a held-out "
                       "share of prompts; this run has none (give keep: k)")
    held = [i for i, (p, cands) in enumerate(groups) if calibration_draw(seed, p.id, cands[0].generator if cands else "")
            < policy.calibrate]
    n_max = max((len(c) for _, c in groups), default=0)
    if not held or n_max <= 2:
        picks = play(groups, [list(range(len(c))) for _, c in groups])
        return picks, {"keep": None, "calibration": {"share": policy.calibrate, "prompts": len(held), "audit": []},
                       "chosen": "too few prompts or candidates to calibrate: every candidate kept"}
    sub = [groups[i] for i in held]
    full_picks = play(sub, [list(range(len(c))) for _, c in sub])
    full = [utility(i, p.index) for i, p in zip(held, full_picks)]
    tried, spent = {}, [0] * len(held)
    for k in range(2, n_max):
        picks_k = play(sub, [kept_indices(scores[i], k) for i in held])
        tried[k] = [utility(i, p.index) for i, p in zip(held, picks_k)]
        spent = [s + p.calls for s, p in zip(spent, picks_k)]
        chosen, audit = choose_keep(full, tried, seed)
        if chosen is not None:
            break
    keep = chosen if chosen is not None else n_max
    rest = [i for i in range(len(groups)) if i not in set(held)]
    rest_picks = play([groups[i] for i in rest], [kept_indices(scores[i], keep) for i in rest])
    picks: list[Any] = [None] * len(groups)
    for i, p in zip(rest, rest_picks):
        picks[i] = p
    for i, p, extra in zip(held, full_picks, spent):
        p.calibration_calls, p.kept = extra, list(range(len(groups[i][1])))
        picks[i] = p
    return picks, {"keep": keep, "calibration": {"share": policy.calibrate, "prompts": len(held), "audit": audit},
                   "chosen": (f"keep {keep}: the smallest k without a measured loss on {len(held)} held-out prompts"
                              if chosen is not None else "no k without a measured loss: every candidate kept")}


def _note(policy: PrefilterPolicy, report: dict[str, Any], picks: Sequence[Any], missing: int) -> str:
    kept = [len(p.kept) for p in picks if p.kept is not None]
    text = f"prefilter {policy.judge}: keep {report['keep'] if report['keep'] is not None else 'all'}"
    if kept:
        text += f", {np.mean(kept):.2f} candidates kept per prompt"
    if "chosen" in report:
        text += f" ({report['chosen']})"
    if missing:
        text += f"; {missing} missing prefilter scores (those candidates kept)"
    return text


def recall(full_picks: Sequence[int], kept: Sequence[Sequence[int] | None]) -> float | None:
    """How often the full protocol's pick survives the prefilter (share of prompts; None without any)."""
    pairs = [(w, k) for w, k in zip(full_picks, kept) if w >= 0]
    if not pairs:
        return None
    return float(np.mean([k is None or w in k for w, k in pairs]))


def selection_costs(calls: Sequence[int], prefilter_calls: Sequence[int], referee: Any) -> dict[str, Any]:
    """A selection's cost per prompt in both currencies: the main judge's decisions (``calls_per_prompt``,
    comparable with knockout's 2(N-1)) and the prefilter's scores (``prefilter_calls_per_prompt``), each
    with judge seconds and dollars at its measured cost per paid answer in the store (NaN: never paid).
    ``calls`` and ``prefilter_calls``: each pick's."""
    prompts = max(1, len(calls))
    main = referee.store.unit_costs(referee.judge_id)
    per_prompt = sum(calls) / prompts
    out: dict[str, Any] = {"calls_per_prompt": per_prompt, "seconds_per_prompt": per_prompt * main["seconds_per_call"],
                           "usd_per_prompt": per_prompt * main["usd_per_call"]}
    for cheap in referee.prefilters.values():
        unit = cheap.store.unit_costs(cheap.judge_id, pointwise=True)
        scored = sum(prefilter_calls) / prompts
        out.update(prefilter=cheap.judge.name, prefilter_calls_per_prompt=scored,
                   prefilter_seconds_per_prompt=scored * unit["seconds_per_call"], prefilter_usd_per_prompt=scored * unit["usd_per_call"],
                   prefilter_stats=cheap.stats.as_dict())
    return out
