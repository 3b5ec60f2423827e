"""``bon figure``: the paper-style correlation figure for anybody's Best-of-N numbers.

The scores are a CSV with one row per (task, generator, judge), for instance a run folder's own
``results.csv``::

    task,generator,judge,bon_score[,random_score,oracle_score][,n_prompts,bon_sd]
    t2i,flux-dev,GPT-5,0.712,0.640,0.801,200,0.21

``task`` is t2i, edit, interleaved or reasoning (or the scorer names image, ...); ``judge`` must match a
judge of the accuracy table, ignoring case and punctuation (``gpt5`` = ``GPT-5``); ``bon_score`` is the
mean downstream score of the judge's picks; ``random_score``/``oracle_score`` draw the baselines;
``n_prompts`` with ``bon_sd`` (SD of the per-prompt pick scores) let the intervals include prompt noise.
The accuracies are the MMRB2 paper's table (``published``) or a CSV with judge, task, accuracy[, n_pairs]
columns, such as a run folder's ``accuracies.csv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from analysis.bundle import MIN_CORRELATION_JUDGES
from analysis.plots import PLOT_COLUMNS, correlation_figure
from analysis.statistics import accuracy_axis, correlation_intervals, match_judges, settings_from_scores
from bon.errors import BonError
from bon.run import read_json
from bon.runfolder import RunFolder, write_text

SCORE_COLUMNS = ("task", "generator", "judge", "bon_score")


def scores_figure(scores_csv: Path, accuracies: str | Path = "published", out: Path | None = None,
                  bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """``bon figure --scores CSV [--accuracies published|FILE] [--out DIR]``: the paper-style figure for a
    user's Best-of-N scores (CSV format in the module doc) against published or supplied judge accuracies.

    Writes ``DIR/figures/correlation.png`` and ``.svg`` and ``DIR/correlations.csv``, named as in a run folder
    (default DIR: ``<stem>_figure`` beside the CSV); returns their paths, the judges matched and those left out (no accuracy for them).
    """
    scores_csv = Path(scores_csv)
    try:
        scores = pd.read_csv(scores_csv, comment="#")
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        why = getattr(exc, "strerror", None) or " ".join(str(exc).split())
        raise BonError(f"{scores_csv}: cannot read the scores ({why})") from None
    missing = [c for c in SCORE_COLUMNS if c not in scores.columns]
    if missing:
        raise BonError(f"{scores_csv}: lacks column(s) {', '.join(missing)} "
                       "(expected task, generator, judge, bon_score[, random_score, oracle_score])")
    from bon.tasks import TASK_NAMES, bon_task, is_task

    # a run folder's results.csv carries its own accuracies and intervals: the supplied ones replace them
    scores = scores.drop(columns=[c for c in ("mmrb2_accuracy", "acc_lo", "acc_hi") if c in scores.columns])
    scores["task"] = [bon_task(t) if is_task(str(t)) else str(t) for t in scores["task"]]
    bad = sorted(set(scores["task"]) - set(TASK_NAMES))
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
    most = int(correlations["n_judges"].max()) if len(correlations) else 0
    if most < MIN_CORRELATION_JUDGES:
        raise BonError(f"{scores_csv}: at most {most} judge(s) per setting have an accuracy in {axis.label}; "
                       f"a correlation needs {MIN_CORRELATION_JUDGES}")
    acc = axis.with_intervals(bootstrap, seed, level)
    results = scores.merge(acc[["judge", "task", "accuracy", "acc_lo", "acc_hi"]].rename(
        columns={"accuracy": "mmrb2_accuracy"}), on=["judge", "task"], how="left")
    if {"n_prompts", "bon_sd"} <= set(results.columns):  # normal-theory error bars for each BoN mean
        se = pd.to_numeric(results["bon_sd"], errors="coerce") / np.sqrt(pd.to_numeric(results["n_prompts"], errors="coerce"))
        z = float(norm.ppf(0.5 + level / 2))
        results = results.assign(bon_lo=results["bon_score"] - z * se, bon_hi=results["bon_score"] + z * se)
    y_noise = "prompts (normal, from bon_sd / sqrt(n_prompts))" if {"n_prompts", "bon_sd"} <= set(scores.columns) else \
        "none (add n_prompts and bon_sd columns)"
    note = (f"Accuracies: {axis.label}. Intervals: 95% bias-corrected bootstrap over judges and MMRB2 pairs; "
            f"BoN noise: {y_noise}; "
            f"{bootstrap} replicates, seed {seed}.")
    folder = RunFolder(Path(out) if out else scores_csv.with_name(scores_csv.stem + "_figure"))
    result = draw(results, correlations, folder, note,
                  x_label="MMRB2 accuracy of the judge (%, published)" if accuracies == "published" else None)
    return {**result, "matched": matched, "left_out": left_out}


def draw(results: pd.DataFrame, correlations: pd.DataFrame, folder: RunFolder, note: str, title: str | None = None,
         x_label: str | None = None) -> dict[str, Any]:
    """The figure (``figures/correlation.png`` and ``.svg``) and ``correlations.csv`` in ``folder``."""
    extra = [c for c in ("acc_lo", "acc_hi", "bon_lo", "bon_hi") if c in results.columns]
    png = correlation_figure(results[[*PLOT_COLUMNS, *extra]], folder.figure, intervals=correlations,
                             formats=("png", "svg"), note=note, title=title, x_label=x_label)
    write_text(folder.correlations, correlations.to_csv(index=False, float_format="%.6g"))
    return {"png": png, "svg": png.with_suffix(".svg"), "correlations": folder.correlations, "table": correlations}


def runs_figure(runs: list[Path], out: Path | None = None) -> dict[str, Any]:
    """``bon figure --run A --run B ...``: the paper's figure (a panel per task) and its table from finished
    runs, typically the four one-task paper studies. Each run brings what its own report computed (``bon run``
    or ``bon report`` wrote it): the judges' points and error bars (``metrics.csv``), the correlations with
    their intervals (``correlations.csv``: the report's bootstrap over judges, prompts and MMRB2 pairs, with
    its seed, so the figure and the report never disagree) and the axis subtitle (``report.json``'s study).
    The judges its leakage policy leaves out are left out here too. Writes ``scores.csv`` and
    ``accuracies.csv`` (the runs stacked), the figure, ``correlations.csv`` (the runs' setting rows) and
    ``table.md`` under ``out`` (default: ``paper_figure`` beside the first run)."""
    from analysis import leakage
    from analysis.predictors import figure_title
    from analysis.report import correlation_note
    from bon.tasks import TASK_NAMES

    if not runs:
        raise BonError("--run: give the finished runs to combine (the four paper studies: t2i, edit, interleaved, reasoning)")
    points, accuracies, correlations, reports, left_out = [], [], [], [], {}
    for run in map(Path, runs):
        folder = RunFolder(run, existing=True)
        for needed in (folder.metrics, folder.accuracies, folder.correlations, folder.report_json):
            if not needed.exists():
                raise BonError(f"{needed}: missing; is {run} a finished study? (`bon run` or `bon report` writes it)")
        table = pd.read_csv(folder.metrics)
        excluded = leakage.run_exclusions(run, list(dict.fromkeys(table["judge"])))
        left_out.update({f"{j} ({run.name})": why for j, why in excluded.items()})
        points.append(table[~table["judge"].isin(list(excluded))])
        accuracies.append(pd.read_csv(folder.accuracies)[["judge", "task", "accuracy", "n_pairs"]])
        corr = pd.read_csv(folder.correlations)
        correlations.append(corr[corr["scope"] == "setting"])
        report = read_json(folder.report_json, "report ")
        reports.append(report if isinstance(report, dict) else {})
    folder = RunFolder(Path(out) if out else Path(runs[0]).resolve().parent / "paper_figure")
    stacked = pd.concat(points, ignore_index=True)
    write_text(folder.root / "scores.csv", stacked.to_csv(index=False, float_format="%.6g"))
    write_text(folder.root / "accuracies.csv", pd.concat(accuracies, ignore_index=True).drop_duplicates(
        ["judge", "task"]).to_csv(index=False, float_format="%.6g"))
    titles = {figure_title(r.get("study") or {}) for r in reports}
    note = correlation_note(_one_or_all(r.get("bootstrap") for r in reports), _one_or_all(r.get("seed") for r in reports),
                            list(dict.fromkeys(j.partition(" (")[0] for j in left_out)))
    table = pd.concat(correlations, ignore_index=True)
    result = draw(stacked, table, folder, note, title=titles.pop() if len(titles) == 1 else None)
    order = {t: i for i, t in enumerate(TASK_NAMES)}
    rows = table.assign(_o=[order.get(t, 9) for t in table["task"]]).sort_values(["_o", "generator"])
    lines = ["| task | generator | judges | Pearson r [95% CI] | Spearman ρ |", "|---|---|---:|---|---:|"]
    for r in rows.itertuples():
        lines.append(f"| {r.task} | {r.generator} | {r.n_judges} | {_signed(r.pearson_r)} [{_signed(r.pearson_lo)}, "
                     f"{_signed(r.pearson_hi)}] | {_signed(r.spearman_rho)} |")
    if left_out:
        lines += ["", "Left out (leakage): " + "; ".join(f"{j}: {why}" for j, why in left_out.items())]
    result["markdown"] = folder.root / "table.md"
    write_text(result["markdown"], "\n".join(lines) + "\n")
    result["tasks"] = sorted(set(stacked["task"]), key=lambda t: order.get(t, 9))
    result["left_out"] = [f"{r.judge} ({r.task})" for r in stacked.itertuples()  # no accuracy for them
                          if not np.isfinite(pd.to_numeric(r.mmrb2_accuracy, errors="coerce"))]
    return result


def _one_or_all(values: Any) -> str:
    """``0`` when every run used the same value, else ``0, 3`` (the runs' values, in order)."""
    return ", ".join(dict.fromkeys(str(v) for v in values))


def _signed(value: Any) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:+.2f}"
