"""MMRB2 format and official scorer semantics, on tiny hand-made files (plus the real files when present)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from bon.mmrb2 import (
    Pair,
    accuracy,
    evaluate,
    find_task_file,
    load_judgments,
    load_pairs,
    overall,
    write_judgments,
    write_pairs,
)
from bon.errors import BonError
from bon.tasks import SCORER_NAMES, TASKS, scorer_task


def pair(pid: str, chosen: str = "A", img_a: str = "images/a.png", **extra) -> dict:
    rec = {
        "id": pid,
        "prompt_source": "unit",
        "prompt_metadata": {"k": 1},
        "response_a": {"model_name": "gen-a", "response_content": [["image", img_a]]},
        "response_b": {"model_name": "gen-b", "response_content": [["text", "hi"], ["image", "images/b.png"]]},
        "chosen": chosen,
        "human_annotations": [5, 6, 5],
    }
    rec.update(extra)
    return rec


def dump(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def j(*letters: str) -> list[dict]:
    return [{"judgement": x, "evaluator": "unit", "metadata": {}} for x in letters]


# --- loading ------------------------------------------------------------------------------------


def test_load_official_and_variant_keys(tmp_path: Path) -> None:
    variant = {"pair_id": "p2", "response_a": [["text", "x"]], "response_b": [["text", "y"]], "model_a": "m1",
               "model_b": "m2", "chosen": "B", "prompt_content": [["text", "draw"], ["image", "in/1.png"]]}
    path = dump(tmp_path / "t2i.json", {"pairs": [pair("p1"), variant]})
    p1, p2 = load_pairs(path)
    assert (p1.id, p1.model_a, p1.model_b, p1.chosen) == ("p1", "gen-a", "gen-b", "A")
    assert p1.response_b == [["text", "hi"], ["image", "images/b.png"]]
    assert p1.prompt_content is None and p1.human_annotations == [5, 6, 5]
    assert (p2.id, p2.model_a, p2.response_a, p2.chosen) == ("p2", "m1", [["text", "x"]], "B")
    assert p2.prompt_content[1] == ["image", "in/1.png"]


def test_write_pairs_round_trip_is_atomic(tmp_path: Path) -> None:
    src = load_pairs(dump(tmp_path / "in.json", {"pairs": [pair("p1", extra_key=3), pair("p2", "B")]}))
    out = tmp_path / "sub" / "edit.json"
    write_pairs(out, [src[0], src[1].to_dict()])
    again = load_pairs(out)
    assert [p.to_dict() for p in again] == [p.to_dict() for p in src]
    assert again[0].extra == {"extra_key": 3}
    assert json.loads(out.read_text())["pairs"][0]["response_a"]["model_name"] == "gen-a"
    assert [p.name for p in out.parent.iterdir()] == ["edit.json"]  # no temp file left behind


def test_find_task_file(tmp_path: Path) -> None:
    dump(tmp_path / "t2i_response_only.json", {"pairs": []})
    assert find_task_file(tmp_path, "t2i").name == "t2i_response_only.json"
    assert find_task_file(tmp_path, "image").name == "t2i_response_only.json"
    dump(tmp_path / "t2i.json", {"pairs": []})
    assert find_task_file(tmp_path, "t2i").name == "t2i.json"
    dump(tmp_path / "edit_mini.json", {"pairs": []})
    assert find_task_file(tmp_path, "edit").name == "edit_mini.json"
    with pytest.raises(BonError, match=str(tmp_path)):
        find_task_file(tmp_path, "reasoning")
    with pytest.raises(BonError, match="unknown MMRB2 task"):
        scorer_task("video")
    assert SCORER_NAMES == ("image", "edit", "interleaved", "reasoning")


BAD_PAIRS = {
    "not_json": ("{not json", None),
    "no_pairs": ({"items": []}, None),
    "pairs_not_list": ({"pairs": {"p1": {}}}, None),
    "missing_chosen": ({"pairs": [{k: v for k, v in pair("p1").items() if k != "chosen"}]}, "p1"),
    "bad_chosen": ({"pairs": [pair("p1", chosen="C")]}, "p1"),
    "duplicate": ({"pairs": [pair("p1"), pair("p2"), pair("p1")]}, "p1"),
    "absolute_image": ({"pairs": [pair("p1", img_a="/etc/passwd")]}, "p1"),
    "escaping_image": ({"pairs": [pair("p1", img_a="images/../../secret.png")]}, "p1"),
    "windows_image": ({"pairs": [pair("p1", img_a="C:\\x\\a.png")]}, "p1"),
    "prompt_escape": ({"pairs": [pair("p1", prompt_content=[["image", "../in.png"]])]}, "p1"),
    "bad_kind": ({"pairs": [pair("p1", prompt_content=[["video", "a.mp4"]])]}, "p1"),
    "no_id": ({"pairs": [{k: v for k, v in pair("p1").items() if k != "id"}]}, "#0"),
    "missing_response": ({"pairs": [{k: v for k, v in pair("p1").items() if k != "response_b"}]}, "p1"),
}


@pytest.mark.parametrize("case", sorted(BAD_PAIRS))
def test_pair_validation_errors_name_file_and_pair(tmp_path: Path, case: str) -> None:
    content, pid = BAD_PAIRS[case]
    path = tmp_path / f"{case}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    with pytest.raises(BonError) as err:
        load_pairs(path)
    msg = str(err.value)
    assert str(path) in msg and "\n" not in msg
    if pid:
        assert pid in msg


def test_missing_file_is_bon_error(tmp_path: Path) -> None:
    with pytest.raises(BonError, match="not found"):
        load_pairs(tmp_path / "nope.json")


BAD_JUDGMENTS = {
    "top_list": ([], None),
    "entry_not_object": ({"p7": ["A", "B"]}, "p7"),
    "forward_not_list": ({"p7": {"forward": "A", "reverse": []}}, "p7"),
    "sample_not_object": ({"p7": {"forward": ["A"], "reverse": []}}, "p7"),
    "judgement_not_string": ({"p7": {"forward": [{"judgement": 1}], "reverse": []}}, "p7"),
}


@pytest.mark.parametrize("case", sorted(BAD_JUDGMENTS))
def test_judgment_validation_errors_name_file_and_pair(tmp_path: Path, case: str) -> None:
    content, pid = BAD_JUDGMENTS[case]
    path = dump(tmp_path / f"{case}.json", content)
    with pytest.raises(BonError) as err:
        load_judgments(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    if pid:
        assert pid in str(err.value)


def test_judgments_round_trip(tmp_path: Path) -> None:
    data = {"p1": {"forward": j("A"), "reverse": j("B")}, "p2": {"forward": j(""), "reverse": []}}
    write_judgments(tmp_path / "j.json", data)
    assert load_judgments(tmp_path / "j.json") == data
    # a missing direction or judgement key loads (the scorer simply has nothing to count)
    assert load_judgments(dump(tmp_path / "k.json", {"p1": {"forward": [{}]}}))["p1"] == {"forward": [{}]}


# --- scoring ------------------------------------------------------------------------------------


def bench(tmp_path: Path, chosen: dict[str, str]) -> list[Pair]:
    return load_pairs(dump(tmp_path / "bench.json", {"pairs": [pair(pid, c) for pid, c in chosen.items()]}))


def test_accuracy_official_semantics(tmp_path: Path) -> None:
    pairs = bench(tmp_path, {"p1": "A", "p2": "A", "p3": "A", "p4": "A"})
    preds = {
        "p1": {"forward": j("A"), "reverse": j("B")},  # both right (reverse "B" = original A)
        # p2 absent: left out of the denominator
        "p3": {"forward": j(""), "reverse": j("A")},  # empty forward skipped; reverse "A" = original B: wrong
        "p4": {"forward": j("B", "A"), "reverse": j("B", "A")},  # only first samples: wrong, right
        "zzz": {"forward": j("A"), "reverse": j("B")},  # not in the benchmark
    }
    r = accuracy(pairs, preds)
    assert r["correct"] == 3 and r["judgements"] == 5
    assert r["accuracy"] == pytest.approx(60.0)
    assert (r["total_pairs"], r["evaluated_pairs"], r["missing_pairs"]) == (4, 3, 1)
    assert r["unknown_ids"] == 1 and r["skipped_judgements"] == 1


def test_reverse_is_flipped(tmp_path: Path) -> None:
    pairs = bench(tmp_path, {"p1": "B"})
    assert accuracy(pairs, {"p1": {"forward": [], "reverse": j("A")}})["accuracy"] == 100.0
    assert accuracy(pairs, {"p1": {"forward": [], "reverse": j("B")}})["accuracy"] == 0.0


def test_non_letter_answers_count_as_wrong_like_the_official_scorer(tmp_path: Path) -> None:
    pairs = bench(tmp_path, {"p1": "A"})
    r = accuracy(pairs, {"p1": {"forward": j("tie"), "reverse": [{"judgement": None}]}})
    assert (r["judgements"], r["correct"], r["invalid_judgements"], r["skipped_judgements"]) == (1, 0, 1, 1)


def test_nothing_counted_is_nan(tmp_path: Path) -> None:
    r = accuracy(bench(tmp_path, {"p1": "A"}), {})
    assert math.isnan(r["accuracy"]) and r["missing_pairs"] == 1


def test_overall_is_micro_not_macro(tmp_path: Path) -> None:
    small = accuracy(bench(tmp_path, {"p1": "A"}), {"p1": {"forward": j("A"), "reverse": []}})  # 1/1
    big = accuracy(bench(tmp_path, {"q1": "A", "q2": "A"}),
                   {"q1": {"forward": j("A"), "reverse": j("A")}, "q2": {"forward": j("B"), "reverse": j("A")}})  # 1/4
    o = overall({"image": small, "edit": big})
    assert o["accuracy"] == pytest.approx(40.0) and o["macro_accuracy"] == pytest.approx(62.5)
    assert (o["correct"], o["judgements"], o["tasks"]) == (2, 5, 2)
    assert overall([small, big])["accuracy"] == o["accuracy"]


def test_evaluate_folder(tmp_path: Path) -> None:
    dump(tmp_path / "edit_response_only.json", {"pairs": [pair("e1", "B")]})
    dump(tmp_path / "t2i.json", {"pairs": [pair("t1", "A")]})
    preds = {"edit": dump(tmp_path / "pe.json", {"e1": {"forward": j("B"), "reverse": j("A")}}),
             "t2i": dump(tmp_path / "pt.json", {"t1": {"forward": j("B"), "reverse": j("B")}})}
    r = evaluate(tmp_path, preds)
    assert list(r) == ["image", "edit", "overall"]
    assert r["edit"]["accuracy"] == 100.0 and r["image"]["accuracy"] == 50.0 and r["overall"]["accuracy"] == 75.0


# --- the real files -----------------------------------------------------------------------------


def shared_mmrb2() -> Path | None:
    """The reference folder: ``$BON_MMRB2_DIR``, ``shared/`` beside the checkout (CI) or inside it."""
    here = Path(__file__).resolve()
    candidates = [Path(os.environ["BON_MMRB2_DIR"])] if os.environ.get("BON_MMRB2_DIR") else []
    candidates += [here.parents[2] / "shared" / "mmrb2", here.parents[1] / "shared" / "mmrb2"]
    return next((c for c in candidates if (c / "sample_task1_image.json").is_file()), None)


def test_official_sample_judgements_reproduce_readme_numbers() -> None:
    folder = shared_mmrb2()
    if folder is None:
        pytest.skip("shared/mmrb2 reference files not present")
    samples = {t.scorer: t.sample_file for t in TASKS}
    r = evaluate(folder, {task: folder / name for task, name in samples.items()})
    got = {t: round(r[t]["accuracy"], 2) for t in samples}
    # Per-task and overall figures printed in the official MMRB2 README for these sample files.
    assert got == {"image": 53.2, "edit": 55.5, "interleaved": 57.5, "reasoning": 47.5}
    assert r["overall"]["accuracy"] == pytest.approx(53.425)
    for t in samples:
        assert (r[t]["total_pairs"], r[t]["missing_pairs"], r[t]["unknown_ids"]) == (1000, 0, 0)


def test_judgment_files_follow_the_umask(tmp_path):
    """Official judgment files go through the one atomic writer: readable by the group and others on a
    shared cluster (mode from the umask), never a private 0600 temporary file renamed into place."""
    old = os.umask(0o022)
    try:
        write_judgments(tmp_path / "j.json", {"p1": {"forward": [], "reverse": []}})
    finally:
        os.umask(old)
    assert (tmp_path / "j.json").stat().st_mode & 0o777 == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name != "j.json"]  # no temporary file left behind
