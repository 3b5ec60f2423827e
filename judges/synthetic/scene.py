"""Scene-parsing judges: read the prompt's text, parse both responses' pixels, score each.

``scene-full`` parses the prompt with the world's grammar (never its metadata), perceives every
image at full resolution and scores each response with the same atom checks the verifier uses,
but it is blind to what the verifier additionally weighs: pixel damage, and what an edit or a step
should leave alone (other objects, the sign, the background, cross-step consistency). For
reasoning it answers the question itself from the input image and prefers the response whose
final answer matches its own. A strong judge, wrong exactly where those blind spots matter.

``scene-lowres`` is the same at 32x32: small or adjacent shapes merge or are misnamed, the sign
is barely legible, and its own reasoning answers are sometimes wrong.
"""

from __future__ import annotations

from typing import Any

from bon.content import Content, Prompt
from bon.errors import BonError
from generators.synthetic import checks
from generators.synthetic.language import interpret
from judges.synthetic._scoring import LruCache, ScoringJudge


class SceneJudge(ScoringJudge):
    algorithm = "scene-full"
    version = 1
    grader_family = "synthetic-checks"  # the verifier's own check code: the demo lists it as the verifier's twin
    resolution: int | None = None

    def __init__(self, name: str | None = None, seed: int = 0) -> None:
        super().__init__(name=name, seed=seed)
        self._specs = LruCache()

    def options(self) -> dict[str, Any]:
        return {"resolution": self.resolution}

    def spec_for(self, prompt: Prompt) -> dict[str, Any]:
        """The prompt's public spec as parsed from its text (cached per prompt content)."""
        return self._specs.get((prompt.task, prompt.content.digest), lambda: interpret(prompt))

    def response_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        spec = self.spec_for(prompt)
        try:
            value, details = checks.satisfaction(prompt.task, spec, prompt, response, resolution=self.resolution,
                                                 include_artefacts=False, include_preservation=False)
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            raise BonError(f"cannot grade this response ({type(exc).__name__}: {exc})") from None
        return value, {}


class LowResSceneJudge(SceneJudge):
    algorithm = "scene-lowres"
    relative_cost = 2.0  # its own low-resolution look at every image (bon.stages.pool starts the costliest first)
    resolution = 32
