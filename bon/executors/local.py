"""The in-process executor: each stage calls its plugin directly, one item after another."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from bon.content import Candidate, Prompt
from bon.failures import is_transient, looks_transient
from bon.lifecycle import LoadFailed
from bon.plugins import Generator, PairwiseJudge, Score, Verifier
from bon.protocol import Comparison, Verdict


def safe_sample(generator: Generator, prompt: Prompt, seeds: list[int]) -> list[Candidate] | None:
    """The prompt's candidates, or None when a transient failure leaves the prompt for a later run."""
    try:
        cands = generator.sample(prompt, seeds)
    except LoadFailed:
        raise
    except Exception as exc:
        if is_transient(exc):
            return None
        raise
    return None if any(transient_miss(c) for c in cands) else cands


def transient_miss(cand: Candidate) -> bool:
    """A candidate the generator could not make for a reason worth retrying."""
    reason = cand.provenance.get("missing")
    if not reason:
        return False
    flag = cand.provenance.get("transient")
    return flag if isinstance(flag, bool) else looks_transient(str(reason))


def safe_score(verifier: Verifier, prompt: Prompt, cand: Candidate) -> Score:
    """A grading failure is data (a missing score with its reason), never a zero and never a crash;
    a transient one is flagged so that it is not stored and a rerun asks again."""
    if cand.provenance.get("missing"):  # the generator failed on this candidate
        return Score(None, missing=f"no candidate: {cand.provenance['missing']}")
    try:
        return verifier.score(prompt, cand)
    except LoadFailed:
        raise
    except Exception as exc:
        return Score(None, missing=f"{type(exc).__name__}: {exc}", transient=is_transient(exc))


class LocalExecutor:
    name = "local"

    def sample_all(self, generator: Generator, prompts: Sequence[Prompt],
                   seeds_of: Callable[[Prompt], list[int]]) -> Iterator[tuple[int, list[Candidate] | None]]:
        """(prompt index, candidates; None: pending after a transient failure), in prompt order."""
        for i, prompt in enumerate(prompts):
            yield i, safe_sample(generator, prompt, seeds_of(prompt))

    def score_all(self, verifier: Verifier, items: Sequence[tuple[Prompt, Candidate]]) -> Iterator[tuple[int, Score]]:
        """(item index, score) for each (prompt, candidate), in order."""
        for i, (prompt, cand) in enumerate(items):
            yield i, safe_score(verifier, prompt, cand)

    def judge(self, judge: PairwiseJudge, comparisons: Sequence[Comparison]) -> list[Verdict]:
        return judge.judge(list(comparisons))

    def close(self) -> None:
        pass
