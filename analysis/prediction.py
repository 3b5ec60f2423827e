"""Will this judge help? A judge's Best-of-N gain predicted from its MMRB2 accuracy, with a prediction interval,
and how well that works on judges the fit never saw.

Per task and generator, over the study's judges (the leakage policy's exclusions left out), a least-squares line
relates MMRB2 accuracy (x, %) to Best-of-N gain over a random pick (y, as in ``results.csv``). A new judge's
prediction interval at accuracy x0 is

    ŷ(x0) ± t(n−2) · sqrt(V_fit(x0) + s²)

where V_fit is the variance of the line at x0 over bootstrap replicates that resample the fit's judges, and s² is
the judges' residual scatter around the line (n − 2 degrees of freedom), which already holds each judge's
measurement noise (its prompts' luck in y, its pairs' in x). So the interval covers both the fit's uncertainty and
how far single judges land from the line. Prompts and preference pairs are resampled too (the correlation table's
draws, so the same replicates as the report's intervals), but they enter the slope's interval (does accuracy
predict gain at all?), not V_fit: resampling them there as well counts the measurement noise twice, and the
intervals over-cover (``python benchmarks/prediction_coverage.py`` prints the coverage of both choices on
simulated studies whose truth is known; judges only is the one near its nominal level).

Flags: an accuracy outside the fit's range (extrapolation); fewer than 4 judges in the fit; a slope whose
bootstrap interval (same level) contains 0: then there is no number, only :data:`NO_RELATION`.

Held-out validation (:func:`validation`), in every report: leave one judge out (fit without judge j, predict j,
compare with j's measured gain), and, where a task has two or more generators, leave one generator out (the line
of generator A predicts the judges' gains on B). Per task and generator and pooled: mean absolute error, the
share of measured gains inside their intervals (coverage, with the count) and Spearman ρ between predicted and
measured gains (pooled: within-setting ranks only, as the report's pooled correlations).

Every fit draws its judges by a seed of its task, generator and judge names, so leaving judge j out of a study
here and fitting a study that never had j give the same line (``bon predict`` on the smaller study).
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.special import stdtrit  # Student t quantiles (scipy.stats takes a second to import)

from analysis.bon_metrics import multinomial_weights, nanquantiles, task_order
from analysis.statistics import JudgeAxis, Setting, pooled, spearman
from bon.seeds import derive_seed

LEVEL = 0.9
MIN_FIT_JUDGES = 3  # a line through fewer has no scatter to estimate
FEW_JUDGES = 4  # fewer than this in a fit: flagged
NO_RELATION = "accuracy does not predict gain here"
EXTRAPOLATION = "extrapolation"
MEASURED = "measured"
PREDICTION_COLUMNS = ["judge", "task", "generator", "accuracy", "predicted_gain", "lo", "hi", "predicted_score",
                      "measured_gain", "flags"]
VALIDATION_COLUMNS = ["holdout", "judge", "task", "generator", "accuracy", "predicted_gain", "lo", "hi",
                      "predicted_score", "measured_gain", "covered", "flags"]
SUMMARY_COLUMNS = ["holdout", "task", "generator", "n", "mae", "covered", "coverage", "spearman_rho", "no_relation"]


@dataclass
class GainData:
    """One (task, generator, strategy) setting: its judges' accuracy x and gain y, with B bootstrap replicates of
    both (pairs and prompts resampled; judges are resampled per fit)."""

    task: str
    generator: str
    strategy: str
    judges: list[str]
    x: np.ndarray  # judges
    y: np.ndarray
    xb: np.ndarray  # B x judges
    yb: np.ndarray
    random: float  # mean score of a random pick over the setting's prompts (predicted score = random + gain)

    def select(self, judges: Sequence[str]) -> "GainData":
        idx = [self.judges.index(j) for j in judges]
        return GainData(self.task, self.generator, self.strategy, list(judges), self.x[idx], self.y[idx],
                        self.xb[:, idx], self.yb[:, idx], self.random)


def gain_data(settings: Sequence[Setting], prompts: pd.DataFrame, axis: JudgeAxis, excluded: Iterable[str] = (),
              bootstrap: int = 1000, seed: int = 0) -> list[GainData]:
    """Per setting (:func:`analysis.statistics.settings_from_prompts` of the prompt-level rows ``prompts``): the
    judges the leakage policy keeps that have both an accuracy and a gain, in name order. The prompt and pair
    replicates are the correlation table's draws."""
    drop = set(excluded)
    keyed = prompts.drop_duplicates(["task", "generator", "strategy", "prompt_id"]).sort_values("prompt_id", kind="stable")
    random = {key: sub["random_score"].to_numpy(float)
              for key, sub in keyed.groupby(["task", "generator", "strategy"], sort=False)}
    x_reps: dict[str, tuple[list[str], np.ndarray]] = {}
    out = []
    for s in settings:
        if s.scores is None:
            continue
        if s.task not in x_reps:
            every = sorted({j for t in settings if t.task == s.task for j in t.judges if j not in drop})
            x_reps[s.task] = (every, axis.replicates(s.task, every, bootstrap, seed))
        every, xr = x_reps[s.task]
        judges = sorted(j for j in s.judges if j not in drop)
        rows = [s.judges.index(j) for j in judges]
        rnd = random[(s.task, s.generator, s.strategy)]
        gain = s.scores[rows] - rnd[None, :]
        ok = np.isfinite(gain)
        w = multinomial_weights(gain.shape[1], bootstrap, derive_seed(seed, "prompts", s.task, s.strategy))
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(ok.any(1), np.where(ok, gain, 0.0).sum(1) / ok.sum(1), np.nan)
            yb = (w @ np.where(ok, gain, 0.0).T) / (w @ ok.T.astype(float))
        x = axis.accuracy(s.task, judges)
        xb = xr[:, [every.index(j) for j in judges]]
        keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(xb).all(0) & np.isfinite(yb).all(0)
        scored = ok.any(0)
        out.append(GainData(s.task, s.generator, s.strategy, [j for j, k in zip(judges, keep) if k], x[keep], y[keep],
                            xb[:, keep], yb[:, keep], float(rnd[scored].mean()) if scored.any() else math.nan))
    return out


