"""Stage 2: N candidates per prompt and generator, appended prompt by prompt as each returns (resumable;
prompts that came back out of order, from Ray workers, are put back in prompt order at the end).

A prompt whose generation failed transiently (out of memory, a timeout, a 429/5xx answer), whether
the generator raised or returned a candidate marked missing for such a reason, is not written: it
stays pending and the next run generates it. Final failures (refused content) are stored as missing
candidates with their reason."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from bon.content import Candidate, Prompt, append_jsonl, load_candidates, reorder_jsonl
from bon.errors import BonError
from bon.executors.local import LocalExecutor
from bon.plugins import Generator
from bon.progress import bar
from bon.runfolder import RunFolder
from bon.seeds import derive_seed


def candidate_seeds(seed: int, generator: str, prompt_id: str, n: int) -> list[int]:
    return [derive_seed(seed, generator, prompt_id, k) for k in range(n)]


def load_done(run: RunFolder, generator: str, n: int) -> dict[str, list[Candidate]]:
    """Candidates of prompts that are complete; a prompt cut off midway is redone."""
    by_prompt: dict[str, dict[int, Candidate]] = defaultdict(dict)
    for c in load_candidates(run.candidates(generator)):
        by_prompt[c.prompt_id][c.index] = c  # a later record of the same key wins
    return {
        pid: [cands[k] for k in range(n)]
        for pid, cands in by_prompt.items()
        if all(k in cands for k in range(n))
    }


def generate(run: RunFolder, generator: Generator, prompts: list[Prompt], n: int, seed: int,
             executor=None) -> dict[str, list[Candidate]]:
    """Candidates of every prompt that is complete; prompts left out are pending (transient failures).
    ``executor`` (default: in-process) runs the sampling; this driver writes every candidate."""
    executor = executor or LocalExecutor()
    done = load_done(run, generator.name, n)
    todo = [p for p in prompts if p.id not in done]
    folder = run.candidates_dir(generator.name)
    with bar(f"generate {generator.name}", len(prompts)) as progress:
        progress.advance(len(prompts) - len(todo))
        sampled = executor.sample_all(generator, todo, lambda p: candidate_seeds(seed, generator.name, p.id, n))
        shuffled, last = False, -1
        hashed: dict[Path, str] = {}  # digest of every image written here, by its file
        for i, cands in sampled:
            prompt, shuffled, last = todo[i], shuffled or i < last, i
            if cands is not None:
                if len(cands) != n:
                    raise BonError(f"generator {generator.name}: {len(cands)} candidates for prompt {prompt.id}, expected {n}")
                append_jsonl(run.candidates(generator.name), [c.to_json(folder, folder / "images") for c in cands])
                hashed.update((item.path, item._digest) for c in cands for item in c.content.images if item._digest)
            progress.advance()
    if shuffled:
        rank = {p.id: k for k, p in enumerate(prompts)}
        reorder_jsonl(run.candidates(generator.name), lambda r: (rank.get(r.get("prompt_id"), -1), r.get("index", 0)))
    fresh = load_done(run, generator.name, n)
    return {p.id: with_digests(fresh[p.id], hashed) for p in prompts if p.id in fresh}


def with_digests(candidates: list[Candidate], hashed: dict[Path, str]) -> list[Candidate]:
    """``candidates`` as read back from the file, each image whose file this stage has just written given the
    digest hashed from its pixels then (:meth:`ImageItem.saved`): the verifier and the judges' workers look
    images up by digest, and would otherwise decode every file again only to hash it."""
    for c in candidates:
        for item in c.content.images:
            if item._digest is None and item.path in hashed:
                item._digest = hashed[item.path]
    return candidates

