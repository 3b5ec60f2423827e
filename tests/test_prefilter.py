"""Two-stage reranking (issue 38): a pointwise prefilter keeps the top k, the judge decides among them."""

import json

import pytest

from bon.content import Candidate, Content
from bon.errors import BonError
from bon.plugins import PairwiseJudge, PointwiseJudge, Score
from bon.protocol import Verdict
from bon.referee import Referee
from bon.selection import run_selection
from bon.selection.knockout import Knockout
from bon.selection.prefilter import choose_keep, kept_indices
from bon.selection.round_robin import RoundRobin
from bon.selection.uncertainty import Uncertainty
from bon.store import JudgmentStore


def _cands(values, gen="g", prompt_id="p0"):
    return [Candidate(prompt_id, k, gen, k, Content.of(str(v))) for k, v in enumerate(values)]


class NoisyReward(PointwiseJudge):
    """Scores a number by itself plus a fixed per-value offset; ``blind`` values get no score."""

    name = "noisy-reward"

    def __init__(self, blind=(), noise=0.0):
        self.blind, self.noise, self.asked = set(blind), noise, 0

    def identity(self):
        return {"name": self.name, "blind": sorted(self.blind), "noise": self.noise}

    def score(self, prompt, responses):
        self.asked += len(responses)
        out = []
        for r in responses:
            v = float(r.text)
            out.append(Score(None, missing="unreadable") if v in self.blind else Score(v + self.noise * ((v * 37) % 7 - 3)))
        return out


class LeaningJudge(PairwiseJudge):
    """Prefers the larger number, but calls close pairs an exact tie (so the tie rule's coins decide)."""

    name = "leaning"

    def identity(self):
        return {"name": self.name}

    def judge(self, comparisons):
        out = []
        for c in comparisons:
            a, b = float(c.a.text), float(c.b.text)
            if abs(a - b) < 3:
                out.append(Verdict("A", 4, meta={"tie": True}))
            else:
                out.append(Verdict("A", 5) if a > b else Verdict("B", 2))
        return out


def _referee(tmp_path, judge, prefilter=None, store="j.sqlite"):
    referee = Referee(judge, JudgmentStore(tmp_path / store))
    if prefilter is not None:
        referee.judges["noisy"] = prefilter
    return referee


def _groups(prompt, count=6, n=7):
    return [(prompt, _cands([(k * 7919 + g * 31) % 23 for k in range(n)], gen=f"g{g}", prompt_id=prompt.id)) for g in range(count)]


@pytest.mark.parametrize("make", [lambda **o: Knockout(**o), lambda **o: Knockout(seed="self", **o),
                                  lambda **o: RoundRobin(aggregate="borda", **o), lambda **o: Uncertainty(**o)])
def test_keep_n_is_exactly_plain_selection(tmp_path, number_prompt, make):
    groups = _groups(number_prompt)
    plain = run_selection(make(), _referee(tmp_path, LeaningJudge(), store="plain.sqlite"), groups, seed=3)
    wide = run_selection(make(prefilter="noisy", keep=7), _referee(tmp_path, LeaningJudge(), NoisyReward(noise=2.0), "wide.sqlite"),
                         groups, seed=3)
    assert [p.index for p in wide] == [p.index for p in plain]
    assert [[(m.x, m.y, m.winner, m.rule) for m in p.matches] for p in wide] == [[(m.x, m.y, m.winner, m.rule) for m in p.matches] for p in plain]
    assert [p.calls for p in wide] == [p.calls for p in plain] and all(p.kept == list(range(7)) for p in wide)
    assert any(m.rule in ("coin", "gated") and m.forward[0].meta.get("tie") for p in plain for m in p.matches)  # ties: same coins


