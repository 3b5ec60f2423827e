"""The report bundle rendered to files: ``report.md``, ``report.html``, ``report.json``, the CSV tables
and the figures, each drawn once.

``report.md`` says what was run, how to read each number, shows the figure and the tables, and ends
with an interpretation generated from the numbers (the bootstrap intervals of
:mod:`analysis.statistics`), so the text never claims more than the data. Its sections are the
functions in :data:`SECTIONS`, each ``bundle, folder -> markdown``: a new analysis adds one function.
"""

from __future__ import annotations

import re

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import leakage
from analysis.bundle import (CORRELATION_COLUMNS, DASH, SCOPES, ReportBundle, finite, fmt_p,  # noqa: F401  (DASH: diagnostics_report)
                             inline, pooled_text)
from analysis.markdown import md_label
from analysis.bon_metrics import task_order, uninformed_judges
from bon.tasks import TASK_TITLES
from analysis.prediction import answer_sentence
from analysis.predictors import section_markdown
from analysis.tradeoff import tradeoff_markdown
from bon.runfolder import RunFolder

TITLE = "# Does MMRB2 accuracy predict Best-of-N gains?\n"
FIGURE_NOTE = ("Intervals: 95% bias-corrected bootstrap over judges, prompts and MMRB2 pairs ({b} replicates, seed {s}); "
               "error bars: per-judge 95% intervals.")


def correlation_note(bootstrap: Any, seed: Any, left_out: Sequence[str] = ()) -> str:
    """The line under the correlation figure: what its intervals are, and the judges it does not show (the
    report's figure and ``bon figure --run``'s)."""
    return FIGURE_NOTE.format(b=bootstrap, s=seed) + (
        f" Not shown: {', '.join(left_out)} (share the verifier's grader)." if left_out else "")


def empty_report(stats: Mapping[str, Any], reason: str) -> str:
    """``report.md`` of a study that has nothing to analyse yet (say, a call budget stopped it early)."""
    return "\n".join([TITLE, _partial(stats, set()), f"No analysis: {reason}.\n",
                      "Rerun the same command (with a larger `--max-calls`) to continue; nothing done so far is lost.\n"])


# --- report.md ------------------------------------------------------------------------------------


def render_markdown(b: ReportBundle, out: RunFolder) -> str:
    """report.md; labels (judges, generators, config values) are the user's text, so no HTML or Markdown
    link in one survives as markup: ``<`` and ``&`` become entities (report.md writes no HTML of its own),
    links and images in labels are escaped (:func:`md_label`)."""
    text = "\n".join(part for part in (section(b, out) for section in SECTIONS) if part)
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _no_links(text: str) -> str:
    """Text that may hold code spans of its own (the leakage lines) but no link or image from a label."""
    return " ".join(str(text).splitlines()).replace("](", "]\\(").replace("![", "!\\[")


def _header(b: ReportBundle, out: RunFolder) -> str:
    judges_with_picks = set(b.prompts["judge"])
    lines = [TITLE, _partial(b.stats, judges_with_picks, b.study)]
    if out.root.resolve() != b.run_dir.resolve():
        lines.append(f"Analysis of the study in `{b.run_dir}` with judge accuracies from **{b.accuracy_label}**; "
                     "the study's own report is in its folder.\n")
    problem = b.degenerate()
    if problem:
        lines.append(f"> **Not enough data for a conclusion:** {problem}.\n")
    pooled = b.pooled()
    undefined = b.r_undefined()
    if undefined:
        lines.append(f"**Answer in one line:** r is undefined: {undefined}.\n")
    elif pooled:
        lines.append(f"**Answer in one line:** Pearson r = {_signed(pooled['pearson_r'])} "
                     f"(95% CI {_interval(pooled['pearson_lo'], pooled['pearson_hi'])}), Spearman ρ = "
                     f"{_signed(pooled['spearman_rho'])}, over {pooled['n_judges']} judges"
                     + _leakage_clause(b) + "; details and caveats below.\n")
    lines.append(f"**The axes:** {b.axes_sentence()}\n")  # one sentence, as under the figure
    return "\n".join(line for line in lines if line)


