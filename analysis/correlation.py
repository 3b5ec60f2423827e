"""Does a judge's MMRB2 accuracy predict its Best-of-N score? Pearson and Spearman per setting.

With a handful of judges per setting, a correlation is often undefined (too few points, or every
judge picking the same candidates); that is reported as NaN so one degenerate setting never stops
a whole report.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from bon.errors import BonError
from bon.tasks import TASK_NAMES as TASK_ORDER

CORRELATION_COLUMNS = ["task", "generator", "n_judges", "pearson_r", "pearson_p", "spearman_rho", "spearman_p"]
NEEDED_COLUMNS = ("task", "generator", "judge", "mmrb2_accuracy", "bon_score")


def correlate(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Pearson r and Spearman rho with two-sided p-values over the pairs where both values are finite.

    NaN statistics when fewer than 3 such pairs remain or either side is constant.
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise ValueError(f"x and y must be 1-d and of equal length, got {xa.shape} and {ya.shape}")
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    out: dict[str, Any] = {"n": int(xa.size), "pearson_r": math.nan, "pearson_p": math.nan,
                           "spearman_rho": math.nan, "spearman_p": math.nan}
    if xa.size < 3 or np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # near-constant input warnings; the numbers are still defined
        pr = stats.pearsonr(xa, ya)
        sr = stats.spearmanr(xa, ya)
    out.update(pearson_r=float(pr[0]), pearson_p=float(pr[1]),
               spearman_rho=float(sr[0]), spearman_p=float(sr[1]))
    return out


def correlation_table(results: pd.DataFrame, by: Sequence[str] = ("task", "generator")) -> pd.DataFrame:
    """One row per ``by`` group (default task x generator): accuracy vs BoN score across its judges.

    ``n_judges`` counts judges with both numbers. Tasks come in the paper's order, then any others.
    Extra ``by`` columns (say ``strategy``) are kept in the output after ``generator``.
    """
    by = list(by)
    missing = [c for c in (*by, *NEEDED_COLUMNS) if c not in results.columns]
    if missing:
        raise BonError(f"results table lacks column(s) {', '.join(dict.fromkeys(missing))}")
    columns = [*by, *[c for c in CORRELATION_COLUMNS if c not in by]]
    if results.empty:
        return pd.DataFrame(columns=columns)
    dup = results.duplicated([*by, "judge"], keep=False)
    if dup.any():
        row = results[dup].iloc[0]
        where = ", ".join(f"{c}={row[c]}" for c in [*by, "judge"])
        raise BonError(f"results table has several rows for {where}; add the column that tells them apart to `by`")
    rows = []
    for key, group in results.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        c = correlate(group["mmrb2_accuracy"], group["bon_score"])
        rows.append({**dict(zip(by, key)), "n_judges": c.pop("n"), **c})
    table = pd.DataFrame(rows, columns=columns)
    if "task" in by:
        rank = {t: i for i, t in enumerate(TASK_ORDER)}
        order = table["task"].map(lambda t: rank.get(t, len(rank)))
        table = table.assign(_o=order).sort_values(["_o", *[c for c in by if c != "task"]], kind="stable")
        table = table.drop(columns="_o").reset_index(drop=True)
    return table
