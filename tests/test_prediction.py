"""Will this judge help? ``bon predict`` and the report's held-out validation (analysis.prediction)."""

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import spearmanr, t as t_dist

from analysis_run import make_run
from analysis.prediction import NO_RELATION, GainData, MIN_FIT_JUDGES, fit_lines, validation
from bon.cli import main
from bon.seeds import derive_seed

LINE = re.compile(r"^(?P<judge>\S+)  (?P<task>\w+)/(?P<gen>\w+)  accuracy (?P<acc>[\d.]+)  gain (?P<gain>[-+][\d.]+) "
                  r"\[(?P<lo>[-+][\d.]+), (?P<hi>[-+][\d.]+)\]  score (?P<score>[\d.]+)")


def _data(x, y, generator="g1", bootstrap=200):
    x, y = np.asarray(x, float), np.asarray(y, float)
    return GainData("t2i", generator, "knockout", [f"j{k}" for k in range(len(x))], x, y,
                    np.tile(x, (bootstrap, 1)), np.tile(y, (bootstrap, 1)), 0.5)


def _by_hand(xs: np.ndarray, ys: np.ndarray, names: list[str], x0: float, bootstrap: int, level: float = 0.9):
    """A held-out prediction computed from the module docstring's recipe with numpy's own least squares
    (np.polyfit), not analysis.prediction's: the line of the others, their scatter s² (n − 2 degrees of freedom),
    the judge bootstrap (multinomial counts drawn from the seed of task, generator and the fit's judge names; a
    replicate whose judges hold one accuracy has no line), the interval ŷ ± t(n−2)·sqrt(V_fit + s²) and the slope's
    interval (its quantiles; this fixture's prompt and pair replicates all equal the point values)."""
    slope, icpt = np.polyfit(xs, ys, 1)
    s2 = ((ys - (icpt + slope * xs)) ** 2).sum() / (len(xs) - 2)
    rng = np.random.default_rng(derive_seed(0, "predict-judges", "t2i", "g1", *names))
    counts = rng.multinomial(len(xs), np.full(len(xs), 1.0 / len(xs)), size=bootstrap)
    lines = np.array([np.polyfit(xs, ys, 1, w=np.sqrt(c)) for c in counts if np.unique(xs[c > 0]).size > 1])
    v_fit = np.var(lines[:, 1] + lines[:, 0] * x0, ddof=1)
    half = t_dist.ppf(0.5 + level / 2, len(xs) - 2) * np.sqrt(v_fit + s2)
    point = icpt + slope * x0
    lo, hi = np.quantile(lines[:, 0], [0.5 - level / 2, 0.5 + level / 2])
    return point, point - half, point + half, bool(lo <= 0 <= hi)


def test_leave_one_judge_out_table_equals_a_hand_computation():
    """Five judges, no measurement noise, one of them (j2) far above the others' line: each held-out row
    (prediction, interval, score, coverage, flags) equals :func:`_by_hand` on the other four, and the summary's MAE,
    coverage with its count, ρ and count of slopes without a relation are those of the rows."""
    x = np.array([50.0, 55.0, 62.0, 70.0, 81.0])
    y = np.array([0.00, 0.02, 0.15, 0.07, 0.10])
    names = [f"j{k}" for k in range(5)]
    out = validation([_data(x, y)], seed=0, level=0.9)
    rows = out["rows"]
    assert list(rows["judge"]) == names and set(rows["holdout"]) == {"judge"}
    hand = []
    for k, row in rows.iterrows():
        others = [j for j in range(5) if j != k]
        point, lo, hi, flat = _by_hand(x[others], y[others], [names[j] for j in others], x[k], bootstrap=200)
        hand.append((point, lo, hi, flat))
        assert row["accuracy"] == x[k] and row["measured_gain"] == y[k]
        assert row["predicted_gain"] == pytest.approx(point, abs=1e-12)
        assert row["predicted_score"] == pytest.approx(0.5 + point, abs=1e-12)
        assert (row["lo"], row["hi"]) == (pytest.approx(lo, abs=1e-10), pytest.approx(hi, abs=1e-10))
        assert row["covered"] == (lo <= y[k] <= hi)
        flags = ([NO_RELATION] if flat else []) + (["extrapolation"] if k in (0, 4) else [])  # 4 judges: not "few"
        assert row["flags"] == "; ".join(flags), k
    points = np.array([h[0] for h in hand])
    covered = sum(h[1] <= v <= h[2] for h, v in zip(hand, y))
    assert covered == 4 and not rows["covered"][2], "j2 lies outside the others' interval"
    summary = out["summary"].set_index(["holdout", "task"])
    for key in (("judge", "t2i"), ("judge", "(all)")):
        row = summary.loc[key]
        assert row["n"] == 5 and row["mae"] == pytest.approx(np.abs(points - y).mean(), abs=1e-12)
        assert row["covered"] == covered and row["coverage"] == pytest.approx(covered / 5)
        assert row["spearman_rho"] == pytest.approx(spearmanr(points, y).statistic)
        assert row["no_relation"] == sum(h[3] for h in hand)


