"""Reading a benchmark's official grader prompts from a checkout the user points at (``prompts_dir``).

The prompt texts stay outside this repository, as MMRB2's do: an official metric reads the module-level
string constants of the official Python file by parsing it (:mod:`ast`), never by running it.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Any, Sequence

from bon.errors import BonError


METRICS = ("official", "bon")


def check_metric(who: str, metric: str, mode: str, grader: Any) -> str:
    """A graded verifier's ``metric``: the official one reads written answers, and only it takes a replay grader."""
    from verifiers._grader import REPLAY

    if metric not in METRICS:
        raise BonError(f"{who}: metric must be official or bon, got {metric!r}")
    if metric == "official" and mode != "generate":
        raise BonError(f"{who}: metric official reads written answers (mode generate), got mode {mode!r}")
    if metric != "official" and isinstance(grader, str) and grader.startswith(REPLAY):
        raise BonError(f"{who}: grader replay: answers the official metric's named requests (metric: official)")
    return metric


def find_file(prompts_dir: str | Path, relative: Sequence[str], who: str, repo: str) -> Path:
    """The first of ``relative`` under ``prompts_dir`` (a checkout of ``repo`` or one of its folders)."""
    root = Path(prompts_dir).expanduser()
    if not root.is_dir():
        raise BonError(f"{who}: prompts_dir {root} is not a folder (point it at a checkout of {repo})")
    for rel in relative:
        if (root / rel).is_file():
            return root / rel
    raise BonError(f"{who}: prompts_dir {root} holds none of {', '.join(relative)} (point it at a checkout of {repo})")


def python_constants(path: Path, names: Sequence[str], who: str) -> dict[str, Any]:
    """The literal values assigned to ``names`` at the top level of a Python file (strings, lists, dicts)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise BonError(f"{who}: cannot read {path} ({type(exc).__name__})") from None
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in names:
                try:
                    found[name] = ast.literal_eval(node.value)
                except ValueError:
                    raise BonError(f"{who}: {path}: {name} is not a literal") from None
    missing = [n for n in names if n not in found]
    if missing:
        raise BonError(f"{who}: {path} defines no {', '.join(missing)} (not the official prompts file?)")
    return found


def texts_digest(values: dict[str, Any]) -> str:
    """A short hash of the prompt texts read: the verifier's identity changes when they do."""
    return hashlib.sha256(repr(sorted(values.items())).encode("utf-8")).hexdigest()[:16]
