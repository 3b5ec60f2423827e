"""Verifiers that need no grader model: EMMA answer extraction and exact match, the OCR text check,
labels read from a file, ISG's structural check; and the answer parsers the graded verifiers use."""

from __future__ import annotations

import json

import pytest
from PIL import Image, ImageDraw, ImageFont

from bon import registry
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.executors.local import safe_score as _safe_score
from verifiers._grader import GradingFailed, parse_scores, parse_yes_no
from verifiers.emma import EmmaVerifier, as_number, extract
from verifiers.isg import IsgVerifier, asked_images
from verifiers.labels import LabelsVerifier
from verifiers.ocr_text import OcrTextVerifier, quoted, substring_similarity


def cand(*values, gen="g", index=0, **prov) -> Candidate:
    return Candidate("p", index, gen, 0, Content.of(*values), dict(prov))


# --- EMMA ----------------------------------------------------------------------------------------------

MC = Prompt("p", "reasoning", Content.of("How many triangles?\nOptions:\nA: 3\nB: 4\nC: 5\nD: 6"),
            {"answer": "C", "options": ["3", "4", "5", "6"], "answer_text": "5", "type": "Multiple Choice"})
OPEN = Prompt("p", "reasoning", Content.of("The square has side 3 cm. Its area?"), {"answer": "9", "type": "Open-ended"})
SMALL = Prompt("p", "reasoning", Content.of("Concentration?"), {"answer": "0.0035", "type": "Open-ended"})


@pytest.mark.parametrize("prompt, reply, right, rule", [
    (MC, "Counting the small and large ones... \\boxed{C}", True, "boxed"),
    (MC, "I think the answer is \\boxed{\\text{(C)}}.", True, "boxed"),
    (MC, "Let me count.\nAnswer: C", True, "answer line"),
    (MC, "Let me count.\n**Final Answer:** (B)", False, "answer line"),
    (MC, "C", True, "whole reply"),
    (MC, "c.", True, "whole reply"),
    (MC, "So the correct answer is 5 triangles.\nThanks", True, "answer is"),  # the option's text
    (MC, "There are five of them in total; option C it is, not (D). Looking again carefully, I settle on (C) here.\nok", True, "option mark"),
    (MC, "Answer: D", False, "answer line"),
    (MC, "I cannot tell from this picture, there is too much going on in it.\nSorry about that.", False, "none"),
    (OPEN, "Area = 3 * 3.\nAnswer: 9 cm^2", True, "answer line"),
    (OPEN, "side squared gives \\boxed{9.00}", True, "boxed"),
    (OPEN, "nine", True, "whole reply"),
    (OPEN, "Answer: 6 cm^2", False, "answer line"),
    (OPEN, "The side is 3 so the area must be 3 times 3 which is 9\nand I am sure about it now", True, "last number"),
    (OPEN, "", False, "none"),
    (SMALL, "Answer: 3.5 \\times 10^{-3}", True, "answer line"),
    (SMALL, "Answer: 0.0041", False, "answer line"),  # 2 decimals would call this equal; 2 significant figures do not
])
def test_emma_extraction_and_match(prompt, reply, right, rule):
    s = EmmaVerifier(metric="bon").score(prompt, cand(reply))  # bon's own rule (the official one: test_official_emma)
    assert s.missing is None and s.value == (1.0 if right else 0.0), s.details
    assert s.details["rule"] == rule and s.details["reference"] == prompt.metadata["answer"]


def test_emma_numbers_and_edge_cases():
    assert as_number("1,234.5 m") == 1234.5 and as_number("\\frac{3}{4}") == 0.75 and as_number("75%") == 75
    assert as_number("-2") == -2 and as_number("twelve") == 12 and as_number("abc") is None
    assert extract("   ", True) == (None, "none")
    no_ref = Prompt("p", "reasoning", Content.of("?"), {})
    for metric in ("official", "bon"):
        s = EmmaVerifier(metric=metric).score(no_ref, cand("Answer: 3"))
        assert s.value is None and "no reference answer" in s.missing
    # the generator's own extraction is used only when asked and only when the text yields nothing
    c = cand("I am not sure how to answer this question at all, there is a lot going on\nhmm", final_answer="C")
    assert EmmaVerifier(metric="bon").score(MC, c).value == 0.0
    assert EmmaVerifier(metric="bon", use_generator_answer=True).score(MC, c).value == 1.0
    assert EmmaVerifier(metric="bon", rel_tol=0.05).score(OPEN, cand("Answer: 9.3")).value == 1.0
    with pytest.raises(BonError):
        EmmaVerifier(metric="bon", rel_tol=-1)
    with pytest.raises(BonError, match="belong to metric bon"):
        EmmaVerifier(rel_tol=0.05)  # the official metric has no tolerance


