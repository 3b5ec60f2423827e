"""Which MMRB2 number predicts Best-of-N? Several judge-side predictors against the Best-of-N outcome.

On the preference set (a run's own ``mmrb2/`` folder, or the real MMRB2 files with judgment files),
for every judge and task:

- ``overall``: official accuracy over all pairs (first sample per direction, both directions);
- ``same_model``: accuracy on pairs whose two responses come from one model (``model_name`` of
  ``response_a`` and ``response_b`` in MMRB2's files): the Best-of-N situation, N samples of one model;
- ``different_model``: accuracy on the other pairs;
- ``position_consistency``: share of pairs where the forward and the reverse answer name the same
  response (both answered);
- ``tie_missing``: share of the judge's answers that are empty, missing or neither A nor B.

On the Best-of-N side, per judge, task and generator: the picks' mean score, the gain over a random
pick and the recovery = (pick - random) / (oracle - random). Within one (task, generator) the random
and oracle levels are the same for every judge, so the correlation of a predictor with the pick
score, the gain or the recovery is one number; it is reported once, against the gain.

Intervals: bias-corrected bootstrap (:func:`analysis.statistics.bc_interval`) whose replicates
resample, jointly, the judges, the downstream prompts and the preference pairs, as the report's own
correlation table does. Every predictor is computed on the *same* replicates, so the difference
between two predictors' correlations has a paired bootstrap interval: "does same-model accuracy
predict better than overall accuracy?" is answered with that interval and a bootstrap p-value.

A judge whose grader matches the verifier's (same model, or same scoring code: a declared
``grader_family``) shares the verifier's errors, which inflates its Best-of-N score; such judges are
flagged with their residual from the line fitted on the other judges.

Everything returns plain records (lists of dicts); :func:`bundle_records` puts them into the report
bundle (:mod:`analysis.bundle`), whose renderers write ``report.md``, ``report.json`` and ``report.html``.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from bon import mmrb2
from bon.tasks import TASKS, bon_task, scorer_task
from analysis.bon_metrics import (iter_settings, multinomial_weights, setting_matrix, task_order,
                                  weighted_means)
from analysis.leakage import Overlap, drop_overlapping, grader_family, shared_grader  # noqa: F401  (re-exported)
from analysis.statistics import PairOutcomes, bc_interval, pair_outcomes, pearson, spearman
from bon.errors import BonError
from bon.run import Run, as_run
from bon.seeds import derive_seed
from analysis.markdown import md_label

PREDICTORS = {
    "overall": "accuracy, all pairs",
    "same_model": "accuracy, same-model pairs",
    "different_model": "accuracy, different-model pairs",
    "position_consistency": "position consistency",
    "tie_missing": "tie/missing rate",
}


# --- the judge side ------------------------------------------------------------------------------


def run_task_pairs(run: Run | Path, judges: Sequence[str]) -> dict[str, PairOutcomes]:
    """The run's preference set (``mmrb2/``) and its judges' judgment files, per Best-of-N task."""
    run = as_run(run)
    folder = run.folder
    out: dict[str, PairOutcomes] = {}
    for task in TASKS:
        if not (folder.mmrb2 / task.file).exists():
            continue
        files = {j: folder.judgment_file(j, task.file) for j in judges}
        judgments = {j: run.judgments(f) for j, f in files.items() if f.exists()}
        if judgments:
            out[task.name] = pair_outcomes(task.name, run.pairs(folder.mmrb2 / task.file), judgments)
    return out


def benchmark_task_pairs(bench_dir: Path, predictions: Mapping[str, Mapping[str, Path]],
                         overlap: Overlap | None = None, dropped: dict[str, Any] | None = None) -> dict[str, PairOutcomes]:
    """The real MMRB2 files in ``bench_dir`` with judgment files ``{judge: {task: file}}`` (either task
    vocabulary), per Best-of-N task: what ``bon report --accuracies`` needs for the predictor table.
    ``overlap`` (:mod:`analysis.leakage`) drops pairs drawn from the downstream benchmark; what it
    dropped per task goes into ``dropped``."""
    by_task: dict[str, dict[str, Any]] = {}
    for judge, files in predictions.items():
        for task, path in files.items():
            by_task.setdefault(scorer_task(task), {})[judge] = mmrb2.load_judgments(Path(path))
    out = {}
    for t, judgments in by_task.items():
        pairs, leaks = drop_overlapping(mmrb2.load_pairs(mmrb2.find_task_file(bench_dir, t)), bon_task(t), overlap)
        if dropped is not None:
            dropped[bon_task(t)] = leaks
        out[bon_task(t)] = pair_outcomes(bon_task(t), pairs, judgments)
    return out


def judge_records(tasks: Mapping[str, PairOutcomes]) -> list[dict[str, Any]]:
    """Per judge and task: every predictor, with the pair counts behind it."""
    rows = []
    for task, tp in tasks.items():
        values = {p: tp.rate(p) for p in PREDICTORS}
        for j, judge in enumerate(tp.judges):
            rows.append({"judge": judge, "task": task, **{p: _num(values[p][j]) for p in PREDICTORS},
                         "pairs": len(tp.pair_ids), "same_model_pairs": int(tp.same_model.sum())})
    return rows


# --- the Best-of-N side --------------------------------------------------------------------------


def bon_records(prompts: pd.DataFrame) -> list[dict[str, Any]]:
    """Per judge, task and generator: pick score, random, oracle, gain and recovery (ratio of means)."""
    rows = []
    values = {c: prompts[c].to_numpy(float) for c in ("pick_score", "random_score", "oracle_score")}
    for (task, gen, judge), at in prompts.groupby(["task", "generator", "judge"], sort=False).indices.items():
        ok = at[~np.isnan(values["pick_score"][at])]  # the rows with a scored pick
        pick, rand, orac = (_mean(values[c][ok]) if len(ok) else math.nan for c in ("pick_score", "random_score", "oracle_score"))
        rows.append({"task": task, "generator": gen, "judge": judge, "pick_score": pick, "random_score": rand,
                     "oracle_score": orac, "gain": pick - rand,
                     "recovery": (pick - rand) / (orac - rand) if orac - rand > 1e-12 else math.nan})
    return rows


def _mean(values: np.ndarray) -> float:
    """pandas' ``Series.mean`` (NaN skipped) of a float array, the same sum: NaN counted as 0, over the count."""
    missing = np.isnan(values)
    count = np.float64(len(values) - missing.sum())
    total = np.where(missing, 0.0, values).sum() if missing.any() else values.sum()
    return float(total / count) if count > 0 else math.nan


