"""Analysis commands either give the right answer or stop with one line, and never replace good results
with worse ones (issue 12, report items)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from analysis_run import make_run
from bon.cli import main

FAST = ["--bootstrap", "100", "--no-power"]


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def strict_load(path: Path):
    def refuse(name: str):
        raise ValueError(f"{path}: not strict JSON ({name})")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def one_line_error(capsys, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and err.startswith("bon: error:"), err
    for word in words:
        assert word in err, err
    return err


@pytest.fixture(scope="module")
def reported_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = make_run(tmp_path_factory.mktemp("reported") / "run", prompts=6, n=4, images=False)
    assert main(["report", "--run", str(run), *FAST]) == 0
    return run


@pytest.fixture()
def reported(reported_once: Path, tmp_path: Path) -> Path:
    """A fresh copy of a reported run folder for each test."""
    return Path(shutil.copytree(reported_once, tmp_path / "run"))


def test_published_accuracies_without_the_runs_judges_keep_the_report(reported: Path, capsys) -> None:
    before = snapshot(reported)
    assert main(["report", "--run", str(reported), "--accuracies", "published", *FAST]) == 2
    one_line_error(capsys, "no judge of this run has an accuracy in published")
    assert snapshot(reported) == before


def test_other_accuracies_get_their_own_outputs(reported: Path, tmp_path: Path, capsys) -> None:
    acc = tmp_path / "mine.csv"
    pd.DataFrame({"judge": [f"judge-{k}" for k in range(6)] * 2, "task": ["t2i"] * 6 + ["edit"] * 6,
                  "accuracy": [50, 60, 70, 80, 90, 95] * 2}).to_csv(acc, index=False)
    before = snapshot(reported)
    assert main(["report", "--run", str(reported), "--accuracies", str(acc), *FAST]) == 0
    alt = reported / "report-mine"
    assert "accuracies from mine.csv" in (alt / "report.md").read_text(encoding="utf-8")
    assert (alt / "figures" / "correlation.png").exists() and (alt / "results.csv").exists()
    assert {k: v for k, v in snapshot(reported).items() if not k.startswith("report-mine/")} == before
    assert main(["report", "--run", str(reported), "--accuracies", str(acc), "--out", str(reported), *FAST]) == 2
    one_line_error(capsys, "must not replace the study's own report")


def test_too_few_judges_is_refused_and_keeps_what_is_there(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path / "run", qualities=(0.5, 0.9), prompts=4, n=3, images=False)
    (run / "report.md").write_text("a good report\n")
    before = snapshot(run)
    assert main(["report", "--run", str(run), *FAST]) == 2
    one_line_error(capsys, "a correlation needs 3", "nothing written")
    assert snapshot(run) == before


def test_figures_drawn_during_the_analysis_reach_the_report_and_their_scratch_folder_goes(
        tmp_path: Path, monkeypatch) -> None:
    """The workers that compute the correlations and the leaderboards draw their figures into a scratch
    folder; the report gets them and the scratch folder is removed, also when the report is refused."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    run = make_run(tmp_path / "run", prompts=4, n=3, images=False)
    assert main(["report", "--run", str(run), *FAST]) == 0
    assert {p.name for p in (run / "figures").iterdir()} >= {"correlation.png", "correlation.svg", "reranker.png"}
    assert 'src="data:image/png;base64,' in (run / "report.html").read_text(encoding="utf-8")
    assert not any(scratch.iterdir())
    few = make_run(tmp_path / "few", qualities=(0.5, 0.9), prompts=4, n=3, images=False)
    assert main(["report", "--run", str(few), *FAST]) == 2
    assert not any(scratch.iterdir()) and not (few / "figures").exists()


def test_read_only_run_folder_is_one_line(reported: Path, monkeypatch, capsys) -> None:
    before = snapshot(reported)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if mode == os.W_OK and Path(p) == reported
                        else real(p, mode, **kw))
    assert main(["report", "--run", str(reported), *FAST]) == 2
    one_line_error(capsys, "not writable")
    assert snapshot(reported) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_run_folder_for_real(reported: Path, capsys) -> None:
    before = snapshot(reported)
    reported.chmod(0o555)
    try:
        assert main(["report", "--run", str(reported), *FAST]) == 2
    finally:
        reported.chmod(0o755)
    one_line_error(capsys, "not writable")
    assert snapshot(reported) == before


