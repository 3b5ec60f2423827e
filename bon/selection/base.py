"""The driver that batches every prompt's ready matches together (the interface is in bon.plugins)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from bon.content import Candidate, Prompt
from bon.plugins import Bracket, Finish, PointwiseStrategy, Strategy
from bon.protocol import MatchResult
from bon.referee import Match, Referee

__all__ = ["Bracket", "Finish", "Group", "Pick", "PointwiseStrategy", "Strategy", "play_brackets", "run_selection"]


@dataclass
class Pick:
    prompt_id: str
    generator: str
    index: int
    matches: list[MatchResult] = field(default_factory=list)
    scores: list[float | None] | None = None  # pointwise strategies: one score per candidate
    seed_calls: int = 0  # judge decisions spent seeding the bracket
    skipped_matches: int = 0  # matches an early stop did not ask
    settled: bool | None = None  # adaptive strategies: the leader settled within tolerance before the call cap
    note: str | None = None
    kept: list[int] | None = None  # a prefilter's kept candidates (bon.selection.prefilter); None: all
    prefilter_calls: int = 0  # the prefilter's scores (its own calls, not in ``calls``)
    prefilter_missing: int = 0  # prefilter scores missing (their candidates kept)
    calibration_calls: int = 0  # keep: auto on a held-out prompt: the main judge's decisions spent trying k

    @property
    def calls(self) -> int:
        """The main judge's decisions this pick used, made now or served from the store (a prefilter's are
        ``prefilter_calls``)."""
        return sum(m.calls for m in self.matches) + len(self.scores or []) + self.seed_calls + self.calibration_calls

    @property
    def missing(self) -> int:
        return sum(v.better is None for m in self.matches for v in m.forward + m.reverse) + sum(
            s is None for s in self.scores or []
        )

    @property
    def coin(self) -> bool:
        """A pointwise pick whose scores did not separate the candidates (two or more scores given, all the
        same): the seeded coin chose, so the judge's answers carried no information here."""
        given = [s for s in self.scores or [] if s is not None]
        return len(given) > 1 and len(set(given)) == 1

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
            **({"settled": self.settled} if self.settled is not None else {}), **({"note": self.note} if self.note else {}),
            **({"coin": True} if self.coin else {}),
            **({"kept": list(self.kept), "prefilter_calls": self.prefilter_calls} if self.kept is not None else {}),
            **({"prefilter_missing": self.prefilter_missing} if self.prefilter_missing else {}),
            **({"calibration_calls": self.calibration_calls} if self.calibration_calls else {}),
        }


Group = tuple[Prompt, Sequence[Candidate]]


def run_selection(strategy: Strategy, referee: Referee, groups: Sequence[Group], seed: int = 0,
                  utility: Callable[[int, int], float] | None = None) -> list[Pick]:
    """Run one bracket per (prompt, candidates) group, playing all ready matches as one batch. A strategy
    with a ``prefilter`` plays only among the candidates it keeps (:mod:`bon.selection.prefilter`;
    ``utility``, the verifier's score of candidate j of group i, calibrates ``keep: auto``)."""
    if isinstance(strategy, PointwiseStrategy):
        return _run_pointwise(strategy, referee, groups, seed)
    if getattr(strategy, "prefilter", None) is not None:
        from bon.selection.prefilter import run_prefiltered

        return run_prefiltered(strategy, referee, groups, seed,
                               lambda part, kept: play_brackets(strategy, referee, part, seed, kept), utility)
    return play_brackets(strategy, referee, groups, seed)


def play_brackets(strategy: Strategy, referee: Referee, groups: Sequence[Group], seed: int = 0,
                  kept: Sequence[Sequence[int]] | None = None) -> list[Pick]:
    """Every group's bracket, among its ``kept`` candidates where given (their matches and picks in the
    group's own indices)."""
    picks: list[Pick] = []
    live: list[tuple[Bracket, Pick, Group, list[tuple[int, int]]]] = []
    seeded = groups if kept is None else [(p, [cands[j] for j in mine]) for (p, cands), mine in zip(groups, kept)]
    seeds = strategy.seed_scores(referee, seeded)
    for i, (prompt, cands) in enumerate(groups):
        gen_name = cands[0].generator if cands else ""
        pick = Pick(prompt.id, gen_name, -1)
        picks.append(pick)
        key = (seed, prompt.id, gen_name)
        n = len(seeded[i][1])
        if seeds is None:
            bracket = strategy.bracket(n, key)
        else:
            scores, pick.seed_calls = seeds[i]
            bracket = strategy.bracket(n, key, scores=scores)
        if kept is not None:
            from bon.selection.prefilter import restricted

            pick.kept = list(kept[i])
            bracket = restricted(bracket, pick.kept)
        _advance(bracket, None, pick, (prompt, cands), live)
    while live:
        matches = [
            Match(prompt, x, y, cands[x].content, cands[y].content, tag=pick.generator)
            for _, pick, (prompt, cands), pending in live
            for x, y in pending
        ]
        results = referee.play(matches, swap=strategy.swap, cascade=strategy.cascade)
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
            pick.settled, pick.note = stop.value.settled, stop.value.note
        else:
            pick.index = stop.value
