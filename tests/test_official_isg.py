"""ISG-Bench's official metric: bon equals the official evaluation code item by item and in its per-group
aggregation, on hand-made items answered through ``grader=replay:`` (no model).

Expected values: tests/official_isg_expected.json, written by running the official code of
Dongping-Chen/ISG at commit de504cdda1cab7bd874c252f670eb1833290db5a (``ISG-eval.py`` and
``calculate_performance.py``) on the same items with the same canned replies
(benchmarks/official_harness/isg_official.py). The cases: tests/official_isg_cases.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from bon.errors import BonError
from official_isg_cases import ALL_YES, ANSWER, case, cases, fresh_cases
from verifiers.isg import IsgVerifier
from grader_stubs import DownGrader, score_items

EXPECTED = json.loads((Path(__file__).parent / "official_isg_expected.json").read_text())
LEVELS = ("structure", "block", "image", "holistic")


def write_images(root: Path, items: list[dict]) -> None:
    for item in items:
        for field in ("Query", "Golden", "output"):
            for part in item[field]:
                if part["type"] == "image" and not (root / part["content"]).exists():
                    (root / part["content"]).parent.mkdir(parents=True, exist_ok=True)
                    Image.new("RGB", (16, 12), (len(part["content"]) * 9 % 256, 90, 160)).save(root / part["content"])


def replay_file(path: Path, all_cases: list[dict]) -> Path:
    lines = [{"item": c["item"]["id"], "question": q, "reply": r} for c in all_cases for q, r in c["replies"].items()]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def score_cases(root: Path, all_cases: list[dict]):
    """bon's scores of hand-made cases: their images written, their replies replayed."""
    items = [c["item"] for c in all_cases]
    write_images(root, items)
    verifier = IsgVerifier(grader=f"replay:{replay_file(root / 'replies.jsonl', all_cases)}")
    return score_items(verifier, items, root)


@pytest.fixture(scope="module")
def official_run(tmp_path_factory):
    return score_cases(tmp_path_factory.mktemp("isg"), cases())


def test_expected_values_name_the_official_code():
    assert EXPECTED["repository"] == "Dongping-Chen/ISG" and EXPECTED["commit"] == "de504cdda1cab7bd874c252f670eb1833290db5a"
    assert len(EXPECTED["items"]) == len(cases()) >= 20


@pytest.mark.parametrize("cid", [c["item"]["id"] for c in cases()])
def test_each_item_equals_the_official_numbers(official_run, cid):
    scored, _ = official_run
    score = next(s for i, _, s in scored if i == cid)
    want = EXPECTED["items"][cid]
    assert {k: score.details[k] for k in LEVELS} == {k: want[k] for k in LEVELS}
    assert (score.details["item_error"] is not None) == want["item_error"]
    assert score.value == want["holistic"] / 10  # primary: holistic, on 0-1


def test_the_issue_example(official_run):
    scored, _ = official_run
    got = {i: [s.details[k] for k in LEVELS] for i, _, s in scored if i in ("ex-a", "ex-b")}
    assert got["ex-a"] == [True, 10, pytest.approx(2 / 3), 7]  # official 1 / 10 / 0.667 / 7
    assert got["ex-b"] == [False, 1, 0, 7]  # [text, text, img, img]: adjacent texts are not merged


def test_aggregate_equals_the_official_groups(official_run):
    _, agg = official_run
    groups = {g: {k: v for k, v in n.items() if k != "block_counted"} for g, n in EXPECTED["groups"].items()}
    assert agg["groups"] == groups
    assert agg["all"] == {k: v for k, v in EXPECTED["all"].items() if k != "block_counted"}
    assert agg["items"] == len(cases()) and agg["failed"] == 0 and agg["primary"] == "holistic"