# --- the fit ------------------------------------------------------------------------------------------------


def _line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares over the last axis (weights: judge multiplicities): (slope, intercept), NaN without
    spread in x."""
    sw = w.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(-1) / sw
        my = (w * y).sum(-1) / sw
        dx = x - mx[..., None]
        sxx = (w * dx * dx).sum(-1)
        slope = np.where(sxx > 1e-12, (w * dx * (y - my[..., None])).sum(-1) / np.where(sxx > 1e-12, sxx, 1.0), np.nan)
    return slope, my - slope * mx


@dataclass
class Fits:
    """K lines over one setting's judges (row k of ``keep`` says which judges fit k uses)."""

    data: GainData
    keep: np.ndarray  # K x judges, bool
    level: float
    n: np.ndarray  # K
    slope: np.ndarray
    intercept: np.ndarray
    s2: np.ndarray  # residual variance (n - 2 degrees of freedom)
    slope_lo: np.ndarray
    slope_hi: np.ndarray
    xmin: np.ndarray
    xmax: np.ndarray
    boot_slope: np.ndarray  # K x B: the lines of the judge bootstrap (prediction variance)
    boot_intercept: np.ndarray

    def predict(self, x0: np.ndarray) -> dict[str, np.ndarray]:
        """Predictions at accuracies ``x0`` (K x M): point, interval, flags' conditions, each K x M."""
        x0 = np.asarray(x0, float)
        point = self.intercept[:, None] + self.slope[:, None] * x0
        reps = self.boot_intercept[:, :, None] + self.boot_slope[:, :, None] * x0[:, None, :]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            v_fit = np.nanvar(reps, axis=1, ddof=1)
            t = stdtrit(np.maximum(self.n - 2, 1), 0.5 + self.level / 2.0)
            half = np.where(self.n >= MIN_FIT_JUDGES, t, np.nan)[:, None] * np.sqrt(v_fit + self.s2[:, None])
        return {"point": point, "lo": point - half, "hi": point + half,
                "extrapolation": (x0 < self.xmin[:, None] - 1e-9) | (x0 > self.xmax[:, None] + 1e-9),
                "few": np.broadcast_to((self.n < FEW_JUDGES)[:, None], x0.shape),
                "no_relation": np.broadcast_to((~(self.slope_lo > 0) & ~(self.slope_hi < 0))[:, None], x0.shape)}


