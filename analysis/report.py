"""``report.md``: the study's answer in a form a reader can check without reading the code.

It says what was run, how to read each number, shows the figure and the tables, and ends with a
short interpretation that is generated from the numbers (including how little a correlation over a
handful of judges can show), so the text never claims more than the data.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from analysis.correlation import TASK_ORDER
from analysis.plots import PLOT_COLUMNS, TASK_TITLES, correlation_figure
from bon.errors import BonError

FIGURE = "correlation.png"
OPTIONAL_COLUMNS = ("prompts", "judge_calls", "missing_verdicts", "unscored_picks")
DASH = "–"

# Context keys shown first, with the words a reader needs; any other key follows as-is.
CONTEXT_LABELS = {
    "name": "Study",
    "created": "Created",
    "seed": "Seed",
    "n": "Candidates per prompt (N)",
    "N": "Candidates per prompt (N)",
    "prompts_per_task": "Prompts per task",
    "generators": "Base generators",
    "judges": "Judges",
    "strategy": "Selection strategy",
    "verifier": "Downstream verifier",
    "verifiers": "Downstream verifiers",
    "preference_pairs": "Preference pairs per task (judge accuracy set)",
    "mmrb2": "Judge accuracy measured on",
    "config": "Config file",
}


def write_report(run_dir: Path, results: pd.DataFrame, correlations: pd.DataFrame, context: Mapping[str, Any]) -> Path:
    """Write ``run_dir/report.md`` (drawing ``correlation.png`` first if it is not there) and return its path."""
    missing = [c for c in PLOT_COLUMNS if c not in results.columns]
    if missing:
        raise BonError(f"results table lacks column(s) {', '.join(missing)} needed for the report")
    run_dir = Path(run_dir)
    if not (run_dir / FIGURE).exists():
        correlation_figure(results, correlations, run_dir / FIGURE)
    parts = [
        "# Does MMRB2 accuracy predict Best-of-N gains?\n",
        _what_was_run(context),
        _how_to_read(),
        f"## Figure\n\n![]({FIGURE})\n\nOne panel per task; one colour per base generator. Lines: least-squares fit "
        "(solid), random pick (dashed), oracle pick (dotted), each in its generator's colour.\n",
        "## Correlation between MMRB2 accuracy and Best-of-N score\n\n" + correlation_markdown(correlations),
        _per_task(with_gains(results)),
        "## Interpretation\n\n" + "\n".join(f"- {line}" for line in interpret(results, correlations)) + "\n",
    ]
    path = run_dir / "report.md"
    _write_atomic(path, "\n".join(parts))
    return path


# --- sections ---------------------------------------------------------------------------------


TIMING_KEYS = ("timings", "timings_s")
STATS_KEYS = ("stats", "judge_stats")


def _what_was_run(context: Mapping[str, Any]) -> str:
    lines = ["## What was run\n"]
    special = {*TIMING_KEYS, *STATS_KEYS, "versions"}
    seen: set[str] = set()
    for key, label in CONTEXT_LABELS.items():
        if key in context and label not in seen:
            seen.add(label)
            lines.append(f"- **{label}:** {_inline(context[key])}")
    for key, value in context.items():
        if key not in CONTEXT_LABELS and key not in special:
            lines.append(f"- **{key.replace('_', ' ').capitalize()}:** {_inline(value)}")
    for key in TIMING_KEYS:
        if context.get(key):
            t = context[key]
            rows = t.items() if isinstance(t, Mapping) else [("total", t)]
            table = pd.DataFrame([{"stage": k, "seconds": _num(v)} for k, v in rows])
            lines.append("\nTime per stage:\n\n" + markdown_table(table, {"seconds": "{:.1f}"}))
    for key in STATS_KEYS:
        if isinstance(context.get(key), Mapping) and context[key]:
            lines.append("\nJudge calls over the whole run (accuracy set and selection):\n\n" + _stats_table(context[key]))
    if context.get("versions"):
        lines.append(f"\nVersions: {_inline(context['versions'])}")
    if len(lines) == 1:
        lines.append("No run details were recorded.")
    return "\n".join(lines) + "\n"


def _stats_table(stats: Mapping[str, Any]) -> str:
    """One row per judge with its scalar counters (nested detail stays in stats.json)."""
    rows = []
    for judge, values in stats.items():
        row: dict[str, Any] = {"judge": judge}
        if isinstance(values, Mapping):
            row.update({k.replace("_", " "): v for k, v in values.items() if isinstance(v, (int, float, str))})
        rows.append(row)
    return markdown_table(pd.DataFrame(rows))


def _how_to_read() -> str:
    return """## How to read this report

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
- **Pearson r** measures a linear relation and **Spearman ρ** a monotone (rank) one, across the
  judges of one task and generator. p-values are two-sided; the 95% interval for r uses the Fisher
  transform and needs at least 4 judges. With few judges both are very uncertain.
