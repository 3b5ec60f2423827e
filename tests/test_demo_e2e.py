"""The demo study end to end at a small size: files, call counts, resume, and bad input."""

import json

import pandas as pd
import pytest

from bon.cli import main

SMALL = ["--prompts", "3", "--n", "4"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out), *SMALL, "--seed", "1"]) == 0
    return out


def test_outputs_match_the_recorded_reference(demo_run, tmp_path):
    """results, correlations, metrics, accuracies, leaderboard, headroom, report.json and tradeoff.json as
    recorded before the analysis moved onto bon.load_run (tests/demo_reference.py says what is left out).
    First in this module: later tests add files to the demo folder."""
    from demo_reference import DEMO_ARGS, TRADEOFF_ARGS, compare

    assert [*SMALL, "--seed", "1"] == DEMO_ARGS
    assert main(["tradeoff", "--run", str(demo_run), *TRADEOFF_ARGS, "--out", str(tmp_path)]) == 0
    assert compare(demo_run, tmp_path) == []


def test_load_run_frames_and_the_readme_example(demo_run, tmp_path, monkeypatch, capsys):
    """bon.load_run reads the demo into frames that agree with its files, and the README's notebook
    example runs on it as printed."""
    import re
    from pathlib import Path

    import bon
    from bon.errors import BonError

    run = bon.load_run(demo_run)
    picks = [json.loads(line) for line in (demo_run / "picks.jsonl").read_text().splitlines()]
    assert run.picks.shape[0] == len(picks) and set(run.picks["source"]) == {"picks.jsonl"}
    knockout = run.picks[run.picks.strategy == "knockout"]
    assert len(run.matches) == sum(len(m) for m in knockout["matches"])  # every match, once
    assert (run.matches["fwd_verdict"] != "").mean() > 0.9 and set(run.matches["rev_verdict"]) <= {"A", "B", ""}
    assert len(run.scores) == len(run.candidates) == len(run.prompts) * 2 * 4  # 2 generators x N=4 candidates
    acc = run.accuracies.set_index(["judge", "task"])["accuracy"]
    results = pd.read_csv(demo_run / "results.csv").set_index(["judge", "task"])["mmrb2_accuracy"]
    for key, value in results.items():
        assert acc[key] == pytest.approx(value, abs=1e-3), key
    assert run.calls["calls"].sum() > 0 and run.n == 4
    with pytest.raises(BonError, match="not a run folder"):
        bon.load_run(tmp_path)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = re.search(r"## In a notebook.*?```python\n(.*?)```", readme, re.S).group(1)
    (tmp_path / "bon-demo").symlink_to(demo_run)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {})
    assert (tmp_path / "my_correlation.png").stat().st_size > 0
    assert "verifier-twin" in capsys.readouterr().out


def test_recorded_candidate_digests_are_the_pixels_and_old_records_still_load(demo_run, tmp_path):
    """Every candidate record carries its content's digest, hashed as it was written: equal to the digest of
    its images read back. load_run keys the stored verdicts on it and reads no image (the matches come out
    the same with the images deleted); records without one (written before) load to the same matches, and
    so do records whose digest is wrong (checked against the pixels when no verdict is found under it);
    a digest that is not one is a one-line error."""
    import shutil

    import bon
    from bon.content import load_candidates, recorded_digest
    from bon.errors import BonError

    expected, copy = bon.load_run(demo_run).matches, tmp_path / "run"
    shutil.copytree(demo_run, copy)
    path = copy / "candidates" / "strong" / "candidates.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for gen in ("strong", "weak"):
        found = load_candidates(demo_run / "candidates" / gen / "candidates.jsonl")
        lines = (demo_run / "candidates" / gen / "candidates.jsonl").read_text().splitlines()
        assert found and [recorded_digest(json.loads(line), "") for line in lines] == [c.content.digest for c in found]

    def matches_with(changed: list[dict]) -> pd.DataFrame:
        path.write_text("".join(json.dumps(r) + "\n" for r in changed))
        return bon.load_run(copy).matches

    pd.testing.assert_frame_equal(matches_with([{k: v for k, v in r.items() if k != "digest"} for r in records]), expected)
    wrong = [{**r, "digest": "0" * 64} if k % 3 == 0 else r for k, r in enumerate(records)]
    pd.testing.assert_frame_equal(matches_with(wrong), expected)
    with pytest.raises(BonError, match=r"candidates.jsonl:2: digest must be 64 lowercase hex digits"):
        matches_with([records[0], {**records[1], "digest": 12}, *records[2:]])
    shutil.rmtree(copy / "candidates" / "strong" / "images")
    shutil.rmtree(copy / "candidates" / "weak" / "images")
    pd.testing.assert_frame_equal(matches_with(records), expected)