def fit_lines(data: GainData, keep: np.ndarray, seed: int = 0, level: float = LEVEL,
              resample_measurement: bool = False) -> Fits:
    """The lines of ``keep``'s rows, each with its bootstrap: the fit's judges drawn with replacement (seeded by the
    setting and the fit's judge names). The slope's interval also resamples prompts and pairs (the setting's
    replicates, the same row for each fit); the line's variance at a new accuracy resamples the judges only
    (``resample_measurement``: prompts and pairs too, which counts the measurement noise twice: once in the
    judges' scatter around the line, once in the fit; ``benchmarks/prediction_coverage.py`` prints both)."""
    keep = np.atleast_2d(np.asarray(keep, bool))
    w = keep.astype(float)
    slope, intercept = _line(data.x, data.y, w)
    n = keep.sum(-1)
    resid = data.y - (intercept[:, None] + slope[:, None] * data.x)
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = np.where(n > 2, (w * resid * resid).sum(-1) / np.maximum(n - 2, 1), np.nan)
    bootstrap = data.xb.shape[0]
    counts = np.zeros((len(keep), bootstrap, len(data.judges)))
    for k, row in enumerate(keep):
        cols = np.flatnonzero(row)  # judges in name order: the same draw whichever study they come from
        if cols.size:
            rng = np.random.default_rng(derive_seed(seed, "predict-judges", data.task, data.generator,
                                                    *[data.judges[c] for c in cols]))
            counts[k][:, cols] = rng.multinomial(cols.size, np.full(cols.size, 1.0 / cols.size), size=bootstrap)
    bs, _ = _line(data.xb[None], data.yb[None], counts)  # judges, prompts and pairs: does accuracy predict gain?
    if not resample_measurement:  # judges only: each judge's measurement noise is already in the scatter s²
        ps, pi = _line(np.broadcast_to(data.x, counts.shape), np.broadcast_to(data.y, counts.shape), counts)
    else:
        ps, pi = _line(data.xb[None], data.yb[None], counts)
    lo, hi = (nanquantiles(bs, (0.5 - level / 2.0, 0.5 + level / 2.0), axis=1) if bs.size
              else (np.full(len(keep), np.nan),) * 2)
    xs = np.where(keep, data.x, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        xmin, xmax = np.nanmin(xs, -1) if xs.size else np.nan, np.nanmax(xs, -1) if xs.size else np.nan
    return Fits(data, keep, level, n, slope, intercept, s2, lo, hi, np.atleast_1d(xmin), np.atleast_1d(xmax), ps, pi)


def flags_text(pred: Mapping[str, Any], k: int, m: int, n: int) -> list[str]:
    """The flags of prediction (k, m) in words."""
    out = []
    if pred["no_relation"][k, m]:
        out.append(NO_RELATION)
    if pred["extrapolation"][k, m]:
        out.append(EXTRAPOLATION)
    if pred["few"][k, m]:
        out.append(f"only {n} judges in the fit (fewer than {FEW_JUDGES})")
    return out


# --- held-out validation -------------------------------------------------------------------------------------


def validation(data: Sequence[GainData], seed: int = 0, level: float = LEVEL) -> dict[str, pd.DataFrame]:
    """Leave one judge out in every setting, and one generator out where a task has several: ``rows`` (one per
    held-out prediction, :data:`VALIDATION_COLUMNS`) and ``summary`` (:data:`SUMMARY_COLUMNS`: per setting and
    pooled)."""
    rows: list[dict[str, Any]] = []
    for d in data:
        if len(d.judges) - 1 < MIN_FIT_JUDGES:
            continue
        fits = fit_lines(d, ~np.eye(len(d.judges), dtype=bool), seed, level)
        pred = fits.predict(d.x[:, None])
        rows += [_row("judge", d, fits, pred, k, 0, d.judges[k], d.x[k], d.y[k]) for k in range(len(d.judges))]
    by_task: dict[tuple[str, str], list[GainData]] = {}
    for d in data:
        by_task.setdefault((d.task, d.strategy), []).append(d)
    for group in by_task.values():
        for a in group:
            if len(a.judges) < MIN_FIT_JUDGES:
                continue
            fit = fit_lines(a, np.ones((1, len(a.judges)), bool), seed, level)
            for b in group:
                if b is a or not b.judges:
                    continue
                pred = fit.predict(b.x[None, :])
                rows += [_row(f"generator {a.generator}", b, fit, pred, 0, m, j, b.x[m], b.y[m])
                         for m, j in enumerate(b.judges)]
    table = pd.DataFrame(rows, columns=[*VALIDATION_COLUMNS, "no_relation"])
    return {"rows": table.drop(columns="no_relation"), "summary": summarise(table)}


def _row(holdout: str, d: GainData, fits: Fits, pred: Mapping[str, np.ndarray], k: int, m: int, judge: str,
         x: float, y: float) -> dict[str, Any]:
    p, lo, hi = (float(pred[key][k, m]) for key in ("point", "lo", "hi"))
    return {"holdout": holdout, "judge": judge, "task": d.task, "generator": d.generator, "accuracy": float(x),
            "predicted_gain": p, "lo": lo, "hi": hi, "predicted_score": d.random + p, "measured_gain": float(y),
            "covered": bool(lo <= y <= hi) if np.isfinite(lo) and np.isfinite(hi) else None,
            "flags": "; ".join(flags_text(pred, k, m, int(fits.n[k]))), "no_relation": bool(pred["no_relation"][k, m])}


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """MAE, coverage (with the count) and Spearman ρ per (holdout kind, task, generator) and pooled per kind."""
    out = []
    rows = rows[np.isfinite(pd.to_numeric(rows["lo"], errors="coerce"))] if len(rows) else rows
    for kind in dict.fromkeys(h.split(" ")[0] for h in rows["holdout"]):
        mine = rows[rows["holdout"].str.split(" ").str[0] == kind]
        blocks = []
        order = {t: i for i, t in enumerate(task_order(mine["task"]))}
        keys = sorted(mine.groupby(["holdout", "task", "generator"], sort=False).groups, key=lambda k: (order[k[1]], k[2], k[0]))
        for holdout, task, gen in keys:
            sub = mine[(mine["holdout"] == holdout) & (mine["task"] == task) & (mine["generator"] == gen)]
            p, y = sub["predicted_gain"].to_numpy(float), sub["measured_gain"].to_numpy(float)
            blocks.append((p, y))
            out.append(_summary_row(holdout, task, gen, sub, float(spearman(p, y))))
        rho = float(pooled("spearman", blocks)) if blocks else math.nan
        out.append(_summary_row(kind, "(all)", "(pooled)", mine, rho))
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def _summary_row(holdout: str, task: str, gen: str, sub: pd.DataFrame, rho: float) -> dict[str, Any]:
    err = np.abs(sub["predicted_gain"].to_numpy(float) - sub["measured_gain"].to_numpy(float))
    covered = int(sub["covered"].fillna(False).astype(bool).sum())
    return {"holdout": holdout, "task": task, "generator": gen, "n": len(sub), "mae": float(err.mean()) if len(sub) else math.nan,
            "covered": covered, "coverage": covered / len(sub) if len(sub) else math.nan, "spearman_rho": rho,
            "no_relation": int(sub["no_relation"].sum())}


def pooled_judge_row(summary: pd.DataFrame | None) -> dict[str, Any] | None:
    """The pooled leave-one-judge-out row of a summary, or None."""
    if summary is None or summary.empty:
        return None
    rows = summary[(summary["holdout"] == "judge") & (summary["task"] == "(all)")]
    return rows.iloc[0].to_dict() if len(rows) else None


def answer_sentence(summary: pd.DataFrame | None, level: float = LEVEL) -> str:
    """report.md's one line: how far held-out judges' gains land from their predictions."""
    row = pooled_judge_row(summary)
    if not row or not row["n"]:
        return ""
    return (f"**Held-out judges:** a judge left out of the fit has its Best-of-N gain predicted within ±{row['mae']:.3f} "
            f"on average (mean absolute error); {row['covered']} of {row['n']} measured gains fall inside their "
            f"{round(100 * level)}% prediction intervals; Spearman ρ between predicted and measured gains "
            f"{row['spearman_rho']:+.2f} (within settings).")


# --- bon predict: new judges on a study's line -----------------------------------------------------------

PREFERENCE, PUBLISHED = "preference", "published"
AXES = {PREFERENCE: "the study's own preference set (mmrb2/ in the run folder)",
        PUBLISHED: "MMRB2's released pairs (accuracies: published)"}
PRICE_COLUMN = "usd_per_call"  # an accuracy table's price of one judge call, in dollars


@dataclass
class NewAccuracy:
    """A judge to place on the study's line: its accuracy (%) on one task, on which axis, where it came from."""

    judge: str
    task: str
    accuracy: float
    axis: str  # PREFERENCE or PUBLISHED
    where: str  # the command-line item or file it came from (for errors)
    usd_per_call: float = math.nan


@dataclass
class Study:
    """What ``bon predict`` fits on: the run's settings (every judge, exclusions as a list), its axis, its judges'
    calls per prompt."""

    run: Any
    data: list[GainData]
    excluded: dict[str, str]
    axis: str
    calls_per_prompt: dict[tuple[str, str, str], float]
    own_overlap: Any  # the leakage rule for pairs of the run's own preference set (None: keep every pair)

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(d.task for d in self.data))


