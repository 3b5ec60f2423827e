"""Best-of-N metrics per (task, generator, judge, strategy), with bootstrap intervals over prompts.

Everything starts from one long table, :func:`prompt_level`: one row per pick (a judge's choice among
the N candidates of one prompt and generator) with the verifier's score of the pick and of the
prompt's candidates. From it, per group:

- ``bon_score``: mean verifier score of the picks (unscored picks left out, as in ``results.csv``);
- ``random_score``: the expected score of a random pick (mean over the prompt's scored candidates);
- ``oracle_score``: the best candidate's score (what a perfect judge would get);
- random and oracle are averaged over the prompts whose pick is scored, the prompts BoN averages; a failed
  verifier score is first handled by the study's ``on_failure`` (:func:`apply_on_failure`: counted as 0,
  or its prompt left out for every judge; ``official`` follows the verifier's benchmark);
- ``gain`` = BoN − random and ``recovery`` = (BoN − random) / (oracle − random), a ratio of means;
- ``win_rate``: P(pick scores higher than another candidate of the same prompt drawn at random), ties
  count one half; 0.5 is chance, 1 means the pick always beat every other candidate;
- ``mean_rank``: the pick's rank among the prompt's scored candidates, 1 = best, ties share the mean
  rank; ``norm_rank`` = (mean_rank − 1) / (N − 1) per prompt, 0 = best, 1 = worst (per prompt it is
  1 − win_rate, so it carries the same information in the form some readers expect);
- ``oracle_hit``: share of prompts where the pick scored as high as the best candidate.

Intervals are percentile bootstrap intervals over prompts. The same resampled prompts are used for
every judge of a (task, generator), so differences between judges are paired (see
:mod:`analysis.leaderboard`). Seeds come from ``(seed, task, generator)``: deterministic, and
independent of which other judges or settings are in the run.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from bon.content import TASKS
from bon.errors import BonError
from bon.run import Run, as_run, read_json  # noqa: F401  (read_json: the analysis modules' JSON reader)
from bon.seeds import derive_seed

ScoreKey = tuple[str, str, int]
GROUP = ["task", "generator", "judge", "strategy"]
PROMPT_COLUMNS = [*GROUP, "prompt_id", "index", "pick_score", "random_score", "oracle_score", "win", "rank",
                  "n_scored", "hit", "calls", "missing", "informed"]
METRIC_COLUMNS = [
    *GROUP, "prompts", "n", "bon_score", "bon_lo", "bon_hi", "random_score", "oracle_score",
    "gain", "gain_lo", "gain_hi", "recovery", "recovery_lo", "recovery_hi", "win_rate", "win_lo", "win_hi",
    "mean_rank", "norm_rank", "oracle_hit", "unscored_picks", "judge_calls", "calls_per_prompt", "missing_verdicts",
]
# results.csv: the study's headline table, a view of the metrics table (its columns and row order are a contract)
RESULT_COLUMNS = [
    "task", "generator", "judge", "strategy", "mmrb2_accuracy", "bon_score", "random_score", "oracle_score",
    "judge_calls", "missing_verdicts", "prompts", "n", "unscored_picks",
]


# --- a run's records (read once by bon.run.Run) -----------------------------------------------------------------------


def load_picks(run: Run | Path) -> list[dict[str, Any]]:
    """The run's ``picks.jsonl`` records (see :mod:`bon.stages.select`)."""
    return as_run(run).pick_records


def load_selected_picks(run: Run | Path) -> list[dict[str, Any]]:
    """``picks.jsonl`` and the picks ``bon select`` wrote at the study's N (:attr:`bon.run.Run.selected_pick_records`)."""
    return as_run(run).selected_pick_records


def load_scores(run: Run | Path) -> dict[ScoreKey, dict[str, Any]]:
    """The run's ``scores.jsonl`` keyed by (generator, prompt id, candidate index)."""
    return as_run(run).score_records


def read_config(run: Run | Path) -> dict[str, Any]:
    """config.yaml as a dict ({} when missing or unreadable: the analysis does not need it)."""
    return as_run(run).config


def run_n(run: Run | Path) -> int | None:
    """Candidates per prompt from the run's ``config.yaml`` (None when it cannot be read)."""
    return as_run(run).n


