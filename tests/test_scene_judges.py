"""The scene-parsing judges: right on clear cases in both orders, blind where designed to be."""

from __future__ import annotations

import numpy as np
import pytest

from bon import registry
from bon.content import Candidate, Content, Prompt
from bon.protocol import Comparison
from generators.synthetic import scene as S
from generators.synthetic.generator import SyntheticGenerator
from generators.synthetic.suites import build_suite, make_prompt
from judges.synthetic.scene import LowResSceneJudge, SceneJudge
from verifiers.synthetic import SyntheticVerifier


def obj(shape, colour, x, y, size=11.0):
    return S.SceneObject(shape, colour, x, y, size)


def both_orders(judge, prompt, good, bad):
    g, b = Content.of(*good), Content.of(*bad)
    fwd, rev = judge.judge([Comparison(prompt, g, b), Comparison(prompt, b, g)])
    return fwd, rev


SPEC = {"groups": [{"count": 3, "colour": "red", "shape": "circle"}], "relations": [], "text": None}
RIGHT = S.Scene([obj("circle", "red", 20, 20), obj("circle", "red", 60, 50), obj("circle", "red", 100, 20)])
WRONG = S.Scene([obj("circle", "red", 20, 20), obj("circle", "blue", 60, 50), obj("circle", "red", 100, 20)])


@pytest.mark.parametrize("judge", [SceneJudge(), LowResSceneJudge()])
def test_prefers_the_correct_image_in_both_orders(judge):
    prompt = make_prompt("t2i-hand", "t2i", dict(SPEC), "count", 0)
    fwd, rev = both_orders(judge, prompt, [S.render(RIGHT)], [S.render(WRONG)])
    assert fwd.better == "A" and rev.better == "B"
    assert fwd.score >= 5 and rev.score <= 2
    assert fwd.meta["score_a"] > fwd.meta["score_b"]


def test_reasoning_judge_solves_the_question_itself():
    scene = S.Scene([obj("square", "green", 20, 20), obj("square", "green", 80, 20), obj("circle", "blue", 50, 70)])
    spec = {"question": {"kind": "count", "target": {"colour": None, "shape": "square"}}, "scene": scene.to_dict(), "answer": "2"}
    prompt = make_prompt("reasoning-hand", "reasoning", spec, "count", 0)
    prompt.metadata = {}  # judges never read metadata
    fwd, rev = both_orders(SceneJudge(), prompt, ["Two squares.\nAnswer: 2"], ["I count three.\nAnswer: 3"])
    assert fwd.better == "A" and rev.better == "B"


def test_edit_judge_ignores_collateral_damage_the_verifier_punishes():
    before = S.Scene([obj("circle", "red", 20, 20), obj("square", "blue", 80, 50)])
    after = before.copy()
    after.objects[0].colour = "yellow"
    spec = {"op": "recolour", "object": {"colour": "red", "shape": "circle"}, "new_colour": "yellow",
            "input": before.to_dict(), "output": after.to_dict()}
    prompt = make_prompt("edit-hand", "edit", spec, "recolour", 0)
    over = after.copy()
    over.objects[1].colour = "purple"
    fwd, _ = both_orders(SceneJudge(), prompt, [S.render(after)], [S.render(over)])
    assert fwd.meta["score_a"] == fwd.meta["score_b"]  # blind spot: a coin decides
    v = SyntheticVerifier()
    cand = lambda im: Candidate("edit-hand", 0, "x", 0, Content.of(im))  # noqa: E731
    assert v.score(prompt, cand(S.render(after))).value > v.score(prompt, cand(S.render(over))).value


def test_judge_fails_softly_on_foreign_prompts_and_is_deterministic():
    foreign = Prompt("p", "t2i", Content.of("a watercolour of a lighthouse"))
    (v,) = SceneJudge().judge([Comparison(foreign, Content.of(S.render(RIGHT)), Content.of(S.render(WRONG)))])
    assert v.better is None and v.missing
    prompt = make_prompt("t2i-hand", "t2i", dict(SPEC), "count", 0)
    tie = [Comparison(prompt, Content.of(S.render(RIGHT)), Content.of(S.render(RIGHT, {"noise": 0.2})), sample=s) for s in range(8)]
    first, second = SceneJudge(seed=1).judge(tie), SceneJudge(seed=1).judge(tie)
    assert [x.better for x in first] == [x.better for x in second]


def test_identity_and_registry():
    full, low = registry.create("judge", "scene-full"), registry.create("judge", "scene-lowres", seed=3)
    assert isinstance(full, SceneJudge) and isinstance(low, LowResSceneJudge)
    assert full.identity()["resolution"] is None and low.identity()["resolution"] == 32
    assert low.identity()["seed"] == 3 and low.name == "scene-lowres"


def test_full_resolution_agrees_with_the_verifier_more_than_low_resolution():
    prompts = build_suite(5, per_task=6)
    v = SyntheticVerifier()
    agree = {"full": [], "low": []}
    judges = {"full": SceneJudge(), "low": LowResSceneJudge()}
    for skill in ("strong", "weak"):
        gen = SyntheticGenerator(skill)
        for p in prompts:
            cands = gen.sample(p, range(5))
            vals = [v.score(p, c).value for c in cands]
            pairs = [(i, j) for i in range(5) for j in range(i + 1, 5) if abs(vals[i] - vals[j]) > 0.05]
            comps = [Comparison(p, cands[i].content, cands[j].content) for i, j in pairs]
            for name, judge in judges.items():
                for (i, j), verdict in zip(pairs, judge.judge(comps)):
                    agree[name].append((verdict.better == "A") == (vals[i] > vals[j]))
    full, low = np.mean(agree["full"]), np.mean(agree["low"])
    assert full > 0.75 and full > low