def _leakage_clause(b: ReportBundle) -> str:
    """``, without verifier-twin (shares the verifier's grader; with it: r = ...)`` for the headline."""
    graders = list((b.leakage or {}).get("grader_judges") or {})
    other = pooled_text(b.correlations_other)
    if not graders:
        return ""
    if b.excluded_judges:
        return f", without {', '.join(map(md_label, graders))} (sharing the verifier's grader" + (f"; with them: {other}" if other else "") + ")"
    return f", {', '.join(map(md_label, graders))} included although they share the verifier's grader" + (f" (without them: {other})" if other else "")


def _partial(stats: Mapping[str, Any], judges_with_picks: set[str], study: Mapping[str, Any] | None = None) -> str:
    """The partial-study banner, with counts (empty for a finished study)."""
    if not stats.get("stopped"):
        return ""
    planned = [j.get("label") or j.get("name") for j in (study or {}).get("judges") or [] if isinstance(j, Mapping)]
    planned = planned or list((stats.get("judges") or {}))
    pending = [j for j in planned if j not in judges_with_picks]
    made = sum(int(s.get("calls_made", 0) or 0) for s in (stats.get("judges") or {}).values() if isinstance(s, Mapping))
    return (f"> **Partial study:** {stats['stopped']}. {len(planned) - len(pending)} of {len(planned)} judges have "
            f"Best-of-N picks ({made} judge calls made in the last invocation)"
            + (f"; pending: {', '.join(map(md_label, pending))}" if pending else "") + ". Numbers below cover only what was done; "
            "rerun the same command to continue.\n")


def _what_was_run(b: ReportBundle, out: RunFolder) -> str:
    st = b.stats
    ours = {k for k, _ in b.leakage_lines()}  # bon's own sentences (with code spans); the rest is the user's labels
    lines = ["## What was run\n"] + [f"- **{k}:** {_no_links(v) if k in ours else md_label(v)}" for k, v in b.what_was_run()]
    if st.get("timings_s"):
        seconds = pd.to_numeric(list(st["timings_s"].values()), errors="coerce")
        table = pd.DataFrame({"stage": list(st["timings_s"]), "seconds": seconds})
        lines.append("\nTime per stage:\n\n" + markdown_table(table, {"seconds": "{:.1f}"}))
    if st.get("judges"):
        lines.append("\nJudge calls (accuracy set and selection):\n\n" + _stats_table(st["judges"]))
    if b.versions:
        lines.append(f"\nVersions: {_no_links(inline(b.versions))}")
    return "\n".join(lines) + "\n"


def _stats_table(stats: Mapping[str, Any]) -> str:
    """One row per judge with its scalar counters (nested detail stays in stats.json)."""
    rows = [{"judge": judge, **{k.replace("_", " "): v for k, v in values.items() if isinstance(v, (int, float, str))}}
            for judge, values in stats.items() if isinstance(values, Mapping)]
    return markdown_table(pd.DataFrame(rows))


HOW_TO_READ = """## How to read this report

- **MMRB2 accuracy** (%): how often the judge agrees with the reference preference on the pairs of
  that task (human experts on MMRB2 itself, or the labels of a preference set in the MMRB2 format),
  scored like the official MMRB2 scorer. Each pair is asked in both orders and each order counts
  once, so a judge that always answers "A" scores 50%; 50% is chance.
- **BoN score**: for every prompt the judge picks one of the N candidates of a base generator; a
  downstream verifier scores that pick; the BoN score is the mean over prompts (higher is better).
- **Random** is the expected score of picking a candidate at random (the mean over all N);
  **oracle** is the score of the best candidate by the verifier itself: no judge can beat it.
- **Gain** = BoN − random. **Recovery** = gain / (oracle − random): 0 means no better than chance,
  1 means the judge always found the verifier's best candidate; negative means worse than chance.
- **Pearson r** measures a linear relation, **Spearman ρ** a monotone (rank) one and **Kendall τ**
  pairwise order, across the judges of one task and generator. Intervals are 95% bias-corrected
  bootstrap intervals whose replicates resample the judges, the prompts and the MMRB2 pairs at once;
  *CI (meas.)* keeps the judges fixed. *p* is a two-sided permutation p-value (judge labels permuted);
  *LOO* is the range of r after leaving out any one judge. Pooled rows compare judges only within a
  setting. ⚠ marks rows too thin to lean on; the reason is in the last column.
"""


