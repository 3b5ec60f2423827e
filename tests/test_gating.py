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
