import pytest

from bon.content import Candidate, Content
from bon.protocol import Verdict, decide_match
from bon.referee import Budget, BudgetExhausted, Referee
from bon.selection import run_selection
from bon.selection.knockout import Knockout
from bon.store import JudgmentStore
from conftest import OrderJudge


def _cands(values, gen="g", prompt_id="p0"):
    return [Candidate(prompt_id, k, gen, k, Content.of(str(v))) for k, v in enumerate(values)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 16])
@pytest.mark.parametrize("seeding", ["index", "shuffle"])
def test_knockout_picks_true_best_with_n_minus_1_matches(tmp_path, order_judge, number_prompt, n, seeding):
    values = [(k * 7919) % 101 for k in range(n)]  # distinct, best at an arbitrary position
    store = JudgmentStore(tmp_path / "j.sqlite")
    referee = Referee(order_judge, store)
    [pick] = run_selection(Knockout(seeding=seeding), referee, [(number_prompt, _cands(values))])
    assert pick.index == values.index(max(values))
    assert len(pick.matches) == n - 1
    assert pick.calls == 2 * (n - 1) == referee.stats.calls_made
    assert all(m.rule == "agree" for m in pick.matches)


def test_all_prompts_ready_matches_go_in_one_batch(tmp_path, order_judge, number_prompt):
    referee = Referee(order_judge, JudgmentStore(tmp_path / "j.sqlite"))
    groups = [(number_prompt, _cands(range(8), gen=f"g{i}")) for i in range(3)]
    picks = run_selection(Knockout(), referee, groups)
    assert [p.index for p in picks] == [7, 7, 7]
    # identical contents across groups are the same judgment: asked once, reused twice
    assert order_judge.batches == [8, 4, 2]
    assert referee.stats.calls_made == 14 and referee.stats.calls_cached == 28


def test_rerun_is_served_from_store(tmp_path, order_judge, number_prompt):
    path = tmp_path / "j.sqlite"
    run_selection(Knockout(), Referee(order_judge, JudgmentStore(path)), [(number_prompt, _cands([3, 1, 4, 1.5, 5, 9, 2, 6]))])
    again = Referee(order_judge, JudgmentStore(path))
    [pick] = run_selection(Knockout(), again, [(number_prompt, _cands([3, 1, 4, 1.5, 5, 9, 2, 6]))])
    assert pick.index == 5 and again.stats.calls_made == 0 and again.stats.calls_cached == 14


def test_store_keys_by_order_and_identity(tmp_path, number_prompt):
    store = JudgmentStore(tmp_path / "j.sqlite")
    r1 = Referee(OrderJudge("v1"), store)
    x, y = Content.of("1"), Content.of("2")
    from bon.protocol import Comparison

    r1.ask([Comparison(number_prompt, x, y)])
    r1.ask([Comparison(number_prompt, y, x)])  # the other order is another judgment
    assert r1.stats.calls_made == 2
    r1.ask([Comparison(number_prompt, x, y)])
    assert r1.stats.calls_cached == 1
    r2 = Referee(OrderJudge("v2"), store)  # a changed template is a different judge
    r2.ask([Comparison(number_prompt, x, y)])
    assert r2.stats.calls_made == 1


def test_tie_rule_votes_then_score_then_coin():
    a5, b2, a4, b3 = Verdict("A", 5), Verdict("B", 2), Verdict("A", 4), Verdict("B", 3)
    assert decide_match(0, 1, [a5], [b2], ("k",)).winner == 0  # both orders prefer x
    # forward prefers x strongly (5), reverse prefers x's rival only weakly (A=y at 4): x by score
    r = decide_match(0, 1, [a5], [a4], ("k",))
    assert (r.winner, r.rule) == (0, "score")
    r = decide_match(0, 1, [a4], [Verdict("A", 6)], ("k",))
    assert (r.winner, r.rule) == (1, "score")
    # mirrored disagreement: equal summed scores, so a seeded coin decides, reproducibly
    r1 = decide_match(0, 1, [a4], [a4], ("seed", 1))
    assert r1.rule == "coin" and r1.winner == decide_match(0, 1, [a4], [a4], ("seed", 1)).winner
    winners = {decide_match(0, 1, [a4], [a4], ("seed", s)).winner for s in range(20)}
    assert winners == {0, 1}
    # a missing verdict is no vote: the other order decides
    r = decide_match(0, 1, [Verdict.failed("garbage")], [b3], ("k",))
    assert r.winner == 0 and r.rule == "majority"
    assert decide_match(0, 1, [Verdict.failed("x")], [Verdict.failed("y")], ("k",)).rule == "no-verdict"