def _how_to_read(b: ReportBundle, out: RunFolder) -> str:
    return HOW_TO_READ


def _figure(b: ReportBundle, out: RunFolder) -> str:
    path = b.figures.get("correlation", [out.figure])[0]
    return (f"## Figure\n\n![]({Path(path).relative_to(out.root).as_posix()})\n\nOne panel per task; one colour, marker "
            "and fit-line pattern per base generator. Lines: least-squares fit, random pick (dashed), oracle pick "
            f"(dotted). {FIGURE_NOTE.format(b=b.bootstrap, s=b.seed)}\n")


def _correlations(b: ReportBundle, out: RunFolder) -> str:
    head = "## Correlation between MMRB2 accuracy and Best-of-N score\n\n"
    t = b.correlations
    if t.empty:
        return head + "No correlations (no results).\n"
    table = pd.DataFrame({
        "task": [("⚠ " if f else "") + TASK_TITLES.get(x, x) for x, f in zip(t["task"], t["flag"])],
        "generator": t["generator"], "scope": [SCOPES.get(s, s) for s in t["scope"]],
        **{label: _intervals(t, *key) if isinstance(key, tuple) else t[key] for label, key in CORRELATION_COLUMNS},
        "warning": t["warning"].fillna(""),
    })
    return head + markdown_table(table, {"r": "{:+.2f}", "ρ": "{:+.2f}", "τ": "{:+.2f}", "p (r)": fmt_p, "p (ρ)": fmt_p})


def _headroom(b: ReportBundle, out: RunFolder) -> str:
    """Random, worst-of-N, oracle and the share of prompts without spread, per task and generator."""
    h = b.headroom
    if h is None or h.empty:
        return ""
    table = pd.DataFrame({"task": [("⚠ " if w else "") + TASK_TITLES.get(t, t) for t, w in zip(h["task"], h["warning"])],
                          "generator": h["generator"], "prompts": h["prompts"], "N": h["n"], "worst": h["worst"],
                          "random": h["random"], "oracle": h["oracle"], "oracle − random": h["headroom"],
                          "± SE (random)": h["noise"], "all N alike": h["alike"], "warning": h["warning"]})
    fmt = {c: "{:.3f}" for c in ("worst", "random", "oracle", "oracle − random", "± SE (random)")}
    return ("## Headroom: how much a judge can gain\n\nPer task and generator, over the Best-of-N prompts: the mean "
            "score of the worst candidate (a judge that always picks wrong), of a random pick and of the best candidate "
            "(oracle); *all N alike* is the share of prompts whose candidates all score the same, which cannot separate "
            "judges; *± SE* is the standard error of a random pick's mean. ⚠ marks settings whose headroom is too small "
            "for a correlation across judges (the warning is repeated in the correlation table).\n\n"
            + markdown_table(table, {**fmt, "all N alike": "{:.0%}"}))


