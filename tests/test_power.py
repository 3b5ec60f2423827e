"""The study-size simulation: the pilot fit recovers known ingredients, widths shrink with judges, and the
recommendation is the smallest design that reaches the target."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.power import fit_setting, format_power, power_analysis, power_grid, recommend, simulate_cell
from analysis_run import make_run


def test_fit_recovers_noise_and_slope_of_a_known_model() -> None:
    rng = np.random.default_rng(0)
    judges, prompts = 12, 400
    acc = np.linspace(50, 90, judges)
    true_y = 0.2 + 0.01 * acc
    prompt_effect = rng.normal(0, 0.2, prompts)  # shared by judges: must not count as noise
    scores = true_y[:, None] + prompt_effect[None, :] + rng.normal(0, 0.15, (judges, prompts))
    fit = fit_setting(scores, acc, np.zeros(judges))
    assert fit["prompt_sd"] == pytest.approx(0.15, rel=0.05)
    assert fit["slope"] == pytest.approx(0.01, rel=0.1)
    assert fit["judge_sd"] < 0.01  # no judge-specific deviation in this model
    assert fit["acc_sd"] == pytest.approx(np.std(acc, ddof=1), rel=1e-6)


MODEL = {"acc_mean": 65.0, "acc_sd": 8.0, "slope": 0.01, "intercept": 0.0, "judge_sd": 0.04, "prompt_sd": 0.3}


def test_cells_are_deterministic_and_widths_shrink_with_judges() -> None:
    a = simulate_cell(MODEL, 8, 100, 500, sims=60, bootstrap=100, seed=1)
    assert a == simulate_cell(MODEL, 8, 100, 500, sims=60, bootstrap=100, seed=1)
    grid = power_grid(MODEL, prompts_grid=(50, 400), judges_grid=(5, 20), pairs=500, sims=60, bootstrap=100)
    w = grid.set_index(["judges", "prompts"])["median_width"]
    assert w[(20, 400)] < w[(5, 400)] and w[(20, 50)] < w[(5, 50)]
    assert w[(20, 400)] <= w[(20, 50)] + 0.05
    true_r = grid["true_r"].iloc[0]
    sx = MODEL["slope"] * MODEL["acc_sd"]
    assert true_r == pytest.approx(sx / math.sqrt(sx ** 2 + MODEL["judge_sd"] ** 2))
    assert ((grid.p_excludes_zero >= 0) & (grid.p_excludes_zero <= 1)).all()


def test_recommend_picks_the_fewest_judges_then_prompts() -> None:
    grid = pd.DataFrame({"judges": [5, 5, 8, 8, 12], "prompts": [50, 100, 50, 100, 50],
                         "median_width": [0.9, 0.6, 0.55, 0.45, 0.3]})
    assert recommend(grid, 0.5) == {"judges": 8, "prompts": 100, "median_width": 0.45}
    assert recommend(grid, 0.1) is None


def test_power_analysis_of_a_pilot_run(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", prompts=10, images=False)
    result = power_analysis(run, width=0.6, prompts_grid=(20, 80), judges_grid=(5, 10), sims=40, bootstrap=60)
    assert set(result["grid"]["judges"]) == {5, 10} and result["pairs"] == 24
    assert len(result["pilot_settings"]) == 4
    text = format_power(result)
    assert "median 95% CI width" in text and "judges" in text