def test_figure_from_bons_own_files(reported: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fig"
    assert main(["figure", "--scores", str(reported / "results.csv"), "--accuracies", str(reported / "accuracies.csv"),
                 "--out", str(out)]) == 0
    assert (out / "figures" / "correlation.png").stat().st_size > 10_000 and (out / "figures" / "correlation.svg").exists()
    table = pd.read_csv(out / "correlations.csv")
    assert (table[table.scope == "setting"].n_judges == 6).all()
    pd.read_csv(reported / "results.csv").drop(columns="bon_score").to_csv(tmp_path / "bad.csv", index=False)
    assert main(["figure", "--scores", str(tmp_path / "bad.csv"), "--out", str(out)]) == 2
    one_line_error(capsys, "bad.csv", "bon_score")
    results = pd.read_csv(reported / "results.csv")
    results[results.judge.isin(["judge-0", "judge-1"])].to_csv(tmp_path / "few.csv", index=False)
    assert main(["figure", "--scores", str(tmp_path / "few.csv"), "--accuracies", str(reported / "accuracies.csv"),
                 "--out", str(tmp_path / "few")]) == 2
    one_line_error(capsys, "a correlation needs 3")
    assert not (tmp_path / "few").exists()


def test_power_on_degenerate_runs_is_one_line(tmp_path: Path, capsys) -> None:
    single = make_run(tmp_path / "n1", prompts=4, n=1, images=False)
    pair = make_run(tmp_path / "two", qualities=(0.5, 0.9), prompts=4, n=3, images=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["power", "--run", str(single)]) == 2
        one_line_error(capsys, "N = 1")
        assert main(["power", "--run", str(pair)]) == 2
        one_line_error(capsys, "at least 3 judges")
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert "nan" not in capsys.readouterr().out


def test_json_outputs_are_strict(reported: Path, tmp_path: Path, capsys) -> None:
    for command, extra in (("leaderboard", ["--task", "t2i", "--generator", "g1"]), ("report", FAST),
                           ("power", ["--width", "0.9"])):
        target = tmp_path / f"{command}.json"
        assert main([command, "--run", str(reported), *extra, "--json", str(target)]) == 0, command
        data = strict_load(target)
        assert data, command
    assert strict_load(tmp_path / "leaderboard.json")["leaderboard"][0]["rank"] == 1
    assert strict_load(tmp_path / "report.json")["pooled"]["n_judges"] == 6
    assert strict_load(tmp_path / "power.json")["grid"]
    for path in reported.rglob("*.json"):
        strict_load(path)


def test_compare_takes_two_runs(reported: Path, tmp_path: Path, capsys) -> None:
    other = make_run(tmp_path / "other", prompts=6, n=4, seed=3, images=False)
    assert main(["compare", "--run", str(reported), "--run", str(other), "--out", str(tmp_path / "cmp")]) == 0
    assert (tmp_path / "cmp" / "compare.html").exists() and (tmp_path / "cmp" / "compare.csv").exists()
    assert main(["compare", "--run", str(reported)]) == 2
    one_line_error(capsys, "exactly two")
    assert main(["report", "--run", str(tmp_path / "absent"), *FAST]) == 2
    one_line_error(capsys, "no such run folder")
    assert not (tmp_path / "absent").exists()


def test_a_budget_stopped_demo_says_it_is_partial(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--prompts", "2", "--n", "3", "--max-calls", "40"]) == 3
    stats = strict_load(out / "stats.json")
    assert stats["stopped"]
    head = (out / "report.md").read_text(encoding="utf-8").split("##")[0]
    assert "**Partial study:**" in head and "judges have Best-of-N picks" in head
    for path in out.rglob("*.json"):
        strict_load(path)
