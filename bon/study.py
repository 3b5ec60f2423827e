"""A study = suite x generators x judges x strategy x verifier, run stage by stage in one run folder.

Every stage skips work already on disk and every judge call goes through the judgment store, so an
interrupted study resumes where it stopped, and adding a judge to a finished study costs only that
judge's calls.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
import yaml

from analysis import mmrb2
from bon import registry
from bon.config import PluginSpec, StudyConfig
from bon.content import Candidate, Prompt
from bon.errors import BonError
from bon.lifecycle import LazyPlugin, check_specs, finished, loaded
from bon.progress import note
from bon.provenance import library_versions
from bon.referee import Budget, BudgetExhausted, Referee
from bon.runfolder import RunFolder, write_json, write_text
from bon.stages.analyse import results_table
from bon.stages.generate import generate
from bon.stages.judge_bench import judge_pairs
from bon.stages.preference import build_preference_set
from bon.stages.prompts import prepare_prompts, split
from bon.stages.select import select
from bon.stages.verify import load_scores, unscored, verify
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
    pending: dict[str, int] = field(default_factory=dict)  # items left by transient failures, per stage

    @property
    def pending_total(self) -> int:
        return sum(self.pending.values())


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
    """Run every stage; each model is loaded when its stage needs it and released when the stage ends
    (generators one after another, then the verifier, then the judges one at a time)."""
    run = RunFolder(cfg.out)
    record_config(run, cfg)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = round(now - clock, 2)
        clock = now

    strategy = registry.create("strategy", cfg.strategy.name, **cfg.strategy.options)
    check_specs([("generator", g) for g in cfg.generators] + [("verifier", cfg.verifier)] + [("judge", j) for j in cfg.judges])

    prompts = prepare_prompts(run, cfg)
    bon_prompts, pref_prompts = split(prompts)
    note(f"[bold]prompts[/]: {len(bon_prompts)} for Best-of-N, {len(pref_prompts)} held out for the preference set")
    lap("prompts")

    identities: dict[str, Any] = {"generators": {}, "judges": {}}
    candidates: dict[str, dict[str, list[Candidate]]] = {}
    for spec in cfg.generators:
        generator = LazyPlugin(spec, "generator")
        try:
            candidates[generator.name] = generate(run, generator, prompts, cfg.n, cfg.seed)
        finally:
            generator.close()
        identities["generators"][generator.name] = generator.identity()
    lap("generate")

    prompt_map = {p.id: p for p in prompts}
    everything = [c for by_prompt in candidates.values() for cands in by_prompt.values() for c in cands]
    verifier = LazyPlugin(cfg.verifier, "verifier")
    try:
        scores = verify(run, verifier, prompt_map, everything)
    finally:
        verifier.close()
    identities["verifier"] = verifier.identity()
    lap("verify")

    pending = {"generate": sum(len(prompts) - len(by_prompt) for by_prompt in candidates.values()),
               "verify": unscored(everything, scores)}
    if any(pending.values()):  # the preference set and the judges need every candidate and score
        return StudyOutcome(run, pd.DataFrame(), pd.DataFrame(), {"timings_s": timings}, pending=pending)

    pref_candidates = {p.id: [c for g in candidates for c in candidates[g][p.id]] for p in pref_prompts}
    pair_counts = build_preference_set(run.mmrb2, pref_prompts, pref_candidates, scores, cfg.preference, cfg.seed)
    note(f"[bold]preference set[/]: {', '.join(f'{t} {k} pairs' for t, k in pair_counts.items())}" if pair_counts else
         "[bold]preference set[/]: none (no held-out prompts in this suite), so no MMRB2 accuracy axis from this run")
    lap("preference_set")

    accuracies, judge_stats, picks, stopped = judge_and_select(run, cfg, strategy, bon_prompts, candidates, pair_counts,
                                                               identities["judges"])
    lap("judge_and_select")

    write_text(run.picks, "".join(_json_line(p) for p in picks))
    results = results_table(picks, scores, accuracies, cfg.n)
    return analyse(run, cfg, results, timings, judge_stats, pair_counts, stopped, identities)


def judge_and_select(run: RunFolder, cfg: StudyConfig, strategy, bon_prompts: list[Prompt],
                     candidates: dict[str, dict[str, list[Candidate]]], pair_counts: dict[str, int],
                     identities: dict[str, Any] | None = None):
    """Each judge answers the preference set (its MMRB2 accuracy) and picks the best of N for every
    prompt and generator, all through one store and one call budget. Judges are loaded one at a time
    and released before the next. Returns (accuracies, stats, picks, why the budget stopped it or
    None); what was done before a stop is kept."""
    store = JudgmentStore(run.store)
    budget = Budget(cfg.max_calls)
    accuracies: dict[str, dict[str, float]] = {}
    judge_stats: dict[str, Any] = {}
    picks: list[dict[str, Any]] = []
    stopped = None
    try:
        for spec in cfg.judges:
            try:
                picks += _judge_one(run, cfg, official_spec(spec, cfg.official), strategy, bon_prompts, candidates,
                                    list(pair_counts), store, budget, accuracies, judge_stats, identities)
            finally:
                finished("judge", spec.label)  # the judge's last reference died with _judge_one's frame
    except BudgetExhausted as exc:
        stopped = str(exc)
        note(f"[bold yellow]stopped[/]: {stopped}")
    finally:
        store.close()
    return accuracies, judge_stats, picks, stopped


def _judge_one(run: RunFolder, cfg: StudyConfig, spec: PluginSpec, strategy, bon_prompts: list[Prompt],
               candidates: dict[str, dict[str, list[Candidate]]], tasks: list[str], store: JudgmentStore, budget: Budget,
               accuracies: dict, judge_stats: dict, identities: dict | None) -> list[dict[str, Any]]:
    """One judge's preference-set accuracy and picks; the judge is loaded here and closed on return."""
    with loaded(spec, "judge") as judge:
        if identities is not None:
            identities[judge.name] = judge.identity()
        started = time.perf_counter()
        bench_ref = Referee(judge, store, samples=cfg.samples, budget=budget, seed=cfg.seed)
        select_ref = Referee(judge, store, samples=cfg.samples, budget=budget, seed=cfg.seed)
        accuracy, bench = judge_preference_set(run, bench_ref, tasks)
        judge_picks = select(select_ref, strategy, bon_prompts, candidates, cfg.seed)
        accuracies[judge.name] = accuracy
        judge_stats[judge.name] = {
            **_total(bench_ref.stats.as_dict(), select_ref.stats.as_dict()),
            "wall_seconds": round(time.perf_counter() - started, 2),
            "mmrb2": {**bench_ref.stats.as_dict(), "tasks": bench},
            "selection": {"strategy": strategy.name, **select_ref.stats.as_dict()},
        }
    return judge_picks