def load_study(run: Any, bootstrap: int = 1000, seed: int = 0) -> Study:
    """A run read for prediction: its settings' gains and accuracies (the study's own axis, its leakage policy)."""
    from analysis import leakage
    from analysis.bon_metrics import load_prompt_level
    from analysis.statistics import accuracy_axis, run_judge_axis, settings_from_prompts
    from bon.errors import BonError
    from bon.run import as_run

    run = as_run(run)
    prompts = load_prompt_level(run)
    if prompts.empty:
        raise BonError(f"{run.folder.picks}: no picks: nothing to fit")
    judges = list(dict.fromkeys(prompts["judge"]))
    policy = leakage.study_policy(run.study)
    overlap = leakage.own_set_overlap(run.folder.mmrb2, leakage.downstream(run, set(prompts["prompt_id"])), policy)
    named = run.study.get("accuracies") or "preference"  # the config's accuracies: preference | published | FILE
    source = "run" if named == "preference" else str(named)
    axis = run_judge_axis(run, judges, None, overlap) if source == "run" else accuracy_axis(source, run, judges)
    excluded = leakage.excluded_judges(run.study, leakage.load_stats(run), judges)
    data = gain_data(settings_from_prompts(prompts), prompts, axis, (), bootstrap, seed)
    calls = prompts.groupby(["task", "generator", "strategy", "judge"])["calls"].mean().groupby(level=[0, 1, 2]).median()
    return Study(run, data, excluded, study_axis(source, run.folder.mmrb2), {k: float(v) for k, v in calls.items()},
                 overlap)