# --- one row per pick -----------------------------------------------------------------------------


def candidate_scores(scores: Mapping[ScoreKey, Mapping[str, Any]], n: int | None = None) -> dict[tuple[str, str], np.ndarray]:
    """(generator, prompt id) -> scores of candidates 0..N−1 (NaN where missing or unscored)."""
    width: dict[tuple[str, str], int] = {}
    for gen, pid, idx in scores:
        width[(gen, pid)] = max(width.get((gen, pid), 0), idx + 1)
    out: dict[tuple[str, str], np.ndarray] = {}
    for key, w in width.items():
        out[key] = np.full(max(w, n or 0), np.nan)
    for (gen, pid, idx), rec in scores.items():
        value = rec.get("score")
        if value is not None and math.isfinite(float(value)):
            out[(gen, pid)][idx] = float(value)
    return out


def _pick_stats(values: np.ndarray, index: int) -> dict[str, float]:
    """Win rate, mean rank (1 = best) and oracle hit of candidate ``index`` among finite ``values``."""
    ok = np.isfinite(values)
    n_scored = int(ok.sum())
    out = {"pick_score": math.nan, "random_score": math.nan, "oracle_score": math.nan, "win": math.nan,
           "rank": math.nan, "n_scored": n_scored, "hit": math.nan}
    if n_scored:
        out["random_score"] = float(values[ok].mean())
        out["oracle_score"] = float(values[ok].max())
    if not (0 <= index < len(values)) or not ok[index]:
        return out
    s = float(values[index])
    others = np.delete(values, index)
    others = others[np.isfinite(others)]
    higher = float((others > s).sum())
    ties = float((others == s).sum())
    out["pick_score"] = s
    out["rank"] = 1.0 + higher + ties / 2.0
    out["hit"] = float(s >= out["oracle_score"])
    if others.size:
        out["win"] = float(((others < s).sum() + ties / 2.0) / others.size)
    return out


def _all_pick_stats(cands: Mapping[tuple[str, str], np.ndarray]) -> dict[tuple[str, str, int], dict[str, float]]:
    """:func:`_pick_stats` of every candidate of the prompts whose candidates all have a score, by
    (generator, prompt id, index): the same numbers, for all prompts of one N at once (a prompt with a
    failed score is left to :func:`_pick_stats`)."""
    by_width: dict[int, list[tuple[str, str]]] = {}
    for key, values in cands.items():
        if len(values) and np.isfinite(values).all():
            by_width.setdefault(len(values), []).append(key)
    out: dict[tuple[str, str, int], dict[str, float]] = {}
    for width, keys in by_width.items():
        m = np.stack([cands[key] for key in keys])  # prompts x candidates
        oracle = m.max(axis=1)
        random = m.mean(axis=1)  # each row's mean is the mean of that row alone, bit for bit
        higher = (m[:, None, :] > m[:, :, None]).sum(axis=2)  # [p, i]: candidates scored above candidate i
        ties = (m[:, None, :] == m[:, :, None]).sum(axis=2) - 1
        rank = 1.0 + higher + ties / 2.0
        win = (width - 1 - higher - ties + ties / 2.0) / (width - 1) if width > 1 else np.full(m.shape, math.nan)
        hit = (m >= oracle[:, None]).astype(float)
        for p, (gen, pid) in enumerate(keys):
            for i in range(width):
                out[gen, pid, i] = {"pick_score": float(m[p, i]), "random_score": float(random[p]),
                                    "oracle_score": float(oracle[p]), "win": float(win[p, i]), "rank": float(rank[p, i]),
                                    "n_scored": width, "hit": float(hit[p, i])}
    return out


UNDECIDED_RULES = ("no-verdict", "coin")  # matches the judge's verdicts did not decide (bon.protocol.decide_match)


