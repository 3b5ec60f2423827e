"""The content model shared with MMRB2: a list of ``[kind, value]`` items.

``kind`` is ``"text"`` or ``"image"``. On disk an image value is a path relative to the folder of
the JSON file that mentions it; in memory an :class:`ImageItem` may also hold a PIL image that has
not been written yet (a fresh generator output). Content hashes identify what a judge saw, so the
same pixels under another file name are the same judgment.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, Union

from PIL import Image

from bon.errors import BonError
from bon.io import atomic_write

from bon.tasks import TASK_NAMES as TASKS  # re-exported: the one task list lives in bon/tasks.py


@dataclass(eq=False)
class TextItem:
    text: str
    kind = "text"

    @property
    def digest(self) -> str:
        """Hash of the text; kept with the text it was computed from (every stored judgment looks it up)."""
        memo = self.__dict__.get("_digest_of")
        if memo is not None and memo[0] is self.text:
            return memo[1]
        digest = hashlib.sha256(b"text\0" + self.text.encode("utf-8")).hexdigest()
        self.__dict__["_digest_of"] = (self.text, digest)
        return digest


@dataclass(eq=False)
class ImageItem:
    """An image known by file path, by pixels, or both. An item with a file keeps its path and digest
    only: its pixels come from the process's bounded cache (:mod:`bon.image_cache`) on every
    :meth:`load`. An item made from pixels (a fresh generator output) holds them until they are saved."""

    path: Path | None = None
    _image: Image.Image | None = field(default=None, repr=False)
    _digest: str | None = field(default=None, repr=False)
    kind = "image"

    @classmethod
    def from_pil(cls, image: Image.Image) -> "ImageItem":
        return cls(path=None, _image=image.convert("RGB"))

    def load(self, evict: bool = True) -> Image.Image:
        """The pixels (shared with the cache: copy before changing them). ``evict=False``: see
        :meth:`bon.image_cache.ImageCache.load`."""
        if self._image is not None:
            return self._image
        if self.path is None:
            raise BonError("image item has neither a path nor pixels")
        from bon.image_cache import IMAGES

        return IMAGES.load(self.path, self._decode, evict)

    def read(self) -> Image.Image:
        """The pixels decoded now, past the cache: for a file read once (a source copied into the run)."""
        return self._image if self._image is not None else self.load() if self.path is None else self._decode()

    def _decode(self) -> Image.Image:
        from bon.backends.images import open_image

        with open_image(self.path, str(self.path)) as im:
            return im.convert("RGB")

    def hold(self) -> "ImageItem":
        """Keep the pixels on the item (they travel with it when pickled): for a worker whose files
        the driver cannot read."""
        self._image = self.load()
        return self

    def saved(self, path: Path, pixels: Image.Image | None = None) -> None:
        """The pixels (``pixels``, default the held ones) are now in the file at ``path``: keep that and their
        digest, hashed now while they are in memory (a reader of the run need not decode the file again),
        and let the pixels go."""
        pixels = pixels if pixels is not None else self._image
        if self._digest is None and pixels is not None:
            self._digest = pixel_digest(pixels if pixels.mode == "RGB" else pixels.convert("RGB"))  # as read back
        self.path, self._image = path, None

    @property
    def digest(self) -> str:
        """Hash of the decoded pixels: independent of file name and PNG encoder settings. Computed once and kept."""
        if self._digest is None:
            self._digest = pixel_digest(self.load())
        return self._digest


def pixel_digest(im: Image.Image) -> str:
    h = hashlib.sha256(b"image\0")
    h.update(f"{im.mode}:{im.width}x{im.height}\0".encode())
    h.update(im.tobytes())
    return h.hexdigest()


Item = Union[TextItem, ImageItem]


def decode_images(items: Sequence[ImageItem], threads: int) -> list[bool]:
    """Decode and hash every image in ``threads`` threads (PIL's decoder and hashlib let go of the
    GIL): each item keeps its digest, and the image cache keeps the first pixels that fit in its bound,
    pushing none out, so workers forked next share them and a stage that reads every image in order
    finds its first ones ready. True where it worked; a failure is left for the stage that reads the
    image to report."""
    from concurrent.futures import ThreadPoolExecutor

    from bon.image_cache import IMAGES

    def decode(item: ImageItem) -> bool:
        if item._digest is not None and IMAGES.bytes >= 0.99 * IMAGES.limit:
            return True  # hashed before, and the cache is full: nothing left to do
        try:
            if item._digest is None:
                item._digest = pixel_digest(item.load(evict=False))
            else:
                item.load(evict=False)
        except Exception:  # noqa: BLE001 - the stage's own read names the failure
            return False
        return True

    if threads <= 1:
        return [decode(item) for item in items]
    pool = ThreadPoolExecutor(max_workers=threads)
    try:
        done = list(pool.map(decode, items, chunksize=64))
    except BaseException:  # Ctrl-C: the queued images are dropped, not decoded first
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return done


@dataclass(eq=False)
class Content:
    """An ordered mix of text and images (a prompt or a response)."""

    items: list[Item] = field(default_factory=list)

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def texts(self) -> list[str]:
        return [it.text for it in self.items if isinstance(it, TextItem)]

    @property
    def images(self) -> list[ImageItem]:
        return [it for it in self.items if isinstance(it, ImageItem)]

    @property
    def text(self) -> str:
        return "\n".join(self.texts)

    @property
    def digest(self) -> str:
        """Hash of the items' digests in order; kept with them, so changed items give a new one."""
        parts = [it.digest for it in self.items]
        memo = self.__dict__.get("_digest_of")
        if memo is not None and memo[0] == parts:
            return memo[1]
        h = hashlib.sha256()
        for part in parts:
            h.update(part.encode())
        self.__dict__["_digest_of"] = (parts, h.hexdigest())
        return self.__dict__["_digest_of"][1]

    @property
    def known_digest(self) -> str | None:
        """:attr:`digest` when every image's digest is already known (no file decoded to get it), else None."""
        return None if any(it._digest is None for it in self.images) else self.digest

    @classmethod
    def of(cls, *values: str | Image.Image | Item) -> "Content":
        """Build content from strings and PIL images, in order."""
        items: list[Item] = []
        for v in values:
            if isinstance(v, (TextItem, ImageItem)):
                items.append(v)
            elif isinstance(v, str):
                items.append(TextItem(v))
            elif isinstance(v, Image.Image):
                items.append(ImageItem.from_pil(v))
            else:
                raise TypeError(f"cannot make content from {type(v).__name__}")
        return cls(items)

    # --- JSON ---------------------------------------------------------------------------------
    def to_json(self, base: Path, image_dir: Path | None = None, stem: str = "img") -> list[list[str]]:
        """Serialise as MMRB2 ``[[kind, value], ...]``; unsaved images are written under ``image_dir``."""
        out: list[list[str]] = []
        n = 0
        for it in self.items:
            if isinstance(it, TextItem):
                out.append(["text", it.text])
                continue
            if it.path is None or (image_dir is not None and not inside(it.path, base)):
                if image_dir is None:
                    raise BonError("content holds an unsaved image and no image folder was given")
                target, pixels = image_dir / f"{stem}_{n}.png", it.load()
                save_png(pixels, target)  # copied in, so the folder is self-contained
                it.saved(target, pixels)
            n += 1
            out.append(["image", relative_path(it.path, base)])
        return out

    @classmethod
    def from_json(cls, raw: Any, base: Path, where: str = "content",
                  image: Callable[[str, str], ImageItem] | None = None) -> "Content":
        """Parse ``[[kind, value], ...]``; image paths are resolved against ``base`` and must stay inside it
        (``image(value, where)`` builds image items another way, e.g. lazily)."""
        def resolved(value: str, origin: str) -> ImageItem:
            return ImageItem(path=safe_join(base, value, where=origin))

        image = image or resolved
        return cls([TextItem(value) if kind == "text" else image(value, f"{where}[{i}]")
                    for i, (kind, value) in enumerate(content_entries(raw, where))])


