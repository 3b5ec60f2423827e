"""How often do the report's correlation intervals cover a known true correlation?

    python benchmarks/interval_coverage.py [--sims 200] [--bootstrap 500] [--rho 0.0 0.5 0.8] [--sizes demo paper]

Each simulated study draws a population of judges with a known correlation between their true
pairwise accuracy and the true mean score of their Best-of-N picks, then measures both with noise, as a
study does: every judge answers the same preference pairs in both orders (each answer right with its
true accuracy), and its picks on the same downstream prompts score its true mean plus prompt-level noise
(a shared prompt difficulty plus the pick's own luck). The very interval code of the report
(:func:`analysis.statistics.correlation_intervals`) then runs on the measurements, and the script prints,
per size and true correlation, how often each interval contained the truth:

- ``BC (report)``: the report's bias-corrected bootstrap (judges, prompts and pairs resampled);
- ``meas. only``: the judges-fixed percentile spread (prompts and pairs only), which the report says is
  *not* an interval for judges in general;
- ``Fisher z``: the textbook interval from r and the number of judges, ignoring measurement noise.

The truth is the population Pearson correlation of the true values (a large Monte Carlo draw), the
quantity an interval that resamples judges aims at. Sizes: ``demo`` = 9 judges, 40 prompts, 160 pairs
per task (``bon demo``'s defaults); ``paper`` = 23 judges, 1,000 pairs per task (MMRB2's published
table) and 200 Best-of-N prompts (an assumption: the paper's downstream prompt counts vary).
Coverage from ``--sims`` studies carries binomial error of about ±1.96·sqrt(p(1-p)/sims).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.stats import norm

from _common import parser
from analysis.statistics import PairOutcomes, Setting, _axis_from_outcomes, correlation_intervals

def fisher_ci(r: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """The textbook Fisher-z interval for Pearson r over n judges: the baseline that ignores the
    measurement noise of accuracies and Best-of-N scores (bon's report does not use it)."""
    if n < 4 or not np.isfinite(r):
        return (math.nan, math.nan)
    z = math.atanh(min(max(r, -0.999999), 0.999999))
    half = norm.ppf(0.5 + level / 2) / math.sqrt(n - 3)
    return (math.tanh(z - half), math.tanh(z + half))


SIZES = {"demo": {"judges": 9, "prompts": 40, "pairs": 160}, "paper": {"judges": 23, "prompts": 200, "pairs": 1000}}
ACC_MEAN, ACC_SPREAD = 0.62, 0.08  # true accuracies around 62% +- 8 points (MMRB2's judges: ~50-80%)
BON_MEAN, BON_SPREAD = 0.70, 0.05  # true mean pick scores
PROMPT_SD, PICK_SD = 0.12, 0.25  # shared prompt difficulty; one pick's own luck


def true_values(rng: np.random.Generator, n: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` judges' true accuracy (a probability) and true mean pick score, from bivariate-normal latents
    correlated ``rho``."""
    latent = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=n)
    return np.clip(ACC_MEAN + ACC_SPREAD * latent[:, 0], 0.35, 0.98), BON_MEAN + BON_SPREAD * latent[:, 1]


def population_r(rho: float) -> float:
    acc, bon = true_values(np.random.default_rng(12345), 1_000_000, rho)
    return float(np.corrcoef(acc, bon)[0, 1])


def one_study(rng: np.random.Generator, size: dict[str, int], rho: float, bootstrap: int) -> dict[str, tuple[float, float]]:
    judges, prompts, pairs = size["judges"], size["prompts"], size["pairs"]
    acc, bon = true_values(rng, judges, rho)
    correct = rng.binomial(2, acc[:, None], size=(judges, pairs)).astype(float)  # both orders of each pair
    outcomes = PairOutcomes("t2i", [f"p{k}" for k in range(pairs)], ["sim"] * pairs, [f"j{j}" for j in range(judges)],
                            correct, np.full((judges, pairs), 2.0))
    axis = _axis_from_outcomes("simulated", {"t2i": outcomes}, "simulation")
    scores = bon[:, None] + rng.normal(0, PROMPT_SD, prompts)[None, :] + rng.normal(0, PICK_SD, (judges, prompts))
    setting = Setting("t2i", "sim", "knockout", [f"j{j}" for j in range(judges)], scores=scores)
    row = correlation_intervals([setting], axis, bootstrap=bootstrap, seed=int(rng.integers(2**31)),
                                permutations=1, pooled_rows=False).iloc[0]
    r = float(row["pearson_r"])
    return {"BC (report)": (row["pearson_lo"], row["pearson_hi"]),
            "meas. only": (row["pearson_lo_meas"], row["pearson_hi_meas"]),
            "Fisher z": fisher_ci(r, judges)}


def main() -> None:
    ap = parser(__doc__, sims=200, bootstrap=500, rho=[0.0, 0.5, 0.8], seed=0)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    args = ap.parse_args()
    print(f"coverage of 95% intervals for Pearson r ({args.sims} simulated studies each, {args.bootstrap} bootstrap "
          f"replicates; binomial error about ±{196 * math.sqrt(0.95 * 0.05 / args.sims):.1f} points at 95%)")
    print(f"{'size':<7}{'judges':>7}{'prompts':>8}{'pairs':>7}{'true r':>8}  {'BC (report)':>12}{'meas. only':>12}{'Fisher z':>10}")
    started = time.perf_counter()
    for size_name in args.sizes:
        size = SIZES[size_name]
        for rho in args.rho:
            truth = population_r(rho)
            rng = np.random.default_rng([args.seed, int(rho * 1000), size["judges"]])
            hits: dict[str, list[bool]] = {}
            for _ in range(args.sims):
                for method, (lo, hi) in one_study(rng, size, rho, args.bootstrap).items():
                    ok = np.isfinite(lo) and np.isfinite(hi)
                    hits.setdefault(method, []).append(bool(ok and lo <= truth <= hi))
            cov = {m: 100.0 * np.mean(h) for m, h in hits.items()}
            print(f"{size_name:<7}{size['judges']:>7}{size['prompts']:>8}{size['pairs']:>7}{truth:>+8.2f}  "
                  f"{cov['BC (report)']:>11.1f}%{cov['meas. only']:>11.1f}%{cov['Fisher z']:>9.1f}%", flush=True)
    print(f"({time.perf_counter() - started:.0f} s; z for 95%: {norm.ppf(0.975):.2f})")


if __name__ == "__main__":
    main()