def study_axis(source: str, own: Any = None) -> str:
    """The axis of a study's ``accuracies`` (``run``, ``published`` or a CSV file)."""
    if source in ("run", "preference"):
        return PREFERENCE
    if source == PUBLISHED:
        return PUBLISHED
    from analysis.statistics import load_published

    return table_axis(load_published(source), own)


def table_axis(table: pd.DataFrame, own: Any = None) -> str:
    """An accuracy table's axis: its ``axis`` column (``preference`` or ``published``) when it has one; a run's
    ``accuracies.csv`` (its ``source`` is that run's mmrb2/ folder) is on the preference axis; any other table is
    taken to be on MMRB2's released pairs (as the published table and leaderboards are)."""
    if "axis" in table.columns:
        values = set(table["axis"].dropna().astype(str))
        return PREFERENCE if values == {PREFERENCE} else PUBLISHED
    if "source" in table.columns and len(table) and own is not None:
        sources = set(table["source"].dropna().astype(str))
        if sources and all(s.rstrip("/").endswith("/mmrb2") or s == str(own) for s in sources):
            return PREFERENCE
    return PUBLISHED


def check_axis(new: NewAccuracy, study: Study) -> None:
    """A one-line error when a new accuracy is on another axis than the study's x."""
    from bon.errors import BonError

    if new.axis != study.axis:
        raise BonError(f"{new.where}: its accuracies are on {AXES[new.axis]}, but the study {study.run.root} measures "
                       f"accuracy on {AXES[study.axis]}: different x axes, so the study's line cannot place this judge")


