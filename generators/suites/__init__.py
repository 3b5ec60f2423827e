"""Benchmark prompt suites: GenAI-Bench, GEdit-Bench, ISG-Bench, EMMA, and users' own JSONL prompts.

Each loader reads its benchmark by Hugging Face dataset name (through ``datasets``, from the local cache
when offline) or from a local copy of the same files (``path:``), and maps every row into a
:class:`bon.content.Prompt` that keeps the benchmark's own id, category and reference answer in
``metadata``. Options shared by all loaders:

- ``dataset``: the Hub name (each loader has the official one as default); ``revision``; ``split``
- ``path``: a local copy instead (a file, or a folder holding the dataset's files)
- ``categories``: keep only these categories (the benchmark's own names)
- ``limit``: keep the first K prompts (after the category filter)

Images inside the dataset are read lazily: a prompt holds a :class:`LazyImage` that decodes its pixels
only when the run folder's copy is written, so a suite of a thousand photographs never sits in memory.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from PIL import Image

from bon.backends.images import open_image
from bon.content import ImageItem, Prompt, read_jsonl
from bon.errors import BonError, first_line

__all__ = ["PLUGINS", "LazyImage", "Rows", "open_rows", "image_from", "select", "first_line"]

# Prompt suites by name (see bon.plugins.Suite): a new suite is one file here plus one line.
PLUGINS = {
    "synthetic": "generators.synthetic.suites:build_suite",
    "jsonl": "bon.suites:jsonl_suite",
    "prompts": "generators.suites.jsonl:build_suite",
    "genai-bench": "generators.suites.genai_bench:build_suite",
    "gedit-bench": "generators.suites.gedit_bench:build_suite",
    "isg-bench": "generators.suites.isg_bench:build_suite",
    "emma": "generators.suites.emma:build_suite",
}


@dataclass(eq=False)
class LazyImage(ImageItem):
    """An image known by a way to fetch it (a dataset cell, an archive member, a file outside the run).

    ``path`` stays None until the run folder's copy is written, so :meth:`Content.to_json` saves it;
    the pixels are decoded on every :meth:`load` and not kept, so many of them cost no memory.
    """

    fetch: Callable[[], Image.Image] | None = field(default=None, repr=False)
    origin: str = ""

    def load(self, evict: bool = True) -> Image.Image:
        if self._image is not None or self.path is not None or self.fetch is None:
            return super().load(evict)
        try:
            image = self.fetch()
        except BonError:
            raise
        except Exception as exc:  # noqa: BLE001 - a damaged image is one line, naming where it came from
            raise BonError(f"{self.origin or 'suite image'}: unreadable image ({first_line(exc)})") from None
        return image.convert("RGB")


# --- rows from the Hub or from a local copy ------------------------------------------------------


@dataclass
class Rows:
    """Rows of one table as dicts; ``cell(i, column)`` fetches one cell again (for lazy images)."""

    rows: list[dict[str, Any]]
    cell: Callable[[int, str], Any]
    where: str
    base: Path | None = None  # folder that relative image paths in the rows are resolved against

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        return iter(enumerate(self.rows))


def open_rows(benchmark: str, dataset: str, path: str | Path | None, split: str | None, config: str | None = None,
              revision: str | None = None, image_columns: Iterable[str] = (), hint: str = "") -> Rows:
    """The benchmark's rows from ``path`` (a local copy) or the Hub dataset ``dataset``.

    Image columns are not decoded here; their cells are fetched again, one at a time, when an image is
    needed (a memory-mapped Arrow table, or the Parquet bytes kept compressed).
    """
    image_columns = tuple(image_columns)
    if path is not None:
        return _local_rows(benchmark, Path(path).expanduser(), split, config, image_columns)
    return _hub_rows(benchmark, dataset, split, config, revision, image_columns, hint)


def _datasets(benchmark: str, reading: str, tail: str = "") -> Any:
    try:
        import datasets
    except ImportError:
        raise BonError(f"{benchmark}: reading {reading} needs the datasets package (pip install '.[datasets]'){tail}") from None
    return datasets


def _hub_rows(benchmark: str, dataset: str, split: str | None, config: str | None, revision: str | None,
              image_columns: tuple[str, ...], hint: str) -> Rows:
    datasets = _datasets(benchmark, f"{dataset} from the Hub", ", or give path: to a local copy")
    kw: dict[str, Any] = {}
    if revision:
        kw["revision"] = revision
    try:
        ds = datasets.load_dataset(dataset, config, split=split or "train", **kw)
    except Exception as exc:  # noqa: BLE001 - offline without a cached copy, a wrong name, a wrong split
        cfg = f", config {config}" if config else ""
        fetch = f"huggingface-cli download {dataset} --repo-type dataset"
        raise BonError(f"{benchmark}: cannot load {dataset}{cfg} split {split or 'train'} ({first_line(exc)}); "
                       f"on a machine with network run `{fetch}` (it lands in the Hugging Face cache, "
                       f"~/.cache/huggingface, which offline runs read), or download the files and set path: "
                       f"to them{hint}") from None
    return _from_dataset(ds, image_columns, dataset)


class _Deferred:
    """Stands in a row for an image cell not decoded yet."""

    def __init__(self, column: str):
        self.column = column

    def __repr__(self) -> str:
        return f"<image cell {self.column}>"


def _local_rows(benchmark: str, path: Path, split: str | None, config: str | None, image_columns: tuple[str, ...]) -> Rows:
    if not path.exists():
        raise BonError(f"{benchmark}: local copy {path} not found")
    if path.is_dir() and _saved(path):
        return _arrow_dir(benchmark, path, split, image_columns)
    if path.is_dir() and split and _saved(path / split):  # a repository holding <split>/state.json + .arrow
        return _arrow_dir(benchmark, path / split, None, image_columns)
    files = _data_files(path, split, config)
    if not files:
        raise BonError(f"{benchmark}: no .parquet, .arrow, .jsonl or .json files under {path}"
                       + (f" for split {split}" if split else ""))
    suffixes = {f.suffix for f in files}
    if suffixes <= {".parquet"}:
        return _parquet(files, image_columns)
    if suffixes <= {".arrow"}:
        return _arrow_files(benchmark, files, image_columns)
    if suffixes <= {".jsonl", ".json"}:
        rows = [r for f in files for r in _json_rows(f)]
        return Rows(rows, lambda i, c: rows[i][c], where=str(path), base=files[0].parent)
    raise BonError(f"{benchmark}: {path} mixes file kinds {sorted(suffixes)}; point path: at one kind")


def _saved(folder: Path) -> bool:
    """A folder written by ``datasets``' ``save_to_disk``."""
    return any((folder / f).exists() for f in ("state.json", "dataset_dict.json"))


