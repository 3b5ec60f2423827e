"""A study = suite x generators x judges x strategy x verifier, run stage by stage in one run folder.

Every stage skips work already on disk and every judge call goes through the judgment store, so an
interrupted study resumes where it stopped, and adding a judge to a finished study costs only that
judge's calls.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import yaml

from analysis import mmrb2
from bon import registry
from bon.config import StudyConfig
from bon.content import Candidate, Prompt
from bon.errors import BonError
from bon.progress import note
from bon.provenance import library_versions
from bon.referee import Budget, BudgetExhausted, Referee
from bon.runfolder import RunFolder, write_json, write_text
from bon.stages.analyse import results_table
from bon.stages.generate import generate
from bon.stages.judge_bench import judge_pairs
from bon.stages.preference import build_preference_set, verifier_agreement
from bon.stages.prompts import prepare_prompts, split
from bon.stages.pool import BufferedStore, flush_into, run_jobs, worker_count
from bon.stages.select import select
from bon.stages.verify import load_scores, verify
from bon.store import JudgmentStore

# What fixes the prompts and candidates of a run folder; changing any of it needs a new folder.
FROZEN_KEYS = ("seed", "n", "tasks", "suite", "generators", "verifier", "preference")


@dataclass
class StudyOutcome:
    run: RunFolder
    results: pd.DataFrame
    correlations: pd.DataFrame
    stats: dict[str, Any] = field(default_factory=dict)
    stopped: str | None = None  # why the study stopped early (a call budget), if it did


def record_config(run: RunFolder, cfg: StudyConfig) -> None:
    """Write the resolved config with provenance; refuse a folder that holds a different study."""
    wanted = cfg.as_dict()
    if run.config.exists():
        previous = yaml.safe_load(run.config.read_text(encoding="utf-8")) or {}
        old = previous.get("study", {})
        changed = [k for k in FROZEN_KEYS if k in old and old[k] != wanted[k]]
        if changed:
            raise BonError(
                f"{run.config}: this run folder holds a study with other {', '.join(changed)}; "
                "use a new output folder (or the same settings to resume)"
            )
    provenance = {"study": wanted, "versions": library_versions(), "platform": platform.platform(), "written": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_text(run.config, yaml.safe_dump(provenance, sort_keys=False))


def run_study(cfg: StudyConfig) -> StudyOutcome:
    run = RunFolder(cfg.out)
    record_config(run, cfg)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = round(now - clock, 2)
        clock = now

    generators = [spec.create("generator") for spec in cfg.generators]
    judges = [spec.create("judge") for spec in cfg.judges]
    verifier = cfg.verifier.create("verifier")
    strategy = registry.create("strategy", cfg.strategy.name, **cfg.strategy.options)

    prompts = prepare_prompts(run, cfg)
    bon_prompts, pref_prompts = split(prompts)
    note(f"[bold]prompts[/]: {len(bon_prompts)} for Best-of-N, {len(pref_prompts)} held out for the preference set")
    lap("prompts")

    # each generator writes its own candidates file, so forkable ones generate in parallel
    by_generator = list(run_jobs(lambda i: generate(run, generators[i], prompts, cfg.n, cfg.seed), len(generators),
                                 worker_count(generators, len(generators))))
    candidates: dict[str, dict[str, list[Candidate]]] = {g.name: c for g, c in zip(generators, by_generator)}
    lap("generate")

    prompt_map = {p.id: p for p in prompts}
    everything = [c for by_prompt in candidates.values() for cands in by_prompt.values() for c in cands]
    scores = verify(run, verifier, prompt_map, everything)
    lap("verify")

    pref_candidates = {p.id: [c for g in candidates for c in candidates[g][p.id]] for p in pref_prompts}
    preference = build_preference_set(run.mmrb2, pref_prompts, pref_candidates, cfg.preference, cfg.seed)
    pair_counts = preference.counts()
    agreement = verifier_agreement(preference, scores)  # measured after the fact: the set never saw scores
    note(f"[bold]preference set[/]: {', '.join(f'{t} {k} pairs' for t, k in pair_counts.items())}" if pair_counts else
         "[bold]preference set[/]: none (no held-out prompts in this suite), so no MMRB2 accuracy axis from this run")
    lap("preference_set")

    accuracies, judge_stats, picks, stopped = judge_and_select(run, cfg, judges, strategy, bon_prompts, candidates, pair_counts)
    lap("judge_and_select")

    write_text(run.picks, "".join(_json_line(p) for p in picks))
    results = results_table(picks, scores, accuracies, cfg.n)
    provenance = {"verifier": verifier.identity(), "generators": {g.name: g.identity() for g in generators},
                  "judges": {j.name: j.identity() for j in judges}}
    from analysis.predictors import shared_grader

    honesty = {"verifier_agreement": agreement, "shared_grader": shared_grader(judges, verifier),
               "skipped_without_truth": preference.skipped_no_truth}
    return analyse(run, cfg, results, timings, judge_stats, pair_counts, stopped, provenance, honesty)


def judge_and_select(run: RunFolder, cfg: StudyConfig, judges: list, strategy, bon_prompts: list[Prompt],
                     candidates: dict[str, dict[str, list[Candidate]]], pair_counts: dict[str, int]):
    """Each judge answers the preference set (its MMRB2 accuracy) and picks the best of N for every
    prompt and generator, all through one store and one call budget. Returns (accuracies, stats,
    picks, why the budget stopped it or None); what was done before a stop is kept.

    Forkable judges (cheap CPU ones) run in parallel worker processes when no call budget is set;
    the store is then written here, in judge order, from what each worker buffered."""
    store = JudgmentStore(run.store)
    budget = Budget(cfg.max_calls)
    accuracies: dict[str, dict[str, float]] = {}
    judge_stats: dict[str, Any] = {}
    picks: list[dict[str, Any]] = []
    stopped = None
    workers = worker_count(judges, len(judges)) if cfg.max_calls is None else 1

    def one_judge(i: int) -> dict[str, Any]:
        own = BufferedStore(run.store) if workers > 1 else store
        done = _judge_one(run, cfg, judges[i], own, budget, strategy, bon_prompts, candidates, pair_counts)
        return {**done, "pending": own.pending()} if isinstance(own, BufferedStore) else done

    try:
        for i, done in enumerate(run_jobs(one_judge, len(judges), workers)):
            judge = judges[i]
            if "pending" in done:
                flush_into(store, done.pop("pending"))
            accuracies[judge.name] = done["accuracy"]
            picks += done["picks"]
            judge_stats[judge.name] = done["stats"]
    except BudgetExhausted as exc:
        stopped = str(exc)
        note(f"[bold yellow]stopped[/]: {stopped}")
    finally:
        store.close()
    return accuracies, judge_stats, picks, stopped


def _judge_one(run: RunFolder, cfg: StudyConfig, judge, store: JudgmentStore, budget: Budget, strategy,
               bon_prompts: list[Prompt], candidates: dict[str, dict[str, list[Candidate]]],
               pair_counts: dict[str, int]) -> dict[str, Any]:
    """One judge's preference-set accuracy, picks and call statistics."""
    started = time.perf_counter()
    bench_ref = Referee(judge, store, samples=cfg.samples, budget=budget, seed=cfg.seed)
    select_ref = Referee(judge, store, samples=cfg.samples, budget=budget, seed=cfg.seed)
    accuracy, bench = judge_preference_set(run, bench_ref, list(pair_counts))
    judge_picks = select(select_ref, strategy, bon_prompts, candidates, cfg.seed)
    stats = {
        **_total(bench_ref.stats.as_dict(), select_ref.stats.as_dict()),
        "wall_seconds": round(time.perf_counter() - started, 2),
        "mmrb2": {**bench_ref.stats.as_dict(), "tasks": bench},
        "selection": {"strategy": strategy.name, **select_ref.stats.as_dict()},
    }
    return {"accuracy": accuracy, "picks": judge_picks, "stats": stats}


