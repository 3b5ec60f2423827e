"""Reverse-order flips: how often asking the second order changes a pair's outcome, by how confident
the first (forward) answer was. This is the number that says whether a gated swap is safe for a judge:
if confident forward verdicts are never overturned by the reverse, skipping the reverse costs nothing.

Works on official judgment files (``bon mmrb2 judge`` keeps the 1-6 score, and ``p_a`` for logits-mode
judges, in each judgement's ``metadata``) and on the matches of a finished study. Files without any
confidence (the released samples hold only A/B) still give the plain forward/reverse disagreement rate.

An exact tie in both orders (:func:`bon.swap.exact_tie`) is decided by a coin whichever orders are
asked: the reverse carries no information, so such a pair counts as ``tie``, never as ``changed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from bon.errors import BonError
from bon.mmrb2.format import load_judgments
from bon.mmrb2.scorer import FLIP, assign_predictions, first_judgement
from bon.protocol import MatchResult, Verdict, decide_match
from bon.swap import confidence as verdict_confidence
from bon.swap import exact_tie


@dataclass(frozen=True)
class Flip:
    """One pair (or match) judged in both orders: the forward verdict's confidence (None when the judge
    gave none), whether the reverse verdict disagreed, and whether it changed the decided outcome."""

    confidence: float | None
    disagree: bool
    changed: bool
    tie: bool = False  # both orders exact ties: a coin decides either way, so never ``changed``
    forward_tie: bool = False  # the forward verdict alone is an exact tie


def from_match(match: MatchResult, judge: Any = None, source: str = "auto") -> Flip | None:
    """A two-order match's flip record (None when either order has no answer)."""
    if not match.forward or not match.reverse:
        return None
    return flip_of(match.forward[0], match.reverse[0], judge, source, (match.x, match.y))


def flip_of(fwd: Verdict, rev: Verdict, judge: Any = None, source: str = "auto", key: tuple = ()) -> Flip | None:
    """Would the reverse verdict ``rev`` change the outcome that ``fwd`` alone decides? (None without both answers.)"""
    if fwd.better is None or rev.better is None:
        return None
    single = decide_match(0, 1, [fwd], [], ("flip",)).winner
    both = decide_match(0, 1, [fwd], [rev], ("flip", *key)).winner
    forward_tie = exact_tie(fwd, judge)
    tie = forward_tie and exact_tie(rev, judge)
    return Flip(verdict_confidence(fwd, judge, source), fwd.better == rev.better, both != single and not tie, tie, forward_tie)


def cascade_flip(cheap: Verdict, forward: Sequence[Verdict], reverse: Sequence[Verdict], cheap_judge: Any = None,
                 judge: Any = None, source: str = "auto", key: tuple = ()) -> Flip | None:
    """Would the main judge's two-order decision (``forward``, ``reverse``) change the outcome that the
    cascade's cheap judge decides alone (``cheap``, the same pair in the forward order)?"""
    if cheap.better is None or not forward or not reverse or forward[0].better is None or reverse[0].better is None:
        return None
    main = decide_match(0, 1, list(forward), list(reverse), ("flip", *key)).winner
    tie = exact_tie(forward[0], judge) and exact_tie(reverse[0], judge)
    return Flip(verdict_confidence(cheap, cheap_judge, source), cheap.better == forward[0].better,
                main != (0 if cheap.better == "A" else 1) and not tie, tie, exact_tie(cheap, cheap_judge))


def from_pairs(pairs: Iterable[tuple[Verdict, Verdict]], judge: Any = None, source: str = "auto") -> list[Flip]:
    """Flip records of (forward, reverse) verdict pairs, e.g. a judge's two-order judgments in the store."""
    return [r for i, (f, b) in enumerate(pairs) if (r := flip_of(f, b, judge, source, (i,)))]


def calibrate_gate(records: Sequence[Flip], max_flip: float = 0.02) -> dict[str, Any]:
    """The cheapest gate for ``gate: auto``: the lowest confidence gate, and whether exact ties stand,
    such that the 95% Wilson upper bound of the share of *all* outcomes the reverse order would change
    stays within ``max_flip``. ``gate`` None: no gate is safe (every match is asked in both orders)."""
    known = [r for r in records if r.confidence is not None]
    best: dict[str, Any] = {"gate": None, "settle_ties": False, "settled": 0, "changed": 0,
                            "changed_upper95": None, "pairs": len(known), "max_flip": max_flip}
    levels = sorted({r.confidence for r in known if not r.forward_tie}) + [math.inf]
    for settle_ties in (True, False):
        for gate in levels:  # the changes only fall as the gate rises: the first gate that passes settles most
            settled = [r for r in known if (r.forward_tie and settle_ties) or (not r.forward_tie and r.confidence >= gate)]
            changed = sum(r.changed for r in settled)
            upper = wilson_upper(changed, len(known))
            if upper is not None and upper <= max_flip:
                if len(settled) > best["settled"]:
                    best.update(gate=gate, settle_ties=settle_ties, settled=len(settled), changed=changed, changed_upper95=upper)
                break
    if best["gate"] is not None and not math.isfinite(best["gate"]):
        best["gate"] = 2.0  # only ties stand: no confidence reaches it
    best["settled_share"] = best["settled"] / len(known) if known else None
    best["ties"] = sum(r.forward_tie for r in known)
    return best


def from_judgments(judgments: Mapping[str, Mapping[str, Any]]) -> list[Flip]:
    """Flip records of an official judgment file (first sample of each direction)."""
    records = []
    for pid, entry in judgments.items():
        fwd, rev = (_verdict(entry.get(d)) if isinstance(entry, Mapping) else None for d in ("forward", "reverse"))
        if fwd is None or rev is None:
            continue
        flip = flip_of(fwd, rev, key=(pid,))
        if flip is not None:  # a file's verdict without a score or p_a has no confidence
            records.append(flip if fwd.score is not None or "p_a" in fwd.meta else replace(flip, confidence=None))
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


def settled_verdict(settled: Sequence[Flip], tolerance: float = 0.05) -> str:
    """'safe' when the 95% upper bound of the changed share among the matches a policy settles is within
    ``tolerance``, 'unsafe' when the observed share exceeds it, else 'unproven' (as :func:`gate_safety`)."""
    if not settled:
        return "unknown"
    changed = sum(r.changed for r in settled)
    upper = wilson_upper(changed, len(settled))
    return "safe" if upper is not None and upper <= tolerance else "unsafe" if changed / len(settled) > tolerance else "unproven"


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
            "changed": chg, "changed_rate": chg / n if n else None, "tied_both_orders": sum(r.tie for r in records)}


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The 95% Wilson interval of a proportion k/n (None for n = 0): unlike k/n +- a normal spread it
    stays inside [0, 1] and is honest for the small counts an audit or a gate calibration sees."""
    if n == 0:
        return None
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n)), min(1.0, (centre + spread) / (1 + z * z / n))


def wilson_upper(k: int, n: int, z: float = 1.96) -> float | None:
    """Upper end of :func:`wilson_interval` (None for n = 0)."""
    interval = wilson_interval(k, n, z)
    return interval[1] if interval else None


def wilson_lower(k: int, n: int, z: float = 1.96) -> float | None:
    """Lower end of :func:`wilson_interval` (None for n = 0)."""
    interval = wilson_interval(k, n, z)
    return interval[0] if interval else None


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
