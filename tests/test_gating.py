"""Confidence-gated swaps, seeded knockouts, early-stopped round-robins and the reverse-flip analysis."""

from typing import Sequence

import pytest

from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.mmrb2 import flips
from bon.plugins import PairwiseJudge, PointwiseJudge, Score
from bon.protocol import Comparison, Verdict
from bon.referee import Referee
from bon.selection import run_selection
from bon.selection.knockout import Knockout
from bon.selection.round_robin import RoundRobin, circle_rounds
from bon.selection.seeding import seed_positions, seed_slots
from bon.store import JudgmentStore
from bon.swap import confidence, swap_policy
from judges.synthetic.biased import PositionBiasJudge


def _cands(values, gen="g", prompt_id="p0"):
    return [Candidate(prompt_id, k, gen, k, Content.of(str(v))) for k, v in enumerate(values)]


def _prompts(count):
    return [Prompt(f"p{i}", "t2i", Content.of(f"pick the largest number #{i}")) for i in range(count)]


class GradedJudge(PairwiseJudge):
    """Prefers the larger number with a score that grows with the gap: 6/1 for gaps >= 20, 5/2 for >= 5, else 4/3."""

    name = "graded"

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        out = []
        for c in comparisons:
            gap = float(c.a.text) - float(c.b.text)
            level = 2 if abs(gap) >= 20 else 1 if abs(gap) >= 5 else 0
            out.append(Verdict("A", 4 + level) if gap > 0 else Verdict("B", 3 - level))
        return out


class SureJudge(GradedJudge):
    """Always maximally sure: 6 or 1."""

    name = "sure"

    def judge(self, comparisons):
        return [Verdict("A", 6) if v.better == "A" else Verdict("B", 1) for v in super().judge(comparisons)]


VALUES = [[(k * 7919 + 13 * p) % 101 for k in range(8)] for p in range(6)]


def _groups(values=VALUES):
    return [(prompt, _cands(vals, prompt_id=prompt.id)) for prompt, vals in zip(_prompts(len(values)), values)]


@pytest.mark.parametrize("strategy", [lambda **o: Knockout(**o), lambda **o: RoundRobin(**o)])
def test_gating_off_changes_nothing(tmp_path, strategy):
    default = Referee(GradedJudge(), JudgmentStore(tmp_path / "a.sqlite"))
    explicit = Referee(GradedJudge(), JudgmentStore(tmp_path / "b.sqlite"))
    before = run_selection(strategy(), default, _groups())
    after = run_selection(strategy(swap="both", gate=0.2), explicit, _groups())
    assert [p.as_dict() for p in before] == [p.as_dict() for p in after]
    counts = lambda r: {k: v for k, v in r.stats.as_dict().items() if k != "judge_seconds"}  # noqa: E731
    assert counts(default) == counts(explicit) and default.stats.calls_saved == 0
    assert strategy().identity() == strategy(swap="both", gate=0.3).identity()
    assert all(m.calls == 2 for p in after for m in p.matches)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16])
def test_always_extreme_judge_makes_n_minus_1_calls_per_prompt_when_gated(tmp_path, n):
    values = [[(k * 7919 + 13 * p) % 101 for k in range(n)] for p in range(4)]
    referee = Referee(SureJudge(), JudgmentStore(tmp_path / "j.sqlite"))
    picks = run_selection(Knockout(swap="gated", gate=1.0), referee, _groups(values))
    assert [p.calls for p in picks] == [n - 1] * 4
    assert referee.stats.calls_made == 4 * (n - 1) and referee.stats.calls_saved == 4 * (n - 1)
    assert [p.index for p in picks] == [v.index(max(v)) for v in values]
    assert {m.rule for p in picks for m in p.matches} == {"gated"}


def test_gate_asks_reverse_only_of_unsure_matches(tmp_path):
    full = run_selection(Knockout(), Referee(GradedJudge(), JudgmentStore(tmp_path / "a.sqlite")), _groups())
    referee = Referee(GradedJudge(), JudgmentStore(tmp_path / "b.sqlite"))
    gated = run_selection(Knockout(swap="gated", gate=0.6), referee, _groups())
    assert [p.index for p in gated] == [p.index for p in full]  # an honest judge loses nothing
    for pick in gated:
        for m in pick.matches:
            sure = confidence(m.forward[0]) >= 0.6
            assert (m.calls, m.rule == "gated") == ((1, True) if sure else (2, False))
    assert sum(p.calls for p in gated) + referee.stats.calls_saved == sum(p.calls for p in full)


