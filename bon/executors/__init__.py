"""Executors: where a study's stage work runs. The driver always keeps the run folder and the store.

``local`` (default) runs everything in this process. ``ray`` sends generation, verification and
judge batches to a pool of Ray actors and gets candidates (with image pixels), scores and verdicts
back; the stages write them exactly as a local run does, so resume, ``--max-calls``, the judgment
store and the run-folder layout do not depend on the executor. A served judge (``serve:``, see
:mod:`bon.serve`) runs its replicas as subprocesses under ``local`` and as GPU-holding actors under
``ray``. Config: ``executor: {name: local}`` or ``{name: ray, options: {address: auto | local | HOST:PORT, workers, cpus_per_worker, gpus_per_worker, batch,
lost_node_timeout}}`` (address default: $RAY_ADDRESS if set, else a local cluster started and shut down by bon;
lost_node_timeout, default 300 s: how long work may wait for a place after its node is lost before exit 3).
Both executors hand results back as ``(index, result)`` pairs, Ray's in the order they finish.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bon.errors import BonError
from bon.executors.local import LocalExecutor

EXECUTORS = ("local", "ray")
RAY_OPTIONS = ("address", "workers", "cpus_per_worker", "gpus_per_worker", "batch", "num_cpus", "lost_node_timeout")


def parse_executor(raw: Any, where: str) -> dict[str, Any]:
    """A validated ``{name, options}`` mapping (a bare name is accepted)."""
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict) or raw.get("name") not in EXECUTORS:
        raise BonError(f"{where}: expected a mapping with name one of {', '.join(EXECUTORS)}, got {raw!r}")
    unknown = sorted(set(raw) - {"name", "options"})
    if unknown:
        raise BonError(f"{where}: unknown key(s) {', '.join(unknown)} (known: name, options)")
    options = raw.get("options") or {}
    if not isinstance(options, dict):
        raise BonError(f"{where}: options must be a mapping")
    allowed = RAY_OPTIONS if raw["name"] == "ray" else ()
    bad = sorted(set(options) - set(allowed))
    if bad:
        raise BonError(f"{where}: unknown option(s) {', '.join(bad)} for executor {raw['name']} "
                       f"(known: {', '.join(allowed) or 'none'})")
    return {"name": raw["name"], "options": dict(options)}


def executor_options_from(config: Path, name: str) -> dict[str, Any]:
    """The options a config file gives executor ``name`` (so ``--executor ray`` keeps its cluster settings)."""
    from bon.config import read_yaml

    try:
        recorded = read_yaml(Path(config))
    except BonError:
        return {}  # load_config reports a broken file with its own one-line error
    raw = recorded.get("executor") if isinstance(recorded, dict) else None
    spec = parse_executor(raw, where=f"{config}: executor") if raw else {}
    return spec.get("options", {}) if spec.get("name") == name else {}


def create_executor(spec: dict[str, Any] | None, study: Any = None):
    """The executor a study setting names; ``study`` (a StudyConfig) gives workers the plugin specs."""
    spec = spec or {"name": "local"}
    if spec["name"] == "local":
        return LocalExecutor()
    from bon.executors.ray import RayExecutor

    return RayExecutor(study, **spec.get("options", {}))


__all__ = ["LocalExecutor", "create_executor", "executor_options_from", "parse_executor"]
