"""``report.md`` and figures for :func:`analysis.diagnostics.diagnose` results.

Kept apart from the computation so the numbers can be produced (and tested) without matplotlib.
Every rate in a table is printed with the counts behind it, e.g. ``61.2% (612/1000)``, so a reader can
tell a real difference from noise on a handful of pairs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.plots import COLOURS, TASK_TITLES
from analysis.report import DASH, markdown_table
from bon.tasks import bon_task, is_task

MAX_GROUPS = 15  # rows per breakdown table before the smallest groups are folded into one
FIGURES = {"benchmark": "benchmark.png", "win_rates": "win_rates.png", "by_source": "accuracy_by_source.png",
           "voting": "voting.png"}


def title(task: str) -> str:
    return TASK_TITLES.get(bon_task(task), task) if is_task(task) else task


def rate(num: int, den: int) -> str:
    """``61.2% (612/1000)``; a dash when the denominator is zero."""
    return f"{100.0 * num / den:.1f}% ({num}/{den})" if den else f"{DASH} (0/0)"


def _acc(d: Mapping[str, Any]) -> str:
    return rate(d["correct"], d["judgements"])


# --- markdown ---------------------------------------------------------------------------------


def report_markdown(result: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    tasks = result["tasks"]
    parts = ["# MMRB2 diagnostics\n", _read(result), _benchmark(result, figures)]
    if any(t["judges"] for t in tasks.values()):
        parts.append(_judges(result, figures))
    return "\n".join(parts)


def _read(result: Mapping[str, Any]) -> str:
    lines = [f"Benchmark folder: `{result['bench_dir']}`.\n"]
    if result["excluded_sources"]:
        dropped = ", ".join(f"{title(t)} {v['excluded_pairs']}" for t, v in result["tasks"].items() if v["excluded_pairs"])
        lines.append(f"Prompt sources left out before scoring: {', '.join(result['excluded_sources'])} "
                     f"(pairs dropped: {dropped or 'none'}).\n")
    rows = [{"task": title(t), "file": Path(v["file"]).name, "pairs": v["pairs"],
             "judges": ", ".join(f"{j} (`{Path(d['file']).name}`)" for j, d in v["judges"].items()) or DASH}
            for t, v in result["tasks"].items()]
    return "\n".join(lines) + "\n" + markdown_table(pd.DataFrame(rows))


def _benchmark(result: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    tasks, ov = result["tasks"], result["overall"]
    out = ["## The benchmark\n", "### Pairs from one generator\n",
           "A same-model pair holds two responses from the same generator; the paper finds judges weaker on "
           "these, since the usual differences between models are absent.\n"]
    rows = [{"task": title(t), "pairs": v["pairs"], "same-model": rate(v["same_model"]["same"], v["pairs"]),
             "different-model": rate(v["same_model"]["different"], v["pairs"]),
             "chosen = A": rate(v["chosen_A"], v["pairs"])} for t, v in tasks.items()]
    rows.append({"task": "all", "pairs": ov["pairs"], "same-model": rate(ov["same_model"]["same"], ov["pairs"]),
                 "different-model": rate(ov["same_model"]["different"], ov["pairs"]), "chosen = A": DASH})
    out.append(markdown_table(pd.DataFrame(rows)))
    out += ["### Human agreement\n",
            "Generation tasks: each of three 1–6 ratings is a vote (5–6 for A, 1–2 for B, 3–4 abstains); agreement is "
            "the share of agreeing pairs of voting annotators, pooled over pairs. Reasoning: annotators grade each "
            "response with a letter (read as A > B > C); where the same annotators graded both responses, each votes "
            "for the better-graded one and agreement is pooled the same way. *Label agreement*: votes that match "
            "`chosen`. *Unanimous*: every annotator voted, all the same way.\n"]
    rows = []
    for t, v in tasks.items():
        h = v["human_agreement"]
        rows.append({"task": title(t), "pairs annotated": h["pairs_annotated"], "≥2 votes": h["pairs_2plus_votes"],
                     "agreement": rate(h["agreeing"], h["annotator_pairs"]),
                     "label agreement": rate(h["votes_matching_label"], h["votes"]),
                     "unanimous": rate(h["unanimous_pairs"], h["pairs_annotated"])})
    for key, name in (("human_agreement_generation", "generation tasks"), ("human_agreement", "all tasks")):
        h = ov[key]
        if h["tasks"]:
            rows.append({"task": name, "pairs annotated": DASH, "≥2 votes": DASH,
                         "agreement": rate(h["agreeing"], h["annotator_pairs"]), "label agreement": DASH,
                         "unanimous": DASH})
    out.append(markdown_table(pd.DataFrame(rows)))
    if "reasoning" in tasks:
        h = tasks["reasoning"]["human_agreement"]
        g = h["grades"]
        out.append(f"Reasoning grades: {g['graded_responses']} graded responses; annotators gave the same letter in "
                   f"{rate(g['agreeing'], g['annotator_pairs'])} of annotator pairs. Letters on chosen responses: "
                   f"{_letters(g['letters_chosen'])}; on rejected ones: {_letters(g['letters_rejected'])}. "
                   f"{h['pairs_one_response_graded']} pairs have only one graded response and give no preference "
                   "votes.\n")
    for t, v in tasks.items():
        ip = v["image_presence"]
        if ip["pairs_one_image"]:
            out.append(f"{title(t)}: in {ip['pairs_one_image']} pairs exactly one response contains an image; humans "
                       f"preferred that one in {rate(ip['chosen_has_image'], ip['pairs_one_image'])}.\n")
    if "benchmark" in figures:
        out.append(f"![]({figures['benchmark']})\n")
    out += ["### Generator win rates\n",
            "Every appearance in a labelled pair is a win (its response was chosen) or a loss; a same-model pair "
            "gives its generator one of each.\n"]
    for t, v in tasks.items():
        rows = [{"generator": r["model"], "appearances": r["appearances"], "wins": r["wins"], "losses": r["losses"],
                 "win rate": rate(r["wins"], r["appearances"])} for r in v["win_rates"]]
        out.append(f"**{title(t)}**\n\n" + markdown_table(pd.DataFrame(rows)))
    if "win_rates" in figures:
        out.append(f"![]({figures['win_rates']})\n")
    return "\n".join(out)


def _letters(c: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in c.items()) or DASH


def _judges(result: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    tasks, ov = result["tasks"], result["overall"]
    judged = [(t, j, d) for t, v in tasks.items() for j, d in v["judges"].items()]
    out = ["## Judges\n", "Accuracy follows the official scorer: the first forward and the first (flipped) reverse "
           "sample are two judgements; missing or empty ones leave the denominator.\n", "### Accuracy\n"]
    rows = [{"judge": j, "task": title(t), "accuracy": _acc(d["accuracy"]),
             "missing pairs": d["accuracy"]["missing_pairs"], "invalid answers": d["accuracy"]["invalid_judgements"],
             "unknown ids": d["accuracy"]["unknown_ids"]} for t, j, d in judged]
    rows += [{"judge": j, "task": "overall (micro)", "accuracy": rate(o["correct"], o["judgements"]),
              "missing pairs": DASH, "invalid answers": DASH, "unknown ids": DASH} for j, o in ov["judges"].items()]
    out.append(markdown_table(pd.DataFrame(rows)))
    for key, name in (("by_source", "prompt source"), ("by_category", "prompt category")):
        out.append(f"### Accuracy by {name}\n")
        for t, v in tasks.items():
            if not v["judges"]:
                continue
            groups = next(iter(v["judges"].values()))[key]
            if key == "by_category" and len(groups) < 2:
                continue
            shown, rest = list(groups)[:MAX_GROUPS], list(groups)[MAX_GROUPS:]
            rows = [{name: g, "pairs": groups[g]["pairs"], **{j: _acc(d[key][g]) for j, d in v["judges"].items()}}
                    for g in shown]
            if rest:  # folded for reading; the JSON keeps every group
                rows.append({name: f"other ({len(rest)} smaller groups)", "pairs": sum(groups[g]["pairs"] for g in rest),
                             **{j: rate(sum(d[key][g]["correct"] for g in rest), sum(d[key][g]["judgements"] for g in rest))
                                for j, d in v["judges"].items()}})
            out.append(f"**{title(t)}**\n\n" + markdown_table(pd.DataFrame(rows)))
        if key == "by_source" and "by_source" in figures:
            out.append(f"![]({figures['by_source']})\n")
    out += ["### Same-model and different-model pairs\n"]
    rows = [{"judge": j, "task": title(t), "same-model": _acc(d["same_model"]["same"]),
             "different-model": _acc(d["same_model"]["different"]),
             "gap (points)": _gap(d["same_model"]["different"], d["same_model"]["same"])} for t, j, d in judged]
    out.append(markdown_table(pd.DataFrame(rows), {"gap (points)": "{:+.1f}"}))
    out += ["### Position behaviour\n",
            "First samples only. *Consistent*: the reverse answer, flipped back, equals the forward one. *A share*: "
            "how often the response shown first was picked; an unbiased judge is near 50% in both directions.\n"]
    rows = [{"judge": j, "task": title(t),
             "consistent": rate(d["position"]["consistent"], d["position"]["pairs_both_directions"]),
             "A share, forward": rate(d["position"]["forward_A"], d["position"]["forward_answers"]),
             "A share, reverse": rate(d["position"]["reverse_A"], d["position"]["reverse_answers"])}
            for t, j, d in judged]
    out.append(markdown_table(pd.DataFrame(rows)))
    biased = [(t, j, d) for t, j, d in judged if tasks[t]["image_presence"]["pairs_one_image"]]
    if biased:
        out += ["### Image bias\n", "Pairs where exactly one response contains an image, split by whether the "
                "human-preferred response is the one with the image. A judge drawn to images does well on the first "
                "column and badly on the second.\n"]
        rows = [{"judge": j, "task": title(t), "preferred has image": _acc(d["image_bias"]["preferred_has_image"]),
                 "preferred is text-only": _acc(d["image_bias"]["preferred_text_only"]),
                 "gap (points)": _gap(d["image_bias"]["preferred_has_image"], d["image_bias"]["preferred_text_only"])}
                for t, j, d in biased]
        out.append(markdown_table(pd.DataFrame(rows), {"gap (points)": "{:+.1f}"}))
    out += ["### Majority voting over K samples\n",
            "Per pair and direction, the first K samples vote (reverse answers flipped back); the answer given most "
            "often is the verdict and a tie gives none. K = 1 is the official accuracy. *With K samples*: directions "
            "that had at least K samples drawn.\n"]
    rows = [{"judge": j, "task": title(t), "K": r["k"], "accuracy": rate(r["correct"], r["judgements"]),
             "tied": r["tied_directions"], "with K samples": r["directions_with_k"]}
            for t, j, d in judged for r in d["voting"]]
    out.append(markdown_table(pd.DataFrame(rows)))
    if "voting" in figures:
        out.append(f"![]({figures['voting']})\n")
    return "\n".join(out)


def _gap(x: Mapping[str, Any], y: Mapping[str, Any]) -> float:
    a, b = x["accuracy"], y["accuracy"]
    return a - b if math.isfinite(a) and math.isfinite(b) else math.nan


# --- figures ----------------------------------------------------------------------------------


def draw_figures(result: Mapping[str, Any], out_dir: Path) -> dict[str, str]:
    """Draw the figures that have data; returns {figure key: file name} for the report to link."""
    tasks = result["tasks"]
    made = {"benchmark": _benchmark_figure(tasks, out_dir / FIGURES["benchmark"]),
            "win_rates": _win_rate_figure(tasks, out_dir / FIGURES["win_rates"])}
    if any(v["judges"] for v in tasks.values()):
        made["by_source"] = _source_figure(tasks, out_dir / FIGURES["by_source"])
        made["voting"] = _voting_figure(tasks, out_dir / FIGURES["voting"])
    return {k: FIGURES[k] for k, ok in made.items() if ok}


def _panels(n: int, width: float, height: float) -> tuple[Figure, list[Any]]:
    """One panel per task: a row for one or two tasks, a 2-column grid for more."""
    cols = n if n <= 2 else 2
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _save(fig: Figure, path: Path) -> bool:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=130)
    return True


def _benchmark_figure(tasks: Mapping[str, Any], path: Path) -> bool:
    names = [title(t) for t in tasks]
    fig = Figure(figsize=(9, 3.4), layout="constrained")
    for ax, (label, key, num, den) in zip(fig.subplots(1, 2), (
            ("Human agreement (%)", "human_agreement", "agreeing", "annotator_pairs"),
            ("Same-model pairs (%)", "same_model", "same", "pairs"))):
        nums = [v[key][num] for v in tasks.values()]
        dens = [v[key][den] for v in tasks.values()]
        vals = [100.0 * n / d if d else 0.0 for n, d in zip(nums, dens)]
        bars = ax.bar(names, vals, color=COLOURS[0] if key == "human_agreement" else COLOURS[2])
        for bar, n, d in zip(bars, nums, dens):
            ax.annotate(f"{n}/{d}", (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                        va="bottom", fontsize=7)
        ax.set_ylim(0, 105)
        ax.set_title(label, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
    return _save(fig, path)


def _win_rate_figure(tasks: Mapping[str, Any], path: Path) -> bool:
    shown = [(t, v) for t, v in tasks.items() if v["win_rates"]]
    if not shown:
        return False
    fig, axes = _panels(len(shown), 5.0, 3.4)
    for ax, (t, v) in zip(axes, shown):
        rows = v["win_rates"][::-1]
        ax.barh([r["model"] for r in rows], [r["win_rate_pct"] for r in rows], color=COLOURS[1])
        ax.axvline(50, color="grey", lw=0.8, ls="--")
        ax.set_xlim(0, 100)
        ax.set_title(f"{title(t)}: win rate (%)", fontsize=10)
        ax.tick_params(axis="y", labelsize=7)
    return _save(fig, path)


def _source_figure(tasks: Mapping[str, Any], path: Path) -> bool:
    shown = [(t, v) for t, v in tasks.items() if v["judges"]]
    fig, axes = _panels(len(shown), 5.5, 3.6)
    for ax, (t, v) in zip(axes, shown):
        judges = list(v["judges"])
        sources = list(next(iter(v["judges"].values()))["by_source"])
        width = 0.8 / len(judges)
        for i, j in enumerate(judges):
            vals = [v["judges"][j]["by_source"][s]["accuracy"] for s in sources]
            ax.bar([x + i * width for x in range(len(sources))], [0 if math.isnan(a) else a for a in vals], width,
                   label=j, color=COLOURS[i % len(COLOURS)])
        ax.axhline(50, color="grey", lw=0.8, ls="--")
        ax.set_xticks([x + width * (len(judges) - 1) / 2 for x in range(len(sources))], sources, rotation=30,
                      ha="right", fontsize=7)
        ax.set_ylim(0, 100)
        ax.set_title(f"{title(t)}: accuracy by source (%)", fontsize=10)
        ax.legend(fontsize=7)
    return _save(fig, path)


def _voting_figure(tasks: Mapping[str, Any], path: Path) -> bool:
    shown = [(t, v) for t, v in tasks.items() if v["judges"]]
    fig, axes = _panels(len(shown), 4.5, 3.0)
    for ax, (t, v) in zip(axes, shown):
        for i, (j, d) in enumerate(v["judges"].items()):
            ax.plot([r["k"] for r in d["voting"]], [r["accuracy"] for r in d["voting"]], marker="o", label=j,
                    color=COLOURS[i % len(COLOURS)])
        ax.set_xlabel("K samples per direction", fontsize=8)
        ax.set_title(f"{title(t)}: accuracy (%)", fontsize=10)
        ax.legend(fontsize=7)
    return _save(fig, path)
