"""A text-only judge: how much of the prompt's vocabulary the response's text repeats.

It never looks at pixels. A response's score is the F1 overlap between the prompt's and the
response's content-word sets (lowercased word tokens, stopwords removed); for reasoning prompts a
well-formed final ``Answer: <x>`` line earns a small bonus. A response without any text (the usual
image-only t2i or edit output) gives no signal, so such pairs fall to the seeded coin.
"""

from __future__ import annotations

import re
from typing import Any

from bon.content import Content, Prompt

from judges.synthetic._scoring import ScoringJudge

STOPWORDS = frozenset(
    """
    a an the and or but if then than so of in on at to for from by with without into onto over under
    is are was were be been being am do does did done has have had having it its this that these those
    there here which who whom whose what when where why how all any both each few more most other some
    such no nor not only own same too very can will just should would could may might must shall i me my
    we our you your he him his she her they them their as up down out off again further once also please
    answer
    """.split()
)

WORD_RE = re.compile(r"[a-z0-9]+")
ANSWER_RE = re.compile(r"^\s*answer\s*:\s*\S", re.IGNORECASE)


def content_words(text: str) -> set[str]:
    return {w for w in WORD_RE.findall(text.lower()) if w not in STOPWORDS}


def has_answer_line(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return bool(lines) and bool(ANSWER_RE.match(lines[-1]))


class TextOverlapJudge(ScoringJudge):
    """Options: ``answer_bonus`` (added to a reasoning response whose last line is ``Answer: <x>``)."""

    algorithm = "text-overlap"
    version = 1
    margin_scale = 2.0  # F1 differences are small numbers; 0.2 F1 apart is a clear preference

    def __init__(self, name: str | None = None, seed: int = 0, answer_bonus: float = 0.15) -> None:
        super().__init__(name=name, seed=seed)
        self.answer_bonus = float(answer_bonus)

    def response_score(self, prompt: Prompt, response: Content) -> tuple[float | None, dict[str, Any]]:
        text = response.text
        if not text.strip():
            return None, {}
        want = content_words(prompt.content.text)
        got = content_words(text)
        common = len(want & got)
        precision = common / len(got) if got else 0.0
        recall = common / len(want) if want else 0.0
        f1 = 2 * precision * recall / (precision + recall) if common else 0.0
        answered = prompt.task == "reasoning" and has_answer_line(text)
        return f1 + (self.answer_bonus if answered else 0.0), {"f1": f1, "answer_line": answered}
