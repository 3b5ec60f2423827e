"""The headline figure: judge accuracy on MMRB2 against the downstream score of its Best-of-N picks.

Drawn like the MMRB2 paper's Figure 4, one panel per task: a point per judge, a colour and a marker
per base generator, a least-squares line per generator (its own dash pattern), and that generator's
random-pick (dashed) and oracle (dotted) levels, each ending in the generator's marker, so the figure
reads in greyscale too. Above each panel, per generator: Pearson r and Spearman ρ, with their
bootstrap intervals when ``intervals`` (from :func:`analysis.statistics.correlation_intervals`) is
given, and the number of judges. Error bars are drawn when the results carry ``acc_lo``/``acc_hi``
(accuracy) or ``bon_lo``/``bon_hi`` (BoN score) columns. Uses the Agg canvas directly (no pyplot), so
it works headless and leaves global state alone.
"""

from __future__ import annotations

import io
import math
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
from matplotlib import rc_context, rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.lines import Line2D
from matplotlib.text import Text

from analysis.statistics import pearson, spearman
from bon.content import TASKS
from bon.errors import BonError
from bon.runfolder import write_bytes
from bon.tasks import TASK_TITLES

PLOT_COLUMNS = ("task", "generator", "judge", "mmrb2_accuracy", "bon_score", "random_score", "oracle_score")
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
# Okabe-Ito colours, ordered so neighbours also differ in lightness (readable in greyscale with the markers).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#F0E442")
# Fit lines, one dash pattern per generator (plain dashes and dots are kept for the random and oracle levels).
FIT_STYLES = ("-", (0, (8, 2, 1.5, 2)), (0, (4, 1.5, 1.5, 1.5, 1.5, 1.5)), (0, (10, 3)), (0, (2, 1)))


# zlib level of the PNGs: 3 writes them in half the time of the default 6, 6-11% larger (the same pixels)
PNG_COMPRESSION = 3


def save_figure(fig: Figure, path: Path, formats: Sequence[str] = ("png",), dpi: int = 150) -> list[Path]:
    """Write ``fig`` atomically as ``path`` with each suffix in ``formats`` (``png``, ``svg``, ``pdf``).

    SVG keeps text as text (``svg.fonttype: none``): small, searchable and editable.
    """
    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine) and not (
            rcParams["figure.autolayout"] or rcParams["figure.constrained_layout.use"]):
        # what ``fig.tight_layout()`` leaves behind: it does nothing, yet makes every savefig draw the figure
        # once more first; the layout is final, so the files are the same without it
        fig.set_layout_engine(None)
    written = []
    # the layout is final (unless an engine lays the figure out at each draw): each draw would place the same ticks
    # and lay out the same texts
    with settled(fig) if fig.get_layout_engine() is None else nullcontext():
        for fmt in formats:
            target = Path(path).with_suffix("." + fmt)
            buffer = io.BytesIO()
            with rc_context({"svg.fonttype": "none", "svg.hashsalt": "bon"}):
                fig.savefig(buffer, format=fmt, dpi=dpi, metadata={"Date": None} if fmt == "svg" else None,
                            **({"pil_kwargs": {"compress_level": PNG_COMPRESSION}} if fmt == "png" else {}))
            write_bytes(target, buffer.getvalue())
            written.append(target)
    return written


@contextmanager
def settled(fig: Figure) -> Iterator[None]:
    """Within the block, nothing in ``fig`` moves, is rescaled or changes its text (a layout's measurements, or
    the saves once the layout is final): each axis places its ticks once, and each text is laid out once per
    renderer, instead of at every use.

    Measuring or drawing an Axes asks each axis for its ticks several times (its own box, each spine, the axis
    label's and the title's position, then the draw), and lays out each tick label, title and legend entry as
    often: every time, the locator and formatter run again, every tick is moved to where it already is, and
    every line of text is shaped again. With nothing changed in the block, the first answer is every later one
    (``Axis._update_ticks`` and ``Text._get_layout``: should matplotlib rename them, this does nothing and the
    figure is the same, only slower)."""
    axes = [axis for ax in fig.axes if ax.get_visible() for axis in (ax.xaxis, ax.yaxis)
            if callable(getattr(axis, "_update_ticks", None))]
    for axis in axes:
        axis._update_ticks = _placed_once(axis._update_ticks)  # an instance attribute: this figure's axes only
        axis._update_ticks()  # the ticks and their labels exist from here on
    texts = [text for text in fig.findobj(Text) if callable(getattr(text, "_get_layout", None))]
    for text in texts:
        text._get_layout = _laid_out_once(text)
    try:
        yield
    finally:
        for artist in (*axes, *texts):
            artist.__dict__.pop("_update_ticks", None)
            artist.__dict__.pop("_get_layout", None)


