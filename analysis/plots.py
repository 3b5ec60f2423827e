"""The headline figure: judge accuracy on MMRB2 against the downstream score of its Best-of-N picks.

Drawn like the MMRB2 paper's Figure 4, one panel per task: a point per judge, a colour per base
generator, a least-squares line per generator, and that generator's random-pick (dashed) and oracle
(dotted) levels, so the reader sees at a glance how much of the possible gain each judge recovers.
Uses the Agg canvas directly (no pyplot), so it works headless and leaves global state alone.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from analysis.correlation import TASK_ORDER, correlate
from bon.errors import BonError

TASK_TITLES = {"t2i": "Text-to-image", "edit": "Image editing", "interleaved": "Interleaved", "reasoning": "Reasoning"}
PLOT_COLUMNS = ("task", "generator", "judge", "mmrb2_accuracy", "bon_score", "random_score", "oracle_score")
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")


def correlation_figure(results: pd.DataFrame, correlations: pd.DataFrame | None, path: Path) -> Path:
    """Draw the accuracy-vs-BoN figure to ``path`` (PNG, 150 dpi); tasks without rows get an empty panel."""
    missing = [c for c in PLOT_COLUMNS if c not in results.columns]
    if missing:
        raise BonError(f"results table lacks column(s) {', '.join(missing)} needed for the figure")
    tasks = list(TASK_ORDER) + sorted(set(results["task"]) - set(TASK_ORDER))
    generators = list(dict.fromkeys(results["generator"]))
    style = {g: (COLOURS[i % len(COLOURS)], MARKERS[i % len(MARKERS)]) for i, g in enumerate(generators)}

    ncols = 2
    nrows = math.ceil(len(tasks) / ncols)
    fig = Figure(figsize=(6.4 * ncols, 4.9 * nrows + 0.5), dpi=150)
    canvas = FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    labels_per_axis = []
    for ax, task in zip(axes, tasks):
        sub = results[results["task"] == task]
        labels_per_axis.append((ax, _panel(ax, task, sub, correlations, style)))
    for ax in axes[len(tasks):]:
        ax.set_visible(False)

    fig.legend(handles=[Line2D([], [], color="0.35", lw=1.4, label="least-squares fit"),
                        Line2D([], [], color="0.35", lw=1.2, ls="--", label="random pick (mean over N)"),
                        Line2D([], [], color="0.35", lw=1.4, ls=":", label="oracle pick (best of N)")],
               loc="lower center", ncol=3, frameon=False, fontsize=9)
    fig.suptitle("Does MMRB2 accuracy predict Best-of-N gains?", fontsize=13)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    renderer = canvas.get_renderer()
    for ax, labels in labels_per_axis:
        _place_labels(ax, labels, renderer)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=150)
    tmp.replace(path)
    return path


def _panel(ax: Any, task: str, sub: pd.DataFrame, correlations: pd.DataFrame | None, style: dict) -> list:
    """One task's scatter, fits, baselines and legend; returns ``(x, y, judge, colour)`` label specs,
    placed later once the layout is final."""
    ax.set_title(TASK_TITLES.get(task, task), fontsize=12)
    ax.set_xlabel("MMRB2 accuracy of the judge (%)", fontsize=9)
    ax.set_ylabel("Mean downstream score of BoN picks", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.25, lw=0.5)
    sub = sub[np.isfinite(sub["mmrb2_accuracy"].astype(float)) & np.isfinite(sub["bon_score"].astype(float))]
    if sub.empty:
        ax.text(0.5, 0.5, "no data for this task", transform=ax.transAxes, ha="center", va="center",
                fontsize=10, color="0.45")
        ax.set_xticks([])
        ax.set_yticks([])
        return []

    xs_all = sub["mmrb2_accuracy"].to_numpy(float)
    x_lo, x_hi = xs_all.min(), xs_all.max()
    x_pad = max((x_hi - x_lo) * 0.12, 1.5)
    ys_all: list[float] = list(sub["bon_score"].astype(float))
    texts: list[tuple[float, float, str, str]] = []
    for gen, g in sub.groupby("generator", sort=False):
        colour, marker = style[gen]
        x, y = g["mmrb2_accuracy"].to_numpy(float), g["bon_score"].to_numpy(float)
        ax.scatter(x, y, color=colour, marker=marker, s=36, zorder=3, edgecolor="white", linewidth=0.6,
                   label=_legend_label(task, gen, x, y, correlations))
        if np.ptp(x) > 0 and len(x) >= 2:
            slope, icpt = np.polyfit(x, y, 1)
            xx = np.array([x.min(), x.max()])
            ax.plot(xx, slope * xx + icpt, color=colour, lw=1.4, alpha=0.85, zorder=2)
        for col, ls, lw in (("random_score", "--", 1.2), ("oracle_score", ":", 1.5)):
            level = pd.to_numeric(g[col], errors="coerce").mean()
            if np.isfinite(level):
                ax.axhline(level, color=colour, ls=ls, lw=lw, alpha=0.75, zorder=1)
                ys_all.append(float(level))
        texts.extend((xi, yi, str(name), colour) for xi, yi, name in zip(x, y, g["judge"]))
    y_lo, y_hi = min(ys_all), max(ys_all)
    y_pad = max((y_hi - y_lo) * 0.12, 1e-3 if y_hi == y_lo == 0 else abs(y_hi) * 0.02)
    ax.set_xlim(x_lo - x_pad, x_hi + x_pad)
    ax.set_ylim(y_lo - y_pad, y_hi + y_pad * 1.8)
    ax.legend(loc="best", fontsize=7.5, framealpha=0.85, handletextpad=0.4, borderpad=0.4)
    return texts


def _legend_label(task: str, gen: str, x: np.ndarray, y: np.ndarray, correlations: pd.DataFrame | None) -> str:
    """``generator  r=…  ρ=…  (n judges)``, from the correlation table when it has the row."""
    row = None
    if correlations is not None and not correlations.empty and {"task", "generator"} <= set(correlations.columns):
        hit = correlations[(correlations["task"] == task) & (correlations["generator"] == gen)]
        if len(hit) == 1:
            row = hit.iloc[0]
    c = dict(row) if row is not None else correlate(x, y)
    n = int(c.get("n_judges", c.get("n", len(x))))
    return f"{gen}  r={_fmt(c['pearson_r'])}  ρ={_fmt(c['spearman_rho'])}  (n={n})"


def _fmt(v: Any) -> str:
    return "n/a" if v is None or not np.isfinite(float(v)) else f"{float(v):+.2f}"


# Label positions tried in turn, as (dx, dy) in points from the point; the first free one wins.
_NEAR = [(5, 2), (5, -2), (-5, 2), (-5, -2)]
_FAR = [(sx * 6, sy * (2 + 9 * k)) for k in range(1, 7) for sy in (1, -1) for sx in (1, -1)]


def _place_labels(ax: Any, labels: list[tuple[float, float, str, str]], renderer: Any) -> None:
    """Greedy label placement: each judge name takes the nearest offset that overlaps no placed
    label, no marker and stays inside the axes; far placements get a thin leader line."""
    if not labels:
        return
    to_pt = ax.figure.dpi / 72.0
    frame = ax.get_window_extent(renderer)
    anchors = ax.transData.transform([(x, y) for x, y, _, _ in labels])
    r = 4.5 * to_pt  # marker half-size in pixels
    obstacles = [Bbox.from_extents(px - r, py - r, px + r, py + r) for px, py in anchors]
    legend = ax.get_legend()
    if legend is not None:  # pin the legend where it is, so the labels placed around it don't move it
        box = legend.get_window_extent(renderer)
        corner = tuple(ax.transAxes.inverted().transform((box.x0, box.y0)))
        legend.set_loc(corner) if hasattr(legend, "set_loc") else setattr(legend, "_loc", corner)
        obstacles.append(box)
    order = sorted(range(len(labels)), key=lambda i: (-anchors[i][1], anchors[i][0]))
    for i in order:
        x, y, name, colour = labels[i]
        t = Text(0, 0, name, fontsize=7)
        t.set_figure(ax.figure)
        best = None
        for n, (dx, dy) in enumerate(_NEAR + _FAR):
            ha, va = ("left" if dx > 0 else "right"), ("bottom" if dy > 0 else "top")
            t.set_position((anchors[i][0] + dx * to_pt, anchors[i][1] + dy * to_pt))
            t.set_ha(ha)
            t.set_va(va)
            box = t.get_window_extent(renderer)
            cost = sum(_overlap(box, o) for o in obstacles) + 3 * (box.width * box.height - _overlap(box, frame))
            if best is None or cost < best[0] - 1e-9:
                best = (cost, dx, dy, ha, va, box)
            if cost == 0:
                break
        _, dx, dy, ha, va, box = best
        far = (dx, dy) not in _NEAR
        ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
                    color=colour, zorder=4, annotation_clip=False,
                    bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.7),
                    arrowprops=dict(arrowstyle="-", lw=0.4, color=colour, alpha=0.6, shrinkA=0, shrinkB=3) if far else None)
        obstacles.append(box)


def _overlap(a: Bbox, b: Bbox) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0