def test_primary_level_is_the_best_of_n_score(tmp_path):
    c = [case("ex-a", ANSWER, ALL_YES)]
    write_images(tmp_path, [c[0]["item"]])
    replies = replay_file(tmp_path / "r.jsonl", c)
    for primary, value in (("structure", 1.0), ("block", 1.0), ("image", 2 / 3), ("holistic", 0.7)):
        v = IsgVerifier(grader=f"replay:{replies}", primary=primary)
        prompt, cand = v.read_item(c[0]["item"], tmp_path)
        assert v.score(prompt, cand).value == pytest.approx(value)
    with pytest.raises(BonError, match="primary must be one of"):
        IsgVerifier(grader=f"replay:{replies}", primary="vibes")


def test_a_reply_file_that_misses_a_question_is_a_one_line_error(tmp_path):
    c = case("ex-a", ANSWER, {k: v for k, v in ALL_YES.items() if k != "block/1"})
    write_images(tmp_path, [c["item"]])
    v = IsgVerifier(grader=f"replay:{replay_file(tmp_path / 'r.jsonl', [c])}")
    prompt, cand = v.read_item(c["item"], tmp_path)
    with pytest.raises(BonError) as err:
        v.score(prompt, cand)
    assert "\n" not in str(err.value) and "item 'ex-a'" in str(err.value) and "'block/1'" in str(err.value)
    from bon.executors.local import safe_score

    with pytest.raises(BonError, match="no reply for item 'ex-a'"):  # a study's verify stage stops too, never stores it
        safe_score(v, prompt, cand)


def test_bad_items_and_replay_files_are_one_line_errors(tmp_path):
    c = case("ex-a", ANSWER, ALL_YES)
    write_images(tmp_path, [c["item"]])
    v = IsgVerifier(grader=f"replay:{replay_file(tmp_path / 'r.jsonl', [c])}")
    with pytest.raises(BonError, match="ISG item ex-a: field Golden must be a list"):
        v.read_item({**c["item"], "Golden": None}, tmp_path)
    with pytest.raises(BonError, match=r"ISG item ex-a output\[1\]: image a/none.png not found"):
        v.read_item({**c["item"], "output": [ANSWER[0], {"type": "image", "content": "a/none.png"}]}, tmp_path)
    (tmp_path / "bad.jsonl").write_text('{"item": "x", "reply": "hi"}\n')
    with pytest.raises(BonError, match="bad.jsonl:1: a replay line needs item, question and reply"):
        IsgVerifier(grader=f"replay:{tmp_path / 'bad.jsonl'}")
    with pytest.raises(BonError, match="needs prompts_dir"):
        IsgVerifier(grader={"backend": "openai", "model": "m", "api_key_env": None, "preflight": False})
    with pytest.raises(BonError, match="metric: official"):
        IsgVerifier(grader=f"replay:{tmp_path / 'r.jsonl'}", metric="bon")