def _placed_once(place: Callable[[], list]) -> Callable[[], list]:
    """``place`` remembering the ticks it returned (a fresh list each time: callers may keep it)."""
    placed: list[list] = []

    def once() -> list:
        if not placed:
            placed.append(place())
        return list(placed[0])

    return once


def _laid_out_once(text: Text) -> Callable[[Any], Any]:
    """``text._get_layout`` remembering its layout (a box relative to the text's position, and its lines) per
    renderer and dpi, and per string, font, rotation and alignment in case one of them changes."""
    lay_out = text._get_layout
    layouts: dict[tuple, Any] = {}

    def laid_out(renderer: Any) -> Any:
        if text.get_wrap():  # the wrapped lines depend on where the text is
            return lay_out(renderer)
        key = (renderer, text.figure.dpi, text.get_text(), text.get_rotation(), text.get_rotation_mode(),
               text.get_horizontalalignment(), text.get_verticalalignment(), hash(text.get_fontproperties()))
        if key not in layouts:
            layouts[key] = lay_out(renderer)
        return layouts[key]

    return laid_out


def tight_layout(fig: Figure, rect: tuple[float, float, float, float], **pads: float) -> None:
    """``fig.tight_layout(rect=rect, **pads)`` with each Axes' decorations measured once instead of twice.

    Measuring an Axes' tight box (its ticks, tick labels and titles) is most of a layout's time. Given a
    ``rect``, matplotlib measures every Axes once for the margins and again, with nothing moved in between,
    to fit them into ``rect``: the second pass gets the first one's boxes, so the layout is the same."""
    axes = list(fig.axes)
    for ax in axes:
        ax.get_tightbbox = _measured_once(ax.get_tightbbox)  # an instance attribute: this figure's Axes only
    try:
        with settled(fig):  # nothing moves until the layout is applied, after the last measurement
            fig.tight_layout(rect=rect, **pads)
    finally:
        for ax in axes:
            del ax.get_tightbbox


def _measured_once(measure: Callable[..., Any]) -> Callable[..., Any]:
    """``measure`` remembering its box per renderer and options (the layout's calls pass only these)."""
    boxes: dict[tuple, Any] = {}

    def measured(renderer: Any = None, **options: Any) -> Any:
        key = (id(renderer), *sorted(options.items()))
        if key not in boxes:
            boxes[key] = measure(renderer, **options)
        return boxes[key]

    return measured