def test_swap_options_are_checked():
    with pytest.raises(BonError, match="swap must be one of both, gated"):
        Knockout(swap="sometimes")
    with pytest.raises(BonError, match="gate must lie in"):
        RoundRobin(swap="gated", gate=1.5)
    with pytest.raises(BonError, match="early_stop needs aggregate copeland"):
        RoundRobin(aggregate="borda", early_stop=True)
    assert swap_policy("gated", "0.6").gate == 0.6


def test_confidence_sources():
    assert confidence(Verdict("A", 6)) == 1.0 and confidence(Verdict("B", 2)) == 0.6 and confidence(Verdict("A", 4)) == 0.2
    assert confidence(Verdict("A")) == 0.0 and confidence(Verdict.failed("x")) == 0.0
    assert confidence(Verdict("A", 4, meta={"p_a": 0.9})) == pytest.approx(0.8)  # logits mode: P(A) - P(B)
    assert confidence(Verdict("A", 4, meta={"p_a": 0.9}), source="score") == 0.2
    # a score-comparing judge's own margin, finer than its 1-6 score; a contradicting sign is no confidence
    assert confidence(Verdict("B", 3, meta={"margin": -0.12}), source="margin") == pytest.approx(0.12)
    assert confidence(Verdict("A", 6, meta={"margin": -0.5}), source="margin") == 0.0
    assert confidence(Verdict("A", 6), source="margin") == 1.0


def _text_groups(count=12, n=8):
    """Responses of different lengths: the position-bias judge's honest signal prefers the longer."""
    prompts = [Prompt(f"q{i}", "t2i", Content.of(f"describe scene {i}")) for i in range(count)]
    return [(p, [Candidate(p.id, k, "g", k, Content.of("w" * ((k * 37 + 11 * i) % 90 + 5))) for k in range(n)])
            for i, p in enumerate(prompts)]


def test_position_bias_is_caught(tmp_path):
    """A judge that says "A much better" without looking: gating keeps its biased forward answers, so
    its picks change, and the flip analysis of its full-protocol matches calls the gate unsafe."""
    store = JudgmentStore(tmp_path / "j.sqlite")
    judge = PositionBiasJudge(bias=0.6, confident=True)
    full = run_selection(Knockout(), Referee(judge, store), _text_groups())
    gated = run_selection(Knockout(swap="gated", gate=1.0), Referee(judge, store), _text_groups())
    assert [p.index for p in gated] != [p.index for p in full]
    records = [r for p in full for m in p.matches if (r := flips.from_match(m, judge))]
    rows = flips.gate_safety(records)
    assert flips.verdict_on_gating(rows, 1.0) == "unsafe"
    assert flips.gating_advice(rows) != "safe from gate 1"
    # the honest judge of the same family is safe where it is confident
    honest = run_selection(Knockout(), Referee(GradedJudge(), store), _groups())
    ok = [r for p in honest for m in p.matches if (r := flips.from_match(m))]
    assert all(not r.changed for r in ok if r.confidence >= 0.6)


def test_seed_positions_keep_top_seeds_apart():
    assert seed_positions(8) == [0, 7, 3, 4, 1, 6, 2, 5]
    assert seed_slots([0.1, 0.9, 0.5]) == [1, None, 2, 0]  # the top seed gets the bye


class NumberReward(PointwiseJudge):
    """A reward model scoring each number by its value."""

    name = "number-reward"
    margin_scale = 0.05

    def score(self, prompt, responses):
        return [Score(float(r.text)) for r in responses]


def test_seeded_knockout_has_strong_candidates_meet_late(tmp_path):
    referee = Referee(NumberReward(), JudgmentStore(tmp_path / "j.sqlite"))
    picks = run_selection(Knockout(seed="self"), referee, _groups())
    for pick, vals in zip(picks, VALUES):
        assert pick.index == vals.index(max(vals))
        top2 = sorted(range(8), key=lambda k: -vals[k])[:2]
        assert {pick.matches[-1].x, pick.matches[-1].y} == set(top2)  # the two best meet only in the final
        assert pick.seed_calls == 8 and pick.calls == 8 + 14


