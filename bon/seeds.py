"""Seeds derived from names, so every unit of work is reproducible on its own (and on resume)."""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object) -> int:
    digest = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF
