"""`bon tradeoff` and `bon mmrb2 flips` on a tiny demo study, and the released sample judgment files."""

import json
import os
from pathlib import Path

import pytest

from analysis.tradeoff import cheapest_within, leaderboard_rows, paired_interval
from bon.cli import main

N = 4


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out), "--prompts", "2", "--n", str(N), "--seed", "3"]) == 0
    return out


def test_tradeoff_records_every_setting_from_the_store(demo_run, tmp_path):
    copy = tmp_path / "t.json"
    rc = main(["tradeoff", "--run", str(demo_run), "--judge", "scene-full", "--judge", "position-bias",
               "--max-loss", "0.02", "--bootstrap", "200", "--json", str(copy)])
    assert rc == 0
    payload = json.loads((demo_run / "tradeoff.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert json.loads(copy.read_text()) == payload
    assert (demo_run / "figures" / "tradeoff.png").stat().st_size > 10_000
    assert "## Cost against quality" in (demo_run / "tradeoff.md").read_text()
    by = {(r["judge"], r["setting"]): r for r in payload["records"]}
    full = by[("scene-full", "knockout")]
    assert full["calls_per_prompt"] == 2 * (N - 1) and full["calls_made"] == 0  # the study paid for these already
    assert full["loss"] == 0 and full["calls_cut"] == 0 and full["gating"] is None
    for judge in ("scene-full", "position-bias"):
        gated = [by[(judge, f"knockout gated {g}")] for g in ("1", "0.6", "0.2")]
        assert all(N - 1 <= r["calls_per_prompt"] <= 2 * (N - 1) for r in gated)
        assert gated[2]["calls_per_prompt"] == N - 1  # every verdict clears gate 0.2: forward order only
        margin = [r for (j, label), r in by.items() if j == judge and label.startswith("knockout gated margin")]
        assert len(margin) == 4 and all(N - 1 <= r["calls_per_prompt"] <= 2 * (N - 1) for r in margin)
        assert all(r["gating"] in ("safe", "unsafe", "unproven", "unknown") and r["gate_safety"] for r in gated + margin)
        assert by[(judge, "round-robin")]["calls_per_prompt"] == N * (N - 1)
        assert by[(judge, "round-robin early stop")]["calls_per_prompt"] <= N * (N - 1)
        assert by[(judge, "knockout seeded")]["calls_per_prompt"] == 2 * (N - 1) + (N - 1)
        assert all(r["loss_lo"] <= r["loss"] <= r["loss_hi"] for r in payload["records"] if r["judge"] == judge)
    for judge in ("scene-full", "position-bias"):  # calibrated gates, a cascade and the uncertainty strategy, with their reports
        auto = by[(judge, "knockout gated auto")]
        assert auto["family"] == "calibrated" and auto["gate_report"]["audit"]["share"] == 0.1 and auto["note"]
        assert auto["gating"] in ("safe", "unsafe", "unproven", "unknown", None)
        assert by[(judge, "uncertainty")]["calls_per_prompt"] <= 2 * (N - 1) and by[(judge, "uncertainty")]["settled_share"] is not None
        [cascade] = [r for (j, label), r in by.items() if j == judge and r["family"] == "cascade"]
        assert cascade["cheap_calls_per_prompt"] == N - 1  # the cheap judge answers every match once
        assert cascade["calls_per_prompt"] == cascade["cheap_calls_per_prompt"] + 2 * (N - 1) * (1 - cascade["gate_report"]["settled"]
                                                                                                   / cascade["gate_report"]["matches"])
    assert set(payload["cheapest_within"]["judges"]) >= {"scene-full", "position-bias"}
    rows = leaderboard_rows(demo_run, 0.02)
    assert {r["judge"] for r in rows} == {"scene-full", "position-bias"}
    assert all(r["calls_per_prompt"] <= r["full_calls_per_prompt"] and r["loss_hi"] <= 0.02 for r in rows)


def test_tradeoff_prices_a_call_at_the_selection_stage_rate(demo_run, tmp_path):
    """The trade-off replays selection matches, so a call costs what a selection call cost (as in the
    leaderboard), not the study's total over all calls (which includes the preference set's)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    stats = json.loads((run / "stats.json").read_text())
    judge = stats["judges"]["verifier-twin"]  # the study's label of scene-full
    judge.update(calls_made=100, cost_usd=3.0)  # preference set and selection together: $0.03 a call
    judge["selection"] = {**judge.get("selection", {}), "calls_made": 10, "cost_usd": 0.5}  # $0.05 a call
    (run / "stats.json").write_text(json.dumps(stats))
    assert main(["tradeoff", "--run", str(run), "--judge", "verifier-twin", "--bootstrap", "100"]) == 0
    records = json.loads((run / "tradeoff.json").read_text())["records"]
    full = next(r for r in records if r["setting"] == "knockout")
    assert full["usd_per_prompt"] == pytest.approx(full["calls_per_prompt"] * 0.05)


def test_report_and_leaderboard_carry_the_tradeoff(demo_run, tmp_path):
    """tradeoff.json in the run folder reaches the report bundle: a report.md section with the table and
    the figure, report.html, report.json, and the leaderboard's cheapest setting per judge."""
    assert main(["tradeoff", "--run", str(demo_run), "--judge", "scene-full", "--bootstrap", "200"]) == 0
    report, board = tmp_path / "report", tmp_path / "board.json"
    assert main(["report", "--run", str(demo_run), "--seed", "3", "--no-power", "--max-loss", "0.02", "--out", str(report)]) == 0
    text = (report / "report.md").read_text()
    section = next(part for part in text.split("\n## ") if part.startswith("Cost against quality"))
    assert "![trade-off](figures/tradeoff.png)" in section and "| scene-full | knockout gated 0.2 |" in section
    assert "within 0.02" in section and (report / "figures" / "tradeoff.png").stat().st_size > 10_000
    html = (report / "report.html").read_text()
    assert 'id="tradeoff"' in html and "knockout gated 0.2" in html and "Cheapest way to run each judge" in html
    expected = leaderboard_rows(demo_run, 0.02)
    assert expected and [r["judge"] for r in expected] == ["scene-full"]
    payload = json.loads((report / "report.json").read_text())["tradeoff"]
    assert payload["cheapest_within"] == {"max_loss": 0.02, "judges": expected}
    assert main(["leaderboard", "--run", str(demo_run), "--task", "t2i", "--generator", "strong", "--max-loss", "0.02",
                 "--json", str(board)]) == 0
    assert json.loads(board.read_text())["cheapest_within"]["judges"] == expected


def test_two_copies_of_a_study_give_the_same_tradeoff(demo_run, tmp_path):
    """The default cascade comes from the study's data (never from measured seconds) and each judge is
    replayed on the store as it was before the command, so copies give byte-identical records, whether the
    judges run in one process or in several."""
    import shutil

    copies = [tmp_path / "a", tmp_path / "b"]
    for copy in copies:
        shutil.copytree(demo_run, copy)
        for stale in ("tradeoff.json", "tradeoff.md"):
            (copy / stale).unlink(missing_ok=True)
    assert main(["tradeoff", "--run", str(copies[0]), "--bootstrap", "100", "--workers", "1"]) == 0
    assert main(["tradeoff", "--run", str(copies[1]), "--bootstrap", "100", "--workers", "2"]) == 0
    first, second = ((c / "tradeoff.json").read_bytes() for c in copies)
    assert first == second
    payload = json.loads(first)
    cascades = {r["options"]["cascade"] for r in payload["records"] if r["family"] == "cascade"}
    assert len(cascades) == 1 and not cascades & set(payload["left_out"])  # never a judge the leakage policy leaves out
    assert set(payload["left_out"]) == {"verifier-twin", "verifier-twin-32px"}
    for r in payload["records"]:
        assert (r["judge"] in payload["left_out"]) == ("left_out" in r)
        assert r["costs_more"] == (r["calls_cut"] is not None and r["calls_cut"] < -1e-9)
        if r["gating"] == "safe":  # safe needs the flip analysis and no measured loss
            assert r["loss_lo"] <= 0
    prefiltered = [r for r in payload["records"] if r["family"] == "prefilter"]
    assert {r["options"]["keep"] for r in prefiltered} == {2, "auto"}  # k = 2..N/2 and auto by default
    assert {r["prefilter"] for r in prefiltered} == {"colour-hist", "ocr", "quality", "text-overlap", "image-bias"}
    for r in prefiltered:  # never a leaked prefilter, never the judge itself; recall recorded; the gates' rule
        assert r["prefilter"] != r["judge"] and r["prefilter_calls_per_prompt"] == N and 0 <= r["recall"] <= 1
        assert r["gating"] == ("unsafe" if r["loss_lo"] > 0 else "safe")
        if r["options"]["keep"] != "auto" and not r["missing_scores"]:
            assert r["calls_per_prompt"] == 2 * (r["keep"] - 1)


def test_select_with_a_prefilter_on_a_finished_study_then_a_rerun_asks_nobody(demo_run, tmp_path):
    """The issue's command: ocr decides among the three candidates the quality judge scores best."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    args = ["select", "--run", str(run), "--judge", "ocr", "--strategy", "knockout", "--strategy-option", "prefilter=quality",
            "--strategy-option", "keep=3"]
    for attempt in ("first", "again"):
        assert main([*args, "--json", str(tmp_path / f"{attempt}.json")]) == 0
    first, again = (json.loads((tmp_path / f"{a}.json").read_text()) for a in ("first", "again"))
    assert again["calls_made"] == 0 and again["costs"]["prefilter_stats"]["calls_made"] == 0
    assert again["picks"] == first["picks"] and first["costs"]["prefilter_calls_per_prompt"] == N
    [report] = first["prefilter"]
    assert report["keep"] == 3 and report["missing_scores"] == sum(p.get("prefilter_missing", 0) for p in first["picks"])
    for pick in first["picks"]:
        missing = pick.get("prefilter_missing", 0)  # a missing score keeps its candidate
        assert pick["index"] in pick["kept"] and len(pick["kept"]) == min(3, N - missing) + missing
        assert {i for m in pick["matches"] for i in m[:2]} <= set(pick["kept"])


def test_prefilter_scores_read_from_the_judges_answers_are_what_the_judge_scores(demo_run, tmp_path):
    """The trade-off stores each prefilter's score of every candidate once, read off the judge's own pairwise
    answers where they record it: the same numbers (and the same missing ones) the judge gives when asked."""
    import shutil
    from pathlib import Path

    from analysis.tradeoff import replay_groups
    from bon.store import JudgmentStore, judge_id
    from bon.study import load_study

    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    assert main(["tradeoff", "--run", str(run), "--judge", "random", "--prefilter", "quality", "--prefilter", "ocr",
                 "--keep", "3", "--keep", str(N), "--bootstrap", "100", "--cascade", "none"]) == 0
    records = json.loads((run / "tradeoff.json").read_text())["records"]
    assert sorted((r["prefilter"], str(r["options"]["keep"])) for r in records if r["family"] == "prefilter") == [
        ("ocr", "3"), ("ocr", "auto"), ("quality", "3"), ("quality", "auto")]  # keep N would be plain knockout
    study = load_study(Path(run))
    store = JudgmentStore(study.run.store, read_only=True)
    for label in ("quality", "ocr"):
        judge = study.judge(label)
        for prompt, cands in replay_groups(study):
            keys = [(prompt.content.digest, c.content.digest, 0) for c in cands]
            stored = store.get_scores(judge_id(judge.identity()), keys)
            fresh = judge.score(prompt, [c.content for c in cands])
            assert [(stored[k].value, stored[k].missing) for k in keys] == [(s.value, s.missing) for s in fresh]
    store.close()


def test_a_cascade_whose_cheap_judge_settles_every_match_is_the_cheap_judges(demo_run, tmp_path):
    """With cascade_gate 0 a cheap judge that never ties (position-bias always answers A) settles every match:
    the main judge was never asked, and the row carries the cheap judge's name."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    assert main(["tradeoff", "--run", str(run), "--judge", "ocr", "--cascade", "position-bias", "--strategy-option",
                 "cascade_gate=0", "--bootstrap", "100", "--gate", "1"]) == 0
    [row] = [r for r in json.loads((run / "tradeoff.json").read_text())["records"] if r["family"] == "cascade"]
    gate = row["gate_report"]
    assert gate["settled"] == gate["matches"] > 0
    assert row["judge"] == "position-bias" and row["asked_for"] == "ocr" and row["decided_by"] == {"position-bias": 1.0}
    assert "ocr never asked" in row["setting"]


