"""What a finished run folder recorded, read back, or rebuilt when a file of it is missing.

The study's config (``config.yaml``'s ``study`` section), the identities of its plugins (the judgment
store's keys) and what ``stats.json`` records of each judge: readers (``bon view``, ``tradeoff``,
``report``, ``leaderboard``) rebuild the latter from the config and the store when stats.json is gone, so a
missing file never silently drops a judge or hides its stored verdicts. Core only: no analysis import.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from bon import registry
from bon.config import PluginSpec, StudyConfig, read_yaml
from bon.errors import BonError, first_line
from bon.runfolder import RunFolder


def recorded_study(config: Path) -> dict[str, Any]:
    """The ``study`` section of a run folder's ``config.yaml`` (the provenance beside it left out)."""
    recorded = read_yaml(config)
    study = recorded.get("study") if isinstance(recorded, dict) else None
    if not isinstance(study, dict):
        raise BonError(f"{config}: no 'study' section")
    return study


def read_study_config(run: RunFolder) -> StudyConfig:
    """The study configuration saved in the run folder's ``config.yaml``."""
    from bon.config import parse_config

    return parse_config({k: v for k, v in recorded_study(run.config).items() if v is not None}, where=str(run.config))


def official_spec(spec: PluginSpec, official: bool) -> PluginSpec:
    """A study's ``official: true`` asks every judge that knows MMRB2's official request conditions
    (an ``official`` option) for them; other judges are unchanged."""
    if not official:
        return spec
    import inspect

    factory = registry.resolve("judge", registry.parse_spec(spec.name)[0])
    if "official" not in inspect.signature(factory).parameters:
        return spec
    return replace(spec, options={**spec.options, "official": True})


def grader_view(kind: str, spec: PluginSpec, identity: dict[str, Any]) -> Any:
    """What the shared-grader check reads of a plugin (its class's declared ``grader_family`` and its
    recorded identity) without loading it again."""
    from types import SimpleNamespace

    factory = registry.resolve(kind, registry.parse_spec(spec.name)[0])
    return SimpleNamespace(name=spec.label, grader_family=getattr(factory, "grader_family", None), identity=lambda: identity)


def recorded_or_rebuilt_stats(run: RunFolder, cfg: StudyConfig) -> dict[str, Any]:
    """``stats.json`` when it is there; else its judges' identities and paid calls rebuilt from the judgment
    store (a missing stats.json never silently drops a judge from an analysis)."""
    from bon.runfolder import read_stats

    stats = read_stats(run.stats)
    return stats if stats is not None else stats_from_store(run, cfg)


def config_identities(cfg: StudyConfig) -> dict[str, dict[str, Any]]:
    """Each judge's identity (the store's key), built from the config as a first start checks it (a served
    judge too: its servers start at its first batch, never when it is built)."""
    return {spec.label: plugin_identity("judge", official_spec(spec, cfg.official), cfg.source) for spec in cfg.judges}


def plugin_identity(kind: str, spec: PluginSpec, source: str) -> dict[str, Any]:
    """A plugin's identity, built from its spec and released again (building is cheap: weights load on first use)."""
    from bon.lifecycle import release

    try:
        plugin = spec.create(kind, f"{source}: {kind} {spec.label}")
    except Exception as exc:  # noqa: BLE001 - a plugin that cannot be built here (a missing extra)
        raise BonError(f"{source}: {kind} {spec.label}: cannot rebuild its identity ({first_line(exc)})") from None
    try:
        return plugin.identity()
    finally:
        release(plugin)


def stats_from_store(run: RunFolder, cfg: StudyConfig) -> dict[str, Any]:
    """What stats.json records of each judge (identity, answers paid for, money, judge seconds, tokens, in
    all and in the selection stage), summed from the store's answers; marked ``rebuilt_from_store``."""
    from bon.store import judge_id, read_only_store

    identities = config_identities(cfg)
    judges: dict[str, Any] = {}
    if run.store.exists():
        with read_only_store(run.store) as db:
            for label, identity in identities.items():
                total, selection = (_paid(db, judge_id(identity), stage) for stage in (None, "selection"))
                judges[label] = {**total, "total": total, "selection": selection}
    return {"judges": judges, "identities": {"judges": identities}, "n": cfg.n, "seed": cfg.seed,
            "strategy": cfg.strategy.name, "rebuilt_from_store": True}


def _paid(db: Any, jid: str, stage: str | None) -> dict[str, Any]:
    totals = {"calls_made": 0, "cost_usd": 0.0, "judge_seconds": 0.0, "input_tokens": 0, "output_tokens": 0}
    where, args = ("AND stage = ?", (jid, stage)) if stage else ("", (jid,))
    for table in ("judgments", "scores"):
        made, cost, secs, tin, tout = db.execute(
            f"SELECT COUNT(*), SUM(cost_usd), SUM(seconds), SUM(input_tokens), SUM(output_tokens) FROM {table} "
            f"WHERE judge_id = ? {where}", args).fetchone()
        for key, value in zip(totals, (made, cost, secs, tin, tout)):
            totals[key] += value or 0
    return totals
