"""The MMRB2 benchmark format and the official scorer's semantics.

One module reads and writes both the real benchmark (``t2i.json`` ... in one folder) and bon's own
mini preference sets in the same format, so a judge's accuracy means the same thing on both. The
accuracy rules mirror the official scorer: the first forward and first reverse sample of each pair
are two independent judgements (reverse flipped back), and anything the judge did not answer is left
out of the denominator rather than counted wrong.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Iterable, Mapping

from bon.errors import BonError

# Official scorer task names -> file names, in the scorer's order.
TASK_FILES: dict[str, str] = {
    "image": "t2i.json",
    "edit": "edit.json",
    "interleaved": "interleaved.json",
    "reasoning": "reasoning.json",
}
BON_TO_SCORER: dict[str, str] = {"t2i": "image", "edit": "edit", "interleaved": "interleaved", "reasoning": "reasoning"}
SCORER_TO_BON: dict[str, str] = {v: k for k, v in BON_TO_SCORER.items()}
FLIP = {"A": "B", "B": "A"}


def scorer_task(task: str) -> str:
    """Normalise a bon task name (``t2i``) or scorer name (``image``) to the scorer name."""
    if task in TASK_FILES:
        return task
    if task in BON_TO_SCORER:
        return BON_TO_SCORER[task]
    raise BonError(f"unknown MMRB2 task {task!r} (expected one of {', '.join(BON_TO_SCORER)} or {', '.join(TASK_FILES)})")


# --- pairs ------------------------------------------------------------------------------------


@dataclass
class Pair:
    """One human-labelled preference pair. Content lists stay raw ``[[kind, value], ...]`` with image
    paths relative to the benchmark folder (the response-only release has no prompt content)."""

    id: str
    prompt_source: str
    prompt_content: list[list[str]] | None
    prompt_metadata: dict[str, Any]
    model_a: str
    model_b: str
    response_a: list[list[str]]
    response_b: list[list[str]]
    chosen: str
    human_annotations: Any = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # unknown keys, kept on rewrite

    def to_dict(self) -> dict[str, Any]:
        """The official on-disk shape (key ``id``, responses as ``model_name`` + ``response_content``)."""
        out: dict[str, Any] = {"id": self.id, "prompt_source": self.prompt_source}
        if self.prompt_content is not None:
            out["prompt_content"] = self.prompt_content
        out["prompt_metadata"] = self.prompt_metadata
        out["response_a"] = {"model_name": self.model_a, "response_content": self.response_a}
        out["response_b"] = {"model_name": self.model_b, "response_content": self.response_b}
        out["chosen"] = self.chosen
        out["human_annotations"] = self.human_annotations
        out.update(self.extra)
        return out


_PAIR_KEYS = {"id", "pair_id", "prompt_source", "prompt_content", "prompt_metadata", "response_a", "response_b",
              "model_a", "model_b", "chosen", "human_annotations"}


def load_pairs(path: Path) -> list[Pair]:
    """Read ``{"pairs": [...]}``; any malformed pair raises a one-line :class:`BonError` naming file and pair."""
    path = Path(path)
    raw = _read_json(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("pairs"), list):
        raise BonError(f"{path}: expected a JSON object with a \"pairs\" list")
    pairs: list[Pair] = []
    seen: set[str] = set()
    for i, rec in enumerate(raw["pairs"]):
        pair = _parse_pair(rec, path, i)
        if pair.id in seen:
            raise BonError(f"{path}: pair {pair.id}: duplicate pair id")
        seen.add(pair.id)
        pairs.append(pair)
    return pairs


def _parse_pair(rec: Any, path: Path, i: int) -> Pair:
    if not isinstance(rec, dict):
        raise BonError(f"{path}: pair #{i}: expected a JSON object")
    pid = rec.get("id", rec.get("pair_id"))
    if pid is None or str(pid) == "":
        raise BonError(f"{path}: pair #{i}: has no \"id\" (or \"pair_id\")")
    pid = str(pid)
    where = f"{path}: pair {pid}"
    if "chosen" not in rec:
        raise BonError(f"{where}: missing \"chosen\"")
    if rec["chosen"] not in ("A", "B"):
        raise BonError(f"{where}: \"chosen\" must be \"A\" or \"B\", got {rec['chosen']!r:.40}")
    model_a, resp_a = _response(rec, "a", where)
    model_b, resp_b = _response(rec, "b", where)
    prompt = rec.get("prompt_content")
    if prompt is not None:
        _check_content(prompt, f"{where}: prompt_content")
    meta = rec.get("prompt_metadata") or {}
    if not isinstance(meta, dict):
        raise BonError(f"{where}: prompt_metadata must be an object")
    return Pair(
        id=pid,
        prompt_source=str(rec.get("prompt_source", "")),
        prompt_content=prompt,
        prompt_metadata=meta,
        model_a=model_a,
        model_b=model_b,
        response_a=resp_a,
        response_b=resp_b,
        chosen=rec["chosen"],
        human_annotations=rec.get("human_annotations"),
        extra={k: v for k, v in rec.items() if k not in _PAIR_KEYS},
    )


def _response(rec: dict[str, Any], side: str, where: str) -> tuple[str, list[list[str]]]:
    """Accept the official ``{"model_name", "response_content"}`` or a bare content list plus ``model_a``/``model_b``."""
    raw = rec.get(f"response_{side}")
    if raw is None:
        raise BonError(f"{where}: missing \"response_{side}\"")
    if isinstance(raw, dict):
        model = raw.get("model_name", raw.get("model", rec.get(f"model_{side}", "")))  # release README says "model"
        content = raw.get("response_content")
    else:
        model, content = rec.get(f"model_{side}", ""), raw
    _check_content(content, f"{where}: response_{side}")
    return str(model), content


def _check_content(content: Any, where: str) -> None:
    if not isinstance(content, list):
        raise BonError(f"{where}: content must be a list of [kind, value] items")
    for j, item in enumerate(content):
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], str)):
            raise BonError(f"{where}[{j}]: expected [kind, value], got {item!r:.60}")
        kind, value = item
        if kind == "image":
            if _unsafe_path(value):
                raise BonError(f"{where}[{j}]: image path {value!r} is absolute or escapes the benchmark folder")
        elif kind != "text":
            raise BonError(f"{where}[{j}]: unknown content kind {kind!r} (expected 'text' or 'image')")


def _unsafe_path(value: str) -> bool:
    """Paths must stay inside the benchmark folder on every OS the files may travel to."""
    posix, win = PurePosixPath(value), PureWindowsPath(value)
    return (value == "" or posix.is_absolute() or win.is_absolute() or bool(win.drive)
            or ".." in posix.parts or ".." in win.parts)


def write_pairs(path: Path, pairs: Iterable[Mapping[str, Any] | Pair]) -> None:
    """Write ``{"pairs": [...]}`` atomically (a reader never sees half a file)."""
    data = [p.to_dict() if isinstance(p, Pair) else dict(p) for p in pairs]
    _write_json_atomic(Path(path), {"pairs": data})


def find_task_file(bench_dir: Path, task: str) -> Path:
    """The task file in a benchmark folder: ``t2i.json``, else ``t2i_response_only.json``, else a
    single ``t2i_*.json``. ``task`` may be the bon or the scorer name."""
    bench_dir = Path(bench_dir)
    stem = Path(TASK_FILES[scorer_task(task)]).stem
    for name in (f"{stem}.json", f"{stem}_response_only.json"):
        if (bench_dir / name).is_file():
            return bench_dir / name
    matches = sorted(p for p in bench_dir.glob(f"{stem}_*.json") if p.is_file())
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise BonError(f"{bench_dir}: several files could hold task {task!r}: {', '.join(p.name for p in matches)}")
    raise BonError(f"{bench_dir}: no file for task {task!r} (looked for {stem}.json or {stem}_response_only.json)")


# --- judgments --------------------------------------------------------------------------------


def load_judgments(path: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Read an official judgment file ``{pair_id: {"forward": [...], "reverse": [...]}}``.

    Wrong types raise; a missing direction or judgement, ``""`` and odd answers (``"tie"``) load, since
    the scorer has a rule for each of them.
    """
    path = Path(path)
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise BonError(f"{path}: expected a JSON object keyed by pair id")
    for pid, entry in raw.items():
        where = f"{path}: pair {pid}"
        if not isinstance(entry, dict):
            raise BonError(f"{where}: expected an object with \"forward\" and \"reverse\" lists")
        for direction in ("forward", "reverse"):
            samples = entry.get(direction, [])
            if not isinstance(samples, list):
                raise BonError(f"{where}: \"{direction}\" must be a list of samples")
            for k, s in enumerate(samples):
                if not isinstance(s, dict):
                    raise BonError(f"{where}: {direction}[{k}] must be an object with a \"judgement\"")
                j = s.get("judgement")
                if j is not None and not isinstance(j, str):
                    raise BonError(f"{where}: {direction}[{k}] judgement must be a string, got {j!r:.40}")
    return raw


