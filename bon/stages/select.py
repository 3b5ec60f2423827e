"""Stage 6: each judge picks one of N candidates per prompt and generator with the study's strategy."""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Mapping

from bon.content import Candidate, Prompt
from bon.progress import note
from bon.referee import Referee
from bon.selection import Strategy, run_selection


def strategy_label(strategy: Strategy) -> str:
    """The strategy's name plus every setting that differs from its default (``round-robin-borda``),
    so picks of two settings never share a label or a file, and the default keeps the plain name."""
    try:
        defaults = {k: p.default for k, p in inspect.signature(type(strategy)).parameters.items()}
    except (TypeError, ValueError):
        defaults = {}
    settings = {k: v for k, v in strategy.identity().items() if k not in ("name", "plugin", "version")}
    changed = [(k, v) for k, v in settings.items() if k in defaults and defaults[k] != v and v is not None]
    return "-".join([strategy.name, *(k.replace("_", "-") if v is True else str(v) for k, v in changed)])


def prompt_by_prompt(strategy: Strategy) -> bool:
    """Whether each prompt's pick depends on its own matches alone, so that the prompts may be judged in
    parts (:func:`bon.study.judge_and_select`): a built-in strategy that asks both orders of every match.
    A gated swap (its gate calibrated, audited or falling back on what earlier matches showed), a cascade
    (its gate likewise) and a prefilter's ``keep: auto`` (calibrated on held-out prompts) learn across
    prompts, and a plugin's own strategy may: those judge every prompt together."""
    if not type(strategy).__module__.startswith("bon.selection."):
        return False
    prefilter = getattr(strategy, "prefilter", None)
    return not strategy.swap.gated and strategy.cascade is None and (prefilter is None or prefilter.keep != "auto")


def verifier_utility(groups: list[Any], scores: Mapping[Any, Mapping[str, Any]]) -> Callable[[int, int], float]:
    """Candidate j of group i's verifier score (NaN when it has none)."""
    def utility(i: int, j: int) -> float:
        value = (scores.get(groups[i][1][j].key) or {}).get("score")
        return math.nan if value is None else float(value)

    return utility


def select(
    referee: Referee,
    strategy: Strategy,
    prompts: list[Prompt],
    candidates: dict[str, dict[str, list[Candidate]]],  # generator -> prompt id -> candidates
    seed: int,
    scores: Mapping[Any, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One bracket per (generator, prompt), all played together so the judge sees full batches. ``scores``
    (the verifier's, by candidate key) calibrate a prefilter's ``keep: auto``."""
    groups = [(p, cands[p.id]) for cands in candidates.values() for p in prompts]
    label = strategy_label(strategy)  # once: it inspects the strategy's signature
    note(f"select ({referee.judge.name}): {len(groups)} prompts x generators, {label}")
    picks = run_selection(strategy, referee, groups, seed=seed, utility=None if scores is None else verifier_utility(groups, scores))
    tasks = {p.id: p.task for p in prompts}
    return [{"judge": referee.judge.name, "strategy": label, "task": tasks[pk.prompt_id], **pk.as_dict()} for pk in picks]
