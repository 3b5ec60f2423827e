"""The report bundle rendered: the figure, report.md, strict JSON and file modes."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from analysis.bundle import compute
from analysis.plots import correlation_figure
from analysis.outputs import write_report
from analysis.report import empty_report, markdown_table, render_markdown
from analysis_run import make_run
from bon.errors import BonError
from bon.runfolder import RunFolder, write_json

X = [52.0, 55.5, 61.0, 58.0, 66.5]
Y = [0.41, 0.47, 0.52, 0.44, 0.60]


def make_results() -> pd.DataFrame:
    rows = []
    judges = ["j1", "j2", "j3", "j4", "j5"]
    for task, gen, shift in [("edit", "g2", 0.1), ("t2i", "g1", 0.0), ("t2i", "g2", 0.05)]:
        for k, judge in enumerate(judges):
            rows.append({"task": task, "generator": gen, "judge": judge, "mmrb2_accuracy": X[k] + shift * 10,
                         "bon_score": Y[(k + int(shift * 20)) % 5] + shift, "random_score": 0.4 + shift,
                         "oracle_score": 0.7 + shift})
    return pd.DataFrame(rows)


def strict_load(path: Path):
    def refuse(name: str):
        raise ValueError(f"{path}: not strict JSON ({name})")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory):
    run = make_run(tmp_path_factory.mktemp("runs") / "run", prompts=6, n=4)
    return compute(run, bootstrap=100, seed=0, power=False)


def test_figure_written(tmp_path: Path) -> None:
    path = correlation_figure(make_results(), tmp_path / "fig" / "correlation.png")
    assert path.stat().st_size > 10_000
    with Image.open(path) as im:
        assert im.format == "PNG" and im.width > 1000


def test_figure_with_empty_and_degenerate_panels(tmp_path: Path) -> None:
    res = make_results()
    res = res[res.task == "t2i"].copy()  # edit, interleaved and reasoning panels are empty
    res.loc[res.generator == "g2", "bon_score"] = 0.5  # constant: r undefined, flat fit
    one = res.iloc[[0]].assign(task="reasoning", generator="solo")  # a single judge: no line
    assert correlation_figure(pd.concat([res, one]), tmp_path / "c.png").stat().st_size > 0
    assert correlation_figure(res.iloc[:0], tmp_path / "empty.png").stat().st_size > 0
    with pytest.raises(BonError, match="oracle_score"):
        correlation_figure(res.drop(columns="oracle_score"), tmp_path / "bad.png")


def test_markdown_table_helper() -> None:
    df = pd.DataFrame({"name": ["a|b", "c"], "v": [1.23456, np.nan], "k": [1, 2]})
    text = markdown_table(df, {"v": "{:.2f}"})
    lines = text.strip().splitlines()
    assert lines[0] == "| name | v | k |" and lines[1] == "| --- | ---: | ---: |"
    assert lines[2] == "| a\\|b | 1.23 | 1 |" and lines[3] == "| c | – | 2 |"


def test_report_md_shows_the_one_correlation_table(bundle, tmp_path: Path) -> None:
    text = render_markdown(bundle, RunFolder(bundle.run_dir))
    assert text.startswith("# Does MMRB2 accuracy predict Best-of-N gains?")
    assert "![](figures/correlation.png)" in text
    assert "| task | generator | scope | judges | prompts | pairs | r | r 95% CI | CI (meas.) | p (r) | LOO r |" in text
    row = bundle.settings.iloc[0]
    assert f"{row.pearson_r:+.2f} | {row.pearson_lo:+.2f} to {row.pearson_hi:+.2f}" in text
    assert "Fisher" not in text and "Partial study" not in text
    for title in ("### Text-to-image", "### Image editing", "## Interpretation", "## What was run"):
        assert title in text
    assert "interleaved" not in text.split("## Judges per task")[1].split("## Interpretation")[0].lower()
    m = bundle.metrics.iloc[0]
    assert m.gain == pytest.approx(m.bon_score - m.random_score)
    assert m.recovery == pytest.approx((m.bon_score - m.random_score) / (m.oracle_score - m.random_score))


def test_results_csv_is_a_view_of_the_metrics_table(bundle) -> None:
    res = bundle.results
    assert list(res.columns[:8]) == ["task", "generator", "judge", "strategy", "mmrb2_accuracy", "bon_score",
                                     "random_score", "oracle_score"]
    merged = res.merge(bundle.metrics, on=["task", "generator", "judge", "strategy"], suffixes=("", "_m"))
    assert len(merged) == len(res) == len(bundle.metrics)
    assert np.allclose(merged["bon_score"], merged["bon_score_m"])
    assert list(res["task"].drop_duplicates()) == ["t2i", "edit"]


def test_partial_study_is_labelled_with_counts(bundle) -> None:
    stats = {"stopped": "call budget of 50 spent", "judges": {"judge-0": {"calls_made": 50}}}
    bundle.stats, saved = stats, bundle.stats
    bundle.study, study = {**bundle.study, "judges": [{"label": f"judge-{k}"} for k in range(8)]}, bundle.study
    try:
        text = render_markdown(bundle, RunFolder(bundle.run_dir))
    finally:
        bundle.stats, bundle.study = saved, study
    head = text.split("## What was run")[0]
    assert "**Partial study:** call budget of 50 spent. 6 of 8 judges have Best-of-N picks" in head
    assert "pending: judge-6, judge-7" in head and "50 judge calls" in head
    empty = empty_report(stats, "no picks")
    assert "Partial study" in empty and "No analysis: no picks." in empty


def test_degenerate_analyses_are_named(tmp_path: Path) -> None:
    two = compute(make_run(tmp_path / "two", qualities=(0.5, 0.9), prompts=4, n=3, images=False), bootstrap=100,
                  power=False)
    assert "a correlation needs 3" in two.degenerate()
    one = compute(make_run(tmp_path / "n1", prompts=4, n=1, images=False), bootstrap=100, power=False)
    assert one.degenerate().startswith("N = 1")


def test_write_json_is_strict(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    write_json(path, {"a": math.nan, "b": [np.float64("inf"), np.int64(3)], "c": pd.DataFrame({"v": [1.0, np.nan]}),
                      "d": np.array([0.5, np.nan])})
    assert strict_load(path) == {"a": None, "b": [None, 3], "c": [{"v": 1.0}, {"v": None}], "d": [0.5, None]}


def test_report_files_are_strict_and_follow_the_umask(bundle, tmp_path: Path) -> None:
    out = RunFolder(tmp_path / "out")
    old = os.umask(0o002)
    try:
        written = write_report(bundle, out)
    finally:
        os.umask(old)
    for path in [*written.values(), out.figure]:
        assert path.stat().st_mode & 0o777 == 0o664, path
    payload = strict_load(out.report_json)
    assert payload["pooled"]["n_judges"] == 6 and len(payload["correlations"]) == len(bundle.correlations)
    assert not list(out.root.rglob("*.tmp"))


@pytest.mark.parametrize("policy, rule, unscored", [
    ("official", "official for vqascore: counted as 0", 0),  # zero: the prompt stays, its failed scores are 0
    ("missing", "missing: their prompts leave Best-of-N, random and oracle alike", 1),
])
def test_report_names_the_verifier_metric_and_its_failed_scores(tmp_path: Path, policy: str, rule: str, unscored: int) -> None:
    import yaml

    run = make_run(tmp_path / "run", qualities=(0.5, 0.7, 0.9), prompts=4, n=3, tasks=("t2i",), generators=("g1",))
    lines = [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]
    for rec in lines:
        rec["details"] = {"metric": "official"}
        if rec["prompt_id"] == "t2i-0001" and rec["index"] < 2:
            rec.update(score=None, missing="grader: timed out")
    (run / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["study"].update(verifier={"name": "vqascore", "label": "vqascore"}, on_failure=policy)
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    b = compute(run, bootstrap=20, seed=0, power=False)
    text = render_markdown(b, RunFolder(run))
    assert "- **Verifier metric:** vqascore, metric official" in text
    assert f"- **Failed verifier scores:** t2i/g1: 2 of 12 on 1 prompts; on_failure: {policy} ({rule})" in text
    assert set(b.metrics["prompts"]) == {4} and set(b.metrics["unscored_picks"]) == {unscored}


def test_bon_report_on_failure_overrides_the_config(tmp_path: Path) -> None:
    from bon.cli import main

    run = make_run(tmp_path / "run", qualities=(0.5, 0.7, 0.9), prompts=4, n=3, tasks=("t2i",), generators=("g1",))
    lines = [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]
    lines[0].update(score=None, missing="grader: refused")
    (run / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert main(["report", "--run", str(run), "--bootstrap", "100", "--no-power", "--on-failure", "zero",
                 "--json", str(tmp_path / "r.json")]) == 0
    assert "t2i/g1: 1 of 12 on 1 prompts; on_failure: zero (counted as 0)" in (run / "report.md").read_text()
    assert strict_load(tmp_path / "r.json")["scoring"]["applied"] == "zero"


def reranker_table() -> pd.DataFrame:
    """Leaderboard rows whose costs span three decades (a log axis, its 10^k labels drawn by mathtext)."""
    rows = []
    for task in ("t2i", "edit"):
        for g, gen in enumerate(("g1", "g2")):
            for k, judge in enumerate(("random", "fast", "slow", "twin")):
                gain = 0.05 * k - 0.04 * g + (0.02 if task == "edit" else 0.0)
                rows.append({"task": task, "generator": gen, "judge": judge, "gain": gain, "gain_lo": gain - 0.06,
                             "gain_hi": gain + 0.05, "seconds_per_prompt": 1e-4 * 10 ** k, "usd_per_prompt": 0.0,
                             "left_out": "shares the grader" if judge == "twin" else ""})
    return pd.DataFrame(rows)


def test_figures_drawn_settled_are_the_files_matplotlib_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures' shortcuts (ticks placed and texts laid out once per layout and per save) change no pixel
    and no byte: the same figures drawn without them give the same PNG and SVG files."""
    import contextlib

    from analysis import plots
    from analysis.figures import reranker_figure

    def draw(folder: Path) -> list[Path]:
        return [correlation_figure(make_results(), folder / "correlation.png", formats=("png", "svg")).with_suffix(".svg"),
                *reranker_figure(reranker_table(), folder / "reranker.png")]

    settled = draw(tmp_path / "settled")
    monkeypatch.setattr(plots, "settled", lambda fig: contextlib.nullcontext())
    monkeypatch.setattr(plots, "_laid_out_once", lambda text: text._get_layout)
    plain = draw(tmp_path / "plain")
    assert [p.name for p in settled] == ["correlation.svg", "reranker.png", "reranker.svg"]
    for a, b in zip([*settled, settled[0].with_suffix(".png")], [*plain, plain[0].with_suffix(".png")]):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert rb"<!-- $\mathdefault{10^{-3}}$ -->" in settled[2].read_bytes()  # a log axis, labelled by mathtext