def _per_task(b: ReportBundle, out: RunFolder) -> str:
    parts = ["## Judges per task\n"]
    m = b.metrics
    if m.empty:
        return parts[0] + "No results.\n"
    cols = {"generator": "generator", "judge": "judge", "mmrb2_accuracy": "MMRB2 acc. (%)", "bon_score": "BoN score",
            "bon_ci": "BoN 95% CI", "random_score": "random", "oracle_score": "oracle", "gain": "gain",
            "gain_ci": "gain 95% CI", "recovery": "recovery", "win_rate": "win rate", "prompts": "prompts",
            "judge_calls": "judge calls", "missing_verdicts": "missing verdicts", "unscored_picks": "unscored picks"}
    if m["strategy"].nunique() > 1:
        cols = {"strategy": "strategy", **cols}
    fmt = {"MMRB2 acc. (%)": "{:.1f}", "BoN score": "{:.3f}", "random": "{:.3f}", "oracle": "{:.3f}", "gain": "{:+.3f}",
           "recovery": "{:.0%}", "win rate": "{:.2f}"}
    for task in task_order(m["task"]):
        sub = m[m["task"] == task].sort_values(["generator", "mmrb2_accuracy", "judge"], ascending=[True, False, True])
        sub = sub.assign(bon_ci=_intervals(sub, "bon_lo", "bon_hi", ".3f"), gain_ci=_intervals(sub, "gain_lo", "gain_hi", "+.3f"))
        keep = [c for c in cols if c not in ("missing_verdicts", "unscored_picks") or sub[c].sum() > 0]
        parts.append(f"### {TASK_TITLES.get(task, task)}\n\n" + markdown_table(sub[keep].rename(columns=cols), fmt))
    return "\n".join(parts)


def _interpretation(b: ReportBundle, out: RunFolder) -> str:
    return "## Interpretation\n\n" + "\n".join(f"- {line}" for line in interpret(b)) + "\n"


def interpret(b: ReportBundle) -> list[str]:
    """Plain sentences read off the numbers: strength and interval per setting, judges below chance."""
    settings = b.settings
    if settings.empty:
        return ["No task had results, so there is nothing to interpret."]
    r = settings["pearson_r"].astype(float)
    defined = settings[np.isfinite(r)]
    lines = [f"Of {len(settings)} task × generator settings, {len(defined)} have a defined correlation; "
             f"{int((defined['pearson_lo'] > 0).sum())} of these have a 95% interval for r above zero."]
    for row in settings.itertuples():
        where = f"{TASK_TITLES.get(row.task, row.task)} / {md_label(row.generator)}"
        if not np.isfinite(row.pearson_r):
            lines.append(f"{where}: correlation undefined ({row.n_judges} judge(s); it needs at least 3 and some spread "
                         "in both numbers).")
            continue
        sentence = (f"{where}: {_strength(row.pearson_r)} (r = {_signed(row.pearson_r)}, 95% CI "
                    f"{_interval(row.pearson_lo, row.pearson_hi)}, ρ = {_signed(row.spearman_rho)}, {row.n_judges} judges).")
        if row.n_judges < 5:
            sentence += f" With only {row.n_judges} judges this is anecdotal: a single judge can flip it."
        elif np.isfinite(row.pearson_lo) and row.pearson_lo <= 0 <= row.pearson_hi:
            sentence += " The interval includes zero, so the data cannot rule out no relation."
        lines.append(sentence)
    if b.headroom is not None:
        for row in b.headroom[b.headroom["warning"] != ""].itertuples():
            lines.append(f"{TASK_TITLES.get(row.task, row.task)} / {md_label(row.generator)}: {row.warning}; its correlation "
                         "says little about the judges.")
    below = leakage.worse_than_random(b.metrics, b.study)
    if not below.empty:
        lines.append("Judges that did worse than a random pick (95% interval of the gain below 0): " + ", ".join(
            f"{md_label(j)} ({TASK_TITLES.get(t, t)} / {md_label(g)})" for t, g, j in below[["task", "generator", "judge"]].itertuples(index=False)) + ".")
    uninformed = uninformed_judges(b.prompts)
    for (task, gen, judge, _), reason in uninformed.items():
        lines.append(f"{md_label(judge)} ({TASK_TITLES.get(task, task)} / {md_label(gen)}): {reason}; it picked by chance and "
                     "is never ranked best.")
    informed = [tuple(k) not in uninformed for k in b.metrics[["task", "generator", "judge", "strategy"]].itertuples(index=False)]
    kept = b.metrics[informed]
    lines.extend(_top_judge_agreement(kept[~kept["judge"].isin(b.excluded_judges)], b.excluded_judges))
    missing = int(pd.to_numeric(b.metrics["missing_verdicts"], errors="coerce").fillna(0).sum())
    if missing:
        lines.append(f"{missing} judge calls during selection gave no usable verdict; they were not counted as votes "
                     "(matches left without votes were decided by the protocol's tie rule).")
    lines.append("Correlation across a few judges shows association, not cause; the downstream verifier is itself "
                 "only a proxy for human judgement, so a weak correlation can also mean a noisy verifier.")
    return lines


