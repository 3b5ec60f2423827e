"""Issue 36's "one statistics story" outside the demo: the leaderboard's cost section says it is pooled, and the
reranker figure's frontier and labels (the demo-based findings are in tests/test_demo_e2e.py)."""

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.text import Text

from analysis import figures

CHEAP = [{"judge": "a", "cheapest_setting": "knockout gated 0.6", "calls_per_prompt": 4.0, "full_calls_per_prompt": 6.0,
          "usd_per_prompt": None, "loss": 0.0, "loss_hi": 0.004, "calls_cut": 1 / 3, "gating": "safe", "bon_score": 0.8,
          "full_usd_per_prompt": None, "full_bon_score": 0.8, "max_loss": 0.01}]


def test_the_cost_section_says_it_is_pooled_over_settings() -> None:
    """`bon leaderboard` prints the cost section under one setting's table, but `bon tradeoff`'s records pool
    every task and generator: the section's header says so (console and report.html alike)."""
    from analysis.html_report import cheapest_html
    from analysis.leaderboard import format_cheapest

    header = format_cheapest(CHEAP, 0.01).splitlines()[0]
    assert "pooled over every task and generator" in header and "not this setting's alone" in header
    assert "pooled over every task and generator" in cheapest_html(CHEAP, 0.01)


def reranker_table() -> pd.DataFrame:
    """One setting: a left-out twin that would top the frontier, and three judges at nearly one place."""
    rows = [("cheap", 1.0, 0.02, ""), ("twin", 2.0, 0.30, "shares the verifier's grader (g)"), ("good", 4.0, 0.20, ""),
            ("near-1", 8.0, 0.100, ""), ("near-2", 8.2, 0.101, ""), ("near-3", 8.4, 0.102, ""), ("dear", 16.0, 0.05, "")]
    return pd.DataFrame([{"task": "t2i", "generator": "g", "judge": j, "seconds_per_prompt": x, "gain": y,
                          "gain_lo": y - 0.05, "gain_hi": y + 0.05, "left_out": why, "no_information": "",
                          "calls_per_prompt": 6.0, "usd_per_prompt": 0.0} for j, x, y, why in rows])


def test_reranker_frontier_skips_left_out_judges_and_labels_do_not_overlap(tmp_path: Path, monkeypatch) -> None:
    """The cost-gain frontier runs only through judges one may choose (never the verifier's left-out twin),
    and no two judge labels overlap, even for judges at nearly the same cost and gain."""
    drawn = []
    real_save = figures.save_figure
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, formats: drawn.append(fig) or real_save(fig, path, formats))
    figures.reranker_figure(reranker_table(), tmp_path / "reranker", cost="seconds_per_prompt", formats=("png",))
    [fig] = drawn
    ax = fig.axes[0]
    steps = [line for line in ax.lines if line.get_drawstyle().startswith("steps")]
    assert steps, "no frontier drawn"
    points = {(float(x), round(float(y), 6)) for line in steps for x, y in zip(line.get_xdata(), line.get_ydata())}
    assert (2.0, 0.3) not in points and (1.0, 0.02) in points and (4.0, 0.2) in points
    renderer = fig.canvas.get_renderer()
    boxes = {t.get_text(): Text.get_window_extent(t, renderer) for t in ax.texts}  # the words, not a leader line
    assert {"near-1", "near-2", "near-3", "twin†"} <= set(boxes)
    overlapping = [(a, b) for (a, x), (b, y) in combinations(boxes.items(), 2) if x.overlaps(y)]
    assert overlapping == []
    assert np.isfinite([b.x0 for b in boxes.values()]).all()
