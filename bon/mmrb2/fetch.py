"""``bon mmrb2 fetch``: the MMRB2 release from the Hugging Face hub (or a local copy of it), written
in the official layout.

The hub copy (``rl-research/multimodal-rewardbench-2``, one config per task, split ``test``) holds
each side of a pair as text with ``<image_N>`` placeholders plus a list of images. The conversion
follows the official converter (``benchmark/build_from_hf.py``), so judges see the pairs the official
build holds: placeholders take the images in the order they appear, whatever their N; text without
placeholders gets all its images appended; images are saved losslessly as PNG under ``images/``
(responses) and ``input_images/`` (prompts), named ``<pair id>_<prompt|a|b>_<k>.png`` and referred to as
``images/<name>``. The data is CC BY-NC.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

from bon.errors import BonError
from bon.mmrb2.format import load_pairs, write_pairs
from bon.progress import bar, note
from bon.tasks import TASK_NAMES, parse_task

HUB_DATASET = "rl-research/multimodal-rewardbench-2"
PLACEHOLDER = re.compile(r"<image_\d+>")
PNG_MODES = {"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"}  # what PNG stores as is
HOW_TO = (f"download the dataset {HUB_DATASET} (configs {', '.join(TASK_NAMES)}) on a machine with "
          "network access, run `bon mmrb2 fetch --out DIR` there and copy DIR here, or copy the dataset itself "
          "(save_to_disk folders or Parquet files) and run `bon mmrb2 fetch --from DIR --out DIR`")


def split_content(text: str | None, images: list[Any] | None, out: Path, folder: str, stem: str) -> list[list[str]]:
    """Text with ``<image_N>`` placeholders + images -> ``[[kind, value], ...]``, images saved as PNG.

    As in the official converter: the k-th placeholder takes the k-th image (N is ignored), extra
    placeholders are dropped, and only text without any placeholder gets its images appended.
    """
    images = list(images or [])
    text = text or ""
    items: list[list[str]] = []
    placed = 0

    def add_text(chunk: str) -> None:
        if chunk.strip():
            items.append(["text", chunk.strip()])

    pos = 0
    for match in PLACEHOLDER.finditer(text):
        add_text(text[pos : match.start()])
        if placed < len(images):
            items.append(["image", _save_image(images[placed], out, folder, f"{stem}_{placed}.png")])
            placed += 1
        pos = match.end()
    add_text(text[pos:])
    if not PLACEHOLDER.search(text):
        items += [["image", _save_image(img, out, folder, f"{stem}_{k}.png")] for k, img in enumerate(images)]
    return items


def _save_image(image: Any, out: Path, folder: str, name: str) -> str:
    """Save losslessly; returns the path as the official files spell it (``images/<name>``)."""
    from PIL import Image

    if isinstance(image, dict):  # an undecoded datasets Image: {"bytes": ..., "path": ...}
        if not image.get("bytes"):
            raise BonError(f"{name}: image has no bytes in the dataset copy")
        image = Image.open(io.BytesIO(image["bytes"]))
    if image.mode not in PNG_MODES:
        image = image.convert("RGBA" if "A" in image.mode else "RGB")
    path = out / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG")
    return f"{folder}/{name}"


def _json_field(row: dict, key: str, default: Any) -> Any:
    value = row.get(key)
    if isinstance(value, str) and value:
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return default
    return value if value is not None else default


def _file_stem(pair_id: str) -> str:
    """The pair id, as the official converter names images; characters that would leave the folder are replaced."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", pair_id)
    return safe if safe.strip(".") else "_" + safe


def row_to_pair(row: dict[str, Any], out: Path) -> dict[str, Any]:
    """One hub row -> one official pair record, its images written under ``out``."""
    if row.get("pair_id") in (None, ""):
        raise BonError(f"a dataset row has no pair_id (columns: {', '.join(sorted(row))[:200]})")
    pid = str(row["pair_id"])
    stem = _file_stem(pid)

    def side(key: str, folder: str, suffix: str) -> list[list[str]]:
        return split_content(row.get(f"{key}_text"), row.get(f"{key}_images"), out, folder, f"{stem}_{suffix}")

    return {
        "id": pid,
        "prompt_source": row.get("prompt_source", ""),
        "prompt_content": side("prompt", "input_images", "prompt"),
        "prompt_metadata": _json_field(row, "prompt_metadata", {}),
        "response_a": {"model_name": row.get("response_a_model", ""), "response_content": side("response_a", "images", "a")},
        "response_b": {"model_name": row.get("response_b_model", ""), "response_content": side("response_b", "images", "b")},
        "chosen": str(row.get("chosen") or "").upper(),
        "human_annotations": _json_field(row, "human_annotations", None),
    }


