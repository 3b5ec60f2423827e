"""Decoded images, one cache per process, bounded in bytes: what a study holds of its pixels.

A candidate keeps its path and digest; its pixels are decoded when a stage reads them and live here
until newer ones push them out (least recently used first), so memory does not grow with the study.
The bound is ``BON_IMAGE_CACHE`` (bytes, or with a K/M/G suffix; default 1G; 0 keeps nothing).
Entries are keyed by file (path, size and modification time), so a file rewritten in place is
decoded again. A forked worker inherits the driver's entries (shared pages, not copies): it never
evicts them (that would free nothing) and caches its own decodes only in the room they leave.
A stage that reads every image (the demo's verifier, its forked judges) works through the study in
parts whose images fit the bound (:func:`part_count`), letting each part's pixels go before the next.
Cached images are shared: a caller that changes pixels works on a copy.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from bon.errors import BonError

if TYPE_CHECKING:
    from PIL import Image

CACHE_ENV = "BON_IMAGE_CACHE"
DEFAULT_CACHE_BYTES = 2**30  # 1 GiB: 256 decoded 1024 x 1024 RGB images (PIL: 4 bytes a pixel), 16,384 of 128 x 128
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}

Key = tuple[str, int, int]


def cache_limit() -> int:
    """The cache's bound in bytes, from ``BON_IMAGE_CACHE`` (e.g. ``512M``, ``2G``, ``0``)."""
    raw = os.environ.get(CACHE_ENV, "").strip()
    if not raw:
        return DEFAULT_CACHE_BYTES
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?", raw.upper())
    if not match:
        raise BonError(f"{CACHE_ENV}: expected a size in bytes such as 512M or 2G (0 keeps no pixels), got {raw!r:.40}")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def image_bytes(image: "Image.Image") -> int:
    """Memory of decoded pixels: PIL keeps every multi-band mode (RGB too) at 4 bytes a pixel."""
    return image.width * image.height * {"1": 1, "L": 1, "P": 1, "I;16": 2}.get(image.mode, 4)


class ImageCache:
    """Least recently used decoded images up to ``limit`` bytes (None: :func:`cache_limit`, read at first use)."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self._data: OrderedDict[Key, "Image.Image"] = OrderedDict()
        self._inherited: dict[Key, "Image.Image"] = {}  # a forked worker's entries from the driver: kept
        self.bytes = self.peak = 0  # of every entry, inherited ones included
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        if self._limit is None:
            self._limit = cache_limit()
        return self._limit

    def load(self, path: Path, decode: Callable[[], "Image.Image"], evict: bool = True) -> "Image.Image":
        """The decoded image of the file at ``path`` (``decode()`` on a miss). ``evict=False`` (warming
        the cache before workers fork) keeps a new image only if it fits without pushing others out."""
        key = _file_key(path)
        if key is None:  # no such file (or unreadable): decode() reports it
            return decode()
        with self._lock:
            hit = self._inherited.get(key) or self._data.get(key)
            if hit is not None:
                if key in self._data:
                    self._data.move_to_end(key)
                self.hits += 1
                return hit
            self.misses += 1
        image = decode()
        self._keep(key, image, evict)
        return image

    def _keep(self, key: Key, image: "Image.Image", evict: bool) -> None:
        size = image_bytes(image)
        with self._lock:
            if key in self._data or key in self._inherited or size > self.limit:
                return
            if self.bytes + size > self.limit and not evict:
                return
            while self.bytes + size > self.limit and self._data:
                self.bytes -= image_bytes(self._data.popitem(last=False)[1])
            if self.bytes + size > self.limit:
                return  # the rest are the driver's: no room to make here
            self._data[key] = image
            self.bytes += size
            self.peak = max(self.peak, self.bytes)

    def clear(self) -> None:
        """Drop every entry and hand the freed pages back to the system (:func:`release_freed`)."""
        with self._lock:
            self._data.clear()
            self._inherited = {}
            self.bytes = 0
        release_freed()

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # a lock another thread of the driver held at the fork stays held
        self._inherited.update(self._data)
        self._data = OrderedDict()


def release_freed() -> None:
    """Return freed heap memory to the system (glibc ``malloc_trim``; elsewhere nothing). Decoded images
    are many blocks below glibc's mmap threshold, allocated among longer-lived objects (and in the
    decoding threads' own heaps), so freeing them leaves the pages with the process: the stage after
    the judges (the analysis, and the workers it forks) would start from the study's pixel peak."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def file_bytes(path: Path) -> int:
    """What the image at ``path`` takes decoded (RGB, as items load it: 4 bytes a pixel), read from its
    header only; 0 when it cannot be read (the stage that reads it reports that)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.width * im.height * 4
    except Exception:  # noqa: BLE001 - reported by the stage that decodes it
        return 0


def estimated_bytes(paths: Sequence[Path], sample: int = 16) -> int:
    """Decoded bytes of all of ``paths``, from the headers of up to ``sample`` of them spread evenly."""
    if not paths:
        return 0
    step = max(1, len(paths) // sample)
    seen = [file_bytes(path) for path in paths[::step][:sample]]
    return int(sum(seen) / len(seen) * len(paths))


PART_BYTES = 128 * 2**20  # the most decoded pixels one part of a stage holds (2,048 of the demo's images):
# a part costs its worker a few set-ups (its judges built, a store connection), well under 1% of judging
# that many images, so larger parts save nothing and only hold more memory


def part_count(total_bytes: int, units: int, workers: int = 1) -> int:
    """Parts to cut ``units`` (prompts, pairs) into when ``workers`` processes (or threads) each hold
    one part's decoded images at a time: each part at most :data:`PART_BYTES`, and the parts held at
    once fit the cache's bound together (each at most bound / workers); their number is a multiple of
    ``workers`` (parts of equal size keep every worker busy to the end), at most one per unit. With no
    cache (a bound of 0) nothing is kept anyway: one part per worker."""
    if IMAGES.limit <= 0:
        return max(1, min(units, workers))
    part = max(1, min(PART_BYTES, IMAGES.limit // workers))
    rounds = max(1, -(-total_bytes // (part * workers)))
    return max(1, min(units, workers * rounds))


def _file_key(path: Path) -> Key | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.fspath(path), st.st_mtime_ns, st.st_size)


IMAGES = ImageCache()  # the process's one cache; forked workers start with the driver's entries
os.register_at_fork(after_in_child=IMAGES._after_fork)