def _total(*parts: dict[str, Any]) -> dict[str, Any]:
    """Sum the numeric counters of several CallStats dicts (reasons merged)."""
    total: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict):
                merged = total.setdefault(key, {})
                for k, v in value.items():
                    merged[k] = merged.get(k, 0) + v
            else:
                total[key] = round(total.get(key, 0) + value, 6)
    return total


@dataclass
class FinishedStudy:
    """What later commands (``bon select``, ``bon curve``) read back from a run folder."""

    run: RunFolder
    cfg: StudyConfig
    prompts: list[Prompt]  # the Best-of-N prompts
    candidates: dict[str, dict[str, list[Candidate]]]  # generator -> prompt id -> candidates
    scores: dict

    def judge(self, spec: str, options: dict[str, Any] | None = None) -> Any:
        """A judge by its label in the study's config, else by registry spec."""
        for j in self.cfg.judges:
            if j.label == spec and not options:
                return j.create("judge")
        return registry.create("judge", spec, **(options or {}))


def read_study_config(run: RunFolder) -> StudyConfig:
    """The study configuration saved in the run folder's ``config.yaml`` (its ``study`` section)."""
    from bon.config import parse_config

    study = (yaml.safe_load(run.config.read_text(encoding="utf-8")) or {}).get("study")
    if not isinstance(study, dict):
        raise BonError(f"{run.config}: no 'study' section")
    return parse_config({k: v for k, v in study.items() if v is not None}, where=str(run.config))


