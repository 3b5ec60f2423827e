"""The report bundle (the one report model): every number of a study's analysis, computed once from a run.

:func:`compute` is a function of one :class:`bon.run.Run` (``bon.load_run``: the run folder's files, each read
once) and of the other analysis modules' results; it reads no file itself, never calls a judge and writes nothing. The
renderers (:mod:`analysis.report` for markdown, :mod:`analysis.html_report` for HTML; :mod:`analysis.outputs`
writes them with the CSV tables and JSON) only format what is here, so the files can never disagree. Adding an analysis: ``analysis/README.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from analysis import leakage
from analysis.bon_metrics import apply_on_failure, bon_metrics, failure_counts, failure_policy, prompt_level, results_view, with_accuracies
from analysis.headroom import headroom_table
from analysis.leaderboard import all_leaderboards
from analysis.power import power_analysis
from analysis.prediction import LEVEL as PREDICTION_LEVEL, gain_data, validation
from analysis.predictors import bundle_records, figure_title
from analysis.statistics import (AXIS_COLUMNS, JudgeAxis, PairOutcomes, Setting, accuracy_axis,
                                 correlation_intervals, run_judge_axis, settings_from_prompts)
from analysis.tradeoff import cheapest_rows
from bon.errors import BonError
from bon.run import Run, as_run
from bon.runfolder import strict
from bon.stages.pool import named_jobs_started, run_named

DASH = "–"
SCOPES = {"setting": "", "task": "pooled over generators", "all": "pooled over everything"}
# the correlation table's number columns, report.md's and report.html's: (header, column or (lower, upper) columns)
CORRELATION_COLUMNS = [
    ("judges", "n_judges"), ("prompts", "n_prompts"), ("pairs", "n_pairs"), ("r", "pearson_r"),
    ("r 95% CI", ("pearson_lo", "pearson_hi")), ("CI (meas.)", ("pearson_lo_meas", "pearson_hi_meas")),
    ("p (r)", "pearson_p_perm"), ("LOO r", ("pearson_loo_min", "pearson_loo_max")), ("ρ", "spearman_rho"),
    ("ρ 95% CI", ("spearman_lo", "spearman_hi")), ("p (ρ)", "spearman_p_perm"), ("τ", "kendall_tau"),
    ("τ 95% CI", ("kendall_lo", "kendall_hi"))]
MIN_CORRELATION_JUDGES = 3
HEADLINE_PERMUTATIONS = 10000  # judge-label orderings behind the correlation table's p-values
OTHER_PERMUTATIONS = 1000  # ... and behind those of the other grader-judge choice, shown beside it
DEFAULT_MAX_LOSS = 0.01  # one point of a 0-1 Best-of-N score: the leaderboard's "cheapest within" loss
# rough CPU seconds of compute's parallel parts on the demo (40 prompts, N 8, 9 judges, one core): the
# costliest start first, so the two workers finish together (order only; every part is seeded on its own)
PART_COSTS = {"power": 0.4, "correlations": 0.35, "predictors": 0.2, "leaderboards": 0.2, "other": 0.2,
              "prediction": 0.1}


@dataclass
class ReportBundle:
    """A plain record of the analysis; ``figures`` is filled in when they are drawn."""

    run_dir: Path
    prompts: pd.DataFrame  # one row per pick (analysis.bon_metrics.prompt_level)
    metrics: pd.DataFrame  # one row per (task, generator, judge, strategy), with the judge's accuracy
    accuracies: pd.DataFrame  # judge x task accuracies with intervals
    accuracy_label: str
    excluded_sources: dict[str, list[str]]
    correlations: pd.DataFrame  # the one correlation table (settings and pooled rows)
    leaderboards: pd.DataFrame
    power: dict[str, Any] | None
    curves: pd.DataFrame | None
    bootstrap: int
    seed: int
    level: float
    study: dict[str, Any]  # config.yaml's study section
    versions: dict[str, Any]
    stats: dict[str, Any]  # stats.json
    figures: dict[str, list[Path]] = field(default_factory=dict)
    predictors: dict[str, Any] | None = None  # analysis.predictors.bundle_records: which MMRB2 number predicts BoN
    tradeoff: dict[str, Any] | None = None  # tradeoff.json of `bon tradeoff`: calls per prompt against BoN score
    max_loss: float = DEFAULT_MAX_LOSS
    headroom: pd.DataFrame | None = None  # analysis.headroom: random, worst, oracle and alike share per setting
    leakage: dict[str, Any] = field(default_factory=dict)  # analysis.leakage: policy, grader judges, pairs dropped
    correlations_other: pd.DataFrame | None = None  # the correlation under the other grader-judge choice
    scoring: dict[str, Any] = field(default_factory=dict)  # the verifier's metric and its failed scores (scoring_record)
    run: Run | None = field(default=None, repr=False)  # what it was computed from (the renderers' sample candidates)
    prediction: dict[str, Any] | None = None  # analysis.prediction.validation: held-out judges' predicted gains
    samples: str | None = field(default=None, repr=False)  # report.html's sample prompts, when compute rendered them
    then: dict[str, Any] = field(default_factory=dict, repr=False)  # per part, what compute's ``then`` made of it

    @property
    def excluded_judges(self) -> list[str]:
        """Judges left out of the correlation (they share the verifier's grader)."""
        return list(self.leakage.get("excluded_judges") or [])

    def cheapest(self) -> list[dict[str, Any]]:
        """Per judge, the cheapest way to run it within ``max_loss`` of the full protocol ([] without trade-off data)."""
        return cheapest_rows((self.tradeoff or {}).get("records") or [], self.max_loss)

    @property
    def results(self) -> pd.DataFrame:
        return results_view(self.metrics)

    @property
    def settings(self) -> pd.DataFrame:
        """Correlation rows of single (task, generator, strategy) settings (no pooled rows)."""
        return self.correlations[self.correlations["scope"] == "setting"].reset_index(drop=True)

    @property
    def n(self) -> int | None:
        value = self.study.get("n")  # a hand-edited `n: three` is unknown, as in run_n, not a traceback
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def what_was_run(self) -> list[tuple[str, str]]:
        """The study's settings as (label, text), shown by report.md's "What was run" and report.html's footer."""
        s, st = self.study, self.stats
        strategy = s.get("strategy")
        fields = [("Seed", s.get("seed", st.get("seed"))), ("Candidates per prompt (N)", s.get("n", st.get("n"))),
                  ("Tasks", _labels(s.get("tasks"))), ("Base generators", _labels(s.get("generators"))),
                  ("Judges", _labels(s.get("judges"))),
                  ("Selection strategy", strategy.get("name") if isinstance(strategy, Mapping) else st.get("strategy")),
                  ("Downstream verifier", _labels([s["verifier"]]) if isinstance(s.get("verifier"), Mapping) else None),
                  ("Preference pairs per task (judge accuracy set)", inline(st.get("preference_pairs"))),
                  ("Judge accuracy from", self.accuracy_label), *self.scoring_lines(), *self.leakage_lines()]
        return [(k, str(v)) for k, v in fields if v not in (None, "", {})]

    def scoring_lines(self) -> list[tuple[str, str]]:
        """Which metric scored the study and how many verifier scores failed per setting, as "What was run" lines."""
        sc = self.scoring
        if not sc:
            return []
        lines = [("Verifier metric", sc["metric"] + (f"; {sc['answers']} scores read from yes/no answers "
                                                     "(fallback_to_answer: the grader gave no log-probabilities)"
                                                     if sc.get("answers") else ""))]
        rows = sc["failed"]
        counts = "; ".join(_failed_text(r) for r in rows if r.get("best_of_n", True))
        others = [r for r in rows if not r.get("best_of_n", True)]
        if others:  # prompts without picks (the preference set's): one total, and the settings where some failed
            counts += ("; " if counts else "") + (f"prompts outside Best-of-N (e.g. the preference set's): "
                                                  f"{sum(r['failed'] for r in others)} of {sum(r['scores'] for r in others)}")
            counts += "".join(f"; {_failed_text(r)} outside Best-of-N" for r in others if r["failed"])
        lines.append(("Failed verifier scores", f"{counts or 'none'}; {sc['policy']}"))
        return lines

    def leakage_lines(self) -> list[tuple[str, str]]:
        """What the leakage guards left out (or kept), as "What was run" lines."""
        lk = self.leakage
        if not lk:
            return []
        graders = lk.get("grader_judges") or {}
        names = ", ".join(f"{j} (grader {f})" for j, f in graders.items())
        other = pooled_text(self.correlations_other)
        if not graders:
            judges = "none (no judge shares the verifier's grader)"
        elif self.excluded_judges:
            judges = (f"{names}: they share the verifier's grader, so they are left out of the correlation"
                      + (f"; with them {other}" if other else "") + " (keep them: `leakage: {grader_judges: keep}` "
                      "or `bon report --grader-judges keep`)")
        else:
            judges = (f"none; kept by choice (grader_judges: keep): {names}" + (f"; without them {other}" if other else ""))
        out = [("Judges excluded from the correlation (leakage)", judges)]
        if "pairs" not in lk:
            out.append(("Preference pairs overlapping the downstream benchmark (accuracy)",
                        f"not checked: the accuracies ({self.accuracy_label}) carry no pairs"))
        for key, label in (("pairs", "accuracy"), ("predictor_pairs", "predictor table")):
            dropped = lk.get(key)
            if dropped is None:
                continue
            total = sum(d["dropped"] for d in dropped.values())
            text = (f"{total} dropped: {leakage.pairs_text(dropped)}" if lk["policy"]["overlapping_pairs"] == "drop"
                    else "none; kept by choice (overlapping_pairs: keep)")
            rule = lk.get(f"{key}_rule")
            out.append((f"Preference pairs overlapping the downstream benchmark ({label})",
                        text + (f"; rule: {rule}" if rule else "")))
        return out

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table, keyed by the :class:`~bon.runfolder.RunFolder` property naming its CSV file."""
        out = {"results": self.results, "metrics": self.metrics, "correlations": self.correlations,
               "accuracies": self.accuracies, "leaderboard": self.leaderboards}
        if self.headroom is not None:
            out["headroom"] = self.headroom
        if self.power:
            out["power"] = self.power["grid"]
        if self.prediction is not None:
            out["predictions"] = self.prediction["rows"]
        return out

    def pooled(self) -> dict[str, Any]:
        """The headline row: pooled over every setting (or the only setting)."""
        rows = self.correlations[self.correlations["scope"] == "all"]
        rows = rows if len(rows) else self.settings
        if rows.empty:
            return {}
        keep = ("pearson_r", "pearson_lo", "pearson_hi", "pearson_p_perm", "spearman_rho", "spearman_lo",
                "spearman_hi", "n_judges")
        return strict({k: rows.iloc[0][k] for k in keep})

    def axes_sentence(self) -> str:
        """What x and y are in this study, in one sentence (the correlation figure's subtitle; report.md's and
        report.html's "The axes"): in the synthetic world, that these are not numbers about real models."""
        return figure_title(self.study).partition("\n")[2]

    def r_undefined(self) -> str | None:
        """Why the headline r is undefined (None when it is a number): too few judges, or no spread in the
        Best-of-N scores or the accuracies of any setting (the judges the leakage policy leaves out aside)."""
        pooled = self.pooled()
        if not pooled or finite(pooled.get("pearson_r")):
            return None
        m = self.metrics[~self.metrics["judge"].isin(self.excluded_judges)]
        m = m[np.isfinite(pd.to_numeric(m["mmrb2_accuracy"], errors="coerce"))
              & np.isfinite(pd.to_numeric(m["bon_score"], errors="coerce"))]
        groups = [g for _, g in m.groupby(["task", "generator"], sort=False)]
        most = max((len(g) for g in groups), default=0)
        if most < MIN_CORRELATION_JUDGES:
            return (f"at most {most} judge(s) per setting have both an MMRB2 accuracy and a Best-of-N score; a "
                    f"correlation needs {MIN_CORRELATION_JUDGES}")
        if all(g["bon_score"].nunique() < 2 for g in groups):
            scores = sorted(set(m["bon_score"].round(12)))
            same = f" (every Best-of-N score is {scores[0]:g}: the verifier scored every pick alike)" if len(scores) == 1 else ""
            return f"within every setting all judges have the same Best-of-N score{same}, so there is no spread to correlate"
        if all(g["mmrb2_accuracy"].nunique() < 2 for g in groups):
            return "within every setting all judges have the same MMRB2 accuracy, so there is no spread to correlate"
        return "too few judges, or no spread in accuracy or Best-of-N score, in every setting"

    def payload(self) -> dict[str, Any]:
        """``report.json``: strict JSON of every number."""
        power = self.power
        return strict({
            "run_dir": self.run_dir, "bootstrap": self.bootstrap, "seed": self.seed, "level": self.level,
            "accuracy_source": self.accuracy_label, "excluded_sources": self.excluded_sources,
            "stopped": self.stats.get("stopped"), "pooled": self.pooled(),
            "correlations": self.correlations, "metrics": self.metrics, "accuracies": self.accuracies,
            "leaderboards": self.leaderboards,
            "power": None if not power else {k: power[k] for k in ("model", "width", "recommendation", "grid")},
            "study": self.study, "predictors": self.predictors, "headroom": self.headroom, "leakage": self.leakage,
            "correlations_other": self.correlations_other, "scoring": self.scoring, "prediction": self.prediction,
            "tradeoff": None if not self.tradeoff else {**self.tradeoff, "cheapest_within": {
                "max_loss": self.max_loss, "judges": self.cheapest()}},
        })

    def degenerate(self) -> str | None:
        """Why this analysis says nothing (then it must not replace a report), or None."""
        if self.n is not None and self.n < 2:
            return f"N = {self.n} candidate per prompt: every judge picks the same candidate, so there is nothing to compare"
        if not np.isfinite(pd.to_numeric(self.metrics["mmrb2_accuracy"], errors="coerce")).any():
            if self.accuracy_label.startswith("published"):
                return f"no judge of this run has an accuracy in {self.accuracy_label} (no label matches a judge of its table)"
            return (f"no judge of this run has an MMRB2 accuracy (judge axis: {self.accuracy_label}); set `accuracies: "
                    "published` (or a CSV file) in the config, or run `bon report --accuracies published`")
        most = int(self.settings["n_judges"].max()) if len(self.settings) else 0
        if most < MIN_CORRELATION_JUDGES:
            return (f"at most {most} judge(s) per setting have both an accuracy and a Best-of-N score; a correlation "
                    f"needs {MIN_CORRELATION_JUDGES}")
        return None


def _failed_text(row: Mapping[str, Any]) -> str:
    """``t2i/strong: 2 of 320 on 1 prompts`` of one :func:`~analysis.bon_metrics.failure_counts` row."""
    return (f"{row['task']}/{row['generator']}: {row['failed']} of {row['scores']}"
            + (f" on {row['prompts_with_failures']} prompts" if row["failed"] else ""))


def _labels(items: Iterable[Any] | None) -> str:
    return ", ".join(str(i.get("label") or i.get("name")) if isinstance(i, Mapping) else str(i) for i in items or [])


def inline(value: Any) -> str:
    """A config or stats value as one line of text: ``t2i 160, edit 160``."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {inline(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return ", ".join(inline(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


def load_curves(run: Run | Path) -> pd.DataFrame | None:
    """Rows of every ``curves/*.json`` (``bon curve --json``) with their judge, or None when there are none."""
    rows = []
    for file, data in as_run(run).curve_records:
        for r in data.get("curve", []):
            rows.append({**r, "judge": data.get("judge", file.stem), "strategy": data.get("strategy", "")})
    return pd.DataFrame(rows) if rows else None


def fmt_p(v: Any) -> str:
    if not finite(v):
        return DASH
    return "<0.001" if float(v) < 0.001 else f"{float(v):.3f}"


def finite(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def pooled_text(table: pd.DataFrame | None) -> str:
    """``pooled r = +0.85 (95% CI +0.70 to +0.93) over 9 judges`` of a correlation table ("" without one)."""
    if table is None or table.empty:
        return ""
    rows = table[table["scope"] == "all"]
    row = (rows if len(rows) else table).iloc[0]
    if not np.isfinite(row["pearson_r"]):
        return ""
    where = "pooled " if len(rows) else ""
    ci = (f" (95% CI {row['pearson_lo']:+.2f} to {row['pearson_hi']:+.2f})"
          if np.isfinite(row["pearson_lo"]) and np.isfinite(row["pearson_hi"]) else "")
    return f"{where}r = {row['pearson_r']:+.2f}{ci} over {row['n_judges']} judges"


def judge_axis(run: Run, judges: list[str], accuracies: str | Path | JudgeAxis | None,
               exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None = None,
               overlap: leakage.Overlap | None = None) -> JudgeAxis:
    """The x axis: the run's own preference set (empty when it has none), published, a file, or a ready axis."""
    if isinstance(accuracies, JudgeAxis):
        return accuracies
    if accuracies in (None, "run"):
        try:
            return run_judge_axis(run, judges, exclude_sources, overlap)
        except BonError:
            if any(run.folder.mmrb2.glob("*.json")):
                raise  # a preference set that is there but unreadable is an error, not "none"
            return JudgeAxis("no preference set in this run", pd.DataFrame(columns=AXIS_COLUMNS))
    return accuracy_axis(accuracies, run, judges)


PredictorPairs = Callable[..., Mapping[str, PairOutcomes]]  # benchmark_task_pairs with its files bound


def compute(run: Run | Path, bootstrap: int = 1000, seed: int = 0, level: float = 0.95,
            accuracies: str | Path | JudgeAxis | None = None,
            exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None = None,
            power: bool = True, power_width: float = 0.5,
            predictor_pairs: Mapping[str, PairOutcomes] | PredictorPairs | None = None,
            predictor_source: str = "the run's preference set", max_loss: float = DEFAULT_MAX_LOSS,
            grader_judges: str | None = None, overlapping_pairs: str | None = None,
            on_failure: str | None = None, meanwhile: Callable[[], Any] | None = None,
            samples: Callable[[Run, pd.DataFrame], str] | None = None,
            then: Mapping[str, Then] | None = None) -> ReportBundle:
    """Every number of the report. ``accuracies``: None (the study config's ``accuracies:`` key, by default
    its own preference set), ``"run"``, ``"published"``, a CSV, ``JUDGE=FILE.json``
    (see :func:`analysis.statistics.accuracy_axis`) or a ready :class:`~analysis.statistics.JudgeAxis`;
    ``exclude_sources`` drops pairs of the run's own preference set by ``prompt_source``;
    ``predictor_pairs`` (:func:`analysis.predictors.benchmark_task_pairs`, or it with its files bound, so
    the leakage guard can drop overlapping pairs) replaces the run's own preference set in the predictor
    table; ``max_loss`` is the Best-of-N loss the cheapest trade-off setting may cost; ``grader_judges``
    (``exclude``/``keep``) and ``overlapping_pairs`` (``drop``/``keep``) override the config's ``leakage:``
    (:mod:`analysis.leakage`); ``on_failure`` (``official``/``zero``/``missing``) overrides the config's rule for
    failed verifier scores (:func:`analysis.bon_metrics.apply_on_failure`); ``meanwhile``: work for this process
    while the first forked workers build the judge axis and the metrics (it would only wait): ``bon report``
    and the demo import the report writer (matplotlib) then, so the parts' workers forked afterwards inherit it;
    ``samples``: renders report.html's sample prompts from the run and its picks
    (:func:`analysis.html_report.run_samples`), in a forked worker beside the one building the judge axis;
    ``then``: per part, work on the bundle with that part filled in, done in the worker that computed the part
    right after it (:class:`Then`; e.g. drawing the part's figure, so no second round of workers waits for
    every part); its results are the bundle's ``then``."""
    run = as_run(run)
    config = run.config
    study = config.get("study") or {}
    if accuracies is None:
        accuracies = study_accuracies(study)
    policy = leakage.study_policy(study, grader_judges, overlapping_pairs)
    failure = failure_policy(study, on_failure)
    stored = run.score_records
    scores, failed = apply_on_failure(stored, failure.applied)
    prompts = prompt_level(run.pick_records, scores, run.n)
    if prompts.empty:
        raise BonError(f"{run.folder.picks}: no picks")
    judges = list(dict.fromkeys(prompts["judge"]))

    down = leakage.downstream(run, set(prompts["prompt_id"]))
    own_rule = leakage.own_set_overlap(run.folder.mmrb2, down, policy)

    def axis_part() -> tuple[JudgeAxis, pd.DataFrame]:
        axis = judge_axis(run, judges, accuracies, exclude_sources, own_rule)
        return axis, axis.with_intervals(bootstrap, seed, level)

    # what needs only the picks and the run, side by side in forked workers (the costliest first) while this
    # process reads the rest and imports what the parts' workers will need (``meanwhile``)
    early = {**({"samples": lambda: samples(run, prompts)} if samples else {}), "axis": axis_part,
             "metrics": lambda: bon_metrics(prompts, bootstrap=bootstrap, seed=seed, level=level, n=run.n),
             "headroom": lambda: headroom_table(prompts, scores, run.n)}
    with named_jobs_started(early) as finished:
        stats = leakage.load_stats(run)  # rebuilt from the store when stats.json is missing
        graders = leakage.grader_judges(stats, judges)
        left_out = leakage.excluded_judges(study, stats, judges, grader_judges)
        excluded = list(left_out)
        settings = settings_from_prompts(prompts)
        scoring = scoring_record(study, failure, failure_counts(run.pick_records, stored, failed, prompt_tasks(run)),
                                 stored, (stats.get("identities") or {}).get("verifier"))
        curves = load_curves(run)
        if meanwhile is not None:
            meanwhile()
        done = finished()
    (axis, acc), headroom = done["axis"], done["headroom"]

    def correlate(leave_out: list[str], permutations: int) -> pd.DataFrame:
        table = correlation_intervals(without_judges(settings, leave_out), axis, bootstrap=bootstrap, seed=seed,
                                      level=level, permutations=permutations)
        return with_headroom_warnings(table, headroom)

    def power_study() -> dict[str, Any] | None:
        try:
            return power_analysis(run, width=power_width, prompts_grid=(25, 50, 100, 200, 400),
                                  judges_grid=(5, 8, 12, 20, 32), sims=100, bootstrap=150, seed=seed,
                                  prompts=prompts, axis=axis, excluded=left_out)
        except BonError:
            return None

    predictor_dropped: dict[str, Any] | None = None
    if callable(predictor_pairs):
        predictor_dropped = {}
        predictor_pairs = predictor_pairs(overlap=leakage.outside_overlap(down, policy), dropped=predictor_dropped)
    lk = {"policy": policy.as_dict(), "grader_judges": graders, "excluded_judges": excluded,
          "downstream_sources": sorted(down.sources.values())}
    if axis.dropped:
        lk.update(pairs=axis.dropped, pairs_rule="a pair whose prompt is one of the Best-of-N prompts (the set is "
                  "drawn from held-out prompts of the same suite, so sharing its source is by design)"
                  + (f" or whose source is one of {', '.join(policy.sources)}" if policy.sources else ""))
    if predictor_dropped is not None:
        named = sorted({*down.sources.values(), *policy.sources})
        lk.update(predictor_pairs=predictor_dropped,
                  predictor_pairs_rule=f"a pair whose prompt_source is {' or '.join(named)}" if named else
                  "none applies (the Best-of-N prompts record no source)")
    # everything but the parts below (placeholders until they come), so a part's ``then`` sees what it needs
    base = ReportBundle(
        run_dir=run.root, run=run, prompts=prompts, accuracies=acc,
        metrics=with_accuracies(done["metrics"], acc), accuracy_label=axis.label,
        excluded_sources=axis.excluded, correlations=pd.DataFrame(), leaderboards=pd.DataFrame(), power=None,
        curves=curves, bootstrap=bootstrap, seed=seed, level=level, study=study,
        versions=config.get("versions") or {}, stats=stats, tradeoff=run.tradeoff, max_loss=max_loss,
        headroom=headroom, leakage=lk, samples=done.get("samples"), scoring=scoring)
    # independent of one another, each seeded on its own: side by side in forked workers (longest first)
    parts = {
        "correlations": lambda: correlate(excluded, HEADLINE_PERMUTATIONS),
        "power": power_study if power else lambda: None,
        "leaderboards": lambda: all_leaderboards(prompts, stats, acc, bootstrap=bootstrap, seed=seed, level=level,
                                                 excluded=left_out),
        # the other choice, shown beside: the same bootstrap replicates, fewer orderings for its p-values (their
        # count is in its "permutations" column), so a study's analysis does not take twice as long
        "other": lambda: correlate([] if excluded else list(graders), OTHER_PERMUTATIONS) if graders else None,
        "predictors": lambda: bundle_records(run, prompts, stats, study, bootstrap, seed, level, predictor_pairs,
                                             predictor_source, excluded=left_out),
        "prediction": lambda: {"level": PREDICTION_LEVEL, **validation(
            gain_data(settings, prompts, axis, left_out, bootstrap, seed), seed, PREDICTION_LEVEL)},
    }
    then = then or {}
    costs = {name: PART_COSTS.get(name, 1.0) + (then[name].cost if name in then else 0.0) for name in parts}
    results = run_named({name: _followed(name, job, base, then.get(name)) for name, job in parts.items()}, costs=costs)
    fields = {PART_FIELDS.get(name, name): result for name, (result, _) in results.items()}
    return replace(base, **fields, then={name: after for name, (_, after) in results.items() if name in then})


# the bundle's field of each part whose name is not its field's
PART_FIELDS = {"other": "correlations_other"}


@dataclass(frozen=True)
class Then:
    """Work on one part's result, done in the forked worker that computed the part, right after it.

    ``run`` gets the bundle with everything but the other parts (placeholders: empty tables, None) and with
    this part filled in, and returns what the bundle's ``then`` holds for the part; ``cost``: its rough CPU
    seconds, added to the part's for the order in which the parts start."""

    run: Callable[[ReportBundle], Any]
    cost: float = 1.0


def _followed(name: str, job: Callable[[], Any], base: ReportBundle, then: Then | None) -> Callable[[], tuple[Any, Any]]:
    """``job`` as a job giving ``(result, then's result)`` (None without ``then``)."""
    def run() -> tuple[Any, Any]:
        result = job()
        return result, None if then is None else then.run(replace(base, **{PART_FIELDS.get(name, name): result}))
    return run


def prompt_tasks(run: Run) -> dict[str, str]:
    """prompt id -> task of every prompt of the run (prompts.jsonl), those without picks included."""
    return {str(p.get("id")): str(p.get("task")) for p in run.prompt_records if isinstance(p, Mapping)}


def study_accuracies(study: Mapping[str, Any]) -> str:
    """The judge axis the study's config asks for (``accuracies: preference | published | FILE``)."""
    value = study.get("accuracies") or "preference"
    return "run" if value == "preference" else str(value)


def without_judges(settings: list[Setting], judges: Iterable[str]) -> list[Setting]:
    """The settings with these judges' rows left out (a setting left without judges is dropped)."""
    drop = set(judges)
    out = []
    for s in settings:
        keep = [k for k, j in enumerate(s.judges) if j not in drop]
        if keep:
            out.append(Setting(s.task, s.generator, s.strategy, [s.judges[k] for k in keep],
                               scores=None if s.scores is None else s.scores[keep],
                               bon=None if s.bon is None else s.bon[keep], se=None if s.se is None else s.se[keep]))
    return out


def with_headroom_warnings(correlations: pd.DataFrame, headroom: pd.DataFrame) -> pd.DataFrame:
    """The correlation table with each setting's headroom warning appended (and the row flagged)."""
    notes = {(r.task, r.generator): r.warning for r in headroom.itertuples() if r.warning}
    if not notes or correlations.empty:
        return correlations
    out = correlations.copy()
    for i, row in out.iterrows():
        note = notes.get((row["task"], row["generator"]))
        if note and row["scope"] == "setting":
            out.at[i, "warning"] = "; ".join(w for w in (row["warning"], note) if w)
            out.at[i, "flag"] = True
    return out


def scoring_record(study: Mapping[str, Any], failure: Any, failed: list[dict[str, Any]],
                   scores: Mapping[Any, Mapping[str, Any]], identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Which metric scored the study (the verifier, and the ``metric`` of its identity in stats.json, else the
    one its scores record, else the config's option), the failure policy, the failed scores per setting and
    how many scores came from yes/no answers instead of log-probabilities."""
    spec = study.get("verifier") if isinstance(study.get("verifier"), Mapping) else {}
    options = spec.get("options") if isinstance(spec.get("options"), Mapping) else {}
    named = identity.get("metric") if isinstance(identity, Mapping) else None
    named = named or next((d["metric"] for d in (r.get("details") or {} for r in scores.values())
                           if isinstance(d, Mapping) and d.get("metric")), options.get("metric"))
    metric = failure.verifier + (f", metric {named}" if named else "")
    answers = sum((r.get("details") or {}).get("mode") == "answer" for r in scores.values())
    return {"metric": metric, "policy": failure.describe(), "on_failure": failure.chosen, "applied": failure.applied,
            "failed": failed, "answers": answers}

