"""Deterministic prompt shards: ``--shard I/K`` runs the I-th of K slices of a study's prompts.

Shard membership is by position in the suite as written to ``prompts.jsonl`` (every shard folder holds
the whole suite, so membership never changes on resume): the Best-of-N prompts and the held-out
preference-set prompts are each striped ``i % K == I``, so every shard gets a balanced share of both.
Each shard then generates, verifies, builds the preference set from, and judges only its own prompts;
``bon merge`` joins the K folders into the folder the unsharded run would have written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bon.content import Prompt
from bon.errors import BonError, first_line


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



# --- checking a finished shard before it is merged ----------------------------------------------
#
# ``bon merge`` reads every shard completely before it writes anything. Each check below refuses with
# one line naming the shard's file and what is wrong with it, so a damaged or foreign shard never
# becomes wrong numbers in the merged folder.


@dataclass
class ShardView:
    """What ``bon merge`` reads of one shard folder, checked."""

    dir: Path
    study: dict[str, Any]                 # the ``study`` section of config.yaml
    stats: dict[str, Any]                 # stats.json
    shard: tuple[int, int]
    bon_ids: list[str] = field(default_factory=list)   # this shard's Best-of-N prompts, suite order
    pref_ids: list[str] = field(default_factory=list)  # its held-out preference-set prompts
    pair_ids: set[str] = field(default_factory=set)


def read_stats_object(path: Path) -> dict[str, Any]:
    """stats.json as a JSON object, or a one-line error naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BonError(f"{path}: missing") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise BonError(f"{path}: not readable JSON ({first_line(str(exc), 120)})") from None
    if not isinstance(data, dict):
        raise BonError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def check_slice(view: ShardView, prompts: list[Prompt]) -> None:
    """The shard's recorded slice of the suite (the prompts it must hold, and only those)."""
    from bon.stages.prompts import split

    label = f"{view.shard[0]}/{view.shard[1]}"
    recorded = view.stats.get("shard")
    if (recorded or None) != (view.study.get("shard") or None):
        raise BonError(f"{view.dir / 'stats.json'}: made by shard {recorded or 'none'}, but config.yaml says shard {label}")
    mine = shard_prompts(prompts, view.study.get("shard"))
    bon, pref = split(mine)
    view.bon_ids, view.pref_ids = [p.id for p in bon], [p.id for p in pref]


def check_candidates(view: ShardView, folder: Any, generator: str, n: int, suite: set[str]) -> None:
    """N candidates (0..N-1) of every prompt of the slice, none of another shard's, images on disk."""
    from bon.content import load_candidates

    path = folder.candidates(generator)
    if not path.exists():
        raise BonError(f"{path}: missing (shard {view.dir})")
    own, found = set(view.bon_ids) | set(view.pref_ids), {}
    for cand in load_candidates(path):
        _own_prompt(view, path, cand.prompt_id, own, suite)
        if not 0 <= cand.index < n:
            raise BonError(f"{path}: candidate {cand.index} of prompt {cand.prompt_id} is outside 0..{n - 1}")
        found[(cand.prompt_id, cand.index)] = cand
    for pid in sorted(own):
        lacking = [k for k in range(n) if (pid, k) not in found]
        if lacking:
            raise BonError(f"{path}: prompt {pid} lacks candidate {lacking[0]} (of N = {n}); the shard is unfinished or damaged")
    for cand in found.values():
        for image in cand.content.images:
            if image.path is not None and not Path(image.path).is_file():
                raise BonError(f"{image.path}: candidate image missing (shard {view.dir})")


def _own_prompt(view: ShardView, path: Path, pid: str, own: set[str], suite: set[str]) -> None:
    if pid not in suite:
        raise BonError(f"{path}: prompt {pid!r:.80} is not in the suite (prompts.jsonl)")
    if pid not in own:
        raise BonError(f"{path}: prompt {pid} belongs to another shard than {view.shard[0]}/{view.shard[1]}; "
                       "a copy or relabelled shard?")


def check_scores(view: ShardView, path: Path, generators: list[str], n: int, suite: set[str]) -> None:
    """A verifier score for every candidate of the slice, and none of another shard's."""
    from bon.content import read_jsonl

    if not path.exists():
        raise BonError(f"{path}: missing (shard {view.dir})")
    own, keys = set(view.bon_ids) | set(view.pref_ids), set()
    for n_line, rec in read_jsonl(path):
        try:
            key = (str(rec["generator"]), str(rec["prompt_id"]), int(rec["index"]))
        except (KeyError, TypeError, ValueError):
            raise BonError(f"{path}:{n_line}: expected generator, prompt_id and an integer index") from None
        _own_prompt(view, path, key[1], own, suite)
        keys.add(key)
    for gen in generators:
        for pid in sorted(own):
            lacking = [k for k in range(n) if (gen, pid, k) not in keys]
            if lacking:
                raise BonError(f"{path}: no score for candidate {lacking[0]} of {gen} on prompt {pid}; the shard is "
                               "unfinished or damaged")


