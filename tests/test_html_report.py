"""The full report of a run folder: files written, HTML self-contained, report.md rewritten identically,
two runs compared, and the published-accuracy figure drawn for a user's Best-of-N scores CSV."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from analysis.bundle import compute
from analysis.html_report import compare_runs, html_table
from analysis.outputs import write_report
from analysis.scores_figure import scores_figure
from analysis_run import make_run
from bon.errors import BonError
from bon.runfolder import RunFolder


def build_report(run: Path, **kwargs) -> dict:
    bundle = compute(run, **kwargs)
    return {**write_report(bundle, RunFolder(run)), "pooled": bundle.pooled(),
            "warnings": int(bundle.correlations["flag"].sum())}

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    run = make_run(tmp_path_factory.mktemp("runs") / "run", prompts=8, n=4)
    (run / "curves").mkdir()
    rows = [{"task": t, "generator": g, "n": n, "subsets": 4, "bon_score": 0.5 + 0.05 * n * (j + 1) / 4,
             "random_score": 0.5, "oracle_score": 0.5 + 0.1 * n, "extra_calls": 0}
            for t in ("t2i", "edit") for g in ("g1", "g2") for n in (1, 2, 4) for j in range(2)]
    for j in range(2):
        (run / "curves" / f"judge-{j}.json").write_text(json.dumps({"judge": f"judge-{j}", "strategy": "knockout",
                                                                    "curve": rows[j::2]}))
    out = build_report(run, bootstrap=200, seed=0)
    return run, out


def test_build_report_writes_every_file(built: tuple[Path, dict]) -> None:
    run, out = built
    for key in ("html", "metrics", "correlations", "accuracies", "leaderboard", "power", "json", "markdown"):
        assert Path(out[key]).exists() and Path(out[key]).stat().st_size > 0, key
    for name in ("correlation", "reranker", "curves", "power"):
        for suffix in (".png", ".svg"):
            path = run / "figures" / f"{name}{suffix}"
            assert path.exists() and path.stat().st_size > 1000, path
    with Image.open(run / "figures" / "correlation.png") as im:
        assert im.width > 1000
    assert "<svg" in (run / "figures" / "correlation.svg").read_text()[:2000]
    corr = pd.read_csv(out["correlations"])
    assert {"pearson_r", "pearson_lo", "pearson_hi", "pearson_p_perm", "pearson_loo_min", "n_judges", "n_prompts",
            "n_pairs", "warning"} <= set(corr.columns)
    payload = json.loads(Path(out["json"]).read_text())
    assert payload["bootstrap"] == 200 and len(payload["correlations"]) == len(corr)
    assert out["pooled"]["n_judges"] == 6 and isinstance(out["warnings"], int)


def test_html_is_self_contained(built: tuple[Path, dict]) -> None:
    run, out = built
    text = Path(out["html"]).read_text(encoding="utf-8")
    assert not EXTERNAL.search(text), EXTERNAL.search(text).group(0)
    assert "<script src" not in text and "<link rel=\"stylesheet\"" not in text
    assert text.count("data:image/png;base64,") >= 4  # figures inline
    assert "data:image/svg+xml;base64," in text and "data:text/csv;base64," in text
    assert 'class="sortable"' in text and "addEventListener('click'" in text
    for section in ('id="answer"', 'id="correlations"', 'id="judges"', 'id="reranker"', 'id="curves"', 'id="power"',
                    'id="samples"'):
        assert section in text
    assert "judge-5" in text and "class=\"cand" in text  # the sampled candidates with picks
    # every img comes from a data URI
    assert all(src.startswith("data:") for src in re.findall(r'<img[^>]*src="([^"]+)"', text))


def test_report_md_is_written_whole_and_reproducibly(built: tuple[Path, dict]) -> None:
    run, out = built
    text = Path(out["markdown"]).read_text(encoding="utf-8")
    assert text.startswith("# Does MMRB2") and text.count("## Correlation between") == 1
    assert "| r 95% CI | CI (meas.) |" in text and "LOO r" in text and "p (r)" in text
    assert "`report.html`" in text and "`correlations.csv`" in text
    build_report(run, bootstrap=200, seed=0)
    assert Path(out["markdown"]).read_text(encoding="utf-8") == text


def test_html_table_escapes_and_sorts_numbers() -> None:
    html = html_table([{"name": "<b>x</b>", "v": 0.5}, {"name": "y", "v": float("nan")}],
                      [("name", "", lambda r: r["name"], None), ("v", "", lambda r: r["v"], lambda r: f"{r['v']:.2f}")])
    assert "&lt;b&gt;x&lt;/b&gt;" in html and 'data-v="0.5"' in html and "<b>x" not in html


def test_compare_runs(built: tuple[Path, dict], tmp_path: Path) -> None:
    run_a, _ = built
    run_b = make_run(tmp_path / "other", prompts=8, n=4, seed=5, images=False)
    path = compare_runs(run_a, run_b, tmp_path / "cmp", bootstrap=100)
    text = path.read_text(encoding="utf-8")
    assert not EXTERNAL.search(text) and "Δ BoN" in text
    table = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    row = table.iloc[0]
    assert row.delta_bon_score == pytest.approx(row.bon_score_b - row.bon_score_a)
    assert (tmp_path / "cmp" / "figures" / "forest.svg").exists()
    corr = pd.read_csv(tmp_path / "cmp" / "compare_correlations.csv")
    assert {"pearson_r_a", "pearson_r_b", "pearson_lo_a", "pearson_hi_b", "delta_pearson_r"} <= set(corr.columns)


def test_published_accuracy_figure_for_user_scores(tmp_path: Path) -> None:
    csv = tmp_path / "my_scores.csv"
    rows = []
    for task in ("t2i", "edit"):
        for k, judge in enumerate(["GPT-5", "gemini 2.5 pro", "GPT-4o", "Qwen3-VL-8B", "Gemma 3 4B", "qwen2.5-vl-72b",
                                   "Unknown Judge"]):
            rows.append({"task": task, "generator": "my-gen", "judge": judge, "bon_score": 0.8 - 0.04 * k,
                         "random_score": 0.5, "oracle_score": 0.95, "n_prompts": 200, "bon_sd": 0.25})
    pd.DataFrame(rows).to_csv(csv, index=False)
    out = scores_figure(csv, "published", bootstrap=200)
    assert out["png"] == tmp_path / "my_scores_figure" / "figures" / "correlation.png"
    assert out["png"].exists() and out["svg"].exists() and out["correlations"].exists()
    assert out["matched"]["GPT-5"] == "GPT-5" and out["matched"]["qwen2.5-vl-72b"] == "Qwen2.5-VL-72B"
    assert out["matched"]["gemini 2.5 pro"] == "Gemini 2.5 Pro"
    assert out["left_out"] == ["Unknown Judge (t2i)", "Unknown Judge (edit)"]
    t = out["table"]
    setting = t[(t.scope == "setting") & (t.task == "t2i")].iloc[0]
    assert setting.n_judges == 6 and setting.x_resampling == "binomial" and setting.y_resampling == "normal"
    with Image.open(out["png"]) as im:
        assert im.width > 1000
    with pytest.raises(BonError, match="bon_score"):
        pd.DataFrame(rows).drop(columns="bon_score").to_csv(tmp_path / "bad.csv", index=False)
        scores_figure(tmp_path / "bad.csv")


def test_html_report_of_a_small_run(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", qualities=(0.4, 0.6, 0.8), prompts=4, n=3, tasks=("t2i",), generators=("g",),
                   images=False)
    path = build_report(run, bootstrap=100, power=False)["html"]
    text = path.read_text(encoding="utf-8")
    assert path.name == "report.html" and "only 3 judges" in text and not EXTERNAL.search(text)