# --- OCR text -----------------------------------------------------------------------------------------


def test_quotes_and_similarity():
    assert quoted('a sign that says "OPEN" and a mug reading \u201cBEST DAD\u201d') == ["OPEN", "BEST DAD"]
    assert quoted("the cat's toy and 'HELLO' banner", single=True) == ["HELLO"]
    assert quoted("the cat's toy and 'HELLO' banner") == []
    assert substring_similarity("open", "weareopentoday") == 1.0
    assert substring_similarity("open", "opcn") == pytest.approx(0.75)
    assert substring_similarity("open", "") == 0.0


def sign(text: str) -> Image.Image:
    im = Image.new("RGB", (320, 120), (235, 235, 225))
    ImageDraw.Draw(im).text((20, 30), text, fill=(10, 10, 10), font=ImageFont.load_default(size=48))
    return im


def test_ocr_reads_rendered_text():
    prompt = Prompt("p", "t2i", Content.of('a shop sign that says "OPEN"'))
    v = OcrTextVerifier()
    right = v.score(prompt, cand(sign("OPEN")))
    wrong = v.score(prompt, cand(sign("SHUT")))
    assert right.value == pytest.approx(1.0) and wrong.value < 0.5
    assert right.details["quotes"] == ["OPEN"] and right.details["reader"].startswith("rapidocr==")
    assert v.score(Prompt("p", "t2i", Content.of("a red apple")), cand(sign("OPEN"))).missing.endswith("quotes no text")
    assert v.score(prompt, cand("no picture")).missing.endswith("has no image")


# --- labels ---------------------------------------------------------------------------------------------


def test_labels_from_csv_with_raters_and_scale(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("prompt_id,generator,index,score\np,g,0,5\np,g,0,3\np,g,1,1\np,g,2,\n")
    v = registry.create("verifier", "labels", path=str(path), scale=[1, 5])
    p = Prompt("p", "t2i", Content.of("x"))
    s = v.score(p, cand("a", index=0))
    assert s.value == pytest.approx(0.75) and s.details["ratings"] == 2 and s.details["raw"] == 4
    assert v.score(p, cand("a", index=1)).value == 0.0  # a real zero: the rating was the lowest
    missing = v.score(p, cand("a", index=2))  # an empty cell is no rating
    assert missing.value is None and "no label for prompt p candidate g/2" in missing.missing
    assert v.identity()["sha256"] and v.identity()["scale"] == (1.0, 5.0)


def test_labels_from_jsonl_candidate_column_and_any_generator(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"prompt_id": "p", "candidate": "g/0", "score": 0.9},
                                                       {"prompt_id": "p", "index": 1, "score": 0.2}]) + "\n")
    v = LabelsVerifier(path=str(path))
    p = Prompt("p", "t2i", Content.of("x"))
    assert v.score(p, cand("a", index=0)).value == 0.9
    assert v.score(p, cand("a", gen="other", index=1)).value == 0.2  # no generator column: any generator
    assert v.score(p, cand("a", gen="other", index=0)).value is None


