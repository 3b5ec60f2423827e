"""How many prompts and judges does a study need? Simulated interval widths from a pilot run's numbers.

The pilot fixes the ingredients of a simple generative model of one (task, generator) setting:

- judges' **true accuracies** vary with the between-judge spread seen in the pilot, after removing the
  part of that spread that is just pair sampling noise (``acc_sd``);
- a judge's **true BoN score** is linear in its accuracy (``slope``, fitted across the pilot's judges)
  plus a judge-specific deviation (``judge_sd``, the residual spread minus its measurement noise);
- each **measured accuracy** is a binomial proportion over ``pairs`` MMRB2 pairs;
- each **measured BoN score** is the true score plus the mean of per-prompt noise whose SD
  (``prompt_sd``) is the judge x prompt residual of the pilot's pick scores (prompt difficulty, shared
  by all judges, cancels in a correlation across judges and is left out).

For every cell of a prompts x judges grid, many studies are simulated; in each, the 95% interval for
Pearson r is computed the way :mod:`analysis.statistics` does it (bias-corrected percentile bootstrap with
judges resampled and measurement noise redrawn; here parametrically), and the cell reports the median
interval width, the share of studies whose interval excludes zero (power to see the relation at all) and the true r of the simulated
population. A pilot with few judges pins these ingredients down loosely, so read the grid as an order of
magnitude, not a promise.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import leakage
from analysis.bon_metrics import load_prompt_level
from analysis.statistics import JudgeAxis, bc_interval, pearson, run_judge_axis, settings_from_prompts
from bon.errors import BonError
from bon.run import Run, as_run
from bon.seeds import derive_seed

PROMPTS_GRID = (25, 50, 100, 200, 400, 800)
JUDGES_GRID = (5, 8, 12, 16, 24, 32)
POWER_COLUMNS = ["judges", "prompts", "pairs", "median_width", "width_q10", "width_q90", "p_excludes_zero",
                 "mean_r", "true_r", "sims", "bootstrap"]


def fit_setting(scores: np.ndarray, acc: np.ndarray, acc_var: np.ndarray) -> dict[str, float]:
    """Model ingredients of one setting: judges x prompts pick scores, accuracies (%) and their sampling
    variances (from the pair bootstrap or the binomial)."""
    ok = np.isfinite(acc)
    scores, acc, acc_var = scores[ok], acc[ok], acc_var[ok]
    keep = np.isfinite(scores).all(0)  # prompts every judge scored: a clean two-way layout
    s = scores[:, keep]
    j, p = s.shape
    if j < 3 or p < 2:
        raise BonError("a pilot setting needs at least 3 judges with accuracies and 2 fully scored prompts")
    if np.ptp(s.mean(1)) == 0 or np.ptp(acc) == 0:
        raise BonError("a pilot setting needs judges that differ in accuracy and in Best-of-N score")
    resid = s - s.mean(1, keepdims=True) - s.mean(0, keepdims=True) + s.mean()
    prompt_sd = math.sqrt(max((resid ** 2).sum() / ((j - 1) * (p - 1)), 0.0))
    y = s.mean(1)
    acc_sd = math.sqrt(max(np.var(acc, ddof=1) - np.nanmean(acc_var), 1e-6))
    slope, icpt = np.polyfit(acc, y, 1)
    res = y - (slope * acc + icpt)
    judge_var = np.var(res, ddof=2) if j > 2 else 0.0
    judge_sd = math.sqrt(max(judge_var - prompt_sd ** 2 / p - slope ** 2 * np.nanmean(acc_var), 0.0))
    return {"acc_mean": float(acc.mean()), "acc_sd": acc_sd, "slope": float(slope), "intercept": float(icpt),
            "judge_sd": judge_sd, "prompt_sd": prompt_sd, "pilot_judges": j, "pilot_prompts": p}


def fit_pilot(prompts: pd.DataFrame, axis: JudgeAxis, task: str | None = None, generator: str | None = None,
              seed: int = 0, bootstrap: int = 400) -> dict[str, Any]:
    """Ingredients fitted per setting of the pilot, and their medians (or one setting's, if named)."""
    fits = []
    for s in settings_from_prompts(prompts):
        if (task and s.task != task) or (generator and s.generator != generator):
            continue
        acc = axis.accuracy(s.task, s.judges)
        reps = axis.replicates(s.task, s.judges, bootstrap, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            acc_var = np.nanvar(reps, 0, ddof=1) if reps.shape[0] > 1 else np.zeros(len(acc))
        try:
            fit = fit_setting(s.scores, acc, acc_var)
        except BonError:
            continue
        fits.append({"task": s.task, "generator": s.generator, **fit, "pairs": axis.n_pairs(s.task, s.judges)})
    if not fits:
        raise BonError("no pilot setting with at least 3 judges, accuracies and 2 fully scored prompts"
                       + (f" for {task}/{generator}" if task or generator else ""))
    table = pd.DataFrame(fits)
    keys = ["acc_mean", "acc_sd", "slope", "intercept", "judge_sd", "prompt_sd", "pairs"]
    summary = {k: float(table[k].median()) for k in keys}
    summary["pairs"] = int(round(summary["pairs"]))
    return {"settings": table, "model": summary}


def _true_r(model: dict[str, float]) -> float:
    sx = model["slope"] * model["acc_sd"]
    return sx / math.sqrt(sx ** 2 + model["judge_sd"] ** 2) if sx or model["judge_sd"] else math.nan


def simulate_cell(model: dict[str, float], judges: int, prompts: int, pairs: int, sims: int = 200,
                  bootstrap: int = 200, level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """Simulated studies of ``judges`` judges, ``prompts`` prompts and ``pairs`` MMRB2 pairs."""
    rng = np.random.default_rng(derive_seed(seed, "power", judges, prompts, pairs))
    x_true = np.clip(rng.normal(model["acc_mean"], model["acc_sd"], (sims, judges)), 0.0, 100.0)
    y_true = model["intercept"] + model["slope"] * x_true + rng.normal(0.0, model["judge_sd"], (sims, judges))
    x_obs = 100.0 * rng.binomial(pairs, x_true / 100.0) / pairs
    y_se = model["prompt_sd"] / math.sqrt(prompts)
    y_obs = y_true + rng.normal(0.0, y_se, (sims, judges))
    # the analysis of each simulated study: judges resampled, both measurements redrawn
    x_se = np.sqrt(np.clip(x_obs * (100.0 - x_obs), 1.0, None) / pairs)
    drawn = rng.integers(0, judges, (sims, bootstrap, judges))
    drawn += judges * np.arange(sims)[:, None, None]  # flat positions in the sims x judges arrays, used thrice
    # xb = x_obs[drawn] + noise * x_se[drawn], yb = y_obs[drawn] + noise * y_se, in place (the same sums)
    xb = rng.standard_normal(drawn.shape)
    xb *= np.take(x_se, drawn)
    xb += np.take(x_obs, drawn)
    yb = rng.standard_normal(drawn.shape)
    yb *= y_se
    yb += np.take(y_obs, drawn)
    r = pearson(xb, yb)
    r_obs = pearson(x_obs, y_obs)
    lo, hi = bc_interval(r, r_obs, level)  # as the report computes it
    width = hi - lo
    return {"judges": judges, "prompts": prompts, "pairs": pairs, "median_width": float(np.nanmedian(width)),
            "width_q10": float(np.nanquantile(width, 0.1)), "width_q90": float(np.nanquantile(width, 0.9)),
            "p_excludes_zero": float(np.mean((lo > 0) | (hi < 0))), "mean_r": float(np.nanmean(r_obs)),
            "true_r": _true_r(model), "sims": sims, "bootstrap": bootstrap}


def power_grid(model: dict[str, float], prompts_grid: Sequence[int] = PROMPTS_GRID,
               judges_grid: Sequence[int] = JUDGES_GRID, pairs: int | None = None, sims: int = 200,
               bootstrap: int = 200, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Median CI width (and more) for every judges x prompts cell."""
    pairs = int(pairs or model.get("pairs") or 1000)
    rows = [simulate_cell(model, j, p, pairs, sims, bootstrap, level, seed) for j in judges_grid for p in prompts_grid]
    return pd.DataFrame(rows, columns=POWER_COLUMNS)


def recommend(grid: pd.DataFrame, width: float) -> dict[str, Any] | None:
    """The cheapest cell (fewest judges, then fewest prompts) whose median interval is at most ``width``."""
    ok = grid[grid.median_width <= width].sort_values(["judges", "prompts"])
    if ok.empty:
        return None
    row = {k: (v.item() if hasattr(v, "item") else v) for k, v in ok.iloc[0].to_dict().items()}
    return {k: int(v) if k in ("judges", "prompts", "pairs", "sims", "bootstrap") else v for k, v in row.items()}


def power_analysis(run: Run | Path, width: float = 0.5, task: str | None = None, generator: str | None = None,
                   prompts_grid: Sequence[int] = PROMPTS_GRID, judges_grid: Sequence[int] = JUDGES_GRID,
                   pairs: int | None = None, sims: int = 200, bootstrap: int = 200, seed: int = 0,
                   prompts: pd.DataFrame | None = None, axis: JudgeAxis | None = None,
                   excluded: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``bon power``: fit the pilot run, simulate the grid, recommend the smallest design for ``width``. The
    pilot leaves out the judges the leakage policy does (``excluded``, default: the run's policy)."""
    run = as_run(run)
    n = run.n
    if n is not None and n < 2:
        raise BonError(f"{run.root}: N = {n} candidate per prompt: every judge picks the same one, so the run cannot "
                       "serve as a pilot")
    prompts = load_prompt_level(run) if prompts is None else prompts
    if excluded is None:
        excluded = leakage.run_exclusions(run, list(dict.fromkeys(prompts["judge"])))
    prompts = prompts[~prompts["judge"].isin(list(excluded))]
    axis = axis or run_judge_axis(run, list(dict.fromkeys(prompts["judge"])))
    pilot = fit_pilot(prompts, axis, task, generator, seed)
    grid = power_grid(pilot["model"], prompts_grid, judges_grid, pairs, sims, bootstrap, seed=seed)
    return {"model": pilot["model"], "pilot_settings": pilot["settings"], "grid": grid, "width": width,
            "recommendation": recommend(grid, width), "pairs": int(grid["pairs"].iloc[0]) if len(grid) else pairs,
            "left_out": dict(excluded)}


def format_power(result: dict[str, Any]) -> str:
    """Console text for ``bon power``: the fitted model, the width grid and the recommendation."""
    m, grid, width = result["model"], result["grid"], result["width"]
    lines = [f"pilot model (median over settings): accuracy {m['acc_mean']:.1f}% ± {m['acc_sd']:.1f} between judges, "
             f"BoN slope {m['slope']:.4f} per accuracy point, judge deviation SD {m['judge_sd']:.3f}, "
             f"per-prompt noise SD {m['prompt_sd']:.3f}; true r of this model {_true_r(m):+.2f}",
             f"median 95% CI width for Pearson r ({int(grid['sims'].iloc[0])} simulated studies per cell, "
             f"{result['pairs']} MMRB2 pairs per task):",
             f"{'judges':>7} | " + " ".join(f"{p:>7}" for p in sorted(set(grid.prompts))) + "   prompts"]
    for j, sub in grid.groupby("judges"):
        cells = [f"{w:7.2f}{'*' if w <= width else ' '}" for w in sub.sort_values("prompts")["median_width"]]
        lines.append(f"{j:>7} | " + "".join(cells))
    rec = result["recommendation"]
    lines.append(f"* width ≤ {width:g}. " + (
        f"Smallest design: {rec['judges']} judges x {rec['prompts']} prompts (median width {rec['median_width']:.2f}, "
        f"interval excludes 0 in {rec['p_excludes_zero']:.0%} of simulated studies)." if rec else
        "No design in the grid reaches that width; add judges (widths shrink mostly with judges, not prompts)."))
    if result.get("left_out"):
        lines.append("pilot without (leakage): " + "; ".join(f"{k} ({why})" for k, why in result["left_out"].items()))
    return "\n".join(lines)