def test_leave_one_generator_out_uses_the_other_generators_line():
    x = [50.0, 55.0, 62.0, 70.0, 81.0]
    a, b = _data(x, [0.0, 0.03, 0.02, 0.09, 0.11], "a"), _data(x, [0.01, 0.0, 0.05, 0.1, 0.2], "b")
    rows = validation([a, b])["rows"]
    from_a = rows[rows["holdout"] == "generator a"]
    slope, icpt = np.polyfit(x, a.y, 1)
    assert list(from_a["generator"]) == ["b"] * 5
    assert np.allclose(from_a["predicted_gain"], icpt + slope * np.array(x))
    assert list(from_a["measured_gain"]) == list(b.y)


def test_a_line_needs_three_judges_and_few_judges_are_flagged():
    fits = fit_lines(_data([50, 60, 70], [0.0, 0.05, 0.1]), np.ones((1, 3), bool))
    pred = fits.predict(np.array([[65.0, 90.0]]))
    assert pred["few"].all() and list(pred["extrapolation"][0]) == [False, True]
    assert MIN_FIT_JUDGES == 3
    assert validation([_data([50, 60, 70], [0.0, 0.05, 0.1])])["rows"].empty  # leaving one out leaves 2


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("predict") / "run", qualities=(0.5, 0.6, 0.7, 0.8, 0.9, 0.95), prompts=30,
                    n=4, tasks=("t2i", "edit"), generators=("g1",), pairs=60, images=False)


def _err(capsys) -> str:
    return capsys.readouterr().err.strip()


def test_one_line_errors(fixture_run, tmp_path, capsys):
    run = str(fixture_run)
    assert main(["predict", "--run", run, "--accuracies", "published"]) == 2
    err = _err(capsys)
    assert "MMRB2's released pairs" in err and "own preference set" in err and "\n" not in err
    assert main(["predict", "--run", run, "--accuracy", "x=reasoning:60"]) == 2
    assert "no Best-of-N results for task reasoning" in _err(capsys)
    assert main(["predict", "--run", run, "--accuracy", "x=t2i:60", "--task", "interleaved"]) == 2
    assert "--task interleaved" in _err(capsys)
    assert main(["predict", "--run", run, "--accuracy", "x=t2i:101"]) == 2
    assert "outside 0-100" in _err(capsys)
    # a judgment file named for t2i whose pair ids are edit's
    wrong = tmp_path / "t2i.json"
    shutil.copy(fixture_run / "mmrb2" / "judgments" / "judge-3" / "edit.json", wrong)
    assert main(["predict", "--run", run, "--predictions", f"new={wrong}"]) == 2
    err = _err(capsys)
    assert "name says task t2i" in err and "edit" in err and "\n" not in err
    # three judges: predicting one of them leaves two in its fit
    small = make_run(tmp_path / "small", qualities=(0.5, 0.7, 0.9), prompts=6, n=4, tasks=("t2i",), generators=("g1",),
                     pairs=20, images=False)
    assert main(["predict", "--run", str(small), "--accuracy", "judge-0=t2i:60"]) == 2
    assert "only 2 judges left in the fit" in _err(capsys)


