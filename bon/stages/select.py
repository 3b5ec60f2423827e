"""Stage 6: each judge picks one of N candidates per prompt and generator with the study's strategy."""

from __future__ import annotations

from typing import Any

from bon.content import Candidate, Prompt
from bon.referee import Referee
from bon.selection import Strategy, run_selection


def select(
    referee: Referee,
    strategy: Strategy,
    prompts: list[Prompt],
    candidates: dict[str, dict[str, list[Candidate]]],  # generator -> prompt id -> candidates
    seed: int,
) -> list[dict[str, Any]]:
    """One bracket per (generator, prompt), all played together so the judge sees full batches."""
    groups = [(p, cands[p.id]) for cands in candidates.values() for p in prompts]
    picks = run_selection(strategy, referee, groups, seed=seed)
    tasks = {p.id: p.task for p in prompts}
    return [
        {"judge": referee.judge.name, "strategy": strategy.name, "task": tasks[pk.prompt_id], **pk.as_dict()}
        for pk in picks
    ]
