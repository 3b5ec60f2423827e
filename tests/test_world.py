"""The synthetic world: rendering, perception from pixels, the prompt language and suites."""

from __future__ import annotations

import numpy as np
import pytest

from bon.content import Content, ImageItem, Prompt
from bon.errors import BonError
from generators.synthetic import language as L
from generators.synthetic import perception as P
from generators.synthetic import scene as S
from generators.synthetic.suites import CATEGORIES, build_suite


def random_scene(seed: int, text: str | None = None) -> S.Scene:
    rng = np.random.default_rng(seed)
    kinds = [(S.SHAPES[rng.integers(3)], list(S.PALETTE)[rng.integers(6)]) for _ in range(int(rng.integers(1, 7)))]
    return S.Scene(S.place_objects(kinds, rng), text)


def test_palette_and_shapes_are_as_documented():
    assert set(S.PALETTE) == {"red", "green", "blue", "yellow", "purple", "orange"}
    assert S.SHAPES == ("circle", "square", "triangle")
    assert S.render(S.Scene([])).size == (S.SIZE, S.SIZE)


def test_scene_round_trips_through_json():
    sc = S.Scene([S.SceneObject("circle", "red", 20.5, 30.25, 9.0)], "CAT", background=(200, 210, 220))
    assert S.Scene.from_dict(sc.to_dict()) == sc


def test_perception_recovers_a_hand_built_scene():
    scene = S.Scene([
        S.SceneObject("circle", "red", 20, 18, 10),
        S.SceneObject("square", "blue", 64, 50, 12),
        S.SceneObject("triangle", "green", 104, 78, 13),
    ])
    seen = P.perceive(S.render(scene))
    assert seen.kinds() == [("blue", "square"), ("green", "triangle"), ("red", "circle")]
    for want in scene.objects:
        got = seen.find(want.colour, want.shape)[0]
        assert abs(got.x - want.x) <= 1.5 and abs(got.y - want.y) <= 1.5
    assert seen.count(colour="red") == 1 and seen.count(shape="square") == 1
    assert seen.extreme("leftmost").colour == "red" and seen.extreme("bottommost").shape == "triangle"
    assert seen.text is None and seen.artefact < 0.05


def test_perception_recovers_random_scenes_exactly():
    for seed in range(60):
        scene = random_scene(seed)
        seen = P.perceive(S.render(scene))
        assert seen.kinds() == sorted((o.colour, o.shape) for o in scene.objects), seed


@pytest.mark.parametrize("word", ["CAT", "HELLO", "W1W2W", "ROOM 42", "QUIZ", "MIMWIW"])
def test_read_text_reads_rendered_words(word):
    assert P.perceive(S.render(S.Scene([], word))).text == word


def test_read_text_sees_a_misspelling_and_no_banner():
    assert P.perceive(S.render(S.Scene([], "CAR"))).text == "CAR"
    assert P.perceive(S.render(random_scene(3))).text is None


def test_read_text_survives_mild_damage():
    scene = random_scene(5, "GARDEN")
    for art in ({"blur": 1.0}, {"noise": 0.2}, {"blocks": 0.5}):
        assert P.perceive(S.render(scene, art, np.random.default_rng(1))).text == "GARDEN", art


def test_artefact_estimate_rises_with_damage():
    scene = random_scene(11, "CAT")
    rng = np.random.default_rng(0)
    clean = P.perceive(S.render(scene)).artefact
    for art in ({"noise": 0.3}, {"blur": 1.5}, {"blocks": 0.8}, {"scribble": 4}):
        assert P.perceive(S.render(scene, art, rng)).artefact > clean + 0.1, art
    mild = P.perceive(S.render(scene, {"noise": 0.1}, rng)).artefact
    heavy = P.perceive(S.render(scene, {"noise": 0.4}, rng)).artefact
    assert clean < mild < heavy


def test_low_resolution_perception_is_weaker():
    exact_full = exact_low = 0
    for seed in range(40):
        scene = random_scene(seed)
        want = sorted((o.colour, o.shape) for o in scene.objects)
        im = S.render(scene)
        exact_full += P.perceive(im).kinds() == want
        exact_low += P.perceive(im, resolution=32).kinds() == want
    assert exact_full == 40 and exact_low < 36


def test_perception_is_cached_by_digest():
    # (its speed is measured by benchmarks/demo_stages.py, not by a timed test)
    scene = random_scene(7, "DOG")
    a, b = ImageItem.from_pil(S.render(scene)), ImageItem.from_pil(S.render(scene))
    assert P.perceive(a) is P.perceive(b)
    assert P.perceive(a, 32) is not P.perceive(a)


def test_language_round_trip_over_whole_suites():
    for seed in (0, 1):
        for prompt in build_suite(seed, per_task=40):
            assert L.interpret(prompt) == L.public(prompt.metadata["spec"]), prompt.content.text


def test_interpret_rejects_foreign_prompts():
    with pytest.raises(BonError):
        L.interpret(Prompt("x", "t2i", Content.of("a photograph of a sunset over the sea")))


def test_suites_are_deterministic_and_seed_dependent():
    def fingerprint(seed):
        return [(p.id, p.content.digest) for p in build_suite(seed, per_task=8)]

    assert fingerprint(3) == fingerprint(3)
    assert fingerprint(3) != fingerprint(4)