def test_outputs_exist_and_have_the_promised_columns(demo_run):
    for name in ("report.md", "figures/correlation.png", "results.csv", "correlations.csv", "stats.json", "config.yaml"):
        assert (demo_run / name).stat().st_size > 0, name
    results = pd.read_csv(demo_run / "results.csv")
    for col in ("task", "generator", "judge", "mmrb2_accuracy", "bon_score", "random_score", "oracle_score", "judge_calls", "prompts", "n"):
        assert col in results.columns
    assert set(results.task) == {"t2i", "edit", "interleaved", "reasoning"}
    assert results.judge.nunique() == 9 and results.generator.nunique() == 2
    corr = pd.read_csv(demo_run / "correlations.csv")
    assert {"task", "generator", "scope", "n_judges", "pearson_r", "spearman_rho"} <= set(corr.columns)
    assert len(corr[corr.scope == "setting"]) == 8


def test_knockout_costs_two_calls_per_match(demo_run):
    results = pd.read_csv(demo_run / "results.csv")
    n = 4
    assert (results.judge_calls == results.prompts * 2 * (n - 1)).all()


def test_results_match_the_picks_and_scores_on_disk(demo_run):
    """results.csv recomputed by hand from picks.jsonl and scores.jsonl: every BoN, random and oracle level."""
    scores = {(r["generator"], r["prompt_id"], r["index"]): r["score"]
              for r in map(json.loads, (demo_run / "scores.jsonl").read_text().splitlines())}
    picks = [json.loads(line) for line in (demo_run / "picks.jsonl").read_text().splitlines()]
    results = pd.read_csv(demo_run / "results.csv").set_index(["task", "generator", "judge"])
    n = 4
    for (task, gen, judge), row in results.iterrows():
        mine = [p for p in picks if (p["task"], p["generator"], p["judge"]) == (task, gen, judge)]
        assert len(mine) == row.prompts == 3
        per_prompt = [[scores[(gen, p["prompt_id"], k)] for k in range(n)] for p in mine]
        assert row.bon_score == pytest.approx(sum(scores[(gen, p["prompt_id"], p["index"])] for p in mine) / 3, abs=1e-5)
        assert row.random_score == pytest.approx(sum(sum(v) / n for v in per_prompt) / 3, abs=1e-5)
        assert row.oracle_score == pytest.approx(sum(max(v) for v in per_prompt) / 3, abs=1e-5)


def test_mmrb2_folder_is_in_the_official_layout(demo_run):
    from bon.mmrb2 import load_judgments, load_pairs

    bench = demo_run / "mmrb2"
    files = sorted(p.name for p in bench.glob("*.json"))
    assert files == ["edit.json", "interleaved.json", "reasoning.json", "t2i.json"]
    pairs = load_pairs(bench / "edit.json")
    assert pairs and all(p.chosen in "AB" for p in pairs)
    raw = json.loads((bench / "edit.json").read_text())["pairs"][0]
    assert {"id", "prompt_source", "prompt_content", "prompt_metadata", "response_a", "response_b", "chosen", "human_annotations"} <= set(raw)
    assert (bench / "input_images" / raw["prompt_content"][0][1]).exists()
    assert (bench / "images" / raw["response_a"]["response_content"][0][1]).exists()
    judgments = load_judgments(bench / "judgments" / "random" / "edit.json")
    assert set(judgments) == {p.id for p in pairs}
    assert all(len(j["forward"]) == 1 and len(j["reverse"]) == 1 for j in judgments.values())