def test_single_order_pass_seeds_a_pairwise_judge(tmp_path):
    referee = Referee(GradedJudge(), JudgmentStore(tmp_path / "j.sqlite"))
    picks = run_selection(Knockout(seed="self"), referee, _groups())
    assert [p.index for p in picks] == [v.index(max(v)) for v in VALUES]
    assert all(p.seed_calls == 7 and p.calls == 7 + 14 for p in picks)
    assert referee.stats.calls_made + referee.stats.calls_cached == sum(p.calls for p in picks)


def test_circle_rounds_cover_every_pair_once():
    for n in (2, 3, 6, 7):
        pairs = [p for rnd in circle_rounds(n) for p in rnd]
        assert sorted(pairs) == [(i, j) for i in range(n) for j in range(i + 1, n)]
        assert all(len({c for p in rnd for c in p}) == 2 * len(rnd) for rnd in circle_rounds(n))


@pytest.mark.parametrize("judge_cls", [GradedJudge, lambda: PositionBiasJudge(bias=0.5)])
def test_early_stop_round_robin_picks_the_same_with_fewer_calls(tmp_path, judge_cls):
    groups = _groups() if judge_cls is GradedJudge else _text_groups()
    full_ref = Referee(judge_cls(), JudgmentStore(tmp_path / "a.sqlite"))
    stop_ref = Referee(judge_cls(), JudgmentStore(tmp_path / "b.sqlite"))
    full = run_selection(RoundRobin(), full_ref, groups)
    early = run_selection(RoundRobin(early_stop=True), stop_ref, groups)
    assert [p.index for p in early] == [p.index for p in full]
    saved = sum(p.skipped_matches for p in early)
    assert saved > 0 and stop_ref.stats.calls_saved == 2 * saved
    assert stop_ref.stats.calls_made + stop_ref.stats.calls_saved == full_ref.stats.calls_made
    assert all(p.as_dict()["skipped_matches"] == p.skipped_matches for p in early if p.skipped_matches)


def test_flips_from_official_files():
    judgments = {
        "p1": {"forward": [{"judgement": "A", "metadata": {"score": 6}}], "reverse": [{"judgement": "B", "metadata": {"score": 2}}]},
        "p2": {"forward": [{"judgement": "A", "metadata": {"score": 4}}], "reverse": [{"judgement": "A", "metadata": {"score": 6}}]},
        "p3": {"forward": [{"judgement": "B", "metadata": {}}], "reverse": [{"judgement": "B", "metadata": {}}]},
        "p4": {"forward": [{"judgement": ""}], "reverse": [{"judgement": "A"}]},
    }
    records = flips.from_judgments(judgments)
    assert [(r.confidence, r.disagree, r.changed) for r in records] == [(1.0, False, False), (0.2, True, True), (None, True, False)]
    s = flips.summary(records)
    assert s["pairs"] == 3 and s["disagree_rate"] == pytest.approx(2 / 3)
    assert [row["confidence"] for row in s["by_confidence"]] == [0.2, 1.0]


def test_seed_by_another_judge_counts_its_calls(tmp_path):
    store = JudgmentStore(tmp_path / "j.sqlite")
    referee = Referee(GradedJudge(), store)
    picks = run_selection(Knockout(seed="text-overlap"), referee, _groups())
    assert [p.index for p in picks] == [v.index(max(v)) for v in VALUES]
    assert all(p.seed_calls == 7 for p in picks)
    assert referee.stats.calls_made + referee.stats.calls_cached == sum(p.calls for p in picks)
    with pytest.raises(BonError, match="knockout seed 'no-such-judge'"):
        run_selection(Knockout(seed="no-such-judge"), referee, _groups())


# --- calibrated gates, audits, cascades, the uncertainty-driven strategy ------------------------

from bon.selection.uncertainty import Uncertainty  # noqa: E402
from bon.simulate import SimulatedJudge, simulated_groups  # noqa: E402


class TieJudge(PairwiseJudge):
    """Sees no difference ever: every answer an exact tie (its letter a coin, as the synthetic judges give it)."""

    name = "always-tied"

    def judge(self, comparisons):
        out = []
        for c in comparisons:
            coin = seeded_coin("tie", c.a.text, c.b.text)
            out.append(Verdict("A", 4, meta={"tie": True, "margin": 0.0}) if coin else Verdict("B", 3, meta={"tie": True, "margin": 0.0}))
        return out


from bon.protocol import seeded_coin  # noqa: E402


