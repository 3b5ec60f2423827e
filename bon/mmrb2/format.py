"""The MMRB2 file formats: task files (``{"pairs": [...]}``) and official judgment files.

One module reads and writes both the real benchmark (``t2i.json`` ... in one folder) and bon's own
mini preference sets in the same format, so a judge's accuracy means the same thing on both. Any
malformed record is a one-line error naming the file and the pair.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Iterable, Mapping

from bon.content import content_entries
from bon.errors import BonError, first_line
from bon.io import atomic_write
from bon.redact import redact
from bon.tasks import Task, parse_task

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
    raw = read_json(path)
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
    if isinstance(pid, bool) or not isinstance(pid, (str, int)):  # judgment files key pairs by these ids as text
        raise BonError(f"{path}: pair #{i}: \"id\" must be a string, got {pid!r:.40}")
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
    for j, (kind, value) in enumerate(content_entries(content, where)):
        if kind == "image" and _unsafe_path(value):
            raise BonError(f"{where}[{j}]: image path {value!r} is absolute or escapes the benchmark folder")


def _unsafe_path(value: str) -> bool:
    """Paths must stay inside the benchmark folder on every OS the files may travel to."""
    posix, win = PurePosixPath(value), PureWindowsPath(value)
    return (value == "" or posix.is_absolute() or win.is_absolute() or bool(win.drive)
            or ".." in posix.parts or ".." in win.parts)


def write_pairs(path: Path, pairs: Iterable[Mapping[str, Any] | Pair]) -> None:
    """Write ``{"pairs": [...]}`` atomically (a reader never sees half a file)."""
    data = [p.to_dict() if isinstance(p, Pair) else dict(p) for p in pairs]
    _write_json_atomic(Path(path), {"pairs": data})


def find_task_file(bench_dir: Path, task: str | Task) -> Path:
    """The task file in a benchmark folder: ``t2i.json``, else ``t2i_response_only.json``, else a
    single ``t2i_*.json``. ``task`` may be spelled either way (``t2i`` or ``image``)."""
    bench_dir, name = Path(bench_dir), parse_task(task).name
    stem = Path(parse_task(task).file).stem
    for file in (f"{stem}.json", f"{stem}_response_only.json"):
        if (bench_dir / file).is_file():
            return bench_dir / file
    matches = sorted(p for p in bench_dir.glob(f"{stem}_*.json") if p.is_file())
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise BonError(f"{bench_dir}: several files could hold task {name!r}: {', '.join(p.name for p in matches)}")
    raise BonError(f"{bench_dir}: no file for task {name!r} (looked for {stem}.json or {stem}_response_only.json)")


def has_task_file(bench_dir: Path, task: str | Task) -> bool:
    """Whether the folder holds any file for the task (a broken or ambiguous one included)."""
    return any(Path(bench_dir).glob(f"{Path(parse_task(task).file).stem}*.json"))


# --- judgments --------------------------------------------------------------------------------


def load_judgments(path: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Read an official judgment file ``{pair_id: {"forward": [...], "reverse": [...]}}``.

    Wrong types raise; a missing direction or judgement, ``""`` and odd answers (``"tie"``) load, since
    the scorer has a rule for each of them.
    """
    path = Path(path)
    raw = read_json(path)
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
    _write_json_atomic(Path(path), redact(dict(data)))  # a server error quoting a key never lands in it


# --- JSON helpers -----------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    """A JSON file, or a one-line :class:`BonError` naming it (a key given twice in one object too)."""
    def unique(items: list[tuple[str, Any]]) -> dict[str, Any]:
        """Python keeps the last of two equal keys silently; in a judgment file that hides a pair's other answer."""
        obj = dict(items)
        if len(obj) < len(items):  # rare: find the key given twice
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    raise BonError(f"{path}: key {key!r:.60} appears twice in one object")
                seen.add(key)
        return obj

    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh, object_pairs_hook=unique)
    except FileNotFoundError:
        raise BonError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BonError(f"{path}: not valid JSON ({exc})") from None
    except ValueError as exc:  # a number Python will not convert (an integer of more than 4300 digits)
        raise BonError(f"{path}: not readable JSON ({first_line(exc, 120)})") from None
    except RecursionError:
        raise BonError(f"{path}: not readable JSON (nested too deeply)") from None
    except OSError as exc:
        raise BonError(f"{path}: unreadable ({exc.strerror or exc})") from None


def _write_json_atomic(path: Path, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, ensure_ascii=False, indent=1) + "\n")