def _top_judge_agreement(m: pd.DataFrame, left_out: Sequence[str] = ()) -> list[str]:
    """Does the most accurate judge also give the best Best-of-N picks? A concrete, checkable reading,
    among the judges the leakage policy keeps (``m`` without the ``left_out`` ones, named in the text)."""
    same, differ = [], []
    for (task, gen), sub in m.groupby(["task", "generator"], sort=False):
        sub = sub.dropna(subset=["mmrb2_accuracy", "bon_score"])
        if len(sub) < 2 or sub["bon_score"].nunique() < 2 or sub["mmrb2_accuracy"].nunique() < 2:
            continue
        top_acc = sub.loc[sub["mmrb2_accuracy"].idxmax(), "judge"]
        top_bon = sub.loc[sub["bon_score"].idxmax(), "judge"]
        (same if top_acc == top_bon else differ).append(f"{TASK_TITLES.get(task, task)} / {md_label(gen)}")
    out = []
    if same:
        out.append(f"The most accurate judge also gave the best Best-of-N picks in: {', '.join(same)}.")
    if differ:
        out.append(f"It did not in: {', '.join(differ)}.")
    if out and left_out:
        out[-1] += f" (Judges left out by the leakage policy: {', '.join(left_out)}.)"
    return out


def _predictors(b: ReportBundle, out: RunFolder) -> str:
    """Which MMRB2 number predicts Best-of-N, the verifier's agreement and judges sharing its grader."""
    return section_markdown(b.predictors) if b.predictors else ""


def _prediction_answer(b: ReportBundle, out: RunFolder) -> str:
    """One sentence beside the answer: how far held-out judges' gains land from their predictions."""
    p = b.prediction
    text = answer_sentence(p["summary"], p["level"]) if p else ""
    return (text + " Details: \"Will this judge help?\" below.\n") if text else ""


def _prediction(b: ReportBundle, out: RunFolder) -> str:
    """Held-out validation of ``bon predict``: leave one judge out, and one generator out (analysis.prediction)."""
    p = b.prediction
    if not p or p["summary"].empty:
        return ""
    s = p["summary"]
    pct = round(100 * p["level"])
    table = pd.DataFrame({
        "left out": ["one judge" if h == "judge" else "one generator" if h == "generator" else
                     f"{md_label(h.split(' ', 1)[1])}'s line" for h in s["holdout"]],
        "task": [TASK_TITLES.get(t, t) for t in s["task"]], "generator": s["generator"], "predictions": s["n"],
        "MAE (gain)": s["mae"], f"inside {pct}% interval": [f"{c} of {n} ({c / n:.0%})" if n else DASH
                                                        for c, n in zip(s["covered"], s["n"])],
        "Spearman ρ": s["spearman_rho"], "slope CI has 0": s["no_relation"]})
    return (f"## Will this judge help? Predicted gains of held-out judges\n\nPer task and generator, a line through the "
            "judges' MMRB2 accuracy and Best-of-N gain (the leakage policy's judges left out) predicts a judge's gain from "
            f"its accuracy with a {pct}% prediction interval (`bon predict`). Here each judge is left out in turn and "
            "predicted from the others (*one judge*); where a task has two generators, one generator's line predicts "
            "the judges' gains on the other (*X's line*). *MAE*: mean absolute error of the predicted gain; *inside*: "
            "measured gains inside their intervals; *Spearman ρ*: predicted against measured gains (pooled rows: "
            "within settings); *slope CI has 0*: predictions whose fit's slope interval contains 0, for which `bon "
            "predict` gives no number (they are scored here all the same). Every prediction: `predictions.csv`.\n\n"
            + markdown_table(table, {"MAE (gain)": "{:.3f}", "Spearman ρ": "{:+.2f}"}))