def test_rerun_makes_no_new_calls(demo_run, capsys):
    before = json.loads((demo_run / "stats.json").read_text())
    results_before = pd.read_csv(demo_run / "results.csv")
    assert all(s["calls_made"] > 0 for s in before["judges"].values())
    assert main(["demo", "--out", str(demo_run), *SMALL, "--seed", "1"]) == 0
    after = json.loads((demo_run / "stats.json").read_text())
    for name, s in after["judges"].items():
        last, was = s["last_invocation"], before["judges"][name]
        assert last["calls_made"] == 0, name
        assert last["calls_cached"] == was["last_invocation"]["calls_made"] + was["last_invocation"]["calls_cached"]
        # the study's totals count the first invocation's paid calls, not zero
        assert s["total"]["calls_made"] == was["total"]["calls_made"] and s["calls_made"] == was["calls_made"]
        assert s["total"]["calls_cached"] == was["total"]["calls_cached"]
    pd.testing.assert_frame_equal(pd.read_csv(demo_run / "results.csv"), results_before)


def test_other_seed_gives_other_numbers(demo_run, tmp_path):
    assert main(["demo", "--out", str(tmp_path), *SMALL, "--seed", "2"]) == 0
    a = pd.read_csv(demo_run / "results.csv")
    b = pd.read_csv(tmp_path / "results.csv")
    assert not a[["bon_score", "mmrb2_accuracy"]].equals(b[["bon_score", "mmrb2_accuracy"]])


