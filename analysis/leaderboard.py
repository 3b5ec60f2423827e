"""Which reranker should a product use? Judges ranked by Best-of-N gain for one setting, with paired tests.

For one (task, generator[, strategy]) the judges are ranked by their mean downstream score. Each judge
is compared with the best one on the same prompts (paired): the difference of means gets a percentile
bootstrap interval over prompts and a two-sided sign-flip permutation p-value (exact up to 16 differing
prompts, else 10,000 random flips), Holm-adjusted over the judges compared. ``tied_with_best`` (the
label "not significantly worse") is decided by the interval printed beside it (:data:`LABEL_RULE`): the
judge's 95% interval of the difference includes 0. One rule a reader can check by eye; the Holm p beside
it is the multiplicity-aware reading and may disagree where a difference is borderline (the two are
different procedures: a percentile bootstrap and a sign-flip test). A judge the leakage policy leaves out,
or one without information, gets no label relative to the best.

Caveat: the best judge is picked on the same prompts it is compared on, which makes the best look
slightly better than it would on fresh prompts (the winner's curse); neither the interval nor Holm
corrects that selection. Treat "tied" as the safe reading.

Cost per prompt comes from the picks (judge calls used per prompt, made or served from the store) and
``stats.json`` (money and judge seconds per paid call), so ``gain_per_call`` and ``gain_per_dollar``
tell a cheap good-enough judge from an expensive marginally better one.
"""

from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from analysis import leakage
from analysis.prefilter import cost_text
from analysis.bon_metrics import (apply_on_failure, failure_policy, iter_settings, no_information_by_judge, percentile_ci, prompt_level,
                                  prompt_weights, setting_intervals, setting_matrices, weighted_means,
                                  INTERVAL_COLUMNS)
from bon.errors import BonError
from bon.run import Run, as_run
from bon.seeds import derive_seed

LEADERBOARD_COLUMNS = [
    "task", "generator", "strategy", "rank", "judge", "mmrb2_accuracy", "prompts", "bon_score", "bon_lo", "bon_hi",
    "gain", "gain_lo", "gain_hi", "diff_vs_best", "diff_lo", "diff_hi", "p_vs_best", "p_holm", "tied_with_best",
    "calls_per_prompt", "usd_per_prompt", "seconds_per_prompt", "gain_per_call", "gain_per_dollar", "no_information",
    "left_out",
]
EXACT_SIGN_FLIP_MAX = 16
SIGNS = np.array([1.0, -1.0])
LABEL_RULE = ("label \"not significantly worse\" (tied): the judge's printed 95% interval of the difference to the best "
              "includes 0 (per judge, not adjusted for the judges compared; p (Holm) is); judges left out by the leakage "
              "policy or without information get no label")