def pick_informed(pick: Mapping[str, Any]) -> bool:
    """Whether the judge's answers decided anything in this pick: not every call missing, not a pointwise
    pick among equal scores (``coin``), and (for a bracket) some match won by votes or scores rather than
    by the seeded coin."""
    calls, missing = int(pick.get("calls", 0) or 0), int(pick.get("missing", 0) or 0)
    if (calls and missing >= calls) or pick.get("coin") is True:
        return False
    decided_by_coin = False  # a match with a rule, every one so far undecided
    for m in pick.get("matches") or []:
        if isinstance(m, (list, tuple)) and len(m) > 3:
            if m[3] not in UNDECIDED_RULES:
                return True
            decided_by_coin = True
    return not decided_by_coin


def no_information(rows: pd.DataFrame) -> str | None:
    """Why one judge's picks in one setting carry no information, or None. Such a judge (every verdict
    missing, or every match a tie the coin decided, equal pointwise scores included) picked by chance:
    it is never "best" anywhere."""
    if rows.empty:
        return None
    informed = rows["informed"] if "informed" in rows else pd.Series(True, index=rows.index)
    return _no_information(int(rows["calls"].sum()), int(rows["missing"].sum()), bool(informed.astype(bool).any()))


def no_information_by_judge(rows: pd.DataFrame, judges: Sequence[str]) -> list[str | None]:
    """:func:`no_information` of each judge's rows (None for a judge without rows), from the table's arrays."""
    who = pd.Index(list(judges)).get_indexer(rows["judge"])
    calls, missing = rows["calls"].to_numpy(), rows["missing"].to_numpy()
    informed = rows["informed"].to_numpy(bool) if "informed" in rows else np.ones(len(rows), bool)
    out: list[str | None] = []
    for j in range(len(judges)):
        mine = who == j
        out.append(_no_information(int(calls[mine].sum()), int(missing[mine].sum()), bool(informed[mine].any()))
                   if mine.any() else None)
    return out


def _no_information(calls: int, missing: int, informed: bool) -> str | None:
    if calls and missing >= calls:
        return f"no information: every verdict missing ({missing} of {calls} calls)"
    if not informed:
        return "no information: every match a tie (decided by the seeded coin)"
    return None


def uninformed_judges(prompts: pd.DataFrame) -> dict[tuple[str, str, str, str], str]:
    """(task, generator, judge, strategy) -> why that judge's picks there carry no information."""
    out: dict[tuple[str, str, str, str], str] = {}
    if prompts.empty:
        return out
    informed = prompts["informed"].astype(bool) if "informed" in prompts else True
    totals = (prompts[GROUP + ["calls", "missing"]].assign(informed=informed)  # one grouping, not a sum per judge
              .groupby(GROUP, sort=False).agg(calls=("calls", "sum"), missing=("missing", "sum"), informed=("informed", "any")))
    for key, calls, missing, any_informed in zip(totals.index, totals["calls"], totals["missing"], totals["informed"]):
        reason = _no_information(int(calls), int(missing), bool(any_informed))
        if reason:
            out[tuple(key)] = reason
    return out


def prompt_level(picks: Iterable[Mapping[str, Any]], scores: Mapping[ScoreKey, Mapping[str, Any]],
                 n: int | None = None) -> pd.DataFrame:
    """One row per pick: its score, the prompt's random and oracle levels, win rate and rank."""
    cands = candidate_scores(scores, n)
    rows = []
    stats = _all_pick_stats(cands)  # the judges often pick the same candidate
    for pk in picks:
        gen, pid = pk["generator"], pk["prompt_id"]
        index = int(pk.get("index", -1))
        if (gen, pid, index) not in stats:
            stats[gen, pid, index] = _pick_stats(cands.get((gen, pid), np.full(n or 0, np.nan)), index)
        rows.append({"task": pk["task"], "generator": gen, "judge": pk["judge"], "strategy": pk.get("strategy", ""),
                     "prompt_id": pid, "index": index, **stats[gen, pid, index],
                     "calls": int(pk.get("calls", 0) or 0), "missing": int(pk.get("missing", 0) or 0),
                     "informed": pick_informed(pk)})
    table = pd.DataFrame(rows, columns=PROMPT_COLUMNS)
    dup = table.duplicated([*GROUP, "prompt_id"], keep=False)
    if dup.any():
        r = table[dup].iloc[0]
        raise BonError(f"picks: several picks for {r['task']}/{r['generator']}/{r['judge']}/{r['strategy']} prompt "
                       f"{r['prompt_id']}")
    return table