def fetch(out: Path, tasks: Iterable[str] = TASK_NAMES, dataset: str = HUB_DATASET, source: Path | None = None) -> dict[str, int]:
    """Convert each task from the hub (or from ``source``, a local copy); returns pairs per task.

    A task file already present is kept (delete it to refetch); it is written only when its task
    converted completely, so an interrupted fetch resumes with the task it stopped in.
    """
    out, wanted = Path(out), [parse_task(t) for t in tasks]
    todo = [t for t in wanted if not (out / t.file).exists()]
    local = {t: _local_rows(Path(source), t.name) for t in todo} if source is not None else {}  # all found first
    for folder in ("images", "input_images"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for task in wanted:
        if task not in todo:
            counts[task.name] = len(load_pairs(out / task.file))
            continue
        total, rows = local[task] if source is not None else _hub_rows(dataset, task.name)
        pairs, unplaced = [], 0
        with bar(f"mmrb2 fetch {task.name}", total) as progress:
            for row in rows:
                pair = row_to_pair(row, out)
                pairs.append(pair)
                unplaced += _image_count(row) - _image_count(pair)
                progress.advance()
        write_pairs(out / task.file, pairs)
        counts[task.name] = len(pairs)
        if unplaced:
            note(f"{task.name}: {unplaced} images had no placeholder in text that has placeholders; "
                 "left out, as the official converter does")
    return counts


def _image_count(record: dict[str, Any]) -> int:
    if "pair_id" in record:  # a hub row
        return sum(len(record.get(f"{k}_images") or []) for k in ("prompt", "response_a", "response_b"))
    contents = [record["prompt_content"], record["response_a"]["response_content"], record["response_b"]["response_content"]]
    return sum(kind == "image" for content in contents for kind, _ in content)


# --- where the rows come from ---------------------------------------------------------------------


def _hub_rows(dataset: str, config: str) -> tuple[int, Iterable[dict[str, Any]]]:
    datasets = _datasets()
    try:
        rows = datasets.load_dataset(dataset, config, split="test")
    except Exception as exc:  # offline, unknown repo, auth: all end the same way for the user
        raise BonError(f"cannot load {dataset} ({config}) from the hub ({type(exc).__name__}); {HOW_TO}") from None
    return len(rows), rows


def _local_rows(root: Path, config: str) -> tuple[int, Iterable[dict[str, Any]]]:
    """Rows of one config from a local copy of the hub dataset, in any of the shapes it is kept in:
    a ``save_to_disk`` folder of all configs (a DatasetDict keyed by config), one per config
    (``ROOT/t2i``, a Dataset or a DatasetDict with a ``test`` split), or Parquet files under
    ``ROOT/t2i/`` or named ``t2i-*.parquet`` / ``t2i.parquet`` (as on the hub)."""
    if not root.exists():
        raise BonError(f"{root}: local copy of {HUB_DATASET} not found")
    if _is_saved_dataset(root):
        saved = _load_saved(root)
        if isinstance(saved, dict) and config in saved:
            return len(saved[config]), saved[config]
    if _is_saved_dataset(root / config):
        data = _load_saved(root / config)
        if isinstance(data, dict):
            if "test" not in data and len(data) != 1:
                raise BonError(f"{root / config}: saved dataset has splits {', '.join(data)}, no 'test'")
            data = data["test"] if "test" in data else next(iter(data.values()))
        return len(data), data
    files = _parquet_files(root, config)
    if not files:
        raise BonError(f"{root}: no copy of config {config!r} (expected {config}/ saved with save_to_disk, "
                       f"{config}/*.parquet or {config}-*.parquet)")
    return _parquet_rows(files)


def _is_saved_dataset(folder: Path) -> bool:
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def _load_saved(folder: Path) -> Any:
    """A ``save_to_disk`` folder; a DatasetDict comes back as a plain dict of Datasets."""
    datasets = _datasets()
    try:
        data = datasets.load_from_disk(str(folder))
    except Exception as exc:  # a damaged or foreign folder
        raise BonError(f"{folder}: not a readable save_to_disk folder ({type(exc).__name__}: {str(exc)[:120]})") from None
    return dict(data) if isinstance(data, datasets.DatasetDict) else data


def _parquet_files(root: Path, config: str) -> list[Path]:
    def belongs(path: Path) -> bool:
        rel = path.relative_to(root)
        return config in rel.parts[:-1] or path.stem == config or re.match(rf"{re.escape(config)}[-_]", path.name) is not None

    return sorted(p for p in root.rglob("*.parquet") if belongs(p))


def _parquet_rows(files: list[Path]) -> tuple[int, Iterator[dict[str, Any]]]:
    """Read Parquet directly (no datasets cache written); images arrive as ``{"bytes", "path"}``."""
    import pyarrow.parquet as pq

    try:
        opened = [pq.ParquetFile(f) for f in files]
    except Exception as exc:  # not Parquet, truncated
        raise BonError(f"{files[0].parent}: unreadable Parquet file ({type(exc).__name__}: {str(exc)[:120]})") from None

    def rows() -> Iterator[dict[str, Any]]:
        for parquet in opened:
            for batch in parquet.iter_batches(batch_size=32):
                yield from batch.to_pylist()

    return sum(p.metadata.num_rows for p in opened), rows()


def _datasets() -> Any:
    from bon.backends import require

    return require("datasets", "bon mmrb2 fetch")
