"""A study = suite x generators x judges x strategy x verifier, run stage by stage in one run folder.

Every stage skips work already on disk and every judge call goes through the judgment store, so an
interrupted study resumes where it stopped, and adding a judge to a finished study costs only that
judge's calls.
"""

from __future__ import annotations

import bisect
import itertools
import json
import platform
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd
import yaml

from bon import mmrb2, registry
from bon.accounting import JUDGE_STAGES, Ledger, judge_accounting, resume_message
from bon.config import PluginSpec, StudyConfig, read_yaml
from bon.content import Candidate, ImageItem, Prompt, decode_images
from bon.image_cache import IMAGES, estimated_bytes, part_count, release_freed
from bon.errors import BonError, Stopped, first_line
from bon.executors import create_executor
from bon.lifecycle import LazyPlugin, check_specs, check_values, finished, loaded
from bon.mmrb2 import Pair, find_task_file, load_pairs
from bon.progress import bar, muted, note
from bon.provenance import library_versions
from bon.redact import redact
from bon.referee import Budget, CallStats, Referee
from bon.runfolder import RunFolder, check_n, write_json, write_text
from bon.recorded import (grader_view, official_spec, read_study_config, recorded_or_rebuilt_stats,  # noqa: F401
                          recorded_study)
from bon.runlock import writer_lock
from bon.shards import shard_prompts
from bon.stages.generate import generate
from bon.stages.judge_bench import forget_decoded, judge_pairs, keep_decoded, pair_images, share_images
from bon.stages.pool import cpu_workers, run_jobs, usable_cores, worker_count
from bon.stages.preference import build_preference_set, verifier_agreement
from bon.stages.prompts import build_prompts, prepare_prompts, split
from bon.stages.select import prompt_by_prompt, select, strategy_label
from bon.stages.verify import load_scores, unscored, verify
from bon.store import JudgmentStore, new_invocation_id
from bon.tasks import parse_task

# What fixes the prompts and candidates of a run folder; changing any of it needs a new folder.
FROZEN_KEYS = ("seed", "n", "tasks", "suite", "generators", "verifier", "preference", "shard")
PROVENANCE_KEYS = ("versions", "platform", "written")  # beside ``study`` in config.yaml; ignored on input


@dataclass
class StudyOutcome:
    run: RunFolder
    results: pd.DataFrame
    correlations: pd.DataFrame
    stats: dict[str, Any] = field(default_factory=dict)
    stopped: str | None = None  # why the study stopped early (a call budget), if it did
    pending: dict[str, int] = field(default_factory=dict)  # items left by transient failures, per stage


def record_config(run: RunFolder, cfg: StudyConfig) -> None:
    """Write the resolved config with provenance; refuse a folder whose *recorded* work came from a
    different study. A config left by a start that failed before producing anything never blocks."""
    wanted = redact(cfg.as_dict())  # compared as recorded: a key in a URL or serve args is never written
    if run.config.exists():
        previous = read_yaml(run.config) or {}
        old = previous.get("study") if isinstance(previous, dict) else None
        old = old if isinstance(old, dict) else {}
        changed = [k for k in FROZEN_KEYS if k in old and old[k] != wanted[k] and _recorded(run, k, old)]
        if changed:
            raise BonError(
                f"{run.config}: this run folder holds a study with other {', '.join(changed)}; "
                "use a new output folder (or the same settings to resume)"
            )
    provenance = dict(zip(PROVENANCE_KEYS, (library_versions(), platform.platform(), time.strftime("%Y-%m-%dT%H:%M:%S"))))
    write_text(run.config, yaml.safe_dump({"study": wanted, **provenance}, sort_keys=False))


def _recorded(run: RunFolder, key: str, old: dict[str, Any]) -> bool:
    """Whether the folder holds work that the old value of ``key`` produced."""
    if key in ("n", "generators"):
        labels = [g.get("label") for g in old.get("generators") or [] if isinstance(g, dict)]
        return any(run.candidates(str(label)).exists() for label in labels)
    if key == "verifier":
        return run.scores.exists()
    return run.prompts.exists()  # seed, tasks, suite, preference: the prompts were drawn from them


