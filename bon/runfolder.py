"""Where everything lives inside a run folder; the one place that knows the layout.

The same names serve any output folder of an analysis (``bon report --out DIR``), so a report for
other accuracies can be written beside the study's without replacing it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bon.content import slug
from bon.errors import BonError
from bon.io import atomic_write


@dataclass(frozen=True)
class RunFolder:
    root: Path
    existing: bool = field(default=False, compare=False)  # a folder that must already exist (read, not created)

    def __post_init__(self) -> None:
        if self.existing:
            if not self.root.is_dir():
                raise BonError(f"{self.root}: no such run folder")
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BonError(f"{self.root}: cannot create the run folder ({exc.strerror})") from None
        self.require_writable()

    def require_writable(self) -> None:
        """Refuse before anything is written, so a read-only folder keeps what it holds. ``os.access``
        says yes to root even on a read-only mount, so a real file is created and removed too."""
        for folder in (self.root, self.figures):
            if not folder.exists():
                continue
            probe = folder / f".bon-write-test-{os.getpid()}"
            try:
                if not os.access(folder, os.W_OK):
                    raise PermissionError(13, "Permission denied")
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as exc:
                raise BonError(f"{folder}: run folder is not writable ({exc.strerror or exc})") from None

    config = property(lambda self: self.root / "config.yaml")
    prompts = property(lambda self: self.root / "prompts.jsonl")
    inputs = property(lambda self: self.root / "inputs")
    store = property(lambda self: self.root / "judgments.sqlite")
    scores = property(lambda self: self.root / "scores.jsonl")
    picks = property(lambda self: self.root / "picks.jsonl")
    curves = property(lambda self: self.root / "curves")
    mmrb2 = property(lambda self: self.root / "mmrb2")
    stats = property(lambda self: self.root / "stats.json")
    # analysis outputs
    results = property(lambda self: self.root / "results.csv")
    metrics = property(lambda self: self.root / "metrics.csv")
    correlations = property(lambda self: self.root / "correlations.csv")
    accuracies = property(lambda self: self.root / "accuracies.csv")
    leaderboard = property(lambda self: self.root / "leaderboard.csv")
    power = property(lambda self: self.root / "power.csv")
    headroom = property(lambda self: self.root / "headroom.csv")
    predictions = property(lambda self: self.root / "predictions.csv")  # held-out judges' predicted gains
    report = property(lambda self: self.root / "report.md")
    report_html = property(lambda self: self.root / "report.html")
    report_json = property(lambda self: self.root / "report.json")
    viewer = property(lambda self: self.root / "view.html")  # `bon view`: every pair and match, both orders
    figures = property(lambda self: self.root / "figures")
    figure = property(lambda self: self.figure_file("correlation"))

    def figure_file(self, name: str) -> Path:
        """A figure's PNG; its SVG sits beside it."""
        return self.figures / f"{name}.png"
    ledger = property(lambda self: self.root / "invocations.json")  # every run of the study: ids, stage times
    picks_dir = property(lambda self: self.root / "picks")

    def picks_file(self, judge: str, strategy_label: str, n: int | None = None) -> Path:
        """Picks of ``bon select``: one file per judge, strategy with its aggregate (``round-robin-borda``) and n."""
        return self.picks_dir / f"{slug(judge)}__{slug(strategy_label)}{f'__n{n}' if n else ''}.jsonl"

    def curve_file(self, judge: str, strategy_label: str) -> Path:
        """A ``bon curve`` result (the report draws every one it finds)."""
        return self.root / "curves" / f"{slug(judge)}__{slug(strategy_label)}.json"

    def picks_files(self) -> list[Path]:
        """The study's ``picks.jsonl`` and every ``bon select`` picks file (for leaderboards and reports)."""
        extra = sorted(self.picks_dir.glob("*.jsonl")) if self.picks_dir.is_dir() else []
        return ([self.picks] if self.picks.exists() else []) + extra

    def candidates_dir(self, generator: str) -> Path:
        return self.root / "candidates" / slug(generator)

    def candidates(self, generator: str) -> Path:
        return self.candidates_dir(generator) / "candidates.jsonl"

    def judgment_file(self, judge: str, task_file: str) -> Path:
        return self.mmrb2 / "judgments" / slug(judge) / task_file

    def alternative(self, name: str) -> Path:
        """The folder of an analysis that must not replace the study's own (e.g. other accuracies)."""
        return self.root / f"report-{slug(name)}"


