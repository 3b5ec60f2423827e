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
import os
import sys
from pathlib import Path
from typing import Any

from bon import registry
from bon.content import read_jsonl
from bon.errors import BonError
from bon.plugins import Score, Verifier


def score_items(verifier_spec: str, options: dict[str, Any], items_file: Path, out_file: Path | None,
                images_root: Path | None = None) -> dict[str, Any]:
    """Score every item; returns ``{"aggregate", "items", "failed", "transient", "reused", "damaged"}`` (strict
    JSON values). Image paths are read relative to, and only from inside, ``images_root`` (default: the items
    file's folder). The out-file is replaced atomically once the work is done (or stopped): never emptied first."""
    from bon.progress import bar

    verifier = registry.create("verifier", verifier_spec, **options)
    if type(verifier).read_item is Verifier.read_item:
        raise BonError(f"verifier {verifier_spec!r} does not read benchmark items yet, so bon score cannot use it "
                       "(it needs read_item and item_id)")
    items = _read_items(verifier, items_file, images_root)
    if out_file is not None:
        _refuse_input_as_output(out_file, items_file, options, items)
    identity = _identity_text(verifier)
    keys = [hashlib.sha256((identity + json.dumps(item, sort_keys=True, ensure_ascii=False)).encode()).hexdigest()
            for _, item, _, _ in items]
    earlier = _earlier_lines(out_file)
    kept = {key: record for key, record, _ in earlier if key in set(keys)}
    damaged = [n for n, (key, _, _) in enumerate(earlier, 1) if key is None]
    if damaged:
        print(f"note: {out_file}: {len(damaged)} damaged line{'s' if len(damaged) > 1 else ''} (first: line "
              f"{damaged[0]}) scored again", file=sys.stderr)
    scored: list[tuple[Any, Score]] = []
    written: dict[str, dict[str, Any]] = {}
    transient = new = 0
    finished = False
    try:
        with bar(f"score {verifier_spec}", len(items)) as progress:
            for (item_id, _, prompt, candidate), key in zip(items, keys):
                record = kept.get(key)
                score = _score_of(record) if record is not None else verifier.score(prompt, candidate)
                new += record is None
                progress.advance()
                if score.value is None and score.transient:
                    transient += 1
                    continue
                scored.append((prompt, score))
                written[key] = record or _record(item_id, score, key)
        finished = True
    finally:
        verifier.close()
        if out_file is not None and (finished or new):
            _write_out(out_file, [written[k] for k in keys if k in written],
                       [] if finished else [text for key, _, text in earlier if key not in written])
    return {"aggregate": _strict(verifier.aggregate(scored)), "items": len(items), "transient": transient,
            "failed": sum(s.value is None for _, s in scored), "reused": sum(k in kept for k in keys),
            "damaged": len(damaged)}


def _refuse_input_as_output(out_file: Path, items_file: Path, options: dict[str, Any],
                            items: list[tuple[str, dict[str, Any], Any, Any]]) -> None:
    """``--out-file`` naming a file the command reads (the items, a replay file, a prompt file, an image) would
    overwrite the user's input: refused before anything is scored."""
    inputs = [("--items", items_file)] + [(f"--verifier-option {name}", path) for name, path in _option_paths(options)]
    inputs += [("an image of the items", image.path) for _, _, prompt, candidate in items
               for image in (*prompt.content.images, *candidate.content.images)]
    for flag, path in inputs:
        if _same_path(out_file, path):
            raise BonError(f"--out-file {out_file}: is the input {flag} {path}; name another file for the scores")


def _option_paths(options: Any, name: str = "") -> list[tuple[str, Path]]:
    """Every option value that names a file (``replay:FILE`` specs too), with its option's name."""
    if isinstance(options, dict):
        return [p for k, v in options.items() for p in _option_paths(v, str(k))]
    if isinstance(options, (list, tuple)):
        return [p for v in options for p in _option_paths(v, name)]
    if isinstance(options, str) and options:
        return [(name, Path(text).expanduser()) for text in {options, options.partition(":")[2]} if text and Path(text).expanduser().exists()]
    return []


def _same_path(a: Path, b: Path) -> bool:
    try:
        if Path(a).exists() and Path(b).exists():
            return os.path.samefile(a, b)
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):
        return False


def _earlier_lines(out_file: Path | None) -> list[tuple[str | None, dict[str, Any] | None, str]]:
    """An earlier out-file's lines as ``(input_sha256, record, text)``; a line that is not a valid record of
    bon score (cut, not JSON, a key or score of the wrong type) has key None and is scored again."""
    if out_file is None or not out_file.is_file():
        return []
    try:
        text = out_file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise BonError(f"--out-file {out_file}: cannot read the earlier scores ({getattr(exc, 'strerror', None) or exc}); "
                       "move it away or name another file") from None
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        ok = isinstance(record, dict) and _valid_record(record)
        out.append((record["input_sha256"] if ok else None, record if ok else None, line))
    return out


def _valid_record(record: dict[str, Any]) -> bool:
    key, value, missing = record.get("input_sha256"), record.get("score"), record.get("missing")
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return (isinstance(key, str) and len(key) == 64 and isinstance(record.get("id"), str)
            and (number or value is None) and (missing is None or isinstance(missing, str)))


def _write_out(out_file: Path, records: list[dict[str, Any]], earlier: list[str]) -> None:
    """The out-file replaced atomically, every line through the one redactor; ``earlier`` lines (a stopped run's
    items not reached yet) kept as they were."""
    from bon.io import atomic_write
    from bon.redact import redact

    lines = [json.dumps(redact(_strict(r)), ensure_ascii=False, allow_nan=False) for r in records] + earlier
    try:
        atomic_write(out_file, "".join(line + "\n" for line in lines))
    except OSError as exc:
        raise BonError(f"--out-file {out_file}: cannot write ({exc.strerror or exc})") from None


def _read_items(verifier: Verifier, items_file: Path, images_root: Path | None = None) -> list[tuple[str, dict[str, Any], Any, Any]]:
    """``(id, item, prompt, candidate)`` per line; the first bad one is one line naming file, line and field.
    Paths in an item are read relative to ``images_root`` (default: the items file's folder), never outside it."""
    if not items_file.is_file():
        raise BonError(f"--items {items_file}: no such file")
    if images_root is not None and not images_root.is_dir():
        raise BonError(f"--images-root {images_root}: no such folder")
    base = images_root.resolve() if images_root is not None else items_file.resolve().parent
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