def run_study(cfg: StudyConfig, command: str = "run") -> StudyOutcome:
    """Run every stage; each model is loaded when its stage needs it and released when the stage ends
    (generators one after another, then the verifier, then the judges one at a time)."""
    # validate, then act: N, every option and API key, and on a first start every plugin's values,
    # before the run folder is touched
    if cfg.n < 2:
        raise BonError(f"n = {cfg.n}: a study needs at least 2 candidates per prompt (with fewer there is nothing to choose)")
    strategy = cfg.strategy.create("strategy", f"{cfg.source}: strategy")
    check_specs([("generator", g) for g in cfg.generators] + [("verifier", cfg.verifier)] + [("judge", j) for j in cfg.judges])
    # an earlier start that wrote the prompts is a resume: nothing to build or validate again
    first_start = not (Path(cfg.out).is_dir() and RunFolder(cfg.out, existing=True).prompts.exists())
    if first_start:
        check_values(cfg)  # each plugin built and released in turn: never two models held at once
    built = build_prompts(cfg) if first_start else None  # in memory first: a bad suite creates nothing
    run = RunFolder(cfg.out)
    with writer_lock(run.root, f"bon {command}"):  # one writer per run folder: a second refuses at once
        return _start_and_run(run, cfg, strategy, built, command)


def _start_and_run(run: RunFolder, cfg: StudyConfig, strategy, built: list[Prompt] | None, command: str) -> StudyOutcome:
    resuming = resume_message(run, [g.label for g in cfg.generators], cfg.n)
    if run.store.exists():  # a damaged store refuses the resume before config.yaml and the ledger are written
        JudgmentStore(run.store).close()
    record_config(run, cfg)
    if resuming:
        note(resuming)
    ledger = Ledger(run, new_invocation_id(), command)
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        ledger.lap(stage, now - clock)  # saved at once: a killed invocation keeps its finished stages' times
        clock = now

    executor = create_executor(cfg.executor, cfg)
    try:
        return _run_stages(run, cfg, strategy, built, executor, ledger, lap)
    finally:
        executor.close()


def _check_images(candidates: list[Candidate]) -> None:
    """Every candidate image file is there (one line naming the first that is not), checked before the
    preference set and the judges write anything: a run refused for a lost image leaves its folder as it was."""
    for c in candidates:
        for item in c.content.images:
            if item.path is not None and not item.path.is_file():
                raise BonError(f"{item.path}: image file not found (candidate {c.index} of {c.prompt_id}); "
                               "restore it, or delete the generator's candidates to generate them again")


def _run_stages(run: RunFolder, cfg: StudyConfig, strategy, built: list[Prompt] | None, executor, ledger: Ledger, lap) -> StudyOutcome:
    judged = _judged_study(run, cfg, strategy, built, executor, ledger, lap)
    if isinstance(judged, StudyOutcome):
        return judged
    # the candidates, scores and picks went with the stages' frame: their memory goes back to the system
    # before the analysis reads the run folder again (and forks workers that would inherit it)
    release_freed()
    judge_stats, pair_counts, stopped, identities, honesty, pending = judged
    outcome = analyse(run, cfg, judge_stats, pair_counts, stopped, identities, ledger_timings(ledger), honesty)
    outcome.pending = pending
    return outcome


