"""The four scaled-down paper settings run end to end through `bon run` on tiny random models, and
`bon verify` (verify_command) rescores a finished study with another verifier, resumably.

Each test runs the real config file from configs/ (paths pointed at the tiny models built once per
session, N = 3 and one or two prompts instead of 8 and the whole copy, to keep the suite fast: two
prompts only where a test looks at the second one), each once for the module: benchmark suite -> two
base generators -> knockout with three judges -> the benchmark's verifier -> results table and report,
which names the metric that scored the study and the failed scores per setting.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before huggingface_hub reads it at import
os.environ["HF_DATASETS_OFFLINE"] = "1"
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("diffusers")
pytest.importorskip("datasets")

import yaml  # noqa: E402

from bon.cli import main  # noqa: E402
from bon.errors import BonError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import make_tiny_models
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    out = tmp_path_factory.mktemp("tiny")
    make_tiny_models.make(out)
    return out


N = 3  # candidates per prompt: a knockout with a bye, 2(N - 1) calls a prompt all the same
PROMPTS = {"t2i": 2, "edit": 1, "interleaved": 1, "reasoning": 2}  # 2 where a test reads the second prompt
METRIC = {"t2i": "vqascore, metric official", "edit": "gedit, metric bon", "interleaved": "isg, metric bon",
          "reasoning": "emma, metric official"}  # the tiny configs pin bon's metric where a random model writes no JSON


def shrunk_config(name: str, tiny: Path, out: Path, n: int = N, limit: int = 2) -> Path:
    """configs/<name>.yaml with its tiny paths pointed at ``tiny``, a smaller N and fewer prompts."""
    text = (ROOT / "configs" / f"{name}.yaml").read_text(encoding="utf-8").replace("runs/tiny/", f"{tiny.as_posix()}/")
    raw = yaml.safe_load(text)
    raw["out"] = str(out)
    raw["n"] = n
    raw["suite"]["limit"] = limit
    path = out.parent / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def results(run: Path) -> list[dict]:
    with (run / "results.csv").open() as fh:
        return list(csv.DictReader(fh))


def scores(run: Path, file: str = "scores.jsonl") -> list[dict]:
    return [json.loads(line) for line in (run / file).read_text().splitlines() if line.strip()]


def check_run(run: Path, generators: int, judges: int, task: str, n: int = N) -> list[dict]:
    """Every (generator, judge) scored, both axes filled (the published accuracies the config's
    ``accuracies: published`` names) and a correlation over all three judges in the report."""
    rows, prompts = results(run), PROMPTS[task]
    assert len(rows) == generators * judges
    assert all(r["bon_score"] != "" and r["random_score"] != "" for r in rows)
    assert all(int(r["judge_calls"]) == prompts * 2 * (n - 1) for r in rows)  # knockout: 2(N-1) calls a prompt
    assert all(r["mmrb2_accuracy"] != "" for r in rows)  # the x axis: published, no preference set from a suite
    with (run / "correlations.csv").open() as fh:
        settings = [r for r in csv.DictReader(fh) if r["scope"] == "setting"]
    assert len(settings) == generators and all(int(r["n_judges"]) == judges for r in settings)
    recs = scores(run)
    assert len(recs) == generators * prompts * n
    report = (run / "report.md").read_text()
    answer = next(line for line in report.splitlines() if line.startswith("**Answer in one line:** "))
    # a tiny run's r may be undefined (too few judges, or no spread): then the headline says why, never "r = -"
    assert answer.startswith(("**Answer in one line:** Pearson r = ", "**Answer in one line:** r is undefined: "))
    assert "Not enough data" not in report
    assert f"- **Verifier metric:** {METRIC[task]}\n" in report
    failed = next(line for line in report.splitlines() if line.startswith("- **Failed verifier scores:** "))
    for gen in {r["generator"] for r in recs}:  # per setting: failed of stored
        count = sum(r["score"] is None for r in recs if r["generator"] == gen)
        assert f"{task}/{gen}: {count} of {prompts * n}" in failed
    assert (run / "figures" / "correlation.png").exists()
    return recs


TASKS = ("t2i", "edit", "interleaved", "reasoning")


@pytest.fixture(scope="module")
def paper_runs(tiny, tmp_path_factory) -> dict[str, Path]:
    """`bon run` on each of the four configs/paper_*_tiny.yaml, once for the module."""
    runs = {}
    for task in TASKS:
        out = tmp_path_factory.mktemp("e2e") / task
        assert main(["run", str(shrunk_config(f"paper_{task}_tiny", tiny, out, limit=PROMPTS[task]))]) == 0
        runs[task] = out
    return runs


@pytest.fixture(scope="module")
def reasoning_run(paper_runs) -> Path:
    return paper_runs["reasoning"]


def test_the_four_runs_make_the_papers_figure_and_table(paper_runs, tmp_path, capsys):
    out = tmp_path / "figure"
    assert main(["figure", *[a for t in TASKS for a in ("--run", str(paper_runs[t]))], "--out", str(out)]) == 0
    assert "tasks: t2i, edit, interleaved, reasoning" in capsys.readouterr().out
    assert (out / "figures" / "correlation.png").stat().st_size > 10_000 and (out / "figures" / "correlation.svg").exists()
    table = (out / "table.md").read_text().splitlines()
    assert [line.split(" | ")[0] for line in table[2:10]] == [f"| {t}" for t in TASKS for _ in (0, 1)]
    with (out / "correlations.csv").open() as fh:
        assert {r["task"] for r in csv.DictReader(fh) if r["scope"] == "setting"} == set(TASKS)


def test_t2i_genai_bench_vqascore(paper_runs):
    out = paper_runs["t2i"]
    recs = check_run(out, generators=2, judges=3, task="t2i")
    assert all(r["missing"] is None and 0.0 <= r["score"] <= 1.0 for r in recs)
    d = recs[0]["details"]
    assert d["question"].startswith('Does this figure show "') and d["grader"]["revision"].startswith("local:")
    prompts = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]
    assert [p["id"] for p in prompts] == ["00001", "00002"]
    assert prompts[1]["metadata"]["category"] == "advanced"


def test_edit_gedit_bench_sc_pq(paper_runs):
    out = paper_runs["edit"]
    recs = check_run(out, generators=2, judges=3, task="edit")
    for r in recs:
        d = r["details"]
        assert r["missing"] is None
        assert r["score"] == pytest.approx((d["sc"] * d["pq"]) ** 0.5 / 10, abs=1e-3)
        assert d["sc"] == pytest.approx(min(d["sc_scores"]), abs=1e-3)
    prompts = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]
    assert prompts[0]["content"][1][0] == "image" and (out / prompts[0]["content"][1][1]).exists()


def test_interleaved_isg_bench_levels(paper_runs):
    out = paper_runs["interleaved"]
    recs = check_run(out, generators=2, judges=3, task="interleaved")
    first = [r for r in recs if r["prompt_id"] == "0000"]
    strong = [r for r in first if r["generator"] == "strong"]
    weak = [r for r in first if r["generator"] == "weak"]
    # the strong agent draws 2 pictures after its text, as ISG query 0000 asks; the weak one draws 1
    assert all(r["details"]["structure"]["ok"] for r in strong)
    assert all(set(r["details"]["level_scores"]) == {"structure", "block", "image", "holistic"} for r in strong)
    assert all(not r["details"]["structure"]["ok"] and r["details"]["level_scores"]["image"] == 0 for r in weak)
    assert min(r["score"] for r in strong) > max(r["score"] for r in weak)


def test_reasoning_emma_exact_match(reasoning_run):
    recs = check_run(reasoning_run, generators=2, judges=3, task="reasoning")
    assert all(r["score"] in (0.0, 1.0) and "rule" in r["details"] for r in recs)
    assert {r["details"]["reference"] for r in recs} == {"C", "9"}


def test_verify_command_other_verifier_separate_file_and_resume(reasoning_run, tmp_path):
    from verifiers.cli_support import verify_command

    # human-style labels for every candidate of the strong generator only: the weak ones stay missing
    labels = tmp_path / "labels.csv"
    rows = ["prompt_id,generator,index,score"] + [f"{pid},strong,{k},{1 + (k % 5)}" for pid in ("math_1", "math_2") for k in range(N)]
    labels.write_text("\n".join(rows) + "\n")
    opts = {"path": str(labels), "scale": [1, 5], "label": "humans"}
    s = verify_command(reasoning_run, "labels", dict(opts))
    assert s["scores_file"].endswith("scores_humans.jsonl") and not s["study_verifier"]
    assert s["candidates"] == 2 * 2 * N and s["newly_scored"] == 2 * 2 * N and s["missing"] == 2 * N
    assert "no label for prompt" in next(iter(s["missing_reasons"]))
    got = {(r["generator"], r["prompt_id"], r["index"]): r["score"] for r in scores(reasoning_run, "scores_humans.jsonl")}
    assert got[("strong", "math_1", 2)] == pytest.approx(0.5)
    rows = {(r["generator"], r["judge"]): r for r in s["results"]}
    assert rows[("strong", "Qwen3-VL-8B")]["bon_score"] is not None and rows[("weak", "Qwen3-VL-8B")]["bon_score"] is None
    assert (reasoning_run / "results_humans.csv").exists()
    record = json.loads((reasoning_run / "scores_humans.json").read_text())
    assert record["identity"]["sha256"] and record["verifier"] == "labels"
    # the study's scores are untouched, and a rerun scores nothing new
    assert len(scores(reasoning_run)) == 2 * 2 * N
    again = verify_command(reasoning_run, "labels", dict(opts))
    assert again["newly_scored"] == 0 and again["missing"] == 2 * N
    # another verifier under the same label is refused
    with pytest.raises(BonError, match="another label"):
        verify_command(reasoning_run, "emma", {"label": "humans"})
    # the study's own verifier resumes into scores.jsonl
    own = verify_command(reasoning_run, "emma", {})
    assert own["study_verifier"] and own["scores_file"].endswith("scores.jsonl") and own["newly_scored"] == 0


def test_verify_command_on_a_folder_that_is_no_study(tmp_path):
    from verifiers.cli_support import verify_command

    with pytest.raises(BonError, match="not a study folder"):
        verify_command(tmp_path, "emma", {})
