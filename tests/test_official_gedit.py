"""GEdit-Bench's official metric: bon equals the official evaluation code item by item (request, reply
reader, re-ask, guess) and in its aggregation (category means, their mean, Intersection, per language),
on hand-made items answered through ``grader=replay:`` (no model).

Expected values: tests/official_gedit_expected.json, written by running the official code of
stepfun-ai/Step1X-Edit at commit 570eba6ebda0c45c013983a483afbf2fd12bfcbc (GEdit-Bench's
``test_gedit_score.py`` with its VIEScore, and ``calculate_statistics.py``) on the same items with the same
canned replies (benchmarks/official_harness/gedit_official.py; rerun on the snapshot of that commit, the
restart set added: replies that read but give no usable score, and keys in both languages). The cases:
tests/official_gedit_cases.py.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from bon.errors import BonError
from official_gedit_cases import GUESS, example_items, items, restart_items
from verifiers import _gedit_official
from verifiers.gedit import GEditVerifier
from grader_stubs import DownGrader, score_items

EXPECTED = json.loads((Path(__file__).parent / "official_gedit_expected.json").read_text())


def write_case_files(root: Path, cases: list[dict]) -> tuple[list[dict], Path]:
    """The items as `bon score` reads them (images on disk) and a replay file with their replies."""
    rows, lines = [], []
    for c in cases:
        w, h = c["size"]
        item = f"{c['key']}_{c['instruction_language']}"
        Image.new("RGB", (w, h), (200, 40, 40)).save(root / f"{item}_src.png")
        Image.new("RGB", (w + 13, h + 5), (40, 200, 40)).save(root / f"{item}.png")
        rows.append({k: v for k, v in c.items() if k not in ("size", "replies")}
                    | {"source_image": f"{item}_src.png", "edited_image": f"{item}.png"})
        for q, replies in c["replies"].items():
            for n, reply in enumerate(replies, 1):
                lines.append({"item": item, "question": q, "reply": reply, **({"attempt": n} if n < len(replies) else {})})
    (root / "replies.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return rows, root / "replies.jsonl"


@pytest.fixture(autouse=True)
def fixed_guess(monkeypatch):
    """The official guess is random.randint(0, 10); the harness fixed it at GUESS, so does this test."""
    monkeypatch.setattr(_gedit_official, "guess_score", lambda seed: GUESS)


def run(tmp_path: Path, cases: list[dict], **options):
    rows, replies = write_case_files(tmp_path, cases)
    return score_items(GEditVerifier(grader=f"replay:{replies}", **options), rows, tmp_path)


@pytest.fixture
def official_run(tmp_path):
    return run(tmp_path, items())


def test_expected_values_name_the_official_code():
    assert EXPECTED["repository"] == "stepfun-ai/Step1X-Edit" and EXPECTED["commit"] == "570eba6ebda0c45c013983a483afbf2fd12bfcbc"
    assert len(EXPECTED["main"]["items"]) == len(items()) >= 20
    assert EXPECTED["max_retries"] == _gedit_official.MAX_EVALUATIONS  # process_single_item's limit


def test_each_item_equals_the_official_scores(official_run):
    scored, _ = official_run
    for key, _, s in scored:
        want = EXPECTED["main"]["items"][key]
        assert (key, s.details["sc"], s.details["pq"], s.details["overall"]) == (key, want["sc"], want["pq"], want["overall"])
        assert s.details["attempts"] == max(want["calls"].values()), key  # re-asked as often as the official loop
        assert s.value == want["overall"] / 10


def test_replies_the_official_reader_reads(official_run):
    scored, _ = official_run
    by_key = {p.metadata["benchmark_id"]: s for _, p, s in scored}
    assert by_key["bare-list"].details["sc_scores"] == [6, 0]  # "[6, 0]" parses
    assert by_key["score-number"].details["pq_scores"] == [8]  # {"score": 8} parses
    assert by_key["guess"].details["guessed"] == ["sc"] and by_key["reask-both"].details["sc"] == 4  # both asked again


def test_aggregate_equals_the_official_statistics(official_run):
    _, agg = official_run
    assert official_languages(agg) == EXPECTED["main"]["languages"]
    assert agg["items"] == len(items()) and agg["failed"] == 0


def test_the_issue_example_category_means_then_their_mean(tmp_path):
    _, agg = run(tmp_path, example_items())
    assert agg["languages"]["en"]["overall"] == 5.0 == EXPECTED["example"]["languages"]["en"]["overall"]
    assert agg["languages"]["en"]["categories"]["color_alter"]["items"] == 3  # not the micro mean 3.5
    assert "ps_human" in agg["languages"]["en"]["categories_missing"]


def test_failure_policies(tmp_path):
    case = {**items()[0], "key": "never", "replies": {"sc": ["{not json at all"], "pq": ["{'score': 1}"]}}
    scored, agg = run(tmp_path, [case], on_failure="zero")
    s = scored[0][2]
    assert s.value == 0 and s.details["failed"] == ["sc", "pq"] and s.details["attempts"] == 3
    scored, agg = run(tmp_path, [case], on_failure="missing", max_attempts=2)
    s = scored[0][2]
    assert s.value is None and "sc reply unreadable after 2 attempts" in s.missing and agg["failed"] == 1
    scored, _ = run(tmp_path, [case])  # official: after max_attempts, the guess
    assert scored[0][2].details["guessed"] == ["sc", "pq"] and scored[0][2].value == GUESS / 10
    no_json = {**case, "replies": {"sc": ["no score here"], "pq": ["none"]}}
    scored, _ = run(tmp_path, [no_json], on_failure="zero")  # zero: no reply is ever guessed
    assert scored[0][2].value == 0 and "guessed" not in scored[0][2].details
    with pytest.raises(BonError, match="on_failure must be one of"):
        GEditVerifier(grader=f"replay:{tmp_path / 'replies.jsonl'}", on_failure="maybe")


def test_the_guess_is_seeded_by_the_item(monkeypatch):
    monkeypatch.undo()
    values = {_gedit_official.guess_score(f"k{i}|g/0|sc") for i in range(40)}
    assert values <= set(range(11)) and len(values) > 3
    assert _gedit_official.guess_score("k1|g/0|sc") == _gedit_official.guess_score("k1|g/0|sc")


def test_a_reply_file_that_misses_a_question_is_a_one_line_error(tmp_path):
    case = {**items()[0], "replies": {"sc": [json.dumps({"score": [5, 5]})]}}
    rows, replies = write_case_files(tmp_path, [case])
    v = GEditVerifier(grader=f"replay:{replies}")
    prompt, cand = v.read_item(rows[0], tmp_path)
    with pytest.raises(BonError) as err:
        v.score(prompt, cand)
    assert "\n" not in str(err.value) and "item 'plain-json_en'" in str(err.value) and "question 'pq'" in str(err.value)


def test_bad_items_are_one_line_errors(tmp_path):
    rows, replies = write_case_files(tmp_path, items()[:1])
    v = GEditVerifier(grader=f"replay:{replies}")
    with pytest.raises(BonError, match="GEdit item plain-json: field task_type is missing"):
        v.read_item({**rows[0], "task_type": None}, tmp_path)
    with pytest.raises(BonError, match="GEdit item plain-json: edited_image nope.png not found"):
        v.read_item({**rows[0], "edited_image": "nope.png"}, tmp_path)
    assert v.item_id(rows[0]) == "plain-json_en"
    with pytest.raises(BonError, match="needs prompts_dir"):
        GEditVerifier(grader={"backend": "openai", "model": "m", "api_key_env": None, "preflight": False})
    with pytest.raises(BonError, match="metric: official"):
        GEditVerifier(grader=f"replay:{replies}", metric="bon")


def fake_checkout(root: Path) -> Path:
    """A stand-in for Step1X-Edit's GEdit-Bench/viescore/vie_prompts.py (our own words, same names)."""
    folder = root / "GEdit-Bench" / "viescore"
    folder.mkdir(parents=True)
    (folder / "vie_prompts.py").write_text(
        '_context_no_delimit = """You rate edits."""\n'
        '_prompts_0shot_two_image_edit_rule = """Two images: before and after."""\n'
        '_prompts_0shot_tie_rule_SC = """Rate 0-10 how well this was done: <instruction>"""\n'
        '_prompts_0shot_rule_PQ = """Rate 0-10 how natural the image looks."""\n')
    return root


