"""``bon mmrb2 fetch``: the MMRB2 release from the Hugging Face hub (or a local copy of it), written
in the official layout.

The hub copy (``rl-research/multimodal-rewardbench-2``, one config per task, split ``test``) holds
each side of a pair as text with ``<image_N>`` placeholders plus a list of images. The conversion
follows the official converter (``benchmark/build_from_hf.py``), so judges see the pairs the official
build holds: placeholders take the images in the order they appear, whatever their N; text without
placeholders gets all its images appended; images are saved losslessly as PNG under ``images/``
(responses) and ``input_images/`` (prompts) and referred to as ``images/<name>``. The data is CC BY-NC.

Only the file names differ from the official build: the official ``<pair id>_<side>_<k>.png`` gives
ids ``x/1`` and ``x_1`` (or a pair of the same id in two tasks) one file, so one pair would show
another's image. Here a name is a readable slug of the id plus a hash of task and id
(``x_1_<12 hex>_a_0.png``), distinct for distinct ids. Every row is checked before it is written: a
pair id seen twice, text that is not text, an image given as a file path instead of bytes, bytes that
are no image, a truncated image or one over the pixel limit (``BON_MAX_IMAGE_PIXELS``) is a one-line
error naming the pair and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Iterator

from bon.backends.images import check_pixels, open_image
from bon.content import inside
from bon.errors import BonError, first_line
from bon.mmrb2.format import _parse_pair, load_pairs, write_pairs
from bon.progress import bar, note
from bon.tasks import TASK_NAMES, parse_task

HUB_DATASET = "rl-research/multimodal-rewardbench-2"
PLACEHOLDER = re.compile(r"<image_\d+>")
PNG_MODES = {"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"}  # what PNG stores as is
SIDES = (("prompt", "input_images", "prompt"), ("response_a", "images", "a"), ("response_b", "images", "b"))
HOW_TO = (f"download the dataset {HUB_DATASET} (configs {', '.join(TASK_NAMES)}) on a machine with "
          "network access, run `bon mmrb2 fetch --out DIR` there and copy DIR here, or copy the dataset itself "
          "(save_to_disk folders or Parquet files) and run `bon mmrb2 fetch --from DIR --out DIR`")


def split_content(text: str | None, images: list[Any] | None, out: Path, folder: str, stem: str,
                  where: str = "images") -> list[list[str]]:
    """Text with ``<image_N>`` placeholders + images -> ``[[kind, value], ...]``, images saved as PNG.

    As in the official converter: the k-th placeholder takes the k-th image (N is ignored), extra
    placeholders are dropped, and only text without any placeholder gets its images appended. Every
    image is decoded and checked before any is written (``where`` names the field in errors).
    """
    decoded = [decode_image(image, f"{where}[{k}]") for k, image in enumerate(images or [])]
    text = text or ""
    items: list[list[str]] = []
    placed = 0

    def add_text(chunk: str) -> None:
        if chunk.strip():
            items.append(["text", chunk.strip()])

    pos = 0
    for match in PLACEHOLDER.finditer(text):
        add_text(text[pos : match.start()])
        if placed < len(decoded):
            items.append(["image", _save_image(decoded[placed], out, folder, f"{stem}_{placed}.png")])
            placed += 1
        pos = match.end()
    add_text(text[pos:])
    if not PLACEHOLDER.search(text):
        items += [["image", _save_image(img, out, folder, f"{stem}_{k}.png")] for k, img in enumerate(decoded)]
    return items


def decode_image(image: Any, where: str) -> Any:
    """One image cell -> a PIL image, or a one-line error naming ``where``: the cell must hold the image's
    bytes (as the hub's Image feature stores them) or a decoded image, never a path to read from disk."""
    from PIL import Image

    if isinstance(image, Image.Image):
        check_pixels(image.width, image.height, where)
        return image
    if isinstance(image, dict) and isinstance(image.get("bytes"), (bytes, bytearray)) and image["bytes"]:
        return open_image(bytes(image["bytes"]), where)
    if isinstance(image, str) or (isinstance(image, dict) and image.get("path")):
        raise BonError(f"{where}: image given as a file path, not image bytes (fetch reads only the dataset's own bytes)")
    if isinstance(image, dict):
        raise BonError(f"{where}: image has no bytes in the dataset copy")
    raise BonError(f"{where}: expected an image, got {type(image).__name__}")


def _save_image(image: Any, out: Path, folder: str, name: str) -> str:
    """Save losslessly; returns the path as the official files spell it (``images/<name>``)."""
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


def file_stem(task: str, pair_id: str) -> str:
    """A pair's image-name stem: a readable slug of its id (characters that could leave the folder or
    hide the file replaced) and 12 hex digits of SHA-256 over task and id, so distinct ids never share a
    file (``x/1`` and ``x_1``, ``.`` and ``_.``, ``X`` and ``x`` on a case-insensitive disk)."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", pair_id)[:60]
    digest = hashlib.sha256(f"{task}\0{pair_id}".encode("utf-8")).hexdigest()[:12]
    return f"{readable}_{digest}"


def row_id(row: Any, where: str) -> str:
    """The row's ``pair_id`` as text, or a one-line error (none, empty, or not a string or integer)."""
    if not isinstance(row, dict):
        raise BonError(f"{where}: expected a row of columns, got {type(row).__name__}")
    pid = row.get("pair_id")
    if pid is None or pid == "":
        raise BonError(f"{where}: a dataset row has no pair_id (columns: {', '.join(sorted(map(str, row)))[:200]})")
    if isinstance(pid, bool) or not isinstance(pid, (str, int)):
        raise BonError(f"{where}: pair_id must be a string, got {pid!r:.40}")
    return str(pid)


def row_to_pair(row: dict[str, Any], out: Path, task: str = "", where: str = "") -> dict[str, Any]:
    """One hub row -> one official pair record, its images written under ``out`` (all of them decoded and
    checked first, so a refused row writes nothing)."""
    pid = row_id(row, where or "dataset")
    at = f"{where}: pair {pid}" if where else f"pair {pid}"
    stem = file_stem(task, pid)
    for key, _, _ in SIDES:
        text, images = row.get(f"{key}_text"), row.get(f"{key}_images")
        if text is not None and not isinstance(text, str):
            raise BonError(f"{at}: {key}_text must be text, got {type(text).__name__}")
        if images is not None and not isinstance(images, (list, tuple)):
            raise BonError(f"{at}: {key}_images must be a list of images, got {type(images).__name__}")
    decoded = {key: [decode_image(im, f"{at}: {key}_images[{k}]") for k, im in enumerate(row.get(f"{key}_images") or [])]
               for key, _, _ in SIDES}
    content = {key: split_content(row.get(f"{key}_text"), decoded[key], out, folder, f"{stem}_{suffix}", f"{at}: {key}_images")
               for key, folder, suffix in SIDES}
    return {
        "id": pid,
        "prompt_source": row.get("prompt_source", ""),
        "prompt_content": content["prompt"],
        "prompt_metadata": _json_field(row, "prompt_metadata", {}),
        "response_a": {"model_name": row.get("response_a_model", ""), "response_content": content["response_a"]},
        "response_b": {"model_name": row.get("response_b_model", ""), "response_content": content["response_b"]},
        "chosen": str(row.get("chosen") or "").upper(),
        "human_annotations": _json_field(row, "human_annotations", None),
    }


def fetch(out: Path, tasks: Iterable[str] = TASK_NAMES, dataset: str = HUB_DATASET, source: Path | None = None) -> dict[str, int]:
    """Convert each task from the hub (or from ``source``, a local copy); returns pairs per task.

    A task file already present is kept (delete it to refetch); it is written only when its task
    converted completely, so an interrupted fetch resumes with the task it stopped in. A refused task
    leaves no images of its own behind (nor ``out`` itself, when this fetch created it).
    """
    out, wanted = Path(out), [parse_task(t) for t in tasks]
    todo = [t for t in wanted if not (out / t.file).exists()]
    local = {t: _local_rows(Path(source), t.name) for t in todo} if source is not None else {}  # all found first
    created = not out.exists()
    for folder in ("images", "input_images"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for task in wanted:
        if task not in todo:
            counts[task.name] = len(load_pairs(out / task.file))
            continue
        origin = f"{source}" if source is not None else dataset
        pairs: list[dict[str, Any]] = []
        try:
            total, rows = local[task] if source is not None else _hub_rows(dataset, task.name)
            unplaced = _convert(task.name, f"{origin} ({task.name})", total, rows, out, pairs)
        except BaseException:
            _remove_images(out, pairs, created and not counts)
            raise
        write_pairs(out / task.file, pairs)
        counts[task.name] = len(pairs)
        if unplaced:
            note(f"{task.name}: {unplaced} images had no placeholder in text that has placeholders; "
                 "left out, as the official converter does")
    return counts


def _convert(task: str, where: str, total: int, rows: Iterable[Any], out: Path, pairs: list[dict[str, Any]]) -> int:
    """Rows -> ``pairs`` (appended as they are written, so a failure can undo them); returns the images
    left out as the official converter leaves them out."""
    seen: set[str] = set()
    unplaced = 0
    with bar(f"mmrb2 fetch {task}", total) as progress:
        for i, row in enumerate(_guarded(rows, where)):
            pid = row_id(row, f"{where}: row {i}")
            if pid in seen:
                raise BonError(f"{where}: pair_id {pid!r:.80} appears twice")
            seen.add(pid)
            pair = row_to_pair(row, out, task, where)
            pairs.append(pair)
            _parse_pair(pair, where, i)  # what every reader of the task file will check, checked now
            unplaced += _image_count(row) - _image_count(pair)
            progress.advance()
    return unplaced


def _guarded(rows: Iterable[Any], where: str) -> Iterator[Any]:
    """The rows, a failure of the library reading them (a damaged Parquet page or Arrow file) one line."""
    iterator = iter(rows)
    while True:
        try:
            row = next(iterator)
        except StopIteration:
            return
        except BonError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyarrow and datasets raise many kinds on damaged files
            raise BonError(f"{where}: unreadable dataset copy ({type(exc).__name__}: {first_line(exc, 120)})") from None
        yield row


def _remove_images(out: Path, pairs: list[dict[str, Any]], created: bool) -> None:
    """Undo a refused task's writes: its images, or ``out`` whole when this fetch made it and wrote nothing else."""
    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    for pair in pairs:
        contents = [pair["prompt_content"], pair["response_a"]["response_content"], pair["response_b"]["response_content"]]
        for kind, value in (item for content in contents for item in content):
            if kind == "image":
                (out / value).unlink(missing_ok=True)


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
    return len(rows), _stored_rows(rows)


def _stored_rows(data: Any, batch: int = 32) -> Iterator[dict[str, Any]]:
    """A Dataset's rows as stored, images as ``{"bytes", "path"}``: bon decodes them itself, under its
    pixel limit and with errors that name the pair (datasets would decode them with neither)."""
    table = data.with_format("arrow")
    for start in range(0, len(data), batch):
        yield from table[start : start + batch].to_pylist()


def _local_rows(root: Path, config: str) -> tuple[int, Iterable[dict[str, Any]]]:
    """Rows of one config from a local copy of the hub dataset, in any of the shapes it is kept in:
    a ``save_to_disk`` folder of all configs (a DatasetDict keyed by config), one per config
    (``ROOT/t2i``, a Dataset or a DatasetDict with a ``test`` split), or Parquet files under
    ``ROOT/t2i/`` or named ``t2i-*.parquet`` / ``t2i.parquet`` (as on the hub)."""
    if not root.exists():
        raise BonError(f"{root}: local copy of {HUB_DATASET} not found")
    if _is_saved_dataset(root):
        saved = _load_saved(root, root)
        if isinstance(saved, dict) and config in saved:
            return len(saved[config]), _stored_rows(saved[config])
    if _is_saved_dataset(root / config):
        data = _load_saved(root / config, root)
        if isinstance(data, dict):
            if "test" not in data and len(data) != 1:
                raise BonError(f"{root / config}: saved dataset has splits {', '.join(data)}, no 'test'")
            data = data["test"] if "test" in data else next(iter(data.values()))
        return len(data), _stored_rows(data)
    files = _parquet_files(root, config)
    if not files:
        raise BonError(f"{root}: no copy of config {config!r} (expected {config}/ saved with save_to_disk, "
                       f"{config}/*.parquet or {config}-*.parquet)")
    return _parquet_rows(files)


def _is_saved_dataset(folder: Path) -> bool:
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def _load_saved(folder: Path, root: Path) -> Any:
    """A ``save_to_disk`` folder; a DatasetDict comes back as a plain dict of Datasets."""
    datasets = _datasets()
    _check_saved_files(folder, root)
    try:
        data = datasets.load_from_disk(str(folder))
    except Exception as exc:  # a damaged or foreign folder
        raise BonError(f"{folder}: not a readable save_to_disk folder ({type(exc).__name__}: {str(exc)[:120]})") from None
    return dict(data) if isinstance(data, datasets.DatasetDict) else data


def _check_inside(path: Path, root: Path) -> None:
    """A file of the local copy must lie in it, symbolic links followed (fetch reads nothing else)."""
    if not inside(path, root):
        raise BonError(f"{path}: a symbolic link that leads out of {root}; copy the file in instead")


def _check_saved_files(folder: Path, root: Path) -> None:
    """Every file of a save_to_disk folder, and every data file its ``state.json`` names, inside ``root``."""
    _check_inside(folder, root)
    for path in sorted(folder.rglob("*")):
        _check_inside(path, root)
        if path.name == "state.json":
            try:
                names = [f.get("filename", "") for f in json.loads(path.read_text(encoding="utf-8")).get("_data_files", [])]
            except (OSError, ValueError, AttributeError, TypeError):
                continue  # datasets itself says what is wrong with it
            for name in names:
                if not isinstance(name, str) or Path(name).is_absolute() or ".." in Path(name).parts:
                    raise BonError(f"{path}: data file {name!r:.80} lies outside its folder")
                _check_inside(path.parent / name, root)


def _parquet_files(root: Path, config: str) -> list[Path]:
    def belongs(path: Path) -> bool:
        rel = path.relative_to(root)
        return config in rel.parts[:-1] or path.stem == config or re.match(rf"{re.escape(config)}[-_]", path.name) is not None

    files = sorted(p for p in root.rglob("*.parquet") if belongs(p))
    for path in files:
        _check_inside(path, root)
    return files


def _parquet_rows(files: list[Path]) -> tuple[int, Iterator[dict[str, Any]]]:
    """Read Parquet directly (no datasets cache written); images arrive as ``{"bytes", "path"}``."""
    import pyarrow.parquet as pq

    opened = []
    for file in files:
        try:
            opened.append(pq.ParquetFile(file))
        except Exception as exc:  # noqa: BLE001 - not Parquet, truncated: pyarrow raises several kinds
            raise BonError(f"{file}: unreadable Parquet file ({type(exc).__name__}: {first_line(exc, 120)})") from None

    def rows() -> Iterator[dict[str, Any]]:
        for parquet in opened:
            for batch in parquet.iter_batches(batch_size=32):
                yield from batch.to_pylist()

    return sum(p.metadata.num_rows for p in opened), rows()


def _datasets() -> Any:
    from bon.backends import require

    return require("datasets", "bon mmrb2 fetch")
