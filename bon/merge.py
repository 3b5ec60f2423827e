"""``bon merge``: join the K shard folders of one study into the folder the unsharded run writes.

What is merged, and how the unsharded order is restored (so the files compare equal):
prompts and prompt images (identical in every shard: each holds the whole suite), candidates (suite
order, then index), scores (generator, suite order, index), the judgment store (every row of every
shard; rows are keyed by content, so the union is exactly the unsharded store), the preference set
(pairs in suite order, with their images) and each judge's MMRB2 judgment files, picks (judge,
generator, suite order). Accuracies and results are then recomputed from the merged files and the
analysis runs once over all prompts. No judge, generator or verifier is called.

Nothing is written before every shard has been read and checked (``bon.shards``: each a complete,
finished slice of the same study made by the same plugins, no prompt or pair in two shards); a refusal
is one line naming the shard's file.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from bon.config import StudyConfig, parse_config
from bon.content import append_jsonl, read_jsonl
from bon.errors import BonError
from bon.runfolder import RunFolder, write_text
from bon.runlock import target_lock, writer_lock
from bon.shards import (ShardView, check_candidates, check_disjoint, check_picks, check_preference_set, check_same_makers,
                        check_scores, check_slice, check_store, parse_shard, read_stats_object)
from bon.store import JudgmentStore, connect_read_only
from bon.recorded import recorded_study
from bon.study import FROZEN_KEYS, analyse, record_config, shared_grader_flags, task_accuracy

# Settings that may differ between shards of one study (where they ran, how far, with what).
PER_SHARD_KEYS = ("out", "shard", "max_calls", "retry_missing", "executor")


def merge_runs(dirs: list[Path], out: Path):
    """Merge shard folders into ``out`` and analyse it; returns the :class:`bon.study.StudyOutcome`.

    Every shard is read and checked completely first (:func:`check_shards`); the merged folder is then
    built in a temporary folder beside ``out`` and renamed into place at the end, so a failed merge
    leaves nothing half-written. The shards are only read (a read-only shard merges too)."""
    out = Path(out)
    if any(out.resolve() == Path(d).resolve() for d in dirs):
        raise BonError(f"{out}: the merged folder must not be one of the shard folders")
    shards = _read_shards(dirs)
    cfg = _merged_config(shards, out)
    check_shards(shards, cfg)
    with target_lock(out, "bon merge"):  # one merge into ``out`` at a time, even before ``out`` exists
        _check_target(out, cfg)
        building = out.parent / f".{out.name}.merging-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        try:  # an earlier merge being replaced is a run folder: its writer lock is held while it is replaced
            with writer_lock(out, "bon merge") if out.is_dir() else nullcontext():
                order, pair_counts = _merge_into(RunFolder(building), dirs, cfg)
                _replace(building, out)
        finally:
            shutil.rmtree(building, ignore_errors=True)
        try:  # analysed where it lies, so the report names the merged folder
            return _analyse_merged(RunFolder(out, existing=True), cfg, shards, order, pair_counts)
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)  # a merge is whole or absent
            raise


def _merge_into(run: RunFolder, dirs: list[Path], cfg: StudyConfig) -> tuple[dict[str, int], dict[str, int]]:
    """The merged data files in ``run``; returns the suite order and the pairs per task."""
    record_config(run, cfg)
    folders = [RunFolder(Path(d), existing=True) for d in dirs]
    order = _merge_prompts(folders, run)
    labels = [g.label for g in cfg.generators]
    for label in labels:
        _merge_jsonl([f.candidates(label) for f in folders], run.candidates(label),
                     key=lambda r: (r["prompt_id"], int(r["index"])),
                     sort=lambda r: (order[r["prompt_id"]], int(r["index"])))
        _copy_tree([f.candidates_dir(label) / "images" for f in folders], run.candidates_dir(label) / "images")
    for name in sorted({p.name for f in folders for p in f.root.glob("scores*.jsonl")}):
        _merge_jsonl([f.root / name for f in folders], run.root / name,
                     key=lambda r: (r["generator"], r["prompt_id"], int(r["index"])),
                     sort=lambda r: (_rank(labels, r["generator"]), order[r["prompt_id"]], int(r["index"])))
    _merge_stores([f.store for f in folders], run.store)
    pair_counts = _merge_preference_set(folders, run, order, [j.label for j in cfg.judges])
    return order, pair_counts


def check_shards(shards: list[dict[str, Any]], cfg: StudyConfig) -> None:
    """Everything the merge reads, checked before anything is written: each shard's files complete and
    of its own slice of the suite, its store readable and holding what it paid for, the same plugins
    in every shard, no prompt or pair in two shards. One line naming the shard's file otherwise."""
    from bon.content import load_prompts

    judges, generators = [j.label for j in cfg.judges], [g.label for g in cfg.generators]
    views = []
    for s in shards:
        folder = RunFolder(s["dir"], existing=True)
        view = ShardView(s["dir"], s["study"], s["stats"], s["shard"])
        if views:
            check_same_makers(views[0], view)
        prompts = load_prompts(folder.prompts) if folder.prompts.exists() else []
        if not prompts:
            raise BonError(f"{folder.prompts}: missing or empty (shard {s['dir']})")
        suite = {p.id for p in prompts}
        check_slice(view, prompts)
        for gen in generators:
            check_candidates(view, folder, gen, cfg.n, suite)
        check_scores(view, folder.scores, generators, cfg.n, suite)
        s["picks"] = check_picks(view, folder.picks, judges, generators, cfg.n, suite)
        check_preference_set(view, folder, judges)
        check_store(view, folder.store, judges)
        views.append(view)
    check_disjoint(views)


