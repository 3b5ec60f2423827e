"""Stage 3: the downstream verifier scores every candidate once; any pick's score is then a lookup.

A transient grading failure (out of memory, a timeout, a 429/5xx answer) is not written: the
candidate stays pending (absent from the scores file) and the next run scores it. A final failure
(an unparseable answer, refused content) is written as a missing score with its reason. Scores are
written as they return; those that came back out of order (Ray workers) are put back in candidate
order at the end, so the file is the one a local run writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from bon.content import Candidate, Prompt, append_jsonl, read_jsonl, reorder_jsonl
from bon.executors.local import LocalExecutor
from bon.failures import looks_transient
from bon.plugins import Score, Verifier
from bon.progress import bar
from bon.runfolder import RunFolder
from bon.stages.pool import run_jobs

ScoreKey = tuple[str, str, int]  # generator, prompt id, candidate index
FLUSH_EVERY = 64
CHUNK = 128  # candidates a forked worker scores per job: small enough for steady progress and even shares


def load_scores(run: RunFolder, path: Path | None = None) -> dict[ScoreKey, dict]:
    return {(r["generator"], r["prompt_id"], int(r["index"])): r for _, r in read_jsonl(path or run.scores)}


def verify(run: RunFolder, verifier: Verifier, prompts: dict[str, Prompt], candidates: list[Candidate],
           path: Path | None = None, executor=None,
           parts: Callable[[list[Candidate]], Iterable[list[Candidate]]] | None = None,
           workers: int = 1) -> dict[ScoreKey, dict]:
    """Score every candidate not yet in ``path`` (default: the study's ``scores.jsonl``); ``executor``
    (default: in-process) runs the scoring, this driver writes the scores. ``parts`` cuts the candidates
    left into consecutive parts, scored one after another (each part's images decoded before it is
    scored and let go after: :func:`bon.study.decoded_parts`). ``workers > 1`` (a cheap CPU verifier,
    in-process executor): each part's candidates are scored in that many forked workers, a run of
    consecutive candidates per job, and written in candidate order as when one process scores them."""
    executor = executor or LocalExecutor()
    path = path or run.scores
    scores = load_scores(run, path)
    todo = [c for c in candidates if c.key not in scores]
    if todo and workers > 1 and callable(getattr(type(verifier), "plugin", None)):
        verifier.plugin()  # a lazy verifier loads here, once: the workers inherit it (and the driver its identity)
    pending: list[dict] = []
    with bar(f"verify ({verifier.name})", len(candidates)) as progress:
        progress.advance(len(candidates) - len(todo))
        shuffled, last, offset = False, -1, 0
        for part in parts(todo) if parts is not None else [todo]:
            for i, score in _scored(executor, verifier, [(prompts[c.prompt_id], c) for c in part], workers):
                cand, shuffled, last = part[i], shuffled or offset + i < last, offset + i
                if not (score.transient or (score.value is None and looks_transient(score.missing))):
                    pending.append(_record(cand, score))
                progress.advance()
                if len(pending) >= FLUSH_EVERY:
                    append_jsonl(path, pending)
                    pending = []
            offset += len(part)
        append_jsonl(path, pending)
    if shuffled:
        rank = {c.key: k for k, c in enumerate(candidates)}
        reorder_jsonl(path, lambda r: rank.get((r.get("generator"), r.get("prompt_id"), int(r.get("index", 0))), -1))
    return load_scores(run, path)


def _scored(executor, verifier: Verifier, items: list[tuple[Prompt, Candidate]], workers: int) -> Iterator[tuple[int, Score]]:
    """``executor.score_all`` over ``items``; with ``workers > 1`` in forked workers, ``CHUNK`` consecutive
    items per job, the scores still yielded in item order. A verifier may keep per-image work that later
    stages reuse (the synthetic verifier's parsed scenes, which its twin judges read): its optional
    ``worker_memo()`` returns what a worker computed and ``keep_memo(memo)`` keeps it in the driver, so the
    driver ends the stage holding what it would hold had it scored everything itself."""
    if workers <= 1 or len(items) <= CHUNK:
        yield from executor.score_all(verifier, items)
        return
    memo = getattr(verifier, "worker_memo", None)

    def chunk(j: int) -> tuple[list[tuple[int, Score]], Any]:
        scored = list(executor.score_all(verifier, items[starts[j] : starts[j] + CHUNK]))
        return scored, memo() if memo is not None else None

    starts = range(0, len(items), CHUNK)
    for start, (scored, learned) in zip(starts, run_jobs(chunk, len(starts), workers)):
        if memo is not None:
            verifier.keep_memo(learned)
        for i, score in scored:
            yield start + i, score


def unscored(candidates: list[Candidate], scores: dict[ScoreKey, dict]) -> int:
    """How many candidates are still pending: not in the scores file after a verify pass."""
    return sum(c.key not in scores for c in candidates)


def _record(cand: Candidate, score: Score) -> dict:
    return {
        "generator": cand.generator,
        "prompt_id": cand.prompt_id,
        "index": cand.index,
        "score": score.value,
        "missing": score.missing,
        "details": score.details,
    }
