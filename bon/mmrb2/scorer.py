"""The official MMRB2 scorer's semantics, and which task a judgment file belongs to.

The first forward and first reverse sample of each pair are two independent judgements (reverse
flipped back), and anything the judge did not answer is left out of the denominator rather than
counted wrong. A judgment file is matched to its task by its pair ids, so files can be given in any order.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping

from bon.errors import BonError
from bon.mmrb2.format import Pair, find_task_file, has_task_file, load_judgments, load_pairs
from bon.tasks import TASKS, Task, is_task, parse_task

FLIP = {"A": "B", "B": "A"}


def first_judgement(samples: Any) -> str | None:
    """The first sample's judgement, or None when there is none to count (missing, null or empty)."""
    if not isinstance(samples, list) or not samples or not isinstance(samples[0], Mapping):
        return None
    j = samples[0].get("judgement")
    return j if isinstance(j, str) and j else None


def accuracy(pairs: Iterable[Pair], judgments: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Official per-task accuracy in percent (NaN, not the scorer's 0, when nothing was counted).

    ``judgements`` is the denominator: the first forward and first reverse sample of each predicted
    pair whose judgement is non-empty. As in the official scorer, a non-empty answer other than
    "A"/"B" (say "tie") is counted and is wrong; ``invalid_judgements`` says how many there were.
    """
    chosen = {p.id: p.chosen for p in pairs}
    correct = counted = skipped = invalid = evaluated = 0
    for pid, entry in judgments.items():
        if pid not in chosen:
            continue
        evaluated += 1
        for direction, flip in (("forward", False), ("reverse", True)):
            j = first_judgement(entry.get(direction) if isinstance(entry, Mapping) else None)
            if j is None:
                skipped += 1
                continue
            counted += 1
            invalid += j not in FLIP
            correct += (FLIP.get(j, j) if flip else j) == chosen[pid]
    return {
        "accuracy": 100.0 * correct / counted if counted else math.nan,
        "total_pairs": len(chosen),
        "evaluated_pairs": evaluated,
        "missing_pairs": len(chosen) - evaluated,
        "correct": correct,
        "judgements": counted,
        "skipped_judgements": skipped,
        "invalid_judgements": invalid,
        "unknown_ids": sum(pid not in chosen for pid in judgments),
    }


def unscored_pairs(pairs: Iterable[Pair], judgments: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Why each pair the denominator leaves out (wholly or in one direction) was not scored: absent
    from the file, or the stored reason of its missing judgement (unparseable, transient...), so a
    smaller denominator is never silent."""
    out: dict[str, str] = {}
    for pair in pairs:
        entry = judgments.get(pair.id)
        if not isinstance(entry, Mapping):
            out[pair.id] = "not in the judgment file"
            continue
        reasons = [f"{d}: {_missing_reason(entry.get(d))}" for d in ("forward", "reverse")
                   if first_judgement(entry.get(d)) is None]
        if reasons:
            out[pair.id] = "; ".join(reasons)
    return out


def _missing_reason(samples: Any) -> str:
    first = samples[0] if isinstance(samples, list) and samples and isinstance(samples[0], Mapping) else None
    meta = first.get("metadata") if first is not None else None
    reason = meta.get("missing") if isinstance(meta, Mapping) else None
    if first is None:
        return "no judgement"
    transient = " (transient: rerun bon mmrb2 judge)" if isinstance(meta, Mapping) and meta.get("transient") else ""
    return (str(reason)[:160] if reason else "empty judgement") + transient


def overall(task_results: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Micro-average over all counted judgements (the official overall); the macro mean is given
    alongside because it differs whenever tasks have different numbers of counted judgements."""
    results = list(task_results.values()) if isinstance(task_results, Mapping) else list(task_results)
    correct = sum(r["correct"] for r in results)
    counted = sum(r["judgements"] for r in results)
    per_task = [r["accuracy"] for r in results if r["judgements"]]
    return {
        "accuracy": 100.0 * correct / counted if counted else math.nan,
        "macro_accuracy": sum(per_task) / len(per_task) if per_task else math.nan,
        "correct": correct,
        "judgements": counted,
        "tasks": len(results),
    }


def evaluate(bench_dir: Path, predictions: Mapping[str, Path]) -> dict[str, Any]:
    """Score judgment files per task (``{task: path}``) against a benchmark folder, plus ``"overall"``.

    Tasks come out in the official order, keyed by scorer name.
    """
    tasks = {parse_task(t).scorer: Path(p) for t, p in predictions.items()}
    out: dict[str, Any] = {}
    for task in (t.scorer for t in TASKS):
        if task in tasks:
            pairs, judgments = load_pairs(find_task_file(bench_dir, task)), load_judgments(tasks[task])
            out[task] = {**accuracy(pairs, judgments), "unscored": unscored_pairs(pairs, judgments)}
    out["overall"] = overall([out[t.scorer] for t in TASKS if t.scorer in out])
    return out




# --- which task a judgment file scores against ------------------------------------------------


def assign_predictions(bench_dir: Path, items: Iterable[str | Path]) -> list[tuple[Task, Path]]:
    """Each judgment file with its task: ``TASK=FILE`` as given (either spelling), a plain FILE by
    the task whose pairs share the most ids with it. A file matching no task, or two tasks equally,
    is a one-line error: scoring it against the wrong pairs would give a number that means nothing."""
    assigned: list[tuple[Task, Path]] = []
    known: dict[Task, set[str]] | None = None
    for item in items:
        label, sep, file = str(item).partition("=")
        if sep and is_task(label):
            assigned.append((parse_task(label), Path(file)))
            continue
        if known is None:
            known = task_pair_ids(bench_dir)
        assigned.append((_task_of(Path(item), known, bench_dir), Path(item)))
    return assigned


def one_file_per_task(assigned: Iterable[tuple[Task, Path]]) -> dict[Task, Path]:
    """``{task: file}`` in the official task order; two files for one task is an error."""
    by_task: dict[Task, Path] = {}
    for task, path in assigned:
        if task in by_task:
            raise BonError(f"{path}: a second judgment file for task {task.name} (after {by_task[task]}); "
                           "score one judge's files per command")
        by_task[task] = path
    return {t: by_task[t] for t in TASKS if t in by_task}


def task_pair_ids(bench_dir: Path) -> dict[Task, set[str]]:
    """The pair ids of every task file present in a benchmark folder."""
    ids = {t: {p.id for p in load_pairs(find_task_file(bench_dir, t))} for t in TASKS if has_task_file(bench_dir, t)}
    if not ids:
        raise BonError(f"{bench_dir}: no MMRB2 task files ({', '.join(t.file for t in TASKS)} or *_response_only.json)")
    return ids


def _task_of(path: Path, known: Mapping[Task, set[str]], bench_dir: Path) -> Task:
    ids = set(load_judgments(path))
    overlap = {task: len(ids & pair_ids) for task, pair_ids in known.items()}
    best = max(overlap.values(), default=0)
    if best == 0:
        raise BonError(f"{path}: none of its pair ids is in {bench_dir}; pass it as TASK=FILE")
    tied = [task.name for task, n in overlap.items() if n == best]
    if len(tied) > 1:
        raise BonError(f"{path}: its pair ids match tasks {' and '.join(tied)} equally; pass it as TASK=FILE")
    return next(task for task, n in overlap.items() if n == best)