def test_decided_by_names_who_settled_the_matches():
    from analysis.tradeoff import decided_by

    row = {"family": "cascade", "setting": "knockout cascade cheap", "gate_report": {"cascade": "cheap", "matches": 8, "settled": 2}}
    assert decided_by(row, "main") == {"decided_by": {"cheap": 0.25, "main": 0.75}}
    row["gate_report"]["settled"] = 8
    assert decided_by(row, "main")["judge"] == "cheap"
    assert decided_by({"family": "knockout", "setting": "knockout"}, "main") == {"decided_by": {"main": 1.0}}


def test_final_gating_calls_a_measured_loss_unsafe():
    from analysis.tradeoff import final_gating

    assert final_gating({"gating": "safe", "loss_lo": 0.0006, "loss_hi": 0.0207})[0] == "unsafe"
    assert final_gating({"gating": "safe", "loss_lo": -0.001, "loss_hi": 0.02}) == ("safe", final_gating(
        {"gating": "safe", "loss_lo": -0.001, "loss_hi": 0.02})[1])
    assert final_gating({"gating": None, "loss_lo": 0.1, "loss_hi": 0.2}) == (None, None)


def test_cheapest_within_prefers_fewer_calls_inside_the_loss():
    records = [
        {"judge": "j", "setting": "knockout", "calls_per_prompt": 14, "loss": 0.0},
        {"judge": "j", "setting": "gated 0.6", "calls_per_prompt": 9, "loss": 0.5},
        {"judge": "j", "setting": "gated 0.2", "calls_per_prompt": 7, "loss": 3.0},
    ]
    for r in records:
        r.update(usd_per_prompt=None, bon_score=1.0, loss_lo=r["loss"] - 0.4, loss_hi=r["loss"] + 0.4, calls_cut=None, gating=None)
    assert cheapest_within(records, 1.0)["j"]["setting"] == "gated 0.6"
    assert cheapest_within(records, 0.5, bound="point")["j"]["setting"] == "gated 0.6"
    assert cheapest_within(records, 0.5)["j"]["setting"] == "knockout"  # 0.5 + 0.4 could be lost
    records[1]["gating"] = "unsafe"
    assert cheapest_within(records, 1.0)["j"]["setting"] == "knockout"
    assert cheapest_within(records, 1.0, allow_unsafe=True)["j"]["setting"] == "gated 0.6"


