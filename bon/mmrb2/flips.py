"""Reverse-order flips: how often asking the second order changes a pair's outcome, by how confident
the first (forward) answer was. This is the number that says whether a gated swap is safe for a judge:
if confident forward verdicts are never overturned by the reverse, skipping the reverse costs nothing.

Works on official judgment files (``bon mmrb2 judge`` keeps the 1-6 score, and ``p_a`` for logits-mode
judges, in each judgement's ``metadata``) and on the matches of a finished study. Files without any
confidence (the released samples hold only A/B) still give the plain forward/reverse disagreement rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from bon.errors import BonError
from bon.mmrb2.format import load_judgments
from bon.mmrb2.scorer import FLIP, assign_predictions, first_judgement
from bon.protocol import MatchResult, Verdict, decide_match
from bon.swap import confidence as verdict_confidence


@dataclass(frozen=True)
class Flip:
    """One pair (or match) judged in both orders: the forward verdict's confidence (None when the judge
    gave none), whether the reverse verdict disagreed, and whether it changed the decided outcome."""

    confidence: float | None
    disagree: bool
    changed: bool


def from_match(match: MatchResult, judge: Any = None, source: str = "auto") -> Flip | None:
    """A two-order match's flip record (None when either order has no answer)."""
    if not match.forward or not match.reverse:
        return None
    fwd, rev = match.forward[0], match.reverse[0]
    if fwd.better is None or rev.better is None:
        return None
    single = decide_match(match.x, match.y, [fwd], [], ("flip",)).winner
    both = decide_match(match.x, match.y, [fwd], [rev], ("flip", match.x, match.y)).winner
    return Flip(verdict_confidence(fwd, judge, source), fwd.better == rev.better, both != single)


def from_judgments(judgments: Mapping[str, Mapping[str, Any]]) -> list[Flip]:
    """Flip records of an official judgment file (first sample of each direction)."""
    records = []
    for pid, entry in judgments.items():
        fwd, rev = (_verdict(entry.get(d)) if isinstance(entry, Mapping) else None for d in ("forward", "reverse"))
        if fwd is None or rev is None:
            continue
        conf = verdict_confidence(fwd) if fwd.score is not None or "p_a" in fwd.meta else None
        both = decide_match(0, 1, [fwd], [rev], ("flip", pid)).winner
        records.append(Flip(conf, fwd.better == rev.better, both != (0 if fwd.better == "A" else 1)))
    return records


def _verdict(samples: Any) -> Verdict | None:
    letter = first_judgement(samples)
    if letter not in FLIP:
        return None
    meta = samples[0].get("metadata") or {}
    meta = meta if isinstance(meta, Mapping) else {}
    score = meta.get("score")
    score = int(score) if isinstance(score, (int, float)) and 1 <= score <= 6 else None
    return Verdict(letter, score, meta=dict(meta))


def summary(records: Sequence[Flip]) -> dict[str, Any]:
    """Overall disagreement and outcome-change rates, and both per forward-confidence level."""
    out: dict[str, Any] = {"pairs": len(records), **_rates(records)}
    levels = sorted({r.confidence for r in records if r.confidence is not None})
    if len(levels) > 12:  # continuous confidences (probabilities): ten bins
        bins = [(i / 10, (i + 1) / 10) for i in range(10)]
        rows = [{"confidence_from": lo, "confidence_to": hi,
                 **_rates([r for r in records if r.confidence is not None and lo <= r.confidence < hi + (hi == 1.0)])}
                for lo, hi in bins]
        out["by_confidence"] = [row for row in rows if row["pairs"]]
    else:
        out["by_confidence"] = [{"confidence": c, **_rates([r for r in records if r.confidence == c])} for c in levels]
    return out