def correlation_figure(results: pd.DataFrame, path: Path, *, intervals: pd.DataFrame | None = None, formats: Sequence[str] = ("png",),
                       title: str | None = None, x_label: str | None = None, y_label: str | None = None,
                       note: str | None = None) -> Path:
    """Draw the accuracy-vs-BoN figure to ``path`` (PNG, 150 dpi; also SVG etc. with ``formats``) and return
    the PNG path. Tasks without rows get an empty panel.

    ``intervals``: a correlation table with ``pearson_lo``/``pearson_hi``/``spearman_lo``/``spearman_hi``
    (scope ``setting`` rows are used); ``note``: a line printed under the figure (what the intervals are).
    """
    missing = [c for c in PLOT_COLUMNS if c not in results.columns]
    if missing:
        raise BonError(f"results table lacks column(s) {', '.join(missing)} needed for the figure")
    tasks = list(TASKS) + sorted(set(results["task"]) - set(TASKS))
    generators = list(dict.fromkeys(results["generator"]))
    style = {g: (PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)], FIT_STYLES[i % len(FIT_STYLES)])
             for i, g in enumerate(generators)}
    stats = intervals
    if stats is not None and "scope" in stats.columns:
        stats = stats[stats["scope"] == "setting"]

    ncols = 2
    nrows = math.ceil(len(tasks) / ncols)
    head = 0.22 * max(len(generators), 1)  # inches of statistics lines above each panel
    fig = Figure(figsize=(6.6 * ncols, (4.6 + head) * nrows + 0.9), dpi=150)
    canvas = FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    labels_per_axis = []
    for ax, task in zip(axes, tasks):
        sub = results[results["task"] == task]
        labels_per_axis.append((ax, _panel(ax, task, sub, stats, style, x_label, y_label)))
    for ax in axes[len(tasks):]:
        ax.set_visible(False)

    handles = [Line2D([], [], color="0.3", lw=1.4, label="least-squares fit (dash pattern per generator)"),
               Line2D([], [], color="0.3", lw=1.2, ls="--", label="random pick (mean over N)"),
               Line2D([], [], color="0.3", lw=1.4, ls=":", label="oracle pick (best of N)")]
    if {"acc_lo", "acc_hi"} & set(results.columns) or {"bon_lo", "bon_hi"} & set(results.columns):
        handles.append(Line2D([], [], color="0.3", lw=0.8, marker="|", markersize=8, label="95% interval per judge"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=8.5,
               bbox_to_anchor=(0.5, 0.022 if note else 0.0))
    if note:
        fig.text(0.5, 0.006, note, ha="center", va="bottom", fontsize=7.5, color="0.3")
    head, _, subtitle = (title or "Does MMRB2 accuracy predict Best-of-N gains?").partition("\n")
    fig.suptitle(head, fontsize=13)
    if subtitle:  # what the axes are in this study, one sentence
        fig.text(0.5, 0.962, subtitle, ha="center", va="top", fontsize=8.5, color="0.25")
    tight_layout(fig, (0, 0.05 if note else 0.035, 1, 0.95 if subtitle else 0.975), h_pad=2.0, w_pad=2.0)
    renderer = canvas.get_renderer()
    for ax, labels in labels_per_axis:
        place_labels(ax, labels, renderer)

    written = save_figure(fig, Path(path).with_suffix(".png") if Path(path).suffix != ".png" else Path(path),
                          formats if "png" in formats else ("png", *formats))
    return written[0]


def _panel(ax: Any, task: str, sub: pd.DataFrame, correlations: pd.DataFrame | None, style: dict,
           x_label: str | None = None, y_label: str | None = None) -> list:
    """One task's scatter, fits, baselines and statistics; returns ``(x, y, judge, colour)`` label specs,
    placed later once the layout is final."""
    ax.set_xlabel(x_label or "MMRB2 accuracy of the judge (%)", fontsize=9)
    ax.set_ylabel(y_label or "Mean downstream score of BoN picks", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.25, lw=0.5)
    sub = sub[np.isfinite(sub["mmrb2_accuracy"].astype(float)) & np.isfinite(sub["bon_score"].astype(float))]
    if sub.empty:
        ax.set_title(TASK_TITLES.get(task, task), fontsize=12, fontweight="bold")
        ax.text(0.5, 0.5, "no data for this task", transform=ax.transAxes, ha="center", va="center",
                fontsize=10, color="0.45")
        ax.set_xticks([])
        ax.set_yticks([])
        return []

    xs_all = sub["mmrb2_accuracy"].to_numpy(float)
    x_lo, x_hi = xs_all.min(), xs_all.max()
    for col, side in (("acc_lo", "lo"), ("acc_hi", "hi")):
        if col in sub.columns:
            v = pd.to_numeric(sub[col], errors="coerce").to_numpy(float)
            v = v[np.isfinite(v)]
            if v.size:
                x_lo, x_hi = (min(x_lo, v.min()), x_hi) if side == "lo" else (x_lo, max(x_hi, v.max()))
    x_pad = max((x_hi - x_lo) * 0.08, 1.5)
    ys_all: list[float] = list(sub["bon_score"].astype(float))
    for col in ("bon_lo", "bon_hi"):
        if col in sub.columns:
            ys_all += [v for v in pd.to_numeric(sub[col], errors="coerce") if np.isfinite(v)]
    texts: list[tuple[float, float, str, str]] = []
    legend_handles = []
    levels = []
    for gen, g in sub.groupby("generator", sort=False):
        colour, marker, fit_style = style[gen]
        x, y = g["mmrb2_accuracy"].to_numpy(float), g["bon_score"].to_numpy(float)
        xerr = _err(g, x, "acc_lo", "acc_hi")
        yerr = _err(g, y, "bon_lo", "bon_hi")
        if xerr is not None or yerr is not None:
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.7, alpha=0.45,
                        capsize=0, zorder=2)
        ax.scatter(x, y, color=colour, marker=marker, s=38, zorder=3, edgecolor="0.15", linewidth=0.6)
        if np.ptp(x) > 0 and len(x) >= 2:
            slope, icpt = np.polyfit(x, y, 1)
            xx = np.array([x.min(), x.max()])
            ax.plot(xx, slope * xx + icpt, color=colour, lw=1.5, ls=fit_style, alpha=0.9, zorder=2)
        for col, ls, lw in (("random_score", "--", 1.1), ("oracle_score", ":", 1.5)):
            level = pd.to_numeric(g[col], errors="coerce").mean()
            if np.isfinite(level):
                ax.axhline(level, color=colour, ls=ls, lw=lw, alpha=0.8, zorder=1)
                levels.append((float(level), colour, marker))
                ys_all.append(float(level))
        texts.extend((xi, yi, str(name), colour) for xi, yi, name in zip(x, y, g["judge"]))
        legend_handles.append(Line2D([], [], color=colour, marker=marker, markeredgecolor="0.15", markersize=6,
                                     lw=1.5, ls=fit_style, label=_legend_label(task, gen, x, y, correlations)))
    y_lo, y_hi = min(ys_all), max(ys_all)
    y_pad = max((y_hi - y_lo) * 0.08, 1e-3 if y_hi == y_lo == 0 else abs(y_hi) * 0.02)
    ax.set_xlim(x_lo - x_pad, x_hi + x_pad)
    ax.set_ylim(y_lo - y_pad, y_hi + y_pad * 1.5)
    for level, colour, marker in levels:  # the generator's marker at the right end of its level lines
        ax.plot([1.018], [level], transform=ax.get_yaxis_transform(), marker=marker, markersize=4.5, color=colour,
                markeredgecolor="0.15", markeredgewidth=0.4, clip_on=False, zorder=4)
    legend = ax.legend(handles=legend_handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=7.8,
                       frameon=False, handlelength=3.2, handletextpad=0.6, borderaxespad=0.2, borderpad=0.1,
                       labelspacing=0.3)
    legend.set_in_layout(True)
    ax.set_title(TASK_TITLES.get(task, task), fontsize=12, fontweight="bold", loc="left",
                 pad=8 + 12.5 * len(legend_handles))
    return texts