"""


def _per_task(results: pd.DataFrame) -> str:
    out = ["## Judges per task\n"]
    tasks = [t for t in TASK_ORDER if t in set(results["task"])] + sorted(set(results["task"]) - set(TASK_ORDER))
    if not tasks:
        out.append("No results.\n")
    for task in tasks:
        sub = results[results["task"] == task].sort_values(["generator", "mmrb2_accuracy"], ascending=[True, False])
        cols = ["generator", "judge", "mmrb2_accuracy", "bon_score", "random_score", "oracle_score", "gain", "recovery"]
        if "strategy" in sub.columns and sub["strategy"].nunique() > 1:
            cols.insert(1, "strategy")
        for col in OPTIONAL_COLUMNS:  # cost and failure counts, when the run recorded them
            if col in sub.columns and (col in ("prompts", "judge_calls") or _total(sub, col) > 0):
                cols.append(col)
        table = sub[cols].rename(columns={"mmrb2_accuracy": "MMRB2 acc. (%)", "bon_score": "BoN score",
                                          "random_score": "random", "oracle_score": "oracle",
                                          **{c: c.replace("_", " ") for c in OPTIONAL_COLUMNS}})
        fmt = {"MMRB2 acc. (%)": "{:.1f}", "BoN score": "{:.3f}", "random": "{:.3f}", "oracle": "{:.3f}",
               "gain": "{:+.3f}", "recovery": "{:.0%}"}
        out.append(f"### {TASK_TITLES.get(task, task)}\n\n" + markdown_table(table, fmt))
    return "\n".join(out)


def correlation_markdown(correlations: pd.DataFrame) -> str:
    """The correlation table with a Fisher-z 95% interval for r, tasks named as in the figure."""
    if correlations is None or correlations.empty:
        return "No correlations (no results).\n"
    t = correlations.copy()
    t["task"] = t["task"].map(lambda v: TASK_TITLES.get(v, v))
    t["r 95% CI"] = [_ci_text(r, n) for r, n in zip(t["pearson_r"], t["n_judges"])]
    stats_cols = ["n_judges", "pearson_r", "r 95% CI", "pearson_p", "spearman_rho", "spearman_p"]
    t = t[[*[c for c in t.columns if c not in stats_cols], *stats_cols]]
    t = t.rename(columns={"n_judges": "judges", "pearson_r": "Pearson r", "pearson_p": "p (r)",
                          "spearman_rho": "Spearman ρ", "spearman_p": "p (ρ)"})
    return markdown_table(t, {"Pearson r": "{:+.2f}", "Spearman ρ": "{:+.2f}", "p (r)": _p, "p (ρ)": _p})


# --- numbers ----------------------------------------------------------------------------------


def with_gains(results: pd.DataFrame) -> pd.DataFrame:
    """Add ``gain`` (BoN − random) and ``recovery`` ((BoN − random) / (oracle − random), NaN when oracle = random)."""
    out = results.copy()
    bon, rnd, orc = (pd.to_numeric(out[c], errors="coerce") for c in ("bon_score", "random_score", "oracle_score"))
    out["gain"] = bon - rnd
    span = orc - rnd
    out["recovery"] = (bon - rnd) / span.where(span.abs() > 1e-12)
    return out


def fisher_ci(r: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Approximate confidence interval for Pearson r (NaN when n < 4 or r undefined)."""
    if n is None or n < 4 or r is None or not np.isfinite(r):
        return (math.nan, math.nan)
    from scipy.stats import norm

    z = math.atanh(min(max(r, -0.999999), 0.999999))
    half = norm.ppf(0.5 + level / 2) / math.sqrt(n - 3)
    return (math.tanh(z - half), math.tanh(z + half))