def test_keep_k_asks_the_judge_only_among_the_top_k_and_a_rerun_asks_nobody(tmp_path, number_prompt, order_judge):
    groups = [(number_prompt, _cands([3, 1, 4, 1.5, 5, 9, 2, 6]))]
    prefilter = NoisyReward()
    referee = _referee(tmp_path, order_judge, prefilter)
    [pick] = run_selection(Knockout(prefilter="noisy", keep=3), referee, groups)
    assert pick.kept == [4, 5, 7] and pick.index == 5
    assert pick.calls == 2 * (3 - 1) == referee.stats.calls_made  # the main judge's calls only
    assert pick.prefilter_calls == 8 == referee.prefilters["noisy"].stats.calls_made
    assert {m.x for m in pick.matches} | {m.y for m in pick.matches} <= {4, 5, 7}
    record = pick.as_dict()
    assert record["kept"] == [4, 5, 7] and record["prefilter_calls"] == 8 and json.dumps(record)
    [report] = referee.prefilter_reports
    assert report["keep"] == 3 and report["missing_scores"] == 0
    again = _referee(tmp_path, order_judge, prefilter)
    [same] = run_selection(Knockout(prefilter="noisy", keep=3), again, groups)
    assert same.index == 5 and again.stats.calls_made == 0 and again.prefilters["noisy"].stats.calls_made == 0
    assert prefilter.asked == 8  # the prefilter's scores came from the store the second time


def test_a_missing_prefilter_score_keeps_its_candidate(tmp_path, number_prompt, order_judge):
    groups = [(number_prompt, _cands([3, 1, 4, 1.5, 5, 9, 2, 6]))]
    referee = _referee(tmp_path, order_judge, NoisyReward(blind={9.0}))
    [pick] = run_selection(RoundRobin(prefilter="noisy", keep=2), referee, groups)
    assert pick.kept == [4, 5, 7]  # the top two scored (6 and 5) and the unscored 9
    assert pick.index == 5 and pick.prefilter_missing == 1 and pick.as_dict()["prefilter_missing"] == 1
    assert referee.prefilter_reports[0]["missing_scores"] == 1 and "missing prefilter scores" in referee.prefilter_reports[0]["note"]


def test_keep_auto_calibrates_on_held_out_prompts(tmp_path, order_judge):
    from bon.content import Prompt

    prompts = [Prompt(f"p{i}", "t2i", Content.of(f"pick the largest number {i}")) for i in range(24)]
    groups = [g for p in prompts for g in _groups(p, count=1)]
    values = {id(c): float(c.content.text) for _, cands in groups for c in cands}
    utility = lambda i, j: values[id(groups[i][1][j])] / 22  # noqa: E731
    referee = _referee(tmp_path, order_judge, NoisyReward(noise=2.0))
    picks = run_selection(Knockout(prefilter="noisy", keep="auto", calibrate=0.3), referee, groups, utility=utility)
    [report] = referee.prefilter_reports
    audit = report["calibration"]["audit"]
    held = [p for p in picks if p.calibration_calls]
    assert report["calibration"]["prompts"] == len(held) > 0 and audit[0]["keep"] == 2
    assert report["keep"] == next(a["keep"] for a in audit if a["no_measured_loss"])
    assert all(p.kept == list(range(7)) for p in held)  # the held-out prompts ran the full protocol
    assert all(len(p.kept) == report["keep"] for p in picks if not p.calibration_calls)
    with pytest.raises(BonError, match="keep: auto calibrates"):
        run_selection(Knockout(prefilter="noisy", keep="auto"), _referee(tmp_path, order_judge, NoisyReward()), groups)


def test_choose_keep_takes_the_smallest_k_without_a_measured_loss():
    full = [1.0, 1.0, 1.0, 1.0]
    k, audit = choose_keep(full, {2: [0.0, 0.0, 0.0, 0.5], 3: [1.0, 0.9, 1.0, 1.0], 4: full}, seed=0)
    assert k == 3 and [a["no_measured_loss"] for a in audit] == [False, True, True]
    assert kept_indices([0.1, None, 0.5, 0.3], 2) == [1, 2, 3]


def test_bad_prefilter_options_are_one_line_errors(tmp_path, number_prompt, order_judge):
    with pytest.raises(BonError, match="keep needs a prefilter"):
        Knockout(keep=3)
    with pytest.raises(BonError, match="needs keep"):
        RoundRobin(prefilter="noisy")
    with pytest.raises(BonError, match="positive whole number"):
        Uncertainty(prefilter="noisy", keep=0)
    referee = _referee(tmp_path, order_judge)
    referee.judges["order"] = order_judge
    with pytest.raises(BonError, match="does not score a candidate alone"):
        run_selection(Knockout(prefilter="order", keep=2), referee, [(number_prompt, _cands([1, 2, 3]))])
