"""``bon score``: score given responses with any verifier, from items in the benchmark's own fields.

Each line of the items file is one benchmark item (EMMA ``pid``/``question``/``answer``/``type``/...,
GEdit ``key``/``task_type``/...) plus the candidate: ``response`` text and/or image paths relative to the
items file. The verifier reads each with :meth:`bon.plugins.Verifier.read_item` (every item is checked
before any is scored, so bad input costs nothing), scores it with :meth:`~bon.plugins.Verifier.score`
and sums up with :meth:`~bon.plugins.Verifier.aggregate`, the benchmark's official aggregation.

The output file gets one JSON line per item, in input order: ``id`` (the item's own id), ``score``
(null when it failed, with ``missing``), the details behind it, and ``input_sha256`` (the item and
the verifier's identity). A rerun keeps the lines whose ``input_sha256`` still matches and scores the
rest; a transient failure (a timeout, a lost server) is not written, so the rerun asks again.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from bon import registry
from bon.content import read_jsonl
from bon.errors import BonError
from bon.plugins import Score, Verifier


def score_items(verifier_spec: str, options: dict[str, Any], items_file: Path, out_file: Path | None) -> dict[str, Any]:
    """Score every item; returns ``{"aggregate", "items", "failed", "transient", "reused"}`` (strict JSON values)."""
    from bon.progress import bar

    verifier = registry.create("verifier", verifier_spec, **options)
    if type(verifier).read_item is Verifier.read_item:
        raise BonError(f"verifier {verifier_spec!r} does not read benchmark items yet, so bon score cannot use it "
                       "(it needs read_item and item_id)")
    items = _read_items(verifier, items_file)
    identity = _identity_text(verifier)
    keys = [hashlib.sha256((identity + json.dumps(item, sort_keys=True, ensure_ascii=False)).encode()).hexdigest()
            for _, item, _, _ in items]
    kept = _reusable(out_file, set(keys))
    scored: list[tuple[Any, Score]] = []
    transient = 0
    sink = out_file.open("w", encoding="utf-8") if out_file is not None else None
    try:
        with bar(f"score {verifier_spec}", len(items)) as progress:
            for (item_id, _, prompt, candidate), key in zip(items, keys):
                record = kept.get(key)
                score = _score_of(record) if record is not None else verifier.score(prompt, candidate)
                progress.advance()
                if score.value is None and score.transient:
                    transient += 1
                    continue
                scored.append((prompt, score))
                if sink is not None:
                    sink.write(json.dumps(_strict(record or _record(item_id, score, key)), ensure_ascii=False) + "\n")
                    sink.flush()
    finally:
        if sink is not None:
            sink.close()
        verifier.close()
    return {"aggregate": _strict(verifier.aggregate(scored)), "items": len(items), "transient": transient,
            "failed": sum(s.value is None for _, s in scored), "reused": sum(k in kept for k in keys)}


def _read_items(verifier: Verifier, items_file: Path) -> list[tuple[str, dict[str, Any], Any, Any]]:
    """``(id, item, prompt, candidate)`` per line; the first bad one is one line naming file, line and field."""
    if not items_file.is_file():
        raise BonError(f"--items {items_file}: no such file")
    base = items_file.resolve().parent
    items, seen = [], {}
    try:
        rows = list(read_jsonl(items_file, torn_tail_ok=False))
    except UnicodeDecodeError:
        raise BonError(f"--items {items_file}: not UTF-8 text") from None
    for n, item in rows:
        try:
            prompt, candidate = verifier.read_item(item, base)
        except BonError as exc:
            raise BonError(f"{items_file}:{n}: {exc}") from None
        item_id = verifier.item_id(item)
        if item_id in seen:
            raise BonError(f"{items_file}:{n}: item {item_id} appears twice (first on line {seen[item_id]})")
        seen[item_id] = n
        items.append((item_id, item, prompt, candidate))
    if not items:
        raise BonError(f"--items {items_file}: no items")
    return items


def _identity_text(verifier: Verifier) -> str:
    try:
        return json.dumps(verifier.identity(), sort_keys=True, default=str)
    except Exception:  # noqa: BLE001 - a verifier whose identity needs its model: name and class then
        return f"{verifier.name}:{type(verifier).__qualname__}"


def _reusable(out_file: Path | None, keys: set[str]) -> dict[str, dict[str, Any]]:
    """Lines of an earlier run of the same items with the same verifier, by ``input_sha256``."""
    if out_file is None or not out_file.is_file():
        return {}
    return {r["input_sha256"]: r for _, r in read_jsonl(out_file) if r.get("input_sha256") in keys}


def _record(item_id: str, score: Score, key: str) -> dict[str, Any]:
    record: dict[str, Any] = {"id": item_id, "score": score.value}
    if score.missing:
        record["missing"] = score.missing
    record.update({k: v for k, v in score.details.items() if k not in ("id", "score", "missing", "input_sha256")})
    record["input_sha256"] = key
    return record


def _score_of(record: dict[str, Any]) -> Score:
    details = {k: v for k, v in record.items() if k not in ("id", "score", "missing", "input_sha256")}
    return Score(record.get("score"), details, missing=record.get("missing"))


def _strict(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null (strict JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value
