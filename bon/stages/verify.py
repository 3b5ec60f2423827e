"""Stage 3: the downstream verifier scores every candidate once; any pick's score is then a lookup.

A transient grading failure (out of memory, a timeout, a 429/5xx answer) is not written: the
candidate stays pending (absent from the scores file) and the next run scores it. A final failure
(an unparseable answer, refused content) is written as a missing score with its reason. Scores are
written as they return; those that came back out of order (Ray workers) are put back in candidate
order at the end, so the file is the one a local run writes."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from bon.content import Candidate, Prompt, append_jsonl, read_jsonl, reorder_jsonl
from bon.executors.local import LocalExecutor
from bon.failures import looks_transient
from bon.plugins import Score, Verifier
from bon.progress import bar
from bon.runfolder import RunFolder

ScoreKey = tuple[str, str, int]  # generator, prompt id, candidate index
FLUSH_EVERY = 64


def load_scores(run: RunFolder, path: Path | None = None) -> dict[ScoreKey, dict]:
    return {(r["generator"], r["prompt_id"], int(r["index"])): r for _, r in read_jsonl(path or run.scores)}


def verify(run: RunFolder, verifier: Verifier, prompts: dict[str, Prompt], candidates: list[Candidate],
           path: Path | None = None, executor=None,
           parts: Callable[[list[Candidate]], Iterable[list[Candidate]]] | None = None) -> dict[ScoreKey, dict]:
    """Score every candidate not yet in ``path`` (default: the study's ``scores.jsonl``); ``executor``
    (default: in-process) runs the scoring, this driver writes the scores. ``parts`` cuts the candidates
    left into consecutive parts, scored one after another (each part's images decoded before it is
    scored and let go after: :func:`bon.study.decoded_parts`)."""
    executor = executor or LocalExecutor()
    path = path or run.scores
    scores = load_scores(run, path)
    todo = [c for c in candidates if c.key not in scores]
    pending: list[dict] = []
    with bar(f"verify ({verifier.name})", len(candidates)) as progress:
        progress.advance(len(candidates) - len(todo))
        shuffled, last, offset = False, -1, 0
        for part in parts(todo) if parts is not None else [todo]:
            for i, score in executor.score_all(verifier, [(prompts[c.prompt_id], c) for c in part]):
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