# --- correlations with paired bootstrap replicates ----------------------------------------------


def correlations(tasks: Mapping[str, PairOutcomes], prompts: pd.DataFrame, bootstrap: int = 1000, seed: int = 0,
                 level: float = 0.95) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(``predictor x task x generator -> r, rho with intervals``, ``same-model vs overall`` rows)."""
    table, paired = [], []
    diffs_all = []
    for task, gen, _strategy, sub, judges, pids in iter_settings(prompts):
        tp = tasks.get(task)
        if tp is None:
            continue
        judges = [j for j in judges if j in tp.judges]
        if len(judges) < 3:
            continue
        col = [tp.judges.index(j) for j in judges]
        scores = setting_matrix(sub, "pick_score", judges, pids)
        y = np.nanmean(np.where(np.isfinite(scores), scores, np.nan), 1)
        yb = weighted_means(scores, multinomial_weights(len(pids), bootstrap, derive_seed(seed, "pred-prompts", task, gen)))
        wp = multinomial_weights(len(tp.pair_ids), bootstrap, derive_seed(seed, "pred-pairs", task))
        jidx = np.random.default_rng(derive_seed(seed, "pred-judges", task, gen)).integers(0, len(judges), (bootstrap, len(judges)))
        yb = np.take_along_axis(yb, jidx, 1)
        reps: dict[str, dict[str, np.ndarray]] = {}
        for predictor in PREDICTORS:
            x = tp.rate(predictor)[col]
            xb = np.take_along_axis(tp.rate(predictor, wp)[:, col], jidx, 1)
            row = {"predictor": predictor, "task": task, "generator": gen, "n_judges": int(np.isfinite(x).sum())}
            reps[predictor] = {}
            for name, fn in (("r", pearson), ("rho", spearman)):
                point, rb = float(fn(x, y)), fn(xb, yb)
                lo, hi = bc_interval(rb, point, level)
                row.update({name: _num(point), f"{name}_lo": _num(lo), f"{name}_hi": _num(hi)})
                reps[predictor][name] = (point, rb)
            table.append(row)
        (p_same, rb_same), (p_all, rb_all) = reps["same_model"]["r"], reps["overall"]["r"]
        diff = rb_same - rb_all
        diffs_all.append((p_same - p_all, diff))
        paired.append(_paired_row(task, gen, p_same, p_all, diff, level))
    if len(diffs_all) > 1:
        point = float(np.mean([d[0] for d in diffs_all]))
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a replicate undefined in every setting stays NaN
            stacked = np.nanmean(np.stack([d[1] for d in diffs_all]), 0)
        paired.append(_paired_row("(all)", "(mean over settings)", math.nan, math.nan, stacked, level, point))
    return table, paired


def _paired_row(task: str, gen: str, r_same: float, r_all: float, diff: np.ndarray, level: float,
                point: float | None = None) -> dict[str, Any]:
    d = np.asarray(diff, float)
    d = d[np.isfinite(d)]
    est = (r_same - r_all) if point is None else point
    alpha = (1.0 - level) / 2.0
    lo, hi = (np.quantile(d, [alpha, 1.0 - alpha]) if d.size else (math.nan, math.nan))
    p = float(min(1.0, 2.0 * min(np.mean(d <= 0), np.mean(d >= 0)))) if d.size else math.nan
    verdict = ("same-model accuracy predicts better" if lo > 0 else "overall accuracy predicts better" if hi < 0
               else "no clear difference")
    return {"task": task, "generator": gen, "r_same_model": _num(r_same), "r_overall": _num(r_all),
            "difference": _num(est), "diff_lo": _num(lo), "diff_hi": _num(hi), "p_boot": _num(p),
            "replicates": int(d.size), "verdict": verdict}


# --- judges that share the verifier's grader ----------------------------------------------------


def flag_records(flags: Mapping[str, str], judges: Sequence[Mapping[str, Any]], bon: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For each flagged judge and setting: its gain and the residual from the line (gain on overall
    accuracy) fitted on the other judges of that setting."""
    acc = {(r["judge"], r["task"]): r["overall"] for r in judges}
    rows = []
    order = {t: i for i, t in enumerate(task_order(r["task"] for r in bon))}
    settings = {(r["task"], r["generator"]) for r in bon}
    for task, gen in sorted(settings, key=lambda s: (order[s[0]], s[1])):
        mine = [r for r in bon if r["task"] == task and r["generator"] == gen]
        for judge, family in flags.items():
            others = [(acc.get((r["judge"], task)), r["gain"]) for r in mine if r["judge"] != judge]
            others = [(x, y) for x, y in others if x is not None and np.isfinite(x) and np.isfinite(y)]
            me = [r for r in mine if r["judge"] == judge]
            if len(others) < 3 or not me or acc.get((judge, task)) is None:
                continue
            slope, intercept = np.polyfit([o[0] for o in others], [o[1] for o in others], 1)
            expected = slope * acc[(judge, task)] + intercept
            rows.append({"judge": judge, "grader_family": family, "task": task, "generator": gen,
                         "accuracy": _num(acc[(judge, task)]), "gain": _num(me[0]["gain"]),
                         "expected_gain": _num(expected), "residual": _num(me[0]["gain"] - expected)})
    return rows


