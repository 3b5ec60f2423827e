"""The ``emma`` verifier's official metric equals EMMA's own evaluation code, item by item, through ``bon score``.

The expected verdicts and the aggregate below were produced by running the official code, unchanged, on
the items of this file: EMMA-Bench/EMMA at commit 50609fd4d7e4ce03124092b3862e10654b3b7cda
(``data_utils.build_query`` for ``gt_content``, ``evaluation/evaluate.py --rerun`` in its rule-based mode,
``evaluation/calculate_acc.py``), in a separate environment with latex2sympy2 1.9.1, word2number 1.1,
sympy 1.14.0 and antlr4-python3-runtime 4.7.2. The items and replies are bon's own.
"""

from __future__ import annotations

import contextlib
import json
from io import StringIO

import pytest

from bon.cli import main
from bon.content import Candidate, Content, Prompt
from verifiers._grader import Grader, GradingFailed
from verifiers.emma import EmmaVerifier

MC, OE = "Multiple Choice", "Open-ended"
SHAPES = ["square planar", "tetrahedral", "linear", "trigonal bipyramidal"]


def mc(pid, response, answer="B", subject="Chemistry", category="Structure", task=""):
    return {"pid": pid, "question": "Which shape does the molecule in <image_1> take?", "options": SHAPES, "answer": answer,
            "type": MC, "context": "", "subject": subject, "category": category, "task": task, "response": response}


def oe(pid, response, answer, subject="Math", category="Arithmetic", task="", context=""):
    return {"pid": pid, "question": "How long is the red segment in <image_1>?", "options": [], "answer": answer, "type": OE,
            "context": context, "subject": subject, "category": category, "task": task, "response": response}


CODING = {"subject": "Coding", "category": "Code Choose Vis; Data Plot"}
PHYSICS = {"subject": "Physics", "category": "Mechanics", "task": "Counting"}

# (item, the official extraction, the official verdict)
CASES = [
    (mc("t01", "b"), "B", True),                                         # whole reply a letter, any case
    (mc("t02", "B: tetrahedral, since four pairs surround it"), "B", True),  # starts with 'B:'
    (mc("t03", "B. four bonding pairs"), "B", True),                     # starts with 'B.'
    (mc("t04", "b: four bonding pairs"), "", False),                     # 'b:' in lower case is not the letter rule
    (mc("t05", "Reasoning first.\nSo the pick is \\boxed{A} or rather \\boxed{B}"), "B", True),  # the last box
    (mc("t06", "It must be \\boxed{\\text{B}}"), "B", True),              # \text inside the box
    (mc("t07", "It must be \\boxed{\\text{(B)}}"), "(B)", False),         # a letter in parentheses is not the letter
    (mc("t08", "The geometry is \\boxed{Tetrahedral}"), "Tetrahedral", True),  # the option's text, any case
    (mc("t09", "E", **CODING), "E", False),                             # a letter beyond the options
    (mc("t10", "Considering the lone pairs, the correct answer is\nB. tetrahedral", **CODING), "b", True),  # next line, cut at '.'
    (oe("t11", "3.50", "3.5"), "3.50", True),                           # whole reply a number
    (oe("t12", "  42 \n", "42"), "42", True),                           # spaces around a number
    (oe("t13", "1,000", "1000"), "", False),                            # a comma is not a number
    (oe("t14", "Adding up, \\boxed{\\frac{1}{4}}", "0.25"), "\\frac{1}{4}", True),   # LaTeX fraction against a decimal
    (oe("t15", "So \\boxed{\\frac{2}{3}} metres", "0.67"), "\\frac{2}{3}", True),    # equal to 2 decimals
    (oe("t16", "Therefore \\boxed{3.146}", "3.14"), "3.146", False),     # 3.15 against 3.14
    (oe("t17", "Therefore \\boxed{3.14159}", "3.14"), "3.14159", True),  # 3.14 against 3.14
    (oe("t18", "Length: \\boxed{2\\sqrt{2}}", "\\sqrt{8}"), "2\\sqrt{2}", True),    # surds agree as numbers
    (oe("t19", "It simplifies to \\boxed{x+1}", "1+x"), "x+1", False),   # symbols never reach the simplification
    (oe("t20", "We count \\boxed{seven} points", "7", **PHYSICS), "seven", True),    # number words
    (oe("t21", "The final answer is 12.5 cm.", "12.5", **PHYSICS), "12", False),    # cut at the first period
    (oe("t22", "My working: the answer is 8 units\nthat's all", "8"), "8 units", False),  # to the end of the line
    (oe("t23", "Hmm, the answer is 4. No wait, the final answer is 6", "6"), "6", True),  # phrase order, not position
    (oe("t24", "Answer: 9", "9"), "9", True),                           # 'answer:'
    (oe("t25", "I am fairly sure it is 5", "5"), "", False),            # nothing found
    (oe("t26", "The box reads boxed{7}", "7"), "", False),              # no backslash, no box
    (oe("t27", "Unclosed \\boxed{12", "12"), "", False),                # a box never closed
    (oe("t28", "Empty box \\boxed{}", "0"), "", False),                 # an empty box
    (oe("t29", "", "3"), None, False),                                  # an empty reply
    (oe("t30", None, "3"), None, False),                                # no reply
    (oe("t31", "\\boxed{TETRAHEDRAL}", "Tetrahedral", subject="Chemistry", category="Structure"), "TETRAHEDRAL", True),
    (oe("t32", "\\boxed{50\\%}", "50"), "50\\%", False),                 # a percent sign
    (oe("t33", "\\boxed{1.5E3}", "1500"), "1.5E3", False),              # an exponent letter, lower-cased
    (oe("t34", "Value \\boxed{\\dfrac{10}{4}}", "2.5", context="A ruler is laid along the segment."), "\\dfrac{10}{4}", True),
    (oe("t35", "so the answer should be 0.333 exactly", "1/3"), "0", False),   # 'answer should be', cut at '.'
    (mc("t36", "H"), "H", False),                                       # H is still a letter of the rule
    (oe("t37", "-2", "-2.004"), "-2", True),                            # negative, to 2 decimals
    (oe("t38", "\\boxed{\\pi}", "3.14"), "\\pi", True),                 # pi evaluates
]

