"""Stage 2: N candidates per prompt and generator, appended prompt by prompt (resumable).

A prompt whose generation failed transiently (out of memory, a timeout, a 429/5xx answer), whether
the generator raised or returned a candidate marked missing for such a reason, is not written: it
stays pending and the next run generates it. Final failures (refused content) are stored as missing
candidates with their reason."""

from __future__ import annotations

from collections import defaultdict

from bon.content import Candidate, Prompt, append_jsonl, load_candidates
from bon.errors import BonError
from bon.failures import is_transient, looks_transient
from bon.lifecycle import LoadFailed
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


def generate(run: RunFolder, generator: Generator, prompts: list[Prompt], n: int, seed: int) -> dict[str, list[Candidate]]:
    """Candidates of every prompt that is complete; prompts left out are pending (transient failures)."""
    done = load_done(run, generator.name, n)
    todo = [p for p in prompts if p.id not in done]
    folder = run.candidates_dir(generator.name)
    with bar(f"generate {generator.name}", len(prompts)) as progress:
        progress.advance(len(prompts) - len(todo))
        for prompt in todo:
            cands = _sample(generator, prompt, candidate_seeds(seed, generator.name, prompt.id, n))
            if cands is not None:
                if len(cands) != n:
                    raise BonError(f"generator {generator.name}: {len(cands)} candidates for prompt {prompt.id}, expected {n}")
                append_jsonl(run.candidates(generator.name), [c.to_json(folder, folder / "images") for c in cands])
            progress.advance()
    fresh = load_done(run, generator.name, n)
    return {p.id: fresh[p.id] for p in prompts if p.id in fresh}


def _sample(generator: Generator, prompt: Prompt, seeds: list[int]) -> list[Candidate] | None:
    """The prompt's candidates, or None when a transient failure leaves the prompt for a later run."""
    try:
        cands = generator.sample(prompt, seeds)
    except LoadFailed:
        raise
    except Exception as exc:
        if is_transient(exc):
            return None
        raise
    if any(transient_miss(c) for c in cands):
        return None
    return cands


def transient_miss(cand: Candidate) -> bool:
    """A candidate the generator could not make for a reason worth retrying."""
    reason = cand.provenance.get("missing")
    if not reason:
        return False
    flag = cand.provenance.get("transient")
    return flag if isinstance(flag, bool) else looks_transient(str(reason))
