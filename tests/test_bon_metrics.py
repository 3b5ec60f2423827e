"""Best-of-N metrics and the reranker leaderboard against direct computations on hand-made data."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.bon_metrics import (METRIC_COLUMNS, apply_on_failure, bon_metrics, failure_policy, load_prompt_level, multinomial_weights, percentile_ci,
                                  prompt_level, weighted_means)
from analysis.leaderboard import format_leaderboard, holm, judge_costs, leaderboard, run_leaderboard, sign_flip_p
from analysis_run import make_run
from bon.errors import BonError
from analysis.bon_metrics import results_table

# one prompt, five candidates: scores with a tie at the top and one unscored candidate
SCORES = {("g", "p1", 0): {"score": 0.2}, ("g", "p1", 1): {"score": 0.9}, ("g", "p1", 2): {"score": 0.9},
          ("g", "p1", 3): {"score": None}, ("g", "p1", 4): {"score": 0.5},
          ("g", "p2", 0): {"score": 0.0}, ("g", "p2", 1): {"score": 1.0}, ("g", "p2", 2): {"score": 0.5},
          ("g", "p2", 3): {"score": 0.5}, ("g", "p2", 4): {"score": 0.25}}


def pick(judge: str, pid: str, index: int, calls: int = 8) -> dict:
    return {"judge": judge, "strategy": "knockout", "task": "t2i", "prompt_id": pid, "generator": "g", "index": index,
            "calls": calls, "missing": 0}


def test_pick_statistics_by_hand() -> None:
    rows = prompt_level([pick("a", "p1", 1), pick("a", "p2", 2), pick("b", "p1", 3), pick("b", "p2", 0)], SCORES, n=5)
    a1, a2, b1, b2 = (rows.iloc[i] for i in range(4))
    # p1: scored candidates 0.2, 0.9, 0.9, 0.5 (index 3 unscored)
    assert a1.random_score == pytest.approx((0.2 + 0.9 + 0.9 + 0.5) / 4) and a1.oracle_score == 0.9
    assert a1.pick_score == 0.9 and a1.hit == 1.0 and a1.n_scored == 4
    assert a1.win == pytest.approx((2 + 0.5) / 3)  # beats 0.2 and 0.5, ties the other 0.9
    assert a1["rank"] == pytest.approx(1.5)  # shares ranks 1 and 2
    # p2: pick scores 0.5 among 0.0, 1.0, 0.5, 0.25
    assert a2.win == pytest.approx((2 + 0.5) / 4) and a2["rank"] == pytest.approx(1 + 1 + 0.5) and a2.hit == 0.0
    # an unscored pick: no score, no win rate, but the prompt's levels are still known
    assert math.isnan(b1.pick_score) and math.isnan(b1.win) and b1.oracle_score == 0.9
    assert b2.pick_score == 0.0 and b2.win == 0.0 and b2["rank"] == 5.0


def test_prompts_computed_together_give_each_candidates_own_statistics() -> None:
    """prompt_level computes the statistics of all fully scored prompts of one N at once: the same numbers,
    bit for bit, as one candidate at a time (ties, failed scores, picks outside 0..N-1, N 1 to 9)."""
    from analysis import bon_metrics

    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(1, 10))
        scores = {("g", f"p{p}", i): {"score": None if rng.random() < 0.05 else float(v)}
                  for p in range(5) for i, v in enumerate(rng.choice([0.0, 0.5, 1.0, rng.random()], size=n))}
        picks = [pick(f"j{j}", f"p{p}", int(rng.integers(-1, n + 1))) for p in range(5) for j in range(3)]
        together = prompt_level(picks, scores, n)
        for row in together.itertuples():
            values = bon_metrics.candidate_scores(scores, n)[("g", row.prompt_id)]
            alone = bon_metrics._pick_stats(values, row.index)
            for key, value in alone.items():
                got = getattr(row, key)
                assert (math.isnan(value) and math.isnan(got)) or got == value, (key, got, value)


def test_metrics_point_estimates_and_agreement_with_results_table() -> None:
    picks = [pick("a", "p1", 1), pick("a", "p2", 2), pick("b", "p1", 3), pick("b", "p2", 0)]
    m = bon_metrics(prompt_level(picks, SCORES, n=5), bootstrap=200, seed=0, n=5)
    assert list(m.columns) == METRIC_COLUMNS
    a = m[m.judge == "a"].iloc[0]
    rnd = np.mean([(0.2 + 0.9 + 0.9 + 0.5) / 4, (0 + 1 + 0.5 + 0.5 + 0.25) / 5])
    orc = np.mean([0.9, 1.0])
    assert a.bon_score == pytest.approx(0.7) and a.random_score == pytest.approx(rnd) and a.oracle_score == pytest.approx(orc)
    assert a.gain == pytest.approx(0.7 - rnd) and a.recovery == pytest.approx((0.7 - rnd) / (orc - rnd))
    assert a.mean_rank == pytest.approx((1.5 + 2.5) / 2) and a.oracle_hit == 0.5
    assert a.norm_rank == pytest.approx(np.mean([0.5 / 3, 1.5 / 4]))
    assert a.calls_per_prompt == 8 and a.judge_calls == 16
    b = m[m.judge == "b"].iloc[0]
    assert b.bon_score == 0.0 and b.unscored_picks == 1
    assert b.random_score == pytest.approx((0 + 1 + 0.5 + 0.5 + 0.25) / 5)  # over p2, the prompt its BoN averages
    ref = results_table(picks, SCORES, {}, 5, on_failure="zero").set_index("judge")
    m = bon_metrics(prompt_level(picks, apply_on_failure(SCORES, "zero")[0], n=5), bootstrap=0, n=5)
    for judge in ("a", "b"):
        row = m[m.judge == judge].iloc[0]
        for c in ("bon_score", "random_score", "oracle_score", "judge_calls", "unscored_picks"):
            assert row[c] == pytest.approx(ref.loc[judge, c]), c


# the example: p1 = [4, 8], p2 = [6, failed]; the judge picks index 1 on both
FAILED = {("g", "p1", 0): {"score": 4.0}, ("g", "p1", 1): {"score": 8.0},
          ("g", "p2", 0): {"score": 6.0}, ("g", "p2", 1): {"score": None, "missing": "grader: timeout"}}


@pytest.mark.parametrize("policy, unscored, bon, rnd, orc", [
    ("missing", 1, 8.0, 6.0, 8.0),  # p2 leaves BoN, random and oracle alike: gain 2 on p1
    ("zero", 0, (8 + 0) / 2, (6 + 3) / 2, (8 + 6) / 2),  # the failed score is 0: gain -0.5 over p1 and p2
])
def test_failure_policy_keeps_bon_and_random_on_the_same_prompts(policy, unscored, bon, rnd, orc) -> None:
    picks = [pick("j", "p1", 1), pick("j", "p2", 1)]
    scores, failed = apply_on_failure(FAILED, policy)
    assert failed == {("g", "p2"): 1}
    rows = prompt_level(picks, scores, n=2)
    assert rows["pick_score"].isna().tolist() == rows["random_score"].isna().tolist() == [False, bool(unscored)]
    m = bon_metrics(rows, bootstrap=50, n=2).iloc[0]
    assert (m.prompts, m.unscored_picks, m.bon_score, m.random_score, m.oracle_score) == (2, unscored, bon, rnd, orc)
    assert m.gain == pytest.approx({"missing": 2.0, "zero": -0.5}[policy])
    table = results_table(picks, FAILED, {}, 2, on_failure=policy).iloc[0]
    assert (table.unscored_picks, table.bon_score, table.random_score) == (unscored, bon, rnd)


def test_without_a_policy_random_follows_the_scored_picks() -> None:
    """Stored scores as they are: a pick whose score failed leaves random and oracle too (the old bug: BoN
    over p1, random over p1 and p2)."""
    m = bon_metrics(prompt_level([pick("j", "p1", 1), pick("j", "p2", 1)], FAILED, n=2), bootstrap=0, n=2).iloc[0]
    assert (m.bon_score, m.random_score, m.oracle_score) == (8.0, 6.0, 8.0)


def test_failure_policy_official_follows_the_verifier() -> None:
    assert failure_policy({"verifier": {"name": "vqascore"}}).applied == "zero"  # t2v_metrics scores a failed call 0
    assert failure_policy({"verifier": {"name": "synthetic"}}).applied == "missing"
    assert failure_policy({"verifier": {"name": "emma"}}).applied == "zero"  # every problem counts; no answer is wrong
    assert failure_policy({"verifier": {"name": "isg"}}).applied == "missing"  # no block questions: out of the block mean
    assert failure_policy({"verifier": {"name": "gedit"}}).applied == "missing"  # grades failed inside the score already
    assert failure_policy({"verifier": {"name": "vqascore"}, "on_failure": "missing"}).applied == "missing"
    assert failure_policy({"verifier": {"name": "vqascore:some/model"}}).describe() == \
        "on_failure: official (official for vqascore:some/model: counted as 0)"
    with pytest.raises(BonError, match="on_failure must be one of official, zero, missing"):
        failure_policy({"on_failure": "drop"})


def test_weighted_means_equal_explicit_resampling() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(size=(3, 7))
    values[1, 2] = np.nan
    w = multinomial_weights(7, 50, seed=4)
    assert (w.sum(1) == 7).all()
    got = weighted_means(values, w)
    for b in range(50):
        idx = np.repeat(np.arange(7), w[b].astype(int))  # the resample these weights stand for
        for j in range(3):
            assert got[b, j] == pytest.approx(np.nanmean(values[j, idx]))


def test_bootstrap_intervals_are_seeded_and_cover_the_point(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", prompts=15, images=False)
    prompts = load_prompt_level(run)
    a = bon_metrics(prompts, bootstrap=400, seed=3)
    pd.testing.assert_frame_equal(a, bon_metrics(prompts, bootstrap=400, seed=3))
    c = bon_metrics(prompts, bootstrap=400, seed=4)
    assert not np.allclose(a.bon_lo, c.bon_lo) and np.abs(a.bon_lo - c.bon_lo).max() < 0.06
    assert ((a.bon_lo <= a.bon_score + 1e-12) & (a.bon_score <= a.bon_hi + 1e-12)).all()
    assert ((a.gain_lo <= a.gain + 1e-12) & (a.gain <= a.gain_hi + 1e-12)).all()
    # a direct numpy bootstrap of one judge's mean agrees to Monte Carlo error
    row = a.iloc[0]
    sub = prompts[(prompts.task == row.task) & (prompts.generator == row.generator) & (prompts.judge == row.judge)]
    v = sub.sort_values("prompt_id")["pick_score"].to_numpy()
    idx = np.random.default_rng(0).integers(0, len(v), (4000, len(v)))
    lo, hi = percentile_ci(v[idx].mean(1))
    assert (row.bon_lo, row.bon_hi) == pytest.approx((lo, hi), abs=0.05)


# --- leaderboard ------------------------------------------------------------------------------------


def test_sign_flip_and_holm_by_hand() -> None:
    d = np.array([0.3, -0.1, 0.2, 0.0, 0.4])
    nz = d[d != 0]
    sums = [abs(np.dot(s, nz)) for s in itertools.product((1, -1), repeat=len(nz))]
    assert sign_flip_p(d) == pytest.approx(np.mean(np.array(sums) >= abs(nz.sum()) - 1e-12))
    assert sign_flip_p(np.zeros(4)) == 1.0
    big = np.full(40, 0.1)
    assert sign_flip_p(big, permutations=999, seed=0) == pytest.approx(1 / 1000)
    p = np.array([0.01, 0.04, np.nan, 0.03])
    assert holm(p) == pytest.approx([0.03, 0.06, np.nan, 0.06], nan_ok=True)


def test_leaderboard_ranks_and_finds_the_clearly_worse_judge(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", qualities=(0.0, 0.9, 0.95), prompts=30, tasks=("t2i",), generators=("g1",),
                   images=False, cost_usd=0.002)
    t = run_leaderboard(run, "t2i", "g1", bootstrap=400)
    assert t["rank"].tolist() == [1, 2, 3] and t["bon_score"].is_monotonic_decreasing
    worst = t.iloc[-1]
    assert worst.judge == "judge-0" and not worst.tied_with_best and worst.p_holm < 0.05 and worst.diff_hi < 0
    assert t.iloc[0].tied_with_best and math.isnan(t.iloc[0].p_vs_best)
    assert (t.calls_per_prompt == 6).all() and t.usd_per_prompt.iloc[0] == pytest.approx(6 * 0.002)
    assert t.gain_per_dollar.iloc[0] == pytest.approx(t.gain.iloc[0] / (6 * 0.002))
    assert not np.isnan(t.mmrb2_accuracy).any()
    text = format_leaderboard(t)
    assert "judge-0" in text and "best" in text
    with pytest.raises(BonError, match="no picks"):
        leaderboard(load_prompt_level(run), "edit", "g1")


def test_judge_costs_prefer_the_selection_stage() -> None:
    stats = {"judges": {"a": {"calls_made": 10, "cost_usd": 1.0, "judge_seconds": 5.0,
                              "selection": {"calls_made": 4, "cost_usd": 0.2, "judge_seconds": 1.0}},
                        "b": {"calls_made": 0, "cost_usd": 0.0}}}
    c = judge_costs(stats)
    assert c["a"] == {"usd_per_call": pytest.approx(0.05), "seconds_per_call": pytest.approx(0.25)}
    assert math.isnan(c["b"]["usd_per_call"])


def test_nanquantiles_and_sign_table_are_numpys_and_itertools_own() -> None:
    """The percentile intervals' one-sort quantiles give np.nanquantile's bits (NaN gaps, ties, all-NaN columns,
    one value), and the exact sign-flip table is itertools.product's."""
    from analysis.bon_metrics import nanquantiles
    from analysis.leaderboard import all_signs

    rng = np.random.default_rng(0)
    values = np.round(rng.normal(size=(41, 6)), 1)
    values[rng.random(values.shape) < 0.3] = np.nan
    values[:, 0], values[1:, 1] = np.nan, np.nan
    probs = (0.025, 0.975, 0.1, 0.5, 0.0, 1.0)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        expected = [np.nanquantile(values, p, axis=0) for p in probs]
    for axis, data in ((0, values), (1, values.T)):
        for got, want in zip(nanquantiles(data, probs, axis), expected):
            assert np.array_equal(got, want, equal_nan=True)
    for n in (1, 5, 11):
        assert np.array_equal(all_signs(n), np.array(list(itertools.product((1.0, -1.0), repeat=n))))
