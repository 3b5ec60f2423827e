"""``bon merge``: join the K shard folders of one study into the folder the unsharded run writes.

What is merged, and how the unsharded order is restored (so the files compare equal):
prompts and prompt images (identical in every shard: each holds the whole suite), candidates (suite
order, then index), scores (generator, suite order, index), the judgment store (every row of every
shard; rows are keyed by content, so the union is exactly the unsharded store), the preference set
(pairs in suite order, with their images) and each judge's MMRB2 judgment files, picks (judge,
generator, suite order). Accuracies and results are then recomputed from the merged files and the
analysis runs once over all prompts. No judge, generator or verifier is called.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from bon.config import StudyConfig, parse_config
from bon.content import append_jsonl, read_jsonl
from bon.errors import BonError
from bon.runfolder import RunFolder, write_text
from bon.shards import parse_shard
from bon.store import JudgmentStore
from bon.study import analyse, record_config, recorded_study, shared_grader_flags, task_accuracy

# Settings that may differ between shards of one study (where they ran, how far, with what).
PER_SHARD_KEYS = ("out", "shard", "max_calls", "retry_missing", "executor")


def merge_runs(dirs: list[Path], out: Path):
    """Merge shard folders into ``out`` and analyse it; returns the :class:`bon.study.StudyOutcome`."""
    shards = _read_shards(dirs)
    cfg = _merged_config(shards, out)
    if any(Path(out).resolve() == Path(d).resolve() for d in dirs):
        raise BonError(f"{out}: the merged folder must not be one of the shard folders")
    run = RunFolder(Path(out))
    record_config(run, cfg)
    folders = [RunFolder(Path(d)) for d in dirs]
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
    return _analyse_merged(run, cfg, shards, order, pair_counts)


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
        recorded = json.loads(stats.read_text(encoding="utf-8"))
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
    bon (without the later cost or runtime columns) merges too, its missing columns left empty."""
    JudgmentStore(target).close()  # creates the schema
    db = sqlite3.connect(target, isolation_level=None)
    try:
        for src in sources:
            if not src.exists():
                continue
            db.execute("ATTACH DATABASE ? AS shard", (str(src),))
            tables = [name for (name,) in db.execute("SELECT name FROM shard.sqlite_master WHERE type = 'table'")]
            ours = {name for (name,) in db.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
            db.execute("BEGIN IMMEDIATE")
            for table in tables:  # every table the store has (judges, judgments, scores, and any later ones)
                if table in ours and not table.startswith("sqlite_"):
                    theirs = {row[1] for row in db.execute(f'PRAGMA shard.table_info("{table}")')}
                    columns = ", ".join(f'"{c}"' for (_, c, *_) in db.execute(f'PRAGMA main.table_info("{table}")') if c in theirs)
                    db.execute(f'INSERT OR IGNORE INTO main."{table}" ({columns}) SELECT {columns} FROM shard."{table}"')
            db.execute("COMMIT")
            db.execute("DETACH DATABASE shard")
    finally:
        db.close()


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
    picks = [p for s in shards for _, p in read_jsonl(_study_file(s["dir"], "picks"))]
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
