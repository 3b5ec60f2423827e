"""GenAI-Bench's official metric: bon's ``vqascore`` (``metric: official``) against t2v_metrics' own
GenAI-Bench evaluation, on hand-made items.

The expected numbers were produced by running the official evaluation unchanged -- ``genai_bench/evaluate.py``
(``main`` -> ``show_performance_per_skill``) and ``dataset.py`` (``GenAIBench_Image``) of
https://github.com/linzhiqiu/t2v_metrics at commit 6ecb74f92028f42c7e64546d3a71e98c8c73068f -- in its own
environment (torch 2.5.1, numpy 1.26.4), on these items written as its ``genai_image.json`` and
``genai_skills.json``, with a stand-in VQAScore model that answers each prompt's P(Yes) below (a failed
call is 0.0, as t2v_metrics' API back-end scores it). The per-skill means and standard deviations are
its ``tag_result``; the questions are its CLIP-FlanT5 default template (``clip_t5_model.py`` at
10d549b369861aab49e7dbe9f33a469a17ef1129, the last commit that has it) applied to each prompt.
``benchmarks/official_genai_bench.py`` reproduces them (how to set up its environment is in its docstring).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from bon.config import load_config
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.plugins import Score
from verifiers._grader import Grader
from verifiers.vqascore import VqaScoreVerifier

ROOT = Path(__file__).resolve().parents[1]

ITEMS = [
    # id, prompt, basic skills, advanced skills, P(Yes) the stand-in model gives (None: the call failed)
    ("00000", 'a sign that says "OPEN"', ["Object", "Attribute"], [], 0.8),
    ("00001", "a red apple on a wooden table", ["Object", "Attribute", "Spatial Relation"], [], 0.91),
    ("00002", "three cats sitting on a sofa, none of them black", ["Object", "Attribute"], ["Counting", "Negation"], 0.12),
    ("00003", "the taller of two trees is covered in snow", ["Object", "Scene"], ["Comparison"], 0.47),
    ("00004", "a dog chasing a ball across a park", ["Object", "Action Relation", "Scene"], [], 0.66),
    ("00005", "a bicycle with a bent front wheel", ["Object", "Part Relation"], [], 0.33),
    ("00006", "every window of the house is lit except one", ["Object"], ["Universal", "Negation"], 0.05),
    ("00007", "two cups, one full and one empty", ["Object", "Attribute"], ["Counting", "Differentiation"], 0.58),
    ("00008", "a lighthouse at dusk on a rocky coast", ["Object", "Scene"], [], 0.97),
    ("00009", "a child holding a kite above her head", ["Object", "Action Relation", "Spatial Relation"], [], None),
    ("00010", "a cat without whiskers", ["Object", "Part Relation"], ["Negation"], 0.21),
    ("00011", "five balloons, all of them yellow", ["Object", "Attribute"], ["Counting", "Universal"], 0.39),
    ("00012", "a small robot taller than the lamp beside it", ["Object", "Attribute", "Spatial Relation"], ["Comparison"], 0.74),
    ("00013", "a teapot pouring tea into a blue cup", ["Object", "Action Relation", "Attribute"], [], 0.88),
    ("00014", "a street where one car is red and the others are grey", ["Object", "Scene", "Attribute"], ["Differentiation"], None),
    ("00015", "an owl perched on the branch of a pine", ["Object", "Part Relation", "Spatial Relation"], [], 0.5),
    ("00016", "a glass of water on a marble counter in a kitchen", ["Object", "Scene", "Spatial Relation"], [], 1.0),
    ("00017", "no people on a crowded-looking beach", ["Scene"], ["Negation"], 0.0),
    ("00018", "a boy taller than his father", ["Object", "Attribute"], ["Comparison"], 0.29),
    ("00019", "a pianist playing in an empty hall", ["Object", "Action Relation", "Scene"], [], 0.62),
    ("00020", "a clock", [], [], 0.93),
    ("00021", "four identical chairs around a round table", ["Object", "Attribute", "Spatial Relation"], ["Counting"], 0.44),
    ("00022", "the left shoe is laced and the right one is not", ["object", "part relation"], ["differentiation", "negation"], 0.31),
]
SMALL = ["00001", "00003", "00009"]  # a run where most tags are empty and "comparison" has one prompt

# --- what the official code computed (see the module docstring) ---------------------------------------

# tag -> (mean, std) of tag_result for all items (genai_skills.json: every tag the items carry)
OFFICIAL_FULL = {
    'object': (0.489047619047619, 0.31871468058288066),
    'attribute': (0.515, 0.3194526568992658),
    'basic': (0.6909090909090909, 0.31245654243284926),
    'spatial relation': (0.5983333333333333, 0.3664105165885208),
    'counting': (0.38249999999999995, 0.192591969372211),
    'negation': (0.13799999999999998, 0.12437845472588892),
    'advanced': (0.3, 0.2358350733419052),
    'scene': (0.5314285714285714, 0.4092443675616714),
    'comparison': (0.5, 0.2264950330581225),
    'action relation': (0.54, 0.37771241264574124),
    'part relation': (0.3375, 0.12038133853162901),
    'universal': (0.22, 0.24041630560342617),
    'differentiation': (0.29666666666666663, 0.29022979401386984),
    'all': (0.48695652173913045, 0.3347378184708511),
}
# the same for SMALL; the official code then stops with KeyError: 'part relation' while printing the
# basic group (a tag without prompts), after computing these
OFFICIAL_SMALL = {
    'object': (0.45999999999999996, 0.45508241011931017),
    'attribute': (0.91, None),
    'spatial relation': (0.455, 0.6434671708797582),
    'basic': (0.455, 0.6434671708797582),
    'scene': (0.47, None),
    'comparison': (0.47, None),
    'advanced': (0.47, None),
    'action relation': (0.0, None),
    'all': (0.45999999999999996, 0.45508241011931017),
}
OFFICIAL_QUESTIONS = [
    "Does this figure show \"a sign that says \"OPEN\"\"? Please answer yes or no.",
    "Does this figure show \"a red apple on a wooden table\"? Please answer yes or no.",
    "Does this figure show \"three cats sitting on a sofa, none of them black\"? Please answer yes or no.",
    "Does this figure show \"the taller of two trees is covered in snow\"? Please answer yes or no.",
    "Does this figure show \"a dog chasing a ball across a park\"? Please answer yes or no.",
    "Does this figure show \"a bicycle with a bent front wheel\"? Please answer yes or no.",
    "Does this figure show \"every window of the house is lit except one\"? Please answer yes or no.",
    "Does this figure show \"two cups, one full and one empty\"? Please answer yes or no.",
    "Does this figure show \"a lighthouse at dusk on a rocky coast\"? Please answer yes or no.",
    "Does this figure show \"a child holding a kite above her head\"? Please answer yes or no.",
    "Does this figure show \"a cat without whiskers\"? Please answer yes or no.",
    "Does this figure show \"five balloons, all of them yellow\"? Please answer yes or no.",
    "Does this figure show \"a small robot taller than the lamp beside it\"? Please answer yes or no.",
    "Does this figure show \"a teapot pouring tea into a blue cup\"? Please answer yes or no.",
    "Does this figure show \"a street where one car is red and the others are grey\"? Please answer yes or no.",
    "Does this figure show \"an owl perched on the branch of a pine\"? Please answer yes or no.",
    "Does this figure show \"a glass of water on a marble counter in a kitchen\"? Please answer yes or no.",
    "Does this figure show \"no people on a crowded-looking beach\"? Please answer yes or no.",
    "Does this figure show \"a boy taller than his father\"? Please answer yes or no.",
    "Does this figure show \"a pianist playing in an empty hall\"? Please answer yes or no.",
    "Does this figure show \"a clock\"? Please answer yes or no.",
    "Does this figure show \"four identical chairs around a round table\"? Please answer yes or no.",
    "Does this figure show \"the left shoe is laced and the right one is not\"? Please answer yes or no.",
]


# --- bon's side --------------------------------------------------------------------------------------


class StandIn(Grader):
    """An API-style back-end with log-probabilities: P(Yes) per prompt from ITEMS; None is a failed call."""

    backend_name = "stand-in"

    def __init__(self, table: dict[str, float | None]):
        self.table, self.questions = table, []

    def identity(self) -> dict[str, Any]:
        return {"backend": "stand-in", "model": "p-yes-table"}

    def answer(self, turns, max_new_tokens=256):
        raise AssertionError("VQAScore reads P(Yes); it never asks for a written answer here")

    def next_word_probs(self, turns, words):
        from verifiers._grader import GradingFailed

        out = []
        for turn in turns:
            question = next(v for k, v in turn if k == "text")
            self.questions.append(question)
            prompt = next(p for p in self.table if f'"{p}"' in question)
            if self.table[prompt] is None:
                raise GradingFailed("stand-in: the call failed")
            out.append({"Yes": self.table[prompt]})
        return out


def row(item: tuple, image: str = "cand.png") -> dict[str, Any]:
    """An item in BaiqiL/GenAI-Bench's fields (skills as the strings the dataset holds) plus the candidate."""
    pid, prompt, basic, advanced, _ = item
    return {"id": pid, "prompt": prompt, "basic_skills": str(basic), "advanced_skills": str(advanced), "image": image}


