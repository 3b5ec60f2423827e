"""Helpers of the official-metric tests: a grader that stands in for a model, and what `bon score` does."""

from pathlib import Path

from verifiers._grader import Grader, GradingFailed


class DownGrader(Grader):
    """A grader whose every call times out (a transient failure: retried on a rerun, never stored)."""

    def identity(self):
        return {"backend": "down"}

    def answer(self, turns, max_new_tokens=256):
        raise GradingFailed("grader: timed out", transient=True)

    def next_word_probs(self, turns, words):
        raise AssertionError("a transient grader is never asked for probabilities here")


def score_items(verifier, items: list[dict], base: Path):
    """What `bon score` does: read_item -> score -> aggregate (per item: its id, prompt and score)."""
    scored = []
    for item in items:
        prompt, candidate = verifier.read_item(item, base)
        scored.append((verifier.item_id(item), prompt, verifier.score(prompt, candidate)))
    return scored, verifier.aggregate([(p, s) for _, p, s in scored])
