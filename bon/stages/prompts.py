"""Stage 1: the prompt suites (Best-of-N prompts and held-out preference-set prompts), written once."""

from __future__ import annotations

from bon import suites
from bon.config import StudyConfig
from bon.content import Prompt, jsonl_text, load_prompts
from bon.io import atomic_write
from bon.runfolder import RunFolder

PREFERENCE_PREFIX = "pref-"


def build_prompts(cfg: StudyConfig) -> list[Prompt]:
    """The study's prompts (Best-of-N and held-out), in memory: a bad suite fails before anything is written."""
    where = f"{cfg.source}: suite"
    prompts = suites.build(cfg.suite, cfg.tasks, cfg.seed, where)
    if cfg.suite.get("name", "synthetic") == "synthetic":
        held_out = {**cfg.suite, "per_task": cfg.preference.prompts_per_task, "id_prefix": PREFERENCE_PREFIX}
        prompts += suites.build(held_out, cfg.tasks, cfg.seed + 7919, where)
    return prompts


def prepare_prompts(run: RunFolder, cfg: StudyConfig, built: list[Prompt] | None = None) -> list[Prompt]:
    """Build the suite on the first run (or take ``built``); later runs read it back so every stage
    sees the same prompts."""
    if run.prompts.exists():
        return load_prompts(run.prompts)
    prompts = build_prompts(cfg) if built is None else built
    atomic_write(run.prompts, jsonl_text(p.to_json(run.root, run.inputs) for p in prompts))
    return load_prompts(run.prompts)


def split(prompts: list[Prompt]) -> tuple[list[Prompt], list[Prompt]]:
    """(Best-of-N prompts, preference-set prompts). A user's suite marks the latter with split: preference."""
    pref = [p for p in prompts if p.id.startswith(PREFERENCE_PREFIX) or p.metadata.get("split") == "preference"]
    chosen = {id(p) for p in pref}
    return [p for p in prompts if id(p) not in chosen], pref
