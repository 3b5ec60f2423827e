"""The one atomic file writer: a reader (or an interrupted run) never sees half a file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def atomic_write(path: Path, data: str | bytes | Callable[[Path], None]) -> None:
    """Write ``data`` (text as UTF-8, bytes, or a function that writes the given temporary path) to a
    sibling temporary file, then rename it over ``path``; parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if callable(data):
            data(tmp)
        elif isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