def interpret(results: pd.DataFrame, correlations: pd.DataFrame) -> list[str]:
    """Plain sentences read off the numbers: strength per setting, uncertainty, and judges below chance."""
    if correlations is None or correlations.empty:
        return ["No task had results, so there is nothing to interpret."]
    r_all = correlations["pearson_r"].astype(float)
    defined = r_all[np.isfinite(r_all)]
    lines = [f"Of {len(correlations)} task × generator settings, {len(defined)} have a defined correlation; "
             f"{int((defined >= 0.7).sum())} of these are strongly positive (r ≥ 0.7), "
             f"{int(((defined >= 0.4) & (defined < 0.7)).sum())} moderately positive and "
             f"{int((defined < 0).sum())} negative."]
    for _, row in correlations.iterrows():
        where = f"{TASK_TITLES.get(row['task'], row['task'])} / {row['generator']}"
        r, rho, n = row["pearson_r"], row["spearman_rho"], int(row["n_judges"])
        if not np.isfinite(r):
            lines.append(f"{where}: correlation undefined ({n} judge(s); it needs at least 3 and some spread "
                         "in both numbers).")
            continue
        lo, hi = fisher_ci(r, n)
        ci = f", 95% CI for r {lo:+.2f} to {hi:+.2f}" if np.isfinite(lo) else ""
        sentence = f"{where}: {_strength(r)} (r = {r:+.2f}, ρ = {rho:+.2f}, {n} judges{ci})."
        if n < 5:
            sentence += f" With only {n} judges this is anecdotal: a single judge can flip it."
        elif np.isfinite(lo) and lo <= 0 <= hi:
            sentence += " The interval includes zero, so the data cannot rule out no relation."
        lines.append(sentence)
    g = with_gains(results)
    below = g[g["gain"] < 0]
    if not below.empty:
        names = ", ".join(f"{j} ({TASK_TITLES.get(t, t)} / {gen})"
                          for t, gen, j in below[["task", "generator", "judge"]].itertuples(index=False))
        lines.append(f"Judges that did worse than a random pick: {names}.")
    lines.extend(_top_judge_agreement(g))
    missing = int(_total(g, "missing_verdicts"))
    if missing:
        lines.append(f"{missing} judge calls during selection gave no usable verdict; they were not counted as votes "
                     "(matches left without votes were decided by the protocol's tie rule).")
    lines.append("Correlation across a few judges shows association, not cause; the downstream verifier is itself "
                 "only a proxy for human judgement, so a weak correlation can also mean a noisy verifier.")
    return lines


def _top_judge_agreement(g: pd.DataFrame) -> list[str]:
    """Does the most accurate judge also give the best Best-of-N picks? A concrete, checkable reading."""
    same, differ = [], []
    for (task, gen), sub in g.groupby(["task", "generator"], sort=False):
        sub = sub.dropna(subset=["mmrb2_accuracy", "bon_score"])
        if len(sub) < 2 or sub["bon_score"].nunique() < 2 or sub["mmrb2_accuracy"].nunique() < 2:
            continue
        top_acc = sub.loc[sub["mmrb2_accuracy"].idxmax(), "judge"]
        top_bon = sub.loc[sub["bon_score"].idxmax(), "judge"]
        (same if top_acc == top_bon else differ).append(f"{TASK_TITLES.get(task, task)} / {gen}")
    out = []
    if same:
        out.append(f"The most accurate judge also gave the best Best-of-N picks in: {', '.join(same)}.")
    if differ:
        out.append(f"It did not in: {', '.join(differ)}.")
    return out