def test_no_gate_and_no_cascade_play_todays_knockout(tmp_path):
    """Gate and cascade options left off (or swap: both) ask and pick exactly what the plain knockout does."""
    plain = Referee(GradedJudge(), JudgmentStore(tmp_path / "a.sqlite"))
    before = run_selection(Knockout(), plain, _groups())
    other = Referee(GradedJudge(), JudgmentStore(tmp_path / "b.sqlite"))
    after = run_selection(Knockout(swap="both", ties="settle", max_flip=0.1, cascade=None), other, _groups())
    assert [p.as_dict() for p in before] == [p.as_dict() for p in after]
    assert plain.stats.calls_made == other.stats.calls_made == 6 * 14 and other.gate_reports() == []
    assert Knockout().identity() == Knockout(swap="both", ties="gate", max_flip=0.02, audit=None, cascade=None).identity()


def test_gate_and_cascade_options_are_checked():
    for options, message in [({"swap": "gated", "gate": "sometimes"}, "gate must be a number in \\[0, 1\\] or 'auto'"),
                             ({"swap": "gated", "ties": "coin"}, "ties must be one of gate, settle, ask"),
                             ({"swap": "gated", "gate": "auto", "max_flip": 2}, "max_flip must lie in"),
                             ({"audit": 0.1}, "audit needs swap: gated"),
                             ({"cascade": "ocr", "cascade_gate": "x"}, "cascade_gate must be a number"),
                             ({"cascade": "ocr", "swap": "gated"}, "cascade sends unsure matches")]:
        with pytest.raises(BonError, match=f"knockout: {message}"):
            Knockout(**options)
    with pytest.raises(BonError, match="uncertainty: tolerance must lie in"):
        Uncertainty(tolerance=3)
    assert Knockout(swap="gated", gate="auto").swap.audit == 0.1 and Knockout(swap="gated", gate=0.6).swap.audit == 0.0


def test_exact_ties_both_ways_are_coins_not_flips():
    tie = lambda letter: Verdict(letter, 4 if letter == "A" else 3, meta={"tie": True})  # noqa: E731
    both_ties = flips.flip_of(tie("A"), tie("A"))
    assert both_ties.tie and both_ties.forward_tie and not both_ties.changed and both_ties.disagree  # the coins point apart
    real = flips.flip_of(tie("A"), Verdict("A", 6))  # the reverse saw a difference: it may change the outcome
    assert not real.tie and real.changed
    found = flips.calibrate_gate([both_ties] * 300, 0.02)
    assert found["settle_ties"] and found["settled"] == 300 and found["changed_upper95"] <= 0.02


def _calibration(judge, store, prompts=40, n=8):
    """Two-order judgments on held-out groups, stored as a preference set is (stage mmrb2)."""
    groups, _ = simulated_groups(prompts, n, seed=99, prefix="cal")
    run_selection(RoundRobin(), Referee(judge, store, stage="mmrb2"), groups)


def test_calibrated_gate_halves_an_honest_judge_and_its_audit_holds(tmp_path):
    store = JudgmentStore(tmp_path / "j.sqlite")
    judge = SimulatedJudge(noise=0.05, resolution=0.05)
    _calibration(judge, store, prompts=8)
    groups, best = simulated_groups(30, 8)
    full = run_selection(Knockout(), Referee(judge, store), groups)
    referee = Referee(judge, store)
    gated = run_selection(Knockout(swap="gated", gate="auto"), referee, groups)
    [report] = referee.gate_reports()
    assert report["calibration"]["source"] == "preference set" and report["gate"] is not None
    assert report["audit"]["audited"] > 0 and report["fell_back_after"] is None
    assert sum(p.calls for p in gated) <= 0.70 * sum(p.calls for p in full)
    assert sum(p.index == b for p, b in zip(gated, best)) >= sum(p.index == b for p, b in zip(full, best)) - 2


def test_audit_catches_a_confident_position_biased_judge(tmp_path):
    """Its "A much better" answers clear any gate, so a gate alone would keep them; the audit asks a
    share of them in both orders, sees the outcomes change and falls back to both orders."""
    store = JudgmentStore(tmp_path / "j.sqlite")
    judge = PositionBiasJudge(bias=0.6, confident=True)
    referee = Referee(judge, store)
    picks = run_selection(Knockout(swap="gated", gate=1.0, audit=0.3), referee, _text_groups(count=24))
    [report] = referee.gate_reports()
    assert report["fell_back_after"] is not None and "both orders after" in report["note"]
    assert report["audit"]["lo95"] > 0.02 and report["audit"]["changed"] > 0
    last_round = [m for p in picks for m in p.matches[-1:]]
    assert all(m.calls == 2 for m in last_round)  # after the fallback: the full protocol
    # calibrated on its own two-order judgments it is never gated at all
    _calibration_text = Referee(judge, store, stage="mmrb2")
    run_selection(RoundRobin(), _calibration_text, _text_groups(count=12))
    auto = Referee(judge, store)
    run_selection(Knockout(swap="gated", gate="auto"), auto, _text_groups(count=24))
    assert auto.gate_reports()[0]["gate"] is None or auto.gate_reports()[0]["settled"] < auto.gate_reports()[0]["matches"]


