"""Graders that stand in for a model in the official-metric tests."""

from verifiers._grader import Grader, GradingFailed


class DownGrader(Grader):
    """A grader whose every call times out (a transient failure: retried on a rerun, never stored)."""

    def identity(self):
        return {"backend": "down"}

    def answer(self, turns, max_new_tokens=256):
        raise GradingFailed("grader: timed out", transient=True)

    def next_word_probs(self, turns, words):
        raise AssertionError("a transient grader is never asked for probabilities here")
