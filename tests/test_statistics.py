"""Correlations across judges with bootstrap intervals, permutation p-values and leave-one-out, checked
against direct computations (scipy) on small hand-made data."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bon import mmrb2
from analysis.bon_metrics import load_prompt_level
from analysis.statistics import (CI_COLUMNS, JudgeAxis, Setting, bc_interval, benchmark_judge_axis, correlation_intervals,
                                 kendall,
                                 json_judge_axis, load_published, match_judges, pair_outcomes, pearson, permutation_p,
                                 pooled, published_judge_axis, run_judge_axis, settings_from_prompts,
                                 settings_from_scores, spearman)
from analysis_run import make_run
from bon.errors import BonError

X = np.array([52.0, 55.5, 61.0, 58.0, 66.5, 70.0, 49.0])
Y = np.array([0.41, 0.47, 0.52, 0.44, 0.60, 0.58, 0.45])


# --- coefficients ---------------------------------------------------------------------------------


def test_coefficients_match_scipy_with_ties_and_nan() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.integers(0, 5, 9).astype(float)  # many ties
        y = x + rng.integers(0, 3, 9)
        x[rng.integers(0, 9)] = np.nan
        keep = np.isfinite(x) & np.isfinite(y)
        assert pearson(x, y) == pytest.approx(stats.pearsonr(x[keep], y[keep])[0])
        assert spearman(x, y) == pytest.approx(stats.spearmanr(x[keep], y[keep])[0])
        assert kendall(x, y) == pytest.approx(stats.kendalltau(x[keep], y[keep])[0])


def test_coefficients_are_vectorised_over_leading_axes() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(4, 3, 6)), rng.normal(size=(4, 3, 6))
    r, rho, tau = pearson(x, y), spearman(x, y), kendall(x, y)
    assert r.shape == rho.shape == tau.shape == (4, 3)
    for i, j in itertools.product(range(4), range(3)):
        assert r[i, j] == pytest.approx(stats.pearsonr(x[i, j], y[i, j])[0])
        assert rho[i, j] == pytest.approx(stats.spearmanr(x[i, j], y[i, j])[0])
        assert tau[i, j] == pytest.approx(stats.kendalltau(x[i, j], y[i, j])[0])


@pytest.mark.parametrize("x, y", [([1.0, 2.0], [3.0, 4.0]), ([0.1, 0.1, 0.1, 0.1], [1, 2, 3, 4]),
                                  ([1, 2, 3], [0.3, 0.3, 0.3]), ([1, np.nan, 3, 4], [1, 2, np.nan, 4])])
def test_degenerate_coefficients_are_nan(x, y) -> None:
    for f in (pearson, spearman, kendall):
        assert math.isnan(float(f(np.array(x, float), np.array(y, float))))


def test_pooled_compares_within_settings_only() -> None:
    # two settings with opposite offsets: a naive pooled r would be driven by the offset
    x1, y1 = X, Y
    x2, y2 = X + 30, Y - 0.4
    z = lambda v: (v - v.mean()) / v.std()  # noqa: E731
    direct = stats.pearsonr(np.r_[z(x1), z(x2)], np.r_[z(y1), z(y2)])[0]
    assert float(pooled("pearson", [(x1, y1), (x2, y2)])) == pytest.approx(direct)
    assert float(pooled("pearson", [(x1, y1)])) == pytest.approx(stats.pearsonr(x1, y1)[0])
    # stratified Kendall: concordant minus discordant pairs within settings over the tie-corrected total
    t1, t2 = stats.kendalltau(x1, y1)[0], stats.kendalltau(x2, y2)[0]
    assert float(pooled("kendall", [(x1, y1), (x2, y2)])) == pytest.approx((t1 + t2) / 2)
    assert float(pooled("spearman", [(x1, y1), (x1, y1)])) == pytest.approx(stats.spearmanr(x1, y1)[0])


def test_bias_corrected_interval_matches_its_definition() -> None:
    rng = np.random.default_rng(0)
    reps = rng.normal(0.3, 0.1, (3, 2000))
    reps[0, :25] = np.nan  # undefined replicates are left out
    point = np.array([0.3, 0.36, 0.2])
    lo, hi = bc_interval(reps, point)
    for k in range(3):
        r = reps[k][np.isfinite(reps[k])]
        z0 = stats.norm.ppf(np.mean(r < point[k]))
        z = stats.norm.ppf(0.975)
        assert (lo[k], hi[k]) == pytest.approx(tuple(np.quantile(r, stats.norm.cdf([2 * z0 - z, 2 * z0 + z]))))
    # with no bias it is the percentile interval; it always holds the point unless the replicates are far off
    sym = rng.normal(0, 1, 4001)
    assert bc_interval(sym, np.median(sym)) == pytest.approx(tuple(np.quantile(sym, [0.025, 0.975])), abs=1e-9)
    assert lo[1] < point[1] < hi[1]
    assert all(np.isnan(v) for v in bc_interval(np.full(5, np.nan), 0.2)) and np.isnan(bc_interval(np.arange(9.0), np.nan)[0])
    # every replicate below the estimate (noise overstated): no collapse, recentred on the Fisher-z scale, flagged
    below = np.tanh(rng.normal(np.arctanh(0.7), 0.2, 3000))
    lo, hi, recentred = bc_interval(below, 0.95, with_fallback=True)
    zq = np.quantile(np.arctanh(below), [0.025, 0.5, 0.975])
    assert recentred and (lo, hi) == pytest.approx((np.tanh(np.arctanh(0.95) + zq[0] - zq[1]),
                                                    np.tanh(np.arctanh(0.95) + zq[2] - zq[1])), abs=1e-6)
    assert lo < 0.95 < hi


# --- the judge axis ---------------------------------------------------------------------------------


def _pairs(n: int = 6) -> list[mmrb2.Pair]:
    return [mmrb2.Pair(id=f"p{i}", prompt_source="isg" if i % 3 == 0 else "other", prompt_content=None,
                       prompt_metadata={}, model_a="a", model_b="b", response_a=[["text", "x"]],
                       response_b=[["text", "y"]], chosen="A" if i % 2 else "B") for i in range(n)]


def test_pair_outcomes_follow_the_official_scorer() -> None:
    pairs = _pairs()
    judgments = {
        "good": {p.id: {"forward": [{"judgement": p.chosen}], "reverse": [{"judgement": mmrb2.FLIP[p.chosen]}]} for p in pairs},
        "odd": {"p0": {"forward": [{"judgement": "tie"}], "reverse": [{"judgement": ""}]},
                "p1": {"forward": [], "reverse": [{"judgement": "A"}, {"judgement": "B"}]},
                "p2": {"forward": [{"judgement": "A"}]}, "unknown": {"forward": [{"judgement": "A"}]}},
    }
    out = pair_outcomes("t2i", pairs, judgments)
    for j, judge in enumerate(out.judges):
        ref = mmrb2.accuracy(pairs, judgments[judge])
        assert out.correct[j].sum() == ref["correct"] and out.counted[j].sum() == ref["judgements"]
        assert out.accuracy()[j] == pytest.approx(ref["accuracy"])
    # a resampling weight of 1 everywhere gives the point estimate back
    assert out.replicates(np.ones((2, len(pairs))))[0] == pytest.approx(out.accuracy())


def test_run_axis_and_leakage_control(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", tasks=("t2i",), generators=("g1",), pairs=12, images=False)
    axis = run_judge_axis(run)
    files = {j: {"t2i": run / "mmrb2" / "judgments" / j / "t2i.json"} for j in axis.outcomes["t2i"].judges}
    full = benchmark_judge_axis(run / "mmrb2", files)
    assert full.table["accuracy"].tolist() == pytest.approx(axis.table["accuracy"].tolist())
    cut = benchmark_judge_axis(run / "mmrb2", files, exclude_sources={"t2i": ["ALPHA"]})  # case-insensitive
    assert cut.excluded == {"t2i": ["alpha"]} and len(cut.outcomes["t2i"].pair_ids) == 6
    pairs = [p for p in mmrb2.load_pairs(run / "mmrb2" / "t2i.json") if p.prompt_source != "alpha"]
    judge = axis.outcomes["t2i"].judges[2]
    ref = mmrb2.accuracy(pairs, mmrb2.load_judgments(files[judge]["t2i"]))
    assert cut.accuracy("t2i", [judge])[0] == pytest.approx(ref["accuracy"])
    with pytest.raises(BonError, match="no pair has prompt_source"):
        benchmark_judge_axis(run / "mmrb2", files, exclude_sources={"t2i": ["isg-bench-typo"]})


def test_json_and_published_axes(tmp_path: Path) -> None:
    path = tmp_path / "acc.json"
    path.write_text(json.dumps({"tasks": {"image": {"accuracy": 61.0, "evaluated_pairs": 200, "judgements": 400}},
                                "overall": {}}))
    axis = json_judge_axis({"my-judge": path})
    assert axis.table.iloc[0][["judge", "task", "accuracy", "n_pairs"]].tolist() == ["my-judge", "t2i", 61.0, 200]
    reps = axis.replicates("t2i", ["my-judge"], 400, 0)
    assert reps.std() == pytest.approx(math.sqrt(61 * 39 / 200), rel=0.2)  # binomial over pairs

    pub = load_published()
    assert {"judge", "task", "accuracy", "source"} <= set(pub.columns) and pub["source"].notna().all()
    row = pub[(pub.judge == "GPT-5") & (pub.task == "t2i")]
    assert row["accuracy"].item() == 70.5
    axis = published_judge_axis()
    assert set(axis.table["task"]) == {"t2i", "edit", "interleaved", "reasoning"}
    assert match_judges(["gpt5", "Gemini 2.5 pro", "nobody"], axis.table["judge"]) == {"gpt5": "GPT-5",
                                                                                        "Gemini 2.5 pro": "Gemini 2.5 Pro"}


# --- the correlation table ---------------------------------------------------------------------------


def _fixed_axis(task: str, judges: list[str], acc: np.ndarray) -> JudgeAxis:
    return JudgeAxis("fixed", pd.DataFrame({"judge": judges, "task": task, "accuracy": acc, "n_pairs": np.nan,
                                            "n_judgements": np.nan, "source": "test"}))


def test_point_estimates_p_values_and_leave_one_out_match_direct_computation() -> None:
    judges = [f"j{k}" for k in range(len(X))]
    setting = Setting("t2i", "g", "knockout", judges, bon=Y)
    t = correlation_intervals([setting], _fixed_axis("t2i", judges, X), bootstrap=300, seed=1)
    assert list(t.columns) == CI_COLUMNS and len(t) == 1
    row = t.iloc[0]
    assert row.pearson_r == pytest.approx(stats.pearsonr(X, Y)[0])
    assert row.spearman_rho == pytest.approx(stats.spearmanr(X, Y)[0])
    assert row.kendall_tau == pytest.approx(stats.kendalltau(X, Y)[0])
    assert row.n_judges == 7 and row.pearson_lo <= row.pearson_r <= row.pearson_hi
    # exact permutation p-value over all 7! orderings
    perms = np.array(list(itertools.permutations(range(7))))
    null = np.array([stats.pearsonr(X, Y[p])[0] for p in perms[::7]])  # a spread-out subset, for speed
    assert row.pearson_p_perm == pytest.approx(np.mean(np.abs(null) >= abs(row.pearson_r) - 1e-12), abs=0.03)
    assert row.permutations == 5040
    loo = [stats.pearsonr(np.delete(X, k), np.delete(Y, k))[0] for k in range(7)]
    assert (row.pearson_loo_min, row.pearson_loo_max) == pytest.approx((min(loo), max(loo)))
    # nothing resampled on either axis but the judges: the rows say so
    assert row.x_resampling == "fixed" and row.y_resampling == "fixed" and "not resampled" in row.warning


def test_exact_permutation_p_for_a_perfect_order() -> None:
    x, y = np.arange(5.0), np.arange(5.0) ** 2
    p, used = permutation_p("spearman", [(x, y)])
    assert used == 120 and p == pytest.approx(2 / 120)  # only the identity and the reversal reach |ρ| = 1
    p, used = permutation_p("pearson", [(np.arange(12.0), np.arange(12.0))], permutations=999, seed=0)
    assert used == 999 and p == pytest.approx(1 / 1000)


def test_bootstrap_is_seeded_and_another_seed_moves_bounds_only_slightly(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", qualities=(0.3, 0.45, 0.55, 0.6, 0.7, 0.8, 0.9, 0.95), prompts=20,
                   tasks=("t2i",), generators=("g1",), images=False)
    settings, axis = settings_from_prompts(load_prompt_level(run)), run_judge_axis(run)
    a = correlation_intervals(settings, axis, bootstrap=2000, seed=7, permutations=500)
    pd.testing.assert_frame_equal(a, correlation_intervals(settings, axis, bootstrap=2000, seed=7, permutations=500))
    c = correlation_intervals(settings, axis, bootstrap=2000, seed=8, permutations=500)
    assert a["pearson_lo"].item() != c["pearson_lo"].item()
    # Monte Carlo error only (lower bounds sit in the sparse tail: SD about 0.05 at 2000 replicates)
    for col in ("pearson_lo", "pearson_hi", "pearson_lo_meas", "pearson_hi_meas", "spearman_lo", "spearman_hi",
                "kendall_lo", "kendall_hi"):
        assert abs(a[col].item() - c[col].item()) < 0.15, col
    assert (a["pearson_r"] == c["pearson_r"]).all()  # point estimates do not depend on the seed


def test_rows_counts_and_pooling(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", prompts=20, images=False)
    a = correlation_intervals(settings_from_prompts(load_prompt_level(run)), run_judge_axis(run), bootstrap=300,
                              permutations=300)
    # 4 settings, a pooled row per task, one over everything
    assert a["scope"].tolist() == ["setting"] * 4 + ["task", "task", "all"]
    assert (a["n_prompts"].iloc[:4] == 20).all() and a["n_prompts"].iloc[-1] == 40
    assert a["n_pairs"].iloc[0] == 24 and a["n_pairs"].iloc[-1] == 48 and (a["n_judges"] == 6).all()
    inside = (a.pearson_lo <= a.pearson_r + 1e-12) & (a.pearson_r <= a.pearson_hi + 1e-12)
    assert inside.all()  # the bias-corrected interval holds the point estimate here


@pytest.mark.parametrize("data_seed", [0, 1, 2])
def test_uninformative_judges_give_an_interval_containing_zero(tmp_path: Path, data_seed: int) -> None:
    # every judge has the same quality: accuracy and BoN differ by noise only
    run = make_run(tmp_path / f"run{data_seed}", qualities=(0.5,) * 8, prompts=12, tasks=("t2i",),
                   generators=("g1",), pairs=30, seed=data_seed, images=False)
    t = correlation_intervals(settings_from_prompts(load_prompt_level(run)), run_judge_axis(run), bootstrap=500, seed=0,
                              permutations=2000)
    row = t.iloc[0]
    for stat in ("pearson", "spearman", "kendall"):
        assert row[f"{stat}_lo"] < 0 < row[f"{stat}_hi"], (stat, row[f"{stat}_lo"], row[f"{stat}_hi"])


def test_informative_judges_give_a_positive_interval(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", qualities=(0.2, 0.35, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97), prompts=40,
                   tasks=("t2i",), generators=("g1",), pairs=150, images=False)
    row = correlation_intervals(settings_from_prompts(load_prompt_level(run)), run_judge_axis(run), bootstrap=500,
                                seed=0, permutations=2000).iloc[0]
    assert row.pearson_lo > 0 and row.pearson_p_perm < 0.05


def test_warnings_for_thin_data() -> None:
    judges = ["a", "b", "c", "d"]
    setting = Setting("t2i", "g", "k", judges, bon=np.array([0.1, 0.3, 0.2, 0.5]),
                      se=np.array([0.05, 0.05, 0.05, 0.05]))
    axis = _fixed_axis("t2i", judges, np.array([50.0, 60.0, 55.0, 70.0])).table.assign(n_pairs=40)
    row = correlation_intervals([setting], JudgeAxis("t", axis), bootstrap=300).iloc[0]
    assert row.flag and "only 4 judges" in row.warning and "40 MMRB2 pairs" not in row.warning  # binomial, not pairs
    assert row.x_resampling == "binomial" and row.y_resampling == "normal"
    none = correlation_intervals([setting], JudgeAxis("t", axis), bootstrap=300, resample=("prompts", "pairs")).iloc[0]
    assert "judges held fixed" in none.warning


def test_settings_from_scores_table() -> None:
    table = pd.DataFrame({"task": ["t2i"] * 3 + ["edit"] * 3, "generator": "g", "judge": ["a", "b", "c"] * 2,
                          "bon_score": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], "n_prompts": 100, "bon_sd": 0.2})
    s = settings_from_scores(table)
    assert [x.task for x in s] == ["t2i", "edit"] and s[0].se == pytest.approx([0.02] * 3)
    with pytest.raises(BonError, match="bon_score"):
        settings_from_scores(table.drop(columns="bon_score"))


def test_average_ranks_and_setting_matrix_match_scipy_and_pandas():
    """The vectorised helpers give exactly what scipy's rankdata and pandas' pivot_table gave before."""
    import pandas as pd
    from scipy.stats import rankdata

    from analysis.bon_metrics import setting_matrix
    from analysis.statistics import average_ranks

    rng = np.random.default_rng(3)
    for shape in [(6,), (3, 7), (2, 4, 5)]:
        x = rng.integers(0, 3, shape).astype(float)
        x[rng.random(shape) < 0.2] = np.inf
        assert np.array_equal(average_ranks(x), rankdata(x, axis=-1))
    df = pd.DataFrame({"judge": list("aabbca"), "prompt_id": ["p1", "p1", "p2", "p2", "p1", "p3"],
                       "v": [np.nan, 0.4, 0.1, 0.2, 0.9, 0.3]})
    pivot = df.pivot_table(index="judge", columns="prompt_id", values="v", aggfunc="first", dropna=False)
    expected = pivot.reindex(index=["b", "a", "z"], columns=["p1", "p2", "p4"]).to_numpy(float)
    assert np.array_equal(setting_matrix(df, "v", ["b", "a", "z"], ["p1", "p2", "p4"]), expected, equal_nan=True)


def test_leave_one_out_drops_every_judge_at_once_exactly_as_one_at_a_time() -> None:
    """The stacked leave-one-out gives bit for bit what dropping each judge in turn gives, for each
    coefficient, one setting or several pooled, with judges missing here and there."""
    from analysis.statistics import _leave_one_out, _stat

    rng = np.random.default_rng(3)
    for trial in range(30):
        blocks = []
        for _ in range(1 + trial % 3):
            x, y = rng.normal(size=8), rng.normal(size=8)
            x[rng.random(8) < 0.2] = np.nan
            blocks.append((x, y))
        present = np.zeros(8, bool)
        for x, y in blocks:
            present |= np.isfinite(x) & np.isfinite(y)
        for stat in ("pearson", "spearman", "kendall"):
            values, who = [], []
            for k in np.flatnonzero(present):
                v = float(_stat(stat, [(np.where(np.arange(8) == k, np.nan, x), y) for x, y in blocks]))
                if np.isfinite(v):
                    values.append(v)
                    who.append(int(k))
            full = float(_stat(stat, blocks))
            expected = (min(values), max(values), who[int(np.argmax([abs(v - full) for v in values]))]) if values else None
            got = _leave_one_out(stat, blocks, present)
            assert (got if values else None) == expected, (trial, stat)


def test_permuted_null_is_bit_for_bit_the_coefficient_of_each_ordering() -> None:
    """permutation_p reorders y's ranks, standardised ranks and pairwise signs instead of recomputing them per
    ordering, and sums x once: every null value must be the same float as the coefficient of that ordering."""
    from analysis.statistics import _permuted, _stat

    rng = np.random.default_rng(3)
    for case in range(12):
        blocks, orders = [], []
        for _ in range(1 + case % 3):  # one setting, or pooled over two or three
            n = int(rng.integers(4, 10))
            x, y = rng.normal(60, 8, n), rng.normal(0.5, 0.1, n)
            if case % 2:  # ties on both axes
                x, y = np.round(x / 4) * 4, np.round(y * 20) / 20
            blocks.append((x, y))
            orders.append(np.argsort(rng.random((300, n)), axis=1))
        for stat in ("pearson", "spearman", "kendall"):
            direct = _stat(stat, [(np.broadcast_to(x, o.shape), y[o]) for (x, y), o in zip(blocks, orders)])
            assert np.array_equal(_permuted(stat, blocks, orders), direct, equal_nan=True), (case, stat)


def test_spread_tolerance_summed_only_where_it_could_matter_gives_the_full_rule() -> None:
    """_moments sums squares for its noise tolerance only in rows near it; the result is the full rule's."""
    from analysis.statistics import _moments

    rng = np.random.default_rng(4)
    x = rng.normal(50, 10, (400, 7))
    x[::7] = x[::7, :1]  # constant rows
    x[1::7] = x[1::7, :1] + rng.integers(-1, 2, (len(x[1::7]), 7)) * np.spacing(x[1::7, :1])  # rounding noise
    y = rng.normal(size=x.shape)
    sxy, sxx, syy, n = _moments(x, y)
    centred = ((x - x.sum(-1, keepdims=True) / 7) ** 2).sum(-1)
    assert np.array_equal(sxx, np.where(centred <= 1e-20 * (x * x).sum(-1) + 1e-300, 0.0, centred))
    assert (sxx[::7] == 0).all() and (sxx[2::7] > 0).all() and np.array_equal(n, np.full(400, 7))