@pytest.fixture
def folder(tmp_path) -> Path:
    Image.new("RGB", (16, 16), (200, 40, 40)).save(tmp_path / "cand.png")
    Image.new("RGB", (16, 16), (40, 40, 200)).save(tmp_path / "other.png")
    return tmp_path


def score_items(items: list[tuple], folder: Path) -> tuple[VqaScoreVerifier, StandIn, list[tuple[Prompt, Score]]]:
    grader = StandIn({it[1]: it[4] for it in items})
    v = VqaScoreVerifier(grader=grader)
    scored = []
    for it in items:
        prompt, cand = v.read_item(row(it), folder)
        assert v.item_id(row(it)) == it[0] == prompt.id
        scored.append((prompt, v.score(prompt, cand)))
    return v, grader, scored


def assert_official(result: dict[str, Any], official: dict[str, tuple]) -> None:
    for tag, (mean, std) in official.items():
        got = result["skills"][tag]
        assert got["mean"] == pytest.approx(mean, abs=1e-12), tag
        assert (got["std"] is None and std is None) or got["std"] == pytest.approx(std, abs=1e-12), tag


def test_the_question_is_the_official_template_for_every_item(folder):
    _, grader, _ = score_items(ITEMS, folder)
    assert grader.questions == OFFICIAL_QUESTIONS and len(ITEMS) >= 20