def _err(g: pd.DataFrame, centre: np.ndarray, lo_col: str, hi_col: str) -> np.ndarray | None:
    """Asymmetric error bar lengths from interval columns (None when absent)."""
    if lo_col not in g.columns or hi_col not in g.columns:
        return None
    lo = pd.to_numeric(g[lo_col], errors="coerce").to_numpy(float)
    hi = pd.to_numeric(g[hi_col], errors="coerce").to_numpy(float)
    if not (np.isfinite(lo).any() and np.isfinite(hi).any()):
        return None
    return np.vstack([np.nan_to_num(np.clip(centre - lo, 0, None)), np.nan_to_num(np.clip(hi - centre, 0, None))])


def _legend_label(task: str, gen: str, x: np.ndarray, y: np.ndarray, correlations: pd.DataFrame | None) -> str:
    """``generator  r=… [lo, hi]  ρ=… [lo, hi]  (n judges)``, from the correlation table when it has the row."""
    row = None
    if correlations is not None and not correlations.empty and {"task", "generator"} <= set(correlations.columns):
        hit = correlations[(correlations["task"] == task) & (correlations["generator"] == gen)]
        if len(hit) >= 1:
            row = hit.iloc[0]
    c = dict(row) if row is not None else {"pearson_r": float(pearson(x, y)), "spearman_rho": float(spearman(x, y)),
                                           "n_judges": len(x)}
    n = int(c["n_judges"])
    r = f"r = {_fmt(c['pearson_r'])}{_interval(c, 'pearson')}"
    rho = f"ρ = {_fmt(c['spearman_rho'])}{_interval(c, 'spearman')}"
    return f"{gen}:  {r}   {rho}   ({n} judges)"


