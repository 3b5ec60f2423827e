"""Small helpers every model-backed generator shares: provenance, library versions, telling a local
model's hub revision, quiet loading (device, dtype and one-line error text live in ``bon``).

Nothing heavy is imported at module import: torch is imported inside the functions that need it.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from bon.errors import BonError

# Packages whose versions go into every candidate's provenance (those that are installed).
VERSION_PACKAGES = ("bon", "torch", "diffusers", "transformers", "accelerate", "tokenizers", "openai", "pillow")


def positive_int(value: Any, what: str, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BonError(f"{what} must be a positive integer, got {value!r}")
    return value


def number(value: Any, what: str, allow_none: bool = True) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BonError(f"{what} must be a number, got {value!r}")
    return float(value)


# --- models: local folder or hub id -----------------------------------------------------------

def cached_file(model: str, filename: str, revision: str | None) -> str | None:
    """The Hugging Face cache's copy of a hub model's file; None when it is not there (or not a hub id)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(model, filename, revision=revision)
    except Exception:  # noqa: BLE001 - best effort: provenance, or a chance to share a component
        return None
    return hit if isinstance(hit, str) else None


def snapshot_revision(model: str, filename: str, revision: str | None) -> str | None:
    """The commit hash of a hub model when it can be read from the local cache, else the revision asked for."""
    hit = cached_file(model, filename, revision)
    return (revision_of_folder(hit) if hit else None) or revision


def revision_of_folder(folder: str) -> str | None:
    """A local folder inside a hub cache (``.../snapshots/<commit>/``) knows its commit."""
    parts = Path(folder).parts
    if "snapshots" in parts:
        i = parts.index("snapshots")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None


# --- loading ---------------------------------------------------------------------------------


@contextmanager
def quiet_loading() -> Iterator[None]:
    """No diffusers/transformers/huggingface_hub tqdm bars while a model loads (they would tear bon's
    progress bar); each library's own setting is restored afterwards."""
    restore = []
    for module in ("diffusers.utils.logging", "transformers.utils.logging", "huggingface_hub.utils"):
        try:
            mod = importlib.import_module(module)
            enabled = mod.is_progress_bar_enabled() if hasattr(mod, "is_progress_bar_enabled") else mod.are_progress_bars_disabled() is False
        except Exception:  # noqa: BLE001 - library absent or API changed: leave it alone
            continue
        if enabled:
            mod.disable_progress_bar() if hasattr(mod, "disable_progress_bar") else mod.disable_progress_bars()
            restore.append(mod)
    try:
        yield
    finally:
        for mod in restore:
            mod.enable_progress_bar() if hasattr(mod, "enable_progress_bar") else mod.enable_progress_bars()