def test_unparseable_answers_are_missing_not_votes(tmp_path, number_prompt):
    referee = Referee(OrderJudge(fail_on="9"), JudgmentStore(tmp_path / "j.sqlite"))
    [pick] = run_selection(Knockout(), referee, [(number_prompt, _cands([1, 9, 3, 4]))])
    first = pick.matches[0]
    assert (first.x, first.y, first.rule) == (0, 1, "no-verdict")  # both orders unparseable: no vote
    assert pick.missing == referee.stats.missing == 2 * sum(1 in (m.x, m.y) for m in pick.matches)
    assert list(referee.stats.missing_reasons) == ["unparseable answer: 'maybe'"]


def test_budget_stops_cleanly_and_keeps_work(tmp_path, order_judge, number_prompt):
    path = tmp_path / "j.sqlite"
    referee = Referee(order_judge, JudgmentStore(path), budget=Budget(10))
    with pytest.raises(BudgetExhausted):
        run_selection(Knockout(), referee, [(number_prompt, _cands(range(8)))])
    assert JudgmentStore(path).count() == 8  # the first round (8 calls) is kept; round two would exceed 10


@pytest.mark.parametrize("aggregate", ["copeland", "borda", "bradley-terry"])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_round_robin_picks_true_best_with_all_pairs(tmp_path, order_judge, number_prompt, aggregate, n):
    from bon.selection.round_robin import RoundRobin

    values = [(k * 37) % 11 for k in range(n)]
    referee = Referee(order_judge, JudgmentStore(tmp_path / "j.sqlite"))
    [pick] = run_selection(RoundRobin(aggregate), referee, [(number_prompt, _cands(values))])
    assert pick.index == values.index(max(values))
    assert pick.calls == referee.stats.calls_made == n * (n - 1)


def test_round_robin_after_knockout_pays_only_the_new_pairs(tmp_path, order_judge, number_prompt):
    from bon.selection.round_robin import RoundRobin

    store = JudgmentStore(tmp_path / "j.sqlite")
    run_selection(Knockout(), Referee(order_judge, store), [(number_prompt, _cands(range(8)))])
    rr = Referee(order_judge, store)
    run_selection(RoundRobin(), rr, [(number_prompt, _cands(range(8)))])
    assert rr.stats.calls_made == 8 * 7 - 2 * 7 and rr.stats.calls_cached == 2 * 7


def _reward_model():
    from bon.plugins import Score
    from bon.plugins import PointwiseJudge

    class NumberReward(PointwiseJudge):
        name = "number-reward"
        margin_scale = 0.1

        def __init__(self):
            self.batches = []

        def score(self, prompt, responses):
            self.batches.append(len(responses))
            return [Score(float(r.text)) if r.text != "x" else Score(None, missing="unreadable") for r in responses]

    return NumberReward()


def test_pointwise_argmax_caches_scores_and_has_a_pairwise_view(tmp_path, number_prompt):
    from bon.selection.pointwise import Pointwise

    judge = _reward_model()
    store = JudgmentStore(tmp_path / "j.sqlite")
    referee = Referee(judge, store)
    [pick] = run_selection(Pointwise(), referee, [(number_prompt, _cands([3, 9, "x", 4]))])
    assert pick.index == 1 and pick.calls == 4 and pick.missing == 1
    again = Referee(judge, store)
    run_selection(Pointwise(), again, [(number_prompt, _cands([3, 9, "x", 4]))])
    assert again.stats.calls_made == 0 and again.stats.calls_cached == 4
    # the same judge in a knockout: pairwise verdicts from score differences
    ko = Referee(judge, store)
    [pick] = run_selection(Knockout(), ko, [(number_prompt, _cands([3, 9, 1, 4]))])
    assert pick.index == 1 and ko.stats.calls_made == 6


def test_majority_vote_over_k_samples(tmp_path, number_prompt):
    """With samples=3 a match asks 3 samples per order; the majority over all 6 decides."""
    from bon.plugins import PairwiseJudge
    from bon.protocol import Verdict

    class FlakyOrder(PairwiseJudge):
        name = "flaky"

        def judge(self, comparisons):
            # sample 0 is wrong, samples 1 and 2 right: one sample alone would pick the worse candidate
            out = []
            for c in comparisons:
                right = "A" if float(c.a.text) > float(c.b.text) else "B"
                wrong = "B" if right == "A" else "A"
                out.append(Verdict(wrong if c.sample == 0 else right, 4 if (wrong if c.sample == 0 else right) == "A" else 3))
            return out

    one = Referee(FlakyOrder(), JudgmentStore(tmp_path / "one.sqlite"), samples=1)
    [pick1] = run_selection(Knockout(), one, [(number_prompt, _cands([1, 2, 3, 4]))])
    three = Referee(FlakyOrder(), JudgmentStore(tmp_path / "three.sqlite"), samples=3)
    [pick3] = run_selection(Knockout(), three, [(number_prompt, _cands([1, 2, 3, 4]))])
    assert pick1.index == 0 and pick3.index == 3
    assert pick3.calls == 3 * 2 * 3 and {m.rule for m in pick3.matches} == {"majority"}