# --- everything, and the report hook --------------------------------------------------------------


def records_for(tasks: Mapping[str, PairOutcomes], prompts: pd.DataFrame, flags: Mapping[str, str] | None = None,
                bootstrap: int = 1000, seed: int = 0, level: float = 0.95,
                excluded: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every record of this module for given preference pairs and Best-of-N picks; the correlations leave
    out the judges the leakage policy does (``excluded``: judge -> why), as the headline does."""
    judges = judge_records(tasks)
    bon = bon_records(prompts)
    left_out = dict(excluded or {})
    table, paired = correlations(tasks, prompts[~prompts["judge"].isin(list(left_out))], bootstrap, seed, level)
    return {"judges": judges, "best_of_n": bon, "correlations": table, "same_vs_overall": paired,
            "shared_grader": flag_records(flags or {}, judges, bon), "bootstrap": bootstrap, "seed": seed, "level": level,
            "left_out": left_out}


def bundle_records(run: Run | Path, prompts: pd.DataFrame, stats: Mapping[str, Any], study: Mapping[str, Any],
                   bootstrap: int = 1000, seed: int = 0, level: float = 0.95,
                   tasks: Mapping[str, PairOutcomes] | None = None, source: str = "the run's preference set",
                   excluded: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The report bundle's predictor records: on ``tasks`` (default: the run's own preference set), with the
    verifier's agreement with the annotators and the shared-grader flags that the study stored in
    ``stats.json``; None when the run has neither pairs nor those measurements. A judgment file that
    cannot be read skips only this table (``{"skipped": why}``), never the rest of the report."""
    agreement = stats.get("verifier_agreement") or {}
    flags = stats.get("shared_grader") or {}
    try:
        if tasks is None:
            tasks = run_task_pairs(run, list(dict.fromkeys(prompts["judge"])))
        if not tasks and not agreement and not flags:
            return None
        records = records_for(tasks, prompts, flags, bootstrap, seed, level, excluded)
    except BonError as exc:
        return {"skipped": str(exc)}
    return {**records, "verifier_agreement": agreement, "verifier": verifier_label(study), "source": source}


def section_markdown(records: Mapping[str, Any]) -> str:
    """The report section: what the axes are (with the verifier's measured agreement), then the tables."""
    if "skipped" in records:
        return f"## Which MMRB2 number predicts Best-of-N?\n\nSkipped: {records['skipped']}.\n"
    source = f" (on {records['source']})" if records.get("source") else ""
    lines = [f"## Which MMRB2 number predicts Best-of-N?{source}\n",
             what_the_axes_are(records.get("verifier") or "?", records.get("verifier_agreement") or {})]
    flags = records.get("shared_grader") or []
    if flags:
        lines.append("**Shares the verifier's grader** (its Best-of-N gain is inflated by sharing the verifier's "
                     "errors; residual = gain minus the gain the line fitted on the other judges predicts from "
                     "its accuracy):\n")
        lines.append(_table(flags, ["judge", "grader_family", "task", "generator", "accuracy", "gain", "expected_gain",
                                    "residual"]))
    lines.append("\n### Judges on the preference set (%)\n")
    lines.append(_table(records["judges"], ["judge", "task", *PREDICTORS, "pairs", "same_model_pairs"]))
    lines.append("\n### Predictor x task x generator: correlation with Best-of-N gain across judges\n")
    if records.get("left_out"):
        lines.append("Left out of these correlations, as of the headline (leakage): "
                     + "; ".join(f"{j} ({why})" for j, why in records["left_out"].items()) + ".\n")
    lines.append(f"95% bias-corrected bootstrap intervals ({records['bootstrap']} replicates resampling judges, "
                 "prompts and pairs jointly; the same replicates for every predictor). Within a setting the gain, "
                 "the pick score and the recovery give the same correlation.\n")
    rows = [{"predictor": PREDICTORS[r["predictor"]], "task": r["task"], "generator": r["generator"],
             "judges": r["n_judges"], "r": r["r"], "r 95% CI": _iv(r["r_lo"], r["r_hi"]), "ρ": r["rho"],
             "ρ 95% CI": _iv(r["rho_lo"], r["rho_hi"])} for r in records["correlations"]]
    lines.append(_table(rows, ["predictor", "task", "generator", "judges", "r", "r 95% CI", "ρ", "ρ 95% CI"]))
    lines.append("\n### Does same-model accuracy predict better than overall accuracy? (paired bootstrap)\n")
    rows = [{**r, "difference 95% CI": _iv(r["diff_lo"], r["diff_hi"]),
             "p_boot": "–" if r["p_boot"] is None else f"{r['p_boot']:.2f}"} for r in records["same_vs_overall"]]
    lines.append(_table(rows, ["task", "generator", "r_same_model", "r_overall", "difference", "difference 95% CI",
                               "p_boot", "verdict"]))
    return "\n".join(lines) + "\n"


def _table(rows: Sequence[Mapping[str, Any]], cols: Sequence[str]) -> str:
    if not rows:
        return "(none)\n"
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(_cell(r.get(c)) for c in cols) + " |")
    return "\n".join(out) + "\n"


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "–" if not math.isfinite(v) else f"{v:+.2f}" if abs(v) <= 1.0 and v != 0 else f"{v:.1f}"
    return "–" if v is None else md_label(v)