def load_prompt_level(run: Run | Path) -> pd.DataFrame:
    """:func:`prompt_level` of a run, its failed verifier scores handled as its ``on_failure`` says."""
    run = as_run(run)
    scores, _ = apply_on_failure(run.score_records, failure_policy(run.study).applied)
    return prompt_level(run.pick_records, scores, run.n)


# --- failed verifier scores ------------------------------------------------------------------------

ON_FAILURE = ("official", "zero", "missing")


@dataclass(frozen=True)
class FailurePolicy:
    """What a failed verifier score becomes: ``chosen`` as configured (``on_failure``), ``applied`` what that
    means for this verifier (``official`` is the benchmark's own rule, its verifier's ``official_on_failure``)."""

    chosen: str
    applied: str
    verifier: str

    def describe(self) -> str:
        rule = ("counted as 0" if self.applied == "zero" else
                "missing: their prompts leave Best-of-N, random and oracle alike")
        how = f"official for {self.verifier}: " if self.chosen == "official" else ""
        return f"on_failure: {self.chosen} ({how}{rule})"


def failure_policy(study: Mapping[str, Any], override: str | None = None) -> FailurePolicy:
    """The study's ``on_failure`` (default ``official``), resolved against its verifier's class."""
    chosen = str(override or study.get("on_failure") or "official")
    if chosen not in ON_FAILURE:
        raise BonError(f"on_failure must be one of {', '.join(ON_FAILURE)}, got {chosen!r:.60}")
    spec = study.get("verifier") if isinstance(study.get("verifier"), Mapping) else {}
    verifier = str(spec.get("name") or "synthetic")
    if chosen != "official":
        return FailurePolicy(chosen, chosen, verifier)
    from bon import registry  # the verifier's class says what its benchmark's code does; nothing is built

    try:
        applied = getattr(registry.resolve("verifier", registry.parse_spec(verifier)[0]), "official_on_failure", "missing")
    except BonError:
        applied = "missing"
    return FailurePolicy(chosen, applied if applied in ("zero", "missing") else "missing", verifier)


def _failed(rec: Mapping[str, Any]) -> bool:
    value = rec.get("score")
    return value is None or not math.isfinite(float(value))


def apply_on_failure(scores: Mapping[ScoreKey, Mapping[str, Any]], applied: str
                     ) -> tuple[dict[ScoreKey, Mapping[str, Any]], dict[tuple[str, str], int]]:
    """The score table with each failed score (a stored record without a finite score) handled: ``zero``
    scores it 0; ``missing`` takes every score of its (generator, prompt) away, so every judge's pick there
    is unscored (counted in ``unscored_picks``) and Best-of-N, random and oracle leave that prompt alike
    (:func:`bon_metrics` averages them over the prompts whose pick is scored). Also returns the failed
    scores per (generator, prompt id)."""
    failed: dict[tuple[str, str], int] = {}
    for (gen, pid, _), rec in scores.items():
        if _failed(rec):
            failed[(gen, pid)] = failed.get((gen, pid), 0) + 1
    if applied == "zero":
        return {k: ({**r, "score": 0.0} if _failed(r) else r) for k, r in scores.items()}, failed
    return {k: r for k, r in scores.items() if (k[0], k[1]) not in failed}, failed