def test_each_score_is_p_yes_and_a_failed_call_is_missing(folder):
    _, _, scored = score_items(ITEMS, folder)
    for it, (_, s) in zip(ITEMS, scored):
        if it[4] is None:
            assert s.value is None and s.missing == "vqascore: stand-in: the call failed"
        else:
            assert s.value == it[4] and s.details["mode"] == "logprobs" and s.details["metric"] == "official"


def test_aggregate_equals_the_official_per_skill_numbers(folder):
    v, _, scored = score_items(ITEMS, folder)
    result = v.aggregate(scored)
    assert_official(result, OFFICIAL_FULL)
    assert result["score"] == result["all"] == pytest.approx(OFFICIAL_FULL["all"][0], abs=1e-12)
    assert (result["basic"], result["advanced"]) == (result["skills"]["basic"]["mean"], result["skills"]["advanced"]["mean"])
    assert result["items"] == 23 and result["failed"] == 2 and result["failed_counted_as"] == 0.0
    assert result["skills"]["negation"]["items"] == 5  # "negation" and "Negation" are one tag
    json.dumps(result, allow_nan=False)  # strict JSON


def test_a_subset_with_empty_tags(folder):
    """Official: per-tag numbers, then a KeyError on a tag without prompts; bon: those tags are null."""
    small = [it for it in ITEMS if it[0] in SMALL]
    v, _, scored = score_items(small, folder)
    result = v.aggregate(scored)
    assert_official(result, OFFICIAL_SMALL)
    assert result["skills"]["comparison"] == {"mean": 0.47, "std": None, "items": 1}  # one prompt: no std
    assert result["skills"]["part relation"] == {"mean": None, "std": None, "items": 0}
    assert result["skills"]["action relation"]["mean"] == 0.0  # its only prompt failed: counted as 0
    json.dumps(result, allow_nan=False)