def test_paired_interval_covers_the_mean():
    import numpy as np

    lo, hi = paired_interval(np.array([0.0, 0.1, -0.1, 0.2, 0.0, 0.05]), 500, 1)
    assert lo < 0.0417 < hi
    assert paired_interval(np.zeros(5), 500, 1) == (0.0, 0.0)


def test_flips_of_a_run(demo_run, tmp_path):
    out = tmp_path / "flips.json"
    assert main(["mmrb2", "flips", "--run", str(demo_run), "--json", str(out)]) == 0
    files = json.loads(out.read_text())["files"]
    assert any(name.startswith("verifier-twin/") for name in files) and "verifier-twin/all tasks" in files
    together = files["verifier-twin/all tasks"]["summary"]["pairs"]
    assert together == sum(e["summary"]["pairs"] for n, e in files.items() if n.startswith("verifier-twin/") and n != "verifier-twin/all tasks")
    for entry in files.values():
        assert entry["summary"]["by_confidence"] and entry["gate_safety"]


@pytest.mark.skipif(not os.environ.get("BON_MMRB2_DIR"), reason="BON_MMRB2_DIR not set")
def test_flips_of_the_released_samples(tmp_path):
    bench = Path(os.environ["BON_MMRB2_DIR"])
    samples = sorted(bench.glob("sample_task*.json"))
    if len(samples) != 4:
        pytest.skip("released sample judgment files absent")
    out = tmp_path / "flips.json"
    assert main(["mmrb2", "flips", "--bench-dir", str(bench), *map(str, samples), "--json", str(out)]) == 0
    files = json.loads(out.read_text())["files"]
    assert len(files) == 4
    for entry in files.values():  # A/B only: a disagreement rate, no confidences
        assert entry["summary"]["pairs"] == 1000 and entry["summary"]["disagree_rate"] is not None
        assert entry["summary"]["by_confidence"] == [] and entry["verdict"].startswith("no confidences")


def test_flips_needs_input():
    assert main(["mmrb2", "flips"]) == 2


def test_an_unknown_judge_lists_the_studys_labels_and_suggests_one(demo_run, capsys):
    assert main(["tradeoff", "--run", str(demo_run), "--judge", "ocrr"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("bon: error: judge 'ocrr': not a judge of this study (verifier-twin,") and "did you mean 'ocr'?" in err
