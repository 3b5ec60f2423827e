"""One call for the whole statistical report of a run folder, and the published-accuracy figure.

:func:`build_report` reads only what a finished study leaves on disk (``picks.jsonl``, ``scores.jsonl``,
``mmrb2/``, ``stats.json``, ``config.yaml``, optionally ``curves/*.json`` from ``bon curve --json``) and
never calls a judge, so it can be rerun at any time and costs nothing. It writes, in the run folder:

- ``report.html`` (self-contained: figures, thumbnails, sortable tables, data downloads inline);
- ``metrics.csv`` (:mod:`analysis.bon_metrics`), ``correlations_ci.csv`` (:mod:`analysis.statistics`),
  ``accuracies.csv`` (judge accuracies with intervals), ``leaderboard.csv`` (:mod:`analysis.leaderboard`),
  ``power.csv`` (:mod:`analysis.power`), ``report.json`` (all of it);
- ``figures/`` (PNG + SVG): ``correlation``, ``reranker``, ``power`` and, when curves exist, ``curves``;
- ``correlation.png`` redrawn with the intervals, and an uncertainty section in ``report.md``.

:func:`scores_figure` redraws the paper-style figure for anybody's Best-of-N numbers against the
accuracies published in the MMRB2 paper (or any accuracy file). Its input is a CSV with one row per
(task, generator, judge)::

    task,generator,judge,bon_score[,random_score,oracle_score][,n_prompts,bon_sd]
    t2i,flux-dev,GPT-5,0.712,0.640,0.801,200,0.21

``task`` is t2i, edit, interleaved or reasoning (or the scorer names image, ...); ``judge`` must match a
judge of the accuracy table, ignoring case and punctuation (``gpt5`` = ``GPT-5``); ``bon_score`` is the
mean downstream score of the judge's picks; ``random_score``/``oracle_score`` draw the baselines;
``n_prompts`` with ``bon_sd`` (SD of the per-prompt pick scores) let the intervals include prompt noise.
"""

from __future__ import annotations

import glob
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
import yaml
from scipy.stats import norm

from analysis.bon_metrics import bon_metrics, load_prompt_level, run_n
from analysis.figures import bon_curves_figure, power_figure, reranker_figure
from analysis.html_report import write_html_report
from analysis.leaderboard import all_leaderboards, load_stats
from analysis.plots import PLOT_COLUMNS, correlation_figure
from analysis.power import power_analysis
from analysis.report import append_statistics
from analysis.statistics import (JudgeAxis, accuracy_axis, correlation_intervals, match_judges, run_judge_axis,
                                 settings_from_prompts, settings_from_scores)
from bon.errors import BonError

FIGURE_NOTE = ("Intervals: 95% bias-corrected bootstrap over judges, prompts and MMRB2 pairs ({b} replicates, seed {s}); "
               "error bars: per-judge 95% intervals.")