def test_changed_settings_refuse_the_folder(demo_run, capsys):
    assert main(["demo", "--out", str(demo_run), "--prompts", "3", "--n", "5", "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert "holds a study with other n" in err and "Traceback" not in err


def test_missing_image_is_a_one_line_error(demo_run, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(demo_run, copy)
    victim = sorted((copy / "candidates" / "weak" / "images").glob("*.png"))[0]
    victim.unlink()
    (copy / "mmrb2" / "judgments" / "random" / "t2i.json").write_text("{\"torn", encoding="utf-8")  # a resume would redo it
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.name not in ("config.yaml", "invocations.json")}
    capsys.readouterr()
    assert main(["demo", "--out", str(copy), *SMALL, "--seed", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert victim.name in err and "image file not found" in err and "\n" not in err
    # refused before the preference set or any judge wrote: only the resume's provenance records changed
    assert {p: p.read_bytes() for p in before} == before


def test_random_judge_is_chance_level(demo_run):
    results = pd.read_csv(demo_run / "results.csv")
    rnd = results[results.judge == "random"]
    assert 30 <= rnd.mmrb2_accuracy.mean() <= 70
    assert abs((rnd.bon_score - rnd.random_score).mean()) < 0.2
    best = results[results.judge == "verifier-twin"]
    assert best.mmrb2_accuracy.mean() > rnd.mmrb2_accuracy.mean() + 15
    assert (best.bon_score - best.random_score).mean() > (rnd.bon_score - rnd.random_score).mean()


def test_select_round_robin_reuses_knockout_judgments(demo_run, tmp_path):
    out = tmp_path / "rr.json"
    assert main(["select", "--run", str(demo_run), "--judge", "verifier-twin", "--strategy", "round-robin", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    n, groups = 4, 2 * 4 * 3  # N; generators x tasks x prompts
    assert data["calls_made"] + data["calls_cached"] == groups * n * (n - 1)
    # the knockout's 2(N-1) per group come from the store; identical candidates are asked only once
    assert data["calls_cached"] >= groups * 2 * (n - 1)
    assert data["calls_made"] <= groups * (n * (n - 1) - 2 * (n - 1))
    assert len(data["picks"]) == groups
    assert (demo_run / "picks" / "verifier-twin__round-robin.jsonl").exists()
    assert main(["select", "--run", str(demo_run), "--judge", "verifier-twin", "--strategy", "round-robin", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["calls_made"] == 0


def test_curve_runs_from_stored_judgments(demo_run, tmp_path):
    out = tmp_path / "curve.json"
    assert main(["curve", "--run", str(demo_run), "--judge", "verifier-twin", "--subsets", "3", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["curve"]
    assert sorted({r["n"] for r in rows}) == [1, 2, 4]
    for r in rows:
        assert r["random_score"] - 1e-9 <= r["oracle_score"]
        if r["n"] == 1:
            assert r["bon_score"] == pytest.approx(r["random_score"]) and r["extra_calls"] == 0
        if r["n"] == 4:
            assert r["extra_calls"] == 0  # the full tournament is already stored


def test_select_on_a_folder_that_is_no_study(tmp_path, capsys):
    assert main(["select", "--run", str(tmp_path), "--judge", "random"]) == 2
    assert "not a study folder" in capsys.readouterr().err


def test_statistical_report_and_its_commands(demo_run, tmp_path, capsys):
    import re

    html = (demo_run / "report.html").read_text()
    assert "<table" in html and "data:image/png;base64," in html
    assert not re.search(r'(src|href)="https?://', html)  # self-contained
    for name in ("metrics.csv", "correlations.csv", "accuracies.csv", "leaderboard.csv", "report.json"):
        assert (demo_run / name).stat().st_size > 0, name
    ci = pd.read_csv(demo_run / "correlations.csv")
    assert {"pearson_r", "pearson_lo", "pearson_hi", "spearman_rho", "n_judges"} <= set(ci.columns)
    assert (ci.pearson_lo <= ci.pearson_hi).all()
    assert main(["leaderboard", "--run", str(demo_run), "--task", "t2i", "--generator", "strong"]) == 0
    assert "verifier-twin" in capsys.readouterr().out
    assert main(["compare", "--run", str(demo_run), "--run", str(demo_run), "--out", str(tmp_path / "cmp")]) == 0
    assert (tmp_path / "cmp" / "compare.html").exists()
    # a user's own Best-of-N scores against the accuracies published with MMRB2
    scores = tmp_path / "scores.csv"
    judges = ["Gemma 3 4B", "Gemma 3 27B", "Qwen2.5-VL-72B", "Qwen3-VL-8B", "GPT-4o"]
    pd.DataFrame({"task": "t2i", "generator": "mine", "judge": judges, "bon_score": [0.50, 0.55, 0.58, 0.61, 0.57]}).to_csv(scores, index=False)
    assert main(["figure", "--scores", str(scores), "--out", str(tmp_path / "fig")]) == 0
    assert (tmp_path / "fig" / "figures" / "correlation.png").stat().st_size > 0
    assert (tmp_path / "fig" / "figures" / "correlation.svg").exists()
    assert len(pd.read_csv(tmp_path / "fig" / "correlations.csv")) >= 1


def test_bad_analysis_commands_leave_the_demo_folder_byte_identical(demo_run, tmp_path, monkeypatch, capsys):
    import hashlib
    import os
    from pathlib import Path

    def snapshot():
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(demo_run.rglob("*")) if p.is_file()}

    before = snapshot()
    bad = [["report", "--run", str(demo_run), "--accuracies", "published"],
           ["report", "--run", str(demo_run), "--accuracies", str(tmp_path / "absent.csv")],
           ["leaderboard", "--run", str(demo_run), "--task", "t2i", "--generator", "nobody"],
           ["power", "--run", str(demo_run), "--task", "nothing"],
           ["figure", "--scores", str(demo_run / "stats.json"), "--out", str(tmp_path / "f")],
           ["compare", "--run", str(demo_run)]]
    for args in bad:
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip()
        assert err.startswith("bon: error:") and "\n" not in err, (args, err)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if mode == os.W_OK and Path(p) == demo_run
                        else real(p, mode, **kw))
    assert main(["report", "--run", str(demo_run)]) == 2
    assert "not writable" in capsys.readouterr().err
    assert snapshot() == before


def test_every_json_file_of_the_demo_is_strict(demo_run):
    def refuse(name):
        raise ValueError(name)

    files = list(demo_run.rglob("*.json"))
    assert len(files) > 10
    for path in files:
        json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


class InkVerifier:
    """Another downstream metric (prefers less ink): swapping it in must not touch the preference set."""

    name = "ink-test"

    def __init__(self, name=None):
        self.name = name or self.name

    def identity(self):
        return {"name": "ink-test"}

    def score(self, prompt, candidate):
        import numpy as np

        from bon.plugins import Score

        images = candidate.content.images
        if not images:
            return Score(0.5)
        return Score(float(np.mean([np.asarray(im.load()).mean() / 255.0 for im in images])))


def test_preference_set_ignores_the_verifier(demo_run, tmp_path, monkeypatch):
    """Truth -> annotators -> labels is its own code path: another verifier leaves every file of the
    preference set byte-identical, while the verifier's measured agreement with the labels changes."""
    import verifiers
    from bon.config import PluginSpec
    from bon.demo import demo_config
    from bon.study import run_study

    monkeypatch.setitem(verifiers.PLUGINS, "ink-test", f"{__name__}:InkVerifier")
    cfg = demo_config(out=tmp_path / "ink", prompts=3, n=4, seed=1)
    cfg.verifier = PluginSpec("ink-test", "ink-test")
    cfg.judges = [PluginSpec("random", "random")]
    run_study(cfg)
    ours, theirs = demo_run / "mmrb2", tmp_path / "ink" / "mmrb2"
    files = sorted(p.relative_to(ours) for p in ours.rglob("*") if p.is_file() and "judgments" not in p.parts)
    assert files and files == sorted(p.relative_to(theirs) for p in theirs.rglob("*") if p.is_file() and "judgments" not in p.parts)
    for f in files:
        assert (ours / f).read_bytes() == (theirs / f).read_bytes(), f
    a = json.loads((demo_run / "stats.json").read_text())["verifier_agreement"]
    b = json.loads((tmp_path / "ink" / "stats.json").read_text())["verifier_agreement"]
    assert set(a) == {"t2i", "edit", "interleaved", "reasoning"} and a != b


def test_verifier_agrees_with_annotators_on_fewer_than_all_pairs(demo_run):
    agreement = json.loads((demo_run / "stats.json").read_text())["verifier_agreement"]
    pairs = sum(a["pairs"] for a in agreement.values())
    agreed = sum(a["agreement"] * a["pairs"] for a in agreement.values())
    assert pairs >= 40 and 0.5 < agreed / pairs < 1.0
    report = (demo_run / "report.md").read_text()
    assert "verifier agrees with annotators" in report and "simulated expert annotators" in report


def test_report_carries_the_predictor_table_and_flags_the_twin(demo_run):
    report = json.loads((demo_run / "report.json").read_text())["predictors"]
    predictors = {r["predictor"] for r in report["correlations"]}
    assert predictors == {"overall", "same_model", "different_model", "position_consistency", "tie_missing"}
    for r in report["correlations"]:
        if r["r"] is not None and r["r_lo"] is not None:
            assert r["r_lo"] <= r["r"] + 1e-9 <= r["r_hi"] + 2e-9
    flagged = {r["judge"] for r in report["shared_grader"]}
    assert "verifier-twin" in flagged and "random" not in flagged
    assert all(isinstance(r["residual"], float) for r in report["shared_grader"])
    assert report["same_vs_overall"] and all(r["verdict"] for r in report["same_vs_overall"])
    same = [r for r in report["judges"] if r["judge"] == "random"]
    assert same and all(r["same_model_pairs"] > 0 for r in same)
    assert "Which MMRB2 number predicts Best-of-N?" in (demo_run / "report.md").read_text()


def _section(report_md: str, title: str) -> str:
    return next(part for part in report_md.split("\n## ") if part.startswith(title))


def test_bon_report_rebuilds_the_same_predictor_section(demo_run, tmp_path):
    """The predictor table is part of the report bundle: `bon report` on the folder renders the very same
    section and report.json key as the study did (no hook patches the study's report afterwards)."""
    again = tmp_path / "again"
    assert main(["report", "--run", str(demo_run), "--seed", "1", "--no-power", "--out", str(again)]) == 0
    title = "Which MMRB2 number predicts Best-of-N?"
    ours, theirs = (demo_run / "report.md").read_text(), (again / "report.md").read_text()
    assert "verifier agrees with annotators" in _section(theirs, title)
    assert _section(ours, title) == _section(theirs, title)
    predictors = json.loads((again / "report.json").read_text())["predictors"]
    assert predictors["correlations"] and predictors == json.loads((demo_run / "report.json").read_text())["predictors"]
    assert "Which MMRB2 number predicts Best-of-N?" in (again / "report.html").read_text()


def test_bon_report_predictors_from_real_mmrb2_files(demo_run, tmp_path, capsys):
    """`bon report --bench-dir DIR --predictions JUDGE=FILE`: the predictor table on the real MMRB2 pairs, the
    same-model flag from their model_name, each judge's accuracy as its judgment file says."""
    import os
    from pathlib import Path

    from bon import mmrb2

    root = os.environ.get("BON_MMRB2_DIR")
    if not root or not Path(root).is_dir():
        pytest.skip("BON_MMRB2_DIR not set")
    pairs = mmrb2.load_pairs(mmrb2.find_task_file(Path(root), "t2i"))
    judges = sorted({json.loads(line)["judge"] for line in (demo_run / "picks.jsonl").read_text().splitlines()})[:4]
    argv = ["report", "--run", str(demo_run), "--seed", "1", "--no-power", "--bootstrap", "200", "--bench-dir", root]
    right = {}
    for k, judge in enumerate(judges):  # judge k is right on the first (k + 1) / 5 of the pairs, in both orders
        cut = len(pairs) * (k + 1) // 5
        answers = {p.id: (p.chosen if i < cut else mmrb2.FLIP[p.chosen]) for i, p in enumerate(pairs)}
        file = tmp_path / f"{k}.json"
        file.write_text(json.dumps({pid: {"forward": [{"judgement": a}], "reverse": [{"judgement": mmrb2.FLIP[a]}]}
                                    for pid, a in answers.items()}))
        right[judge] = 100.0 * cut / len(pairs)
        argv += ["--predictions", f"{judge}={file}"]
    assert main([*argv, "--out", str(tmp_path / "bench")]) == 0
    rec = json.loads((tmp_path / "bench" / "report.json").read_text())["predictors"]
    assert root in rec["source"] and {r["task"] for r in rec["judges"]} == {"t2i"}
    same = sum(p.model_a == p.model_b for p in pairs)
    for row in rec["judges"]:
        assert row["overall"] == pytest.approx(right[row["judge"]]) and row["same_model_pairs"] == same
        assert row["position_consistency"] == 100.0 and row["tie_missing"] == 0.0
    assert {r["task"] for r in rec["correlations"]} == {"t2i"} and all(r["n_judges"] == 4 for r in rec["correlations"])
    assert "Which MMRB2 number predicts Best-of-N? (on the MMRB2 pairs in" in (tmp_path / "bench" / "report.md").read_text()
    capsys.readouterr()
    for bad in (["report", "--run", str(demo_run), "--predictions", f"{judges[0]}={tmp_path / '0.json'}"],
                [*argv[:-2], "--predictions", f"nobody={tmp_path / '0.json'}"]):
        assert main(bad) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_worker_processes_change_no_number(demo_run, tmp_path, monkeypatch):
    """The judges run in forked workers by default, each worker a part of the prompts and pairs at a time;
    one process judging everything judge by judge gives the very same study: picks, judgment files, results."""
    monkeypatch.setenv("BON_WORKERS", "1")
    assert main(["demo", "--out", str(tmp_path), *SMALL, "--seed", "1"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "results.csv"), pd.read_csv(demo_run / "results.csv"))
    assert (tmp_path / "picks.jsonl").read_text() == (demo_run / "picks.jsonl").read_text()
    judged = sorted((demo_run / "mmrb2" / "judgments").rglob("*.json"))
    assert judged and all(f.read_text() == (tmp_path / f.relative_to(demo_run)).read_text() for f in judged)


def test_report_lists_the_leakage_guards_and_the_headroom(demo_run):
    """The demo's report says which judges left the correlation (the verifier's twins), which pairs left the
    accuracies (none: held-out prompts), and shows the headroom table; the inclusive r is there too."""
    report = (demo_run / "report.md").read_text()
    what = _section(report, "What was run")
    assert "verifier-twin (grader synthetic-checks), verifier-twin-32px (grader synthetic-checks)" in what
    assert "left out of the correlation; with them pooled r = " in what
    assert "Preference pairs overlapping the downstream benchmark (accuracy):** 0 dropped: t2i 0 of" in what
    assert "Text-to-image | strong | 3 | 4 |" in _section(report, "Headroom")  # ⚠ or not: 3 prompts are few
    rec = json.loads((demo_run / "report.json").read_text())
    assert rec["leakage"]["excluded_judges"] == ["verifier-twin", "verifier-twin-32px"]
    pooled = [r for r in rec["correlations"] if r["scope"] == "all"][0]
    other = [r for r in rec["correlations_other"] if r["scope"] == "all"][0]
    assert other["n_judges"] == pooled["n_judges"] + 2
    assert {r["task"] for r in rec["headroom"]} == {"t2i", "edit", "interleaved", "reasoning"}


# --- issue 36: one statistics story ----------------------------------------------------------------


def test_leaderboard_labels_agree_with_their_printed_intervals(demo_run):
    """No judge is "not significantly worse" than the best while its printed interval of the difference excludes
    0, and a judge the leakage policy leaves out gets no label relative to the best (leaderboard.csv, the console
    table of `bon leaderboard` and report.html's verdicts, over every row of every setting)."""
    import re

    from analysis.leaderboard import format_leaderboard, is_best

    table = pd.read_csv(demo_run / "leaderboard.csv", dtype={"left_out": str, "no_information": str})
    table[["left_out", "no_information"]] = table[["left_out", "no_information"]].fillna("")
    assert (table["left_out"] != "").any() and len(table) == 72
    for r in table.to_dict("records"):
        if r["tied_with_best"] and not is_best(r):
            assert r["diff_lo"] <= 0 <= r["diff_hi"] and not r["left_out"], r
        if r["left_out"]:
            assert not r["tied_with_best"], r
    labelled = 0
    for _, sub in table.groupby(["task", "generator", "strategy"], sort=False):
        text = format_leaderboard(sub)
        assert "includes 0" in text.splitlines()[0]  # the header says what decides the label
        for line in text.splitlines()[2:]:
            if "not significantly worse" in line:
                labelled += 1
                lo, hi = map(float, re.search(r"\[([-+]\d\.\d+), ([-+]\d\.\d+)\]\s+\S+\s+\S+\s+\S+\s+\S+\s+\(not", line).groups())
                assert lo <= 0 <= hi and "left out" not in line, line
    assert labelled > 0  # the rule is exercised, not vacuous
    html = (demo_run / "report.html").read_text()
    assert "left out: no label" in html and "includes 0" in html


def test_figure_of_a_run_gives_the_reports_intervals(demo_run, tmp_path):
    """`bon figure --run` shows the report's correlation intervals for the same run and seed (they resample
    judges, prompts and pairs), with the report's footer and the synthetic world's subtitle."""
    assert main(["figure", "--run", str(demo_run), "--out", str(tmp_path)]) == 0
    report = pd.read_csv(demo_run / "correlations.csv")
    report = report[report["scope"] == "setting"].set_index(["task", "generator"])
    figure = pd.read_csv(tmp_path / "correlations.csv")
    figure = figure[figure["scope"] == "setting"].set_index(["task", "generator"])
    assert len(figure) == len(report) == 8
    for column in ("pearson_r", "pearson_lo", "pearson_hi", "spearman_lo", "spearman_hi"):
        pd.testing.assert_series_equal(figure.loc[report.index, column], report[column], rtol=1e-5)
    svg = (tmp_path / "figures" / "correlation.svg").read_text()
    assert "BoN noise: none" not in svg and "not numbers about real models" in svg
    seed = json.loads((demo_run / "report.json").read_text())["seed"]
    assert f"bootstrap over judges, prompts and MMRB2 pairs (1000 replicates, seed {seed})" in svg


def test_report_names_every_task_and_says_what_the_axes_are(demo_run):
    """The failed-scores line names a task for every count (no "?"), and report.html has the axes sentence
    report.md has, both from one source."""
    report, html = (demo_run / "report.md").read_text(), (demo_run / "report.html").read_text()
    line = next(x for x in report.splitlines() if x.startswith("- **Failed verifier scores:**"))
    assert "?/" not in line and "t2i/strong: 0 of 12" in line and "prompts outside Best-of-N" in line
    axes = next(x for x in report.splitlines() if x.startswith("**The axes:**")).removeprefix("**The axes:** ")
    assert "not numbers about real models" in axes
    import html as html_lib

    assert f"<b>The axes:</b> {html_lib.escape(axes)}" in html


def test_an_undefined_r_says_why(demo_run, tmp_path):
    """Where every Best-of-N score is 0 (as in the tiny reasoning config), r is undefined: the headline of
    report.md and report.html says so and why, instead of "r = –"."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("*.lock"))
    lines = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
    (run / "scores.jsonl").write_text("".join(json.dumps({**x, "score": 0.0}) + "\n" for x in lines))
    assert main(["report", "--run", str(run), "--no-power"]) == 0
    report, html = (run / "report.md").read_text(), (run / "report.html").read_text()
    why = "r is undefined: within every setting all judges have the same Best-of-N score (every Best-of-N score is 0"
    assert f"**Answer in one line:** {why}" in report and "r = –" not in report
    assert why in html


def test_the_readmes_commands_on_a_finished_study(demo_run, tmp_path):
    """The README's `demo` bash blocks (commands on a finished study) run as printed, on a copy of this
    small demo named bon-demo (tests/test_readme_blocks.py runs the other blocks)."""
    import shutil

    from readme_blocks import readme_blocks, run_block

    blocks = [b for b in readme_blocks() if b.mark == "demo" and b.lang == "bash"]
    assert blocks and any("bon compare" in b.code for b in blocks)
    shutil.copytree(demo_run, tmp_path / "bon-demo", ignore=shutil.ignore_patterns("*.lock"))
    for block in blocks:
        run_block(block, tmp_path, timeout=600)
    assert (tmp_path / "comparison").is_dir() and (tmp_path / "curve.json").is_file()
    assert (tmp_path / "with-twins" / "report.md").is_file() and (tmp_path / "bon-demo" / "view.html").is_file()


def test_predict_flags_extrapolation_and_marks_a_study_judge_measured(demo_run, capsys):
    """`bon predict --run DEMO --accuracy newjudge=t2i:99`: above every judge's t2i accuracy, flagged as an
    extrapolation in each t2i setting; a label of the study prints `measured`, its measured gain beside it."""
    capsys.readouterr()
    assert main(["predict", "--run", str(demo_run), "--accuracy", "newjudge=t2i:99", "--accuracy", "colour-hist=t2i:60"]) == 0
    lines = capsys.readouterr().out.splitlines()
    new = [line for line in lines if line.startswith("newjudge  ")]
    known = [line for line in lines if line.startswith("colour-hist  ")]
    assert [line.split()[1] for line in new] == ["t2i/strong", "t2i/weak"] == [line.split()[1] for line in known]
    assert pd.read_csv(demo_run / "accuracies.csv").query("task == 't2i'")["accuracy"].max() < 99
    assert all("extrapolation" in line.rsplit("[", 1)[1] and "measured" not in line for line in new)
    gains = pd.read_csv(demo_run / "metrics.csv").query("task == 't2i' and judge == 'colour-hist'").set_index("generator")["gain"]
    for line in known:
        printed = float(line.split("  measured ")[1].split()[0])
        assert printed == pytest.approx(gains[line.split()[1].split("/")[1]], abs=1e-4) and "[measured" in line