def strict(value: Any) -> Any:
    """A JSON-ready copy: NaN and infinities become None, numpy scalars and tables plain Python."""
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a pandas DataFrame, without importing pandas
        value = value.to_dict(orient="records")
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [strict(v) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "ndim"):  # numpy array or scalar
        return strict(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return None if type(value).__name__ in ("NAType", "NaTType") else str(value)


def write_bytes(path: Path, data: bytes) -> None:
    """Atomic write with the user's umask: a reader never sees half a file."""
    atomic_write(path, data)


def write_json(path: Path, data: Any) -> None:
    """Strict JSON (missing numbers are ``null``, never NaN), secrets masked, written atomically."""
    from bon.redact import redact

    write_text(path, json.dumps(redact(strict(data)), indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def write_text(path: Path, text: str) -> None:
    atomic_write(path, text)


# --- checks readers make of what they read (an edited or damaged file is an error, never other numbers) ---


def read_stats(path: Path) -> dict[str, Any] | None:
    """``stats.json`` as an object; None when it is not there (a reader then rebuilds what it needs from
    the store); a one-line error when it is not JSON or not an object."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise BonError(f"{path}: not readable JSON ({' '.join(str(exc).split())[:120]})") from None
    if not isinstance(data, dict):
        raise BonError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def check_n(config: Path, n: int | None, file: Path, indices: Any) -> None:
    """config.yaml's N against the candidate indices a stage file holds (``(prompt id, index)`` pairs): an
    N edited by hand would otherwise silently give other numbers."""
    if n is None:
        return
    top = -1
    for pid, index in indices:
        if index >= n:
            raise BonError(f"{config}: n = {n}, but {file} holds candidate {index} of prompt {pid}; "
                           "config.yaml does not describe this run (edited?)")
        top = max(top, index)
    if 0 <= top < n - 1:
        raise BonError(f"{config}: n = {n}, but {file} holds only {top + 1} candidates per prompt; "
                       "config.yaml does not describe this run (edited?)")


def check_pick(rec: dict[str, Any], where: str, n: int | None) -> None:
    """One line of a picks file: names as text, the chosen index and every match's indices candidates of
    the prompt (0..N-1), never silently dropped or read as another candidate."""
    if _plain_pick(rec, n):
        return
    for key in ("judge", "generator", "prompt_id", "task"):
        if not isinstance(rec.get(key), str):
            raise BonError(f"{where}: {key} must be text, got {rec.get(key)!r:.60}")
    _check_index(rec.get("index"), where, "index", n)
    matches = rec.get("matches", [])
    if not isinstance(matches, list):
        raise BonError(f"{where}: matches must be a list")
    for k, match in enumerate(matches):
        if not isinstance(match, list) or len(match) < 2:
            raise BonError(f"{where}: matches[{k}] must list two candidate indices")
        for index in match[:2]:
            _check_index(index, where, f"matches[{k}]", n)
        if len(match) > 2 and match[2] is not None and (isinstance(match[2], bool) or match[2] not in match[:2]):
            raise BonError(f"{where}: matches[{k}] winner {match[2]!r:.40} is neither of its candidates")


def _plain_pick(rec: dict[str, Any], n: int | None) -> bool:
    """Whether :func:`check_pick` has nothing to say of ``rec``, checked the quick way (a study's picks file
    has a line per judge, prompt and generator, each with its matches): False sends it to the checks that
    name what is wrong."""
    if not all(type(rec.get(key)) is str for key in ("judge", "generator", "prompt_id", "task")):
        return False
    top = n if n is not None else math.inf
    index, matches = rec.get("index"), rec.get("matches", [])
    if type(index) is not int or not 0 <= index < top or type(matches) is not list:
        return False
    for match in matches:
        if type(match) is not list or len(match) < 2:
            return False
        a, b = match[0], match[1]
        if type(a) is not int or type(b) is not int or not (0 <= a < top and 0 <= b < top):
            return False
        if len(match) > 2 and match[2] is not None and (type(match[2]) is not int or match[2] not in (a, b)):
            return False
    return True


def _check_index(index: Any, where: str, what: str, n: int | None) -> None:
    if not isinstance(index, int) or isinstance(index, bool) or index < 0 or (n is not None and index >= n):
        bound = f"0..{n - 1}; config.yaml says n = {n}" if n is not None else "0 or more"
        raise BonError(f"{where}: {what} {index!r:.40} is not a candidate index ({bound})")


def check_unique_picks(records: list[tuple[str, dict[str, Any]]]) -> None:
    """No (judge, strategy, generator, prompt) picked twice: a repeated line would count twice."""
    seen: dict[tuple, str] = {}
    for where, rec in records:
        key = (rec.get("judge"), rec.get("strategy", ""), rec.get("generator"), rec.get("prompt_id"))
        if key in seen:
            raise BonError(f"{where}: a second pick of {key[0]} for {key[2]} on prompt {key[3]} (first at {seen[key]})")
        seen[key] = where