def check_picks(view: ShardView, path: Path, judges: list[str], generators: list[str], n: int,
                suite: set[str]) -> list[dict[str, Any]]:
    """One pick per judge, generator and Best-of-N prompt of the slice; returns them."""
    from bon.content import read_jsonl

    if not path.exists():
        raise BonError(f"{path}: missing (shard {view.dir})")
    picks, seen = [], set()
    for n_line, rec in read_jsonl(path, torn_tail_ok=False):  # written whole: a cut line is damage
        where = f"{path}:{n_line}"
        key = (rec.get("judge"), rec.get("generator"), rec.get("prompt_id"))
        if key[0] not in judges or key[1] not in generators:
            raise BonError(f"{where}: judge {key[0]!r:.60} / generator {key[1]!r:.60} is not one of the study's")
        _own_prompt(view, where, str(key[2]), set(view.bon_ids), suite)
        index = rec.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise BonError(f"{where}: pick index {index!r:.40} is not a candidate 0..{n - 1}")
        if key in seen:
            raise BonError(f"{where}: a second pick of {key[0]} for {key[1]} on prompt {key[2]}")
        seen.add(key)
        picks.append(rec)
    for judge in judges:
        for gen in generators:
            lacking = [pid for pid in view.bon_ids if (judge, gen, pid) not in seen]
            if lacking:
                raise BonError(f"{path}: no pick of {judge} for {gen} on prompt {lacking[0]} ({len(lacking)} missing); "
                               "the shard is unfinished or damaged")
    return picks


def check_preference_set(view: ShardView, folder: Any, judges: list[str]) -> None:
    """The shard's preference pairs (as many as stats.json records, all of its own prompts, images on disk)
    and every judge's judgment file of every pair."""
    from bon.mmrb2 import load_judgments, load_pairs
    from bon.tasks import parse_task

    counts = view.stats.get("preference_pairs") or {}
    if not isinstance(counts, dict):
        raise BonError(f"{view.dir / 'stats.json'}: preference_pairs must be an object")
    for task, count in counts.items():
        task_file = parse_task(task).file
        path = folder.mmrb2 / task_file
        pairs = load_pairs(path) if path.exists() else []
        if len(pairs) != count:
            raise BonError(f"{path}: holds {len(pairs)} pairs, stats.json records {count} (shard {view.dir})")
        for pair in pairs:
            if str(pair.prompt_metadata.get("id")) not in view.pref_ids:
                raise BonError(f"{path}: pair {pair.id} is of prompt {pair.prompt_metadata.get('id')!r:.60}, not one "
                               f"of shard {view.shard[0]}/{view.shard[1]}'s")
            _check_pair_images(path, pair, folder.mmrb2)
            view.pair_ids.add(pair.id)
        for judge in judges:
            judged_path = folder.judgment_file(judge, task_file)
            if not judged_path.exists():
                raise BonError(f"{judged_path}: missing (judge {judge}, shard {view.dir})")
            judged = load_judgments(judged_path)
            lacking = [p.id for p in pairs if p.id not in judged]
            if lacking:
                raise BonError(f"{judged_path}: no judgment of pair {lacking[0]} ({len(lacking)} missing)")


def _check_pair_images(path: Path, pair: Any, root: Path) -> None:
    for folder, content in (("input_images", pair.prompt_content or []), ("images", pair.response_a), ("images", pair.response_b)):
        for kind, value in content:
            if kind != "image":
                continue
            rel = value[len(folder) + 1:] if value.startswith(folder + "/") else value
            if not (root / folder / rel).is_file():
                raise BonError(f"{path}: pair {pair.id}: image {root / folder / rel} missing")


def check_store(view: ShardView, path: Path, judges: list[str]) -> None:
    """The shard's store is readable and holds at least the answers its stats.json says it paid for."""
    from bon.store import judge_id, read_only_store

    if not path.exists():
        raise BonError(f"{path}: missing (shard {view.dir})")
    identities = ((view.stats.get("identities") or {}).get("judges") or {})
    with read_only_store(path) as db:
        for judge in judges:
            identity = identities.get(judge)
            paid = ((view.stats.get("judges") or {}).get(judge) or {}).get("calls_made")
            if not isinstance(identity, dict) or not isinstance(paid, int):
                raise BonError(f"{view.dir / 'stats.json'}: no identity or calls of judge {judge}")
            jid = judge_id(identity)
            held = sum(db.execute(f"SELECT COUNT(*) FROM {table} WHERE judge_id = ?", (jid,)).fetchone()[0]
                       for table in ("judgments", "scores"))
            if held < paid:
                raise BonError(f"{path}: holds {held} answers of judge {judge}, but stats.json records {paid} calls made "
                               f"(shard {view.dir}); the store is damaged or another one")


def check_same_makers(first: ShardView, other: ShardView) -> None:
    """Judges, generators and verifier of the same identity (model, version, settings) in every shard."""
    mine, theirs = (v.stats.get("identities") or {} for v in (first, other))
    for kind in ("judges", "generators"):
        for label in sorted(set(mine.get(kind) or {}) | set(theirs.get(kind) or {})):
            if (mine.get(kind) or {}).get(label) != (theirs.get(kind) or {}).get(label):
                raise BonError(f"{other.dir / 'stats.json'}: {kind[:-1]} {label} differs from {first.dir}'s (version or "
                               "settings); merge only shards made by the same plugins")
    if mine.get("verifier") != theirs.get("verifier"):
        raise BonError(f"{other.dir / 'stats.json'}: the verifier differs from {first.dir}'s (version or settings)")


def check_disjoint(views: list[ShardView]) -> None:
    """No prompt or preference pair in two shards."""
    owner: dict[str, Path] = {}
    for view in views:
        for item in [*view.bon_ids, *view.pref_ids, *(f"pair {p}" for p in sorted(view.pair_ids))]:
            if item in owner:
                raise BonError(f"{view.dir}: {item} is also in shard {owner[item]}; merge each shard once")
            owner[item] = view.dir