@pytest.mark.parametrize("content, options, match", [
    ("prompt_id,generator,index,score\np,g,0,7\n", {}, r"ratings.csv:2: score 7 outside \[0, 1\]"),
    ("prompt_id,generator,index,score\np,g,x,0.5\n", {}, "is not an integer"),
    ("prompt_id,generator,index,score\np,g,0,6\n", {"scale": [1, 5]}, "outside the scale"),
    ("prompt_id,generator,index,score\n", {}, "no labels"),
    ("prompt_id,generator,index,score\np,g,0,0.5\n", {"aggregate": "max"}, "aggregate must be"),
])
def test_labels_bad_files_fail_at_once(tmp_path, content, options, match):
    path = tmp_path / "ratings.csv"
    path.write_text(content)
    with pytest.raises(BonError, match=match):
        LabelsVerifier(path=str(path), **options)


# --- ISG structure ----------------------------------------------------------------------------------------

RED, BLUE = Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "blue")


def test_isg_structure_against_the_graph_golden_and_the_prompt():
    v = IsgVerifier(metric="bon", levels=["structure"])  # no grader needed
    graph = Prompt("p", "interleaved", Content.of("Show what happens next in 2 images."),
                   {"isg": {"structure": ["<gen_text1>", "<gen_img1>", "<gen_img2>"]}})
    assert v.score(graph, cand("It rinses.", RED, BLUE)).value == 1.0
    assert v.score(graph, cand("It", "rinses.", RED, BLUE)).value == 1.0  # split text merges
    assert IsgVerifier(metric="bon", levels=["structure"], merge_text=False).score(graph, cand("It", "rinses.", RED, BLUE)).value == 0.0
    bad = v.score(graph, cand(RED, "It rinses.", BLUE))
    assert bad.value == 0.0 and bad.details["structure"]["expected"] == ["text", "image", "image"]
    golden = Prompt("p", "interleaved", Content.of("x"), {"golden": {"structure": ["image"]}})
    assert v.score(golden, cand(RED)).value == 1.0 and v.score(golden, cand("here:", RED)).value == 0.0
    counted = Prompt("p", "interleaved", Content.of("Explain it using three pictures and short captions."))
    assert v.score(counted, cand("a", RED, "b", BLUE, "c", RED)).value == 1.0
    assert v.score(counted, cand("a", RED)).details["structure"]["rule"] == "image count asked in the prompt"
    assert asked_images("Please use a combination of 4 images and text") == 4
    assert asked_images("draw two cute pictures") == 2 and asked_images("tell me a story") is None
    with pytest.raises(BonError, match="levels must be"):
        IsgVerifier(metric="bon", levels=["vibes"])
    with pytest.raises(BonError, match="grader model is required"):
        IsgVerifier(metric="bon", levels=["structure", "holistic"])


# --- answer parsing and failures ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, count, expected", [
    ('{"reasoning": "fine", "score": [7, 9]}', 2, [7, 9]),
    ('Sure!\n```json\n{"score": [6, 8], "reasoning": "ok",}\n```', 2, [6, 8]),
    ("{'score': ['5', 10], 'reasoning': 'x'}", 2, [5, 10]),
    ('The scores: "score": [3, 4]', 2, [3, 4]),
    ('{"score": 7}', 1, [7]),
    ("score = 8", 1, [8]),
    ("After careful thought.\n9/10", 1, [9]),
])
def test_parse_scores(text, count, expected):
    assert parse_scores(text, count) == expected


@pytest.mark.parametrize("text, count, match", [
    ("", 2, "empty answer"), ("looks great", 2, "no score"), ('{"score": [7]}', 2, "1 score"),
    ('{"score": [7, 12]}', 2, "outside 0-10"),
])
def test_parse_scores_failures(text, count, match):
    with pytest.raises(GradingFailed, match=match):
        parse_scores(text, count)


def test_parse_yes_no():
    assert parse_yes_no("Yes, there are hands.") is True and parse_yes_no('{"Judge": "No"}') is False
    assert parse_yes_no("I would say no") is False
    with pytest.raises(GradingFailed, match="no yes/no"):
        parse_yes_no("maybe")
    with pytest.raises(GradingFailed):
        parse_yes_no("It could be yes or no")


def test_a_crashing_verifier_is_missing_never_zero():
    class Broken(EmmaVerifier):
        def score(self, prompt, candidate):
            raise RuntimeError("grader exploded")

    s = _safe_score(Broken(), MC, cand("C"))
    assert s.value is None and "grader exploded" in s.missing
