"""The in-process executor: each stage calls its plugin directly, one item after another."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from bon.content import Candidate, Prompt
from bon.plugins import Generator, Score, Verifier
from bon.protocol import Comparison, PairwiseJudge, Verdict


def safe_score(verifier: Verifier, prompt: Prompt, cand: Candidate) -> Score:
    """A grading failure is data (a missing score with its reason), never a zero and never a crash."""
    if cand.provenance.get("missing"):  # the generator failed on this candidate
        return Score(None, missing=f"no candidate: {cand.provenance['missing']}")
    try:
        return verifier.score(prompt, cand)
    except Exception as exc:
        return Score(None, missing=f"{type(exc).__name__}: {exc}")


class LocalExecutor:
    name = "local"

    def sample_all(self, generator: Generator, prompts: Sequence[Prompt],
                   seeds_of: Callable[[Prompt], list[int]]) -> Iterator[list[Candidate]]:
        """Candidates of each prompt, in prompt order, as each prompt finishes."""
        for prompt in prompts:
            yield generator.sample(prompt, seeds_of(prompt))

    def score_all(self, verifier: Verifier, items: Sequence[tuple[Prompt, Candidate]]) -> Iterator[Score]:
        """A score for each (prompt, candidate), in order."""
        for prompt, cand in items:
            yield safe_score(verifier, prompt, cand)

    def judge(self, judge: PairwiseJudge, comparisons: Sequence[Comparison]) -> list[Verdict]:
        return judge.judge(list(comparisons))

    def close(self) -> None:
        pass
