"""How sure can we be that MMRB2 accuracy predicts Best-of-N score? Correlations with honest intervals.

Per (task, generator) setting and pooled, across judges: Pearson r, Spearman ρ and Kendall τ-b between
MMRB2 accuracy and Best-of-N score, with bias-corrected bootstrap intervals (judges, prompts and MMRB2 pairs
resampled), permutation p-values, leave-one-judge-out ranges and warnings; and the judge-accuracy axes
they are computed on. The method, its coverage and its caveats are in ``analysis/README.md`` ("Reading
the intervals").
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri  # the normal cdf and its inverse (scipy.stats takes a second to import)

from analysis.bon_metrics import (iter_settings, multinomial_weights, percentile_ci, setting_matrix, task_order,
                                  weighted_means)
from analysis.leakage import Overlap, drop_overlapping
from bon import mmrb2
from bon.content import slug
from bon.errors import BonError
from bon.run import Run, as_run
from bon.seeds import derive_seed
from bon.tasks import TASK_NAMES, TASKS, bon_task, is_task

STATS = ("pearson", "spearman", "kendall")
POINT = {"pearson": "pearson_r", "spearman": "spearman_rho", "kendall": "kendall_tau"}
RESAMPLE_ALL = ("judges", "prompts", "pairs")
EXACT_PERMUTATION_MAX_JUDGES = 8
MIN_JUDGES = 5
PUBLISHED_CSV = Path(__file__).parent / "data" / "mmrb2_published.csv"
AXIS_COLUMNS = ["judge", "task", "accuracy", "n_pairs", "n_judgements", "source"]  # a JudgeAxis table
ACCURACY_COLUMNS = ["judge", "task", "accuracy", "acc_lo", "acc_hi", "n_pairs", "n_judgements", "source"]


def _corr_columns() -> list[str]:
    cols = []
    for s in STATS:
        p = POINT[s]
        cols += [p, f"{s}_lo", f"{s}_hi", f"{s}_lo_meas", f"{s}_hi_meas", f"{s}_p_perm", f"{s}_loo_min", f"{s}_loo_max"]
    return cols


CI_COLUMNS = ["task", "generator", "strategy", "scope", "n_judges", "n_prompts", "n_pairs", *_corr_columns(),
              "loo_most_influential", "undefined_frac", "recentred", "bootstrap", "permutations", "level", "x_resampling",
              "y_resampling", "flag", "warning"]


# --- coefficients, vectorised over leading axes, NaN-aware over the last (judges) ----------------------


def _joint(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
    m = np.isfinite(x) & np.isfinite(y)
    if m.all():  # the usual case (bootstrap replicates, simulations): nothing to blank out
        return x, y, m
    return np.where(m, x, np.nan), np.where(m, y, np.nan), m


def _moments(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Co-moment, both sums of squares and counts over jointly finite entries. Without a missing entry
    the NaN-aware sums and masks are skipped: the same sums, in the same order, so the same bits."""
    x, y, m = _joint(x, y)
    complete = bool(m.all())
    n = np.full(m.shape[:-1], m.shape[-1]) if complete else m.sum(-1)
    total = np.sum if complete else np.nansum
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = total(x, -1) / n
        my = total(y, -1) / n
    xc = x - mx[..., None] if complete else np.where(m, x - mx[..., None], 0.0)
    yc = y - my[..., None] if complete else np.where(m, y - my[..., None], 0.0)
    sxx, syy = (xc * xc).sum(-1), (yc * yc).sum(-1)
    sxx = _spread(sxx, x, mx, n, total, complete)
    syy = _spread(syy, y, my, n, total, complete)
    return (xc * yc).sum(-1), sxx, syy, n


def _spread(centred: np.ndarray, v: np.ndarray, mean: np.ndarray, n: np.ndarray, total: Any, complete: bool) -> np.ndarray:
    """The centred sums of squares with rounding noise set to 0 (a relative tolerance: a constant vector's centred
    values are noise, not spread): 0 where ``centred <= 1e-20 * total(v * v) + 1e-300``. Without gaps, in
    row-major rows, the sum of squares is only summed where it could matter: it is at most 4 (centred + n mean²)
    (Cauchy-Schwarz, with room for rounding), and above 1e-20 times that bound the answer is already known."""
    if complete and v.ndim > 1 and v.flags.c_contiguous:
        with np.errstate(over="ignore", invalid="ignore"):
            unsure = ~(centred > 1e-20 * (4.0 * (centred + n * mean * mean)) + 1e-300)
        if not unsure.any():
            return centred
        out = centred.copy()
        rows = v[unsure]  # each row's sum as in the whole matrix: rows of a row-major matrix sum alike
        out[unsure] = np.where(centred[unsure] <= 1e-20 * np.sum(rows * rows, -1) + 1e-300, 0.0, centred[unsure])
        return out
    return np.where(centred <= 1e-20 * total(v * v, -1) + 1e-300, 0.0, centred)


def pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r over the last axis (NaN with fewer than 3 joint values or no spread)."""
    sxy, sxx, syy, n = _moments(x, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = sxy / np.sqrt(sxx * syy)
    return np.where((n >= 3) & (sxx > 0) & (syy > 0), np.clip(r, -1.0, 1.0), np.nan)


def ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks over the last axis among finite entries (NaN stays NaN)."""
    x = np.asarray(x, float)
    ok = np.isfinite(x)
    r = average_ranks(np.where(ok, x, np.inf))
    return np.where(ok, r, np.nan)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n over the last axis, ties sharing their mean rank (``scipy.stats.rankdata``'s "average")."""
    x = np.asarray(x)
    n = x.shape[-1] if x.ndim else 0
    if x.size == 0:
        return np.zeros(x.shape)
    order = np.argsort(x, axis=-1, kind="mergesort")
    ordered = np.take_along_axis(x, order, -1)
    idx = np.broadcast_to(np.arange(n), ordered.shape)
    first = np.ones(ordered.shape, bool)  # where a run of equal values starts
    first[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    last = np.ones(ordered.shape, bool)
    last[..., :-1] = first[..., 1:]
    start = np.maximum.accumulate(np.where(first, idx, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, idx, n - 1), -1), axis=-1), -1)
    out = np.empty(ordered.shape)
    np.put_along_axis(out, order, 0.5 * (start + end + 2), -1)
    return out


def spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman ρ (Pearson r of average ranks) over jointly finite entries."""
    x, y, _ = _joint(x, y)
    return pearson(ranks(x), ranks(y))


def _kendall_parts(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, y, m = _joint(x, y)
    i, j = np.triu_indices(x.shape[-1], 1)
    dx = _once_per_row(lambda v: np.nan_to_num(np.sign(v[..., i] - v[..., j])), x)
    dy = _once_per_row(lambda v: np.nan_to_num(np.sign(v[..., i] - v[..., j])), y)
    return (dx * dy).sum(-1), np.abs(dx).sum(-1), np.abs(dy).sum(-1), m.sum(-1)


def kendall(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall τ-b (ties handled as in :func:`scipy.stats.kendalltau`) over the last axis."""
    return _tau(*_kendall_parts(x, y))


def _tau(num: np.ndarray, ax: np.ndarray, ay: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = num / np.sqrt(ax * ay)
    return np.where((n >= 3) & (ax > 0) & (ay > 0), tau, np.nan)


COEFFICIENTS = {"pearson": pearson, "spearman": spearman, "kendall": kendall}


def _zscore(v: np.ndarray) -> np.ndarray:
    if v.ndim and v.dtype == np.float64 and v.flags.c_contiguous and not np.isnan(v).any():
        # nothing to leave out: np.nanmean's and np.nanstd's own sums, divisions and root, without their masks
        n = v.shape[-1]
        with np.errstate(invalid="ignore", divide="ignore"):
            mu = np.sum(v, -1, keepdims=True) / n
            centred = v - mu
            sd = np.sqrt(np.sum(centred * centred, -1, keepdims=True) / n)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mu = np.nanmean(v, -1, keepdims=True)
            sd = np.nanstd(v, -1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sd > 1e-12 * (np.abs(mu) + 1.0), (v - mu) / sd, np.nan)


def pooled(stat: str, blocks: Sequence[tuple[np.ndarray, np.ndarray]], memo: dict | None = None) -> np.ndarray:
    """A coefficient over several settings, each entering through within-setting comparisons only.

    ``blocks`` are (x, y) arrays, one per setting, with the judges on the last axis. ``memo`` keeps each
    block's part (its standardised values, or its Kendall sums) by the arrays' identity, for a caller that
    pools the same arrays again (a setting's bootstrap replicates, in its task's row and in the overall row);
    it must hold the arrays themselves, so no identity is reused while it lives.
    """
    if not blocks:
        return np.array(np.nan)
    parts = [_pooled_part(stat, x, y, memo) for x, y in blocks]
    if stat == "kendall":
        return _tau(*(sum(p[k] for p in parts) for k in range(4)))
    return pearson(np.concatenate([p[0] for p in parts], -1), np.concatenate([p[1] for p in parts], -1))


def _pooled_part(stat: str, x: np.ndarray, y: np.ndarray, memo: dict | None) -> tuple:
    key = (stat, id(x), id(y))
    if memo is not None and key in memo:
        return memo[key][0]
    if stat == "kendall":
        part: tuple = _kendall_parts(x, y)
    else:
        standard = (lambda v: _zscore(ranks(v))) if stat == "spearman" else _zscore
        jx, jy, _ = _joint(x, y)
        part = (_once_per_row(standard, jx), _once_per_row(standard, jy))
    if memo is not None:
        memo[key] = (part, x, y)  # the arrays held: their identities stay theirs
    return part


def _once_per_row(f: Any, v: np.ndarray) -> np.ndarray:
    """``f`` (a function of the last axis, row by row) of ``v``; when ``v`` repeats one row (a broadcast: the
    fixed accuracies beside 10,000 permuted score orderings) ``f`` runs on that row once, the same bits."""
    if v.ndim < 2 or any(stride for stride in v.strides[:-1]):
        return f(v)
    row = f(v[(0,) * (v.ndim - 1)])
    return np.broadcast_to(row, v.shape[:-1] + row.shape[-1:])


BC_MAX_Z0 = 1.5  # beyond this (over ~93% of replicates on one side) the bias estimate is not trusted


def bc_interval(replicates: np.ndarray, point: np.ndarray | float, level: float = 0.95,
                with_fallback: bool = False) -> tuple[np.ndarray, ...]:
    """Bias-corrected percentile interval (Efron 1981), vectorised over leading axes; replicates on the last.

    z0 = Φ⁻¹(share of finite replicates below the point estimate, ties counted half); the interval is the
    replicates' Φ(2·z0 ± z) quantiles (linear interpolation, as :func:`numpy.quantile`). When |z0| > 1.5
    (nearly all replicates on one side, e.g. measurement noise larger than the spread between judges) the
    correction would collapse the interval onto an extreme replicate; there the interval is instead the
    replicates' spread on the Fisher-z scale, recentred on the point estimate. ``with_fallback`` also
    returns where that happened. NaN when the point or every replicate is undefined.
    """
    reps = np.asarray(replicates, float)
    point = np.asarray(point, float)
    finite = np.isfinite(reps)
    n = finite.sum(-1)
    pt = point[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = ((finite & (reps < pt)).sum(-1) + 0.5 * (finite & (reps == pt)).sum(-1)) / n
        share = np.clip(share, 0.5 / np.maximum(n, 1), 1.0 - 0.5 / np.maximum(n, 1))
        z0 = ndtri(share)
    z = ndtri(0.5 + level / 2.0)
    ordered = np.sort(np.where(finite, reps, np.inf), axis=-1)  # undefined replicates sort last, out of reach

    def q(values: np.ndarray, prob: np.ndarray) -> np.ndarray:
        pos = np.nan_to_num(prob * (n - 1))
        lo = np.clip(np.floor(pos).astype(int), 0, np.maximum(n - 1, 0))
        hi = np.clip(lo + 1, 0, np.maximum(n - 1, 0))
        a = np.take_along_axis(values, np.asarray(lo)[..., None], -1)[..., 0]
        b = np.take_along_axis(values, np.asarray(hi)[..., None], -1)[..., 0]
        frac = pos - lo
        with np.errstate(invalid="ignore"):
            return np.where(frac > 0, a + (b - a) * frac, a)

    lo, hi = q(ordered, ndtr(2 * z0 - z)), q(ordered, ndtr(2 * z0 + z))
    fallback = np.abs(z0) > BC_MAX_Z0
    if np.any(fallback):
        zs = np.arctanh(np.clip(ordered, -0.999999, 0.999999))  # inf (undefined) stays at the end
        zp = np.arctanh(np.clip(point, -0.999999, 0.999999))
        half = np.full(np.shape(n), 0.5)
        med = q(zs, half)
        lo = np.where(fallback, np.tanh(zp + q(zs, np.full(np.shape(n), 0.5 - level / 2)) - med), lo)
        hi = np.where(fallback, np.tanh(zp + q(zs, np.full(np.shape(n), 0.5 + level / 2)) - med), hi)
    bad = (n == 0) | ~np.isfinite(point)
    out = (np.where(bad, np.nan, lo), np.where(bad, np.nan, hi))
    return (*out, fallback & ~bad) if with_fallback else out


# --- the judge axis --------------------------------------------------------------------------------


@dataclass
class PairOutcomes:
    """Per judge and MMRB2 pair (judges x pairs arrays): the judge's accuracy (x) and the other
    judge-side predictors of :mod:`analysis.predictors`, resampled by weighting the pairs."""

    task: str
    pair_ids: list[str]
    sources: list[str]
    judges: list[str]
    correct: np.ndarray  # 0..2 right answers (forward, reverse)
    counted: np.ndarray  # 0..2 answers counted (non-empty)
    same_model: np.ndarray | None = None  # pairs, bool: both responses from one model
    consistent: np.ndarray | None = None  # 1 where both directions answered A/B and name the same response
    both: np.ndarray | None = None  # 1 where both directions answered A/B
    bad: np.ndarray | None = None  # 0..2 empty, missing or non-A/B answers

    def accuracy(self) -> np.ndarray:
        return self.rate("overall")

    def replicates(self, weights: np.ndarray) -> np.ndarray:
        """Accuracy (%) per bootstrap weight row: (B x pairs) -> (B x judges)."""
        return self.rate("overall", weights)

    _replicated: dict = field(default_factory=dict, repr=False, compare=False)  # (predictor, weights id) -> result

    def rate(self, predictor: str, weights: np.ndarray | None = None) -> np.ndarray:
        """A predictor of :data:`analysis.predictors.PREDICTORS` in percent: judges, or (B x judges) with pair
        weights (B x pairs). Replicates of shared (read-only) weights are computed once per predictor: the
        accuracy table, the correlations and the predictor table resample the same pairs."""
        if weights is None or weights.flags.writeable:
            return self._rate(predictor, weights)
        key = (predictor, id(weights))
        held = self._replicated.get(key)
        if held is None or held[0] is not weights:
            held = self._replicated[key] = (weights, self._rate(predictor, weights))
        return held[1].copy()

    def _rate(self, predictor: str, weights: np.ndarray | None) -> np.ndarray:
        w = np.ones((1, len(self.pair_ids))) if weights is None else weights
        if predictor == "overall":  # the only one that outcomes built without the predictor arrays have
            num, den = self.correct, self.counted
        else:
            num, den = {
                "same_model": (self.correct * self.same_model, self.counted * self.same_model),
                "different_model": (self.correct * ~self.same_model, self.counted * ~self.same_model),
                "position_consistency": (self.consistent, self.both),
                "tie_missing": (self.bad, np.full_like(self.bad, 2.0)),
            }[predictor]
        top, bottom = w @ num.T, w @ den.T
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(bottom > 0, 100.0 * top / np.where(bottom > 0, bottom, 1.0), np.nan)
        return out[0] if weights is None else out


def pair_outcomes(task: str, pairs: Sequence[mmrb2.Pair], judgments: Mapping[str, Mapping[str, Any]]) -> PairOutcomes:
    """Pair-level outcomes with the official scorer's semantics (first sample per direction; an empty or
    missing answer leaves the denominator; any other non-A/B answer counts and is wrong). A pair is
    same-model when both ``model_name`` agree."""
    same = np.array([bool(p.model_a) and p.model_a == p.model_b for p in pairs], bool)
    judges = list(judgments)
    flips = mmrb2.FLIP
    cells = []  # per judge and pair: correct, counted, consistent, both, bad (plain numbers, one array at the end)
    for judge in judges:
        given = judgments[judge]
        for pair in pairs:
            entry = given.get(pair.id)
            if type(entry) is not dict and not isinstance(entry, Mapping):
                entry = {}
            fwd, rev = _first_judgement(entry.get("forward")), _first_judgement(entry.get("reverse"))
            correct = counted = bad = 0
            for answer, flip in ((fwd, False), (rev, True)):
                if answer is None:
                    bad += 1
                    continue
                counted += 1
                bad += answer not in flips
                correct += (flips.get(answer, answer) if flip else answer) == pair.chosen
            both = fwd in flips and rev in flips
            cells.append((correct, counted, float(flips[rev] == fwd) if both else 0.0, float(both), bad))
    correct, counted, consistent, both, bad = np.array(cells, float).reshape(len(judges), len(pairs), 5).transpose(2, 0, 1)
    return PairOutcomes(task, [p.id for p in pairs], [p.prompt_source for p in pairs], judges, correct.copy(),
                        counted.copy(), same, consistent.copy(), both.copy(), bad.copy())


def _first_judgement(samples: Any) -> str | None:
    """:func:`bon.mmrb2.first_judgement`, with its usual case (a list of dicts, as JSON gives) first."""
    if type(samples) is list and samples and type(samples[0]) is dict:
        j = samples[0].get("judgement")
        return j if isinstance(j, str) and j else None
    return mmrb2.first_judgement(samples)


@dataclass
class JudgeAxis:
    """Judge accuracies per task (x), with what is needed to resample them."""

    label: str
    table: pd.DataFrame  # judge, task, accuracy, n_pairs, n_judgements, source
    outcomes: dict[str, PairOutcomes] = field(default_factory=dict)  # bon task -> pair-level data
    excluded: dict[str, list[str]] = field(default_factory=dict)  # task -> excluded prompt sources
    dropped: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> pairs left out as leaks (analysis.leakage)

    _cells: tuple = field(default=(None, None), repr=False, compare=False)  # (the table, its task -> judge -> row)

    def _rows(self) -> dict[Any, dict[Any, tuple[float, float]]] | None:
        """task -> judge -> (accuracy, n_pairs as a number or NaN) of the table, read once per table (the analyses
        ask for them dozens of times); None when a (judge, task) repeats (then the table is asked each time)."""
        table, rows = self._cells
        if table is not self.table:
            rows = {}
            counts = pd.to_numeric(self.table["n_pairs"], errors="coerce").tolist()
            for task, judge, acc, count in zip(self.table["task"], self.table["judge"], self.table["accuracy"], counts):
                if judge in rows.setdefault(task, {}):
                    rows = None
                    break
                rows[task][judge] = (acc, count)
            self._cells = (self.table, rows)
        return rows

    def accuracy(self, task: str, judges: Sequence[str]) -> np.ndarray:
        rows = self._rows()
        if rows is not None:
            mine = rows.get(task, {})
            return np.array([float(mine[j][0]) if j in mine else np.nan for j in judges])
        sub = self.table[self.table.task == task].set_index("judge")["accuracy"]
        return np.array([float(sub.get(j, np.nan)) for j in judges])

    def n_pairs(self, task: str, judges: Sequence[str]) -> int:
        """Pairs behind the accuracies of these judges (the most any of them was scored on)."""
        rows = self._rows()
        if rows is not None:
            mine = rows.get(task, {})
            vals = [mine[j][1] for j in dict.fromkeys(judges) if j in mine and not pd.isna(mine[j][1])]
            return int(max(vals)) if vals else 0
        sub = self.table[(self.table.task == task) & self.table.judge.isin(list(judges))]
        vals = pd.to_numeric(sub["n_pairs"], errors="coerce").dropna()
        return int(vals.max()) if len(vals) else 0

    def resampling(self, task: str) -> str:
        if task in self.outcomes:
            return "pairs"
        sub = self.table[self.table.task == task]
        return "binomial" if pd.to_numeric(sub["n_pairs"], errors="coerce").gt(0).any() else "fixed"

    def replicates(self, task: str, judges: Sequence[str], bootstrap: int, seed: int) -> np.ndarray:
        """B x judges accuracy replicates for ``task`` (one draw of pairs shared by every judge)."""
        base = self.accuracy(task, judges)
        if task in self.outcomes:
            out = self.outcomes[task]
            w = multinomial_weights(len(out.pair_ids), bootstrap, derive_seed(seed, "mmrb2-pairs", task))
            reps = out.replicates(w)
            idx = {j: k for k, j in enumerate(out.judges)}
            cols = [reps[:, idx[j]] if j in idx else np.full(bootstrap, b) for j, b in zip(judges, base)]
            return np.stack(cols, 1) if cols else np.zeros((bootstrap, 0))
        sub = self.table[self.table.task == task].set_index("judge")
        rng = np.random.default_rng(derive_seed(seed, "mmrb2-binomial", task))
        cols = []
        for j, b in zip(judges, base):
            n = pd.to_numeric(pd.Series([sub["n_pairs"].get(j, np.nan)]), errors="coerce").iloc[0]
            if np.isfinite(b) and np.isfinite(n) and n > 0:
                cols.append(100.0 * rng.binomial(int(n), min(max(b / 100.0, 0.0), 1.0), size=bootstrap) / int(n))
            else:
                rng.random(bootstrap)  # keep later judges' draws independent of this one's presence
                cols.append(np.full(bootstrap, b))
        return np.stack(cols, 1) if cols else np.zeros((bootstrap, 0))

    def with_intervals(self, bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
        """The accuracy table with percentile bootstrap intervals (``acc_lo``, ``acc_hi``)."""
        rows = []
        for task in task_order(self.table["task"]):
            sub = self.table[self.table.task == task]
            judges = list(sub["judge"])
            lo, hi = percentile_ci(self.replicates(task, judges, bootstrap, seed), level)
            for k, (_, r) in enumerate(sub.iterrows()):
                rows.append({**r.to_dict(), "acc_lo": lo[k], "acc_hi": hi[k]})
        return pd.DataFrame(rows, columns=ACCURACY_COLUMNS)


def _axis_from_outcomes(label: str, outcomes: dict[str, PairOutcomes], source: str,
                        excluded: dict[str, list[str]] | None = None,
                        dropped: dict[str, dict[str, Any]] | None = None) -> JudgeAxis:
    rows = []
    for task, out in outcomes.items():
        acc = out.accuracy()
        for j, judge in enumerate(out.judges):
            evaluated = int((out.counted[j] > 0).sum())
            rows.append({"judge": judge, "task": task, "accuracy": acc[j], "n_pairs": evaluated,
                         "n_judgements": int(out.counted[j].sum()), "source": source})
    table = pd.DataFrame(rows, columns=AXIS_COLUMNS)
    return JudgeAxis(label, table, outcomes, excluded or {}, dropped or {})


def _exclusions(exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None) -> dict[str, set[str]]:
    """``{task: sources}`` (task may be a bon or scorer name, or ``*`` for every task) -> lower-cased sets."""
    if not exclude_sources:
        return {}
    if not isinstance(exclude_sources, Mapping):
        exclude_sources = {"*": exclude_sources}
    out: dict[str, set[str]] = {}
    for task, sources in exclude_sources.items():
        key = "*" if task == "*" else bon_task(task)
        out.setdefault(key, set()).update(s.lower() for s in ([sources] if isinstance(sources, str) else sources))
    return out


def _keep(pairs: list[mmrb2.Pair], task: str, excl: dict[str, set[str]], where: str) -> tuple[list[mmrb2.Pair], list[str]]:
    drop = excl.get(task, set()) | excl.get("*", set())
    if not drop:
        return pairs, []
    kept = [p for p in pairs if p.prompt_source.lower() not in drop]
    found = {p.prompt_source.lower() for p in pairs} & drop
    if task in excl and excl[task] - found:
        raise BonError(f"{where}: no pair has prompt_source {', '.join(sorted(excl[task] - found))} "
                       "(a misspelt exclusion would silently change nothing)")
    return kept, sorted(found)


def run_judge_axis(run: Run | Path, judges: Sequence[str] | None = None,
                   exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None = None,
                   overlap: Overlap | None = None) -> JudgeAxis:
    """Accuracies from the run's own preference set: ``mmrb2/<task>.json`` and
    ``mmrb2/judgments/<judge>/<task>.json``. ``judges`` (names as in picks.jsonl) maps the folder
    names, which are slugs, back to judge names; ``overlap`` (:mod:`analysis.leakage`) drops the pairs
    that leak the downstream benchmark into the accuracy."""
    run = as_run(run)
    root = run.folder.mmrb2
    if not root.is_dir():
        raise BonError(f"{root}: no preference set in this run folder")
    names = {slug(j): j for j in (judges or [])}
    excl = _exclusions(exclude_sources)
    outcomes: dict[str, PairOutcomes] = {}
    excluded: dict[str, list[str]] = {}
    leaks: dict[str, dict[str, Any]] = {}
    for task, file in ((t.name, t.file) for t in TASKS):
        if not (root / file).exists():
            continue
        pairs, dropped = _keep(run.pairs(root / file), task, excl, str(root / file))
        pairs, leaks[task] = drop_overlapping(pairs, task, overlap)
        excluded[task] = dropped
        judgments = {}
        for folder in sorted((root / "judgments").glob("*")):
            if (folder / file).exists():
                judgments[names.get(folder.name, folder.name)] = run.judgments(folder / file)
        if judgments:
            outcomes[task] = pair_outcomes(task, pairs, judgments)
    if not outcomes:
        raise BonError(f"{root}: no judgment files under judgments/")
    return _axis_from_outcomes("run preference set (mmrb2/)", outcomes, str(root), excluded, leaks)


def benchmark_judge_axis(bench_dir: Path, predictions: Mapping[str, Mapping[str, Path]],
                         exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None = None) -> JudgeAxis:
    """Accuracies of judgment files on the MMRB2 files in ``bench_dir``: ``{judge: {task: file}}``.

    ``exclude_sources`` drops pairs by ``prompt_source`` (case-insensitive) before scoring, per task
    (``{"interleaved": ["isgbench"]}``, the spelling of ISG-Bench in the MMRB2 release) or for all tasks (a
    plain list): leakage control when a downstream study draws its prompts from a benchmark that MMRB2
    also sampled. A source that matches no pair of its task is an error, so a typo cannot pass silently.
    """
    excl = _exclusions(exclude_sources)
    by_task: dict[str, dict[str, Path]] = {}
    for judge, files in predictions.items():
        for task, path in files.items():
            by_task.setdefault(bon_task(task), {})[judge] = Path(path)
    outcomes, excluded = {}, {}
    for task in task_order(by_task):
        file = mmrb2.find_task_file(bench_dir, task)
        pairs, dropped = _keep(mmrb2.load_pairs(file), task, excl, str(file))
        excluded[task] = dropped
        outcomes[task] = pair_outcomes(task, pairs, {j: mmrb2.load_judgments(p) for j, p in by_task[task].items()})
    return _axis_from_outcomes("MMRB2 benchmark files", outcomes, str(bench_dir), excluded)


def json_judge_axis(files: Mapping[str, Path]) -> JudgeAxis:
    """Accuracies from ``bon mmrb2 accuracy --json`` outputs, one file per judge: ``{judge: path}``.

    No pair-level data: each accuracy is resampled as a binomial over its evaluated pairs.
    """
    rows = []
    for judge, path in files.items():
        raw = mmrb2.read_json(Path(path))
        tasks = raw.get("tasks") if isinstance(raw, dict) else None
        if not isinstance(tasks, dict):
            raise BonError(f"{path}: expected the JSON of `bon mmrb2 accuracy --json` (a \"tasks\" object)")
        for scorer, r in tasks.items():
            where = f"{path}: tasks.{scorer}"
            if not isinstance(r, dict) or not is_task(scorer):
                raise BonError(f"{where}: expected a task of MMRB2 with an object of accuracy, evaluated_pairs, judgements")
            rows.append({"judge": judge, "task": bon_task(scorer), "accuracy": _percent(r.get("accuracy"), f"{where}.accuracy"),
                         "n_pairs": _count(r.get("evaluated_pairs", 0), f"{where}.evaluated_pairs"),
                         "n_judgements": _count(r.get("judgements", 0), f"{where}.judgements"), "source": str(path)})
    return JudgeAxis("accuracy JSON", pd.DataFrame(rows, columns=AXIS_COLUMNS))


def load_published(path: Path | None = None) -> pd.DataFrame:
    """The MMRB2 paper's judge accuracies shipped with bon (``#`` lines are comments)."""
    path = Path(path or PUBLISHED_CSV)
    try:
        table = pd.read_csv(path, comment="#", dtype={"judge": str, "task": str})
    except FileNotFoundError:
        raise BonError(f"{path}: accuracy table not found") from None
    except OSError as exc:
        raise BonError(f"{path}: cannot read the accuracy table ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
        raise BonError(f"{path}: not a readable CSV table ({' '.join(str(exc).split())[:120]})") from None
    missing = {"judge", "task", "accuracy"} - set(table.columns)
    if missing:
        raise BonError(f"{path}: lacks column(s) {', '.join(sorted(missing))}")
    return checked_accuracies(table, path)


def checked_accuracies(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """An accuracy table a user hands in, checked row by row before it enters a correlation: judge and task
    named, accuracy a finite percentage 0-100 (empty: not measured), n_pairs a count, one row per (judge,
    task). The first bad cell is one line naming the file, row (1 = the first data row) and field."""
    table = table.reset_index(drop=True)
    seen: dict[tuple[str, str], int] = {}
    accuracy, pairs = [], []
    for i, row in enumerate(table.to_dict(orient="records"), 1):
        where = f"{path}: row {i}"
        for field in ("judge", "task"):
            if not isinstance(row[field], str) or not row[field].strip():
                raise BonError(f"{where}: field {field} must name a {field}, got {row[field]!r}")
        key = (_judge_key(row["judge"]), row["task"].strip())  # judges are matched ignoring case and punctuation
        if key in seen:
            raise BonError(f"{where}: judge {row['judge'].strip()!r}, task {key[1]!r} appears twice (first in row {seen[key]})")
        seen[key] = i
        accuracy.append(_percent(_cell(row["accuracy"]), f"{where}: field accuracy"))
        pairs.append(_count(_cell(row.get("n_pairs")), f"{where}: field n_pairs") if "n_pairs" in row else np.nan)
    table["judge"], table["task"] = table["judge"].str.strip(), table["task"].str.strip()
    table["accuracy"] = np.asarray(accuracy, float)
    if "n_pairs" in table.columns:
        table["n_pairs"] = np.asarray(pairs, float)
    return table


def _cell(value: Any) -> Any:
    """A table cell: an empty one (NaN from the reader) is None; text that spells a number is that number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            return value
    return value


def _percent(value: Any, where: str) -> float:
    """An accuracy in percent (bon and MMRB2 write 0-100); None is not measured (NaN)."""
    if value is None:
        return np.nan
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise BonError(f"{where}: expected an accuracy in percent (0-100), got {value!r}")
    if not math.isfinite(float(value)) or not 0 <= float(value) <= 100:
        raise BonError(f"{where}: {value!r} is not an accuracy in percent (a finite number from 0 to 100)")
    return float(value)


def _count(value: Any, where: str) -> float:
    """A pair or judgement count: a whole number >= 0; None is not stated (NaN)."""
    if value is None:
        return np.nan
    ok = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(float(value))
    if not ok or float(value) < 0 or float(value) != int(value):
        raise BonError(f"{where}: expected a whole number of pairs (0 or more), got {value!r}")
    return float(value)


def published_judge_axis(path: Path | None = None) -> JudgeAxis:
    """Accuracies as published in the MMRB2 paper (binomial over the stated pair counts)."""
    table = load_published(path)
    return _csv_axis("published (MMRB2 paper)", table[table.task.isin(list(TASK_NAMES))].reset_index(drop=True),
                     "published")


def _csv_axis(label: str, table: pd.DataFrame, source: str) -> JudgeAxis:
    """A judge axis from a judge, task, accuracy[, n_pairs][, source] table (binomial over n_pairs)."""
    table = table.copy()
    if "n_pairs" not in table.columns:
        table["n_pairs"] = np.nan
    table["n_judgements"] = 2 * pd.to_numeric(table["n_pairs"], errors="coerce")
    table["source"] = table["source"] if "source" in table.columns else source
    return JudgeAxis(label, table[AXIS_COLUMNS])


def accuracy_axis(spec: str | Path | None, run_dir: Run | Path | None = None, judges: Sequence[str] | None = None) -> JudgeAxis:
    """``"run"`` (the run's mmrb2/), ``"published"``, or a file: a CSV with judge, task, accuracy[, n_pairs]
    columns, or one ``bon mmrb2 accuracy --json`` output named ``JUDGE=FILE``."""
    if spec in (None, "run", "preference"):
        if run_dir is None:
            raise BonError("accuracies from the run need a run folder")
        return run_judge_axis(run_dir, judges)
    if spec == "published":
        return published_judge_axis()
    text = str(spec)
    if "=" in text and text.split("=", 1)[1].endswith(".json"):
        judge, file = text.split("=", 1)
        return json_judge_axis({judge: Path(file)})
    path = Path(text)
    if path.suffix == ".csv":
        table = load_published(path)
        table["task"] = [bon_task(t) if is_task(t) else t for t in table["task"]]
        return _csv_axis(f"accuracies from {path.name}", table, str(path))
    raise BonError(f"{spec}: accuracies must be 'run', 'published', a CSV (judge, task, accuracy[, n_pairs]) "
                   "or JUDGE=FILE.json")


def match_judges(names: Iterable[str], known: Iterable[str]) -> dict[str, str]:
    """Map user judge names onto known ones ignoring case and punctuation (``gpt5`` -> ``GPT-5``)."""
    index = {_judge_key(k): k for k in known}
    return {n: index[_judge_key(n)] for n in names if _judge_key(n) in index}


def _judge_key(name: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


# --- the downstream axis ---------------------------------------------------------------------------


@dataclass
class Setting:
    """One (task, generator, strategy): the judges' per-prompt pick scores, or only their means."""

    task: str
    generator: str
    strategy: str
    judges: list[str]
    scores: np.ndarray | None = None  # judges x prompts, NaN = no scored pick
    bon: np.ndarray | None = None  # judges; the point estimate when there are no per-prompt scores
    se: np.ndarray | None = None  # judges; standard errors for a parametric resampling of ``bon``

    @property
    def n_prompts(self) -> int:
        return int(np.isfinite(self.scores).any(0).sum()) if self.scores is not None else 0

    def point(self) -> np.ndarray:
        if self.scores is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return np.nanmean(self.scores, 1)
        return np.asarray(self.bon, float)

    def resampling(self) -> str:
        if self.scores is not None:
            return "prompts"
        return "normal" if self.se is not None and np.isfinite(self.se).any() else "fixed"

    def replicates(self, bootstrap: int, seed: int, prompt_weights: np.ndarray | None = None) -> np.ndarray:
        if self.scores is not None:
            w = prompt_weights if prompt_weights is not None else multinomial_weights(
                self.scores.shape[1], bootstrap, derive_seed(seed, "prompts", self.task, self.generator))
            return weighted_means(self.scores, w)
        base = self.point()
        if self.se is None:
            return np.tile(base, (bootstrap, 1))
        rng = np.random.default_rng(derive_seed(seed, "bon-normal", self.task, self.generator))
        se = np.where(np.isfinite(self.se), self.se, 0.0)
        return base + rng.standard_normal((bootstrap, len(base))) * se


def settings_from_prompts(prompts: pd.DataFrame) -> list[Setting]:
    """Settings from :func:`analysis.bon_metrics.prompt_level` rows, tasks in the paper's order."""
    out = []
    for task, gen, strategy, sub, judges, pids in iter_settings(prompts):
        out.append(Setting(task, gen, strategy, judges, scores=setting_matrix(sub, "pick_score", judges, pids)))
    return out


def settings_from_scores(table: pd.DataFrame) -> list[Setting]:
    """Settings from a user's Best-of-N scores table: task, generator, judge, bon_score[, strategy]
    [, n_prompts and bon_sd, for a normal resampling of each mean (SE = bon_sd / sqrt(n_prompts))]."""
    missing = {"task", "generator", "judge", "bon_score"} - set(table.columns)
    if missing:
        raise BonError(f"scores table lacks column(s) {', '.join(sorted(missing))}")
    table = table.copy()
    if "strategy" not in table.columns:
        table["strategy"] = ""
    out = []
    order = {t: i for i, t in enumerate(task_order(table["task"]))}
    for (task, gen, strategy), sub in sorted(table.groupby(["task", "generator", "strategy"], sort=False),
                                             key=lambda kv: (order[kv[0][0]], kv[0][1], kv[0][2])):
        se = None
        if {"n_prompts", "bon_sd"} <= set(sub.columns):
            with np.errstate(invalid="ignore", divide="ignore"):
                se = (pd.to_numeric(sub["bon_sd"], errors="coerce") / np.sqrt(pd.to_numeric(sub["n_prompts"],
                                                                                             errors="coerce"))).to_numpy(float)
        out.append(Setting(task, gen, strategy, list(sub["judge"]), bon=sub["bon_score"].to_numpy(float), se=se))
    return out


# --- the correlation table -------------------------------------------------------------------------


@dataclass
class _Block:
    """One setting's observed and bootstrap values, on the union of judges (NaN where absent)."""

    setting: Setting
    x: np.ndarray  # union
    y: np.ndarray
    xb: np.ndarray  # B x union
    yb: np.ndarray
    full: tuple[np.ndarray, np.ndarray] | None = None  # xb, yb with the judges resampled (the same draw for every block)


def correlation_intervals(settings: Sequence[Setting], axis: JudgeAxis, bootstrap: int = 1000, seed: int = 0,
                          level: float = 0.95, permutations: int = 10000, pooled_rows: bool = True,
                          resample: Sequence[str] = RESAMPLE_ALL) -> pd.DataFrame:
    """The correlation table with intervals, permutation p-values and leave-one-judge-out ranges."""
    resample = set(resample)
    unknown = resample - set(RESAMPLE_ALL)
    if unknown:
        raise BonError(f"resample: unknown level(s) {', '.join(sorted(unknown))} (use {', '.join(RESAMPLE_ALL)})")
    judges = list(dict.fromkeys(j for s in settings for j in s.judges))
    pos = {j: k for k, j in enumerate(judges)}
    x_reps: dict[str, np.ndarray] = {}
    prompt_w: dict[tuple[str, str], np.ndarray] = {}
    blocks: list[_Block] = []
    for s in settings:
        if s.task not in x_reps:
            x_reps[s.task] = (axis.replicates(s.task, judges, bootstrap, seed) if "pairs" in resample
                              else np.tile(axis.accuracy(s.task, judges), (bootstrap, 1)))
        cols = [pos[j] for j in s.judges]
        x = np.full(len(judges), np.nan)
        x[cols] = axis.accuracy(s.task, s.judges)
        y = np.full(len(judges), np.nan)
        y[cols] = s.point()
        if "prompts" in resample:
            w = None
            if s.scores is not None:  # prompts are shared by a task's generators: one draw per task
                key = (s.task, s.strategy)
                if key not in prompt_w or prompt_w[key].shape[1] != s.scores.shape[1]:
                    prompt_w[key] = multinomial_weights(s.scores.shape[1], bootstrap,
                                                        derive_seed(seed, "prompts", s.task, s.strategy))
                w = prompt_w[key]
            ys = s.replicates(bootstrap, seed, w)
        else:
            ys = np.tile(s.point(), (bootstrap, 1))
        yb = np.full((bootstrap, len(judges)), np.nan)
        yb[:, cols] = ys
        xb = np.where(np.isfinite(y)[None, :], x_reps[s.task], np.nan)
        blocks.append(_Block(s, x, y, xb, yb))

    rng = np.random.default_rng(derive_seed(seed, "judges"))
    jidx = rng.integers(0, len(judges), size=(bootstrap, len(judges))) if "judges" in resample and judges else None
    for b in blocks:
        b.full = (np.take_along_axis(b.xb, jidx, 1), np.take_along_axis(b.yb, jidx, 1)) if jidx is not None else (b.xb, b.yb)
    memo: dict = {}  # each block's pooled parts of its replicates: its task's row and the overall row share them

    rows = [_row([b], axis, bootstrap, seed, level, permutations, jidx, memo, "setting", b.setting.task, b.setting.generator,
                 b.setting.strategy, judges) for b in blocks]
    if pooled_rows:
        for task in task_order(s.task for s in settings):
            mine = [b for b in blocks if b.setting.task == task]
            if len(mine) > 1:
                rows.append(_row(mine, axis, bootstrap, seed, level, permutations, jidx, memo, "task", task, "(pooled)",
                                 _one(b.setting.strategy for b in mine), judges))
        if len({b.setting.task for b in blocks}) > 1:
            rows.append(_row(blocks, axis, bootstrap, seed, level, permutations, jidx, memo, "all", "(all)", "(pooled)",
                             _one(b.setting.strategy for b in blocks), judges))
    return pd.DataFrame(rows, columns=CI_COLUMNS)


def _one(values: Iterable[str]) -> str:
    vals = list(dict.fromkeys(values))
    return vals[0] if len(vals) == 1 else "(mixed)"


def _stat(stat: str, pairs: Sequence[tuple[np.ndarray, np.ndarray]], memo: dict | None = None) -> np.ndarray:
    return COEFFICIENTS[stat](*pairs[0]) if len(pairs) == 1 else pooled(stat, pairs, memo)


def _row(blocks: list[_Block], axis: JudgeAxis, bootstrap: int, seed: int, level: float, permutations: int,
         jidx: np.ndarray | None, memo: dict, scope: str, task: str, generator: str, strategy: str, judges: list[str]) -> dict:
    present = np.zeros(len(judges), bool)
    for b in blocks:
        present |= np.isfinite(b.x) & np.isfinite(b.y)
    n_judges = int(present.sum())
    tasks = list(dict.fromkeys(b.setting.task for b in blocks))
    # distinct prompts: a task's generators share them
    n_prompts = sum(max(b.setting.n_prompts for b in blocks if b.setting.task == t) for t in tasks)
    n_pairs = sum(axis.n_pairs(t, [judges[k] for k in np.flatnonzero(present)]) for t in tasks)
    row: dict[str, Any] = {"task": task, "generator": generator, "strategy": strategy, "scope": scope,
                           "n_judges": n_judges, "n_prompts": n_prompts, "n_pairs": n_pairs,
                           "bootstrap": bootstrap, "level": level}
    observed = [(b.x, b.y) for b in blocks]
    meas = [(b.xb, b.yb) for b in blocks]
    full = [b.full for b in blocks]
    undefined = []
    for stat in STATS:
        point = float(_stat(stat, observed))
        reps_full = _stat(stat, full, memo)
        reps_meas = _stat(stat, meas, memo)
        lo, hi, recentred = bc_interval(reps_full, point, level, with_fallback=True)
        mlo, mhi = percentile_ci(reps_meas, level)
        undefined.append(float(np.mean(~np.isfinite(reps_full))) if np.size(reps_full) else 1.0)
        if stat == "pearson":
            row["recentred"] = bool(recentred)
        p, n_perm = permutation_p(stat, observed, permutations, derive_seed(seed, "perm", scope, task, generator, stat))
        loo = _leave_one_out(stat, observed, present)
        row.update({POINT[stat]: point, f"{stat}_lo": float(lo), f"{stat}_hi": float(hi),
                    f"{stat}_lo_meas": float(mlo), f"{stat}_hi_meas": float(mhi), f"{stat}_p_perm": p,
                    f"{stat}_loo_min": loo[0], f"{stat}_loo_max": loo[1]})
        if stat == "pearson":
            row["loo_most_influential"] = loo[2]
            row["permutations"] = n_perm
    row["loo_most_influential"] = judges[row["loo_most_influential"]] if row["loo_most_influential"] is not None else ""
    row["undefined_frac"] = max(undefined)
    row["x_resampling"] = "+".join(dict.fromkeys(axis.resampling(t) for t in tasks))
    row["y_resampling"] = "+".join(dict.fromkeys(b.setting.resampling() for b in blocks))
    notes = _warnings(row, jidx is not None)
    row["flag"] = bool(notes)
    row["warning"] = "; ".join(notes)
    return row


def _warnings(row: Mapping[str, Any], judges_resampled: bool) -> list[str]:
    notes = []
    if row["n_judges"] < MIN_JUDGES:
        notes.append(f"only {row['n_judges']} judges (fewer than {MIN_JUDGES}): a single judge can flip the sign")
    width = row["pearson_hi"] - row["pearson_lo"]
    if not np.isfinite(row["pearson_r"]):
        notes.append("r undefined (too few judges, or no spread in accuracy or BoN score)")
    elif not np.isfinite(width) or width > 1.0:
        notes.append(f"the interval for r is {'undefined' if not np.isfinite(width) else f'{width:.2f} wide'} (> 1)")
    if row["y_resampling"] == "prompts" and 0 < row["n_prompts"] < 30:
        notes.append(f"only {row['n_prompts']} prompts per setting")
    if "pairs" in row["x_resampling"] and 0 < row["n_pairs"] < 100:
        notes.append(f"accuracy from only {row['n_pairs']} MMRB2 pairs")
    if row["undefined_frac"] > 0.1:
        notes.append(f"{row['undefined_frac']:.0%} of bootstrap replicates undefined (ties or too few distinct judges)")
    if "fixed" in row["x_resampling"]:
        notes.append("accuracies not resampled (no pair counts)")
    if "fixed" in row["y_resampling"]:
        notes.append("BoN scores not resampled (no per-prompt scores)")
    if row.get("recentred"):
        notes.append("nearly all bootstrap replicates fall on one side of r (measurement noise large next to the "
                     "spread between judges, or stated larger than it is): interval recentred, approximate")
    if not judges_resampled:
        notes.append("judges held fixed: the interval covers measurement noise only")
    return notes


def permutation_p(stat: str, observed: Sequence[tuple[np.ndarray, np.ndarray]], permutations: int = 10000,
                  seed: int = 0) -> tuple[float, int]:
    """Two-sided p-value for no association: y's judge labels permuted within each setting.

    Exact (every ordering) for one setting of at most 8 judges; otherwise ``permutations`` random
    orderings with the usual +1 correction. Returns (p, number of orderings used).
    """
    obs = float(_stat(stat, observed))
    if not np.isfinite(obs):
        return math.nan, 0
    cleaned = []
    for x, y in observed:
        keep = np.isfinite(x) & np.isfinite(y)
        cleaned.append((x[keep], y[keep]))
    tol = 1e-12
    if len(cleaned) == 1 and len(cleaned[0][0]) <= EXACT_PERMUTATION_MAX_JUDGES:
        perms = all_orderings(len(cleaned[0][1]))
        null = _permuted(stat, cleaned, [perms])
        return float(np.mean(np.abs(null) >= abs(obs) - tol)), len(perms)
    rng = np.random.default_rng(seed)
    orders = [np.argsort(rng.random((permutations, len(y))), axis=1) for _, y in cleaned]
    null = _permuted(stat, cleaned, orders)
    hits = int(np.sum(np.abs(null[np.isfinite(null)]) >= abs(obs) - tol))
    return (1 + hits) / (1 + permutations), permutations


def _permuted(stat: str, blocks: Sequence[tuple[np.ndarray, np.ndarray]], orders: Sequence[np.ndarray]) -> np.ndarray:
    """``_stat`` of every ordering of y's judge labels (row r of ``orders[k]`` reorders block k's y), the same
    bits: what depends on y alone and is equivariant under reordering (ranks, standardised ranks, the signs of
    y's pairwise differences) is computed once and reordered, not recomputed per ordering. Blocks: finite x, y."""
    if stat == "kendall":
        parts = []
        for (x, y), order in zip(blocks, orders):
            i, j = np.triu_indices(len(y), 1)
            dx = np.nan_to_num(np.sign(x[i] - x[j]))
            signs = np.nan_to_num(np.sign(y[:, None] - y[None, :])).ravel()
            dy = signs[order[:, i] * len(y) + order[:, j]]
            # integer-valued sums: the same whatever the order of summation
            parts.append((dy @ dx, np.full(len(order), np.abs(dx).sum()), np.full(len(order), np.abs(signs[i * len(y) + j]).sum()),
                          np.full(len(order), len(y))))
        return _tau(*(sum(p[k] for p in parts) for k in range(4)))
    if len(blocks) == 1:
        (x, y), order = blocks[0], orders[0]
        if stat == "spearman":  # the ranks of a reordered y are y's ranks reordered
            return _pearson_fixed_x(ranks(x), ranks(y)[order])
        return _pearson_fixed_x(x, y[order])
    if stat == "spearman":  # standardised ranks: sums of half-integers, exact in any order, so reordering commutes
        xs = [_zscore(ranks(x)) for x, _ in blocks]
        ys = [_zscore(ranks(y))[order] for (_, y), order in zip(blocks, orders)]
    else:  # pooled Pearson: each block's x and y standardised within the block, as pooled() does
        xs = [_zscore(x) for x, _ in blocks]
        ys = [_zscore(y[order]) for (_, y), order in zip(blocks, orders)]
    # pooled() joins x's rows as broadcast blocks: a column-major matrix, whose row sums run column by column;
    # two such rows sum as every row of it does
    rows = np.concatenate([np.broadcast_to(x, (2, len(x))) for x in xs], -1)
    return _pearson_fixed_x(rows, np.concatenate(ys, -1))


def _pearson_fixed_x(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``pearson(x, y)`` of one row x (judges; or a few equal rows laid out as the full matrix would be) beside
    many rows y, the same bits: x's sums, the same in every row, are summed once."""
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return pearson(np.broadcast_to(x[(0,) * (x.ndim - 1)], y.shape), y)
    n = x.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.sum(x, -1, keepdims=True) / n
        my = np.sum(y, -1) / n
    xc = x - mx
    yc = y - my[..., None]
    sxx, syy = (xc * xc).sum(-1)[(0,) * (x.ndim - 1)], (yc * yc).sum(-1)
    sxx = 0.0 if sxx <= 1e-20 * np.sum(x * x, -1)[(0,) * (x.ndim - 1)] + 1e-300 else sxx  # as _moments
    xc = xc[(0,) * (x.ndim - 1)]
    syy = np.where(syy <= 1e-20 * np.sum(y * y, -1) + 1e-300, 0.0, syy)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(-1) / np.sqrt(sxx * syy)
    return np.where((n >= 3) & (sxx > 0) & (syy > 0), np.clip(r, -1.0, 1.0), np.nan)


@functools.lru_cache(maxsize=None)
def all_orderings(n: int) -> np.ndarray:
    """Every ordering of ``range(n)`` (n! rows, lexicographic), built once per size: the exact test of each
    setting and coefficient reuses it (5,040 rows for 7 judges)."""
    orderings = np.array(list(itertools.permutations(range(n))), dtype=np.intp)
    orderings.flags.writeable = False
    return orderings


def _leave_one_out(stat: str, observed: Sequence[tuple[np.ndarray, np.ndarray]],
                   present: np.ndarray) -> tuple[float, float, int | None]:
    """(min, max, judge whose removal moves the coefficient most) over dropping one judge everywhere.
    Every drop at once: row k of the stacked arrays lacks the k-th present judge."""
    full = float(_stat(stat, observed))
    drop = np.flatnonzero(present)
    if drop.size == 0:
        return math.nan, math.nan, None
    dropped = []
    for x, y in observed:
        x2 = np.tile(np.asarray(x, float), (drop.size, 1))
        x2[np.arange(drop.size), drop] = np.nan
        dropped.append((x2, np.tile(np.asarray(y, float), (drop.size, 1))))
    each = np.asarray(_stat(stat, dropped), float)
    finite = np.isfinite(each)
    if not finite.any():
        return math.nan, math.nan, None
    values, who = each[finite], drop[finite]
    shift = np.abs(values - full) if np.isfinite(full) else np.zeros(values.size)
    return float(values.min()), float(values.max()), int(who[int(np.argmax(shift))])