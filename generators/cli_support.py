"""``bon generate``: N candidates per prompt of a suite from one generator, into a resumable run folder.

:func:`generate_command` reuses the study's generate stage, so candidates land where a study expects
them (``<out>/candidates/<label>/``), prompts already complete are skipped and one cut off midway is redone. The settings that fix the candidates (generator, options,
seed, N) are recorded in ``<out>/candidates/<label>/generate.json``; resuming with other ones is refused,
except for settings that do not change what is generated (batch size, device placement, API
concurrency and retry settings). The prompts are copied beside the candidates
(``prompts.jsonl`` + ``inputs/``) so the folder stands on its own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bon import registry
from bon.content import Content, ImageItem, Prompt, jsonl_text, load_prompts, read_jsonl
from bon.io import atomic_write
from bon.errors import BonError
from bon.redact import redact
from bon.runfolder import RunFolder, write_json
from bon.stages.generate import generate, load_done

# options that change how fast or where candidates are made, not what they are
RUNTIME_OPTIONS = frozenset({"batch_size", "device", "cpu_offload", "max_concurrency", "retries", "timeout", "label"})


def generate_command(generator_spec: str, options: dict[str, Any], suite: Path, n: int, out: Path,
                     batch_size: int | None = None, seed: int = 0, limit: int | None = None) -> dict[str, Any]:
    """Generate (or finish generating) N candidates per suite prompt; returns a summary for the CLI.

    ``options`` are the generator's options (``--option k=v``, values already parsed); ``label`` among
    them names the candidates' folder (default: the generator's registered name).
    """
    for flag, value in (("--n", n), ("--batch-size", batch_size), ("--limit", limit)):
        if (value is not None or flag == "--n") and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise BonError(f"{flag} must be at least 1, got {value!r}")
    suite = Path(suite)
    if not suite.is_file():
        raise BonError(f"{suite}: suite file not found")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BonError(f"{out}: output path is a file, not a folder")
    prompts = load_prompts(suite)
    if limit is not None:
        prompts = prompts[:limit]
    if not prompts:
        raise BonError(f"{suite}: the suite holds no prompts")

    options = dict(options or {})
    name, _ = registry.parse_spec(generator_spec)
    label = str(options.pop("label", None) or name)
    factory = registry.resolve("generator", name)
    if batch_size is not None:
        named, forwards = registry.option_names(factory)
        if "batch_size" not in named and not forwards:
            raise BonError(f"--batch-size: generator {name!r} does not batch (drop the option)")
        options["batch_size"] = batch_size
    generator = registry.create("generator", generator_spec, name=label, **options)  # options checked before any write
    record = {"generator": generator_spec, "options": options, "seed": seed, "n": n}
    existing = RunFolder(out, existing=True) if out.is_dir() else None
    if existing is not None:
        check_record(existing.candidates_dir(label) / "generate.json", record)

    validate = getattr(generator, "validate", None)
    if callable(validate):
        validate(prompts, n)
    run = RunFolder(out)  # validate, then act: the folder is created (and probed for writing) only now
    record_file = run.candidates_dir(label) / "generate.json"
    write_json(record_file, {**record, "options": redacted(options), "identity": safe_identity(generator)})
    prompts_file = copy_prompts(prompts, run.candidates_dir(label))

    before = set(load_done(run, label, n))
    started = time.perf_counter()
    result = generate(run, generator, prompts, n, seed)
    seconds = time.perf_counter() - started
    missing = sum(1 for cands in result.values() for c in cands if c.provenance.get("missing"))
    skipped = sum(1 for p in prompts if p.id in before)
    return {
        "generator": label,
        "spec": generator_spec,
        "out": str(run.root),
        "candidates": str(run.candidates(label)),
        "prompts_file": str(prompts_file),
        "prompts": len(prompts),
        "n": n,
        "skipped_prompts": skipped,
        "generated_prompts": len(prompts) - skipped,
        "missing_candidates": missing,
        "pending_prompts": len(prompts) - len(result),  # transient failures: a rerun generates them
        "seconds": round(seconds, 2),
    }


def frozen(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "options": {k: v for k, v in record["options"].items() if k not in RUNTIME_OPTIONS}}


def check_record(path: Path, record: dict[str, Any]) -> None:
    if not path.exists():
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # a damaged record: the candidates themselves still decide what is done
    old_f, new_f = frozen({k: old.get(k) for k in record} | {"options": old.get("options") or {}}), frozen(record)
    changed = [k for k in ("generator", "options", "seed", "n") if old_f.get(k) != new_f.get(k)]
    if changed:
        raise BonError(f"{path}: these candidates were generated with other {', '.join(changed)}; "
                       "use a new --out folder or a new label (or the same settings to resume)")


def redacted(options: dict[str, Any]) -> dict[str, Any]:
    """Options as recorded: a value under a key that looks like a secret is never written."""
    def clean(value: Any, key: str = "") -> Any:
        low = key.lower()
        if any(word in low for word in ("api_key", "token", "secret", "password")) and not low.endswith("_env"):
            return "***"
        if isinstance(value, dict):
            return {k: clean(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value
    return redact(clean(options))  # and keys inside URLs or command lines (bon.redact)


def safe_identity(generator: Any) -> Any:
    try:
        return redacted(generator.identity())
    except Exception:  # noqa: BLE001 - identity is informative only
        return {"name": getattr(generator, "name", "?")}


def copy_prompts(prompts: list[Prompt], folder: Path) -> Path:
    """``prompts.jsonl`` (+ ``inputs/``) beside the candidates; rewritten only when the prompt list changed."""
    target = folder / "prompts.jsonl"
    wanted = [p.id for p in prompts]
    if target.exists() and [str(r.get("id")) for _, r in read_jsonl(target)] == wanted:
        return target
    records = []
    for p in prompts:
        items = [ImageItem.from_pil(it.load()) if isinstance(it, ImageItem) else it for it in p.content]
        copy = Prompt(p.id, p.task, Content(items), dict(p.metadata))
        records.append(copy.to_json(folder, folder / "inputs"))
    atomic_write(target, jsonl_text(records))
    return target
