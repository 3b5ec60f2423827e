"""MMRB2 diagnostics on tiny hand-made files whose numbers are worked out by hand in the comments
(plus a run over the real release when it is present)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from analysis.diagnostics import diagnose, majority_voting, write_diagnostics
from bon.mmrb2 import accuracy, load_judgments, load_pairs
from bon.errors import BonError

IMG = [["image", "x.png"]]
TXT = [["text", "an answer"]]


def gen_pair(pid, source, model_a, model_b, chosen, ratings, category=None) -> dict:
    meta = {"id": pid} | ({"category": category} if category else {})
    return {"id": pid, "prompt_source": source, "prompt_metadata": meta,
            "response_a": {"model_name": model_a, "response_content": IMG},
            "response_b": {"model_name": model_b, "response_content": IMG},
            "chosen": chosen, "human_annotations": ratings}


def reasoning_pair(pid, resp_a, resp_b, chosen, grades_a, grades_b) -> dict:
    return {"id": pid, "prompt_source": "vqa", "prompt_metadata": {"id": pid},
            "response_a": {"model_name": "x", "response_content": resp_a},
            "response_b": {"model_name": "y", "response_content": resp_b},
            "chosen": chosen, "human_annotations": {"response_a_ratings": grades_a, "response_b_ratings": grades_b}}


def samples(*letters: str, evaluator: str | None = "alpha") -> list[dict]:
    return [{"judgement": x, **({"evaluator": evaluator} if evaluator else {}), "metadata": {}} for x in letters]


def dump(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    d = tmp_path / "bench"
    d.mkdir()
    dump(d / "t2i.json", {"pairs": [
        gen_pair("p1", "s1", "m1", "m2", "A", [6, 5, 1], "c1"),  # votes A A B: 1 of 3 annotator pairs agree
        gen_pair("p2", "s1", "m1", "m1", "B", [2, 1, 3], "c2"),  # votes B B -: 1 of 1; same-model pair
        gen_pair("p3", "S2", "m2", "m3", "B", [1, 1, 1]),        # votes B B B: 3 of 3, unanimous
        gen_pair("p4", "drop", "m3", "m1", "A", [6, 6, 2]),      # votes A A B: 1 of 3
    ]})
    dump(d / "reasoning.json", {"pairs": [
        reasoning_pair("r1", TXT + IMG, TXT, "A", ["A", "A", "B"], ["C", "C", "C"]),  # votes A A A
        reasoning_pair("r2", TXT, TXT + IMG, "A", ["B", "B", "B"], []),              # one graded: no votes
        reasoning_pair("r3", TXT, TXT, "B", ["B", "C", "A"], ["B", "A", "C"]),       # votes - B A
    ]})
    return d


@pytest.fixture
def judges(tmp_path: Path) -> dict[str, list[Path]]:
    alpha_t2i = dump(tmp_path / "alpha_t2i.json", {
        "p1": {"forward": samples("A", "B", "B"), "reverse": samples("B", "B", "A")},
        "p2": {"forward": samples("A"), "reverse": samples("A")},
        "p3": {"forward": samples(""), "reverse": samples("B")},
        "p4": {"forward": samples("A", "B"), "reverse": samples("B")},
    })
    # No evaluator field: named by file stem. Always prefers the original response B.
    j2 = dump(tmp_path / "j2.json", {pid: {"forward": samples("B", evaluator=None), "reverse": samples("A", evaluator=None)}
                                     for pid in ("p1", "p2", "p3", "p4")})
    alpha_reasoning = dump(tmp_path / "alpha_reasoning.json", {
        "r1": {"forward": samples("A"), "reverse": samples("B")},  # right: preferred response has the image
        "r2": {"forward": samples("B"), "reverse": samples("A")},  # wrong: picks the image over the preferred text
        "r3": {"forward": samples("B"), "reverse": samples("A")},  # right
    })
    return {"t2i": [alpha_t2i, j2], "reasoning": [alpha_reasoning]}


# --- benchmark-only sections ----------------------------------------------------------------------


def test_benchmark_sections_by_hand(bench: Path) -> None:
    r = diagnose(bench)
    assert list(r["tasks"]) == ["image", "reasoning"]
    t = r["tasks"]["image"]
    assert t["pairs"] == 4 and t["judges"] == {}
    assert t["sources"] == {"s1": 2, "S2": 1, "drop": 1}
    assert t["categories"] == {"(none)": 2, "c1": 1, "c2": 1}
    assert t["same_model"] == {"same": 1, "different": 3, "pairs": 4, "same_pct": 25.0}
    h = t["human_agreement"]
    # annotator pairs 3 + 1 + 3 + 3 = 10, agreeing 1 + 1 + 3 + 1 = 6; votes 3 + 2 + 3 + 3, matching chosen 2 + 2 + 3 + 2
    assert (h["annotator_pairs"], h["agreeing"], h["agreement_pct"]) == (10, 6, 60.0)
    assert (h["votes"], h["votes_matching_label"], h["unanimous_pairs"], h["pairs_2plus_votes"]) == (11, 9, 1, 4)
    # m1: wins p1, p2 / losses p2, p4; m2: losses p1, p3; m3: wins p3, p4
    assert [(w["model"], w["wins"], w["losses"], w["win_rate_pct"]) for w in t["win_rates"]] == [
        ("m3", 2, 0, 100.0), ("m1", 2, 2, 50.0), ("m2", 0, 2, 0.0)]
    assert t["image_presence"]["pairs_one_image"] == 0 and math.isnan(t["image_presence"]["chosen_has_image_pct"])


def test_reasoning_agreement_by_hand(bench: Path) -> None:
    t = diagnose(bench)["tasks"]["reasoning"]
    h = t["human_agreement"]
    # preference votes: r1 A A A (3 pairs, 3 agree), r3 B A (1 pair, 0 agree); r2 has one graded response
    assert (h["pairs_annotated"], h["annotator_pairs"], h["agreeing"], h["agreement_pct"]) == (2, 4, 3, 75.0)
    assert (h["votes"], h["votes_matching_label"], h["unanimous_pairs"], h["pairs_one_response_graded"]) == (5, 4, 1, 1)
    g = h["grades"]
    # same letter within a response: r1 AAB 1/3, CCC 3/3; r2 BBB 3/3; r3 BCA 0/3, BAC 0/3
    assert (g["graded_responses"], g["annotator_pairs"], g["agreeing"]) == (5, 15, 7)
    assert g["letters_chosen"] == {"A": 3, "B": 5, "C": 1} and g["letters_rejected"] == {"A": 1, "B": 1, "C": 4}
    assert t["image_presence"] == {"pairs_one_image": 2, "chosen_has_image": 1, "chosen_has_image_pct": 50.0}
    assert t["same_model"]["same"] == 0


# --- judge sections -------------------------------------------------------------------------------


def test_judge_sections_by_hand(bench: Path, judges) -> None:
    r = diagnose(bench, judges)
    t = r["tasks"]["image"]
    assert list(t["judges"]) == ["alpha", "j2"]
    a = t["judges"]["alpha"]
    # p1 2/2, p2 1/2, p3 0/1 (empty forward skipped), p4 2/2
    assert (a["accuracy"]["correct"], a["accuracy"]["judgements"]) == (5, 7)
    assert {s: (g["correct"], g["judgements"]) for s, g in a["by_source"].items()} == {
        "s1": (3, 4), "S2": (0, 1), "drop": (2, 2)}
    assert {c: (g["correct"], g["judgements"]) for c, g in a["by_category"].items()} == {
        "(none)": (2, 3), "c1": (2, 2), "c2": (1, 2)}
    assert (a["same_model"]["same"]["correct"], a["same_model"]["same"]["judgements"]) == (1, 2)
    assert (a["same_model"]["different"]["correct"], a["same_model"]["different"]["judgements"]) == (4, 5)
    pos = a["position"]
    # first answers: forward A A - A, reverse B A B B; consistent on p1 and p4 of the 3 with both
    assert (pos["pairs_both_directions"], pos["consistent"]) == (3, 2)
    assert (pos["forward_answers"], pos["forward_A"], pos["reverse_answers"], pos["reverse_A"]) == (3, 3, 4, 1)
    assert pos["first_shown_pct"] == pytest.approx(400 / 7)
    j2 = t["judges"]["j2"]["accuracy"]
    assert (j2["correct"], j2["judgements"]) == (4, 8)
    ra = r["tasks"]["reasoning"]["judges"]["alpha"]
    assert (ra["accuracy"]["correct"], ra["accuracy"]["judgements"]) == (4, 6)
    ib = ra["image_bias"]
    assert (ib["preferred_has_image"]["correct"], ib["preferred_has_image"]["judgements"]) == (2, 2)
    assert (ib["preferred_text_only"]["correct"], ib["preferred_text_only"]["judgements"]) == (0, 2)
    ov = r["overall"]
    assert (ov["judges"]["alpha"]["correct"], ov["judges"]["alpha"]["judgements"]) == (9, 13)
    assert (ov["judges"]["j2"]["correct"], ov["judges"]["j2"]["judgements"]) == (4, 8)
    assert (ov["human_agreement"]["annotator_pairs"], ov["human_agreement"]["agreeing"]) == (14, 9)
    assert (ov["human_agreement_generation"]["annotator_pairs"], ov["human_agreement_generation"]["agreeing"]) == (10, 6)
    assert ov["same_model"]["same"] == 1 and ov["pairs"] == 7


def test_majority_voting_by_hand(bench: Path, judges) -> None:
    rows = diagnose(bench, judges)["tasks"]["image"]["judges"]["alpha"]["voting"]
    assert [r["k"] for r in rows] == [1, 3]  # at most 3 samples were drawn
    k1, k3 = rows
    assert (k1["correct"], k1["judgements"], k1["tied_directions"]) == (5, 7, 0)  # K = 1 is the official accuracy
    # K = 3: p1 forward A B B -> B (wrong), reverse flipped A A B -> A (right); p2 as K = 1 (1 right);
    # p3 reverse wrong; p4 forward A B is a tie (no vote), reverse right
    assert (k3["correct"], k3["judgements"], k3["tied_directions"], k3["directions_with_k"]) == (3, 6, 1, 2)


def test_voting_k1_equals_official_accuracy_including_odd_answers(bench: Path) -> None:
    pairs = load_pairs(bench / "t2i.json")
    judg = {"p1": {"forward": samples("tie"), "reverse": samples("")}, "p2": {"forward": samples("B", "A", "A")}}
    official = accuracy(pairs, judg)
    (k1, k3) = majority_voting(pairs, judg)
    assert (k1["correct"], k1["judgements"]) == (official["correct"], official["judgements"]) == (1, 2)
    assert (k3["correct"], k3["judgements"]) == (0, 2)  # p2 forward B A A -> A: wrong
    assert majority_voting(pairs, {"p2": {"forward": samples("B", "A")}}, ks=[2])[0]["tied_directions"] == 1


def test_exclude_sources_drops_pairs_before_scoring(bench: Path, judges) -> None:
    r = diagnose(bench, judges, exclude_sources=["DROP"])  # case-insensitive
    t = r["tasks"]["image"]
    assert (t["pairs"], t["excluded_pairs"], r["excluded_sources"]) == (3, 1, ["drop"])
    h = t["human_agreement"]
    assert (h["annotator_pairs"], h["agreeing"]) == (7, 5)  # p4's 3 pairs (1 agreeing) are gone
    a = t["judges"]["alpha"]["accuracy"]
    assert (a["correct"], a["judgements"], a["unknown_ids"]) == (3, 5, 0)  # excluded ids are not "unknown"
    assert "drop" not in t["judges"]["alpha"]["by_source"]
    assert [(w["model"], w["wins"], w["losses"]) for w in t["win_rates"]] == [("m3", 1, 0), ("m1", 2, 1), ("m2", 0, 2)]
    with pytest.raises(BonError, match="nosuch"):
        diagnose(bench, None, exclude_sources=["nosuch"])


def test_errors_are_one_line(tmp_path: Path, bench: Path, judges) -> None:
    with pytest.raises(BonError, match="not found"):
        diagnose(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BonError, match="no MMRB2 task files"):
        diagnose(tmp_path / "empty")
    with pytest.raises(BonError, match="edit"):
        diagnose(bench, {"edit": judges["t2i"]})
    with pytest.raises(BonError, match="unknown MMRB2 task"):
        diagnose(bench, {"video": judges["t2i"]})


def test_judges_named_by_stem_when_evaluators_clash(tmp_path: Path, bench: Path) -> None:
    a = dump(tmp_path / "run1.json", {"p1": {"forward": samples("A"), "reverse": samples("B")}})
    b = dump(tmp_path / "run2.json", {"p1": {"forward": samples("B"), "reverse": samples("A")}})
    assert list(diagnose(bench, {"image": [a, b]})["tasks"]["image"]["judges"]) == ["run1", "run2"]


def test_write_report_figures_and_strict_json(tmp_path: Path, bench: Path, judges) -> None:
    r = diagnose(bench, judges, exclude_sources=["drop"])
    out, js = tmp_path / "diag", tmp_path / "d.json"
    write_diagnostics(r, out, js)
    text = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("Human agreement", "Generator win rates", "Same-model and different-model pairs",
                    "Position behaviour", "Image bias", "Majority voting", "Accuracy by prompt source"):
        assert heading in text
    assert "60.0% (3/5)" in text and "left out before scoring: drop" in text
    for png in ("benchmark.png", "win_rates.png", "accuracy_by_source.png", "voting.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG" and f"]({png})" in text

    def no_nan(token: str):
        raise AssertionError(f"non-standard JSON constant {token}")

    data = json.loads(js.read_text(encoding="utf-8"), parse_constant=no_nan)
    assert data["tasks"]["image"]["image_presence"]["chosen_has_image_pct"] is None
    assert data["tasks"]["image"]["judges"]["alpha"]["accuracy"]["correct"] == 3
    # benchmark-only report, JSON only
    write_diagnostics(diagnose(bench), tmp_path / "bench-only", None)
    assert "## Judges" not in (tmp_path / "bench-only" / "report.md").read_text(encoding="utf-8")


# --- the real files -------------------------------------------------------------------------------


def shared_mmrb2() -> Path | None:
    """The reference folder: ``$BON_MMRB2_DIR``, ``shared/`` beside the checkout (CI) or inside it."""
    here = Path(__file__).resolve()
    candidates = [Path(os.environ["BON_MMRB2_DIR"])] if os.environ.get("BON_MMRB2_DIR") else []
    candidates += [here.parents[2] / "shared" / "mmrb2", here.parents[1] / "shared" / "mmrb2"]
    return next((c for c in candidates if (c / "t2i_response_only.json").is_file()), None)


def test_real_release() -> None:
    folder = shared_mmrb2()
    if folder is None or not (folder / "sample_task1_image.json").is_file():
        pytest.skip("shared/mmrb2 reference files not present")
    samples_ = {"image": "sample_task1_image.json", "edit": "sample_task2_edit.json",
                "interleaved": "sample_task3_interleaved.json", "reasoning": "sample_task4_reasoning.json"}
    r = diagnose(folder, {t: [folder / f] for t, f in samples_.items()})
    tasks = r["tasks"]
    assert {t: v["pairs"] for t, v in tasks.items()} == dict.fromkeys(samples_, 1000)
    assert {t: v["same_model"]["same"] for t, v in tasks.items()} == {
        "image": 573, "edit": 540, "interleaved": 610, "reasoning": 239}
    for t, v in tasks.items():
        judge = v["judges"]["sample"]
        official = judge["accuracy"]
        assert (judge["voting"][0]["correct"], judge["voting"][0]["judgements"]) == (official["correct"], official["judgements"])
        assert sum(g["judgements"] for g in judge["by_source"].values()) == official["judgements"]
        assert sum(w["wins"] for w in v["win_rates"]) == 1000 == sum(w["losses"] for w in v["win_rates"])
        if t != "reasoning":
            assert v["human_agreement"]["agreement_pct"] > 90  # the paper reports strong expert consensus
    assert tasks["reasoning"]["image_presence"]["pairs_one_image"] == 297
    # The paper scores interleaved without ISG-Bench.
    dropped = diagnose(folder, None, exclude_sources=["isgbench"])["tasks"]["interleaved"]
    assert (dropped["pairs"], dropped["excluded_pairs"]) == (579, 421)
    assert load_judgments(folder / "sample_task1_image.json")  # the sample files load as judgments
