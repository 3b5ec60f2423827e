"""Headroom: how much a judge could gain over a random pick, per task and generator.

A judge can only be told apart from another on prompts whose N candidates score differently. A strong
generator whose candidates all pass, or a verifier too coarse to separate them, leaves no headroom, and
then every judge's Best-of-N score is the same up to noise (RewardBench 2 saw strong generators erase the
signal). Per (task, generator), over the Best-of-N prompts and their scored candidates:

- ``random``: the mean candidate score (a random pick), ``worst``: the worst candidate (a judge that always
  picks wrong), ``oracle``: the best one; ``headroom`` = oracle − random;
- ``alike``: the share of prompts whose candidates all score alike (a prompt there cannot separate judges);
- ``noise``: the standard error of a random pick's mean score over these prompts.

:func:`headroom_warning` says when the headroom is too small for a correlation across judges: most prompts
alike, or a perfect judge's gain within two standard errors of a random pick.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.bon_metrics import ScoreKey, candidate_scores, task_order

HEADROOM_COLUMNS = ["task", "generator", "prompts", "n", "random", "worst", "oracle", "headroom", "alike", "noise",
                    "warning"]
MAX_ALIKE = 0.5  # at least this share of prompts without spread: most of the study cannot separate judges
MIN_NOISE_MULTIPLE = 2.0  # a perfect judge's gain must exceed this many standard errors of a random pick
ALIKE_TOLERANCE = 1e-9


def headroom_table(prompts: pd.DataFrame, scores: dict[ScoreKey, dict[str, Any]], n: int | None = None) -> pd.DataFrame:
    """One row per (task, generator) of the picks (:func:`analysis.bon_metrics.prompt_level` rows)."""
    cands = candidate_scores(scores, n)
    rows = []
    keys = prompts[["task", "generator", "prompt_id"]].drop_duplicates()
    order = {t: i for i, t in enumerate(task_order(keys["task"]))}
    for (task, gen), sub in sorted(keys.groupby(["task", "generator"], sort=False), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        values = [cands.get((gen, pid), np.array([])) for pid in sub["prompt_id"]]
        values = [v[np.isfinite(v)] for v in values]
        values = [v for v in values if v.size]
        rows.append({"task": task, "generator": gen, **_levels(values)})
    return pd.DataFrame(rows, columns=HEADROOM_COLUMNS)


def _levels(values: list[np.ndarray]) -> dict[str, Any]:
    if not values:
        nan = math.nan
        return {"prompts": 0, "n": 0, "random": nan, "worst": nan, "oracle": nan, "headroom": nan, "alike": nan,
                "noise": nan, "warning": "no scored candidates"}
    rand = float(np.mean([v.mean() for v in values]))
    oracle = float(np.mean([v.max() for v in values]))
    alike = float(np.mean([v.max() - v.min() <= ALIKE_TOLERANCE for v in values]))
    noise = math.sqrt(float(np.mean([v.var() for v in values])) / len(values))
    row = {"prompts": len(values), "n": int(max(v.size for v in values)), "random": rand,
           "worst": float(np.mean([v.min() for v in values])), "oracle": oracle, "headroom": oracle - rand,
           "alike": alike, "noise": noise}
    return {**row, "warning": headroom_warning(row)}


def headroom_warning(row: dict[str, Any]) -> str:
    """Why this setting's headroom is too small for a correlation across judges ("" when it is not)."""
    notes = []
    if row["alike"] >= MAX_ALIKE:
        notes.append(f"no headroom on {row['alike']:.0%} of prompts (all {row['n']} candidates score alike)")
    if not row["headroom"] > MIN_NOISE_MULTIPLE * row["noise"]:
        notes.append(f"oracle − random = {row['headroom']:.3f} is within {MIN_NOISE_MULTIPLE:g} standard errors "
                     f"({row['noise']:.3f}) of a random pick: even a perfect judge is not told apart from chance")
    if not notes:
        return ""
    return "headroom too small for a correlation: " + "; ".join(notes)