def _iv(lo: Any, hi: Any) -> str:
    ok = all(isinstance(v, float) and math.isfinite(v) for v in (lo, hi))
    return f"{lo:+.2f} to {hi:+.2f}" if ok else "–"


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def what_the_axes_are(verifier: str, agreement: Mapping[str, Mapping[str, Any]]) -> str:
    """One paragraph saying what x and y measure in this study, with the verifier's measured agreement."""
    if not agreement:
        return (f"**What the axes are.** x: each judge's accuracy on the preference set's labels; y: the score the "
                f"verifier `{verifier}` gives the judge's Best-of-N picks.\n\n")
    rows = [{"task": t, "pairs": a["pairs"], "verifier agrees with annotators": f"{100 * a['agreement']:.1f}%",
             "verifier ties": a["ties"]} for t, a in agreement.items()]
    return ("**What the axes are in this study.** x: each judge's accuracy on a preference set labelled by "
            "simulated expert annotators (several per pair, a majority consensus filter) who judge what each "
            "candidate truly shows (the synthetic world's latent truth), never the verifier; y: the score the "
            f"automatic verifier `{verifier}`, which reads pixels and text and can be wrong, gives the judge's "
            "Best-of-N picks. The numbers are about this synthetic world, not about real models.\n\n"
            "How often the verifier's score order agrees with the annotators' label on the preference set "
            "(measured; a verifier tie counts half):\n\n" + _table(rows, list(rows[0])) + "\n")


FIGURE_TITLE = "Does MMRB2 accuracy predict Best-of-N gains?"


def verifier_label(study: Mapping[str, Any]) -> str:
    """The study's verifier as config.yaml names it ("?" when it does not)."""
    spec = study.get("verifier") if isinstance(study.get("verifier"), Mapping) else {}
    return str(spec.get("label") or spec.get("name") or "?")


def figure_title(study: Mapping[str, Any]) -> str:
    """The figure's title and a subtitle saying, in one sentence, what the axes are in this study."""
    verifier = verifier_label(study)
    if (study.get("suite") or {}).get("name") == "synthetic" and study.get("preference"):
        line = (f"Synthetic world: x = accuracy against simulated annotators' labels (judged from the latent truth), "
                f"y = score of the picks by the automatic verifier '{verifier}'; not numbers about real models.")
    else:
        line = f"x = accuracy on the preference set's labels; y = score of the picks by the verifier '{verifier}'."
    return f"{FIGURE_TITLE}\n{line}"