def test_the_api_request_is_the_official_one(tmp_path, monkeypatch):
    """Text first, the edited image resized to the source's size, JPEG, max_tokens 1400, no temperature:
    the same body keys, part kinds and image sizes the official client sent in the harness."""
    from openai_server import OpenAIServer

    monkeypatch.setenv("BON_TEST_GEDIT_KEY", "sk-test")
    rows, _ = write_case_files(tmp_path, items()[:1])
    server = OpenAIServer(reply=lambda body: '{"score": [7, 8], "reasoning": "ok"}')
    try:
        v = GEditVerifier(prompts_dir=str(fake_checkout(tmp_path / "Step1X-Edit")),
                          grader={"backend": "openai", "model": "gpt-4.1", "base_url": server.url, "api_key_env": "BON_TEST_GEDIT_KEY"})
        s = v.score(*v.read_item(rows[0], tmp_path))
    finally:
        server.close()
    assert s.details["sc"] == 7 and s.details["pq"] == 7
    official = EXPECTED["requests"]
    for body in server.requests:
        content = body["messages"][0]["content"]
        question = "sc" if len(content) == 3 else "pq"
        assert sorted(body) == official[question]["body_keys"] and body["max_tokens"] == 1400
        assert [p["type"] for p in content] == official[question]["kinds"]
        urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
        assert [u.split(";", 1)[0] for u in urls] == official[question]["image_mime"]
        sizes = [list(Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1]))).size) for u in urls]
        assert sizes == official[question]["image_sizes"]
        digests = [hashlib.sha256(base64.b64decode(u.split(",", 1)[1])).hexdigest() for u in urls]
        assert digests == official[question]["image_sha256"]  # the very JPEG bytes the official client sent
    sc_text = next(b for b in server.requests if len(b["messages"][0]["content"]) == 3)["messages"][0]["content"][0]["text"]
    assert sc_text == "You rate edits.\nTwo images: before and after.\nRate 0-10 how well this was done: " + rows[0]["instruction"]


