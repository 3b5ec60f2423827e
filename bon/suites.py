"""Prompt suites by name: the offline synthetic world, or a JSONL file of the user's own prompts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bon import registry
from bon.content import Prompt, load_prompts
from bon.errors import BonError

PLUGINS = {
    "synthetic": "generators.synthetic.suites:build_suite",
    "jsonl": "bon.suites:jsonl_suite",
    "prompts": "generators.suites.jsonl:build_suite",
    "genai-bench": "generators.suites.genai_bench:build_suite",
    "gedit-bench": "generators.suites.gedit_bench:build_suite",
    "isg-bench": "generators.suites.isg_bench:build_suite",
    "emma": "generators.suites.emma:build_suite",
}

def jsonl_suite(path: str, **_: Any) -> list[Prompt]:
    p = Path(path)
    if not p.exists():
        raise BonError(f"{p}: suite file not found")
    return load_prompts(p)


def build(spec: dict[str, Any], tasks: list[str], seed: int) -> list[Prompt]:
    """Build the suite a config describes, keeping only the study's tasks."""
    options = dict(spec)
    limit = options.pop("limit", None)  # `bon run --limit M`: the first M prompts per task, for a quick look
    name = options.pop("name", "jsonl" if "path" in options else "synthetic")
    factory = registry.resolve("suite", name)
    if name == "synthetic":
        options.setdefault("seed", seed)
        options.setdefault("tasks", tasks)
    try:
        built = factory(**options)
    except TypeError as exc:  # an unknown or missing suite option
        raise BonError(f"suite {name!r}: bad options {sorted(options)} ({exc})") from None
    prompts = [p for p in built if p.task in tasks]
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise BonError(f"suite: limit must be a positive integer, got {limit!r}")
        return first_per_task(prompts, limit)
    return prompts


def first_per_task(prompts: list[Prompt], limit: int) -> list[Prompt]:
    """The first ``limit`` prompts of each task, in suite order."""
    seen: dict[str, int] = {}
    kept = []
    for p in prompts:
        seen[p.task] = seen.get(p.task, 0) + 1
        if seen[p.task] <= limit:
            kept.append(p)
    return kept