OFFICIAL_AGGREGATE = {  # calculate_acc.py on the same items
    "average": {"accuracy": 0.5263157894736842, "correct": 20, "total": 38},
    "subject": {"Chemistry": {"accuracy": 0.7, "correct": 7, "total": 10}, "Coding": {"accuracy": 0.5, "correct": 1, "total": 2},
                "Math": {"accuracy": 0.4583333333333333, "correct": 11, "total": 24},
                "Physics": {"accuracy": 0.5, "correct": 1, "total": 2}},
    "question_type": {"multiple choice": {"accuracy": 0.6363636363636364, "correct": 7, "total": 11},
                      "open-ended": {"accuracy": 0.48148148148148145, "correct": 13, "total": 27}},
    "category": {"Chemistry": {"Structure": {"accuracy": 0.7, "correct": 7, "total": 10}},
                 "Coding": {"Code Choose Vis": {"accuracy": 0.5, "correct": 1, "total": 2},
                            "Data Plot": {"accuracy": 0.5, "correct": 1, "total": 2}},
                 "Math": {"Arithmetic": {"accuracy": 0.4583333333333333, "correct": 11, "total": 24}},
                 "Physics": {"Mechanics": {"accuracy": 0.5, "correct": 1, "total": 2}}},
    "task": {"Physics_Counting": {"accuracy": 0.5, "correct": 1, "total": 2}},
}


def write_items(path, items):
    path.write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    return path


def bon_score(capsys, items_file, *options, out_file=None):
    argv = ["score", "--verifier", "emma", "--items", str(items_file), *options]
    if out_file is not None:
        argv += ["--out-file", str(out_file)]
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """``bon score`` over all the cases once: (exit code, stdout, the output file's lines by id)."""
    folder = tmp_path_factory.mktemp("emma_official")
    items_file = write_items(folder / "items.jsonl", [item for item, _, _ in CASES])
    out_file = folder / "scores.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BON_QUIET", "1")
        buffer = StringIO()
        with contextlib.redirect_stdout(buffer):
            rc = main(["score", "--verifier", "emma", "--items", str(items_file), "--out-file", str(out_file)])
    lines = [json.loads(line) for line in out_file.read_text().splitlines()]
    return rc, buffer.getvalue(), {r["id"]: r for r in lines}, [r["id"] for r in lines]


@pytest.mark.parametrize("item, extraction, correct", [pytest.param(*case, id=case[0]["pid"]) for case in CASES])
def test_each_verdict_is_the_official_one(scored, item, extraction, correct):
    _, _, by_id, _ = scored
    record = by_id[item["pid"]]
    assert (record["extracted"], record["correct"], record["score"]) == (extraction, correct, 1.0 if correct else 0.0)


