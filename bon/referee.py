"""The referee: the only way strategies and stages reach a judge.

It asks matches in both orders (or, with a gated swap, the reverse only after an unsure forward
verdict), serves every judgment it has seen before from the store, sends the rest to the judge as one
batch (so local models batch and API judges run concurrently), and counts what was paid for, what
came free and what gating or an early stop saved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from bon.content import Content, Prompt
from bon.errors import BonError, Stopped
from bon.plugins import PairwiseJudge, PointwiseJudge, Score
from bon.protocol import Comparison, MatchResult, Verdict, decide_match
from bon.store import JudgmentStore, usage_of
from bon.swap import SwapPolicy


class BudgetExhausted(Stopped):
    """Raised when ``max_calls`` new judge calls have been made; everything so far is stored."""


class Budget:
    """A cap on new judge calls, shared by every referee of one command (``--max-calls``)."""

    def __init__(self, max_calls: int | None):
        self.max_calls = max_calls
        self.used = 0

    def spend(self, judge: str, wanted: int) -> None:
        if self.max_calls is not None and self.used + wanted > self.max_calls:
            raise BudgetExhausted(
                f"judge {judge}: the budget of {self.max_calls} new judge calls is reached ({self.used} made); "
                "everything so far is stored: rerun with a larger --max-calls to continue"
            )
        self.used += wanted


@dataclass
class CallStats:
    """What a judge cost: calls paid for and served free, failures, tokens, money and time."""

    calls_made: int = 0
    calls_cached: int = 0
    missing: int = 0
    calls_saved: int = 0  # calls the full protocol would have asked that gating or an early stop skipped
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    missing_reasons: dict[str, int] = field(default_factory=dict)

    def count_fresh(self, verdicts: Sequence[Verdict]) -> None:
        for v in verdicts:
            tokens_in, tokens_out, dollars = usage_of(v.meta)
            self.input_tokens += tokens_in
            self.output_tokens += tokens_out
            self.cost_usd += dollars

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls_made": self.calls_made,
            "calls_cached": self.calls_cached,
            "missing": self.missing,
            "calls_saved": self.calls_saved,
            "judge_seconds": round(self.seconds, 3),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "missing_reasons": dict(self.missing_reasons),
        }


@dataclass
class Match:
    """A requested match between candidates x and y of one prompt (indices into its list)."""

    prompt: Prompt
    x: int
    y: int
    x_content: Content
    y_content: Content
    tag: str = ""  # disambiguates the coin of the tie rule (e.g. generator name)


class Referee:
    def __init__(
        self,
        judge: PairwiseJudge,
        store: JudgmentStore,
        samples: int = 1,
        budget: Budget | None = None,
        seed: int = 0,
        stage: str = "",
        executor: Any = None,
    ):
        if samples < 1:
            raise BonError(f"samples must be at least 1, got {samples}")
        self.judge = judge
        self.store = store
        self.samples = samples
        self.budget = budget or Budget(None)
        self.seed = seed
        self.stage = stage  # recorded with every answer bought, so costs add up per stage over invocations
        self.executor = executor  # where the uncached batch is answered (None: this process)
        self.judge_id = store.register(judge.identity())
        self.stats = CallStats()

    def ask(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        """Verdicts for the comparisons, from the store where possible, else from one judge batch."""
        keys = [(c.prompt.content.digest, c.a.digest, c.b.digest, c.sample) for c in comparisons]
        known = self.store.get_many(self.judge_id, keys)
        todo: dict[tuple, Comparison] = {}
        for key, comp in zip(keys, comparisons):
            if key not in known and key not in todo:
                todo[key] = comp
        self.stats.calls_cached += len(keys) - len(todo)
        if todo:
            self.budget.spend(self.judge.name, len(todo))
            started = time.perf_counter()
            fresh = self.executor.judge(self.judge, list(todo.values())) if self.executor else self.judge.judge(list(todo.values()))
            elapsed = time.perf_counter() - started
            self.stats.seconds += elapsed
            if len(fresh) != len(todo):
                raise BonError(f"judge {self.judge.name}: returned {len(fresh)} verdicts for {len(todo)} comparisons")
            self.stats.count_fresh(fresh)
            self.store.put_many(self.judge_id, zip(todo, fresh), stage=self.stage, seconds_each=elapsed / len(todo))
            known.update(zip(todo, fresh))
            self.stats.calls_made += len(todo)
        verdicts = [known[k] for k in keys]
        for v in verdicts:
            if v.better is None:
                self.stats.missing += 1
                reason = (v.missing or "unknown")[:80]
                self.stats.missing_reasons[reason] = self.stats.missing_reasons.get(reason, 0) + 1
        return verdicts

    def score(self, prompt: Prompt, responses: Sequence[Content]) -> list[Score]:
        """Pointwise scores (for a :class:`PointwiseJudge`), cached like pairwise judgments."""
        if not isinstance(self.judge, PointwiseJudge):
            raise BonError(f"judge {self.judge.name} gives no pointwise scores; use a pairwise strategy")
        keys = [(prompt.content.digest, r.digest, 0) for r in responses]
        known = self.store.get_scores(self.judge_id, keys)
        todo = {k: r for k, r in zip(keys, responses) if k not in known}
        self.stats.calls_cached += len(keys) - len(todo)
        if todo:
            self.budget.spend(self.judge.name, len(todo))
            started = time.perf_counter()
            fresh = self.judge.score(prompt, list(todo.values()))
            elapsed = time.perf_counter() - started
            self.stats.seconds += elapsed
            self.store.put_scores(self.judge_id, zip(todo, fresh), stage=self.stage, seconds_each=elapsed / len(todo))
            known.update(zip(todo, fresh))
            self.stats.calls_made += len(todo)
        return [known[k] for k in keys]

    def play(self, matches: Sequence[Match], swap: SwapPolicy | None = None) -> list[MatchResult]:
        """Both orders (times ``samples``) of every match, merged by the tie rule. With a gated
        ``swap`` the forward orders go first, as one batch, and a second batch asks the reverse only
        of matches whose forward verdict is not confident; a single-order match is decided by its
        forward verdict alone (rule ``gated``)."""
        if swap is None or not swap.gated:
            return self._play_both(matches)
        forward = self.ask([Comparison(m.prompt, m.x_content, m.y_content, s) for m in matches for s in range(self.samples)])
        chunks = [forward[i * self.samples : (i + 1) * self.samples] for i in range(len(matches))]
        unsure = [i for i, fwd in enumerate(chunks) if swap.needs_reverse(fwd, self.judge)]
        reverse = self.ask([Comparison(matches[i].prompt, matches[i].y_content, matches[i].x_content, s)
                            for i in unsure for s in range(self.samples)])
        backs = {i: reverse[k * self.samples : (k + 1) * self.samples] for k, i in enumerate(unsure)}
        self.stats.calls_saved += (len(matches) - len(unsure)) * self.samples
        results = []
        for i, m in enumerate(matches):
            result = decide_match(m.x, m.y, chunks[i], backs.get(i, []), self._coin_key(m))
            if i not in backs:
                result.rule = "gated"
            results.append(result)
        return results

    def _play_both(self, matches: Sequence[Match]) -> list[MatchResult]:
        comparisons: list[Comparison] = []
        for m in matches:
            for s in range(self.samples):
                comparisons.append(Comparison(m.prompt, m.x_content, m.y_content, s))
                comparisons.append(Comparison(m.prompt, m.y_content, m.x_content, s))
        verdicts = self.ask(comparisons)
        step = 2 * self.samples
        return [decide_match(m.x, m.y, verdicts[i * step : (i + 1) * step][0::2], verdicts[i * step : (i + 1) * step][1::2],
                             self._coin_key(m)) for i, m in enumerate(matches)]

    def _coin_key(self, m: Match) -> tuple:
        return (self.seed, self.judge_id, m.prompt.id, m.tag, m.x, m.y)