def official_spec(spec: PluginSpec, official: bool) -> PluginSpec:
    """A study's ``official: true`` asks every judge that knows MMRB2's official request conditions
    (an ``official`` option) for them; other judges are unchanged."""
    if not official:
        return spec
    import inspect

    factory = registry.resolve("judge", registry.parse_spec(spec.name)[0])
    if "official" not in inspect.signature(factory).parameters:
        return spec
    return replace(spec, options={**spec.options, "official": True})


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
                return official_spec(j, self.cfg.official).create("judge")
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
            stopped: str | None = None, provenance: dict | None = None) -> StudyOutcome:
    from analysis.correlation import correlation_table
    from analysis.full_report import build_report
    from analysis.plots import correlation_figure
    from analysis.report import write_report

    correlations = correlation_table(results)
    results.to_csv(run.results, index=False, float_format="%.6g")
    correlations.to_csv(run.correlations, index=False, float_format="%.6g")
    correlation_figure(results, correlations, run.figure)
    stats = {
        "judges": judge_stats,
        "strategy": cfg.strategy.name,
        "n": cfg.n,
        "seed": cfg.seed,
        "preference_pairs": pair_counts,
        "timings_s": timings,
        "stopped": stopped,
        "identities": provenance or {},  # what each plugin was: model, revision, settings (the store's keys)
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
    return StudyOutcome(run, results, correlations, stats, stopped)


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record) + "\n"
