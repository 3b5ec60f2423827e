"""Round-robin aggregates on a judge whose preferences are not transitive: Copeland, Borda and
Bradley-Terry each pick a different candidate, and each pick is checked against a hand count."""

from __future__ import annotations

import numpy as np
import pytest

from bon.content import Candidate, Content, Prompt
from bon.plugins import PairwiseJudge
from bon.protocol import Verdict
from bon.referee import Referee
from bon.selection import run_selection
from bon.selection.round_robin import RoundRobin, bradley_terry
from bon.store import JudgmentStore

# (x, y) -> (verdict with x shown as A, verdict with y shown as A), each (letter, 1-6 score for A).
# 0 beats 1, 1 beats 4, 4 beats 0: a cycle. Found by search so that no tie rule or coin decides a pick.
TABLE = {
    (0, 1): (("A", 5), ("B", 2)), (0, 2): (("B", 2), ("B", 3)), (0, 3): (("A", 4), ("B", 3)),
    (0, 4): (("B", 3), ("A", 6)), (1, 2): (("A", 5), ("A", 4)), (1, 3): (("A", 4), ("B", 2)),
    (1, 4): (("A", 6), ("A", 5)), (2, 3): (("B", 2), ("A", 5)), (2, 4): (("A", 5), ("B", 2)),
    (3, 4): (("A", 4), ("B", 2)),
}

# By hand, reading each match's forward verdict and its reverse one flipped (x gets 7 - s when y is A):
#   match  votes x:y  scores x:y  winner (rule)
#   (0,1)  2:0        10:4        0
#   (0,2)  1:1        6:8         2 (score)
#   (0,3)  2:0        8:6         0
#   (0,4)  0:2        4:10        4
#   (1,2)  1:1        8:6         1 (score)
#   (1,3)  2:0        9:5         1
#   (1,4)  1:1        8:6         1 (score)
#   (2,3)  0:2        4:10        3
#   (2,4)  2:0        10:4        2
#   (3,4)  2:0        9:5         3
MATCH_WINS = [2, 3, 2, 2, 1]  # Copeland: candidate 1
BORDA = [28, 29, 28, 30, 25]  # summed 1-6 scores: candidate 3
VERDICT_WINS = [5, 4, 4, 4, 3]  # every pair judged equally often, so Bradley-Terry orders by these: candidate 0


class TableJudge(PairwiseJudge):
    """Answers from TABLE; the candidates' text is their index."""

    name = "table"

    def judge(self, comparisons):
        out = []
        for c in comparisons:
            a, b = int(c.a.text), int(c.b.text)
            letter, score = TABLE[(a, b)][0] if a < b else TABLE[(b, a)][1]
            out.append(Verdict(letter, score))
        return out


@pytest.fixture
def group():
    prompt = Prompt("p0", "t2i", Content.of("which is best?"))
    return prompt, [Candidate("p0", k, "g", k, Content.of(str(k))) for k in range(5)]


def test_the_judge_is_not_transitive():
    beats = {(0, 1), (1, 4), (4, 0)}  # from the hand table above
    assert all(TABLE[tuple(sorted(p))] for p in beats)


@pytest.mark.parametrize("aggregate, expected", [("copeland", int(np.argmax(MATCH_WINS))),
                                                 ("borda", int(np.argmax(BORDA))),
                                                 ("bradley-terry", int(np.argmax(VERDICT_WINS)))])
def test_each_aggregate_picks_its_hand_computed_winner(tmp_path, group, aggregate, expected):
    referee = Referee(TableJudge(), JudgmentStore(tmp_path / "j.sqlite"))
    [pick] = run_selection(RoundRobin(aggregate), referee, [group])
    assert pick.index == expected
    assert len(pick.matches) == 10 and pick.calls == 20
    wins = np.bincount([m.winner for m in pick.matches], minlength=5)
    assert list(wins) == MATCH_WINS
    assert {m.rule for m in pick.matches} <= {"agree", "score"}  # no coin anywhere


def test_the_three_aggregates_disagree(tmp_path, group):
    picks = set()
    for aggregate in ("copeland", "borda", "bradley-terry"):
        referee = Referee(TableJudge(), JudgmentStore(tmp_path / f"{aggregate}.sqlite"))
        picks.add(run_selection(RoundRobin(aggregate), referee, [group])[0].index)
    assert picks == {1, 3, 0}


def test_bradley_terry_strengths_follow_the_verdict_wins(tmp_path, group):
    referee = Referee(TableJudge(), JudgmentStore(tmp_path / "j.sqlite"))
    [pick] = run_selection(RoundRobin("copeland"), referee, [group])
    strengths = bradley_terry(5, pick.matches)
    assert int(np.argmax(strengths)) == 0 and int(np.argmin(strengths)) == 4
    assert strengths[0] > max(strengths[1:4]) > strengths[4]