def _judged_study(run: RunFolder, cfg: StudyConfig, strategy, built: list[Prompt] | None, executor, ledger: Ledger,
                  lap) -> StudyOutcome | tuple:
    """Every stage up to the picks; a StudyOutcome where the study ends there (work pending, a shard),
    else what the analysis needs: (judge stats, pair counts, why it stopped, identities, honesty, pending)."""
    prompts = shard_prompts(prepare_prompts(run, cfg, built), cfg.shard)
    bon_prompts, pref_prompts = split(prompts)
    note(f"[bold]prompts[/]: {len(bon_prompts)} for Best-of-N, {len(pref_prompts)} held out for the preference set")
    lap("prompts")

    identities: dict[str, Any] = {"generators": {}, "judges": {}}
    candidates: dict[str, dict[str, list[Candidate]]] = {}

    def one_generator(i: int) -> tuple[dict[str, list[Candidate]], dict[str, Any]]:
        generator = LazyPlugin(cfg.generators[i], "generator")
        try:
            return generate(run, generator, prompts, cfg.n, cfg.seed, executor), generator.identity()
        finally:
            generator.close()

    # each generator writes its own candidates file, so cheap CPU ones generate in parallel
    workers = _local_workers(cfg, executor, "generator", cfg.generators)
    for spec, (made, identity) in zip(cfg.generators, run_jobs(one_generator, len(cfg.generators), workers)):
        candidates[spec.label] = made
        identities["generators"][spec.label] = identity
    lap("generate")

    prompt_map = {p.id: p for p in prompts}
    everything = [c for by_prompt in candidates.values() for cands in by_prompt.values() for c in cands]
    verifier = LazyPlugin(cfg.verifier, "verifier")
    # a cheap verifier reads every image here: each part's images decoded in threads first, then scored
    # in one forked worker per core
    cheap = _cheap_and_local(executor, "verifier", [cfg.verifier])
    try:
        scores = verify(run, verifier, prompt_map, everything, executor=executor, parts=decoded_parts if cheap else None,
                        workers=cpu_workers(len(everything)) if cheap else 1)
    finally:
        verifier.close()
    identities["verifier"] = verifier.identity()
    lap("verify")

    pending = {"generate": sum(len(prompts) - len(by_prompt) for by_prompt in candidates.values()),
               "verify": unscored(everything, scores)}
    if any(pending.values()):  # the preference set and the judges need every candidate and score
        return StudyOutcome(run, pd.DataFrame(), pd.DataFrame(), ledger_timings(ledger), pending=pending)

    _check_images(everything)  # before any judge writes: a resume refused later must have changed nothing
    pref_candidates = {p.id: [c for g in candidates for c in candidates[g][p.id]] for p in pref_prompts}
    preference = build_preference_set(run.mmrb2, pref_prompts, pref_candidates, cfg.preference, cfg.seed)
    pair_counts = preference.counts()
    agreement = verifier_agreement(preference, scores)  # measured after the fact: the set never saw scores
    del scores, everything, pref_candidates  # the judges need none of them (a shard reads its scores back for its results):
    release_freed()  # their memory goes back before the judges' workers fork (and would inherit it)
    note(f"[bold]preference set[/]: {', '.join(f'{t} {k} pairs' for t, k in pair_counts.items())}" if pair_counts else
         "[bold]preference set[/]: none (no held-out prompts in this suite), so no MMRB2 accuracy axis from this run")
    lap("preference_set")

    accuracies, judge_stats, picks, stopped = judge_and_select(run, cfg, strategy, bon_prompts, candidates, pair_counts, ledger,
                                                               executor, identities["judges"])
    lap("judge_and_select")

    transient = sum(int(s["last_invocation"].get("transient", 0)) for s in judge_stats.values())
    pending = {"judge calls": transient} if transient else {}  # asked again by a rerun (exit 3 says so)

    write_text(run.picks, "".join(json.dumps(p) + "\n" for p in picks))
    if cfg.shard:  # one shard's numbers are not the study's: its results and the stats `bon merge` sums, no report
        from analysis.bon_metrics import results_table

        from analysis.bon_metrics import failure_policy

        results = results_table(picks, load_scores(run), accuracies, cfg.n, failure_policy(cfg.as_dict()).applied)
        results.to_csv(run.results, index=False, float_format="%.6g")
        stats = record_stats(run, cfg, judge_stats, pair_counts, stopped, identities, {"timings_s": ledger.timings()})
        return StudyOutcome(run, results, pd.DataFrame(), stats, stopped, pending)
    honesty = {"verifier_agreement": agreement, "shared_grader": shared_grader_flags(cfg, identities),
               "skipped_without_truth": preference.skipped_no_truth}
    return judge_stats, pair_counts, stopped, identities, honesty, pending


def shared_grader_flags(cfg: StudyConfig, identities: dict[str, Any]) -> dict[str, str]:
    """``{judge label: grader family}`` of the judges sharing the verifier's grader, from the recorded
    identities (``stats.json``'s ``identities``): what the leakage guard leaves out of the correlation."""
    from analysis.predictors import shared_grader

    judges = [grader_view("judge", spec, (identities.get("judges") or {}).get(spec.label, {})) for spec in cfg.judges]
    return shared_grader(judges, grader_view("verifier", cfg.verifier, identities.get("verifier") or {}))