def write_judgments(path: Path, data: Mapping[str, Mapping[str, Any]]) -> None:
    """Write a judgment file atomically, so a killed run never leaves a torn file for the scorer."""
    _write_json_atomic(Path(path), dict(data))


# --- scoring ----------------------------------------------------------------------------------


def _first(samples: Any) -> str | None:
    """The first sample's judgement, or None when there is none to count (missing, null or empty)."""
    if not isinstance(samples, list) or not samples or not isinstance(samples[0], Mapping):
        return None
    j = samples[0].get("judgement")
    return j if isinstance(j, str) and j else None


def accuracy(pairs: Iterable[Pair], judgments: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Official per-task accuracy in percent (NaN, not the scorer's 0, when nothing was counted).

    ``judgements`` is the denominator: the first forward and first reverse sample of each predicted
    pair whose judgement is non-empty. As in the official scorer, a non-empty answer other than
    "A"/"B" (say "tie") is counted and is wrong; ``invalid_judgements`` says how many there were.
    """
    chosen = {p.id: p.chosen for p in pairs}
    correct = counted = skipped = invalid = evaluated = 0
    for pid, entry in judgments.items():
        if pid not in chosen:
            continue
        evaluated += 1
        for direction, flip in (("forward", False), ("reverse", True)):
            j = _first(entry.get(direction) if isinstance(entry, Mapping) else None)
            if j is None:
                skipped += 1
                continue
            counted += 1
            invalid += j not in FLIP
            correct += (FLIP.get(j, j) if flip else j) == chosen[pid]
    return {
        "accuracy": 100.0 * correct / counted if counted else math.nan,
        "total_pairs": len(chosen),
        "evaluated_pairs": evaluated,
        "missing_pairs": len(chosen) - evaluated,
        "correct": correct,
        "judgements": counted,
        "skipped_judgements": skipped,
        "invalid_judgements": invalid,
        "unknown_ids": sum(pid not in chosen for pid in judgments),
    }


def overall(task_results: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Micro-average over all counted judgements (the official overall); the macro mean is given
    alongside because it differs whenever tasks have different numbers of counted judgements."""
    results = list(task_results.values()) if isinstance(task_results, Mapping) else list(task_results)
    correct = sum(r["correct"] for r in results)
    counted = sum(r["judgements"] for r in results)
    per_task = [r["accuracy"] for r in results if r["judgements"]]
    return {
        "accuracy": 100.0 * correct / counted if counted else math.nan,
        "macro_accuracy": sum(per_task) / len(per_task) if per_task else math.nan,
        "correct": correct,
        "judgements": counted,
        "tasks": len(results),
    }


def evaluate(bench_dir: Path, predictions: Mapping[str, Path]) -> dict[str, Any]:
    """Score judgment files per task (``{task: path}``) against a benchmark folder, plus ``"overall"``.

    Tasks come out in the official order, keyed by scorer name.
    """
    tasks = {scorer_task(t): Path(p) for t, p in predictions.items()}
    out: dict[str, Any] = {}
    for task in TASK_FILES:
        if task in tasks:
            out[task] = accuracy(load_pairs(find_task_file(bench_dir, task)), load_judgments(tasks[task]))
    out["overall"] = overall([out[t] for t in TASK_FILES if t in out])
    return out


# --- JSON helpers -----------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise BonError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BonError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise BonError(f"{path}: unreadable ({exc.strerror or exc})") from None


def _write_json_atomic(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, ensure_ascii=False, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