def test_judgment_files_are_scored_like_the_study_and_a_study_judge_is_measured(fixture_run, tmp_path, capsys):
    run = fixture_run
    files = ",".join(str(run / "mmrb2" / "judgments" / "judge-4" / f) for f in ("t2i.json", "edit.json"))
    out = tmp_path / "p.json"
    assert main(["predict", "--run", str(run), "--predictions", f"judge-4={files}", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["predictions"]
    acc = pd.read_csv(run / "accuracies.csv") if (run / "accuracies.csv").exists() else None
    from analysis.statistics import run_judge_axis

    axis = run_judge_axis(run)
    for r in rows:
        assert r["accuracy"] == pytest.approx(float(axis.accuracy(r["task"], ["judge-4"])[0]))
        assert r["flags"].startswith("measured") and r["measured_gain"] is not None
        assert r["judges_in_fit"] == 5  # left out of its own fit
    assert acc is None or not acc.empty
    assert "measured" in capsys.readouterr().out


# --- the demo world ---------------------------------------------------------------------------------------

DEMO = ["--prompts", "8", "--n", "4", "--seed", "1"]
HELD_OUT = "ocr"


@pytest.fixture(scope="module")
def demo_pair(tmp_path_factory):
    """The tiny demo, and the same study run again without one judge (a copy of its folder resumed with that judge
    gone from the config: candidates and the other judges' verdicts are reused)."""
    full = tmp_path_factory.mktemp("full")
    assert main(["demo", "--out", str(full), *DEMO]) == 0
    reduced = tmp_path_factory.mktemp("reduced") / "run"
    shutil.copytree(full, reduced, ignore=shutil.ignore_patterns("report*", "*.csv", "figures", HELD_OUT))
    study = yaml.safe_load((full / "config.yaml").read_text())["study"]
    study["judges"] = [j for j in study["judges"] if j["label"] != HELD_OUT]
    study["out"] = str(reduced)
    path = reduced.parent / "config.yaml"
    path.write_text(yaml.safe_dump({"study": study}))
    assert main(["run", str(path), "--out", str(reduced)]) == 0
    return full, reduced


def test_a_judge_left_out_of_the_study_is_predicted_from_its_judgment_files(demo_pair, tmp_path, capsys):
    """``bon predict`` on the study without the judge, from the judge's judgment files: its accuracy is the full
    study's (same pairs, the official scorer), its fit is the full study's leave-one-judge-out fit (predictions.csv:
    the same line, interval and verdict on the slope), a number's interval holds the gain measured in the full study,
    and the printed numbers are --json's and --out-file's."""
    full, reduced = demo_pair
    assert not (reduced / "mmrb2" / "judgments" / HELD_OUT).exists()
    files = ",".join(str(full / "mmrb2" / "judgments" / HELD_OUT / f"{t}.json") for t in ("t2i", "edit", "interleaved", "reasoning"))
    js, csv = tmp_path / "p.json", tmp_path / "p.csv"
    capsys.readouterr()
    assert main(["predict", "--run", str(reduced), "--predictions", f"{HELD_OUT}={files}", "--json", str(js),
                 "--out-file", str(csv)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"{HELD_OUT}  ")]
    printed = {(m["task"], m["gen"]): m for m in map(LINE.match, lines) if m}
    rows = {(r["task"], r["generator"]): r for r in json.loads(js.read_text())["predictions"]}
    table = pd.read_csv(csv).set_index(["task", "generator"])
    measured = pd.read_csv(full / "metrics.csv").set_index(["task", "generator", "judge"])["gain"]
    accuracy = pd.read_csv(full / "accuracies.csv").set_index(["judge", "task"])["accuracy"]
    held = pd.read_csv(full / "predictions.csv")
    held = held[(held["holdout"] == "judge") & (held["judge"] == HELD_OUT)].set_index(["task", "generator"])
    assert len(rows) == len(lines) == 8 and set(rows) == set(held.index)
    for key, r in rows.items():
        loo = held.loc[key]
        assert r["accuracy"] == pytest.approx(accuracy[(HELD_OUT, key[0])]) == pytest.approx(loo["accuracy"])
        silent = NO_RELATION in str(loo["flags"])
        assert (r["predicted_gain"] is None) == silent == (key not in printed) == pd.isna(table.loc[key, "predicted_gain"])
        if silent:
            continue
        m = printed[key]
        for col, text in (("accuracy", m["acc"]), ("predicted_gain", m["gain"]), ("lo", m["lo"]), ("hi", m["hi"]),
                          ("predicted_score", m["score"])):
            assert float(text) == pytest.approx(round(r[col], 4), abs=1e-9), (key, col)
            assert float(text) == pytest.approx(round(float(table.loc[key, col]), 4), abs=1e-9), (key, col)
            assert r[col] == pytest.approx(float(loo[col]), rel=1e-5), (key, col)
        assert r["lo"] <= measured[(key[0], key[1], HELD_OUT)] <= r["hi"], key


def test_demo_flags_extrapolation_and_marks_a_study_judge_measured(demo_pair, capsys):
    full, _ = demo_pair
    capsys.readouterr()
    assert main(["predict", "--run", str(full), "--accuracy", "newjudge=t2i:99", "--accuracy", "colour-hist=t2i:60"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("newjudge")] and all(
        "extrapolation" in line for line in lines if line.startswith("newjudge"))
    assert all("measured" in line for line in lines if line.startswith("colour-hist"))
    assert (full / "predictions.csv").exists()
    held = pd.read_csv(full / "predictions.csv")
    assert {"holdout", "judge", "predicted_gain", "lo", "hi", "measured_gain", "covered"} <= set(held.columns)
    report = (full / "report.md").read_text()
    assert "**Held-out judges:**" in report and "## Will this judge help?" in report


def test_a_priced_table_is_ranked_by_predicted_gain_per_dollar(fixture_run, tmp_path, capsys):
    table = tmp_path / "candidates.csv"
    table.write_text("judge,task,accuracy,usd_per_call,axis\ncheap,t2i,70,0.001,preference\n"
                     "pricey,t2i,72,0.05,preference\nfree-ish,t2i,60,0.0005,preference\nsummary,avg,70,,preference\n")
    out = tmp_path / "ranked.csv"
    capsys.readouterr()
    assert main(["predict", "--run", str(fixture_run), "--accuracies", str(table), "--out-file", str(out)]) == 0
    ranked = pd.read_csv(out)
    assert list(ranked.columns[-2:]) == ["usd_per_prompt", "gain_per_dollar"] and set(ranked["task"]) == {"t2i"}
    numbered = ranked.dropna(subset=["gain_per_dollar"])
    assert len(numbered) >= 2 and list(numbered["gain_per_dollar"]) == sorted(numbered["gain_per_dollar"], reverse=True)
    assert np.allclose(numbered["gain_per_dollar"], numbered["predicted_gain"] / numbered["usd_per_prompt"])
    assert "ranked by predicted gain per dollar" in capsys.readouterr().out
