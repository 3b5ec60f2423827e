"""Stage 5: a judge answers every pair of an MMRB2-layout benchmark in both orders.

The output is an official-format judgment file (``{id: {"forward": [...], "reverse": [...]}}``,
the reverse stored as the judge saw it). Calls go through the referee, so a rerun is free and the
same judgments serve Best-of-N selection whenever the contents coincide.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from bon.content import Content, ImageItem, Prompt, decode_images, safe_join
from bon.errors import BonError
from bon.mmrb2 import Pair, find_task_file, load_pairs
from bon.progress import bar
from bon.protocol import Comparison, Verdict
from bon.referee import Referee
from bon.tasks import parse_task

CHUNK = 256  # comparisons per referee batch: progress and crash-safety granularity


def pair_comparisons(pair: Pair, task: str, bench_dir: Path, samples: int) -> list[Comparison]:
    """Forward comparisons then reverse ones (B shown first), ``samples`` of each."""
    if pair.prompt_content is None:
        raise BonError(f"pair {pair.id}: no prompt_content; judging needs the full release, not *_response_only.json")
    where = f"pair {pair.id}"
    prompt = Prompt(pair.id, task, _content(pair.prompt_content, bench_dir, "input_images", f"{where} prompt"), dict(pair.prompt_metadata))
    a = _content(pair.response_a, bench_dir, "images", f"{where} response_a")
    b = _content(pair.response_b, bench_dir, "images", f"{where} response_b")
    return [Comparison(prompt, a, b, s) for s in range(samples)] + [Comparison(prompt, b, a, s) for s in range(samples)]


def _content(raw: list, bench_dir: Path, folder: str, where: str) -> Content:
    """Image paths are relative to ``folder`` (``images/`` or ``input_images/``); some copies of the
    release spell the folder out in the path (``images/x.jpg``), which is accepted too."""
    prefix = folder + "/"
    items = [[k, v[len(prefix):]] if k == "image" and isinstance(v, str) and v.startswith(prefix) else [k, v] for k, v in raw]
    base = bench_dir / folder

    def image(value: str, origin: str) -> ImageItem:
        path = safe_join(base, value, where=origin)  # checked as before, kept or not
        return _KEPT.get(path) or ImageItem(path=path)

    return Content.from_json(items, base, where, image=image)


_KEPT: dict[Path, ImageItem] = {}  # the preference set's images by path, hashed once by the driver (keep_decoded)


def pair_images(bench_dir: Path, tasks: list[str]) -> dict[str, dict[str, list[ImageItem]]]:
    """Per task, per pair (in file order), the image items of its prompt and both responses, new ones (no
    pixels read). A task or pair that does not parse is left out: judge_pairs reports it."""
    found: dict[str, dict[str, list[ImageItem]]] = {}
    for task in tasks:
        try:
            spec = parse_task(task)
            pairs = load_pairs(find_task_file(bench_dir, spec))
        except Exception:  # noqa: BLE001 - judge_pairs reports it
            continue
        found[task] = {}
        for pair in pairs:
            try:
                [comp] = pair_comparisons(pair, spec.name, bench_dir, 1)[:1]
            except Exception:  # noqa: BLE001 - judge_pairs reports it
                continue
            found[task][pair.id] = [i for c in (comp.prompt.content, comp.a, comp.b) for i in c.items if isinstance(i, ImageItem)]
    return found


def share_images(items: Iterable[ImageItem]) -> None:
    """Every judge that reads one of these images (by path) next gets this item, so its digest is
    computed once for all of them (:func:`forget_decoded` lets them go)."""
    for item in items:
        _KEPT.setdefault(item.path, item)


def keep_decoded(bench_dir: Path, tasks: list[str]) -> None:
    """Hash the preference set's images here (in threads), before the judges' workers fork, so every
    judge shares one item (path and digest) per image instead of hashing it again (9 judges: 9 decodes
    per image); their pixels go to the image cache as far as its bound allows (:func:`decode_images`).
    Anything that fails to read is skipped; the judge that reads it reports it, as before.
    :func:`forget_decoded` lets them go."""
    from bon.stages.pool import usable_cores

    items: dict[Path, ImageItem] = {}
    for by_pair in pair_images(bench_dir, tasks).values():
        for item in (i for found in by_pair.values() for i in found):
            if item.path not in _KEPT:
                items.setdefault(item.path, item)
    todo = list(items.values())
    share_images(item for item, ok in zip(todo, decode_images(todo, usable_cores())) if ok)


def forget_decoded() -> None:
    _KEPT.clear()


def judgment_entry(verdict: Verdict, evaluator: str) -> dict[str, Any]:
    if verdict.better is None:
        meta = {"missing": verdict.missing, **({"transient": True} if verdict.transient else {})}
        return {"judgement": "", "evaluator": evaluator, "metadata": meta}
    return {"judgement": verdict.better, "evaluator": evaluator, "metadata": {"score": verdict.score, **verdict.meta}}


def is_complete(entry: Any, samples: int, retry_missing: bool = False) -> bool:
    """A pair already judged: ``samples`` answers (or lasting failures) in each direction. A transient
    failure (timeout, rate limit) does not count, so a rerun asks again; with ``retry_missing`` no
    missing answer counts."""
    if not isinstance(entry, dict):
        return False
    for d in ("forward", "reverse"):
        got = [s for s in (entry.get(d) or [])[:samples] if isinstance(s, dict)]
        if len(got) < samples or any(_unfinished(s, retry_missing) for s in got):
            return False
    return True


def _unfinished(answer: dict, retry_missing: bool) -> bool:
    meta = answer.get("metadata") or {}
    return bool(meta.get("transient")) or (retry_missing and not answer.get("judgement"))


def judge_pairs(
    bench_dir: Path,
    task: str,
    referee: Referee,
    limit: int | None = None,
    done: dict[str, dict] | None = None,
    save: Callable[[dict[str, dict]], None] | None = None,
    part: Sequence[Pair] | None = None,
) -> dict[str, dict]:
    """Judge every pair (or the first ``limit``) of one task; returns the official judgment mapping.

    Pairs complete in ``done`` (an earlier, interrupted run's file) are kept as they are; ``save`` is
    called with everything so far after each batch, so a killed run loses at most one batch. ``part``:
    only these pairs of the task's file, read already (a part of the set, :func:`bon.study.judge_and_select`). A pair
    with a transient failure is not written (the referee's ``stats.transient`` counts its pending
    calls): the file holds final answers only, and a rerun asks what is left.
    """
    task = parse_task(task)
    pairs = list(part) if part is not None else load_pairs(find_task_file(bench_dir, task))[:limit]
    samples = referee.samples
    out: dict[str, dict] = {p.id: done[p.id] for p in pairs if done and is_complete(done.get(p.id), samples, referee.retry_missing)}
    todo = [p for p in pairs if p.id not in out]
    with bar(f"mmrb2 {task.scorer} ({referee.judge.name})", len(pairs)) as progress:
        progress.advance(len(out))
        per_chunk = max(1, CHUNK // (2 * samples))
        for start in range(0, len(todo), per_chunk):
            chunk = todo[start : start + per_chunk]
            comps = [c for p in chunk for c in pair_comparisons(p, task.name, bench_dir, samples)]
            verdicts = referee.ask(comps)
            for i, pair in enumerate(chunk):
                mine = verdicts[i * 2 * samples : (i + 1) * 2 * samples]
                if any(v.transient for v in mine):
                    continue  # pending, not final: left out of the file (its answered calls are in the store)
                out[pair.id] = {
                    "forward": [judgment_entry(v, referee.judge.name) for v in mine[:samples]],
                    "reverse": [judgment_entry(v, referee.judge.name) for v in mine[samples:]],
                }
            progress.advance(len(chunk))
            if save is not None:
                save(_in_order(out, pairs))
    return _in_order(out, pairs)


def _in_order(judged: dict[str, dict], pairs: list[Pair]) -> dict[str, dict]:
    return {p.id: judged[p.id] for p in pairs if p.id in judged}
