"""The referee: the only way strategies and stages reach a judge.

It asks matches in both orders (or, with a gated swap, the reverse only after an unsure forward
verdict), serves every judgment it has seen before from the store, sends the rest to the judge in
parts of at most the judge's ``store_every`` comparisons (so local models still batch and API judges
still run concurrently) and stores each part as it comes back, so a killed run loses at most one
part; with an executor that answers in parts (Ray), each part is stored as it arrives. It counts
what was paid for, what came free and what gating or an early stop saved.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from bon.content import Content, Prompt
from bon.errors import BonError, Stopped
from bon.mmrb2 import flips
from bon.plugins import PairwiseJudge, Score, scores_alone
from bon.progress import note
from bon.protocol import Comparison, MatchResult, Verdict, decide_match
from bon.provenance import runtime_facts
from bon.seeds import derive_seed
from bon.store import JudgmentStore, Key, usage_of
from bon.swap import CascadePolicy, SwapPolicy, exact_tie

SPENT = ("calls_made", "calls_cached", "missing", "input_tokens", "output_tokens", "seconds", "cost_usd")
PREFERENCE_STAGE = "mmrb2"  # the stage that judges the preference set in both orders (held-out prompts)

# Fault injection for tests: a referee that has stored this many new answers SIGKILLs its process group
# (the driver and every worker, as a killed terminal would), right after storing them.
KILL_ENV = "BON_KILL_AFTER_CALLS"
_TOLD: set[str] = set()  # judges already told that --retry-missing does not apply to them


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
    transient: int = 0  # calls that failed transiently (timeout, 5xx, rate limit): not stored, asked again on rerun
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
            "transient": self.transient,
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


@dataclass
class GateState:
    """A gated swap (or a cascade) as it runs for one judge: the gate in force (``effective``; None:
    both orders), how it was calibrated, what the audit measured and whether it fell back."""

    policy: SwapPolicy
    effective: SwapPolicy | None
    calibration: dict[str, Any]
    referee: "Referee | None" = None  # a cascade's cheap judge
    learning: list[flips.Flip] | None = None  # no stored judgments: flip records of this run's two-order matches
    matches: int = 0
    settled: int = 0
    audited: int = 0
    audit_changed: int = 0
    ties_settled: int = 0
    fell_back_after: int | None = None

    def learn(self, records: list[flips.Flip], learning: bool | None = None) -> None:
        """Calibrate ``gate: auto`` on ``records`` (added to those of earlier batches while learning from the run)."""
        if learning is not None:  # the first calibration: stored judgments, or (none stored) this run's from now on
            self.learning = [] if learning else None
        elif self.learning is None:
            return  # a fixed gate, or calibrated once on stored judgments
        if not self.policy.calibrated or self.fell_back_after is not None:
            return
        if self.learning is not None:
            self.learning.extend(records)
            records = self.learning
        found = flips.calibrate_gate(records, self.policy.max_flip)
        self.calibration.update(found)
        if found["gate"] is not None:
            ties = "settle" if found["settle_ties"] else "ask"
            self.effective = SwapPolicy("gated", found["gate"], self.policy.confidence, ties, self.policy.max_flip)
            self.learning = None

    def record(self, matches: int, settled: int, audit: Sequence[flips.Flip | None], ties: int = 0) -> None:
        """Count a batch; fall back to both orders once the audit shows the flip rate above ``max_flip``."""
        self.matches += matches
        self.settled += settled
        self.ties_settled += ties
        known = [r for r in audit if r is not None]
        self.audited += len(known)
        self.audit_changed += sum(r.changed for r in known)
        lower = flips.wilson_lower(self.audit_changed, self.audited)
        if lower is not None and lower > self.policy.max_flip and self.fell_back_after is None:
            self.effective, self.fell_back_after = None, self.matches

    def report(self) -> dict[str, Any]:
        a, k = self.audited, self.audit_changed
        return {
            "kind": "cascade" if self.referee is not None else "gate",
            **({"cascade": self.referee.judge.name} if self.referee is not None else {}),
            "calibration": dict(self.calibration),
            "gate": None if self.effective is None else self.effective.gate,
            "ties": None if self.effective is None else self.effective.ties,
            "matches": self.matches, "settled": self.settled, "ties_settled": self.ties_settled,
            "audit": {"share": self.policy.audit, "audited": a, "changed": k, "rate": k / a if a else None,
                      "lo95": flips.wilson_lower(k, a), "hi95": flips.wilson_upper(k, a)},
            "fell_back_after": self.fell_back_after,
            "note": gate_note(self),
        }


def gate_note(state: GateState) -> str:
    """One phrase: what the gate (or cascade) did for this judge."""
    if state.fell_back_after is not None:
        return (f"audit found {state.audit_changed}/{state.audited} outcomes changed: both orders after "
                f"{state.fell_back_after} matches")
    if state.effective is None:
        return "no safe gate: every match asked in full (gains nothing)"
    if state.matches and not state.settled:
        return "no verdict cleared the gate (gains nothing)"
    if state.settled and state.ties_settled == state.settled == state.matches:
        return "every verdict an exact tie: the picks are coins whatever is asked (the judge gains nothing)"
    if state.referee is not None:
        return f"{state.settled}/{state.matches} matches settled by the cheap judge"
    audit = ""
    if state.audited:
        lo, hi = flips.wilson_interval(state.audit_changed, state.audited)  # audited > 0: an interval
        audit = f"; audit: {state.audit_changed}/{state.audited} outcomes changed (95% CI {lo:.3f}-{hi:.3f})"
    return f"{state.settled}/{state.matches} matches settled by one order{audit}"


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
        retry_missing: bool = False,
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
        self.judge_id = store.register(judge.identity(), runtime=runtime_facts(judge))
        self.stats = CallStats()
        self.gates: dict[SwapPolicy, GateState] = {}  # gated swaps as they run: calibration, audit, fallback
        self.cascades: dict[CascadePolicy, GateState] = {}
        self.judges: dict[str, PairwiseJudge] = {}  # judges already built, by the spec a cascade or prefilter names (else the registry)
        self.prefilters: dict[str, "Referee"] = {}  # a prefilter's referee by its spec (bon.selection.prefilter), its calls apart
        self.prefilter_reports: list[dict[str, Any]] = []  # what each prefiltered selection kept, and keep: auto's audit
        # asking a judge that does not sample again would give the same answers
        self.retry_missing = retry_missing and bool(getattr(judge, "samples_answers", False))
        if retry_missing and not self.retry_missing and self.judge_id not in _TOLD:
            _TOLD.add(self.judge_id)
            note(f"judge {judge.name}: --retry-missing skipped: it does not sample, so asking again gives the same answers")

    def ask(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        """Verdicts for the comparisons, from the store where possible, else from the judge (stored
        part by part as they come)."""
        keys = [(c.prompt.content.digest, c.a.digest, c.b.digest, c.sample) for c in comparisons]
        known = self.store.get_many(self.judge_id, keys, retry_missing=self.retry_missing)
        todo: dict[Key, Comparison] = {}
        for key, comp in zip(keys, comparisons):
            if key not in known and key not in todo:
                todo[key] = comp
        self.stats.calls_cached += len(keys) - len(todo)
        if todo:
            self.budget.spend(self.judge.name, len(todo))
            known.update(self._buy(todo))
        verdicts = [known[k] for k in keys]
        for v in verdicts:
            if v.better is None:
                self.stats.missing += 1
                reason = (v.missing or "unknown")[:80]
                self.stats.missing_reasons[reason] = self.stats.missing_reasons.get(reason, 0) + 1
        return verdicts

    def _buy(self, todo: dict[Key, Comparison]) -> dict[Key, Verdict]:
        """New verdicts for ``todo``, each part stored (with its share of the wall time) as it arrives,
        in whatever order the parts come back."""
        keys, fresh = list(todo), {}
        started = time.perf_counter()
        for offset, part in self._parts(list(todo.values())):
            elapsed = time.perf_counter() - started
            got = keys[offset : offset + len(part)]
            if not part or len(got) != len(part) or any(k in fresh for k in got):
                raise BonError(f"judge {self.judge.name}: returned {len(fresh) + len(part)} verdicts for {len(todo)} comparisons")
            self.stats.seconds += elapsed
            self.stats.count_fresh(part)
            self.store.put_many(self.judge_id, zip(got, part), stage=self.stage, seconds_each=elapsed / len(part))
            self.stats.calls_made += len(part)
            self.stats.transient += sum(v.transient for v in part)
            fresh.update(zip(got, part))
            _fault_point(self.stats.calls_made)
            started = time.perf_counter()  # storing is not the judge's time
        if len(fresh) != len(todo):
            raise BonError(f"judge {self.judge.name}: returned {len(fresh)} verdicts for {len(todo)} comparisons")
        return fresh

    def _parts(self, comparisons: list[Comparison]) -> Iterator[tuple[int, list[Verdict]]]:
        """(offset, verdicts) of each part to store: the executor's (Ray: one per worker batch, as each
        returns), else at most ``store_every`` comparisons per judge call (None: all in one call, e.g.
        one Batch API job)."""
        if hasattr(self.executor, "judge_parts"):
            yield from self.executor.judge_parts(self.judge, comparisons)
            return
        size = getattr(self.judge, "store_every", PairwiseJudge.store_every) or len(comparisons)
        for start in range(0, len(comparisons), size):
            chunk = comparisons[start : start + size]
            yield start, self.executor.judge(self.judge, chunk) if self.executor else self.judge.judge(chunk)

    def score(self, prompt: Prompt, responses: Sequence[Content]) -> list[Score]:
        """Pointwise scores (a :class:`bon.plugins.PointwiseJudge`, or a judge that compares two per-response
        scores: :func:`bon.plugins.scores_alone`), cached like pairwise judgments."""
        if not scores_alone(self.judge):
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

    def play(self, matches: Sequence[Match], swap: SwapPolicy | None = None,
             cascade: CascadePolicy | None = None) -> list[MatchResult]:
        """Both orders (times ``samples``) of every match, merged by the tie rule. With a gated
        ``swap`` the forward orders go first, as one batch, and a second batch asks the reverse only
        of matches whose forward verdict is not confident, plus the audited share of the confident
        ones; a single-order match is decided by its forward verdict alone (rule ``gated``). With a
        ``cascade`` the cheap judge answers every match first (one order) and settles those it is sure
        about (rule ``cascade``); the rest get both orders of this judge."""
        if cascade is not None:
            return self._play_cascade(matches, cascade)
        if swap is None or not swap.gated:
            return self._play_both(matches)
        state = self.gate_state(swap)
        if state.effective is None:  # no gate is safe yet (or the audit turned it off): the protocol
            results = self._play_both(matches)
            state.learn([r for m in results if (r := flips.from_match(m, self.judge, swap.confidence))])
            state.matches += len(matches)
            return results
        policy = state.effective
        forward = self.ask([Comparison(m.prompt, m.x_content, m.y_content, s) for m in matches for s in range(self.samples)])
        chunks = [forward[i * self.samples : (i + 1) * self.samples] for i in range(len(matches))]
        unsure = {i for i, fwd in enumerate(chunks) if policy.needs_reverse(fwd, self.judge)}
        audited = {i for i in range(len(matches)) if i not in unsure and self._audit_draw(matches[i]) < swap.audit}
        asked = sorted(unsure | audited)
        reverse = self.ask([Comparison(matches[i].prompt, matches[i].y_content, matches[i].x_content, s)
                            for i in asked for s in range(self.samples)])
        backs = {i: reverse[k * self.samples : (k + 1) * self.samples] for k, i in enumerate(asked)}
        self.stats.calls_saved += (len(matches) - len(asked)) * self.samples
        results = []
        for i, m in enumerate(matches):
            result = decide_match(m.x, m.y, chunks[i], backs.get(i, []), self._coin_key(m))
            if i not in backs:
                result.rule = "gated"
            results.append(result)
        settled = [i for i in range(len(matches)) if i not in unsure]
        state.record(len(matches), len(settled),
                     [flips.flip_of(chunks[i][0], backs[i][0], self.judge, swap.confidence, (i,)) for i in sorted(audited)],
                     sum(all(exact_tie(v, self.judge) for v in chunks[i]) for i in settled))
        return results

    def gate_state(self, swap: SwapPolicy) -> "GateState":
        """The gate in force for this judge under ``swap`` (calibrated once, for ``gate: auto``)."""
        if swap not in self.gates:
            if not swap.calibrated:
                self.gates[swap] = GateState(swap, swap, {"source": "fixed", "gate": swap.gate})
            else:
                source, pairs = self.two_order_pairs()
                self.gates[swap] = GateState(swap, None, {"source": source})
                self.gates[swap].learn(flips.from_pairs(pairs, self.judge, swap.confidence), learning=not pairs)
        return self.gates[swap]

    def two_order_pairs(self) -> tuple[str, list[tuple[Verdict, Verdict]]]:
        """(forward, reverse) pairs of this judge's stored two-order answers: the preference set's when it
        has any (held-out prompts), else every stage's; none: the run calibrates on its own matches."""
        for stage, source in ((PREFERENCE_STAGE, "preference set"), (None, "store")):
            answers = self.store.answered(self.judge_id, stage)
            pairs = [(v, answers[(p, b, a, 0)]) for (p, a, b, _), v in answers.items() if a < b and (p, b, a, 0) in answers]
            if pairs:
                return source, pairs
        return "this run", []

    def _audit_draw(self, m: Match) -> float:
        return derive_seed(self.seed, self.judge_id, m.prompt.id, m.tag, m.x, m.y, "audit") / 0x80000000

    def _play_cascade(self, matches: Sequence[Match], cascade: CascadePolicy) -> list[MatchResult]:
        state = self.cascade_state(cascade)
        cheap = state.referee
        before = {key: getattr(cheap.stats, key) for key in SPENT}
        first = cheap.ask([Comparison(m.prompt, m.x_content, m.y_content) for m in matches])
        for key in SPENT:  # what the cheap judge spent is part of what this selection cost
            setattr(self.stats, key, getattr(self.stats, key) + getattr(cheap.stats, key) - before[key])
        sure = set() if state.effective is None else {
            i for i, v in enumerate(first) if not state.effective.needs_reverse([v], cheap.judge)}
        rest = [i for i in range(len(matches)) if i not in sure]
        played = dict(zip(rest, self._play_both([matches[i] for i in rest])))
        results = []
        for i, m in enumerate(matches):
            result = played.get(i) or MatchResult(m.x, m.y, [], [], m.x if first[i].better == "A" else m.y, "cascade")
            result.cascade = [first[i]]
            results.append(result)
        state.learn([r for i in rest if (r := flips.cascade_flip(first[i], played[i].forward[:1], played[i].reverse[:1],
                                                                  cheap.judge, self.judge, cascade.confidence, (i,)))])
        state.record(len(matches), len(sure), [], sum(exact_tie(first[i], cheap.judge) for i in sure))
        self.stats.calls_saved += 2 * self.samples * len(sure)
        return results

    def cascade_state(self, cascade: CascadePolicy) -> "GateState":
        """The cheap judge's referee and the gate its verdicts need (calibrated once for ``cascade_gate: auto``)."""
        if cascade not in self.cascades:
            from bon import registry

            try:
                judge = self.judges[cascade.judge] if cascade.judge in self.judges else registry.create("judge", cascade.judge)
            except BonError as exc:
                raise BonError(f"cascade {cascade.judge!r}: {exc}") from None
            cheap = Referee(judge, self.store, budget=self.budget, seed=self.seed, stage=self.stage, executor=self.executor)
            policy = SwapPolicy("gated", cascade.gate, cascade.confidence, "ask", cascade.max_flip)
            state = GateState(policy, None if policy.calibrated else policy, {"source": "fixed", "gate": cascade.gate}, referee=cheap)
            if policy.calibrated:
                state.calibration = {"source": "this run"}
                for stage, source in ((PREFERENCE_STAGE, "preference set"), (None, "store")):
                    mine, theirs = self.store.answered(self.judge_id, stage), self.store.answered(cheap.judge_id, stage)
                    records = [r for (p, a, b, _), v in theirs.items() if a < b and (p, a, b, 0) in mine and (p, b, a, 0) in mine
                               and (r := flips.cascade_flip(v, [mine[(p, a, b, 0)]], [mine[(p, b, a, 0)]], judge, self.judge,
                                                            cascade.confidence, (p, a, b)))]
                    if records:
                        state.calibration = {"source": source}
                        break
                state.learn(records, learning=not records)
            self.cascades[cascade] = state
        return self.cascades[cascade]

    def gate_reports(self) -> list[dict[str, Any]]:
        """What every calibrated or audited gate and every cascade of this referee did: calibration, audit,
        fallback (for reports; a fixed gate without an audit has nothing to tell)."""
        gates = [s for s in self.gates.values() if s.policy.calibrated or s.policy.audit]
        return [s.report() for s in (*gates, *self.cascades.values())]

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


def _fault_point(stored: int) -> None:
    limit = os.environ.get(KILL_ENV, "")
    if limit.isdigit() and stored >= int(limit):
        os.killpg(os.getpgrp(), signal.SIGKILL)