def check_accuracy(value: float, where: str) -> float:
    from bon.errors import BonError

    if not (np.isfinite(value) and 0.0 <= value <= 100.0):
        raise BonError(f"{where}: accuracy {value:g} is outside 0-100 (MMRB2 accuracy is a percentage)")
    return float(value)


def predict_new(study: Study, new: Sequence[NewAccuracy], task: str | None = None, generator: str | None = None,
                level: float = LEVEL, seed: int = 0) -> list[dict[str, Any]]:
    """One record per new judge, task and setting (generator, strategy): the predicted gain and its interval (None
    where accuracy does not predict gain), the predicted score, the rank among the study's judges, the measured gain
    of a judge that is in the study (which is then left out of its own fit) and the flags."""
    from bon.errors import BonError

    tasks = study.tasks
    if task is not None and task not in tasks:
        raise BonError(f"--task {task}: the study has no Best-of-N results for it (it has {', '.join(tasks)})")
    gens = {d.generator for d in study.data}
    if generator is not None and generator not in gens:
        raise BonError(f"--generator {generator}: not a generator of the study ({', '.join(sorted(gens))})")
    out = []
    for item in new:
        check_axis(item, study)
        if task is not None and item.task != task:
            continue
        if item.task not in tasks:
            raise BonError(f"{item.where}: the study has no Best-of-N results for task {item.task} (it has "
                           f"{', '.join(tasks)})")
        for d in study.data:
            if d.task == item.task and generator in (None, d.generator):
                out.append(_predict_one(study, d, item, level, seed))
    return out


def _predict_one(study: Study, d: GainData, item: NewAccuracy, level: float, seed: int) -> dict[str, Any]:
    from bon.errors import BonError

    keep = np.array([j not in study.excluded and j != item.judge for j in d.judges])
    if keep.sum() < MIN_FIT_JUDGES:
        gone = [f"{j} ({why})" for j, why in study.excluded.items() if j in d.judges]
        gone += [f"{item.judge} (the judge predicted)"] if item.judge in d.judges else []
        raise BonError(f"{item.where}: {d.task}/{d.generator}: only {int(keep.sum())} judges left in the fit"
                       + (f" (left out: {', '.join(gone)})" if gone else "") + f"; a line needs at least {MIN_FIT_JUDGES}")
    fit = fit_lines(d, keep[None, :], seed, level)
    pred = fit.predict(np.array([[item.accuracy]]))
    flags = flags_text(pred, 0, 0, int(fit.n[0]))
    measured = float(d.y[d.judges.index(item.judge)]) if item.judge in d.judges else None
    if measured is not None:
        flags.insert(0, MEASURED)
    silent = bool(pred["no_relation"][0, 0])
    p, lo, hi = (None if silent else float(pred[k][0, 0]) for k in ("point", "lo", "hi"))
    others = d.y[keep]
    calls = study.calls_per_prompt.get((d.task, d.generator, d.strategy), math.nan)
    usd = item.usd_per_call * calls if np.isfinite(item.usd_per_call) else math.nan
    return {"judge": item.judge, "task": d.task, "generator": d.generator, "strategy": d.strategy,
            "accuracy": item.accuracy, "predicted_gain": p, "lo": lo, "hi": hi,
            "predicted_score": None if p is None else d.random + p, "measured_gain": measured,
            "flags": "; ".join(flags), "rank": None if p is None else int(1 + (others > p).sum()),
            "judges_in_fit": int(fit.n[0]), "slope": float(fit.slope[0]), "slope_lo": float(fit.slope_lo[0]),
            "slope_hi": float(fit.slope_hi[0]), "fit_range": [float(fit.xmin[0]), float(fit.xmax[0])],
            "usd_per_prompt": None if not np.isfinite(usd) else float(usd),
            "gain_per_dollar": None if p is None or not np.isfinite(usd) or usd <= 0 else p / usd}