def test_a_sign_that_says_open_scores_its_p_yes_under_the_paper_config(monkeypatch, folder):
    """configs/paper_t2i.yaml's verifier, its local back-end replaced by a stand-in giving P(Yes) = 0.8."""
    import judges.reward_models as rm

    class StandInJudge:
        def __init__(self, name, question, **options):
            self.question, self.options = question, options

        def identity(self):
            return {"model": self.options["model"], "revision": "stand-in", "dtype": self.options.get("dtype")}

        def score(self, prompt, contents):
            return [Score(0.8, {"per_image": [0.8]}) for _ in contents]

        def close(self):
            pass

    monkeypatch.setattr(rm, "VqaScoreJudge", StandInJudge)
    spec = load_config(ROOT / "configs" / "paper_t2i.yaml").verifier
    assert "ocr_weight" not in spec.options and "metric" not in spec.options  # official by default
    v = spec.create("verifier")
    assert v.metric == "official" and v.ocr is None and v.judge.options["model"] == "Qwen/Qwen2.5-VL-32B-Instruct"
    prompt, cand = v.read_item(row(ITEMS[0]), folder)
    s = v.score(prompt, cand)
    assert prompt.content.text == 'a sign that says "OPEN"' and s.value == 0.8 and s.details["metric"] == "official"
    assert s.details["question"] == OFFICIAL_QUESTIONS[0]


def test_several_images_score_their_mean(folder):
    v = VqaScoreVerifier(grader=StandIn({"a clock": 0.5}))
    item = {**row(ITEMS[20]), "images": ["cand.png", "other.png"]}
    del item["image"]
    prompt, cand = v.read_item(item, folder)
    assert len(cand.content.images) == 2 and v.score(prompt, cand).details["per_image"] == [0.5, 0.5]


def test_the_earlier_dataset_layout_reads_the_same(folder):
    v = VqaScoreVerifier(grader=StandIn({}))
    pid, text, basic, advanced, _ = ITEMS[2]
    earlier = {"Index": int(pid), "Prompt": text, "Tags": {"basic": basic, "advanced": advanced}, "image": "cand.png"}
    old, _ = v.read_item(earlier, folder)
    new, _ = v.read_item(row(ITEMS[2]), folder)
    assert v.item_id(earlier) == "2" and old.metadata["skills"] == new.metadata["skills"]


@pytest.mark.parametrize("change, message", [
    ({"prompt": None}, "GenAI-Bench: item 00001 has no id or prompt"),
    ({"image": None}, "GenAI-Bench: item 00001: field image (a path) or images (a list of paths) is required"),
    ({"image": "absent.png"}, "GenAI-Bench: item 00001: image "),
    ({"images": []}, "GenAI-Bench: item 00001: field image (a path) or images"),
])
def test_bad_items_are_one_line_errors(folder, change, message):
    item = {k: v for k, v in {**row(ITEMS[1]), **change}.items() if v is not None}
    with pytest.raises(BonError) as info:
        VqaScoreVerifier(grader=StandIn({})).read_item(item, folder)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_options_the_official_metric_refuses():
    with pytest.raises(BonError, match="ocr_weight/ocr belong to metric: ocr-blend"):
        VqaScoreVerifier(grader=StandIn({}), ocr_weight=0.3)
    with pytest.raises(BonError, match="metric must be one of official, ocr-blend"):
        VqaScoreVerifier(grader=StandIn({}), metric="blend")
    with pytest.raises(BonError, match=r"ocr_weight must lie in \[0, 1\]"):
        VqaScoreVerifier(grader=StandIn({}), metric="ocr-blend", ocr_weight=1.5)


def test_answers_under_the_fallback_are_counted_in_the_aggregate(folder):
    from verifiers._grader import NoLogprobs

    class Words(StandIn):
        def next_word_probs(self, turns, words):
            raise NoLogprobs("stand-in: no log-probabilities")

        def answer(self, turns, max_new_tokens=256):
            return ["Yes" for _ in turns]

    v = VqaScoreVerifier(grader=Words({}), fallback_to_answer=True)
    prompt, cand = v.read_item(row(ITEMS[1]), folder)
    s = v.score(prompt, cand)
    assert s.value == 1.0 and s.details["mode"] == "answer" and v.identity()["fallback_to_answer"] is True
    assert v.aggregate([(prompt, s)])["scored_from_answers"] == 1