def _check_target(out: Path, cfg: StudyConfig) -> None:
    """``out`` is new, empty, or an earlier merge of the same study (which the new one replaces)."""
    if out.exists() and not out.is_dir():
        raise BonError(f"{out}: exists and is not a folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    config = RunFolder(out, existing=True).config
    if not config.exists():
        raise BonError(f"{out}: not empty and not a run folder; merge into a new folder")
    old = recorded_study(config)
    wanted = cfg.as_dict()
    changed = [k for k in FROZEN_KEYS if k != "shard" and old.get(k) != wanted.get(k)]
    if changed:
        raise BonError(f"{config}: this folder holds a study with other {', '.join(changed)}; merge into a new folder")


def _replace(building: Path, out: Path) -> None:
    """Move the finished merge into place (an earlier merge in ``out`` is replaced)."""
    if out.is_dir():
        old = out.parent / f".{out.name}.replaced-{os.getpid()}"
        os.replace(out, old)
        os.replace(building, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(building, out)


def _read_shards(dirs: list[Path]) -> list[dict[str, Any]]:
    """Each folder's recorded study; refuses non-studies, unfinished shards and gaps or repeats in I/K."""
    if len(dirs) < 1:
        raise BonError("bon merge: name at least one shard folder")
    shards = []
    for d in dirs:
        config, stats = _study_file(d, "config"), _study_file(d, "stats")
        if not config.exists():
            raise BonError(f"{d}: not a study folder (no config.yaml)")
        study = recorded_study(config)
        if not stats.exists():
            raise BonError(f"{d}: this shard has not finished (no stats.json); rerun its `bon run` first")
        recorded = read_stats_object(stats)
        if recorded.get("stopped"):
            raise BonError(f"{d}: this shard stopped early ({recorded['stopped']}); rerun it to finish first")
        shards.append({"dir": Path(d), "study": study, "stats": recorded,
                       "shard": parse_shard(study.get("shard"), where=f"{config}: shard") or (0, 1)})
    counts = {s["shard"][1] for s in shards}
    indices = sorted(s["shard"][0] for s in shards)
    if len(counts) != 1 or indices != list(range(next(iter(counts)))):
        got = ", ".join(f"{s['shard'][0]}/{s['shard'][1]}" for s in shards)
        raise BonError(f"bon merge: expected shards 0/K .. K-1/K exactly once each, got {got}")
    return shards


def _study_file(folder: Path, name: str) -> Path:
    """A shard folder's file by its run-folder name (``config``, ``stats``, ``picks``...), without
    creating or requiring the folder."""
    return getattr(RunFolder(Path(folder), existing=True), name) if Path(folder).is_dir() else Path(folder) / name


def _merged_config(shards: list[dict[str, Any]], out: Path) -> StudyConfig:
    first = shards[0]
    common = {k: v for k, v in first["study"].items() if k not in PER_SHARD_KEYS}
    for other in shards[1:]:
        theirs = {k: v for k, v in other["study"].items() if k not in PER_SHARD_KEYS}
        differing = sorted(k for k in set(common) | set(theirs) if common.get(k) != theirs.get(k))
        if differing:
            raise BonError(f"{other['dir']}: a different study from {first['dir']} "
                           f"(other {', '.join(differing)}); merge only shards of one study")
    raw = {k: v for k, v in common.items() if v is not None}
    return parse_config({**raw, "out": str(out)}, where=str(_study_file(first["dir"], "config")))


def _merge_prompts(folders: list[RunFolder], run: RunFolder) -> dict[str, int]:
    """Copy the suite (the same in every shard) and its images; returns prompt id -> suite position."""
    text = folders[0].prompts.read_text(encoding="utf-8")
    for f in folders[1:]:
        if f.prompts.read_text(encoding="utf-8") != text:
            raise BonError(f"{f.prompts}: differs from {folders[0].prompts}; merge only shards of one study")
    write_text(run.prompts, text)
    _copy_tree([f.inputs for f in folders], run.inputs)
    return {rec["id"]: n for n, (_, rec) in enumerate(read_jsonl(run.prompts))}


def _merge_jsonl(sources: list[Path], target: Path, key, sort) -> None:
    """Union of JSONL records (the last record of a key wins, as on resume), written in ``sort`` order."""
    records: dict[Any, dict] = {}
    for path in sources:
        for _, rec in read_jsonl(path):
            records[key(rec)] = rec
    target.unlink(missing_ok=True)
    append_jsonl(target, sorted(records.values(), key=sort))


def _copy_tree(sources: list[Path], target: Path) -> None:
    for src in sources:
        if src.is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)


def _merge_stores(sources: list[Path], target: Path) -> None:
    """Every judge, judgment and pointwise score of every shard store in one store. Rows are keyed by
    content, so a key that two shards (or an earlier merge) hold is kept once (INSERT OR IGNORE): the
    merged store counts each answer once. Columns are matched by name, so a shard written by an older
    bon (without the later cost or runtime columns) merges too, its missing columns left empty. Each
    shard store is opened read-only (a read-only shard folder merges too)."""
    JudgmentStore(target).close()  # creates the schema
    db = sqlite3.connect(target, isolation_level=None)
    try:
        ours = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for src in sources:
            shard = connect_read_only(src)
            try:
                tables = [name for (name,) in shard.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                db.execute("BEGIN IMMEDIATE")
                for table in tables:  # every table the store has (judges, judgments, scores, and any later ones)
                    if table in ours and not table.startswith("sqlite_"):
                        _copy_rows(shard, db, table)
                db.execute("COMMIT")
            finally:
                shard.close()
    finally:
        db.close()


def _copy_rows(source: sqlite3.Connection, target: sqlite3.Connection, table: str) -> None:
    theirs = {row[1] for row in source.execute(f'PRAGMA table_info("{table}")')}
    columns = [c for (_, c, *_) in target.execute(f'PRAGMA table_info("{table}")') if c in theirs]
    names = ", ".join(f'"{c}"' for c in columns)
    rows = source.execute(f'SELECT {names} FROM "{table}"')
    while True:
        chunk = rows.fetchmany(5000)
        if not chunk:
            break
        target.executemany(f'INSERT OR IGNORE INTO "{table}" ({names}) VALUES ({", ".join("?" * len(columns))})', chunk)


def _merge_preference_set(folders: list[RunFolder], run: RunFolder, order: dict[str, int], judges: list[str]) -> dict[str, int]:
    """Pairs of every shard per task file in suite order, their images, and each judge's judgment files."""
    from bon.mmrb2 import load_judgments, write_judgments
    from bon.runfolder import write_json
    from bon.tasks import TASKS

    pair_counts: dict[str, int] = {}
    for task_def in TASKS:
        task, task_file = task_def.name, task_def.file
        pairs = [p for f in folders if (f.mmrb2 / task_file).exists()
                 for p in json.loads((f.mmrb2 / task_file).read_text(encoding="utf-8"))["pairs"]]
        if not pairs:
            continue
        pairs.sort(key=lambda p: order[p["prompt_metadata"]["id"]])  # stable: a prompt's pairs keep their order
        write_json(run.mmrb2 / task_file, {"pairs": pairs})
        pair_counts[task] = len(pairs)
        for judge in judges:
            judged: dict[str, Any] = {}
            for f in folders:
                path = f.judgment_file(judge, task_file)
                if path.exists():
                    judged.update(load_judgments(path))
            write_judgments(run.judgment_file(judge, task_file), {p["id"]: judged[p["id"]] for p in pairs if p["id"] in judged})
    for sub in ("images", "input_images"):
        _copy_tree([f.mmrb2 / sub for f in folders], run.mmrb2 / sub)
    return pair_counts


def _analyse_merged(run: RunFolder, cfg: StudyConfig, shards: list[dict[str, Any]], order: dict[str, int], pair_counts: dict[str, int]):
    judges = [j.label for j in cfg.judges]
    generators = [g.label for g in cfg.generators]
    picks = [p for s in shards for p in s["picks"]]
    picks.sort(key=lambda p: (_rank(judges, p["judge"]), _rank(generators, p["generator"]), order[p["prompt_id"]]))
    write_text(run.picks, "".join(json.dumps(p) + "\n" for p in picks))
    judge_stats = _sum_stats([s["stats"].get("judges", {}) for s in shards])
    for judge in judges:
        for task in pair_counts:
            tasks = judge_stats.setdefault(judge, {}).setdefault("mmrb2", {}).setdefault("tasks", {})
            tasks[task] = task_accuracy(run, judge, task)
    timings = _sum_stats([s["stats"].get("timings_s", {}) for s in shards])  # summed over shards: compute time, not wall
    provenance = shards[0]["stats"].get("identities") or {}
    return analyse(run, cfg, judge_stats, pair_counts, None, provenance, {"timings_s": timings},
                   {"shared_grader": shared_grader_flags(cfg, provenance)})  # the leakage guard needs it merged too


def _rank(names: list[str], name: str) -> int:
    return names.index(name) if name in names else len(names)


def _sum_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Numbers summed over shards, nested mappings merged the same way, anything else from the first."""
    total: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict):
                total[key] = _sum_stats([total.get(key, {}), value])
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and key in total:
                total[key] = round(total[key] + value, 6)
            else:
                total.setdefault(key, value)
    return total