def judgment_accuracies(study: Study, item: str) -> list[NewAccuracy]:
    """``LABEL=FILE[,FILE...]``: official-format judgment files scored with the official scorer's semantics on the
    study's own preference set (the leakage policy's overlapping pairs dropped, as for the study's judges). A file's
    task is the one its pair ids belong to; a file whose name names another task is an error."""
    from analysis.leakage import drop_overlapping
    from analysis.statistics import pair_outcomes
    from bon import mmrb2
    from bon.errors import BonError
    from bon.mmrb2.scorer import task_pair_ids
    from bon.tasks import is_task, parse_task

    label, sep, files = item.partition("=")
    if not sep or not label or not files:
        raise BonError(f"--predictions {item}: expected LABEL=FILE[,FILE...]")
    out = []
    for file in files.split(","):
        where = f"--predictions {label}={file}"
        check_axis(NewAccuracy(label, "", math.nan, PREFERENCE, where), study)
        path = Path(file)
        judgments = mmrb2.load_judgments(path)
        known = {t.name: ids for t, ids in task_pair_ids(study.run.folder.mmrb2).items()}
        overlap = {t: len(set(judgments) & ids) for t, ids in known.items()}
        best = max(overlap.values(), default=0)
        if best == 0:
            raise BonError(f"{path}: none of its pair ids is a pair of the study's preference set "
                           f"({study.run.folder.mmrb2}); judgment files must answer the study's own pairs")
        tied = [t for t, k in overlap.items() if k == best]
        if len(tied) > 1:
            raise BonError(f"{path}: its pair ids match tasks {' and '.join(tied)} equally")
        task = tied[0]
        named = {parse_task(w).name for w in re.split(r"[^A-Za-z0-9]+", path.stem) if w and is_task(w)}
        if named and task not in named:
            raise BonError(f"{path}: its name says task {' or '.join(sorted(named))}, but its pair ids are "
                           f"{task}'s ({best} of {len(judgments)}): a file judged on one task cannot give another's accuracy")
        pairs, _ = drop_overlapping(study.run.pairs(mmrb2.find_task_file(study.run.folder.mmrb2, task)), task,
                                    study.own_overlap)
        acc = float(pair_outcomes(task, pairs, {label: judgments}).accuracy()[0])
        if not np.isfinite(acc):
            raise BonError(f"{path}: no answered pair of task {task}: no accuracy to place")
        out.append(NewAccuracy(label, task, acc, PREFERENCE, where))
    return out


def table_accuracies(study: Study, spec: str) -> list[NewAccuracy]:
    """``--accuracies FILE`` (or ``published``): every judge and task of an accuracy table (judge, task, accuracy
    [, usd_per_call][, axis]); rows of other columns' tasks (``avg``) are skipped."""
    from analysis.statistics import PUBLISHED_CSV, load_published
    from bon.tasks import bon_task, is_task

    path = PUBLISHED_CSV if spec == PUBLISHED else Path(spec)
    table = load_published(path)
    axis = PUBLISHED if spec == PUBLISHED else table_axis(table, study.run.folder.mmrb2)
    where = f"--accuracies {spec}"
    check_axis(NewAccuracy("", "", math.nan, axis, where), study)
    prices = pd.to_numeric(table[PRICE_COLUMN], errors="coerce") if PRICE_COLUMN in table.columns else None
    out = []
    for k, row in table.iterrows():
        if not is_task(str(row["task"])):
            continue
        value = check_accuracy(float(pd.to_numeric(row["accuracy"], errors="coerce")), f"{path}: {row['judge']} "
                               f"({row['task']})")
        out.append(NewAccuracy(str(row["judge"]), bon_task(str(row["task"])), value, axis, where,
                               float(prices[k]) if prices is not None else math.nan))
    return out


def given_accuracy(study: Study, item: str) -> NewAccuracy:
    """``--accuracy LABEL=TASK:VALUE``: a number given on the study's own axis."""
    from bon.errors import BonError
    from bon.tasks import bon_task, is_task

    label, sep, rest = item.rpartition("=")
    task, colon, value = rest.partition(":")
    where = f"--accuracy {item}"
    if not sep or not label or not colon:
        raise BonError(f"{where}: expected LABEL=TASK:VALUE (e.g. newjudge=t2i:71.5)")
    if not is_task(task):
        raise BonError(f"{where}: {task!r} is not a task (t2i, edit, interleaved, reasoning)")
    try:
        number = float(value)
    except ValueError:
        raise BonError(f"{where}: {value!r} is not a number") from None
    return NewAccuracy(label, bon_task(task), check_accuracy(number, where), study.axis, where)
