"""The interfaces plugins implement (judges' lives in :mod:`bon.protocol`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence

from bon.content import Candidate, Prompt


class Generator(ABC):
    """Samples candidates for a prompt. ``name`` is the label the study gives this generator."""

    name: str = "generator"

    def identity(self) -> dict[str, Any]:
        return {"name": self.name}

    @abstractmethod
    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        """One candidate per seed, ``index`` = position in ``seeds``; same seed, same candidate."""


@dataclass
class Score:
    """A verifier's downstream score of one candidate, in [0, 1]; ``value`` None means grading failed.

    ``transient`` marks a failure worth retrying on a later run (out of memory, timeouts, 429/5xx):
    the verify stage does not store it, so the candidate stays pending until a rerun scores it."""

    value: float | None
    details: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None
    transient: bool = False


class Verifier(ABC):
    """Scores a candidate's success on its prompt from what the candidate shows (pixels and text)."""

    name: str = "verifier"

    def identity(self) -> dict[str, Any]:
        return {"name": self.name}

    @abstractmethod
    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        """Never raises for a bad candidate: returns ``Score(None, missing=reason)``."""
