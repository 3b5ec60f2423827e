"""The report bundle: every number of a study's analysis, computed once from the run folder.

:func:`compute` reads only what a study leaves on disk (``picks.jsonl``, ``scores.jsonl``, ``mmrb2/``,
``stats.json``, ``config.yaml``, ``curves/*.json``, ``tradeoff.json``) and never calls a judge or writes a file. The
renderers (:mod:`analysis.report` for markdown, CSV and JSON, :mod:`analysis.html_report` for HTML)
only format what is here, so the files can never disagree. Adding an analysis: ``analysis/README.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from analysis.bon_metrics import (bon_metrics, load_prompt_level, read_config, read_json, results_view, run_n,
                                  with_accuracies)
from analysis.leaderboard import all_leaderboards, load_stats
from analysis.power import power_analysis
from analysis.predictors import bundle_records
from analysis.statistics import (AXIS_COLUMNS, JudgeAxis, PairOutcomes, accuracy_axis, correlation_intervals,
                                 run_judge_axis, settings_from_prompts)
from analysis.tradeoff import cheapest_rows, load_tradeoff
from bon.errors import BonError
from bon.runfolder import RunFolder, strict

MIN_CORRELATION_JUDGES = 3
DEFAULT_MAX_LOSS = 0.01  # one point of a 0-1 Best-of-N score: the leaderboard's "cheapest within" loss


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
                  ("Judge accuracy from", self.accuracy_label)]
        return [(k, str(v)) for k, v in fields if v not in (None, "", {})]

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table, keyed by the :class:`~bon.runfolder.RunFolder` property naming its CSV file."""
        out = {"results": self.results, "metrics": self.metrics, "correlations": self.correlations,
               "accuracies": self.accuracies, "leaderboard": self.leaderboards}
        if self.power:
            out["power"] = self.power["grid"]
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
            "study": self.study, "predictors": self.predictors,
            "tradeoff": None if not self.tradeoff else {**self.tradeoff, "cheapest_within": {
                "max_loss": self.max_loss, "judges": self.cheapest()}},
        })

    def degenerate(self) -> str | None:
        """Why this analysis says nothing (then it must not replace a report), or None."""
        if self.n is not None and self.n < 2:
            return f"N = {self.n} candidate per prompt: every judge picks the same candidate, so there is nothing to compare"
        if not np.isfinite(pd.to_numeric(self.metrics["mmrb2_accuracy"], errors="coerce")).any():
            return f"no judge of this run has an accuracy in {self.accuracy_label}"
        most = int(self.settings["n_judges"].max()) if len(self.settings) else 0
        if most < MIN_CORRELATION_JUDGES:
            return (f"at most {most} judge(s) per setting have both an accuracy and a Best-of-N score; a correlation "
                    f"needs {MIN_CORRELATION_JUDGES}")
        return None


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


def load_curves(run_dir: Path) -> pd.DataFrame | None:
    """Rows of every ``curves/*.json`` (``bon curve --json``) with their judge, or None when there are none."""
    rows = []
    for file in sorted(RunFolder(Path(run_dir), existing=True).curves.glob("*.json")):
        data = read_json(file, "curve ")
        for r in data.get("curve", []):
            rows.append({**r, "judge": data.get("judge", file.stem), "strategy": data.get("strategy", "")})
    return pd.DataFrame(rows) if rows else None


def judge_axis(run_dir: Path, judges: list[str], accuracies: str | Path | JudgeAxis | None,
               exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None = None) -> JudgeAxis:
    """The x axis: the run's own preference set (empty when it has none), published, a file, or a ready axis."""
    if isinstance(accuracies, JudgeAxis):
        return accuracies
    if accuracies in (None, "run"):
        try:
            return run_judge_axis(run_dir, judges, exclude_sources)
        except BonError:
            if any(RunFolder(run_dir, existing=True).mmrb2.glob("*.json")):
                raise  # a preference set that is there but unreadable is an error, not "none"
            return JudgeAxis("no preference set in this run", pd.DataFrame(columns=AXIS_COLUMNS))
    return accuracy_axis(accuracies, run_dir, judges)


def compute(run_dir: Path, bootstrap: int = 1000, seed: int = 0, level: float = 0.95,
            accuracies: str | Path | JudgeAxis | None = "run",
            exclude_sources: Mapping[str, Iterable[str]] | Iterable[str] | None = None,
            power: bool = True, power_width: float = 0.5, predictor_pairs: Mapping[str, PairOutcomes] | None = None,
            predictor_source: str = "the run's preference set", max_loss: float = DEFAULT_MAX_LOSS) -> ReportBundle:
    """Every number of the report. ``accuracies``: ``"run"``, ``"published"``, a CSV, ``JUDGE=FILE.json``
    (see :func:`analysis.statistics.accuracy_axis`) or a ready :class:`~analysis.statistics.JudgeAxis`;
    ``exclude_sources`` drops pairs of the run's own preference set by ``prompt_source``;
    ``predictor_pairs`` (:func:`analysis.predictors.benchmark_task_pairs`) replaces the run's own preference
    set in the predictor table; ``max_loss`` is the Best-of-N loss the cheapest trade-off setting may cost."""
    run_dir = Path(run_dir)
    prompts = load_prompt_level(run_dir)
    if prompts.empty:
        raise BonError(f"{RunFolder(run_dir, existing=True).picks}: no picks")
    axis = judge_axis(run_dir, list(dict.fromkeys(prompts["judge"])), accuracies, exclude_sources)
    stats = load_stats(run_dir)
    acc = axis.with_intervals(bootstrap, seed, level)
    metrics = with_accuracies(bon_metrics(prompts, bootstrap=bootstrap, seed=seed, level=level, n=run_n(run_dir)), acc)
    correlations = correlation_intervals(settings_from_prompts(prompts), axis, bootstrap=bootstrap, seed=seed, level=level)
    power_result = None
    if power:
        try:
            power_result = power_analysis(run_dir, width=power_width, prompts_grid=(25, 50, 100, 200, 400),
                                          judges_grid=(5, 8, 12, 20, 32), sims=100, bootstrap=150, seed=seed,
                                          prompts=prompts, axis=axis)
        except BonError:
            power_result = None
    config = read_config(run_dir)
    study = config.get("study") or {}
    return ReportBundle(
        run_dir=run_dir, prompts=prompts, metrics=metrics, accuracies=acc, accuracy_label=axis.label,
        excluded_sources=axis.excluded, correlations=correlations,
        leaderboards=all_leaderboards(prompts, stats, acc, bootstrap=bootstrap, seed=seed, level=level),
        power=power_result, curves=load_curves(run_dir), bootstrap=bootstrap, seed=seed, level=level,
        study=study, versions=config.get("versions") or {}, stats=stats,
        predictors=bundle_records(run_dir, prompts, stats, study, bootstrap, seed, level, predictor_pairs, predictor_source),
        tradeoff=load_tradeoff(run_dir), max_loss=max_loss)