def _local_workers(cfg: StudyConfig, executor, kind: str, specs: list[PluginSpec]) -> int:
    """Worker processes for a stage's plugins: only in-process, without a shared call budget, and only
    when every plugin is a cheap CPU one (``forkable``); 1 means the driver does the work itself."""
    if getattr(executor, "name", "local") != "local" or (kind == "judge" and cfg.max_calls is not None):
        return 1
    return worker_count([_plugin_class(kind, spec) for spec in specs], len(specs))


def _plugin_class(kind: str, spec: PluginSpec) -> Any:
    return registry.resolve(kind, registry.parse_spec(spec.name)[0])


def _relative_costs(kind: str, specs: list[PluginSpec]) -> list[float]:
    """Each plugin's ``relative_cost`` (default 1): which of a stage's worker jobs to start first."""
    return [float(getattr(_plugin_class(kind, spec), "relative_cost", 1.0)) for spec in specs]


def _cheap_and_local(executor, kind: str, specs: list[PluginSpec]) -> bool:
    """Whether this process runs the stage and its plugins are cheap CPU ones (``forkable``): the synthetic world."""
    return getattr(executor, "name", "local") == "local" and all(
        getattr(_plugin_class(kind, spec), "forkable", False) for spec in specs)


def judge_and_select(run: RunFolder, cfg: StudyConfig, strategy, bon_prompts: list[Prompt],
                     candidates: dict[str, dict[str, list[Candidate]]], pair_counts: dict[str, int], ledger: Ledger,
                     executor, identities: dict[str, Any]):
    """Each judge answers the preference set (its MMRB2 accuracy) and picks the best of N for every
    prompt and generator, all through one store and one call budget. Judges are loaded one at a time
    and released before the next. Returns (accuracies, stats, picks, why the budget stopped it or
    None); what was done before a stop is kept. The stats are the study's totals over all invocations
    (see :mod:`bon.accounting`)."""
    budget = Budget(cfg.max_calls)
    accuracies: dict[str, dict[str, float]] = {}
    judge_stats: dict[str, Any] = {}
    picks: list[dict[str, Any]] = []
    stopped = None
    specs = [official_spec(spec, cfg.official) for spec in cfg.judges]
    workers = _local_workers(cfg, executor, "judge", specs)

    def open_store() -> JudgmentStore:
        return JudgmentStore(run.store, invocation=ledger.entry["id"], command=ledger.entry["command"])

    def one_judge(i: int) -> dict[str, Any]:
        store = open_store()  # where the judge runs (after the fork in a worker): answers are stored as they come
        try:
            return _judge_one(run, cfg, specs[i], strategy, bon_prompts, candidates, list(pair_counts), store, budget, executor)
        finally:
            store.close()
            finished("judge", specs[i].label)  # the judge's last reference died with _judge_one's frame

    open_store().close()  # schema, WAL mode and migrations once, before any worker opens the file
    if workers > 1 and prompt_by_prompt(strategy):
        judged = _judged_in_parts(run, cfg, specs, strategy, bon_prompts, candidates, list(pair_counts), open_store, budget,
                                  executor, workers)
    else:
        if workers > 1:  # what the judges read first (the preference set) is warmed first
            keep_decoded(run.mmrb2, list(pair_counts))
            decode_once(candidates)
        judged = run_jobs(one_judge, len(specs), workers, costs=_relative_costs("judge", specs))
    books: JudgmentStore | None = None  # the driver's connection, opened once every worker is forked
    try:
        for done in judged:
            books = books or open_store()
            name = done["name"]
            for stage, seconds in done["walls"].items():
                ledger.judge_wall(name, stage, seconds)
            cost = judge_accounting(books, done["judge_id"], name, ledger, done["last"])
            cost["mmrb2"]["tasks"] = done["bench"]
            cost["selection"]["strategy"] = strategy_label(strategy)
            accuracies[name], judge_stats[name] = done["accuracy"], cost
            picks += done["picks"]
            identities[name] = done["identity"]
            note(f"judge {name}: {cost['last_invocation']['calls_made']} calls made, "
                 f"{cost['last_invocation']['calls_cached']} from the store, {cost['last_invocation']['wall_seconds']:.1f} s")
    except Stopped as exc:  # a call budget reached, a served judge's replica lost
        stopped = str(exc)
        note(f"[bold yellow]stopped[/]: {stopped}")
    finally:
        forget_decoded()
        IMAGES.clear()  # the analysis reads no pixels
        if books is not None:
            books.close()
    return accuracies, judge_stats, picks, stopped