def _data_files(path: Path, split: str | None, config: str | None) -> list[Path]:
    if path.is_file():
        return [path]
    kinds = (".parquet", ".arrow", ".jsonl", ".json")
    found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in kinds
                   and not any(part.startswith(".") for part in p.relative_to(path).parts)
                   and p.name not in ("dataset_info.json", "state.json", "dataset_dict.json"))
    if config:
        mine = [p for p in found if config in p.relative_to(path).parts or p.stem.lower().startswith(config.lower())]
        found = mine or found
    if split:
        mine = [p for p in found if split in p.relative_to(path).parts or p.name.startswith(f"{split}-") or p.stem == split
                or f"-{split}-" in p.name or p.name.startswith(f"{split}.")]
        found = mine or found
    kinds_found = {p.suffix for p in found}
    for kind in kinds:  # one kind only, by preference
        if kind in kinds_found:
            return [p for p in found if p.suffix == kind]
    return []


def _parquet(files: list[Path], image_columns: tuple[str, ...]) -> Rows:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
    except Exception as exc:  # noqa: BLE001
        raise BonError(f"{files[0]}: unreadable Parquet ({first_line(exc)})") from None
    rows = _deferred(table.select(_plain(table.column_names, image_columns)).to_pylist(), table.column_names, image_columns)
    return Rows(rows, lambda i, c: table.column(c)[i].as_py(), where=str(files[0].parent), base=files[0].parent)


def _arrow_files(benchmark: str, files: list[Path], image_columns: tuple[str, ...]) -> Rows:
    datasets = _datasets(benchmark, ".arrow files")
    parts = [datasets.Dataset.from_file(str(f)) for f in files]
    ds = datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]
    return _from_dataset(ds, image_columns, str(files[0].parent))


def _arrow_dir(benchmark: str, path: Path, split: str | None, image_columns: tuple[str, ...]) -> Rows:
    datasets = _datasets(benchmark, "a saved dataset")
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as exc:  # noqa: BLE001
        raise BonError(f"{benchmark}: {path}: cannot read the saved dataset ({first_line(exc)})") from None
    if isinstance(ds, datasets.DatasetDict):
        name = split or ("train" if "train" in ds else next(iter(ds)))
        if name not in ds:
            raise BonError(f"{benchmark}: {path} has no split {name!r} (has {', '.join(ds)})")
        ds = ds[name]
    return _from_dataset(ds, image_columns, str(path))


def _from_dataset(ds: Any, image_columns: tuple[str, ...], where: str) -> Rows:
    plain = _plain(ds.column_names, image_columns)
    rows = ds.select_columns(plain).to_list() if plain else [{} for _ in range(len(ds))]
    return Rows(_deferred(rows, ds.column_names, image_columns), lambda i, c: ds[i][c], where=where)


def _plain(columns: list[str], image_columns: tuple[str, ...]) -> list[str]:
    return [c for c in columns if c not in image_columns]