def test_official_prompts_are_read_from_a_checkout(tmp_path):
    """The request texts come from the checkout's ISG_eval/get_judge_prompt.py (a stand-in in our own words)."""
    from verifiers._grader import Grader

    folder = tmp_path / "ISG" / "ISG_eval"
    folder.mkdir(parents=True)
    (folder / "get_judge_prompt.py").write_text(
        '_TEXT_TEXT_JUDGE_PROMPT = "TT {requirement} {text1} {text2} {question}"\n'
        '_TEXT_IMAGE_JUDGE_PROMPT = "TI {requirement} | {text} | {question}"\n'
        '_IMAGE_IMAGE_JUDGE_PROMPT = "II {requirement} {question}"\n'
        '_EVALUATE_WHOLE_W_GT_PROMPT = ["Judge this.\\nQuery:", "Answer:", "Golden:", "Score it."]\n'
        '_DSG_PROMPT = "Look: {question}"\n'
        'VQA_dict = {"Yes_No": "say yes or no", "Score": "give 1-10"}\n')

    class Recorder(Grader):
        def __init__(self):
            self.requests = []

        def identity(self):
            return {"backend": "recorder"}

        def answer(self, turns, max_new_tokens=256):
            return [json.dumps({"Judge": "Yes", "overall_score": 5})] * len(turns)

        def next_word_probs(self, turns, words):
            raise AssertionError

        def ask(self, requests, max_new_tokens=256):
            self.requests += requests
            return self.answer([r.turn for r in requests])

    c = case("ex-a", ANSWER, ALL_YES)
    write_images(tmp_path, [c["item"]])
    rec = Recorder()
    v = IsgVerifier(grader=rec, prompts_dir=str(tmp_path / "ISG"))
    prompt, cand = v.read_item(c["item"], tmp_path)
    s = v.score(prompt, cand)
    by_q = {r.question: r.turn for r in rec.requests}
    assert sorted(by_q) == ["block/0", "block/1", "holistic", "image/0", "image/2"]
    kinds = [k for k, _ in by_q["block/0"]]
    assert kinds == ["image", "text"] and by_q["block/0"][1][1].startswith("TI give 1-10 | The water runs over the hands. |")
    assert [k for k, _ in by_q["block/1"]] == ["image", "image", "text"] and by_q["block/1"][2][1].startswith("II give 1-10")
    assert by_q["image/0"][1][1].startswith("Look: (ex-a image/0)")
    holistic = by_q["holistic"]
    # the query, the answer and the Golden answer, newlines turned to spaces as the official code does
    assert [k for k, _ in holistic] == ["text", "text", "image", "text", "text", "image", "image", "text", "text", "image", "image", "text"]
    assert holistic[0][1] == "Judge this. Query:" and "\n" not in holistic[1][1] and holistic[-1][1] == "Score it."
    assert holistic[8][1] == "The soap is rinsed off."  # the Golden answer is shown
    assert s.details["holistic"] == 5 and v.identity()["prompts"]


def test_the_api_request_is_the_official_one(tmp_path, monkeypatch):
    """Per request: the body keys, temperature, response format, part kinds (one per text) and image
    detail the official client sent for the same item in the harness."""
    from openai_server import OpenAIServer

    monkeypatch.setenv("BON_TEST_ISG_KEY", "sk-test")
    c = case("ex-a", ANSWER, ALL_YES)
    write_images(tmp_path, [c["item"]])
    replies = {q: r for q, r in ALL_YES.items()}

    def reply(body):
        texts = " ".join(p.get("text", "") for p in body["messages"][0]["content"] if p["type"] == "text")
        q = next((k for k in replies if f"(ex-a {k})" in texts), "holistic")
        return replies[q]

    server = OpenAIServer(reply=reply)
    try:
        checkout = tmp_path / "ISG" / "ISG_eval"
        checkout.mkdir(parents=True)
        (checkout / "get_judge_prompt.py").write_text(
            '_TEXT_TEXT_JUDGE_PROMPT = "{requirement} {text1} {text2} {question}"\n_TEXT_IMAGE_JUDGE_PROMPT = "{requirement} {text} {question}"\n'
            '_IMAGE_IMAGE_JUDGE_PROMPT = "{requirement} {question}"\n_EVALUATE_WHOLE_W_GT_PROMPT = ["Q:", "A:", "G:", "Rate."]\n'
            '_DSG_PROMPT = "{question}"\nVQA_dict = {"Yes_No": "yes or no", "Score": "1-10"}\n')
        v = IsgVerifier(prompts_dir=str(tmp_path / "ISG"), grader={"backend": "openai", "model": "gpt-4.1", "base_url": server.url,
                                                                  "api_key_env": "BON_TEST_ISG_KEY"})
        s = v.score(*v.read_item(c["item"], tmp_path))
    finally:
        server.close()
    assert [s.details[k] for k in LEVELS] == [True, 10, pytest.approx(2 / 3), 7]
    official = EXPECTED["requests"]
    assert len(server.requests) == len(official)  # bon leaves out the Yes_No block requests the official count never reads
    for body in server.requests:
        parts = body["messages"][0]["content"]
        texts = " ".join(p.get("text", "") for p in parts if p["type"] == "text")
        want = official[next((k for k in official if f"(ex-a {k})" in texts), "holistic")]
        assert sorted(body) == want["body_keys"] and body["temperature"] == want["temperature"]
        assert body["response_format"] == want["response_format"] and [p["type"] for p in parts] == want["kinds"]
        assert [p["image_url"].get("detail") for p in parts if p["type"] == "image_url"] == want["details"]