def _interval(c: dict, stat: str) -> str:
    lo, hi = c.get(f"{stat}_lo"), c.get(f"{stat}_hi")
    if lo is None or hi is None or not (np.isfinite(float(lo)) and np.isfinite(float(hi))):
        return ""
    return f" [{_fmt(lo)}, {_fmt(hi)}]"


def _fmt(v: Any) -> str:
    return "n/a" if v is None or not np.isfinite(float(v)) else f"{float(v):+.2f}".replace("-", "−")


# Label positions tried in turn, as (dx, dy) in points from the point; the first free one wins.
_NEAR = [(5, 2), (5, -2), (-5, 2), (-5, -2)]
_FAR = [(sx * 6, sy * (2 + 9 * k)) for k in range(1, 7) for sy in (1, -1) for sx in (1, -1)]


def place_labels(ax: Any, labels: list[tuple[float, float, str, str]], renderer: Any) -> None:
    """Greedy label placement: each judge name takes the nearest offset that overlaps no placed
    label, no marker and stays inside the axes; far placements get a thin leader line."""
    if not labels:
        return
    to_pt = ax.figure.dpi / 72.0
    frame = ax.get_window_extent(renderer)
    area = tuple(frame.extents.tolist())
    anchors = ax.transData.transform([(x, y) for x, y, _, _ in labels])
    r = 4.5 * to_pt  # marker half-size in pixels
    obstacles = [(px - r, py - r, px + r, py + r) for px, py in anchors.tolist()]  # boxes as (x0, y0, x1, y1)
    legend = ax.get_legend()
    inside = legend is not None and _overlap(legend.get_window_extent(renderer).extents.tolist(), area) > 0
    if inside:  # pin the legend where it is, so the labels placed around it don't move it
        box = legend.get_window_extent(renderer)
        corner = tuple(ax.transAxes.inverted().transform((box.x0, box.y0)))
        legend.set_loc(corner) if hasattr(legend, "set_loc") else setattr(legend, "_loc", corner)
        obstacles.append(tuple(box.extents.tolist()))
    order = sorted(range(len(labels)), key=lambda i: (-anchors[i][1], anchors[i][0]))
    for i in order:
        x, y, name, colour = labels[i]
        t = Text(0, 0, name, fontsize=7)
        t.set_figure(ax.figure)
        if callable(getattr(t, "_get_layout", None)):
            t._get_layout = _laid_out_once(t)  # tried at up to 28 places, in 4 alignments
        best = None
        for n, (dx, dy) in enumerate(_NEAR + _FAR):
            ha, va = ("left" if dx > 0 else "right"), ("bottom" if dy > 0 else "top")
            t.set_position((anchors[i][0] + dx * to_pt, anchors[i][1] + dy * to_pt))
            t.set_ha(ha)
            t.set_va(va)
            box = tuple(t.get_window_extent(renderer).extents.tolist())
            cost = sum(_overlap(box, o) for o in obstacles) + 3 * ((box[2] - box[0]) * (box[3] - box[1]) - _overlap(box, area))
            if best is None or cost < best[0] - 1e-9:
                best = (cost, dx, dy, ha, va, box)
            if cost == 0:
                break
        _, dx, dy, ha, va, box = best
        far = (dx, dy) not in _NEAR
        ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
                    color=_darker(colour), zorder=4, annotation_clip=False,
                    bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.7),
                    arrowprops=dict(arrowstyle="-", lw=0.4, color=colour, alpha=0.6, shrinkA=0, shrinkB=3) if far else None)
        obstacles.append(box)


def _darker(colour: str, amount: float = 0.35) -> tuple[float, float, float]:
    """The colour mixed with black, so light hues stay legible as text."""
    from matplotlib.colors import to_rgb

    return tuple(c * (1.0 - amount) for c in to_rgb(colour))


def _overlap(a: Sequence[float], b: Sequence[float]) -> float:
    """The area two boxes given as ``(x0, y0, x1, y1)`` share."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0
