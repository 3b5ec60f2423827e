"""The report's other figures: Best-of-n curves, the reranker choice, power, and two runs side by side.

All are drawn on the Agg canvas (no pyplot state), saved as PNG and SVG by
:func:`analysis.plots.save_figure`, and readable in greyscale: series differ by marker and dash
pattern as well as by colour.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from analysis.bon_metrics import task_order
from analysis.plots import MARKERS, PALETTE, TASK_TITLES, place_labels, save_figure, tight_layout

LINESTYLES = ("-", (0, (6, 2)), (0, (1.5, 1.5)), (0, (6, 2, 1.5, 2)), (0, (10, 3)), (0, (3, 1, 1, 1, 1, 1)),
              (0, (2, 3)), (0, (8, 2, 2, 2, 2, 2)))
GREY = "0.45"


def _style(i: int) -> dict[str, Any]:
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)],
            "ls": LINESTYLES[(i // len(PALETTE) + i) % len(LINESTYLES)]}


def _new(ncols: int, nrows: int, w: float, h: float) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(w * ncols, h * nrows + 0.8), dpi=150)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def _log_x(ax: Any, ticks: Sequence[float], base: int = 10) -> None:
    """A log x axis labelled at ``ticks``, in the figures' small type with a light grid."""
    ax.set_xscale("log", base=base)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(int(n)) for n in ticks])
    ax.minorticks_off()
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.25, lw=0.5)


# --- Best-of-n curves ----------------------------------------------------------------------------


