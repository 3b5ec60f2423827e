"""The synthetic world's downstream verifier: task success read from pixels and text.

It knows the ground truth of each prompt (``metadata["spec"]``: the intended objects, the reference
answer) and checks what the candidate *shows* against it, in the manner of the usual benchmark for
each task: t2i as the fraction of prompt atoms satisfied, edits as instruction success combined with
preservation (GEdit-Bench style geometric mean), interleaved as structure x per-step correctness x
cross-step consistency, reasoning as exact match of the final answer. Perceived damage lowers
every image-based score. Provenance (how the candidate was made) is never read.
"""

from __future__ import annotations


from bon.content import Candidate, Prompt
from bon.errors import BonError
from bon.plugins import Score, Verifier
from generators.synthetic import checks, perception


class SyntheticVerifier(Verifier):
    name = "synthetic"
    forkable = True  # pure CPU: bon.stages.pool may run it in a worker process
    grader_family = "synthetic-checks"  # generators.synthetic.checks; judges with the same family share its errors

    def __init__(self, name: str | None = None) -> None:
        if name:
            self.name = name
        perception.warm()  # built once in the process that loads the verifier: the scoring workers fork from it

    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        spec = prompt.metadata.get("spec")
        if not isinstance(spec, dict):
            return Score(None, missing="prompt has no synthetic spec (metadata['spec'])")
        try:
            value, details = checks.satisfaction(prompt.task, spec, prompt, candidate.content)
        except BonError as exc:
            return Score(None, missing=f"unreadable content: {exc}")
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return Score(None, missing=f"malformed spec or content: {type(exc).__name__}: {exc}")
        return Score(float(min(1.0, max(0.0, value))), details=details)

    def worker_memo(self) -> list:
        """What a forked worker parsed (bon.stages.verify hands it to the driver's :meth:`keep_memo`)."""
        return perception.new_scenes()

    def keep_memo(self, memo: list) -> None:
        """Keep a worker's parsed scenes here: the verifier's twin judges, forked later, then find them."""
        perception.keep_scenes(memo)
