"""The MMRB2 benchmark commands: fetch, judge, accuracy, diagnose, and ``flips`` (how often the reverse
order changes an outcome)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Optional

import click

from bon.cli import (check_output_file, exit_if_calls_pending, json_option, mmrb2_app, out, parse_options, plugin_options,
                     retry_missing_option, write_numbers)
from bon.errors import BonError
from bon.tasks import SPELLINGS, TASKS, Task, parse_task

BENCH_DIR = click.Path(path_type=Path, file_okay=False)
PREDICTIONS = click.Path(path_type=Path, dir_okay=False)
PREDICTIONS_HELP = "Judgment file(s), as FILE (its task found from its pair ids) or TASK=FILE; repeat the option or list them."


@mmrb2_app.command("accuracy")
@click.option("--bench-dir", type=BENCH_DIR, required=True, metavar="DIR", help="Folder with t2i.json ... (or *_response_only.json).")
@click.option("--task", default=None, metavar="TASK", help=f"{SPELLINGS}, or all: the task(s) the files must cover (default: whichever their ids belong to).")
@click.option("--predictions", type=PREDICTIONS, multiple=True, metavar="FILE", help=PREDICTIONS_HELP)
@click.argument("more_predictions", nargs=-1, type=PREDICTIONS, metavar="FILE...")
@json_option("the numbers (missing numbers are null)")
def mmrb2_accuracy(bench_dir: Path, task: Optional[str], predictions: tuple[Path, ...], more_predictions: tuple[Path, ...],
                   json_out: Optional[Path]) -> None:
    """Score official-format judgment files with the official scorer's semantics, one file per task, in any order."""
    from bon import mmrb2

    wanted = None if task in (None, "all") else parse_task(task)
    items = list(predictions) + list(more_predictions)
    if not items:
        raise BonError("mmrb2 accuracy: no judgment file given (--predictions FILE ...)")
    check_output_file(json_out)
    by_task = mmrb2.one_file_per_task(mmrb2.assign_predictions(bench_dir, items))
    _check_coverage(by_task, wanted, task == "all")
    result = mmrb2.evaluate(bench_dir, {t.scorer: path for t, path in by_task.items()})
    if not result["overall"]["judgements"]:
        raise BonError(f"{', '.join(str(p) for p in by_task.values())}: no judged pair (no answered judgement for any "
                       f"pair id in {bench_dir}); nothing to score")
    names = [t.scorer for t in by_task]
    for name in names:
        r = result[name]
        unknown = f"  unknown ids {r['unknown_ids']} (ignored)" if r.get("unknown_ids") else ""
        out.print(f"{name:<12} accuracy {_percent(r['accuracy'])}  total {r['total_pairs']}  evaluated {r['evaluated_pairs']}  "
                  f"missing {r['missing_pairs']}  ({r['correct']}/{r['judgements']} judgements)  {by_task[parse_task(name)]}{unknown}")
        _print_unscored(r["unscored"])
    if len(names) > 1:
        o = result["overall"]
        out.print(f"{'overall':<12} accuracy {_percent(o['accuracy'])}  ({o['correct']}/{o['judgements']} judgements, micro-averaged)")
    write_numbers(json_out, {"tasks": {n: result[n] for n in names}, "overall": result["overall"]})


def _print_unscored(unscored: Mapping[str, str], shown: int = 5) -> None:
    """The pairs left out of the denominator, each with why (the JSON lists them all)."""
    if unscored:
        listed = "; ".join(f"{pid} ({why})" for pid, why in list(unscored.items())[:shown])
        more = f"; and {len(unscored) - shown} more (see --json)" if len(unscored) > shown else ""
        out.print(f"{'':<12} not scored: {len(unscored)} pairs: {listed}{more}", highlight=False, markup=False)


def _check_coverage(by_task: Mapping[Task, Path], wanted: Task | None, every_task: bool) -> None:
    """``--task T``: every file holds task T's pairs; ``--task all``: one file per task."""
    if wanted is not None:
        for task, path in by_task.items():
            if task != wanted:
                raise BonError(f"{path}: its pair ids belong to task {task.name} ({task.scorer}), not --task {wanted.scorer}")
    if every_task:
        missing = [t.name for t in TASKS if t not in by_task]
        if missing:
            raise BonError(f"--task all: no judgment file for {', '.join(missing)} "
                           f"(the files given hold {', '.join(t.name for t in by_task) or 'no task'})")


