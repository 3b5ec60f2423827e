"""bon's rubric templates, the official-prompt loader and the answer parser."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bon.errors import BonError
from judges.prompts import BON_LABELS, OFFICIAL_FILE, Template, load_official, parse_answer, rubric

# --- parser ---------------------------------------------------------------------------------------

GOOD = [
    ('{"reasoning": "x", "score": 5, "better_response": "A"}', "A", 5),
    ('```json\n{"score": 2, "better_response": "B"}\n```', "B", 2),
    ('Sure! Here is my verdict:\n```\n{"better_response": "B", "score": 1}\n```\nHope this helps.', "B", 1),
    ("{'better_response': 'A', 'score': 6}", "A", 6),  # single quotes
    ('{"better_response": "B", "score": 3,}', "B", 3),  # trailing comma
    ('{"better_response": "Response A", "score": 4}', "A", 4),
    ('{"better_response": "response_b"}', "B", None),
    ('{"better_response": "a", "score": "5"}', "A", 5),  # lower case, score as a string
    ('{"Better Response": "B", "Score": 2}', "B", 2),  # key spelling
    ('{"reasoning": {"a": "uses {braces} and it\'s fine"}, "score": 6, "better_response": "A"}', "A", 6),
    ('{"verdict": {"better_response": "B", "score": 1}}', "B", 1),  # nested: score read beside the letter
    ('{"better_response": “A”, "score": 5}', "A", 5),  # curly quotes
    ('{"reasoning": "cut off here", "score": 2, "better_response": "B"', "B", 2),  # truncated object
    ("better_response: a", "A", None),  # YAML-ish
    ('{"score": 5}', "A", 5),  # a lone score reads off the 1-6 scale
    ('{"better_response": "A", "score": 2}', "A", None),  # contradicting score dropped, letter kept
    ('Format: {"better_response": "A" or "B"}\nMy answer: {"better_response": "B", "score": 2}', "B", 2),
    ("After weighing both, B.\n\nFinal answer: **B**", "B", None),
    ("B", "B", None),
    ("The second one wins. [[B]]", "B", None),
]

BAD = [
    "",
    "   \n",
    "Both are fine.",
    'Format: {"better_response": "A" or "B"}',  # the format echoed, no answer
    '{"better_response": "tie", "score": 4}',
    '{"better_response": "A"} and on reflection {"better_response": "B"}',  # two different answers
    "A is sharper, but B follows the prompt.",
    "I prefer [[A]] ... no, [[B]]",
    "the better response: a tie",
    '{"score": 9}',
]


@pytest.mark.parametrize("text,letter,score", GOOD)
def test_parser_reads_messy_answers(text: str, letter: str, score: int | None) -> None:
    v = parse_answer(text)
    assert (v.better, v.score, v.missing) == (letter, score, None)


@pytest.mark.parametrize("text", BAD)
def test_parser_never_guesses(text: str) -> None:
    v = parse_answer(text)
    assert v.better is None and v.score is None
    assert v.missing.startswith("unparseable:") and len(v.missing) < 130 and "\n" not in v.missing


def test_parser_keeps_snippet_and_confidence() -> None:
    assert "Both are fine" in parse_answer("Both are fine.").missing
    v = parse_answer('{"better_response": "A", "score": 2, "confidence": 0.4}')
    assert v.meta["score_conflict"] == 2 and v.meta["confidence"] == 0.4
    assert parse_answer("x" * 500).missing.endswith("…")


# --- bon's templates -------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["image", "edit", "interleaved", "reasoning", "t2i"])
def test_templates_for_every_task(task: str) -> None:
    t = rubric(task)
    assert t.task == ("image" if task == "t2i" else task) and t.source == "bon" and t.labels == BON_LABELS
    for needle in ("better_response", '"score"', "1-6", "6: A is much better", "1: B is much better", *BON_LABELS):
        assert needle in t.text
    assert "$" not in t.text and len(t.sha256) == 64
    assert rubric(task).sha256 == t.sha256  # deterministic


def test_templates_differ_per_task_and_hash_follows_text() -> None:
    hashes = {rubric(t).sha256 for t in ("image", "edit", "interleaved", "reasoning")}
    assert len(hashes) == 4
    t = rubric("edit")
    assert Template("edit", t.text + " ", "bon").sha256 != t.sha256
    assert Template("edit", t.text, "bon", labels=("[P]", "[A]", "[B]")).sha256 != t.sha256
    assert Template("edit", t.text, "elsewhere").sha256 == t.sha256  # where it came from is not what the judge sees
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.text = "changed"  # type: ignore[misc]


def test_render_lays_out_prompt_and_responses() -> None:
    t = rubric("reasoning")
    items = t.render([["text", "q?"], ["image", "in.png"]], [["text", "a"]], [["image", "b.png"]])
    assert items == [["text", t.text], ["text", "[PROMPT]"], ["text", "q?"], ["image", "in.png"],
                     ["text", "[RESPONSE A]"], ["text", "a"], ["text", "[RESPONSE B]"], ["image", "b.png"]]


def test_unknown_task() -> None:
    with pytest.raises(BonError, match="unknown MMRB2 task"):
        rubric("video")


# --- official prompts from a checkout --------------------------------------------------------------

FAKE_PROMPTS = '''
raise SystemExit("the loader must not run this file")


def get_image_gen_prompt() -> str:
    """doc"""
    return """IMAGE RUBRIC"""


def get_image_edit_prompt():
    return "EDIT RUBRIC"


def get_interleaved_prompt():
    return "INTERLEAVED RUBRIC"
'''

FAKE_EVALUATOR = '''
def pairwise_evaluate(self, prompt, a, b):
    items = [["text", "rubric"]]
    items.append(["text", "[THE PROMPT:]"])
    items.append(["text", "[FIRST:]"])
    items.append(["text", "[SECOND:]"])
    return items
'''


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    path = tmp_path / "MMRB2" / OFFICIAL_FILE
    path.parent.mkdir(parents=True)
    path.write_text(FAKE_PROMPTS, encoding="utf-8")
    (path.parent / "api_pairwise_evaluator.py").write_text(FAKE_EVALUATOR, encoding="utf-8")
    return tmp_path / "MMRB2"


def test_official_loader_reads_checkout_without_running_it(checkout: Path) -> None:
    t = load_official(checkout, "t2i")
    assert (t.task, t.text, t.labels) == ("image", "IMAGE RUBRIC", ("[THE PROMPT:]", "[FIRST:]", "[SECOND:]"))
    assert t.source.endswith("evaluation_prompts.py") and t.sha256 != rubric("image").sha256
    assert rubric("edit", official_dir=checkout).text == "EDIT RUBRIC"
    # the file itself, or its folder, also work
    assert load_official(checkout / OFFICIAL_FILE, "interleaved").text == "INTERLEAVED RUBRIC"
    assert load_official((checkout / OFFICIAL_FILE).parent, "edit").text == "EDIT RUBRIC"


def test_official_loader_errors(tmp_path: Path, checkout: Path) -> None:
    with pytest.raises(BonError, match="not found"):
        load_official(tmp_path / "nowhere", "image")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BonError, match="no official MMRB2 prompts"):
        load_official(tmp_path / "empty", "image")
    with pytest.raises(BonError, match="get_reasoning_prompt"):
        load_official(checkout, "reasoning")  # the fake checkout lacks it
    (checkout / OFFICIAL_FILE).write_text("def broken(:\n", encoding="utf-8")
    with pytest.raises(BonError, match="cannot read"):
        load_official(checkout, "image")


def test_official_labels_fall_back_to_bons(checkout: Path) -> None:
    (checkout / OFFICIAL_FILE).parent.joinpath("api_pairwise_evaluator.py").unlink()
    assert load_official(checkout, "image").labels == BON_LABELS