def failure_counts(picks: Iterable[Mapping[str, Any]], scores: Mapping[ScoreKey, Mapping[str, Any]],
                   failed: Mapping[tuple[str, str], int], tasks: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Per (task, generator) and part of the study (``best_of_n``: the prompts with picks, else the others,
    such as the preference set's): the verifier scores stored, how many failed, and on how many prompts.
    ``tasks`` (prompt id -> task, the run's prompts.jsonl) names the task of a prompt without picks."""
    task_of = {**(tasks or {}), **{p["prompt_id"]: p["task"] for p in picks}}
    picked = {(p["generator"], p["prompt_id"]) for p in picks}
    rows: dict[tuple[bool, str, str], dict[str, Any]] = {}

    def row(gen: str, pid: str) -> dict[str, Any]:
        key = ((gen, pid) not in picked, task_of.get(pid, "?"), gen)
        return rows.setdefault(key, {"task": key[1], "generator": gen, "best_of_n": not key[0], "scores": 0, "failed": 0,
                                     "prompts_with_failures": 0})

    for gen, pid, _ in scores:
        row(gen, pid)["scores"] += 1
    for (gen, pid), count in failed.items():
        r = row(gen, pid)
        r["failed"] += count
        r["prompts_with_failures"] += 1
    return [rows[k] for k in sorted(rows)]


# --- bootstrap helpers (shared with statistics and leaderboard) -------------------------------------


def task_order(tasks: Iterable[str]) -> list[str]:
    seen = list(dict.fromkeys(tasks))
    return [t for t in TASKS if t in seen] + sorted(t for t in seen if t not in TASKS)


@functools.lru_cache(maxsize=256)
def multinomial_weights(n_items: int, bootstrap: int, seed: int) -> np.ndarray:
    """``bootstrap`` x ``n_items`` resampling multiplicities (each row sums to ``n_items``). Drawn once per
    (size, replicates, seed) and shared by every table that resamples the same items (read-only)."""
    if n_items == 0:
        out = np.zeros((bootstrap, 0))
    else:
        rng = np.random.default_rng(seed)
        out = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=bootstrap).astype(float)
    out.flags.writeable = False
    return out


def weighted_means(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """NaN-aware weighted means: ``values`` (K x P) with NaN gaps, ``weights`` (B x P) -> (B x K)."""
    values = np.atleast_2d(values)
    ok = np.isfinite(values)
    num = weights @ np.where(ok, values, 0.0).T
    den = weights @ ok.T.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def percentile_ci(replicates: np.ndarray, level: float = 0.95, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over finite replicates (NaN where none is finite)."""
    alpha = (1.0 - level) / 2.0
    return nanquantiles(replicates, (alpha, 1.0 - alpha), axis)


def nanquantiles(values: np.ndarray, probs: Sequence[float], axis: int = 0) -> tuple[np.ndarray, ...]:
    """``np.nanquantile(values, p, axis)`` (linear method) for each p, the same bits: one sort along ``axis``
    for every p, where numpy sorts each slice apart in a Python loop (``apply_along_axis``) once per p."""
    values = np.asarray(values, float)
    if values.ndim < 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN: NaN, which is what we want
            return tuple(np.nanquantile(values, p, axis=axis) for p in probs)
    ordered = np.sort(np.moveaxis(values, axis, -1), axis=-1)  # NaN sorts last, after the values it leaves out
    n = (~np.isnan(ordered)).sum(-1)
    out = []
    for p in probs:  # numpy's _quantile on the slice without its NaN: (n - 1) p, floor, lerp
        virtual = (n - 1) * float(p)
        below = np.floor(virtual)
        top = virtual >= n - 1  # at or past the last value: that value, at index -1 of the NaN-free slice
        previous = np.where(top, n - 1, below).astype(np.intp)
        following = np.where(top, n - 1, below + 1).astype(np.intp)
        gamma = virtual - np.where(top, -1.0, below)
        a = np.take_along_axis(ordered, np.maximum(previous, 0)[..., None], -1)[..., 0]
        b = np.take_along_axis(ordered, np.maximum(following, 0)[..., None], -1)[..., 0]
        diff = b - a
        with np.errstate(invalid="ignore"):
            result = np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)
        out.append(np.where(n > 0, result, np.nan))
    return tuple(out)


def setting_matrix(prompts: pd.DataFrame, column: str, judges: Sequence[str], prompt_ids: Sequence[str]) -> np.ndarray:
    """Judges x prompts matrix of ``column`` for one setting (NaN where a judge has no such pick)."""
    return setting_matrices(prompts, (column,), judges, prompt_ids)[column]


def setting_matrices(prompts: pd.DataFrame, columns: Iterable[str], judges: Sequence[str],
                     prompt_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """:func:`setting_matrix` of each column, the rows' judge and prompt looked up once for all of them."""
    rows = pd.Index(list(judges)).get_indexer(prompts["judge"])
    cols = pd.Index(list(prompt_ids)).get_indexer(prompts["prompt_id"])
    found = (rows >= 0) & (cols >= 0)
    cell = rows * len(prompt_ids) + cols
    out = {}
    for column in columns:
        values = pd.to_numeric(prompts[column], errors="coerce").to_numpy(float)
        matrix = np.full((len(judges), len(prompt_ids)), np.nan)
        keep = found & ~np.isnan(values)
        cells, first = np.unique(cell[keep], return_index=True)
        matrix.flat[cells] = values[keep][first]  # the first value of each cell, skipping NaN (pivot_table's "first")
        out[column] = matrix
    return out


def prompt_weights(seed: int, task: str, generator: str, n_prompts: int, bootstrap: int) -> np.ndarray:
    """The resampling of one setting's prompts: the same for every judge, so comparisons are paired."""
    return multinomial_weights(n_prompts, bootstrap, derive_seed(seed, "bon-prompts", task, generator))


# --- the metrics table ----------------------------------------------------------------------------


def iter_settings(prompts: pd.DataFrame):
    """Each (task, generator, strategy) of prompt-level rows, tasks in the paper's order, with its rows,
    its judges (first-seen order) and its sorted prompt ids."""
    order = {t: i for i, t in enumerate(task_order(prompts["task"]))}
    rows = prompts.groupby(["task", "generator", "strategy"], sort=False).indices  # key -> its row positions, in order
    for task, gen, strategy in sorted(rows, key=lambda k: (order[k[0]], k[1], k[2])):
        sub = prompts.take(rows[task, gen, strategy])
        yield task, gen, strategy, sub, list(sub["judge"].unique()), sorted(sub["prompt_id"].unique())


def bon_metrics(prompts: pd.DataFrame, bootstrap: int = 1000, seed: int = 0, level: float = 0.95,
                n: int | None = None) -> pd.DataFrame:
    """One row per (task, generator, judge, strategy) with point estimates and bootstrap intervals."""
    if prompts.empty:
        return pd.DataFrame(columns=METRIC_COLUMNS)
    rows = []
    for task, gen, strategy, sub, judges, pids in iter_settings(prompts):
        ci = setting_intervals(sub, judges, pids, seed, task, gen, bootstrap, level)
        who = pd.Index(judges).get_indexer(sub["judge"])
        cols = {c: pd.to_numeric(sub[c], errors="coerce").to_numpy(float)
                for c in ("pick_score", "random_score", "oracle_score", "win", "rank", "hit")}
        cols.update({c: sub[c].to_numpy() for c in ("n_scored", "calls", "missing")})
        for j, judge in enumerate(judges):
            own = who == j
            mine = {c: v[own] for c, v in cols.items()}  # the judge's rows, in the table's order
            scored = ~np.isnan(mine["pick_score"])  # random and oracle over the prompts BoN averages
            bon = _finite_mean(mine["pick_score"])
            rnd, orc = _finite_mean(mine["random_score"][scored]), _finite_mean(mine["oracle_score"][scored])
            span = orc - rnd
            ranks = mine["rank"]
            denom = mine["n_scored"].astype(float) - 1.0
            with np.errstate(invalid="ignore", divide="ignore"):
                norm = np.where(denom > 0, (ranks - 1.0) / np.where(denom > 0, denom, 1.0), np.nan)
            count = len(ranks)
            calls = int(mine["calls"].sum())
            rows.append({
                "task": task, "generator": gen, "judge": judge, "strategy": strategy, "prompts": count,
                "n": n if n is not None else int(mine["n_scored"].max() if count else 0),
                "bon_score": bon, "bon_lo": ci["bon"][0][j], "bon_hi": ci["bon"][1][j],
                "random_score": rnd, "oracle_score": orc,
                "gain": bon - rnd, "gain_lo": ci["gain"][0][j], "gain_hi": ci["gain"][1][j],
                "recovery": (bon - rnd) / span if abs(span) > 1e-12 else math.nan,
                "recovery_lo": ci["recovery"][0][j], "recovery_hi": ci["recovery"][1][j],
                "win_rate": _finite_mean(mine["win"]), "win_lo": ci["win"][0][j], "win_hi": ci["win"][1][j],
                "mean_rank": _finite_mean(ranks), "norm_rank": _finite_mean(norm),
                "oracle_hit": _finite_mean(mine["hit"]), "unscored_picks": int((~scored).sum()),
                "judge_calls": calls, "calls_per_prompt": calls / count if count else math.nan,
                "missing_verdicts": int(mine["missing"].sum()),
            })
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


INTERVAL_COLUMNS = ("pick_score", "random_score", "oracle_score", "win")  # what setting_intervals resamples


def setting_intervals(sub: pd.DataFrame, judges: list[str], pids: list[str], seed: int, task: str, gen: str,
                      bootstrap: int, level: float, matrices: Mapping[str, np.ndarray] | None = None
                      ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Percentile intervals over prompts of BoN, gain, recovery and win rate per judge (NaN without replicates).
    ``matrices``: the setting's :func:`setting_matrices` of :data:`INTERVAL_COLUMNS`, when the caller has them."""
    if bootstrap <= 0:
        nan = np.full(len(judges), np.nan)
        return {name: (nan, nan) for name in ("bon", "gain", "recovery", "win")}
    w = prompt_weights(seed, task, gen, len(pids), bootstrap)
    mats = dict(matrices) if matrices is not None else setting_matrices(sub, INTERVAL_COLUMNS, judges, pids)
    for c in ("random_score", "oracle_score"):  # over the prompts whose pick is scored, as BoN
        mats[c] = np.where(np.isfinite(mats["pick_score"]), mats[c], np.nan)
    bon_b, rnd_b, orc_b, win_b = (weighted_means(mats[c], w) for c in ("pick_score", "random_score", "oracle_score", "win"))
    gain_b = bon_b - rnd_b
    with np.errstate(invalid="ignore", divide="ignore"):
        span = orc_b - rnd_b
        rec_b = np.where(np.abs(span) > 1e-12, gain_b / np.where(np.abs(span) > 1e-12, span, 1.0), np.nan)
    return {name: percentile_ci(rep, level) for name, rep in
            (("bon", bon_b), ("gain", gain_b), ("recovery", rec_b), ("win", win_b))}


def with_accuracies(metrics: pd.DataFrame, accuracies: pd.DataFrame) -> pd.DataFrame:
    """The metrics table with each judge's accuracy on its task (``mmrb2_accuracy``, ``acc_lo``, ``acc_hi``)."""
    cols = [c for c in ("judge", "task", "accuracy", "acc_lo", "acc_hi") if c in accuracies.columns]
    acc = accuracies[cols].drop_duplicates(["judge", "task"]).rename(columns={"accuracy": "mmrb2_accuracy"})
    return metrics.merge(acc, on=["judge", "task"], how="left")


def results_view(metrics: pd.DataFrame) -> pd.DataFrame:
    """``results.csv``: one row per (task, generator, judge, strategy), judges in name order within a setting."""
    table = metrics.copy()
    if "mmrb2_accuracy" not in table.columns:
        table["mmrb2_accuracy"] = math.nan
    order = {t: i for i, t in enumerate(TASKS)}
    table = table.assign(_o=table["task"].map(lambda t: order.get(t, len(order))))
    table = table.sort_values(["_o", "task", "generator", "judge", "strategy"], kind="stable")
    return table[RESULT_COLUMNS].reset_index(drop=True)


def results_table(picks: Iterable[Mapping[str, Any]], scores: Mapping[ScoreKey, Mapping[str, Any]],
                  accuracies: Mapping[str, Mapping[str, float]], n: int, on_failure: str = "missing") -> pd.DataFrame:
    """:func:`results_view` straight from picks and scores (no intervals); ``accuracies``: judge -> task -> %;
    ``on_failure``: ``zero`` or ``missing`` (:func:`apply_on_failure`)."""
    scores, _ = apply_on_failure(scores, on_failure)
    metrics = bon_metrics(prompt_level(list(picks), scores, n), bootstrap=0, n=n)
    metrics["mmrb2_accuracy"] = [accuracies.get(j, {}).get(t, math.nan) for j, t in zip(metrics["judge"], metrics["task"])]
    return results_view(metrics)


def _finite_mean(values: np.ndarray) -> float:
    """The mean of the finite values (NaN without any)."""
    v = values[np.isfinite(values)]
    return float(v.mean()) if v.size else math.nan