def decoded_parts(candidates: list[Candidate]) -> Iterator[list[Candidate]]:
    """``candidates`` in consecutive parts whose images fit the image cache's bound, each part's images not
    hashed yet decoded and hashed here in threads before the caller reads it, and let go once it has: the
    stage holds one part's pixels, however large the study. Images the generate stage has just written
    come with their digests: the driver would decode them only for the workers, which decode their own
    share in parallel instead, while the driver keeps every digest the judges' workers look scenes up by."""
    def images(part: list[Candidate]) -> list[ImageItem]:
        return [item for c in part for item in c.content.images]

    count = part_count(estimated_bytes([i.path for i in images(candidates) if i.path is not None]), len(candidates),
                       usable_cores())
    for part in _parts(candidates, count, lambda c: len(images([c]))):
        decode_images([item for item in images(part) if item._digest is None], usable_cores())
        yield part
        IMAGES.clear()


def decode_once(candidates: dict[str, dict[str, list[Candidate]]]) -> None:
    """Decode and hash every candidate image here, in threads, before the verifier scores them and before
    the judges' workers fork: they inherit the digests, and the pixels the image cache's bound holds,
    instead of each decoding every image again (9 judges: 9 decodes per image)."""
    decode_images([item for by_prompt in candidates.values() for cands in by_prompt.values()
                   for c in cands for item in c.content.images], usable_cores())


def _judged_in_parts(run: RunFolder, cfg: StudyConfig, specs: list[PluginSpec], strategy, bon_prompts: list[Prompt],
                     candidates: dict[str, dict[str, list[Candidate]]], tasks: list[str], open_store, budget: Budget,
                     executor, workers: int) -> list[dict[str, Any]]:
    """Every judge on the preference set and the Best-of-N prompts, cut into parts whose images fit the
    image cache's bound (:func:`bon.image_cache.part_count`): a worker decodes a part's images once,
    every judge reads them there, and it lets them go before its next part, so no process holds more
    pixels than one part, however large the study. Each prompt's pick and each pair's verdicts depend
    on that prompt or pair alone (:func:`bon.stages.select.prompt_by_prompt`), so the answers are
    those of one judge over everything; the driver puts each judge's parts together (judgment files in
    the task file's order, picks in the study's order) and returns what :func:`_judge_one` returns."""
    files = {task: find_task_file(run.mmrb2, parse_task(task)) for task in tasks}
    pairs = {task: load_pairs(files[task]) for task in tasks}
    scored_pairs = {task: pairs[task] for task in tasks if files[task] == run.mmrb2 / parse_task(task).file}
    images = pair_images(run.mmrb2, tasks)
    pref_paths = list({item.path: 0 for by_pair in images.values() for found in by_pair.values() for item in found})
    cand_paths = [item.path for by_prompt in candidates.values() for p in bon_prompts for c in by_prompt[p.id]
                  for item in c.content.images if item.path is not None]
    units = max([len(bon_prompts), *map(len, pairs.values())])
    count = part_count(estimated_bytes(pref_paths) + estimated_bytes(cand_paths), units, workers)

    # every part a cross-section of each task (a task's images cost the judges more or less than another's),
    # so that the parts take about as long and no worker is left with the last long one
    pair_parts = {task: _parts(found, count, lambda pair: len(images[task].get(pair.id, []))) for task, found in pairs.items()}
    by_task: dict[str, list[Prompt]] = {}
    for p in bon_prompts:
        by_task.setdefault(p.task, []).append(p)
    prompt_parts = [sum(found, []) for found in zip(*(
        _parts(mine, count, lambda p: sum(len(c.content.images) for g in candidates for c in candidates[g][p.id]))
        for mine in by_task.values()))] if by_task else [[] for _ in range(count)]

    def part(k: int) -> list[dict[str, Any]]:
        mine = {task: found[k] for task, found in pair_parts.items()}
        share_images(item for task, found in mine.items() for pair in found for item in images[task].get(pair.id, []))
        store = open_store()
        found = []
        try:
            with muted():
                for spec in specs:
                    found.append(_judge_one(run, cfg, spec, strategy, prompt_parts[k], candidates, tasks, store, budget,
                                            executor, mine))
                    finished("judge", spec.label)
            return found
        finally:
            store.close()
            forget_decoded()
            IMAGES.clear()  # the next part's images in their place

    merged: list[dict[str, Any]] = []
    with bar(f"judge ({len(specs)} judges, {count} parts)", count) as progress:
        for found in run_jobs(part, count, workers):
            merged = [_merge_part(m, f) for m, f in zip(merged, found)] if merged else found
            progress.advance()

    def accuracy(k: int) -> tuple[dict[str, float], dict[str, Any]]:
        done = merged[k]
        judgments = {task: {p.id: done["judgments"][task][p.id] for p in found if p.id in done["judgments"][task]}
                     for task, found in pairs.items()}
        return preference_accuracy(run, done["name"], judgments, scored_pairs)

    # each judge's judgment files written (and scored) in the workers too: the driver alone took seconds
    for done, (scored, bench) in zip(merged, run_jobs(accuracy, len(merged), workers)):
        done["accuracy"], done["bench"] = scored, bench
    rank = {(g, p.id): k for k, (g, p) in enumerate((g, p) for g in candidates for p in bon_prompts)}
    for done in merged:
        done["picks"].sort(key=lambda pick: rank[(pick["generator"], pick["prompt_id"])])
        done["last"] = {stage: stats.as_dict() for stage, stats in done["last"].items()}
        del done["judgments"]
    return merged


