"""Deterministic prompt shards: ``--shard I/K`` runs the I-th of K slices of a study's prompts.

Shard membership is by position in the suite as written to ``prompts.jsonl`` (every shard folder holds
the whole suite, so membership never changes on resume): the Best-of-N prompts and the held-out
preference-set prompts are each striped ``i % K == I``, so every shard gets a balanced share of both.
Each shard then generates, verifies, builds the preference set from, and judges only its own prompts;
``bon merge`` joins the K folders into the folder the unsharded run would have written.
"""

from __future__ import annotations

from bon.config import parse_shard  # noqa: F401  (the config's shard: key is read there)
from bon.content import Prompt


def shard_prompts(prompts: list[Prompt], shard: str | None) -> list[Prompt]:
    """The prompts of one shard, in suite order (all of them when ``shard`` is None)."""
    parsed = parse_shard(shard)
    if parsed is None:
        return prompts
    from bon.stages.prompts import split

    index, count = parsed
    keep = {id(p) for group in split(prompts) for p in group[index::count]}
    return [p for p in prompts if id(p) in keep]