# --- CLIP-FlanT5 through t2v_metrics in a side process (the real server script, a stand-in package) -----

STANDIN_T2V = '''
"""Stand-in t2v_metrics: VQAScore(model, device)(images, texts, question_template, answer_template) gives an
images x texts table; here P(Yes) = the image's mean red level (or, when STANDIN_P_YES names a JSON file,
the P(Yes) it holds for the text, null for a failed call), and the question is echoed to stderr."""
import json
import os
import sys
from PIL import Image

__version__ = "0.0-standin"


class Table(list):
    def tolist(self):
        return [list(r) for r in self]


class VQAScore:
    def __init__(self, model, device):
        if model != "clip-flant5-xxl":
            raise ValueError(f"no model {model}")
        print("loading", model, "on", device)  # t2v_metrics prints; the server keeps it off the protocol

    def __call__(self, images, texts, question_template, answer_template):
        print(question_template.format(texts[0]), answer_template, file=sys.stderr)
        if "fail" in texts[0]:
            raise RuntimeError("CUDA out of memory")
        if os.environ.get("STANDIN_P_YES"):
            with open(os.environ["STANDIN_P_YES"], encoding="utf-8") as f:
                p_yes = json.load(f)[texts[0]]
            if p_yes is None:
                raise RuntimeError("the call failed")
            return Table([[p_yes for _ in texts] for _ in images])
        red = [sum(Image.open(p).convert("RGB").getdata(band=0)) / (255 * 256) for p in images]
        return Table([[r for _ in texts] for r in red])
'''


@pytest.fixture
def t2v_env(tmp_path, monkeypatch) -> Path:
    pkg = tmp_path / "standin" / "t2v_metrics"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(STANDIN_T2V, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(pkg.parent))
    return tmp_path


def test_clip_flant5_side_process_answers_p_yes(t2v_env, folder):
    import sys

    v = VqaScoreVerifier(grader={"backend": "t2v-metrics", "model": "clip-flant5-xxl", "python": sys.executable,
                                 "device": "cpu"})
    try:
        prompt, cand = v.read_item(row(ITEMS[1]), folder)  # a 16x16 image of red level 200
        s = v.score(prompt, cand)
        pixels = Candidate("p", 0, "g", 0, Content.of(Image.new("RGB", (16, 16), (51, 0, 0))))  # no file: sent as PNG
        s2 = v.score(prompt, pixels)
        failed = v.score(Prompt("f", "t2i", Content.of("please fail")), pixels)
        again = v.score(prompt, cand)  # the process keeps serving after an error reply
    finally:
        v.close()
    assert s.value == pytest.approx(200 / 255) and s2.value == pytest.approx(0.2) and again.value == s.value
    assert s.details["grader"] == {"backend": "t2v-metrics", "model": "clip-flant5-xxl", "t2v_metrics": "0.0-standin",
                                   "device": "cpu"}
    assert failed.value is None and failed.missing == "vqascore: t2v-metrics: RuntimeError: CUDA out of memory"
    assert v.side.proc is None  # closed


def test_clip_flant5_side_process_that_cannot_load_is_one_line(t2v_env, folder):
    import sys

    v = VqaScoreVerifier(grader={"backend": "t2v-metrics", "model": "clip-flant5-xl", "python": sys.executable})
    prompt, cand = v.read_item(row(ITEMS[1]), folder)
    with pytest.raises(BonError, match=r"^vqascore: the t2v-metrics process did not start: cannot load clip-flant5-xl: "
                                       r"ValueError: no model clip-flant5-xl$"):
        v.score(prompt, cand)
    with pytest.raises(BonError, match="needs python: the interpreter of an environment with t2v-metrics"):
        VqaScoreVerifier(grader={"backend": "t2v-metrics", "model": "clip-flant5-xxl"})
    with pytest.raises(BonError, match="unknown t2v-metrics grader option"):
        VqaScoreVerifier(grader={"backend": "t2v-metrics", "python": sys.executable, "dtype": "bf16"})


def test_bon_score_through_the_cli_gives_the_official_numbers(t2v_env, folder, monkeypatch, capsys):
    """`bon score --verifier vqascore` with the CLIP-FlanT5 side process (the stand-in package answering
    each prompt's P(Yes)): one line per item, and the official per-skill numbers as the last line printed.
    The image is found next to the items file, whatever the working folder."""
    import sys

    from bon.cli import main

    (folder / "items.jsonl").write_text("".join(json.dumps(row(it)) + "\n" for it in ITEMS))
    (t2v_env / "p_yes.json").write_text(json.dumps({it[1]: it[4] for it in ITEMS}))
    monkeypatch.setenv("STANDIN_P_YES", str(t2v_env / "p_yes.json"))
    monkeypatch.setenv("BON_QUIET", "1")
    monkeypatch.chdir(t2v_env / "standin")
    grader = json.dumps({"backend": "t2v-metrics", "model": "clip-flant5-xxl", "python": sys.executable, "device": "cpu"})
    rc = main(["score", "--verifier", "vqascore", "--verifier-option", f"grader={grader}",
               "--items", str(folder / "items.jsonl"), "--out-file", str(folder / "out.jsonl")])
    shown = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    lines = [json.loads(x) for x in (folder / "out.jsonl").read_text().splitlines()]
    assert [(r["id"], r["score"]) for r in lines] == [(it[0], it[4]) for it in ITEMS]
    assert [r.get("missing") for r in lines if r["score"] is None] == ["vqascore: t2v-metrics: RuntimeError: the call failed"] * 2
    last = json.loads(shown[-1])
    assert_official(last, OFFICIAL_FULL)
    assert last["items"] == 23 and last["failed"] == 2 and last["failed_counted_as"] == 0.0


def test_a_grader_without_log_probabilities_stops_the_study_with_one_line(tmp_path, monkeypatch, capsys):
    """Never a silent 0/1 VQAScore: `bon run` exits 2 naming the verifier and the opt-in."""
    import yaml

    from bon.cli import main
    from openai_server import OpenAIServer

    monkeypatch.setenv("BON_TEST_VQA_KEY", "sk-vqa-test")
    with OpenAIServer(reply=lambda body: "Yes") as api:
        grader = {"backend": "openai", "model": "grader", "base_url": api.url, "api_key_env": "BON_TEST_VQA_KEY",
                  "reasoning_model": True, "max_retries": 0}
        config = {"out": str(tmp_path / "run"), "seed": 2, "n": 2, "tasks": ["t2i"], "suite": {"name": "synthetic", "per_task": 2},
                  "preference": {"prompts_per_task": 1, "pairs_per_prompt": 1},
                  "generators": [{"name": "synthetic", "label": "strong", "options": {"skill": "strong"}}],
                  "verifier": {"name": "vqascore", "options": {"grader": grader}}, "judges": ["scene-full"]}
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
        assert main(["run", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("bon: error: vqascore: ") and "log-probabilit" in err[-1]
    assert err[-1].endswith("or set fallback_to_answer: true to score yes/no answers as 1/0)")
    assert not (tmp_path / "run" / "scores.jsonl").exists() or not (tmp_path / "run" / "scores.jsonl").read_text()


@pytest.mark.parametrize("probs, official, p_yes", [
    ({"Yes": 0.7, "yes": 0.1, "No": 0.15}, 0.7, 0.7),  # the most likely yes/no token is a yes: its probability
    ({"No": 0.6, "Yes": 0.3}, 0.4, 0.3),  # a no comes first: 1 - P(no), as t2v_metrics' GPT-4o code reads it
    ({"yes": 0.55, "no": 0.2}, 0.55, 0.0),  # any case counts
    ({}, 0.0, 0.0),  # neither among the top tokens: 0
])
def test_an_api_graders_first_token_is_read_as_the_official_code_reads_it(folder, probs, official, p_yes):
    class Probs(StandIn):
        def next_word_probs(self, turns, words):
            return [{w: probs.get(w, 0.0) for w in words} for _ in turns]

    prompt, cand = VqaScoreVerifier(grader=Probs({})).read_item(row(ITEMS[1]), folder)
    assert VqaScoreVerifier(grader=Probs({})).score(prompt, cand).value == pytest.approx(official)
    blend = VqaScoreVerifier(grader=Probs({}), metric="ocr-blend", ocr_weight=0.0)  # bon's own: P("Yes") alone
    assert blend.score(prompt, cand).value == pytest.approx(p_yes)