def _tradeoff(b: ReportBundle, out: RunFolder) -> str:
    """Calls per prompt against Best-of-N score for every way of running each judge (``bon tradeoff``)."""
    if not b.tradeoff or not b.tradeoff.get("records"):
        return ""
    figure = b.figures.get("tradeoff", [out.figure_file("tradeoff")])[0]
    return (tradeoff_markdown(b.tradeoff["records"], b.max_loss, Path(figure).relative_to(out.root).as_posix())
            + "\nLoss = full protocol's Best-of-N score minus the setting's, on the same prompts (95% paired bootstrap "
            "interval); *gating* is the reverse-flip analysis's verdict on the gate for this judge.\n")


def _files(b: ReportBundle, out: RunFolder) -> str:
    names = [getattr(out, name).name for name in b.tables()] + [out.report_json.name]
    return (f"## Files\n\nFull report with figures, per-judge intervals, the reranker leaderboard and sample prompts: "
            f"`{out.report_html.name}`; every number: " + ", ".join(f"`{n}`" for n in names) + f"; figures (PNG and "
            f"SVG) under `{out.figures.name}/`; every preference pair and Best-of-N match with both orders' verdicts: "
            f"`bon view --run` on this study writes `{out.viewer.name}`.\n")


SECTIONS: list[Callable[[ReportBundle, RunFolder], str]] = [
    _header, _prediction_answer, _what_was_run, _how_to_read, _figure, _correlations, _headroom, _per_task, _predictors,
    _prediction, _tradeoff, _interpretation, _files]


# --- markdown helpers ---------------------------------------------------------------------------


def markdown_table(df: pd.DataFrame, formats: Mapping[str, str | Callable[[Any], str]] | None = None) -> str:
    """A GitHub-flavoured markdown table (no ``tabulate`` needed); NaN prints as a dash, numbers right-aligned."""
    formats = dict(formats or {})
    cols = list(df.columns)
    if not cols:
        return "(empty table)\n"
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in cols]
    header = "| " + " | ".join(_cell(c) for c in cols) + " |"
    rule = "| " + " | ".join("---:" if isnum else "---" for isnum in numeric) + " |"
    body = ["| " + " | ".join(_format(v, formats.get(c)) for c, v in zip(cols, row)) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


def _format(value: Any, fmt: str | Callable[[Any], str] | None) -> str:
    if value is None or (isinstance(value, (float, np.floating)) and not np.isfinite(value)):
        return DASH
    if fmt is None:
        return f"{value:.4g}" if isinstance(value, (float, np.floating)) else _cell(value)
    text = fmt(value) if callable(fmt) else fmt.format(value)
    if text.startswith("-") and not any(ch in "123456789" for ch in text):  # "-0.000" from rounding noise
        text = fmt(0.0) if callable(fmt) else fmt.format(0.0)
    return _cell(text)


def _cell(value: Any) -> str:
    text = str(value)
    return md_label(text) if not _INTERVAL.fullmatch(text) else text


_INTERVAL = re.compile(r"\[[-+0-9.,% −–]*\]")  # "[+0.12, +0.50]" of _intervals: numbers, not a label


def _signed(v: Any) -> str:
    return f"{float(v):+.2f}" if finite(v) else DASH


def _interval(lo: Any, hi: Any, spec: str = "+.2f") -> str:
    return f"{format(float(lo), spec)} to {format(float(hi), spec)}" if finite(lo) and finite(hi) else DASH


def _intervals(t: pd.DataFrame, lo: str, hi: str, spec: str = "+.2f") -> list[str]:
    return [_interval(a, b, spec) for a, b in zip(t[lo], t[hi])]


def _strength(r: float) -> str:
    a = abs(r)
    word = "strong" if a >= 0.7 else "moderate" if a >= 0.4 else "weak" if a >= 0.2 else "no clear"
    sign = "" if word == "no clear" else (" positive" if r > 0 else " negative")
    return f"{word}{sign} correlation"