def _deferred(rows: list[dict[str, Any]], columns: list[str], image_columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows with a :class:`_Deferred` in each image column the table has (decoded on demand)."""
    for r in rows:
        r.update({c: _Deferred(c) for c in image_columns if c in columns})
    return rows


def _json_rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return [rec for _, rec in read_jsonl(path, torn_tail_ok=False)]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BonError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(data, dict):  # {"00001": {...}, ...} as in the t2v_metrics files, or {"data": [...]}
        if isinstance(data.get("data"), list):
            return list(data["data"])
        return [{"__key__": k, **v} if isinstance(v, dict) else {"__key__": k, "value": v} for k, v in data.items()]
    if isinstance(data, list):
        return data
    raise BonError(f"{path}: expected a JSON list or object of rows")


# --- images ----------------------------------------------------------------------------------------


def image_from(rows: Rows, i: int, column: str, origin: str) -> LazyImage | None:
    """The image in ``rows[i][column]`` as a lazy item, or None when the cell is empty."""
    value = rows.rows[i].get(column)
    if value is None:
        return None
    if not isinstance(value, (_Deferred, str, dict, bytes, Image.Image)):
        raise BonError(f"{origin}: unexpected image value {type(value).__name__}")

    def fetch() -> Image.Image:
        img = decode_image(rows.cell(i, column) if isinstance(value, _Deferred) else value, rows.base, origin)
        if img is None:
            raise BonError(f"{origin}: the image cell is empty")
        return img
    return LazyImage(fetch=fetch, origin=origin)


def has_image(rows: Rows, i: int, column: str) -> bool:
    value = rows.rows[i].get(column)
    if isinstance(value, _Deferred):
        cell = rows.cell(i, column)
        return cell is not None and not (isinstance(cell, dict) and not cell.get("bytes") and not cell.get("path"))
    return value is not None and value != ""


def decode_image(value: Any, base: Path | None, origin: str) -> Image.Image | None:
    """A PIL image from a datasets cell: a PIL image, ``{"bytes", "path"}``, raw bytes or a file path."""
    if value is None:
        return None
    if isinstance(value, Image.Image):
        return value
    if isinstance(value, dict):
        if value.get("bytes"):
            return open_image(bytes(value["bytes"]), origin)
        if value.get("path"):
            return open_image_file(value["path"], base, origin)
        return None
    if isinstance(value, (bytes, bytearray)):
        return open_image(bytes(value), origin)
    if isinstance(value, str):
        return open_image_file(value, base, origin)
    raise BonError(f"{origin}: cannot read an image from {type(value).__name__}")


def file_image(rel: str, base: Path, origin: str, hint: str = "") -> LazyImage:
    """A lazy image of the file ``rel`` under ``base``; a missing file is an error now, not at first use."""
    if resolve_image_path(rel, base, origin) is None:
        raise BonError(f"{origin}: image file {rel} not found under {base}{hint}")
    return LazyImage(fetch=lambda: open_image_file(rel, base, origin), origin=origin)


def open_image_file(rel: str, base: Path | None, origin: str) -> Image.Image:
    path = resolve_image_path(rel, base, origin)
    if path is None:
        raise BonError(f"{origin}: image file {rel} not found" + (f" under {base}" if base else ""))
    return open_image(path, f"{origin}: {path}")  # under the pixel limit, one line when broken


def resolve_image_path(rel: str, base: Path | None, where: str = "image") -> Path | None:
    """The file for ``rel``; tolerates an extension whose case differs from the file's (``.JPG``/``.jpg``).
    With a ``base`` folder the one path rule holds (:func:`bon.content.safe_join`): relative to it and inside
    it, never the working folder (an escape is a BonError naming ``where``); without one (a hub cache's
    cell) the path as given."""
    from bon.content import inside, safe_join

    c = safe_join(base, rel, where) if base is not None else Path(rel)
    if c.is_file():
        return c
    folder = c.parent
    if folder.is_dir():
        stem = c.stem.lower()
        for other in folder.iterdir():
            if other.stem.lower() == stem and other.suffix.lower() in (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp") \
                    and other.is_file():
                return other if base is None or inside(other, base) else None
    return None


# --- selection ---------------------------------------------------------------------------------------


def select(prompts: list[Prompt], categories: Any, limit: Any, benchmark: str) -> list[Prompt]:
    """Keep ``categories`` (a name or a list) and then the first ``limit`` prompts."""
    if categories is not None:
        wanted = [categories] if isinstance(categories, str) else list(categories)
        known = sorted({str(p.metadata.get("category")) for p in prompts})
        unknown = [c for c in wanted if str(c) not in known]
        if unknown:
            raise BonError(f"{benchmark}: unknown categor{'y' if len(unknown) == 1 else 'ies'} {', '.join(map(str, unknown))} "
                           f"(known: {', '.join(known)})")
        prompts = [p for p in prompts if str(p.metadata.get("category")) in set(map(str, wanted))]
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise BonError(f"{benchmark}: limit must be a positive integer, got {limit!r}")
        prompts = prompts[:limit]
    if not prompts:
        raise BonError(f"{benchmark}: no prompts left after the filters")
    return prompts


def unique_ids(ids: list[str], extra: list[str]) -> list[str]:
    """The benchmark's ids; an id that repeats gets ``_<extra>`` (and a counter if still not unique)."""
    counts = Counter(ids)
    out, seen = [], set()
    for i, e in zip(ids, extra):
        new = i if counts[i] == 1 else f"{i}_{e}"
        k = 2
        base = new
        while new in seen:
            new = f"{base}_{k}"
            k += 1
        seen.add(new)
        out.append(new)
    return out