def load_study(run_dir) -> FinishedStudy:
    from bon.stages.generate import load_done

    run = RunFolder(run_dir)
    if not run.config.exists() or not run.prompts.exists():
        raise BonError(f"{run.root}: not a study folder (no config.yaml or prompts.jsonl); run `bon run` or `bon demo` first")
    cfg = read_study_config(run)
    prompts, _ = split(prepare_prompts(run, cfg))
    candidates = {}
    for g in cfg.generators:
        done = load_done(run, g.label, cfg.n)
        missing = [p.id for p in prompts if p.id not in done]
        if missing:
            raise BonError(f"{run.candidates(g.label)}: no complete candidates for prompt {missing[0]} "
                           f"({len(missing)} prompts unfinished); rerun the study first")
        candidates[g.label] = {p.id: done[p.id] for p in prompts}
    return FinishedStudy(run, cfg, prompts, candidates, load_scores(run))


def judge_preference_set(run: RunFolder, referee: Referee, tasks: list[str]) -> tuple[dict[str, float], dict[str, Any]]:
    """The judge's official-semantics accuracy on each task of the mini preference set."""
    accuracy: dict[str, float] = {}
    detail: dict[str, Any] = {}
    for task in tasks:
        judgments = judge_pairs(run.mmrb2, task, referee)
        task_file = mmrb2.TASK_FILES[mmrb2.scorer_task(task)]
        mmrb2.write_judgments(run.judgment_file(referee.judge.name, task_file), judgments)
        pairs = mmrb2.load_pairs(run.mmrb2 / task_file)
        result = mmrb2.accuracy(pairs, judgments)
        accuracy[task] = result["accuracy"]
        detail[task] = {k: result[k] for k in ("accuracy", "correct", "judgements", "evaluated_pairs", "missing_pairs")}
    return accuracy, detail


def analyse(run: RunFolder, cfg: StudyConfig, results: pd.DataFrame, timings: dict, judge_stats: dict, pair_counts: dict,
            stopped: str | None = None, provenance: dict | None = None, honesty: dict | None = None) -> StudyOutcome:
    from analysis.correlation import correlation_table
    from analysis.full_report import build_report
    from analysis.plots import correlation_figure
    from analysis.report import write_report

    correlations = correlation_table(results)
    results.to_csv(run.results, index=False, float_format="%.6g")
    correlations.to_csv(run.correlations, index=False, float_format="%.6g")
    stats = {
        "judges": judge_stats,
        "strategy": cfg.strategy.name,
        "n": cfg.n,
        "seed": cfg.seed,
        "preference_pairs": pair_counts,
        "timings_s": timings,
        "stopped": stopped,
        "identities": provenance or {},  # what each plugin was: model, revision, settings (the store's keys)
        **(honesty or {}),  # verifier vs annotators, judges sharing the verifier's grader
        "versions": library_versions(),
    }
    write_json(run.stats, stats)
    context = {
        "seed": cfg.seed,
        "n": cfg.n,
        "strategy": cfg.strategy.name,
        "generators": [g.label for g in cfg.generators],
        "judges": [j.label for j in cfg.judges],
        "verifier": cfg.verifier.label,
        "preference_pairs": pair_counts,
        "timings_s": timings,
        "versions": stats["versions"],
        "stats": judge_stats,
    }
    write_report(run.root, results, correlations, context)
    try:  # intervals, leaderboard, report.html: read from the files just written, never a judge call
        build_report(run.root, seed=cfg.seed, power=False)  # `bon power` plans study sizes on request
    except BonError as exc:
        note(f"[bold yellow]report.html skipped[/]: {exc}")
        correlation_figure(results, correlations, run.figure)  # build_report draws it, with intervals, otherwise
    _predictor_section(run, cfg, honesty or {})
    return StudyOutcome(run, results, correlations, stats, stopped)


def _predictor_section(run: RunFolder, cfg: StudyConfig, honesty: dict) -> None:
    """Which MMRB2 number predicts Best-of-N, the verifier's agreement with the annotators, and
    judges sharing the verifier's grader, into report.md and report.json (issue 15)."""
    from analysis.predictors import add_to_report, predictor_report, what_the_axes_are

    try:
        records = predictor_report(run.root, honesty.get("shared_grader"), seed=cfg.seed)
    except BonError as exc:
        note(f"[bold yellow]predictor table skipped[/]: {exc}")
        return
    records["verifier_agreement"] = honesty.get("verifier_agreement", {})
    add_to_report(run.root, records, what_the_axes_are(cfg.verifier.label, records["verifier_agreement"]))


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record) + "\n"
