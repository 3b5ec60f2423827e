"""The trade-off's ``prefilter`` family: a cheap pointwise judge keeps the top k of N, the judge runs the
knockout (both orders) among them (:mod:`bon.selection.prefilter`).

Settings: k = 2 .. N/2 (by default: the settings that cut knockout's calls by more than half; ``keeps``
asks for others, up to N-1) and ``keep: auto`` with each pointwise-capable judge of the study as prefilter
(:func:`bon.plugins.scores_alone`), except the judges the leakage policy leaves out (a judge sharing the
verifier's grader never prefilters) and the judge itself. The prefilter's scores are asked once per
prefilter judge, before any judge is replayed, and every replay reads them from memory.

Each record adds ``prefilter``, ``keep`` (the k used; auto: the calibrated one, with its ``calibration``
audit), ``prefilter_calls_per_prompt`` and ``prefilter_usd_per_prompt`` beside the main judge's
``calls_per_prompt`` and ``usd_per_prompt``, ``recall`` (the share of prompts whose full-knockout pick
the prefilter kept), ``kept_per_prompt`` and ``missing_scores`` (missing prefilter scores: those
candidates were kept). ``gating`` follows the gates' rule: ``safe`` when the loss interval against the
full protocol shows no loss (its lower end at most 0), ``unsafe`` otherwise.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from bon.plugins import Score, scores_alone
from bon.referee import Referee
from bon.selection.prefilter import AUTO, recall
from bon.store import JudgmentStore, usage_of

FAMILY = "prefilter"


def prefilter_judges(study: Any, asked: Sequence[str] = (), excluded: Mapping[str, str] | None = None) -> list[str]:
    """The prefilters of the family: those ``asked`` (``none``: no family), else every judge label of the
    study that scores a candidate alone and that the leakage policy keeps."""
    if asked:
        return [] if "none" in asked else list(asked)
    excluded = excluded or {}
    return [j.label for j in study.cfg.judges if j.label not in excluded and scores_alone(study.judge(j.label))]


def default_keeps(n: int) -> list[int]:
    """k = 2 .. N/2: the prefilter settings that cost at most about half of knockout's 2(N-1) calls (the whole
    2 .. N-1 grid on the default demo made ``bon tradeoff`` about a third slower for settings no cheaper than
    half the protocol)."""
    return list(range(2, max(2, n // 2) + 1)) if n > 2 else []


def prefilter_settings(setting_type: Any, prefilters: Sequence[str], n: int, keeps: Sequence[int] = ()) -> list[Any]:
    """Knockout with each prefilter keeping each k of ``keeps`` (default :func:`default_keeps`; each below
    ``n``), then ``keep: auto``."""
    grid = sorted({int(k) for k in keeps if 1 <= int(k) < n}) if keeps else default_keeps(n)
    return [setting_type(f"knockout prefilter {p} keep {k}", "knockout", {"prefilter": p, "keep": k}, FAMILY)
            for p in prefilters for k in [*grid, AUTO]]


def score_snapshots(path: Any, judges: Mapping[str, Any], groups: Sequence[Any], invocation: str, seed: int) -> dict[str, dict]:
    """Every prefilter's score of every candidate, by judge id: read once here, so that no replay asks the
    store (or a judge) again. A score the store lacks is first looked up in the judge's own stored pairwise
    answers (a judge that compares two per-response scores records them: ``score_a``, ``score_b``), stored
    as its score, and asked of the judge only where no answer holds it."""
    if not judges:
        return {}
    store = JudgmentStore(path, invocation=invocation, command="bon tradeoff")
    out: dict[str, dict] = {}
    try:
        for spec in sorted(judges):
            referee = Referee(judges[spec], store, seed=seed, stage="tradeoff")
            keys = {(p.content.digest, c.content.digest, 0): None for p, cands in groups for c in cands}
            known = store.get_scores(referee.judge_id, list(keys))
            if len(known) < len(keys):
                recorded = recorded_scores(store.answers_before(referee.judge_id, invocation), referee.judge)
                found = [(k, recorded[k]) for k in keys if k not in known and k in recorded]
                store.put_scores(referee.judge_id, found, stage="tradeoff")
                known.update(found)
            for prompt, cands in groups:
                if any((prompt.content.digest, c.content.digest, 0) not in known for c in cands):
                    scores = referee.score(prompt, [c.content for c in cands])
                    known.update(((prompt.content.digest, c.content.digest, 0), s) for c, s in zip(cands, scores))
            out[referee.judge_id] = known
    finally:
        store.close()
    return out


def recorded_scores(answers: Mapping[tuple, Any], judge: Any) -> dict[tuple, Score]:
    """Per (prompt, response, 0): the judge's own score of the response as its answered pairwise verdicts
    record it (``score_a``/``score_b`` in meta; None there: no signal in that response, a missing score)."""
    out: dict[tuple, Score] = {}
    for (prompt, a, b, sample), verdict in answers.items():
        meta = verdict.meta or {}
        if sample != 0 or verdict.better is None or "score_a" not in meta or "score_b" not in meta:
            continue
        for digest, value in ((a, meta["score_a"]), (b, meta["score_b"])):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[(prompt, digest, 0)] = Score(float(value))
            elif value is None:
                out[(prompt, digest, 0)] = Score(None, missing=f"{judge.name}: no signal in this response")
    return out


def is_self(setting: Any, judge: Any, cheap: Mapping[str, Any]) -> bool:
    """A prefilter setting whose prefilter is the judge itself (nothing to compare)."""
    spec = setting.options.get("prefilter")
    return setting.family == FAMILY and spec in cheap and cheap[spec].identity() == judge.identity()


def prefilter_record(setting: Any, picks: Sequence[Any], reference_picks: Sequence[Any], referee: Referee,
                     snapshots: Mapping[str, dict]) -> dict[str, Any]:
    """What a prefilter setting adds to its trade-off record (empty for other families)."""
    if setting.family != FAMILY:
        return {}
    [report] = referee.prefilter_reports or [{}]
    cheap = referee.prefilters[setting.options["prefilter"]]
    prompts = len(picks)
    known = snapshots.get(cheap.judge_id, {})
    dollars = sum(usage_of(s.details)[2] for s in known.values())  # every candidate scored once
    kept = [p.kept if not p.calibration_calls else None for p in picks]
    by_k = {}
    for p in picks:
        if p.kept is not None and not p.calibration_calls:
            by_k.setdefault(len(p.kept), []).append(p)
    return {
        "prefilter": cheap.judge.name, "keep": report.get("keep"),
        **({"calibration": report["calibration"]} if "calibration" in report else {}),
        "prefilter_calls_per_prompt": sum(p.prefilter_calls for p in picks) / prompts,
        "prefilter_usd_per_prompt": dollars / len(known) * sum(p.prefilter_calls for p in picks) / prompts if known else None,
        "recall": recall([r.index for r in reference_picks], kept),
        "kept_per_prompt": float(np.mean([len(p.kept) for p in picks if p.kept is not None])),
        "missing_scores": sum(p.prefilter_missing for p in picks),
        "gating": "safe", "note": report.get("note"),
    }


def prefilter_costs(record: Mapping[str, Any]) -> dict[str, Any]:
    """A prefilter setting's own cost fields (none for other settings), for rows that show a setting's cost."""
    keys = ("prefilter", "keep", "prefilter_calls_per_prompt", "prefilter_usd_per_prompt", "recall")
    return {k: record.get(k) for k in keys} if record.get("prefilter") else {}


def cost_text(record: Mapping[str, Any]) -> str:
    """``, + 8 quality scores/prompt ($...)`` for a prefilter setting, else nothing."""
    if not record.get("prefilter"):
        return ""
    usd = record.get("prefilter_usd_per_prompt")
    return (f", + {record['prefilter_calls_per_prompt']:.2f} {record['prefilter']} scores/prompt"
            + ("" if usd is None else f" (${usd:.4f})"))


def prefilter_gating(record: Mapping[str, Any]) -> tuple[str, str]:
    """The gates' rule: safe while the loss interval against the full protocol shows no loss."""
    lo, hi = record.get("loss_lo"), record.get("loss_hi")
    if lo is not None and lo > 0:
        return "unsafe", f"measured loss: 95% interval [{lo:+.4f}, {hi:+.4f}] excludes 0"
    recalled = record.get("recall")
    return "safe", "no measured loss" + (f" (recall {recalled:.2f})" if recalled is not None else "")