def gate_safety(records: Sequence[Flip], tolerance: float = 0.05, gates: Iterable[float] | None = None) -> list[dict[str, Any]]:
    """For each gate T: the share of matches a gated swap would settle on the forward order alone
    (confidence >= T), and how often the reverse changed their outcome, with a 95% Wilson upper bound.
    ``safe`` when that upper bound is within ``tolerance``, ``harmful`` when the observed rate itself
    exceeds it (otherwise there are too few such matches to tell)."""
    known = [r for r in records if r.confidence is not None]
    levels = sorted(set(gates) if gates is not None else {r.confidence for r in known}, reverse=True)
    rows = []
    for gate in levels:
        settled = [r for r in known if r.confidence >= gate - 1e-9]
        changed = sum(r.changed for r in settled)
        upper = wilson_upper(changed, len(settled))
        rows.append({"gate": gate, "settled_share": len(settled) / len(known) if known else None, "settled": len(settled),
                     "changed": changed, "changed_rate": changed / len(settled) if settled else None,
                     "changed_upper95": upper, "safe": bool(settled) and upper is not None and upper <= tolerance,
                     "harmful": bool(settled) and changed / len(settled) > tolerance})
    return rows


def verdict_on_gating(rows: Sequence[Mapping[str, Any]], gate: float) -> str:
    """'safe', 'unsafe' (the reverse overturned more than the tolerance of the verdicts the gate would
    let stand), 'unproven' (too few to tell) or 'unknown' (no confident verdicts), from :func:`gate_safety` rows."""
    row = next((r for r in rows if abs(r["gate"] - gate) < 1e-9), None)
    if row is None:
        row = next((r for r in sorted(rows, key=lambda r: r["gate"]) if r["gate"] >= gate), None)
    if row is None or not row["settled"]:
        return "unknown"
    return "safe" if row["safe"] else "unsafe" if row["harmful"] else "unproven"


def _rates(records: Sequence[Flip]) -> dict[str, Any]:
    n = len(records)
    dis, chg = sum(r.disagree for r in records), sum(r.changed for r in records)
    return {"pairs": n, "disagree": dis, "disagree_rate": dis / n if n else None,
            "changed": chg, "changed_rate": chg / n if n else None}


def wilson_upper(k: int, n: int, z: float = 1.96) -> float | None:
    """Upper end of the 95% Wilson interval of a proportion k/n (None for n = 0)."""
    if n == 0:
        return None
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def gating_advice(rows: Sequence[Mapping[str, Any]]) -> str:
    """One phrase: the lowest safe gate, or why there is none."""
    if not rows:
        return "no confidences (plain disagreement only)"
    safe = [r["gate"] for r in rows if r["safe"]]
    if safe:
        return f"safe from gate {min(safe):g}"
    return "unsafe at every gate" if all(r["harmful"] for r in rows) else "not shown safe at any gate"


def flip_report(items: Sequence[str | Path], bench_dir: Path | None = None, run_dir: Path | None = None,
                tolerance: float = 0.05) -> dict[str, Any]:
    """Flip summary and gate safety of each judgment file: ``items`` (FILE or TASK=FILE; tasks found by
    pair ids when ``bench_dir`` is given) and every judge's preference-set files of a run folder."""
    from bon.tasks import is_task, parse_task

    named: list[tuple[str, Path]] = []
    if items and bench_dir is not None:
        named += [(f"{Path(p).name} ({t.scorer})", Path(p)) for t, p in assign_predictions(Path(bench_dir), items)]
    else:
        for item in items:
            label, sep, file = str(item).partition("=")
            path = Path(file) if sep and is_task(label) else Path(item)
            named.append((f"{path.name} ({parse_task(label).scorer})" if sep and is_task(label) else path.name, path))
    if run_dir is not None:
        folder = Path(run_dir) / "mmrb2" / "judgments"
        found = sorted(folder.glob("*/*.json"))
        if not found:
            raise BonError(f"{folder}: no judgment files (run the study first)")
        named += [(f"{p.parent.name}/{p.name}", p) for p in found]
    files: dict[str, Any] = {}
    by_judge: dict[str, list[Flip]] = {}
    for name, path in named:
        records = from_judgments(load_judgments(path))
        files[name] = _entry(records, tolerance, str(path))
        if run_dir is not None and "/" in name:
            by_judge.setdefault(name.split("/")[0], []).extend(records)
    for judge, records in by_judge.items():  # a judge's tasks together: more pairs, a firmer verdict
        files[f"{judge}/all tasks"] = _entry(records, tolerance, None)
    return {"tolerance": tolerance, "files": files}


def _entry(records: Sequence[Flip], tolerance: float, file: str | None) -> dict[str, Any]:
    rows = gate_safety(records, tolerance)
    return {"file": file, "summary": summary(records), "gate_safety": rows, "verdict": gating_advice(rows)}