def test_suite_shape_and_categories():
    prompts = build_suite(0, per_task=20, id_prefix="x-")
    assert len(prompts) == 80 and prompts[0].id == "x-t2i-0000"
    for task, cats in CATEGORIES.items():
        mine = [p for p in prompts if p.task == task]
        counts = [sum(p.metadata["category"] == c for p in mine) for c in cats]
        assert max(counts) - min(counts) <= 1
        for p in mine:
            assert p.metadata["source"] == "synthetic"
            assert len(p.content.images) == (1 if task in ("edit", "reasoning") else 0)
    texts = [p.content.text for p in prompts if p.metadata["category"] == "text"]
    assert all('"' in t for t in texts)


def test_answer_extraction_normalises():
    assert L.extract_answer("I count them.\nAnswer: Three") == "3"
    assert L.extract_answer("blah\nAnswer: Circles.") == "circle"
    assert L.extract_answer("Answer: 2\nwait\nAnswer:  YES ") == "yes"
    assert L.extract_answer("So the answer is 4.") is None


# --- latent truth and simulated annotators ------------------------------------------------------


def test_truth_is_the_product_of_the_defects_the_generator_logged():
    from generators.synthetic.truth import truth_of

    assert truth_of([]) == {"quality": 1.0, "defects": []}
    t = truth_of([{"fault": "wrong answer", "answer": "3"}, {"fault": "no answer line"}, {"fault": "sketch"}])
    assert t["defects"] == [["answer", 0.85], ["format", 0.1]]
    assert t["quality"] == pytest.approx(0.15 * 0.9)
    count = truth_of([{"fault": "count", "want": 3, "drew": 0}, {"fault": "artefact", "type": "noise", "amount": 0.4}])
    assert count["defects"] == [["count", 0.5], ["damage", 0.5]] and count["quality"] == pytest.approx(0.25)


def test_every_candidate_carries_its_truth_and_faults_lower_it():
    from generators.synthetic.generator import SyntheticGenerator
    from generators.synthetic.truth import truth_of

    prompts = build_suite(3, per_task=2)
    for skill in ("strong", "weak"):
        gen = SyntheticGenerator(skill)
        for p in prompts:
            for c in gen.sample(p, [11, 12, 13]):
                assert c.provenance["truth"] == truth_of(c.provenance["faults"])
                assert (c.provenance["truth"]["quality"] < 1.0) == bool(c.provenance["truth"]["defects"])


def test_consensus_reads_ratings_like_mmrb2():
    from bon.stages.preference import consensus

    assert consensus([6, 5, 3]) == "A" and consensus([2, 1, 6]) == "B"
    assert consensus([5, 3, 4]) is None and consensus([5, 2, 4]) is None
    assert consensus([5, 5, 1]) == "A" and consensus([5, 5, 1], margin=0.25) is None  # mean 3.67: not clear


def test_annotators_follow_the_truth_with_noise_and_leanings():
    from bon.stages.preference import annotate, annotator_pool, consensus

    pool = annotator_pool(seed=0)
    assert len({round(a.lean("damage"), 6) for a in pool}) == len(pool)  # each leans its own way
    rng = np.random.default_rng(0)
    good, bad = {"defects": []}, {"defects": [["instruction", 0.6]]}
    labels = [consensus(annotate(good, bad, pool, 3, rng)) for _ in range(200)]
    assert labels.count("A") >= 190  # a clear difference: nearly always seen
    close = {"defects": [["damage", 0.12]]}
    labels = [consensus(annotate(good, close, pool, 3, rng)) for _ in range(400)]
    assert labels.count(None) > labels.count("A") > labels.count("B")  # a small defect is often missed or unclear
    damaged, misspelt = {"defects": [["damage", 0.3]]}, {"defects": [["text", 0.3]]}
    labels = [consensus(annotate(damaged, misspelt, pool, 3, rng)) for _ in range(400)]
    assert labels.count("A") > 5 and labels.count("B") > 5  # equal costs: the annotators' leanings decide either way


def test_preference_labels_come_from_truth_not_scores(tmp_path):
    from bon.config import PreferenceConfig
    from bon.stages.preference import build_preference_set
    from generators.synthetic.generator import SyntheticGenerator

    prompts = build_suite(5, per_task=3, tasks=["reasoning"])
    cands = {p.id: SyntheticGenerator("strong", name="s").sample(p, range(4)) + SyntheticGenerator("weak", name="w").sample(p, range(4))
             for p in prompts}
    cfg = PreferenceConfig(prompts_per_task=3, pairs_per_prompt=3, margin=0.25, annotators=3)
    first = build_preference_set(tmp_path / "a", prompts, cands, cfg, seed=1)
    again = build_preference_set(tmp_path / "b", prompts, cands, cfg, seed=1)
    assert (tmp_path / "a" / "reasoning.json").read_bytes() == (tmp_path / "b" / "reasoning.json").read_bytes()
    truth = {c.key: c.provenance["truth"]["quality"] for cs in cands.values() for c in cs}
    pairs = first.pairs["reasoning"]
    assert pairs and first.pairs == again.pairs
    agree = [(truth[a] > truth[b]) == (label == "A") for label, a, b in pairs if truth[a] != truth[b]]
    assert sum(agree) >= 0.8 * len(agree)