def test_an_always_tied_judge_gains_nothing_and_says_so(tmp_path):
    store = JudgmentStore(tmp_path / "j.sqlite")
    _calibration(TieJudge(), store, prompts=12)
    groups, best = simulated_groups(40, 8)
    referee = Referee(TieJudge(), store)
    gated = run_selection(Knockout(swap="gated", gate="auto"), referee, groups)
    [report] = referee.gate_reports()
    assert report["ties"] == "settle" and report["ties_settled"] == report["settled"] == report["matches"]
    assert "the judge gains nothing" in report["note"]
    adaptive = run_selection(Uncertainty(), Referee(TieJudge(), store), groups)
    assert all(p.note == "every comparison an exact tie: no information" for p in adaptive)
    for picks in (gated, adaptive):  # coins: no better than a random pick (1 in 8)
        assert sum(p.index == b for p, b in zip(picks, best)) <= 12


def test_uncertainty_strategy_finds_the_best_with_fewer_calls(tmp_path):
    groups, best = simulated_groups(40, 8)
    judge = SimulatedJudge(noise=0.05, bias=0.1)
    referee = Referee(judge, JudgmentStore(tmp_path / "j.sqlite"))
    picks = run_selection(Uncertainty(tolerance=0.1), referee, groups)
    knockout = run_selection(Knockout(), Referee(judge, JudgmentStore(tmp_path / "k.sqlite")), groups)
    assert sum(p.calls for p in picks) < sum(p.calls for p in knockout)
    hits = lambda chosen: sum(p.index == b for p, b in zip(chosen, best))  # noqa: E731
    assert hits(picks) >= hits(knockout) - 4 and hits(picks) >= 24  # the true best of 8, mostly (chance: 5 of 40)
    assert referee.stats.calls_made + referee.stats.calls_cached == sum(p.calls for p in picks)
    assert all(p.calls <= 14 and p.settled is not None for p in picks)


def test_cascade_counts_both_judges(tmp_path):
    store = JudgmentStore(tmp_path / "j.sqlite")
    main, cheap = SimulatedJudge(noise=0.02, name="main"), SimulatedJudge(noise=0.3, seed=1, name="cheap")
    referee = Referee(main, store)
    referee.judges["cheap"] = cheap
    groups, best = simulated_groups(20, 8)
    picks = run_selection(Knockout(cascade="cheap", cascade_gate=0.6), referee, groups)
    matches = [m for p in picks for m in p.matches]
    settled = [m for m in matches if m.rule == "cascade"]
    assert settled and len(settled) < len(matches) and all(len(m.cascade) == 1 for m in matches)
    assert all(m.calls == 1 for m in settled) and all(m.calls == 3 for m in matches if m.rule != "cascade")
    cheap_state = referee.cascades[next(iter(referee.cascades))]
    assert cheap_state.referee.stats.calls_made == len(matches)  # the cheap judge answered every match once
    assert referee.stats.calls_made == len(matches) + 2 * (len(matches) - len(settled)) == sum(p.calls for p in picks)
    assert referee.gate_reports()[0]["kind"] == "cascade"


def test_uncertainty_measures_the_judges_noise_on_its_two_order_judgments(tmp_path):
    """y_AB + y_BA holds the bias and two noises: half its variance is the judge's noise variance."""
    from bon.selection.uncertainty import measured_noise

    store = JudgmentStore(tmp_path / "j.sqlite")
    judge = SimulatedJudge(noise=0.25, bias=0.1)
    assert measured_noise(Referee(judge, store)) is None  # nothing stored yet: the default noise
    _calibration(judge, store, prompts=10)
    assert measured_noise(Referee(judge, store)) == pytest.approx(0.25, abs=0.04)
    strategy = Uncertainty()
    run_selection(strategy, Referee(judge, store), simulated_groups(2, 4)[0])
    assert strategy.measured_noise == pytest.approx(0.25, abs=0.04)
