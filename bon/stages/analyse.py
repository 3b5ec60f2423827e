"""Stage 7: the numbers a reader needs, from picks, scores and MMRB2 accuracies.

For every (task, generator, judge): the judge's accuracy on the preference set (x) and the mean
downstream score of its picks (y), beside the random-pick expectation and the oracle.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from bon.content import TASKS
from bon.stages.verify import ScoreKey

RESULT_COLUMNS = [
    "task", "generator", "judge", "strategy", "mmrb2_accuracy", "bon_score", "random_score", "oracle_score",
    "judge_calls", "missing_verdicts", "prompts", "n", "unscored_picks",
]


def candidate_baselines(scores: dict[ScoreKey, dict], prompt_ids: list[str], generator: str, n: int) -> tuple[float, float]:
    """Random-pick expectation (mean over candidates) and oracle (best candidate), averaged over prompts."""
    means, bests = [], []
    for pid in prompt_ids:
        vals = [scores[(generator, pid, k)]["score"] for k in range(n) if (generator, pid, k) in scores]
        vals = [v for v in vals if v is not None]
        if vals:
            means.append(float(np.mean(vals)))
            bests.append(float(np.max(vals)))
    return (float(np.mean(means)) if means else math.nan, float(np.mean(bests)) if bests else math.nan)


def results_table(
    picks: list[dict[str, Any]],
    scores: dict[ScoreKey, dict],
    accuracies: dict[str, dict[str, float]],  # judge -> bon task -> accuracy (%)
    n: int,
) -> pd.DataFrame:
    groups: dict[tuple[str, str, str, str], list[dict]] = defaultdict(list)
    for pk in picks:
        groups[(pk["task"], pk["generator"], pk["judge"], pk["strategy"])].append(pk)
    rows = []
    order = {t: i for i, t in enumerate(TASKS)}
    for (task, gen, judge, strategy), mine in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0])):
        picked = [scores.get((gen, pk["prompt_id"], pk["index"]), {}).get("score") for pk in mine]
        valid = [s for s in picked if s is not None]
        random_score, oracle_score = candidate_baselines(scores, [pk["prompt_id"] for pk in mine], gen, n)
        rows.append({
            "task": task,
            "generator": gen,
            "judge": judge,
            "strategy": strategy,
            "mmrb2_accuracy": accuracies.get(judge, {}).get(task, math.nan),
            "bon_score": float(np.mean(valid)) if valid else math.nan,
            "random_score": random_score,
            "oracle_score": oracle_score,
            "judge_calls": sum(pk["calls"] for pk in mine),
            "missing_verdicts": sum(pk["missing"] for pk in mine),
            "prompts": len(mine),
            "n": n,
            "unscored_picks": len(picked) - len(valid),
        })
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)