def _percent(value: float | None) -> str:
    return "     -" if value is None or math.isnan(value) else f"{value:6.2f}%"


@mmrb2_app.command("judge")
@click.option("--judge", "judge_spec", required=True, metavar="SPEC", help="Registered judge, e.g. scene-full or transformers-vlm:MODEL.")
@plugin_options("judge")
@click.option("--bench-dir", type=BENCH_DIR, required=True, metavar="DIR", help="Benchmark folder in MMRB2 layout.")
@click.option("--task", required=True, metavar="TASK", help=SPELLINGS + ".")
@click.option("--out-file", "out_file", type=click.Path(path_type=Path, dir_okay=False), required=True, metavar="FILE",
              help="Official-format judgment file (resumed if present).")
@click.option("--samples", type=click.IntRange(min=1), default=1, show_default=True, metavar="K", help="Samples per direction.")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="M", help="Judge only the first M pairs.")
@click.option("--store", "store_path", type=click.Path(path_type=Path, dir_okay=False), default=None, metavar="FILE",
              help="Judgment store (default: judgments.sqlite beside --out-file).")
@click.option("--official-prompts", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="A local MMRB2 checkout: MLLM judges use its official rubric text instead of bon's own.")
@retry_missing_option()
def mmrb2_judge(judge_spec: str, judge_options: tuple[str, ...], bench_dir: Path, task: str, out_file: Path, samples: int,
                limit: Optional[int], store_path: Optional[Path], official_prompts: Optional[Path], retry_missing: bool) -> None:
    """Ask a judge every pair in both orders; write an official judgment file as it goes (resumable)."""
    from bon import mmrb2, registry
    from bon.referee import Referee
    from bon.stages.judge_bench import judge_pairs
    from bon.store import JudgmentStore

    task = parse_task(task)
    mmrb2.find_task_file(bench_dir, task)  # fail before loading any model
    options = parse_options(judge_options, "--judge-option")
    if official_prompts is not None:
        options["official_prompts"] = str(official_prompts)
    check_output_file(out_file, "--out-file")
    judge = registry.create("judge", judge_spec, **options)
    done = mmrb2.load_judgments(out_file) if out_file.exists() else {}
    store = JudgmentStore(store_path or out_file.parent / "judgments.sqlite")
    try:
        referee = Referee(judge, store, samples=samples, retry_missing=retry_missing)
        save = lambda data: mmrb2.write_judgments(out_file, data)  # noqa: E731
        result = judge_pairs(bench_dir, task, referee, limit=limit, done=done, save=save)
        save(result)
    finally:
        store.close()
    s = referee.stats
    out.print(f"{len(result)} pairs judged by {judge.name} -> {out_file}  "
              f"(calls made {s.calls_made}, from store {s.calls_cached}, missing {s.missing})")
    exit_if_calls_pending(s.transient)


@mmrb2_app.command("fetch")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True, metavar="DIR",
              help="Benchmark folder to write.")
@click.option("--task", "tasks", multiple=True, metavar="TASK", help=f"Only these tasks ({SPELLINGS}; repeatable; default: all four).")
@click.option("--from", "source", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="A local copy of the hub dataset (save_to_disk folders or Parquet files) instead of the hub.")
def mmrb2_fetch(out_dir: Path, tasks: tuple[str, ...], source: Optional[Path]) -> None:
    """The MMRB2 release from the Hugging Face hub (or a local copy of it) in the official folder layout."""
    from bon.mmrb2.fetch import fetch

    wanted = [parse_task(t) for t in tasks] or list(TASKS)
    counts = fetch(out_dir, [t.name for t in wanted], source=source)
    out.print(", ".join(f"{t}: {k} pairs" for t, k in counts.items()) + f" -> {out_dir}")