def content_entries(raw: Any, where: str) -> list[tuple[str, str]]:
    """The ``[[kind, value], ...]`` shape, checked in one place for every reader (run folders, suites,
    MMRB2 files): a list of text or image entries with string values."""
    if not isinstance(raw, list):
        raise BonError(f"{where}: content must be a list of [kind, value] items")
    entries = []
    for i, entry in enumerate(raw):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[1], str)):
            raise BonError(f"{where}[{i}]: expected [kind, value], got {entry!r:.80}")
        if entry[0] not in ("text", "image"):
            raise BonError(f"{where}[{i}]: unknown content kind {entry[0]!r} (expected 'text' or 'image')")
        entries.append((entry[0], entry[1]))
    return entries


def save_png(image: Image.Image, path: Path) -> None:
    """Write atomically so an interrupted run never leaves a truncated image behind."""
    if image.mode == "RGB" and image.width and image.height:
        atomic_write(path, rgb_png(image))
    else:
        atomic_write(path, lambda tmp: image.save(tmp, format="PNG", compress_level=1))


def rgb_png(image: Image.Image) -> bytes:
    """An RGB image as PNG bytes: rows unfiltered, deflated at level 1. Every candidate image of a study is
    written once and decoded a few times (verifier, judges), so this is a hot path: Pillow tries every row
    filter on every row, which for the flat-colour pictures of the synthetic world costs more time than the
    compression and gives no smaller files. Stored without deflate, a picture would be a little cheaper to
    write and read but several times larger on disk, which a user pays for every study, so it stays deflated."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    width, height = image.size
    rows = image.tobytes()
    stride = 3 * width
    # each row starts with its filter type byte (0: none)
    raw = b"".join(b"\0" + rows[i:i + stride] for i in range(0, len(rows), stride))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, truecolour, deflate, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 1))
            + chunk(b"IEND", b""))


def relative_path(path: Path, base: Path) -> str:
    try:
        return resolved(path).relative_to(resolved(base)).as_posix()
    except ValueError:
        raise BonError(f"{path}: image lies outside {base}") from None


def safe_join(base: Path, rel: str, where: str) -> Path:
    """Resolve a relative image path, refusing absolute paths, ``..`` escapes and symbolic links that
    lead out of ``base`` (a judge would read, and an API judge upload, whatever they point at)."""
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts:
        raise BonError(f"{where}: image path {rel!r} escapes its folder")
    path = base / p
    if not inside(path, base):
        raise BonError(f"{where}: image path {rel!r} is a link that leads out of {base}")
    return path


def inside(path: Path, base: Path) -> bool:
    """Whether ``path``, every symbolic link on the way followed, lies in ``base`` (followed the same way)."""
    try:
        return resolved(path).is_relative_to(_resolved_folder(str(base), os.getcwd()))
    except (OSError, RuntimeError):  # a link loop
        return False


def resolved(path: Path) -> Path:
    """``Path(path).resolve()``, with the folder holding it resolved once per process: a run's images lie
    in a few folders and their paths are checked many times each, where resolving each in full (a system
    call per folder on the way) was a visible share of the demo's time. Only the last name is looked at
    each time (one ``lstat``), and a path whose last name is a link (or ``..``) is resolved in full."""
    path = Path(path)
    name = path.name
    if name in ("", ".."):
        return path.resolve()
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return path.resolve()
    except OSError:  # no such file (yet): resolving appends the name as it is
        pass
    return _resolved_folder(os.fspath(path.parent), os.getcwd()) / name


@lru_cache(maxsize=256)
def _resolved_folder(folder: str, cwd: str) -> Path:
    """A run's folder (or one of its image folders) resolved once per process; ``cwd`` in the key keeps a
    relative folder honest."""
    return Path(folder).resolve()


# --- prompts and candidates ------------------------------------------------------------------


@dataclass(eq=False)
class Prompt:
    id: str
    task: str
    content: Content
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise BonError(f"prompt {self.id}: unknown task {self.task!r} (expected one of {', '.join(TASKS)})")

    def to_json(self, base: Path, image_dir: Path | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "content": self.content.to_json(base, image_dir, stem=slug(self.id)),
            "metadata": self.metadata,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any], base: Path, where: str) -> "Prompt":
        missing = [k for k in ("id", "task", "content") if k not in raw]
        if missing:
            raise BonError(f"{where}: prompt lacks {', '.join(missing)}")
        return cls(
            id=str(raw["id"]),
            task=raw["task"],
            content=Content.from_json(raw["content"], base, where=f"{where} content"),
            metadata=dict(raw.get("metadata") or {}),
        )


@dataclass(eq=False)
class Candidate:
    prompt_id: str
    index: int
    generator: str
    seed: int
    content: Content
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.generator, self.prompt_id, self.index)

    def to_json(self, base: Path, image_dir: Path | None = None) -> dict[str, Any]:
        """The record; ``digest`` (the content's, see :func:`recorded_digest`) when known without decoding a file."""
        content = self.content.to_json(base, image_dir, stem=f"{slug(self.prompt_id)}_{self.index}")
        digest = self.content.known_digest
        return {
            "prompt_id": self.prompt_id,
            "index": self.index,
            "generator": self.generator,
            "seed": self.seed,
            "content": content,
            **({"digest": digest} if digest else {}),
            "provenance": self.provenance,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any], base: Path, where: str) -> "Candidate":
        checked_record(raw, where)
        return cls(
            prompt_id=str(raw["prompt_id"]),
            index=int(raw["index"]),
            generator=str(raw["generator"]),
            seed=int(raw.get("seed", 0)),
            content=Content.from_json(raw["content"], base, where=f"{where} content"),
            provenance=dict(raw.get("provenance") or {}),
        )