def _strength(r: float) -> str:
    a = abs(r)
    word = "strong" if a >= 0.7 else "moderate" if a >= 0.4 else "weak" if a >= 0.2 else "no clear"
    sign = "" if word == "no clear" else (" positive" if r > 0 else " negative")
    return f"{word}{sign} correlation"


# --- markdown ---------------------------------------------------------------------------------


def markdown_table(df: pd.DataFrame, formats: Mapping[str, str | Callable[[Any], str]] | None = None) -> str:
    """A GitHub-flavoured markdown table (no ``tabulate`` needed); NaN prints as a dash, numbers right-aligned."""
    formats = dict(formats or {})
    cols = list(df.columns)
    if not cols:
        return "(empty table)\n"
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in cols]
    header = "| " + " | ".join(_cell(c) for c in cols) + " |"
    rule = "| " + " | ".join("---:" if isnum else "---" for isnum in numeric) + " |"
    body = []
    for row in df.itertuples(index=False):
        body.append("| " + " | ".join(_format(v, formats.get(c)) for c, v in zip(cols, row)) + " |")
    return "\n".join([header, rule, *body]) + "\n"


def _format(value: Any, fmt: str | Callable[[Any], str] | None) -> str:
    if value is None or (isinstance(value, (float, np.floating)) and not np.isfinite(value)):
        return DASH
    if fmt is None:
        if isinstance(value, (float, np.floating)):
            return f"{value:.4g}"
        return _cell(value)
    text = fmt(value) if callable(fmt) else fmt.format(value)
    if text.startswith("-") and not any(ch in "123456789" for ch in text):  # "-0.000" from rounding noise
        text = fmt(0.0) if callable(fmt) else fmt.format(0.0)
    return _cell(text)


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _ci_text(r: float, n: Any) -> str:
    lo, hi = fisher_ci(r, int(n))
    return f"{lo:+.2f} to {hi:+.2f}" if np.isfinite(lo) else DASH


def _total(df: pd.DataFrame, col: str) -> float:
    return float(pd.to_numeric(df[col], errors="coerce").fillna(0).sum()) if col in df.columns else 0.0


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_inline(v)}" for k, v in value.items()) or DASH
    if isinstance(value, (list, tuple, set)):
        return ", ".join(_inline(v) for v in value) or DASH
    if isinstance(value, float):
        return f"{value:g}"
    return _cell(value)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- bootstrap intervals, permutation tests, leave-one-judge-out (analysis.full_report) ---------------

STATS_BEGIN = "<!-- bon:statistics -->"
STATS_END = "<!-- /bon:statistics -->"


