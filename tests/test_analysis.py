"""Correlations against direct numpy/scipy computations, the figure and the markdown report."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy import stats

from analysis.correlation import CORRELATION_COLUMNS, correlate, correlation_table
from analysis.plots import correlation_figure
from analysis.report import fisher_ci, markdown_table, with_gains, write_report
from bon.errors import BonError

X = [52.0, 55.5, 61.0, 58.0, 66.5]
Y = [0.41, 0.47, 0.52, 0.44, 0.60]


def test_correlate_matches_numpy_and_scipy() -> None:
    c = correlate(X, Y)
    assert c["n"] == 5
    assert c["pearson_r"] == pytest.approx(np.corrcoef(X, Y)[0, 1])
    assert c["pearson_p"] == pytest.approx(stats.pearsonr(X, Y)[1])
    rx, ry = stats.rankdata(X), stats.rankdata(Y)
    assert c["spearman_rho"] == pytest.approx(np.corrcoef(rx, ry)[0, 1])
    assert c["spearman_p"] == pytest.approx(stats.spearmanr(X, Y)[1])


@pytest.mark.parametrize("x, y, n", [([1.0, 2.0], [3.0, 4.0], 2), ([], [], 0), ([1, 2, 3], [5, 5, 5], 3),
                                     ([7, 7, 7, 7], [1, 2, 3, 4], 4), ([1, np.nan, 3, 4], [1, 2, np.nan, 4], 2)])
def test_correlate_degenerate_is_nan(x, y, n) -> None:
    c = correlate(x, y)
    assert c["n"] == n
    assert all(math.isnan(c[k]) for k in ("pearson_r", "pearson_p", "spearman_rho", "spearman_p"))


def test_correlate_drops_non_finite_pairs() -> None:
    c = correlate(X + [np.nan], Y + [0.9])
    assert c["n"] == 5 and c["pearson_r"] == pytest.approx(np.corrcoef(X, Y)[0, 1])


def make_results() -> pd.DataFrame:
    rows = []
    judges = ["j1", "j2", "j3", "j4", "j5"]
    for task, gen, shift in [("edit", "g2", 0.1), ("t2i", "g1", 0.0), ("t2i", "g2", 0.05)]:
        for k, judge in enumerate(judges):
            rows.append({"task": task, "generator": gen, "judge": judge, "mmrb2_accuracy": X[k] + shift * 10,
                         "bon_score": Y[(k + int(shift * 20)) % 5] + shift, "random_score": 0.4 + shift,
                         "oracle_score": 0.7 + shift})
    return pd.DataFrame(rows)


def test_correlation_table_groups_and_orders() -> None:
    res = make_results()
    table = correlation_table(res)
    assert list(table.columns) == CORRELATION_COLUMNS
    assert list(zip(table["task"], table["generator"])) == [("t2i", "g1"), ("t2i", "g2"), ("edit", "g2")]
    for _, row in table.iterrows():
        sub = res[(res.task == row.task) & (res.generator == row.generator)]
        assert row.n_judges == len(sub)
        assert row.pearson_r == pytest.approx(stats.pearsonr(sub.mmrb2_accuracy, sub.bon_score)[0])
        assert row.spearman_rho == pytest.approx(stats.spearmanr(sub.mmrb2_accuracy, sub.bon_score)[0])
        assert row.spearman_p == pytest.approx(stats.spearmanr(sub.mmrb2_accuracy, sub.bon_score)[1])


def test_correlation_table_extra_key_and_errors() -> None:
    res = make_results()
    both = pd.concat([res.assign(strategy="knockout"), res.assign(strategy="round_robin")])
    with pytest.raises(BonError, match="several rows"):
        correlation_table(both)
    table = correlation_table(both, by=("task", "generator", "strategy"))
    assert len(table) == 6 and list(table.columns[:3]) == ["task", "generator", "strategy"]
    with pytest.raises(BonError, match="bon_score"):
        correlation_table(res.drop(columns="bon_score"))
    empty = correlation_table(res.iloc[:0])
    assert empty.empty and list(empty.columns) == CORRELATION_COLUMNS


def test_figure_written(tmp_path: Path) -> None:
    res = make_results()
    path = correlation_figure(res, correlation_table(res), tmp_path / "fig" / "correlation.png")
    assert path.stat().st_size > 10_000
    with Image.open(path) as im:
        assert im.format == "PNG" and im.width > 1000


def test_figure_with_empty_and_degenerate_panels(tmp_path: Path) -> None:
    res = make_results()
    res = res[res.task == "t2i"].copy()  # edit, interleaved and reasoning panels are empty
    res.loc[res.generator == "g2", "bon_score"] = 0.5  # constant: r undefined, flat fit
    one = res.iloc[[0]].assign(task="reasoning", generator="solo")  # a single judge: no line
    path = correlation_figure(pd.concat([res, one]), None, tmp_path / "c.png")
    assert path.stat().st_size > 0
    path = correlation_figure(res.iloc[:0], None, tmp_path / "empty.png")
    assert path.stat().st_size > 0


def test_markdown_table_helper() -> None:
    df = pd.DataFrame({"name": ["a|b", "c"], "v": [1.23456, np.nan], "k": [1, 2]})
    text = markdown_table(df, {"v": "{:.2f}"})
    lines = text.strip().splitlines()
    assert lines[0] == "| name | v | k |" and lines[1] == "| --- | ---: | ---: |"
    assert lines[2] == "| a\\|b | 1.23 | 1 |" and lines[3] == "| c | – | 2 |"


def test_gains_and_recovery() -> None:
    df = pd.DataFrame({"bon_score": [0.6, 0.5], "random_score": [0.4, 0.5], "oracle_score": [0.8, 0.5]})
    g = with_gains(df)
    assert g["gain"].tolist() == pytest.approx([0.2, 0.0])
    assert g["recovery"][0] == pytest.approx(0.5) and math.isnan(g["recovery"][1])
    lo, hi = fisher_ci(0.8, 12)
    z, half = np.arctanh(0.8), 1.959964 / math.sqrt(9)
    assert (lo, hi) == pytest.approx((math.tanh(z - half), math.tanh(z + half)), abs=1e-5)
    assert all(math.isnan(v) for v in fisher_ci(0.8, 3))


def test_report_contains_tables(tmp_path: Path) -> None:
    res = make_results()
    corr = correlation_table(res)
    context = {"seed": 13, "n": 8, "prompts_per_task": {"t2i": 12, "edit": 6}, "generators": ["g1", "g2"],
               "judges": ["j1", "j2", "j3", "j4", "j5"], "strategy": "knockout",
               "timings": {"generate": 1.5, "judge": 2.25}, "versions": {"bon": "0.1.0"}}
    path = write_report(tmp_path, res, corr, context)
    text = path.read_text(encoding="utf-8")
    assert path == tmp_path / "report.md" and (tmp_path / "correlation.png").stat().st_size > 0
    assert "![](correlation.png)" in text
    assert "| task | generator | judges | Pearson r | r 95% CI | p (r) | Spearman ρ | p (ρ) |" in text
    for title in ("### Text-to-image", "### Image editing"):
        assert title in text
    assert "| generator | judge | MMRB2 acc. (%) | BoN score | random | oracle | gain | recovery |" in text
    assert f"{corr.loc[0, 'pearson_r']:+.2f}" in text
    assert "knockout" in text and "13" in text and "t2i 12" in text and "| judge | 2.2" in text
    assert "## Interpretation" in text and "j1" in text
    assert "interleaved" not in text.split("## Judges per task")[1].lower()  # no empty task sections


def test_report_needs_the_columns(tmp_path: Path) -> None:
    with pytest.raises(BonError, match="oracle_score"):
        write_report(tmp_path, make_results().drop(columns="oracle_score"), pd.DataFrame(), {})