def test_the_last_line_is_the_official_aggregate_as_strict_json(scored):
    rc, shown, _, order = scored
    assert rc == 0 and order == [item["pid"] for item, _, _ in CASES]  # one line per item, in input order
    last = json.loads(shown.strip().splitlines()[-1], parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert last.pop("metric") == "official" and last.pop("failed") == 0
    assert last == OFFICIAL_AGGREGATE


def test_bon_metric_differs_where_the_official_code_is_strict(tmp_path, capsys, monkeypatch):
    """``metric: bon`` stays available; it reads some replies the official code rejects."""
    monkeypatch.setenv("BON_QUIET", "1")
    chosen = [case for case in CASES if case[0]["pid"] in ("t07", "t21", "t22")]
    items_file = write_items(tmp_path / "items.jsonl", [item for item, _, _ in chosen])
    rc, shown, _ = bon_score(capsys, items_file, "--verifier-option", "metric=bon")
    assert rc == 0 and all(not correct for _, _, correct in chosen)
    assert json.loads(shown.strip().splitlines()[-1])["average"] == {"accuracy": 1.0, "correct": 3, "total": 3}


def test_a_rerun_reuses_the_lines_of_the_same_items(scored, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BON_QUIET", "0")
    items_file = write_items(tmp_path / "items.jsonl", [CASES[0][0], CASES[1][0]])
    out_file = tmp_path / "scores.jsonl"
    assert bon_score(capsys, items_file, out_file=out_file)[0] == 0
    first = out_file.read_text()
    rc, shown, err = bon_score(capsys, items_file, out_file=out_file)
    assert rc == 0 and out_file.read_text() == first and "2 from an earlier run" in err
    assert "score emma" in err  # progress on stderr


@pytest.mark.parametrize("change, words", [
    ({"answer": None}, ["item t01", "'answer'", "missing"]),
    ({"type": "True or False"}, ["item t01", "'type'", "True or False"]),
    ({"options": []}, ["item t01", "'options'", "missing"]),
    ({"answer": "F"}, ["item t01", "'answer'", "'F'"]),
    ({"response": ["B"]}, ["item t01", "'response'", "text or null"]),
    ({"pid": None}, ["no pid"]),
])
def test_bad_items_are_one_line_naming_item_and_field(tmp_path, capsys, change, words):
    item = {k: v for k, v in {**CASES[0][0], **change}.items() if v is not None or k == "response"}
    items_file = write_items(tmp_path / "items.jsonl", [CASES[1][0], item])
    out_file = tmp_path / "scores.jsonl"
    rc, shown, err = bon_score(capsys, items_file, out_file=out_file)
    assert rc == 2 and shown == "" and not out_file.exists()
    assert len(err.strip().splitlines()) == 1 and err.startswith("bon: error: ") and f"{items_file}:2:" in err
    for word in words:
        assert word in err, err


def test_a_missing_response_field_and_other_bad_input(tmp_path, capsys):
    item = {k: v for k, v in CASES[0][0].items() if k != "response"}
    rc, _, err = bon_score(capsys, write_items(tmp_path / "a.jsonl", [item]))
    assert rc == 2 and "'response'" in err and len(err.strip().splitlines()) == 1
    rc, _, err = bon_score(capsys, write_items(tmp_path / "b.jsonl", [CASES[0][0], CASES[0][0]]))
    assert rc == 2 and "t01 appears twice" in err
    rc, _, err = bon_score(capsys, tmp_path / "none.jsonl")
    assert rc == 2 and "no such file" in err
    (tmp_path / "torn.jsonl").write_text('{"pid": "x"', encoding="utf-8")
    rc, _, err = bon_score(capsys, tmp_path / "torn.jsonl")
    assert rc == 2 and "not valid JSON" in err
    (tmp_path / "latin1.jsonl").write_bytes('{"pid": "caf\xe9"}\n'.encode("latin-1"))
    rc, _, err = bon_score(capsys, tmp_path / "latin1.jsonl")
    assert rc == 2 and "not UTF-8" in err and len(err.strip().splitlines()) == 1


def test_a_verifier_that_reads_no_items_is_one_line(tmp_path, capsys):
    items_file = write_items(tmp_path / "items.jsonl", [CASES[0][0]])
    rc = main(["score", "--verifier", "synthetic", "--items", str(items_file)])  # the demo's verifier
    err = capsys.readouterr().err
    assert rc == 2 and "does not read benchmark items" in err and len(err.strip().splitlines()) == 1


# --- the official LLM-judge mode (evaluate.py --gpt_eval) ------------------------------------------------


class CannedGrader(Grader):
    """Answers each grading request with the next canned reply (an exception is raised instead)."""

    def __init__(self, replies):
        self.replies, self.asked, self.tokens = list(replies), [], []

    def identity(self):
        return {"backend": "canned"}

    def answer(self, turns, max_new_tokens=256):
        self.asked += [turn[0][1] for turn in turns]
        self.tokens.append(max_new_tokens)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return [reply]

    def next_word_probs(self, turns, words):
        raise AssertionError("the official judge reads a written answer")


def test_the_judge_mode_asks_as_the_official_code_and_reads_only_correct(tmp_path):
    utils = tmp_path / "utils.py"  # a stand-in for the checkout's evaluation/utils.py (our own words)
    utils.write_text('x = 1\nscore_demo_prompt = """  Say Correct or Incorrect.\n"""\n', encoding="utf-8")
    grader = CannedGrader(["Correct", " correct\n", "Correct.", "Incorrect", GradingFailed("timed out", transient=True)])
    verifier = EmmaVerifier(metric="official-judge", judge_prompt=str(utils), grader=grader)
    prompt = Prompt("q1", "reasoning", Content.of("?"), {"answer": "B", "type": MC, "options": SHAPES})
    reply = Candidate("q1", 0, "g", 0, Content.of("It is \\boxed{B}"))
    values = [verifier.score(prompt, reply) for _ in range(5)]
    assert [s.value for s in values] == [1.0, 1.0, 0.0, 0.0, None]  # any answer but "correct" is wrong, as officially
    assert values[4].transient and "timed out" in values[4].missing
    assert grader.asked[0] == "Say Correct or Incorrect.\nResponse: It is \\boxed{B}\nAnswer: B\nCorrect_or_not:"
    assert verifier.score(prompt, Candidate("q1", 1, "g", 0, Content([]))).value == 0.0 and len(grader.asked) == 5  # not asked
    assert verifier.identity()["judge_prompt_sha256"]


def test_a_failed_judge_call_counts_as_a_wrong_answer_in_the_accuracy(tmp_path):
    """calculate_acc.py counts every problem (official_on_failure: zero), so the aggregate does too."""
    from analysis.bon_metrics import failure_policy

    utils = tmp_path / "utils.py"
    utils.write_text('score_demo_prompt = "Say Correct or Incorrect."\n', encoding="utf-8")
    verifier = EmmaVerifier(metric="official-judge", judge_prompt=str(utils),
                            grader=CannedGrader(["Correct", GradingFailed("the API refused")]))
    prompt = Prompt("q1", "reasoning", Content.of("?"), {"answer": "B", "type": MC, "options": SHAPES, "subject": "Math"})
    scored = [(prompt, verifier.score(prompt, Candidate("q1", i, "g", 0, Content.of("B")))) for i in range(2)]
    assert [s.value for _, s in scored] == [1.0, None]
    agg = verifier.aggregate(scored)
    assert agg["average"] == {"accuracy": 0.5, "correct": 1, "total": 2} and agg["failed"] == 1
    assert failure_policy({"verifier": {"name": "emma"}}).applied == "zero"


def test_the_judge_mode_defaults_to_the_official_grader_and_needs_the_instructions(tmp_path):
    text = tmp_path / "instructions.txt"
    text.write_text("Grade it.", encoding="utf-8")
    verifier = EmmaVerifier(metric="official-judge", judge_prompt=str(text))
    assert verifier.judge_prompt == "Grade it."
    assert verifier._official_grader_spec() == {"backend": "openai", "model": "chatgpt-4o-latest", "temperature": None}
    from bon.errors import BonError

    with pytest.raises(BonError, match="needs judge_prompt"):
        EmmaVerifier(metric="official-judge")
    (tmp_path / "other.py").write_text("prompt = 'no'\n", encoding="utf-8")
    with pytest.raises(BonError, match="no score_demo_prompt"):
        EmmaVerifier(metric="official-judge", judge_prompt=str(tmp_path / "other.py"))
    with pytest.raises(BonError, match="metric must be one of"):
        EmmaVerifier(metric="lenient")


def test_a_study_prompt_without_an_option_text_never_matches_an_empty_extraction():
    """A suite row whose answer names no option has no answer_text: the reference stands in, never ''."""
    prompt = Prompt("q2", "reasoning", Content.of("?"), {"answer": "Z", "type": "multiple choice", "options": ["x", "y"]})
    score = EmmaVerifier().score(prompt, Candidate("q2", 0, "g", 0, Content.of("no answer in here")))
    assert score.value == 0.0 and score.details["extracted"] == ""
    assert EmmaVerifier().score(prompt, Candidate("q2", 0, "g", 0, Content.of("\\boxed{z}"))).value == 1.0