@mmrb2_app.command("diagnose")
@click.option("--bench-dir", type=BENCH_DIR, required=True, metavar="DIR", help="Benchmark folder in MMRB2 layout.")
@click.option("--predictions", type=PREDICTIONS, multiple=True, metavar="FILE", help=PREDICTIONS_HELP + " Several judges per task allowed.")
@click.argument("more_predictions", nargs=-1, type=PREDICTIONS, metavar="FILE...")
@click.option("--exclude-source", "exclude", multiple=True, metavar="SOURCE", help="Drop pairs of this prompt_source (repeatable).")
@json_option("every number")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Folder for report.md and plots.")
def mmrb2_diagnose(bench_dir: Path, predictions: tuple[Path, ...], more_predictions: tuple[Path, ...], exclude: tuple[str, ...],
                   json_out: Optional[Path], out_dir: Optional[Path]) -> None:
    """Diagnostics: accuracy by source and category, same-model pairs, position and image bias,
    K-sample voting, human agreement and generator win rates."""
    from analysis.diagnostics import diagnose, write_diagnostics
    from bon import mmrb2

    by_task: dict[str, list[Path]] = {}
    for task, path in mmrb2.assign_predictions(bench_dir, list(predictions) + list(more_predictions)):
        by_task.setdefault(task.scorer, []).append(path)
    result = diagnose(bench_dir, by_task, exclude_sources=exclude)
    write_diagnostics(result, out_dir, json_out)
    for task, t in result["tasks"].items():
        out.print(f"{task:<12} pairs {t.get('pairs', '?')}  " + "  ".join(
            f"{name} {_percent(j['accuracy']['accuracy']).strip()}" for name, j in t.get("judges", {}).items()))
    out.print(f"report: {out_dir / 'report.md' if out_dir else '-'}  json: {json_out or '-'}")


@mmrb2_app.command("flips")
@click.option("--predictions", type=click.Path(path_type=Path), multiple=True, metavar="FILE",
              help="Judgment file(s), as FILE or TASK=FILE (repeatable).")
@click.argument("more_predictions", nargs=-1, type=click.Path(path_type=Path), metavar="FILE...")
@click.option("--bench-dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Benchmark folder: finds each plain FILE's task by its pair ids.")
@click.option("--run", "run_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="A study's run folder: every judge's preference-set judgment files.")
@click.option("--tolerance", type=click.FloatRange(0.0, 1.0), default=0.05, show_default=True, metavar="RATE",
              help="Largest outcome-change rate (95% upper bound) at which a gate counts as safe.")
@json_option("every number (strict JSON)")
def mmrb2_flips(predictions: tuple[Path, ...], more_predictions: tuple[Path, ...], bench_dir: Optional[Path], run_dir: Optional[Path],
                tolerance: float, json_out: Optional[Path]) -> None:
    """How often the reverse order disagreed with, and changed the outcome of, the forward verdict, by the
    forward verdict's confidence (1-6 score or P(A)-P(B) kept in the files' metadata): is gating safe?"""
    from bon.mmrb2.flips import flip_report

    check_output_file(json_out)
    items = list(predictions) + list(more_predictions)
    if not items and run_dir is None:
        raise BonError("mmrb2 flips: no judgment file given (--predictions FILE ... or --run DIR)")
    report = flip_report(items, bench_dir, run_dir, tolerance)
    for name, entry in report["files"].items():
        s = entry["summary"]
        out.print(f"{name:<40} pairs {s['pairs']:>5}  disagree {_rate(s['disagree_rate'])}  outcome changed {_rate(s['changed_rate'])}"
                  f"  gating: {entry['verdict']}")
        for row in s["by_confidence"]:
            level = f"{row['confidence']:.2f}" if "confidence" in row else f"{row['confidence_from']:.1f}-{row['confidence_to']:.1f}"
            out.print(f"    confidence {level:>9}: pairs {row['pairs']:>5}  disagree {_rate(row['disagree_rate'])}  changed {_rate(row['changed_rate'])}")
    write_numbers(json_out, report)


def _rate(value: Any) -> str:
    return "     -" if value is None else f"{100 * value:5.1f}%"