def test_a_transient_grader_failure_is_a_transient_missing_score(tmp_path):
    """A timeout or 5xx is retried on a rerun, whatever on_failure says; it never becomes a guess or a 0."""
    Down = DownGrader

    rows, _ = write_case_files(tmp_path, items()[:1])
    v = GEditVerifier(grader=Down(), prompts_dir=str(fake_checkout(tmp_path / "Step1X-Edit")), on_failure="zero")
    s = v.score(*v.read_item(rows[0], tmp_path))
    assert s.value is None and s.transient and "timed out" in s.missing


def official_languages(agg: dict) -> dict:
    """The aggregate's per-language numbers in the official statistics' fields (no item counts, no missing list)."""
    out = {}
    for lang, got in agg["languages"].items():
        parts = {"main": dict(got), "intersection": dict(got["intersection"])}
        for part in parts.values():
            part["categories"] = {c: {k: v for k, v in n.items() if k != "items"} for c, n in part["categories"].items()}
            part.pop("categories_missing")
        out[lang] = {**parts["main"], "intersection": parts["intersection"]}
    return out


def cli_score(tmp_path: Path, monkeypatch, capsys, cases: list[dict]) -> tuple[list[dict], list[dict], dict]:
    """`bon score --verifier gedit` on the cases from a folder beside the working one: the items, the
    out-file's lines and the statistics printed last."""
    from bon.cli import main

    folder = tmp_path / "bench"
    folder.mkdir()
    rows, replies = write_case_files(folder, cases)
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BON_QUIET", "1")
    rc = main(["score", "--verifier", "gedit", "--verifier-option", "grader=replay:bench/replies.jsonl",
               "--items", "bench/items.jsonl", "--out-file", "out.jsonl"])
    shown = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    return rows, [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()], json.loads(shown[-1])