def bon_curves_figure(curves: pd.DataFrame | Sequence[Mapping[str, Any]], path: Path,
                      formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Best-of-n score against n, one line per judge; a panel per task (rows) and generator (columns).

    ``curves``: rows of :func:`bon.stages.curves.bon_curve` with a ``judge`` column added (task,
    generator, n, bon_score, random_score, oracle_score). Random and oracle levels over the same subsets
    are drawn in grey (dashed, dotted).
    """
    df = pd.DataFrame(list(curves) if not isinstance(curves, pd.DataFrame) else curves)
    tasks = task_order(df["task"])
    gens = list(dict.fromkeys(df["generator"]))
    judges = list(dict.fromkeys(df["judge"]))
    styles = {j: _style(i) for i, j in enumerate(judges)}
    fig, axes = _new(len(gens), len(tasks), 4.3, 3.0)
    for r, task in enumerate(tasks):
        for c, gen in enumerate(gens):
            ax = axes[r, c]
            sub = df[(df.task == task) & (df.generator == gen)].sort_values("n")
            ax.set_title(f"{TASK_TITLES.get(task, task)} / {gen}", fontsize=10, loc="left")
            if sub.empty:
                ax.set_visible(False)
                continue
            base = sub.groupby("n")[["random_score", "oracle_score"]].mean()
            ax.plot(base.index, base["random_score"], color=GREY, ls="--", lw=1.1, zorder=1)
            ax.plot(base.index, base["oracle_score"], color=GREY, ls=":", lw=1.5, zorder=1)
            for judge in judges:
                mine = sub[sub.judge == judge]
                if mine.empty:
                    continue
                st = styles[judge]
                ax.plot(mine["n"], mine["bon_score"], color=st["color"], ls=st["ls"], marker=st["marker"],
                        markersize=4.5, markeredgecolor="0.15", markeredgewidth=0.4, lw=1.3, zorder=3)
            _log_x(ax, sorted(set(sub["n"])), base=2)
            if r == len(tasks) - 1:
                ax.set_xlabel("candidates per prompt (n)", fontsize=9)
            if c == 0:
                ax.set_ylabel("mean downstream score", fontsize=9)
    handles = [Line2D([], [], color=styles[j]["color"], ls=styles[j]["ls"], marker=styles[j]["marker"],
                      markeredgecolor="0.15", markersize=5, label=j) for j in judges]
    handles += [Line2D([], [], color=GREY, ls="--", label="random pick"), Line2D([], [], color=GREY, ls=":", label="oracle")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), frameon=False, fontsize=8.5)
    fig.suptitle("Best-of-n: downstream score of the pick as n grows", fontsize=12)
    rows_legend = math.ceil(len(handles) / 6)
    height = fig.get_figheight()
    tight_layout(fig, (0, (0.15 + 0.2 * rows_legend) / height, 1, 1 - 0.45 / height))
    return save_figure(fig, Path(path), formats)


# --- reranker choice: gain against cost ----------------------------------------------------------


COSTS = {"usd_per_prompt": "judge cost per prompt (US$)", "seconds_per_prompt": "judge time per prompt (s)",
         "calls_per_prompt": "judge calls per prompt"}


def pick_cost(table: pd.DataFrame, cost: str = "auto") -> str:
    """The cost column to plot: money when any judge costs money, else time when it varies, else calls."""
    if cost != "auto":
        return cost if cost in COSTS else f"{cost}_per_prompt"
    usd = pd.to_numeric(table.get("usd_per_prompt"), errors="coerce") if "usd_per_prompt" in table else None
    if usd is not None and (usd > 0).any():
        return "usd_per_prompt"
    sec = pd.to_numeric(table.get("seconds_per_prompt"), errors="coerce") if "seconds_per_prompt" in table else None
    if sec is not None and sec.notna().any() and sec.max() > 1.01 * sec.min():
        return "seconds_per_prompt"
    return "calls_per_prompt"


def point_labels(xs: Sequence[float], ys: Sequence[float], judges: Sequence[Any],
                 left_out: Sequence[Any] | None = None) -> dict[int, str]:
    """One label per place (index of its first point -> text): judges at the same cost and gain share one
    (``a, b``) instead of printing over each other; a judge the leakage policy leaves out carries a dagger."""
    out: dict[tuple[float, float], tuple[int, list[str]]] = {}
    flags = list(left_out) if left_out is not None else [""] * len(judges)
    for i, (x, y, judge, flag) in enumerate(zip(xs, ys, judges, flags)):
        if not (np.isfinite(x) and np.isfinite(y)):
            continue
        name = f"{judge}†" if isinstance(flag, str) and flag else str(judge)
        out.setdefault((round(float(x), 6), round(float(y), 3)), (i, []))[1].append(name)
    return {i: ", ".join(names) for i, names in out.values()}


def reranker_figure(table: pd.DataFrame, path: Path, cost: str = "auto",
                    formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Best-of-N gain (with its interval) against cost per prompt, a panel per task, a marker per generator.

    ``table``: :func:`analysis.leaderboard.all_leaderboards` rows (gain, gain_lo, gain_hi and the cost
    columns). The step line is each generator's cost-gain frontier among the judges one may choose (kept by
    the leakage policy, with information): no judge to its lower right is worth choosing.
    """
    col = pick_cost(table, cost)
    tasks = task_order(table["task"])
    gens = list(dict.fromkeys(table["generator"]))
    ncols = min(2, len(tasks))
    nrows = math.ceil(len(tasks) / ncols)
    fig, axes = _new(ncols, nrows, 6.2, 4.2)
    flat = axes.ravel()
    xs_all = pd.to_numeric(table[col], errors="coerce")
    log = bool(xs_all.gt(0).all() and xs_all.max() > 20 * xs_all.min())
    labels: dict[Any, list[tuple[float, float, str, str]]] = {}
    for ax, task in zip(flat, tasks):
        ax.set_title(TASK_TITLES.get(task, task), fontsize=11, loc="left", fontweight="bold")
        ax.axhline(0, color="0.2", lw=0.8)
        for g, gen in enumerate(gens):
            sub = table[(table.task == task) & (table.generator == gen)]
            if sub.empty:
                continue
            st = _style(g)
            x = pd.to_numeric(sub[col], errors="coerce").to_numpy(float)
            # judges with the same cost would hide each other: spread them a little sideways
            spread = _dodge(x, log)
            y = sub["gain"].to_numpy(float)
            err = np.vstack([np.clip(y - sub["gain_lo"].to_numpy(float), 0, None),
                             np.clip(sub["gain_hi"].to_numpy(float) - y, 0, None)])
            ax.errorbar(spread, y, yerr=np.nan_to_num(err), fmt="none", ecolor=st["color"], alpha=0.5, lw=0.8)
            ax.scatter(spread, y, color=st["color"], marker=st["marker"], edgecolor="0.15", linewidth=0.5, s=34,
                       zorder=3, label=gen)
            front = _frontier(np.where(_choosable(sub), x, np.nan), y)  # never through a left-out judge
            if len(front) > 1:
                ax.step(x[front], y[front], where="post", color=st["color"], lw=0.9, ls=st["ls"], alpha=0.7)
            labels.setdefault(ax, []).extend((spread[i], y[i], names, st["color"]) for i, names in
                                             point_labels(x, y, sub["judge"], sub.get("left_out")).items())
        if log:
            ax.set_xscale("log")
        ax.set_xlabel(COSTS.get(col, col), fontsize=9)
        ax.set_ylabel("BoN gain over a random pick", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.25, lw=0.5)
        ax.legend(fontsize=8, loc="lower right", framealpha=0.85)
    for ax in flat[len(tasks):]:
        ax.set_visible(False)
    flagged = "left_out" in table and table["left_out"].fillna("").astype(str).ne("").any()
    fig.suptitle("Choosing a reranker: gain (95% interval over prompts) against cost"
                 + ("\n† left out of the correlation by the leakage policy (shares the verifier's grader)" if flagged else ""),
                 fontsize=12)
    tight_layout(fig, (0, 0.0, 1, 0.96))
    renderer = fig.canvas.get_renderer()
    for ax, specs in labels.items():  # once the layout is final: labels dodge each other, the markers and the legend
        place_labels(ax, specs, renderer)
    return save_figure(fig, Path(path), formats)


def _choosable(rows: pd.DataFrame) -> np.ndarray:
    """The judges a frontier may run through: kept by the leakage policy and with information."""
    ok = np.ones(len(rows), bool)
    for column in ("left_out", "no_information"):
        if column in rows:
            ok &= rows[column].fillna("").astype(str).eq("").to_numpy()
    return ok


def _dodge(x: np.ndarray, log: bool) -> np.ndarray:
    out = x.astype(float).copy()
    for v in np.unique(x[np.isfinite(x)]):
        idx = np.flatnonzero(x == v)
        if len(idx) > 1:
            offsets = np.linspace(-1, 1, len(idx)) * (0.06 if log else 0.04 * max(abs(v), 1e-9))
            out[idx] = v * (10 ** offsets) if log else v + offsets
    return out


def _frontier(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of points no other point beats on both cost (lower) and gain (higher), by cost."""
    ok = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    order = ok[np.lexsort((-y[ok], x[ok]))]
    front, best = [], -np.inf
    for i in order:
        if y[i] > best:
            front.append(i)
            best = y[i]
    return np.array(front, dtype=int)


# --- power ----------------------------------------------------------------------------------------


def power_figure(grid: pd.DataFrame, path: Path, width: float | None = None,
                 formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Median 95% CI width of r against prompts (left) and the share of studies whose interval excludes
    zero (right), one line per number of judges."""
    fig, axes = _new(2, 1, 5.6, 3.9)
    for i, (j, sub) in enumerate(grid.groupby("judges")):
        sub = sub.sort_values("prompts")
        st = _style(i)
        kw = dict(color=st["color"], ls=st["ls"], marker=st["marker"], markeredgecolor="0.15", markersize=5,
                  lw=1.3, label=f"{j} judges")
        axes[0, 0].plot(sub["prompts"], sub["median_width"], **kw)
        axes[0, 0].fill_between(sub["prompts"], sub["width_q10"], sub["width_q90"], color=st["color"], alpha=0.06, lw=0)
        axes[0, 1].plot(sub["prompts"], sub["p_excludes_zero"], **kw)
    if width is not None:
        axes[0, 0].axhline(width, color="0.2", ls="--", lw=1)
        axes[0, 0].annotate(f"target width {width:g}", (0.01, width), xycoords=("axes fraction", "data"),
                            xytext=(2, -3), textcoords="offset points", ha="left", va="top", fontsize=8,
                            bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.8))
    for ax, ylabel in zip(axes[0], ("median width of the 95% CI for r", "share of studies whose CI excludes 0")):
        _log_x(ax, sorted(set(grid["prompts"])))
        ax.set_xlabel("prompts per setting", fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
    axes[0, 1].set_ylim(-0.02, 1.02)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"How many judges and prompts? (simulated from the pilot; {int(grid['pairs'].iloc[0])} MMRB2 pairs "
                 "per task)", fontsize=11)
    tight_layout(fig, (0, 0, 1, 0.94))
    return save_figure(fig, Path(path), formats)


# --- two runs side by side ------------------------------------------------------------------------


def forest_figure(tables: Mapping[str, pd.DataFrame], path: Path, stat: str = "pearson",
                  formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Each setting's coefficient with its interval, one row per setting, one marker per run."""
    point = {"pearson": "pearson_r", "spearman": "spearman_rho", "kendall": "kendall_tau"}[stat]
    keys: list[tuple[str, str]] = []
    for t in tables.values():
        keys += [(a, b) for a, b in zip(t["task"], t["generator"])]
    keys = list(dict.fromkeys(keys))
    order = {t: i for i, t in enumerate(task_order(k[0] for k in keys if k[0] != "(all)"))}
    keys.sort(key=lambda k: (order.get(k[0], 99), k[1] == "(pooled)", k[1]))
    fig = Figure(figsize=(7.5, 0.42 * len(keys) * max(1, len(tables)) ** 0.5 + 1.6), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    n = len(tables)
    for i, (label, t) in enumerate(tables.items()):
        st = _style(i)
        off = (i - (n - 1) / 2) * 0.22
        for k, (task, gen) in enumerate(keys):
            hit = t[(t.task == task) & (t.generator == gen)]
            if hit.empty:
                continue
            r = hit.iloc[0]
            y = len(keys) - 1 - k + off
            ax.plot([r[f"{stat}_lo"], r[f"{stat}_hi"]], [y, y], color=st["color"], lw=1.6, ls=st["ls"])
            ax.plot([r[point]], [y], marker=st["marker"], color=st["color"], markeredgecolor="0.15", markersize=6,
                    ls="none", label=label if k == 0 or label not in ax.get_legend_handles_labels()[1] else None)
    ax.axvline(0, color="0.2", lw=0.8)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([f"{TASK_TITLES.get(t, t)} / {g}" for t, g in reversed(keys)], fontsize=8)
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel({"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ"}[stat]
                  + " with 95% bootstrap interval", fontsize=9)
    ax.grid(axis="x", alpha=0.25, lw=0.5)
    ax.legend(fontsize=8, loc="lower left")
    fig.suptitle("Accuracy vs Best-of-N correlation, side by side", fontsize=11)
    tight_layout(fig, (0, 0, 1, 0.95))
    return save_figure(fig, Path(path), formats)