def statistics_markdown(intervals: pd.DataFrame, metrics: pd.DataFrame | None = None, bootstrap: int | None = None,
                        seed: int | None = None) -> str:
    """The uncertainty section: every coefficient with its interval, p-value, leave-one-out range and warning."""
    lines = ["## Uncertainty: intervals, permutation tests and leave-one-judge-out\n",
             f"Intervals are 95% bias-corrected percentile bootstrap intervals ({bootstrap or '?'} replicates, seed "
             f"{seed if seed is not None else '?'}) whose replicates resample the judges, the downstream prompts and the "
             "MMRB2 pairs at once; *CI (meas.)* keeps the judges fixed (prompts and pairs only: how much these judges' "
             "coefficient moves with new prompts and pairs, not an interval for judges in general). Bounds carry Monte "
             "Carlo error (about ±0.1 for lower bounds at 1,000 replicates). *p* is a two-sided permutation "
             "p-value (judge labels permuted). *LOO* is the range of r after leaving out any one judge. Pooled rows "
             "compare judges only within a setting. ⚠ marks rows too thin to lean on; the reason is in the last "
             "column. These numbers replace the Fisher interval above, which assumes normal data and ignores "
             "measurement noise.\n"]
    if intervals is None or intervals.empty:
        return "\n".join(lines + ["No correlations.\n"])
    t = intervals.copy()

    def iv(lo: Any, hi: Any) -> str:
        return f"{lo:+.2f} to {hi:+.2f}" if np.isfinite(lo) and np.isfinite(hi) else DASH

    table = pd.DataFrame({
        "task": [("⚠ " if f else "") + TASK_TITLES.get(x, x) for x, f in zip(t["task"], t["flag"])],
        "generator": t["generator"],
        "judges": t["n_judges"], "prompts": t["n_prompts"], "pairs": t["n_pairs"],
        "r": t["pearson_r"], "r 95% CI": [iv(a, b) for a, b in zip(t["pearson_lo"], t["pearson_hi"])],
        "CI (meas.)": [iv(a, b) for a, b in zip(t["pearson_lo_meas"], t["pearson_hi_meas"])],
        "p (r)": t["pearson_p_perm"], "LOO r": [iv(a, b) for a, b in zip(t["pearson_loo_min"], t["pearson_loo_max"])],
        "ρ": t["spearman_rho"], "ρ 95% CI": [iv(a, b) for a, b in zip(t["spearman_lo"], t["spearman_hi"])],
        "p (ρ)": t["spearman_p_perm"],
        "τ": t["kendall_tau"], "τ 95% CI": [iv(a, b) for a, b in zip(t["kendall_lo"], t["kendall_hi"])],
        "p (τ)": t["kendall_p_perm"], "warning": t["warning"].fillna(""),
    })
    lines.append(markdown_table(table, {"r": "{:+.2f}", "ρ": "{:+.2f}", "τ": "{:+.2f}", "p (r)": _p, "p (ρ)": _p,
                                        "p (τ)": _p}))
    if metrics is not None and not metrics.empty:
        m = metrics.copy()
        lines.append("\n### Best-of-N with intervals over prompts\n")
        lines.append("Gain = BoN − random; recovery = gain / (oracle − random); win rate = P(pick beats another "
                     "candidate of the prompt), ties half; rank 1 = best of N.\n")
        mt = pd.DataFrame({
            "task": [TASK_TITLES.get(x, x) for x in m["task"]], "generator": m["generator"], "judge": m["judge"],
            "BoN": m["bon_score"], "BoN 95% CI": [f"{a:.3f} to {b:.3f}" if np.isfinite(a) and np.isfinite(b) else DASH
                                                  for a, b in zip(m["bon_lo"], m["bon_hi"])],
            "gain": m["gain"], "gain 95% CI": [f"{a:+.3f} to {b:+.3f}" if np.isfinite(a) and np.isfinite(b) else DASH
                                               for a, b in zip(m["gain_lo"], m["gain_hi"])],
            "recovery": m["recovery"], "win rate": m["win_rate"], "mean rank": m["mean_rank"],
        })
        lines.append(markdown_table(mt, {"BoN": "{:.3f}", "gain": "{:+.3f}", "recovery": "{:.0%}", "win rate": "{:.2f}",
                                         "mean rank": "{:.2f}"}))
    return "\n".join(lines)


def append_statistics(run_dir: Path, intervals: pd.DataFrame, metrics: pd.DataFrame | None = None,
                      bootstrap: int | None = None, seed: int | None = None, extra: str = "") -> Path:
    """Add (or replace) the uncertainty section of ``run_dir/report.md``; idempotent."""
    path = Path(run_dir) / "report.md"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Does MMRB2 accuracy predict Best-of-N gains?\n"
    block = f"{STATS_BEGIN}\n{statistics_markdown(intervals, metrics, bootstrap, seed)}\n{extra}{STATS_END}\n"
    if STATS_BEGIN in text and STATS_END in text:
        head, rest = text.split(STATS_BEGIN, 1)
        tail = rest.split(STATS_END, 1)[1].lstrip("\n")
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block
    _write_atomic(path, text)
    return path