def judge_costs(stats: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """Per judge: money and judge seconds per paid call, from ``stats.json`` (selection stage when recorded)."""
    out: dict[str, dict[str, float]] = {}
    for judge, s in ((stats or {}).get("judges") or {}).items():
        if not isinstance(s, Mapping):
            continue
        part = s.get("selection") if isinstance(s.get("selection"), Mapping) and s["selection"].get("calls_made") else s
        made = float(part.get("calls_made", 0) or 0)
        out[judge] = {
            "usd_per_call": float(part.get("cost_usd", 0.0) or 0.0) / made if made else math.nan,
            "seconds_per_call": float(part.get("judge_seconds", 0.0) or 0.0) / made if made else math.nan,
        }
    return out


def sign_flip_p(diffs: np.ndarray, permutations: int = 10000, seed: int = 0) -> float:
    """Two-sided p-value for mean(diffs) = 0 under random sign flips (exact for few non-zero diffs)."""
    d = np.asarray(diffs, float)
    d = d[np.isfinite(d) & (d != 0)]
    if d.size == 0:
        return 1.0
    obs = abs(d.sum())
    tol = 1e-12 * max(1.0, obs)
    if d.size <= EXACT_SIGN_FLIP_MAX:
        return float(np.mean(np.abs(all_signs(d.size) @ d) >= obs - tol))
    rng = np.random.default_rng(seed)
    signs = SIGNS[rng.integers(0, 2, size=(permutations, d.size))]  # rng.choice(SIGNS, ...)'s draws, without its overhead
    return float((1 + np.sum(np.abs(signs @ d) >= obs - tol)) / (1 + permutations))


@functools.lru_cache(maxsize=None)
def all_signs(n: int) -> np.ndarray:
    """Every choice of n signs (2**n rows, in ``itertools.product((1.0, -1.0), repeat=n)``'s order: row r's k-th
    sign is -1 where bit n-1-k of r is set), built once per n: each judge pair's exact test reuses it."""
    signs = 1.0 - 2.0 * ((np.arange(2 ** n)[:, None] >> np.arange(n - 1, -1, -1)) & 1)
    signs.flags.writeable = False
    return signs


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (NaN stays NaN)."""
    p = np.asarray(pvalues, float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m, running = len(order), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        out[i] = running
    return out


def leaderboard(prompts: pd.DataFrame, task: str, generator: str, strategy: str | None = None,
                stats: Mapping[str, Any] | None = None, accuracies: Mapping[str, float] | None = None,
                bootstrap: int = 2000, seed: int = 0, level: float = 0.95, permutations: int = 10000,
                excluded: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The ranked judges of one setting (rows of :func:`analysis.bon_metrics.prompt_level`). The best is the
    best judge the leakage policy keeps (``excluded``: judge -> why it is left out); left-out judges are
    ranked after the kept ones, with the reason in ``left_out``."""
    excluded = dict(excluded or {})
    sub = prompts[(prompts.task == task) & (prompts.generator == generator)]
    if strategy is not None:
        sub = sub[sub.strategy == strategy]
    if sub.empty:
        have = sorted({f"{t}/{g}" for t, g in zip(prompts.task, prompts.generator)})
        raise BonError(f"no picks for task {task!r} and generator {generator!r} (the run has {', '.join(have) or 'none'})")
    strategies = sorted(set(sub.strategy))
    if len(strategies) > 1:
        raise BonError(f"{task}/{generator} has picks of several strategies ({', '.join(strategies)}); choose one")
    return setting_leaderboard(sub, task, generator, strategies[0], list(sub["judge"].unique()),
                               sorted(sub["prompt_id"].unique()), stats, accuracies, bootstrap, seed, level,
                               permutations, excluded)


def setting_leaderboard(sub: pd.DataFrame, task: str, generator: str, strategy: str, judges: list[str],
                        pids: list[str], stats: Mapping[str, Any] | None = None,
                        accuracies: Mapping[str, float] | None = None, bootstrap: int = 2000, seed: int = 0,
                        level: float = 0.95, permutations: int = 10000,
                        excluded: Mapping[str, str] | None = None) -> pd.DataFrame:
    """:func:`leaderboard` of one setting's rows (one of :func:`analysis.bon_metrics.iter_settings`), its judges in
    first-seen order and its sorted prompt ids."""
    excluded = dict(excluded or {})
    mats = setting_matrices(sub, (*INTERVAL_COLUMNS, "calls"), judges, pids)
    scores, rnd, calls = mats["pick_score"], mats["random_score"], mats["calls"]
    ci = setting_intervals(sub, judges, pids, seed, task, generator, bootstrap, level, mats)  # as in the metrics table
    with np.errstate(invalid="ignore"):
        bon = np.nanmean(np.where(np.isfinite(scores), scores, np.nan), 1)
        gain = bon - np.nanmean(rnd, 1)
    uninformed = no_information_by_judge(sub, judges)
    best = _best(bon, [why or excluded.get(judge) for judge, why in zip(judges, uninformed)])
    if best is None:  # every informed judge is left out by the leakage policy: the best of those, flagged
        best = _best(bon, uninformed)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a judge with no scored pick (or no best): NaN, said so
        diffs = scores - (scores[best] if best is not None else np.nan)  # paired per prompt; NaN where either is unscored
        diff = np.nanmean(np.where(np.isfinite(diffs), diffs, np.nan), 1) if diffs.size else diffs
    p = np.array([math.nan if j == best or best is None else sign_flip_p(diffs[j], permutations,
                                                         derive_seed(seed, "sign-flip", task, generator, judges[j]))
                  for j in range(len(judges))])
    p_adj = holm(p)
    costs = judge_costs(stats)
    dlo, dhi = percentile_ci(weighted_means(diffs, prompt_weights(seed, task, generator, len(pids), bootstrap)), level)
    rows = []
    for j, judge in enumerate(judges):
        cpp = float(np.nanmean(calls[j])) if np.isfinite(calls[j]).any() else math.nan
        c = costs.get(judge, {})
        usd = cpp * c.get("usd_per_call", math.nan)
        sec = cpp * c.get("seconds_per_call", math.nan)
        rows.append({
            "task": task, "generator": generator, "strategy": strategy, "judge": judge,
            "mmrb2_accuracy": (accuracies or {}).get(judge, math.nan), "prompts": int(np.isfinite(scores[j]).sum()),
            "bon_score": bon[j], "bon_lo": ci["bon"][0][j], "bon_hi": ci["bon"][1][j], "gain": gain[j],
            "gain_lo": ci["gain"][0][j], "gain_hi": ci["gain"][1][j],
            "diff_vs_best": diff[j], "diff_lo": dlo[j], "diff_hi": dhi[j], "p_vs_best": p[j], "p_holm": p_adj[j],
            "tied_with_best": j == best or (best is not None and not uninformed[j] and judge not in excluded
                                            and includes_zero(dlo[j], dhi[j])),
            "calls_per_prompt": cpp, "usd_per_prompt": usd, "seconds_per_prompt": sec,
            "gain_per_call": gain[j] / cpp if cpp else math.nan,
            "gain_per_dollar": gain[j] / usd if np.isfinite(usd) and usd > 0 else math.nan,
            "no_information": uninformed[j] or "",
            "left_out": excluded.get(judge, ""),
        })
    table = pd.DataFrame(rows)  # the kept judges with information first: a judge left out or with none is never first
    table = table.assign(_last=(table["no_information"] != "") | (table["left_out"] != "")).sort_values(
        ["_last", "bon_score", "judge"], ascending=[True, False, True], kind="stable").drop(columns="_last")
    table.insert(3, "rank", np.arange(1, len(table) + 1))
    return table[LEADERBOARD_COLUMNS].reset_index(drop=True)


def includes_zero(lo: float, hi: float) -> bool:
    """Whether a printed interval [lo, hi] includes 0 (the leaderboard's label rule; an unknown bound: no)."""
    return bool(np.isfinite(lo) and np.isfinite(hi) and lo <= 0.0 <= hi)


def _best(bon: np.ndarray, uninformed: list[str | None]) -> int | None:
    """The judge with the highest BoN score among those whose verdicts carry information (None: none does)."""
    usable = [j for j in range(len(bon)) if not uninformed[j] and np.isfinite(bon[j])]
    return max(usable, key=lambda j: bon[j]) if usable else None


def all_leaderboards(prompts: pd.DataFrame, stats: Mapping[str, Any] | None = None,
                     accuracies: pd.DataFrame | None = None, bootstrap: int = 2000, seed: int = 0,
                     level: float = 0.95, excluded: Mapping[str, str] | None = None) -> pd.DataFrame:
    """:func:`leaderboard` for every (task, generator, strategy) of the picks, stacked."""
    if prompts.empty:
        return pd.DataFrame(columns=LEADERBOARD_COLUMNS)
    parts = []
    for task, gen, strategy, sub, judges, pids in iter_settings(prompts):
        acc = None
        if accuracies is not None and not accuracies.empty:
            a = accuracies[accuracies.task == task]
            acc = dict(zip(a["judge"], a["accuracy"]))
        parts.append(setting_leaderboard(sub, task, gen, strategy, judges, pids, stats, acc, bootstrap, seed, level,
                                         excluded=excluded))
    return pd.concat(parts, ignore_index=True)


def run_leaderboard(run: Run | Path, task: str, generator: str, strategy: str | None = None,
                    bootstrap: int = 2000, seed: int = 0, grader_judges: str | None = None) -> pd.DataFrame:
    """:func:`leaderboard` for a run folder (the study's picks and those of ``bon select``), with the run's
    own MMRB2 accuracies beside each judge."""
    from analysis.statistics import run_judge_axis

    run = as_run(run)
    picks = run.selected_pick_records
    if strategy is None:  # the study's own strategy unless asked for one of `bon select`
        own = {p.get("strategy", "") for p in run.pick_records}
        picks = [p for p in picks if p.get("strategy", "") in own]
    scores, _ = apply_on_failure(run.score_records, failure_policy(run.study).applied)
    prompts = prompt_level(picks, scores, run.n)
    acc = None
    try:
        axis = run_judge_axis(run, list(dict.fromkeys(prompts["judge"])))
        a = axis.table[axis.table.task == task]
        acc = dict(zip(a["judge"], a["accuracy"]))
    except BonError:
        pass  # a run without a preference set still gets its ranking
    judges = list(dict.fromkeys(prompts["judge"]))
    return leaderboard(prompts, task, generator, strategy, leakage.load_stats(run), acc, bootstrap, seed,
                       excluded=leakage.run_exclusions(run, judges, grader_judges))


def is_best(row: Mapping[str, Any]) -> bool:
    """The leaderboard's best row: ranked first, with information (a judge that answered nothing is never best)
    and kept by the leakage policy."""
    return row.get("rank") == 1 and not row.get("no_information") and not row.get("left_out")


def format_leaderboard(table: pd.DataFrame) -> str:
    """A plain-text rendering for the console (``bon leaderboard``)."""
    if table.empty:
        return "no judges"
    t0 = table.iloc[0]
    lines = [f"{t0['task']} / {t0['generator']} ({t0['strategy']}): judges ranked by Best-of-N score; "
             "difference to the best on the same prompts, 95% bootstrap CI, Holm-adjusted sign-flip p; " + LABEL_RULE,
             f"{'#':>2} {'judge':<22}{'acc %':>7}{'BoN':>7}{'  95% CI':<16}{'gain':>7}{'vs best':>9}{'  95% CI':<18}"
             f"{'p (Holm)':>9}  {'calls/prompt':>12}{'$/prompt':>10}{'gain/call':>10}"]

    def f(v: Any, spec: str) -> str:
        if v is None or not np.isfinite(float(v)):
            return "-"
        text = format(float(v), spec)
        return text.replace("-", "+" if "+" in spec else "", 1) if text.startswith("-") and not any(
            ch in "123456789" for ch in text) else text

    for r in table.itertuples():
        ci = f"[{f(r.bon_lo, '.3f')}, {f(r.bon_hi, '.3f')}]"
        top = is_best(r._asdict())
        dci = f"[{f(r.diff_lo, '+.3f')}, {f(r.diff_hi, '+.3f')}]" if not top else ""
        mark = "  (not significantly worse)" if r.tied_with_best and not top and not r.left_out else ""
        mark = f"  ({r.no_information})" if r.no_information else mark
        mark += f"  [left out: {r.left_out}]" if r.left_out else ""
        lines.append(f"{r.rank:>2} {str(r.judge)[:21]:<22}{f(r.mmrb2_accuracy, '.1f'):>7}{f(r.bon_score, '.3f'):>7}  {ci:<14}"
                     f"{f(r.gain, '+.3f'):>7}{f(r.diff_vs_best, '+.3f') if not top else 'best':>9}  {dci:<16}"
                     f"{f(r.p_holm, '.3f'):>9}  {f(r.calls_per_prompt, '.1f'):>12}{f(r.usd_per_prompt, '.4f'):>10}"
                     f"{f(r.gain_per_call, '.4f'):>10}{mark}")
    return "\n".join(lines)


CHEAPEST_SCOPE = ("pooled over every task and generator of the run (`bon tradeoff` replays each judge on all of them "
                  "at once), not this setting's alone")


def format_cheapest(rows: list[dict[str, Any]], max_loss: float) -> str:
    """The leaderboard's trade-off lines (``bon tradeoff`` data): per judge, the cheapest setting within ``max_loss``
    (:data:`CHEAPEST_SCOPE`: the records are pooled, so the header says so under a per-setting leaderboard)."""
    lines = [f"cheapest way to run each judge within a Best-of-N loss of {max_loss:g} (upper end of the 95% interval; "
             f"only gates called safe); {CHEAPEST_SCOPE}:",
             f"{'judge':<22}{'setting':<30}{'calls/prompt':>13}{'full':>7}{'$/prompt':>10}{'loss':>9}{'gating':>10}"]
    for r in rows:
        money = "-" if r.get("usd_per_prompt") is None else f"{r['usd_per_prompt']:.4f}"
        full = "-" if r.get("full_calls_per_prompt") is None else f"{r['full_calls_per_prompt']:.2f}"
        loss = "-" if r.get("loss") is None else f"{r['loss']:+.4f}"
        lines.append(f"{str(r['judge'])[:21]:<22}{str(r['cheapest_setting'])[:29]:<30}{r['calls_per_prompt']:>13.2f}{full:>7}"
                     f"{money:>10}{loss:>9}{r.get('gating') or '':>10}{cost_text(r)}")
    return "\n".join(lines)
