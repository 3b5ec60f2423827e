"""The MMRB2 benchmark commands: fetch, judge, accuracy, report."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from bon.cli import _parse_options, mmrb2_app, out
from bon.errors import BonError


@mmrb2_app.command("accuracy")
@click.option("--bench-dir", type=click.Path(path_type=Path), required=True, help="Folder with t2i.json ... (or *_response_only.json).")
@click.option("--task", required=True, help="image, edit, interleaved, reasoning or all.")
@click.option("--predictions", type=click.Path(path_type=Path), required=True, multiple=True,
              help="Judgment file(s): one per task, in official order for --task all. Repeat the option or list them.")
@click.argument("more_predictions", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None, help="Also write the numbers as JSON.")
def mmrb2_accuracy(bench_dir: Path, task: str, predictions: tuple[Path, ...], more_predictions: tuple[Path, ...], json_out: Optional[Path]) -> None:
    """Score official-format judgment files with the official scorer's semantics."""
    from analysis import mmrb2

    predictions = list(predictions) + list(more_predictions)
    tasks = list(mmrb2.TASK_FILES) if task == "all" else [mmrb2.scorer_task(task)]
    if len(predictions) != len(tasks):
        raise BonError(f"--task {task} needs {len(tasks)} prediction file(s) ({', '.join(tasks)}), got {len(predictions)}")
    result = mmrb2.evaluate(bench_dir, dict(zip(tasks, predictions)))
    for name in tasks:
        r = result[name]
        unknown = f"  unknown ids {r['unknown_ids']} (ignored)" if r.get("unknown_ids") else ""
        out.print(f"{name:<12} accuracy {r['accuracy']:6.2f}%  total {r['total_pairs']}  evaluated {r['evaluated_pairs']}  "
                  f"missing {r['missing_pairs']}  ({r['correct']}/{r['judgements']} judgements){unknown}")
    if len(tasks) > 1:
        o = result["overall"]
        out.print(f"{'overall':<12} accuracy {o['accuracy']:6.2f}%  ({o['correct']}/{o['judgements']} judgements, micro-averaged)")
    if json_out:
        from bon.runfolder import write_json

        write_json(json_out, {"tasks": {t: result[t] for t in tasks}, "overall": result["overall"]})


@mmrb2_app.command("judge")
@click.option("--judge", "judge_spec", required=True, help="Registered judge, e.g. scene-full or transformers-vlm:MODEL.")
@click.option("--bench-dir", type=click.Path(path_type=Path), required=True, help="Benchmark folder in MMRB2 layout.")
@click.option("--task", required=True, help="image (or t2i), edit, interleaved or reasoning.")
@click.option("--out", "out_file", type=click.Path(path_type=Path), required=True, help="Official-format judgment file (resumed if present).")
@click.option("--samples", type=click.IntRange(min=1), default=1, show_default=True, help="Samples per direction.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Judge only the first M pairs.")
@click.option("--store", "store_path", type=click.Path(path_type=Path), default=None,
              help="Judgment store (default: judgments.sqlite beside --out).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Judge option (YAML value), repeatable.")
@click.option("--official-prompts", type=click.Path(path_type=Path), default=None,
              help="A local MMRB2 checkout: MLLM judges use its official rubric text instead of bon's own.")
def mmrb2_judge(judge_spec: str, bench_dir: Path, task: str, out_file: Path, samples: int, limit: Optional[int],
                store_path: Optional[Path], options: tuple[str, ...], official_prompts: Optional[Path]) -> None:
    """Ask a judge every pair in both orders; write an official judgment file as it goes (resumable)."""
    from analysis import mmrb2
    from bon import registry
    from bon.referee import Referee
    from bon.stages.judge_bench import judge_pairs
    from bon.store import JudgmentStore

    task = mmrb2.scorer_task(task)
    mmrb2.find_task_file(bench_dir, task)  # fail before loading any model
    judge_options = _parse_options(options)
    if official_prompts is not None:
        judge_options["official_prompts"] = str(official_prompts)
    judge = registry.create("judge", judge_spec, **judge_options)
    done = mmrb2.load_judgments(out_file) if out_file.exists() else {}
    store = JudgmentStore(store_path or out_file.parent / "judgments.sqlite")
    try:
        referee = Referee(judge, store, samples=samples)
        save = lambda data: mmrb2.write_judgments(out_file, data)  # noqa: E731
        result = judge_pairs(bench_dir, task, referee, limit=limit, done=done, save=save)
        save(result)
    finally:
        store.close()
    s = referee.stats
    out.print(f"{len(result)} pairs judged by {judge.name} -> {out_file}  "
              f"(calls made {s.calls_made}, from store {s.calls_cached}, missing {s.missing})")