def _parts(items: list, count: int, weight: Callable[[Any], int]) -> list[list]:
    """``items`` in ``count`` consecutive parts of about equal total ``weight`` (their images: a prompt of
    interleaved responses holds several), of about equal length where nothing weighs."""
    sums = list(itertools.accumulate(weight(x) for x in items))
    total = sums[-1] if sums else 0
    cuts = [bisect.bisect_right(sums, total * j / count) if total else len(items) * j // count for j in range(1, count)]
    bounds = [0, *cuts, len(items)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:])]


def _merge_part(done: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """One judge's results so far and those of its next part: judgments and picks joined, walls and
    counters summed."""
    for task, judged in part["judgments"].items():
        done["judgments"][task].update(judged)
    done["picks"] += part["picks"]
    done["walls"] = {stage: done["walls"][stage] + part["walls"][stage] for stage in done["walls"]}
    done["last"] = {stage: _summed(done["last"][stage], part["last"][stage]) for stage in done["last"]}
    return done


def _summed(a: CallStats, b: CallStats) -> CallStats:
    """Two parts' counters: counts, seconds and dollars added (unrounded), missing reasons counted together."""
    out = CallStats(**{f.name: getattr(a, f.name) + getattr(b, f.name) for f in fields(CallStats) if f.name != "missing_reasons"})
    out.missing_reasons = dict(a.missing_reasons)
    for reason, n in b.missing_reasons.items():
        out.missing_reasons[reason] = out.missing_reasons.get(reason, 0) + n
    return out


def _judge_one(run: RunFolder, cfg: StudyConfig, spec: PluginSpec, strategy, bon_prompts: list[Prompt],
               candidates: dict[str, dict[str, list[Candidate]]], tasks: list[str], store: JudgmentStore, budget: Budget,
               executor, pairs: dict[str, list[Pair]] | None = None) -> dict[str, Any]:
    """One judge's preference-set accuracy, picks and this invocation's counters; the judge is loaded
    here and closed on return. Runs in the driver or in a forked worker, with its own store connection.
    With ``pairs`` (a part of each task's pairs, :func:`_judged_in_parts`) it answers those pairs and
    returns their ``judgments`` instead of writing judgment files and an accuracy."""
    with loaded(spec, "judge") as judge:
        refs = {stage: Referee(judge, store, samples=cfg.samples, budget=budget, seed=cfg.seed, stage=stage, executor=executor,
                               retry_missing=cfg.retry_missing) for stage in JUDGE_STAGES}
        started = time.perf_counter()
        if pairs is None:
            accuracy, bench = judge_preference_set(run, refs["mmrb2"], tasks)
            answers: dict[str, Any] = {"accuracy": accuracy, "bench": bench}
        else:
            answers = {"judgments": {task: judge_pairs(run.mmrb2, task, refs["mmrb2"], part=part) for task, part in pairs.items()}}
        walls = {"mmrb2": time.perf_counter() - started}
        started = time.perf_counter()
        judge_picks = select(refs["selection"], strategy, bon_prompts, candidates, cfg.seed)
        walls["selection"] = time.perf_counter() - started
        # a part's counters are summed over the parts (unrounded) before they become a dict
        last = {stage: ref.stats if pairs is not None else ref.stats.as_dict() for stage, ref in refs.items()}
        return {"name": judge.name, "identity": judge.identity(), "judge_id": refs["mmrb2"].judge_id, **answers,
                "picks": judge_picks, "walls": walls, "last": last}


@dataclass
class FinishedStudy:
    """What later commands (``bon select``, ``bon curve``) read back from a run folder."""

    run: RunFolder
    cfg: StudyConfig
    prompts: list[Prompt]  # the Best-of-N prompts
    candidates: dict[str, dict[str, list[Candidate]]]  # generator -> prompt id -> candidates
    scores: dict

    def require_scores(self) -> None:
        """Refuse (before any judge call) a study whose candidates are not all scored: the numbers of
        ``curve`` and ``tradeoff`` are verifier scores."""
        unscored = [c.key for by in self.candidates.values() for cands in by.values() for c in cands if c.key not in self.scores]
        if unscored:
            raise BonError(f"{self.run.scores}: {len(unscored)} candidates have no verifier score (first {unscored[0]}); "
                           "rerun the study (or `bon verify`) first")

    def stats(self) -> dict[str, Any]:
        """stats.json, or what it records of the judges rebuilt from the store when it is missing."""
        return recorded_or_rebuilt_stats(self.run, self.cfg)

    def judge(self, spec: str, options: dict[str, Any] | None = None, label: str | None = None) -> Any:
        """A judge by its label in the study's config (``options`` then override its own), else by
        registry spec; ``label`` names it in picks and tables."""
        for j in self.cfg.judges:
            if j.label == spec:
                j = official_spec(j, self.cfg.official)
                if j.serve is not None:  # served: this command starts its servers again
                    return replace(j, label=label or j.label, options={**j.options, **(options or {})}).create("judge")
                return registry.create("judge", j.name, **{**j.options, **(options or {}), "name": label or j.label})
        if registry.parse_spec(spec)[0] not in registry.names("judge"):
            import difflib

            labels = [j.label for j in self.cfg.judges]
            close = difflib.get_close_matches(spec, labels, n=1, cutoff=0.5)
            raise BonError(f"judge {spec!r}: not a judge of this study ({', '.join(labels)}) nor a registered judge"
                           + (f"; did you mean {close[0]!r}?" if close else ""))
        return registry.create("judge", spec, **(options or {}), **({"name": label} if label else {}))


def load_study(run_dir) -> FinishedStudy:
    from bon.content import load_candidates
    from bon.stages.generate import load_done

    run = RunFolder(run_dir, existing=True)  # reading a study never creates a folder
    if not run.config.exists() or not run.prompts.exists():
        raise BonError(f"{run.root}: not a study folder (no config.yaml or prompts.jsonl); run `bon run` or `bon demo` first")
    cfg = read_study_config(run)
    prompts, _ = split(shard_prompts(prepare_prompts(run, cfg), cfg.shard))
    candidates = {}
    for g in cfg.generators:
        check_n(run.config, cfg.n, run.candidates(g.label),
                ((c.prompt_id, c.index) for c in load_candidates(run.candidates(g.label))))
        done = load_done(run, g.label, cfg.n)
        missing = [p.id for p in prompts if p.id not in done]
        if missing:
            raise BonError(f"{run.candidates(g.label)}: no complete candidates for prompt {missing[0]} "
                           f"({len(missing)} prompts unfinished); rerun the study first")
        candidates[g.label] = {p.id: done[p.id] for p in prompts}
    return FinishedStudy(run, cfg, prompts, candidates, load_scores(run))


def judge_preference_set(run: RunFolder, referee: Referee, tasks: list[str]) -> tuple[dict[str, float], dict[str, Any]]:
    """The judge's official-semantics accuracy on each task of the mini preference set."""
    return preference_accuracy(run, referee.judge.name, {task: judge_pairs(run.mmrb2, task, referee) for task in tasks})


def preference_accuracy(run: RunFolder, judge: str, judgments: dict[str, dict],
                        pairs: dict[str, list[Pair]] | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """Write the judge's judgment file of each task and return its accuracy on each (and the detail);
    ``pairs``: tasks' pairs already read from the run's preference set (each judge would read them again)."""
    detail: dict[str, Any] = {}
    for task, judged in judgments.items():
        mmrb2.write_judgments(run.judgment_file(judge, parse_task(task).file), judged)
        detail[task] = task_accuracy(run, judge, task, judged, (pairs or {}).get(task))
    return {task: d["accuracy"] for task, d in detail.items()}, detail


def task_accuracy(run: RunFolder, judge: str, task: str, judgments: dict | None = None,
                  pairs: list[Pair] | None = None) -> dict[str, Any]:
    """A judge's accuracy on one task of the run's preference set (its judgment file and task file unless given)."""
    task_file = parse_task(task).file
    if judgments is None:
        judgments = mmrb2.load_judgments(run.judgment_file(judge, task_file))
    result = mmrb2.accuracy(pairs if pairs is not None else mmrb2.load_pairs(run.mmrb2 / task_file), judgments)
    return {k: result[k] for k in ("accuracy", "correct", "judgements", "evaluated_pairs", "missing_pairs")}


def ledger_timings(ledger: Ledger) -> dict[str, Any]:
    """Stage times for stats.json: the study's totals over all invocations, and the last invocation's share."""
    return {"timings_s": ledger.timings(), "timings_last_invocation_s": ledger.timings(last_only=True),
            "invocations": len(ledger.entries)}


def record_stats(run: RunFolder, cfg: StudyConfig, judge_stats: dict, pair_counts: dict, stopped: str | None,
                 provenance: dict | None, timings: dict[str, Any], honesty: dict | None = None) -> dict[str, Any]:
    """Write ``stats.json`` (a shard's too, which ``bon merge`` sums) and return it."""
    stats = {
        **({"shard": cfg.shard} if cfg.shard else {}),
        "judges": judge_stats,
        "strategy": cfg.strategy.name,
        "n": cfg.n,
        "seed": cfg.seed,
        "preference_pairs": pair_counts,
        **timings,
        "stopped": stopped,
        "identities": provenance or {},  # what each plugin was: model, revision, settings (the store's keys)
        **(honesty or {}),  # verifier vs annotators, judges sharing the verifier's grader
        "versions": library_versions(),
    }
    write_json(run.stats, stats)
    return stats


def analyse(run: RunFolder, cfg: StudyConfig, judge_stats: dict, pair_counts: dict, stopped: str | None,
            provenance: dict | None, timings: dict[str, Any], honesty: dict | None = None) -> StudyOutcome:
    """Record the run's statistics, then write the report bundle (read back from the run folder, so
    ``bon report`` on the same folder gives the same numbers; no judge call)."""
    from functools import partial

    from analysis.bon_metrics import RESULT_COLUMNS
    from analysis.bundle import compute
    from analysis.html_report import run_samples
    from analysis.outputs import figures_while_computing, import_plotting, write_report

    stats = record_stats(run, cfg, judge_stats, pair_counts, stopped, provenance, timings, honesty)
    note("analysis: metrics, correlations with bootstrap intervals, report and figures")
    with figures_while_computing() as figures:  # each drawn by the worker that computed what it shows
        try:
            bundle = compute(run.root, seed=cfg.seed, power=False,  # `bon power` plans study sizes on request (the run folder read once)
                             meanwhile=import_plotting,  # matplotlib, while it waits
                             samples=partial(run_samples, per_task=1), then=figures)  # report.html's, while a core is free
        except BonError as exc:  # nothing to analyse yet, e.g. a call budget stopped the study before any pick
            from analysis.report import empty_report

            results = pd.DataFrame(columns=RESULT_COLUMNS)
            write_text(run.results, results.to_csv(index=False))
            write_text(run.report, empty_report(stats, str(exc)))
            return StudyOutcome(run, results, pd.DataFrame(columns=["task", "generator", "n_judges", "pearson_r",
                                                                      "spearman_rho"]), stats, stopped)
        write_report(bundle, run)
    return StudyOutcome(run, bundle.results, bundle.settings, stats, stopped)
