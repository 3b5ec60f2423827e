"""Leakage guards (judges sharing the verifier's grader, pairs from the downstream benchmark) and the
headroom table with its warning, on the hand-made run folder of ``analysis_run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from analysis.bundle import compute
from analysis.leakage import Downstream, LeakagePolicy, outside_overlap, parse_policy
from analysis.predictors import benchmark_task_pairs
from analysis.report import render_markdown
from analysis_run import make_run
from bon.cli import main
from bon.errors import BonError
from bon.runfolder import RunFolder

FAST = ["--bootstrap", "100", "--no-power"]


def _section(report_md: str, title: str) -> str:
    return next(part for part in report_md.split("\n## ") if part.startswith(title))


def test_a_generator_without_headroom_gets_the_warning(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", prompts=8, n=4, tasks=("t2i",), generators=("g1", "g2"), images=False)
    lines = [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]
    for rec in lines:  # g2's N candidates of a prompt all score alike: no judge can do better than another
        if rec["generator"] == "g2":
            rec["score"] = 0.25 + 0.05 * int(rec["prompt_id"][-1])
    (run / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    b = compute(run, bootstrap=100, power=False)
    head = {r["generator"]: r for r in b.headroom.to_dict(orient="records")}
    assert head["g2"]["alike"] == 1.0 and head["g2"]["worst"] == head["g2"]["random"] == head["g2"]["oracle"]
    assert head["g2"]["warning"].startswith("headroom too small for a correlation: no headroom on 100% of prompts")
    assert head["g1"]["warning"] == "" and head["g1"]["oracle"] > head["g1"]["random"] > head["g1"]["worst"]
    report = render_markdown(b, RunFolder(run))
    assert "| ⚠ Text-to-image | g2 |" in _section(report, "Headroom") and "| Text-to-image | g1 |" in _section(report, "Headroom")
    assert "Text-to-image / g2: headroom too small for a correlation" in _section(report, "Interpretation")
    corr = {r["generator"]: r for r in b.settings.to_dict(orient="records")}
    assert "headroom too small" in corr["g2"]["warning"] and "headroom" not in corr["g1"]["warning"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose best judge shares the verifier's grader, and two of whose t2i pairs ask a Best-of-N prompt."""
    run = make_run(tmp_path_factory.mktemp("graded") / "run", prompts=6, n=4, tasks=("t2i", "edit"), generators=("g1",),
                   images=False)
    stats = json.loads((run / "stats.json").read_text())
    (run / "stats.json").write_text(json.dumps({**stats, "shared_grader": {"judge-5": "gpt-4.1"}}))
    bench = run / "mmrb2" / "t2i.json"
    pairs = json.loads(bench.read_text())
    for pair in pairs["pairs"][:2]:
        pair["prompt_content"] = [["text", "Draw prompt 0 of t2i."]]  # the first Best-of-N prompt of t2i
    bench.write_text(json.dumps(pairs))
    return run


@pytest.fixture(scope="module")
def bundle(graded: Path):
    return compute(graded, bootstrap=100, power=False)


def test_grader_judges_leave_the_correlation_and_both_rs_are_shown(graded: Path, bundle) -> None:
    b = bundle
    pooled = b.correlations[b.correlations["scope"] == "all"].iloc[0]
    other = b.correlations_other[b.correlations_other["scope"] == "all"].iloc[0]
    assert (pooled["n_judges"], other["n_judges"]) == (5, 6) and b.excluded_judges == ["judge-5"]
    what = dict(b.what_was_run())
    line = what["Judges excluded from the correlation (leakage)"]
    assert line.startswith("judge-5 (grader gpt-4.1): they share the verifier's grader")
    assert f"with them pooled r = {other['pearson_r']:+.2f}" in line
    assert "judge-5" in set(b.metrics["judge"])  # its Best-of-N numbers stay in the tables
    kept = compute(graded, bootstrap=100, power=False, grader_judges="keep")
    same = ["scope", "n_judges", "pearson_r", "pearson_lo", "pearson_hi", "spearman_rho", "spearman_lo", "spearman_hi"]
    assert kept.correlations[same].equals(b.correlations_other[same]) and kept.excluded_judges == []
    assert set(b.correlations_other["permutations"]) <= {720, 1000}  # exact for 6 judges, else 1000 orderings
    assert dict(kept.what_was_run())["Judges excluded from the correlation (leakage)"].startswith(
        "none; kept by choice (grader_judges: keep): judge-5")


