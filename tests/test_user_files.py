"""Files a user hands in are never trusted (issue 35): `bon score`'s out-file, the images an items file names,
secrets in what `bon score` writes, stage files `bon.load_run` reads, accuracy tables and the writer lock.

Each test here failed on main at 2d6e540 (before the fixes): an emptied or overwritten file, a traceback,
an image read from outside the items' folder, a key written unmasked, a silently dropped score, an
out-of-range accuracy that entered the correlation, or a file outside the run folder overwritten.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image

from bon.cli import main
from bon.errors import BonError
from official_isg_cases import ALL_YES, ANSWER, case as isg_case

SECRET = "sk-abcdefghij1234567890"


def png(path: Path, colour=(120, 80, 40)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 12), colour).save(path)
    return path


def isg_bench(folder: Path, ids: list[str], answered: list[str] | None = None) -> tuple[Path, Path]:
    """ISG items (with their images) and a replay file answering the items in ``answered`` (default: all)."""
    items = [isg_case(i, ANSWER, ALL_YES)["item"] for i in ids]
    for item in items:
        for part in item["Query"] + item["Golden"] + item["output"]:
            if part["type"] == "image":
                png(folder / part["content"])
    (folder / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    replies = [{"item": i, "question": q, "reply": r} for i in (answered or ids) for q, r in ALL_YES.items()]
    (folder / "replies.jsonl").write_text("".join(json.dumps(x) + "\n" for x in replies))
    return folder / "items.jsonl", folder / "replies.jsonl"


def score(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["score", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("BON_QUIET", "1")


# --- bon score --out-file --------------------------------------------------------------------------------


def test_a_rerun_that_fails_keeps_the_earlier_out_file(tmp_path, capsys):
    items, replies = isg_bench(tmp_path, ["a", "b", "c"], answered=["a", "b"])
    two = tmp_path / "two.jsonl"
    two.write_text("".join(line + "\n" for line in items.read_text().splitlines()[:2]))
    out = tmp_path / "out.jsonl"
    rc, _, _ = score(capsys, "--verifier", "isg", "--verifier-option", f"grader=replay:{replies}", "--items", str(two), "--out-file", str(out))
    assert rc == 0 and len(out.read_text().splitlines()) == 2
    before = out.read_text()
    lines = items.read_text().splitlines()
    items.write_text("".join(line + "\n" for line in [lines[2], *lines[:2]]))  # the unanswered item first
    rc, _, err = score(capsys, "--verifier", "isg", "--verifier-option", f"grader=replay:{replies}", "--items", str(items), "--out-file", str(out))
    assert rc == 2 and "c" in err and "Traceback" not in err
    assert out.read_text() == before  # the two scored lines are still there (main emptied the file)


@pytest.mark.parametrize("which", ["items", "replies"])
def test_an_out_file_naming_an_input_is_refused(tmp_path, capsys, which):
    items, replies = isg_bench(tmp_path, ["a"])
    target = {"items": items, "replies": replies}[which]
    kept = target.read_bytes()
    rc, _, err = score(capsys, "--verifier", "isg", "--verifier-option", f"grader=replay:{replies}", "--items", str(items),
                       "--out-file", str(target))
    assert rc == 2 and "--out-file" in err and "input" in err and len(err.strip().splitlines()) == 1
    assert target.read_bytes() == kept


def test_a_damaged_out_file_line_is_scored_again_with_a_note(tmp_path, capsys):
    items, replies = isg_bench(tmp_path, ["a", "b"])
    out = tmp_path / "out.jsonl"
    args = ("--verifier", "isg", "--verifier-option", f"grader=replay:{replies}", "--items", str(items), "--out-file", str(out))
    assert score(capsys, *args)[0] == 0
    good = out.read_text().splitlines()
    first = json.loads(good[0])
    out.write_text(json.dumps({**first, "input_sha256": ["x"]}) + "\n" + good[1] + "\n")
    rc, _, err = score(capsys, *args)
    assert rc == 0 and "Traceback" not in err and "damaged" in err and "line 1" in err
    assert out.read_text().splitlines() == good


# --- one path rule for the images an items file names ----------------------------------------------------


def gedit_item(folder: Path, edited: str) -> dict:
    png(folder / "src.png")
    return {"key": "k1", "task_type": "color_alter", "instruction": "Make it blue.", "instruction_language": "en",
            "Intersection_exist": True, "source_image": "src.png", "edited_image": edited}


def isg_item(folder: Path, image: str) -> dict:
    item = isg_case("a", ANSWER, ALL_YES)["item"]
    for part in item["Query"] + item["Golden"] + item["output"]:
        if part["type"] == "image":
            png(folder / part["content"])
    item["output"][1]["content"] = image
    return item


def emma_item(folder: Path, image: str) -> dict:
    return {"pid": "e1", "question": "Which?", "options": ["x", "y"], "answer": "A", "type": "Multiple Choice",
            "image_1": image, "response": "A"}


def genai_item(folder: Path, image: str) -> dict:
    return {"id": "00001", "prompt": "a red cube", "basic_skills": "['Attribute']", "advanced_skills": "[]", "image": image}


ITEMS = {"gedit": (gedit_item, "edited_image"), "isg": (isg_item, "output[1]"), "emma": (emma_item, "image_1"),
         "vqascore": (genai_item, "image")}
OPTIONS = {"gedit": ["--verifier-option", "grader=replay:replies.jsonl"], "isg": ["--verifier-option", "grader=replay:replies.jsonl"],
           "emma": [], "vqascore": ["--verifier-option", "grader={backend: openai, model: m, base_url: 'http://127.0.0.1:9/v1', api_key_env: null, preflight: false}"]}


def outside_image(tmp_path: Path, how: str) -> str:
    secret = png(tmp_path / "private" / "x.png", (1, 2, 3))
    if how == "dotdot":
        return "../private/x.png"
    if how == "absolute":
        return str(secret)
    (tmp_path / "bench" / "link.png").symlink_to(secret)
    return "link.png"


@pytest.mark.parametrize("verifier", sorted(ITEMS))
@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_an_image_outside_the_items_folder_is_refused(tmp_path, capsys, monkeypatch, verifier, how):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "replies.jsonl").write_text(json.dumps({"item": "k1_en", "question": "sc", "reply": "[1, 1]"}) + "\n")
    make, field = ITEMS[verifier]
    image = outside_image(tmp_path, how)
    (bench / "items.jsonl").write_text(json.dumps(make(bench, image)) + "\n")
    monkeypatch.chdir(bench)
    rc, _, err = score(capsys, "--verifier", verifier, *OPTIONS[verifier], "--items", "items.jsonl")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "items.jsonl:1" in err and field in err and ("escapes its folder" in err or "leads out of" in err), err


def test_images_kept_elsewhere_are_named_with_images_root(tmp_path, capsys):
    items, replies = isg_bench(tmp_path / "images", ["a"])
    moved = tmp_path / "lists" / "items.jsonl"
    moved.parent.mkdir()
    items.rename(moved)
    args = ["--verifier", "isg", "--verifier-option", f"grader=replay:{replies}", "--items", str(moved)]
    rc, _, err = score(capsys, *args)
    assert rc == 2 and "not found under" in err
    rc, out, _ = score(capsys, *args, "--images-root", str(tmp_path / "images"))
    assert rc == 0 and json.loads(out.strip().splitlines()[-1])["items"] == 1


def test_isg_never_reads_an_image_from_the_working_folder(tmp_path, capsys, monkeypatch):
    items, replies = isg_bench(tmp_path / "work", ["a"])
    bench = tmp_path / "bench"
    bench.mkdir()
    items.rename(bench / "items.jsonl")  # the images stay in the working folder only
    monkeypatch.chdir(tmp_path / "work")
    rc, _, err = score(capsys, "--verifier", "isg", "--verifier-option", f"grader=replay:{replies}", "--items", str(bench / "items.jsonl"))
    assert rc == 2 and "not found under" in err and str(bench) in err


# --- secrets -----------------------------------------------------------------------------------------------


def test_a_key_inside_a_replay_path_is_masked_in_the_out_file(tmp_path, capsys):
    items, replies = isg_bench(tmp_path / f"api_key={SECRET}", ["a"])
    out = tmp_path / "out.jsonl"
    rc, printed, err = score(capsys, "--verifier", "isg", "--verifier-option", f"grader=replay:{replies}", "--items", str(items),
                             "--out-file", str(out), "--json", str(tmp_path / "agg.json"))
    assert rc == 0
    written = out.read_text() + (tmp_path / "agg.json").read_text() + printed + err
    assert SECRET not in written and "grader" in out.read_text()


# --- bon.load_run: one rule for every stage file ------------------------------------------------------------


@pytest.mark.parametrize("stage", ["scores.jsonl", "picks.jsonl", "candidates/g1/candidates.jsonl"])
def test_a_torn_last_line_of_a_stage_file_is_refused(tmp_path, stage):
    from analysis_run import make_run
    from bon import load_run

    root = make_run(tmp_path / "run", qualities=(0.6, 0.9), prompts=2, n=2, tasks=("t2i",), generators=("g1",), pairs=4, images=False)
    path = root / stage
    text = path.read_text()
    path.write_text(text[: text.rstrip("\n").rfind("\n") + 1] + text.rstrip("\n").rsplit("\n", 1)[1][:25])
    run = load_run(root)
    with pytest.raises(BonError, match=f"{path.name}:"):
        run.scores, run.picks, run.candidates


# --- accuracy tables ------------------------------------------------------------------------------------------

SCORES_CSV = "task,generator,judge,bon_score\n" + "".join(f"t2i,g,{j},{s}\n" for j, s in (("GPT-4o", 0.5), ("GPT-5", 0.6), ("Gemini 2.5 Pro", 0.7)))
GOOD = [("GPT-4o", "t2i", "60"), ("GPT-5", "t2i", "70"), ("Gemini 2.5 Pro", "t2i", "75")]


@pytest.mark.parametrize("row, field", [
    (("GPT-5", "t2i", "150"), "accuracy"), (("GPT-5", "t2i", "-0.5"), "accuracy"), (("GPT-5", "t2i", "inf"), "accuracy"),
    (("GPT-5", "t2i", "high"), "accuracy"), (("GPT-4o", "t2i", "61"), "appears twice"), (("", "t2i", "61"), "judge"),
])
def test_a_bad_accuracy_table_is_one_line_naming_file_row_and_field(tmp_path, capsys, row, field):
    scores = tmp_path / "scores.csv"
    scores.write_text(SCORES_CSV)
    table = tmp_path / "acc.csv"
    rows = GOOD[:1] + [row] + GOOD[2:] if field != "appears twice" else GOOD + [row]
    table.write_text("judge,task,accuracy\n" + "".join(",".join(r) + "\n" for r in rows))
    rc = main(["figure", "--scores", str(scores), "--accuracies", str(table), "--out", str(tmp_path / "fig")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "acc.csv" in err and "row " in err and field in err, err


def test_a_good_accuracy_table_draws_the_figure(tmp_path, capsys):
    scores = tmp_path / "scores.csv"
    scores.write_text(SCORES_CSV)
    table = tmp_path / "acc.csv"
    table.write_text("judge,task,accuracy,n_pairs\n" + "".join(",".join(r) + ",1000\n" for r in GOOD))
    assert main(["figure", "--scores", str(scores), "--accuracies", str(table), "--out", str(tmp_path / "fig")]) == 0


@pytest.mark.parametrize("accuracy", [150, -0.5, "70", True])
def test_an_accuracy_json_out_of_range_is_refused(tmp_path, accuracy):
    from analysis.statistics import json_judge_axis

    path = tmp_path / "gpt.json"
    path.write_text(json.dumps({"tasks": {"image": {"accuracy": accuracy, "evaluated_pairs": 10, "judgements": 20}}}))
    with pytest.raises(BonError, match="gpt.json: tasks.image.accuracy"):
        json_judge_axis({"GPT": path})


def test_a_config_accuracies_table_is_checked_too(tmp_path):
    from analysis.statistics import accuracy_axis

    table = tmp_path / "acc.csv"
    table.write_text("judge,task,accuracy\nGPT-5,t2i,nan\nGPT-4o,t2i,1e400\n")
    with pytest.raises(BonError, match="acc.csv: row 2: field accuracy"):
        accuracy_axis(str(table))
    assert accuracy_axis("published").table["accuracy"].between(0, 100).all()


# --- the writer lock --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_the_writer_lock_never_writes_through_a_link(tmp_path, kind):
    from bon.runlock import LOCK_NAME, writer_lock

    run = tmp_path / "run"
    run.mkdir()
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    (os.symlink if kind == "symlink" else os.link)(victim, run / LOCK_NAME)
    with writer_lock(run, "bon report"):
        assert not (run / LOCK_NAME).is_symlink() and (run / LOCK_NAME).stat().st_ino != victim.stat().st_ino
    assert victim.read_text() == "keep me\n" and not victim.is_symlink()


def test_the_quick_pick_check_accepts_only_what_the_full_check_accepts():
    """check_pick passes a plain picks line the quick way (_plain_pick); a damaged line goes to the checks
    that name what is wrong: on lines damaged every way, both give the same verdict."""
    import random

    from bon import runfolder

    good = {"judge": "j", "generator": "g", "prompt_id": "p", "task": "t2i", "index": 2,
            "matches": [[0, 1, 1, "votes"], [2, 1, 2, "votes"], [3, 2, None, "coin"]]}
    odd = [None, True, False, -1, 0, 1, 2, 3, 4, 8, 2.0, "2", [2], [], [1, 2], [1], {}]
    rng = random.Random(0)
    for trial in range(400):
        rec = json.loads(json.dumps(good))
        for _ in range(rng.randint(0, 2)):
            where = rng.choice(["judge", "index", "matches", "match", "winner", "a"])
            if where in ("match", "winner", "a"):
                k, matches = rng.randrange(3), rec["matches"]
                if not isinstance(matches, list) or len(matches) <= k:
                    continue
                if where == "match":
                    matches[k] = rng.choice(odd)
                elif isinstance(matches[k], list) and len(matches[k]) > 2:
                    matches[k][2 if where == "winner" else 0] = rng.choice(odd)
            else:
                rec[where] = rng.choice(odd)
        n = rng.choice([None, 4, 3])
        verdicts = []
        for quick in (runfolder._plain_pick, lambda rec, n: False):
            real, runfolder._plain_pick = runfolder._plain_pick, quick
            try:
                runfolder.check_pick(rec, "picks.jsonl:1", n)
                verdicts.append("ok")
            except BonError as exc:
                verdicts.append(str(exc))
            finally:
                runfolder._plain_pick = real
        assert verdicts[0] == verdicts[1], (rec, n, verdicts)
    assert runfolder._plain_pick(good, 4) and not runfolder._plain_pick(good, 3)
