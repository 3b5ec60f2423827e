"""Building a study's prompt suite by name (the suites themselves are plugins, see generators/suites)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from bon import registry
from bon.content import Prompt, load_prompts
from bon.errors import BonError

WHERE = "suite"


def jsonl_suite(path: str) -> list[Prompt]:
    """Prompts saved in bon's own JSONL format (``bon.content.Prompt`` records)."""
    p = Path(path)
    if not p.exists():
        raise BonError(f"{p}: suite file not found")
    return load_prompts(p)


def suite_call(spec: dict[str, Any], tasks: list[str], seed: int, where: str = WHERE) -> tuple[Any, str, dict[str, Any]]:
    """(factory, name, options) for a config's ``suite`` mapping, every option checked by name.

    The study hands ``seed`` and ``tasks`` to suites that take them (unless the config sets them)."""
    options = dict(spec)
    name = str(options.pop("name", "jsonl" if "path" in options else "synthetic"))
    try:
        factory = registry.resolve("suite", name)
    except BonError as exc:
        raise BonError(f"{where}: {exc}") from None
    registry.check_options("suite", name, factory, options, where=where)
    takes = inspect.signature(factory).parameters
    for key, value in (("seed", seed), ("tasks", list(tasks))):
        if key in takes:
            options.setdefault(key, value)
    missing = [p.name for p in takes.values() if p.default is p.empty and p.kind is not p.VAR_KEYWORD and p.name not in options]
    if missing:
        raise BonError(f"{where}: suite {name!r} needs option {missing[0]!r}")
    return factory, name, options


def build(spec: dict[str, Any], tasks: list[str], seed: int, where: str = WHERE) -> list[Prompt]:
    """Build the suite a config describes, keeping only the study's tasks (the first ``limit`` per task
    when set: `bon run --limit M`, for a quick look)."""
    spec = dict(spec)
    limit = spec.pop("limit", None)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise BonError(f"{where}: limit must be a positive integer, got {limit!r}")
    factory, name, options = suite_call(spec, tasks, seed, where)
    try:
        prompts = factory(**options)
    except TypeError as exc:
        raise BonError(f"{where}: suite {name!r}: bad options ({str(exc).splitlines()[0] if str(exc) else exc})") from None
    except BonError as exc:
        raise BonError(f"{where}: {exc}") from None
    prompts = [p for p in prompts if p.task in tasks]
    return first_per_task(prompts, limit) if limit is not None else prompts


def first_per_task(prompts: list[Prompt], limit: int) -> list[Prompt]:
    """The first ``limit`` prompts of each task, in suite order."""
    seen: dict[str, int] = {}
    kept = []
    for p in prompts:
        seen[p.task] = seen.get(p.task, 0) + 1
        if seen[p.task] <= limit:
            kept.append(p)
    return kept