class Bundle(dict):
    """Everything :func:`compute` found, as a dict that also reads as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _study(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _fallback_axis(run_dir: Path) -> JudgeAxis:
    """Accuracies from results.csv (fixed, no resampling) for a run without judgment files."""
    path = run_dir / "results.csv"
    if not path.exists():
        raise BonError(f"{run_dir}: no mmrb2/ judgments and no results.csv; no judge accuracies to correlate")
    res = pd.read_csv(path)
    t = res.drop_duplicates(["judge", "task"])[["judge", "task", "mmrb2_accuracy"]].rename(columns={"mmrb2_accuracy": "accuracy"})
    t = t.assign(n_pairs=np.nan, n_judgements=np.nan, source=str(path))
    return JudgeAxis("results.csv (not resampled)", t.reset_index(drop=True))


def load_curves(run_dir: Path) -> pd.DataFrame | None:
    """Rows of every ``curves/*.json`` (``bon curve --json``) with their judge, or None when there are none."""
    rows = []
    for file in sorted(glob.glob(str(Path(run_dir) / "curves" / "*.json"))):
        try:
            data = json.loads(Path(file).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise BonError(f"{file}: unreadable curve ({exc})") from None
        for r in data.get("curve", []):
            rows.append({**r, "judge": data.get("judge", Path(file).stem), "strategy": data.get("strategy", "")})
    return pd.DataFrame(rows) if rows else None


def compute(run_dir: Path, bootstrap: int = 1000, seed: int = 0, level: float = 0.95,
            accuracies: str | Path | JudgeAxis | None = "run",
            exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None = None, figures: bool = True,
            power: bool = True, power_width: float = 0.5) -> Bundle:
    """Every number of the report (and, with ``figures``, the figures under ``run_dir/figures``)."""
    run_dir = Path(run_dir)
    prompts = load_prompt_level(run_dir)
    if prompts.empty:
        raise BonError(f"{run_dir}/picks.jsonl: no picks")
    judges = list(dict.fromkeys(prompts["judge"]))
    if isinstance(accuracies, JudgeAxis):  # e.g. benchmark_judge_axis(..., exclude_sources=...) built by the caller
        axis = accuracies
    elif accuracies in (None, "run"):
        try:
            axis = run_judge_axis(run_dir, judges, exclude_sources)
        except BonError:
            axis = _fallback_axis(run_dir)
    else:
        axis = accuracy_axis(accuracies, run_dir, judges)
    stats = load_stats(run_dir)
    metrics = bon_metrics(prompts, bootstrap=bootstrap, seed=seed, level=level, n=run_n(run_dir))
    acc = axis.with_intervals(bootstrap, seed, level)
    with_acc = metrics.merge(acc[["judge", "task", "accuracy", "acc_lo", "acc_hi"]].rename(
        columns={"accuracy": "mmrb2_accuracy"}), on=["judge", "task"], how="left")
    correlations = correlation_intervals(settings_from_prompts(prompts), axis, bootstrap=bootstrap, seed=seed, level=level)
    leaderboards = all_leaderboards(prompts, stats, acc, bootstrap=bootstrap, seed=seed, level=level)
    power_result = None
    if power:
        try:
            power_result = power_analysis(run_dir, width=power_width, prompts_grid=(25, 50, 100, 200, 400),
                                          judges_grid=(5, 8, 12, 20, 32), sims=100, bootstrap=150, seed=seed,
                                          prompts=prompts, axis=axis)
        except BonError:
            power_result = None
    curves = load_curves(run_dir)
    study = _study(run_dir)
    b = Bundle(run_dir=run_dir, prompts=prompts, metrics=metrics, metrics_with_acc=with_acc, accuracies=acc,
               accuracy_label=axis.label, excluded_sources=axis.excluded, correlations=correlations,
               leaderboards=leaderboards, power=power_result, curves=curves, bootstrap=bootstrap, seed=seed,
               level=level, study=study.get("study", {}), versions=study.get("versions", {}), stats=stats, figures={})
    if figures:
        b["figures"] = draw_figures(run_dir / "figures", b)
    b["json"] = _payload(b)
    return b


def draw_figures(folder: Path, b: Mapping[str, Any]) -> dict[str, list[Path]]:
    """The report's figures, PNG and SVG, under ``folder``."""
    out: dict[str, list[Path]] = {}
    note = FIGURE_NOTE.format(b=b["bootstrap"], s=b["seed"])
    from analysis.predictors import figure_title  # the subtitle says what the axes are in this study

    png = correlation_figure(b["metrics_with_acc"], None, folder / "correlation.png", intervals=b["correlations"],
                             formats=("png", "svg"), note=note, title=figure_title(b.get("study") or {}))
    out["correlation"] = [png, png.with_suffix(".svg")]
    if b["leaderboards"] is not None and not b["leaderboards"].empty:
        out["reranker"] = reranker_figure(b["leaderboards"], folder / "reranker.png")
    if b.get("curves") is not None and not b["curves"].empty:
        out["curves"] = bon_curves_figure(b["curves"], folder / "curves.png")
    if b.get("power"):
        out["power"] = power_figure(b["power"]["grid"], folder / "power.png", b["power"]["width"])
    return out


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python, DataFrames -> records."""
    if isinstance(value, pd.DataFrame):
        return [_clean(r) for r in value.to_dict(orient="records")]
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, Path):
        return str(value)
    return value


def _payload(b: Mapping[str, Any]) -> dict[str, Any]:
    power = b.get("power")
    return _clean({
        "run_dir": b["run_dir"], "bootstrap": b["bootstrap"], "seed": b["seed"], "level": b["level"],
        "accuracy_source": b["accuracy_label"], "excluded_sources": b["excluded_sources"],
        "correlations": b["correlations"], "metrics": b["metrics_with_acc"], "accuracies": b["accuracies"],
        "leaderboards": b["leaderboards"],
        "power": None if not power else {"model": power["model"], "width": power["width"],
                                         "recommendation": power["recommendation"], "grid": power["grid"]},
        "study": b.get("study", {}),
    })


def build_report(run_dir: Path, bootstrap: int = 1000, seed: int = 0, *, level: float = 0.95,
                 accuracies: str | Path | JudgeAxis | None = "run",
                 exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None = None,
                 power: bool = True, power_width: float = 0.5, sample_prompts: int = 1) -> dict[str, Any]:
    """Compute everything for a finished run folder and write the report files (see the module doc).

    ``accuracies``: ``"run"`` (the run's mmrb2/ judgments), ``"published"``, a CSV or ``JUDGE=FILE.json``
    (see :func:`analysis.statistics.accuracy_axis`), or a ready :class:`~analysis.statistics.JudgeAxis`, e.g.
    ``benchmark_judge_axis(bench_dir, {judge: {task: file}}, exclude_sources={"interleaved": ["isgbench"]})``.
    ``exclude_sources`` applies to the run's own preference set.

    Returns the written paths and the headline numbers:
    ``{"html", "markdown", "metrics", "correlations", "accuracies", "leaderboard", "power", "json",
    "figures": {name: [png, svg]}, "pooled": {...}, "warnings": int}``.
    """
    run_dir = Path(run_dir)
    b = compute(run_dir, bootstrap=bootstrap, seed=seed, level=level, accuracies=accuracies,
                exclude_sources=exclude_sources, power=power, power_width=power_width)
    written: dict[str, Any] = {}
    tables = {"metrics": ("metrics.csv", b.metrics_with_acc), "correlations": ("correlations_ci.csv", b.correlations),
              "accuracies": ("accuracies.csv", b.accuracies), "leaderboard": ("leaderboard.csv", b.leaderboards)}
    if b.power:
        tables["power"] = ("power.csv", b.power["grid"])
    for key, (name, df) in tables.items():
        path = run_dir / name
        tmp = path.with_name(name + ".tmp")
        df.to_csv(tmp, index=False, float_format="%.6g")
        tmp.replace(path)
        written[key] = path
    jpath = run_dir / "report.json"
    tmp = jpath.with_name("report.json.tmp")
    tmp.write_text(json.dumps(b.json, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(jpath)
    written["json"] = jpath
    # the root figure that report.md shows, now with its intervals
    fig = b.figures.get("correlation")
    if fig:
        root_png = run_dir / "correlation.png"
        tmp = root_png.with_name("correlation.png.tmp")
        tmp.write_bytes(Path(fig[0]).read_bytes())
        tmp.replace(root_png)
    extra = ("\nFull report with figures, per-judge intervals, the reranker leaderboard and the study-size "
             "simulation: `report.html`; every number: `metrics.csv`, `correlations_ci.csv`, `accuracies.csv`, "
             "`leaderboard.csv`, `report.json`.\n")
    written["markdown"] = append_statistics(run_dir, b.correlations, b.metrics, bootstrap, seed, extra)
    written["html"] = write_html_report(run_dir, b, sample_prompts=sample_prompts)
    written["figures"] = b.figures
    pooled = b.correlations[b.correlations.scope == "all"]
    if len(pooled):
        r = pooled.iloc[0]
        written["pooled"] = {k: _clean(r[k]) for k in ("pearson_r", "pearson_lo", "pearson_hi", "pearson_p_perm",
                                                         "spearman_rho", "spearman_lo", "spearman_hi", "n_judges")}
    written["warnings"] = int(b.correlations["flag"].sum()) if len(b.correlations) else 0
    return written


def scores_figure(scores_csv: Path, accuracies: str | Path = "published", out: Path | None = None,
                  bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """``bon figure --scores CSV [--accuracies published|FILE]``: the paper-style figure for a user's
    Best-of-N scores (CSV format in the module doc) against published or supplied judge accuracies.

    Writes ``<out>.png``/``.svg`` (default: beside the CSV, ``<stem>_figure``) and ``<out>_correlations.csv``;
    returns their paths, the judges matched and those left out (no accuracy for them).
    """
    scores_csv = Path(scores_csv)
    try:
        scores = pd.read_csv(scores_csv, comment="#")
    except FileNotFoundError:
        raise BonError(f"{scores_csv}: file not found") from None
    need = {"task", "generator", "judge", "bon_score"}
    if need - set(scores.columns):
        raise BonError(f"{scores_csv}: lacks column(s) {', '.join(sorted(need - set(scores.columns)))} "
                       "(expected task, generator, judge, bon_score[, random_score, oracle_score])")
    from analysis.mmrb2 import BON_TO_SCORER, SCORER_TO_BON

    scores = scores.copy()
    scores["task"] = [SCORER_TO_BON.get(str(t), str(t)) for t in scores["task"]]
    bad = sorted(set(scores["task"]) - set(BON_TO_SCORER))
    if bad:
        raise BonError(f"{scores_csv}: unknown task(s) {', '.join(bad)} (use t2i, edit, interleaved, reasoning)")
    axis = accuracy_axis(accuracies)
    matched: dict[str, str] = {}
    left_out: list[str] = []
    keep = []
    for i, r in scores.iterrows():
        known = axis.table[axis.table.task == r["task"]]["judge"]
        hit = match_judges([r["judge"]], known)
        if hit:
            matched[str(r["judge"])] = hit[r["judge"]]
            keep.append(i)
        else:
            left_out.append(f"{r['judge']} ({r['task']})")
    scores = scores.loc[keep].assign(judge=lambda d: [matched[str(j)] for j in d["judge"]])
    if scores.empty:
        raise BonError(f"{scores_csv}: none of the judges has an accuracy in {axis.label}")
    for c in ("random_score", "oracle_score"):
        if c not in scores.columns:
            scores[c] = np.nan
    correlations = correlation_intervals(settings_from_scores(scores), axis, bootstrap=bootstrap, seed=seed, level=level)
    acc = axis.with_intervals(bootstrap, seed, level)
    results = scores.merge(acc[["judge", "task", "accuracy", "acc_lo", "acc_hi"]].rename(
        columns={"accuracy": "mmrb2_accuracy"}), on=["judge", "task"], how="left")
    if {"n_prompts", "bon_sd"} <= set(results.columns):  # normal-theory error bars for each BoN mean
        se = pd.to_numeric(results["bon_sd"], errors="coerce") / np.sqrt(pd.to_numeric(results["n_prompts"], errors="coerce"))
        z = float(norm.ppf(0.5 + level / 2))
        results = results.assign(bon_lo=results["bon_score"] - z * se, bon_hi=results["bon_score"] + z * se)
    base = Path(out) if out else scores_csv.with_name(scores_csv.stem + "_figure")
    base = base.with_suffix("") if base.suffix in (".png", ".svg") else base
    y_noise = "prompts (normal, from bon_sd / sqrt(n_prompts))" if {"n_prompts", "bon_sd"} <= set(scores.columns) else \
        "none (add n_prompts and bon_sd columns)"
    note = (f"Accuracies: {axis.label}. Intervals: 95% bias-corrected bootstrap over judges and MMRB2 pairs; "
            f"BoN noise: {y_noise}; "
            f"{bootstrap} replicates, seed {seed}.")
    extra = [c for c in ("acc_lo", "acc_hi", "bon_lo", "bon_hi") if c in results.columns]
    png = correlation_figure(results[[*PLOT_COLUMNS, *extra]], None, base.with_suffix(".png"),
                             intervals=correlations, formats=("png", "svg"), note=note,
                             x_label="MMRB2 accuracy of the judge (%, published)" if accuracies == "published" else None)
    corr_path = base.with_name(base.name + "_correlations.csv")
    correlations.to_csv(corr_path, index=False, float_format="%.6g")
    return {"png": png, "svg": png.with_suffix(".svg"), "correlations": corr_path, "matched": matched,
            "left_out": left_out, "table": correlations}
