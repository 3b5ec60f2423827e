"""Deterministic prompt shards: ``--shard I/K`` runs the I-th of K slices of a study's prompts.

Shard membership is by position in the suite as written to ``prompts.jsonl`` (every shard folder holds
the whole suite, so membership never changes on resume): the Best-of-N prompts and the held-out
preference-set prompts are each striped ``i % K == I``, so every shard gets a balanced share of both.
Each shard then generates, verifies, builds the preference set from, and judges only its own prompts;
``bon merge`` joins the K folders into the folder the unsharded run would have written.
"""

from __future__ import annotations

from bon.content import Prompt
from bon.errors import BonError


def parse_shard(text: str | None, where: str = "--shard") -> tuple[int, int] | None:
    """``"I/K"`` -> (I, K) with 0 <= I < K; None stays None."""
    if text is None:
        return None
    index, sep, count = str(text).partition("/")
    try:
        i, k = int(index), int(count)
    except ValueError:
        i, k = -1, 0
    if not sep or k < 1 or not 0 <= i < k:
        raise BonError(f"{where}: expected I/K with 0 <= I < K (e.g. 0/4), got {text!r}")
    return i, k


def shard_prompts(prompts: list[Prompt], shard: str | None) -> list[Prompt]:
    """The prompts of one shard, in suite order (all of them when ``shard`` is None)."""
    parsed = parse_shard(shard)
    if parsed is None:
        return prompts
    from bon.stages.prompts import split

    index, count = parsed
    keep = {id(p) for group in split(prompts) for p in group[index::count]}
    return [p for p in prompts if id(p) in keep]

