"""The strategy interface and the driver that batches every prompt's ready matches together."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Generator, Sequence

from bon.content import Candidate, Prompt
from bon.protocol import MatchResult
from bon.referee import Match, Referee
from bon.swap import SwapPolicy

Bracket = Generator[list[tuple[int, int]], list[MatchResult], "int | Finish"]


@dataclass
class Finish:
    """What a bracket may return instead of a bare winner: the winner and the matches it chose not to
    ask (an early stop), so the driver can report the calls saved."""

    winner: int
    skipped_matches: int = 0


class Strategy(ABC):
    name: str = "strategy"
    swap: SwapPolicy = SwapPolicy()  # pairwise strategies: both orders (the protocol) or a gated swap

    def seed_scores(self, referee: Referee, groups: Sequence["Group"]) -> list[tuple[list[float | None], int]] | None:
        """Per group, one score per candidate to seed the bracket with and the judge decisions that
        cost (None: no seeding)."""
        return None

    def identity(self) -> dict[str, Any]:
        return {"name": self.name}

    @abstractmethod
    def bracket(self, n: int, key: tuple) -> Bracket:
        """Yield ready matches among candidates 0..n-1, receive their results, return the winner.
        ``key`` identifies the group (seed, prompt, generator) for seeded choices."""


@dataclass
class Pick:
    prompt_id: str
    generator: str
    index: int
    matches: list[MatchResult] = field(default_factory=list)
    scores: list[float | None] | None = None  # pointwise strategies: one score per candidate
    seed_calls: int = 0  # judge decisions spent seeding the bracket
    skipped_matches: int = 0  # matches an early stop did not ask

    @property
    def calls(self) -> int:
        """Judge decisions this pick used, made now or served from the store."""
        return sum(m.calls for m in self.matches) + len(self.scores or []) + self.seed_calls

    @property
    def missing(self) -> int:
        return sum(v.better is None for m in self.matches for v in m.forward + m.reverse) + sum(
            s is None for s in self.scores or []
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt_id": self.prompt_id,
            "generator": self.generator,
            "index": self.index,
            "calls": self.calls,
            "missing": self.missing,
            "matches": [[m.x, m.y, m.winner, m.rule] for m in self.matches],
            **({"seed_calls": self.seed_calls} if self.seed_calls else {}),
            **({"skipped_matches": self.skipped_matches} if self.skipped_matches else {}),
        }


Group = tuple[Prompt, Sequence[Candidate]]


class PointwiseStrategy(Strategy):
    """A strategy that needs one score per candidate instead of matches."""

    @abstractmethod
    def choose(self, scores: list[float | None], key: tuple) -> int:
        """The winner's index given each candidate's score (None = missing)."""

    def bracket(self, n: int, key: tuple) -> Bracket:  # pragma: no cover - never driven as a bracket
        raise NotImplementedError


def run_selection(strategy: Strategy, referee: Referee, groups: Sequence[Group], seed: int = 0) -> list[Pick]:
    """Run one bracket per (prompt, candidates) group, playing all ready matches as one batch."""
    if isinstance(strategy, PointwiseStrategy):
        return _run_pointwise(strategy, referee, groups, seed)
    picks: list[Pick] = []
    live: list[tuple[Bracket, Pick, Group, list[tuple[int, int]]]] = []
    seeds = strategy.seed_scores(referee, groups)
    for i, (prompt, cands) in enumerate(groups):
        gen_name = cands[0].generator if cands else ""
        pick = Pick(prompt.id, gen_name, -1)
        picks.append(pick)
        key = (seed, prompt.id, gen_name)
        if seeds is None:
            bracket = strategy.bracket(len(cands), key)
        else:
            scores, pick.seed_calls = seeds[i]
            bracket = strategy.bracket(len(cands), key, scores=scores)
        _advance(bracket, None, pick, (prompt, cands), live)
    while live:
        matches = [
            Match(prompt, x, y, cands[x].content, cands[y].content, tag=pick.generator)
            for _, pick, (prompt, cands), pending in live
            for x, y in pending
        ]
        results = referee.play(matches, swap=strategy.swap)
        waiting, live, pos = live, [], 0
        for bracket, pick, group, pending in waiting:
            mine = results[pos : pos + len(pending)]
            pos += len(pending)
            pick.matches.extend(mine)
            _advance(bracket, mine, pick, group, live)
    referee.stats.calls_saved += sum(p.skipped_matches for p in picks) * 2 * referee.samples
    return picks


def _run_pointwise(strategy: PointwiseStrategy, referee: Referee, groups: Sequence[Group], seed: int) -> list[Pick]:
    picks = []
    for prompt, cands in groups:
        gen_name = cands[0].generator if cands else ""
        scores = referee.score(prompt, [c.content for c in cands])
        values = [s.value for s in scores]
        pick = Pick(prompt.id, gen_name, strategy.choose(values, (seed, prompt.id, gen_name)))
        pick.scores = values
        picks.append(pick)
    return picks


def _advance(bracket: Bracket, results, pick: Pick, group: Group, live: list) -> None:
    try:
        pending = bracket.send(results) if results is not None else next(bracket)
        while not pending:  # a round with nothing to ask (e.g. all byes)
            pending = bracket.send([])
        live.append((bracket, pick, group, pending))
    except StopIteration as stop:
        if isinstance(stop.value, Finish):
            pick.index, pick.skipped_matches = stop.value.winner, stop.value.skipped_matches
        else:
            pick.index = stop.value