@mmrb2_app.command("fetch")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True, help="Benchmark folder to write.")
@click.option("--task", "tasks", multiple=True, type=click.Choice(["t2i", "edit", "interleaved", "reasoning"]),
              help="Only these tasks (default: all four).")
def mmrb2_fetch(out_dir: Path, tasks: tuple[str, ...]) -> None:
    """Download the MMRB2 release from the Hugging Face hub into the official folder layout."""
    from analysis.mmrb2_fetch import fetch

    counts = fetch(out_dir, tasks or ("t2i", "edit", "interleaved", "reasoning"))
    out.print(", ".join(f"{t}: {k} pairs" for t, k in counts.items()) + f" -> {out_dir}")


@mmrb2_app.command("report")
@click.option("--bench-dir", type=click.Path(path_type=Path), required=True, help="Benchmark folder in MMRB2 layout.")
@click.option("--predictions", type=click.Path(path_type=Path), multiple=True,
              help="Judgment file(s), as FILE (task found from its pair ids) or TASK=FILE; repeatable.")
@click.argument("more_predictions", nargs=-1, type=click.Path(path_type=Path))
@click.option("--exclude-source", "exclude", multiple=True, help="Drop pairs of this prompt_source (repeatable).")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None, help="Write every number as JSON.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Folder for report.md and plots.")
def mmrb2_report(bench_dir: Path, predictions: tuple[Path, ...], more_predictions: tuple[Path, ...], exclude: tuple[str, ...],
                 json_out: Optional[Path], out_dir: Optional[Path]) -> None:
    """Diagnostics: accuracy by source and category, same-model pairs, position and image bias,
    K-sample voting, human agreement and generator win rates."""
    from analysis.diagnostics import diagnose, write_diagnostics

    by_task: dict[str, list[Path]] = {}
    for item in list(predictions) + list(more_predictions):
        task, path = _prediction_task(bench_dir, str(item))
        by_task.setdefault(task, []).append(path)
    result = diagnose(bench_dir, by_task, exclude_sources=exclude)
    write_diagnostics(result, out_dir, json_out)
    for task, t in result["tasks"].items():
        out.print(f"{task:<12} pairs {t.get('pairs', '?')}  " + "  ".join(
            f"{name} {j['accuracy']['accuracy']:.2f}%" for name, j in t.get("judges", {}).items()))
    out.print(f"report: {out_dir / 'report.md' if out_dir else '-'}  json: {json_out or '-'}")


def _prediction_task(bench_dir: Path, item: str) -> tuple[str, Path]:
    """``TASK=FILE``, or a plain FILE whose task is the one sharing the most pair ids with it."""
    from analysis import mmrb2

    task, sep, file = item.partition("=")
    if sep and task in (*mmrb2.TASK_FILES, *mmrb2.BON_TO_SCORER):
        return mmrb2.scorer_task(task), Path(file)
    path = Path(item)
    ids = set(mmrb2.load_judgments(path))
    overlap = {}
    for name in mmrb2.TASK_FILES:
        try:
            overlap[name] = len(ids & {p.id for p in mmrb2.load_pairs(mmrb2.find_task_file(bench_dir, name))})
        except BonError:
            continue
    best = max(overlap, key=overlap.get, default=None)
    if best is None or overlap[best] == 0:
        raise BonError(f"{path}: none of its pair ids is in {bench_dir}; pass it as TASK=FILE")
    return best, path