def test_bon_score_through_the_cli_gives_the_official_numbers(tmp_path, monkeypatch, capsys):
    """`bon score --verifier gedit --verifier-option grader=replay:FILE`: one line per item (key, SC, PQ,
    overall as the official code scores them) and the official statistics as the last line printed; the
    images are found next to the items file, whatever the working folder."""
    rows, lines, last = cli_score(tmp_path, monkeypatch, capsys, items())
    assert [r["id"] for r in lines] == [f"{r['key']}_{r['instruction_language']}" for r in rows]
    for r in lines:
        want = EXPECTED["main"]["items"][r["id"]]
        assert (r["sc"], r["pq"], r["overall"], r["score"]) == (want["sc"], want["pq"], want["overall"], want["overall"] / 10)
    assert official_languages(last) == EXPECTED["main"]["languages"] and last["failed"] == 0


# --- a reply that reads but gives no usable score; one key in both languages ---------------------------


@pytest.fixture
def restarts_run(tmp_path):
    return run(tmp_path, restart_items())


def test_a_reply_without_a_usable_score_starts_a_new_evaluation(restarts_run):
    """The official evaluate raises on it and process_single_item evaluates again, its tries afresh: the
    next replies are read without a guess; every item equals the official run, asked as often."""
    scored, _ = restarts_run
    want_items = EXPECTED["restarts"]["items"]
    assert sorted(k for k, _, _ in scored) == sorted(want_items)
    for key, _, s in scored:
        want = want_items[key]
        assert s.details["attempts"] == max(want["calls"].values()), key
        if want.get("skipped"):
            continue
        assert (key, s.details["sc"], s.details["pq"], s.details["overall"]) == (key, want["sc"], want["pq"], want["overall"])
        assert s.value == want["overall"] / 10
    by = {k: s for k, _, s in scored}
    assert by["repaired-no-score_en"].details["evaluations"] == 2 and "guessed" not in by["repaired-no-score_en"].details
    assert by["twice-restarted_en"].details["evaluations"] == 3
    assert by["unusable-while-unread_en"].details["evaluations"] == 1  # SC unread: PQ's reply is asked again anyway
    assert by["false-json_cn"].details["guessed"] == ["sc"] and by["restart-then-guess_cn"].details["guessed"] == ["sc"]


def test_an_item_never_scored_after_the_official_limit_is_left_out(restarts_run):
    scored, agg = restarts_run
    never = next(s for k, _, s in scored if k == "never-usable_en")
    assert EXPECTED["restarts"]["items"]["never-usable_en"]["skipped"]
    assert never.value is None and never.details["evaluations"] == EXPECTED["max_retries"] == 10000
    assert "no usable score in 10000 evaluations" in never.missing and "\n" not in never.missing
    assert official_languages(agg) == EXPECTED["restarts"]["languages"] and agg["failed"] == 1


def test_the_evaluation_limit_and_the_policies(tmp_path):
    never = [c for c in restart_items() if c["key"] == "never-usable"]
    s = run(tmp_path, never, max_evaluations=3)[0][0][2]
    assert s.value is None and (s.details["evaluations"], s.details["attempts"]) == (3, 3)
    s = run(tmp_path, never, max_evaluations=3, on_failure="zero")[0][0][2]
    assert s.value == 0 and s.details["failed"] == ["sc", "pq"]
    with pytest.raises(BonError, match="max_evaluations must be at least 1"):
        GEditVerifier(grader=f"replay:{tmp_path / 'replies.jsonl'}", max_evaluations=0)


def test_one_key_in_both_languages_through_bon_score(tmp_path, monkeypatch, capsys):
    """One items file holds a key in both languages (two items, ids `<key>_<language>`), with the re-ask
    cases: the out-file and the statistics equal the official run, item by item and per language."""
    rows, lines, last = cli_score(tmp_path, monkeypatch, capsys, restart_items())
    assert sum(r["key"] == "shared-key" for r in rows) == 2
    want_items = EXPECTED["restarts"]["items"]
    assert [r["id"] for r in lines] == [f"{r['key']}_{r['instruction_language']}" for r in rows]
    for r in lines:
        want = want_items[r["id"]]
        if want.get("skipped"):
            assert r["score"] is None and "no usable score" in r["missing"]
            continue
        assert (r["id"], r["sc"], r["pq"], r["overall"], r["score"]) == (r["id"], want["sc"], want["pq"], want["overall"],
                                                                          want["overall"] / 10)
        assert (r["key"], r["language"]) == tuple(r["id"].rsplit("_", 1))
    assert official_languages(last) == EXPECTED["restarts"]["languages"] and last["failed"] == 1