def test_the_config_keeps_grader_judges_and_the_cli_overrides_it(graded: Path, tmp_path: Path) -> None:
    config = yaml.safe_load((graded / "config.yaml").read_text())
    config["study"]["leakage"] = {"grader_judges": "keep"}
    (graded / "config.yaml").write_text(yaml.safe_dump(config))
    try:
        assert compute(graded, bootstrap=100, power=False).excluded_judges == []
        assert main(["report", "--run", str(graded), "--out", str(tmp_path / "r"), "--grader-judges", "exclude",
                     "--overlapping-pairs", "keep", *FAST]) == 0
        leakage = json.loads((tmp_path / "r" / "report.json").read_text())["leakage"]
        assert leakage["excluded_judges"] == ["judge-5"] and leakage["pairs"]["t2i"]["dropped"] == 0
    finally:
        del config["study"]["leakage"]
        (graded / "config.yaml").write_text(yaml.safe_dump(config))


def test_pairs_asking_a_best_of_n_prompt_leave_the_accuracy(graded: Path, bundle) -> None:
    b = bundle
    assert b.leakage["pairs"]["t2i"] == {"pairs": 24, "dropped": 2, "why": {"its prompt is a Best-of-N prompt": 2}}
    assert b.leakage["pairs"]["edit"]["dropped"] == 0
    assert set(b.accuracies[b.accuracies.task == "t2i"]["n_pairs"]) == {22}
    assert "2 dropped: t2i 2 of 24 (2 its prompt is a Best-of-N prompt), edit 0 of 24" in dict(b.what_was_run())[
        "Preference pairs overlapping the downstream benchmark (accuracy)"]
    kept = compute(graded, bootstrap=100, power=False, overlapping_pairs="keep", grader_judges="keep")
    assert set(kept.accuracies[kept.accuracies.task == "t2i"]["n_pairs"]) == {24}


def test_outside_pairs_from_the_downstream_benchmark_are_dropped(graded: Path) -> None:
    files = {f"judge-{k}": {"t2i": graded / "mmrb2" / "judgments" / f"judge-{k}" / "t2i.json"} for k in range(3)}
    dropped: dict = {}
    rule = outside_overlap(Downstream({"alpha": "ALPHA-bench"}), LeakagePolicy())  # pairs say "alpha": same letters
    tasks = benchmark_task_pairs(graded / "mmrb2", files, overlap=rule, dropped=dropped)
    assert len(tasks["t2i"].pair_ids) == 12 and dropped["t2i"]["dropped"] == 12
    assert outside_overlap(Downstream({"alpha": "alpha"}), LeakagePolicy(overlapping_pairs="keep")) is None


def test_a_bad_leakage_setting_is_one_line() -> None:
    with pytest.raises(BonError, match="leakage: grader_judges must be exclude or keep, got 'drop'"):
        parse_policy({"grader_judges": "drop"}, "study.yaml")
    with pytest.raises(BonError, match="leakage: unknown key"):
        parse_policy({"graders": "keep"}, "study.yaml")


def test_no_output_of_the_demo_names_a_left_out_judge_best_without_its_flag(tmp_path: Path, capsys) -> None:
    """One leakage policy for every output: the console's best judge, report.md, leaderboard.csv and
    tradeoff.json never name a judge sharing the verifier's grader as the best unless flagged; the random
    baseline is never "worse than random"."""
    import pandas as pd

    run = tmp_path / "demo"
    assert main(["demo", "--out", str(run), "--prompts", "2", "--n", "4", "--seed", "3"]) == 0
    console = capsys.readouterr().out
    twins = {"verifier-twin", "verifier-twin-32px"}
    rows = [line.split() for line in console.splitlines() if line.split()[:1] in (["t2i"], ["edit"], ["interleaved"], ["reasoning"])]
    assert len(rows) == 8 and not {row[-2] for row in rows} & twins  # best judge (BoN score)
    assert all(row[2] == "7" for row in rows) and "left out of the correlation" in console and all(t in console for t in twins)
    board = pd.read_csv(run / "leaderboard.csv", keep_default_na=False)
    assert set(board[board.judge.isin(twins)]["left_out"]) == {"shares the verifier's grader (synthetic-checks)"}
    for _, sub in board.groupby(["task", "generator", "strategy"]):
        top = sub.sort_values("rank").iloc[0]
        assert top.judge not in twins or top.left_out
    report = (run / "report.md").read_text()
    agreement = next(line for line in report.splitlines() if "most accurate judge" in line or line.startswith("- It did not in"))
    assert "left out by the leakage policy" in report and agreement
    worse = [line for line in report.splitlines() if "worse than a random pick" in line]
    assert all("random (" not in line for line in worse)
    assert main(["tradeoff", "--run", str(run), "--bootstrap", "100", "--gate", "1", "--judge", "verifier-twin",
                 "--judge", "ocr"]) == 0
    payload = json.loads((run / "tradeoff.json").read_text())
    assert set(payload["left_out"]) == {"verifier-twin"}
    assert all(("left_out" in r) == (r["judge"] in twins) for r in payload["records"])
    assert not {r["options"].get("cascade") for r in payload["records"]} & twins