_DIGEST = re.compile(r"[0-9a-f]{64}")


def checked_record(raw: dict[str, Any], where: str) -> str | None:
    """What every reader of a candidate record checks first (:meth:`Candidate.from_json`, and
    :mod:`bon.run`, which reads records without building candidates): its required keys, and its
    :func:`recorded_digest`, which it returns."""
    missing = [k for k in ("prompt_id", "index", "generator", "content") if k not in raw]
    if missing:
        raise BonError(f"{where}: candidate lacks {', '.join(missing)}")
    return recorded_digest(raw, where)


def recorded_digest(raw: dict[str, Any], where: str) -> str | None:
    """A candidate record's ``digest``: its content's :attr:`Content.digest` as hashed from the pixels when the
    record was written (None in records written before there was one, or when the writer would have had to
    decode a file for it). Only the read-only analysis (:mod:`bon.run`) uses it, instead of decoding every
    image again; stages that judge hash the pixels they read. A value that is not a digest is an error."""
    digest = raw.get("digest")
    if digest is not None and not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
        raise BonError(f"{where}: digest must be 64 lowercase hex digits, got {digest!r:.80}")
    return digest


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:120]


# --- JSONL ------------------------------------------------------------------------------------


def read_jsonl(path: Path, torn_tail_ok: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)``. A truncated last line (an interrupted append to a file bon
    writes) is skipped; files a user hands in pass ``torn_tail_ok=False``, so it is an error there."""
    if not path.exists():
        return
    with path.open(encoding="utf-8-sig") as fh:  # -sig: a leading byte-order mark is not data
        lines = fh.readlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if torn_tail_ok and n == len(lines) and not line.endswith("\n"):
                return  # torn write from a killed run; the unit is redone
            raise BonError(f"{path}:{n}: not valid JSON") from None
        if not isinstance(rec, dict):
            raise BonError(f"{path}:{n}: expected a JSON object")
        yield n, rec


def jsonl_text(records: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def append_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    drop_torn_tail(path)
    data = jsonl_text(records)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()


def reorder_jsonl(path: Path, rank: Callable[[dict[str, Any]], Any]) -> None:
    """Rewrite a JSONL file bon appends to with its records sorted (stably) by ``rank``, atomically:
    results that came back out of order end in the order an in-order run writes."""
    records = [rec for _, rec in read_jsonl(path)]
    atomic_write(path, jsonl_text(sorted(records, key=rank)))


def drop_torn_tail(path: Path) -> None:
    """Cut a partial last line left by a killed writer, so appends start on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        fh.seek(-1, 2)
        if fh.read(1) == b"\n":
            return
        data = fh.seek(0) or fh.read()
        fh.truncate(data.rfind(b"\n") + 1)


def load_prompts(path: Path) -> list[Prompt]:
    """Prompts from JSONL. Strict: bon writes ``prompts.jsonl`` whole and atomically, so a torn last
    line there is damage, not an interrupted append (skipping it would drop a prompt from the study)."""
    return [Prompt.from_json(rec, path.parent, where=f"{path}:{n}") for n, rec in read_jsonl(path, torn_tail_ok=False)]


def load_candidates(path: Path) -> list[Candidate]:
    return [Candidate.from_json(rec, path.parent, where=f"{path}:{n}") for n, rec in read_jsonl(path)]