def test_a_transient_grader_failure_is_a_transient_missing_score(tmp_path):
    """A timeout is retried on a rerun; only a call that failed for good counts as the official None."""
    Down = DownGrader

    c = case("ex-a", ANSWER, ALL_YES)
    write_images(tmp_path, [c["item"]])
    checkout = tmp_path / "ISG" / "ISG_eval"
    checkout.mkdir(parents=True)
    (checkout / "get_judge_prompt.py").write_text("".join(f"{n} = {v!r}\n" for n, v in (
        ("_TEXT_TEXT_JUDGE_PROMPT", "x"), ("_TEXT_IMAGE_JUDGE_PROMPT", "x"), ("_IMAGE_IMAGE_JUDGE_PROMPT", "x"),
        ("_EVALUATE_WHOLE_W_GT_PROMPT", ["a", "b", "c", "d"]), ("_DSG_PROMPT", "x"), ("VQA_dict", {"Score": "s", "Yes_No": "y"}))))
    v = IsgVerifier(grader=Down(), prompts_dir=str(tmp_path / "ISG"))
    s = v.score(*v.read_item(c["item"], tmp_path))
    assert s.value is None and s.transient and "timed out" in s.missing
    assert v.aggregate([(v.read_item(c["item"], tmp_path)[0], s)])["failed"] == 1


def test_bon_score_through_the_cli_gives_the_official_numbers(tmp_path, monkeypatch, capsys):
    """`bon score --verifier isg --verifier-option grader=replay:FILE`: one line per item with the four
    official numbers, and the official per-group aggregate as the last line printed. The images are found
    next to the items file, whatever the working folder."""
    from bon.cli import main

    all_cases = cases()
    folder = tmp_path / "bench"
    folder.mkdir()
    write_images(folder, [c["item"] for c in all_cases])
    (folder / "items.jsonl").write_text("".join(json.dumps(c["item"]) + "\n" for c in all_cases))
    replies = replay_file(tmp_path / "replies #1.jsonl", all_cases)  # a " #" is part of the path, not a comment
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BON_QUIET", "1")
    rc = main(["score", "--verifier", "isg", "--verifier-option", f"grader=replay:{replies.name}",
               "--items", "bench/items.jsonl", "--out-file", "out.jsonl"])
    shown = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in lines] == [c["item"]["id"] for c in all_cases]
    for r in lines:
        want = EXPECTED["items"][r["id"]]
        assert [r[k] for k in LEVELS] == [want[k] for k in LEVELS] and r["score"] == want["holistic"] / 10, r["id"]
    last = json.loads(shown[-1])
    assert last["all"] == {k: v for k, v in EXPECTED["all"].items() if k != "block_counted"}
    assert last["groups"] == {g: {k: v for k, v in n.items() if k != "block_counted"} for g, n in EXPECTED["groups"].items()}


# --- a second hand-made set (tests/official_isg_cases.fresh_cases), run through the same official code --------


@pytest.fixture(scope="module")
def fresh_run(tmp_path_factory):
    return score_cases(tmp_path_factory.mktemp("isg-fresh"), fresh_cases())


def test_the_fresh_set_equals_the_official_numbers_item_by_item_and_per_group(fresh_run):
    scored, agg = fresh_run
    want = EXPECTED["fresh"]
    assert len(want["items"]) == len(fresh_cases()) >= 10
    for cid, _, score in scored:
        got = {k: score.details[k] for k in LEVELS} | {"item_error": score.details["item_error"] is not None}
        assert (cid, got) == (cid, {k: want["items"][cid][k] for k in (*LEVELS, "item_error")})
    assert agg["groups"] == {g: {k: v for k, v in n.items() if k != "block_counted"} for g, n in want["groups"].items()}
    assert agg["all"] == {k: v for k, v in want["all"].items() if k != "block_counted"}
