"""Model life cycle in the stage runner: a plugin is created when its stage first needs it and closed
as soon as that stage is done, so a study's peak accelerator memory is its largest stage, not the sum
of every model it uses.

Plugins that hold weights may define ``close()`` (delete the weights); the runner calls it when it
exists, then collects garbage and empties torch's CUDA cache if torch is already imported (it never
imports torch itself).
"""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from bon.config import PluginSpec


def release(plugin: Any) -> None:
    """Close ``plugin`` if it can be closed, then give its memory back to the allocator and device."""
    close = getattr(plugin, "close", None)
    if callable(close):
        close()
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextmanager
def loaded(spec: PluginSpec, kind: str) -> Iterator[Any]:
    """The plugin of ``spec`` for the duration of a ``with`` block; released on the way out."""
    plugin = spec.create(kind)
    try:
        yield plugin
    finally:
        release(plugin)
        del plugin


class LazyPlugin:
    """Stands in for a generator or verifier until a stage calls it: a resumed stage with nothing left
    to do never loads the model. ``name`` is the spec's label; any other attribute creates the plugin."""

    def __init__(self, spec: PluginSpec, kind: str) -> None:
        self.spec = spec
        self.kind = kind
        self._plugin: Any = None
        self._identity: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.spec.label

    @property
    def is_loaded(self) -> bool:
        return self._plugin is not None

    def plugin(self) -> Any:
        if self._plugin is None:
            self._plugin = self.spec.create(self.kind)
            self._identity = self._plugin.identity()
        return self._plugin

    def __getattr__(self, attr: str) -> Any:  # only reached for what this class does not define
        if attr.startswith("__") or attr in ("spec", "kind", "_plugin", "_identity"):
            raise AttributeError(attr)
        return getattr(self.plugin(), attr)

    def identity(self) -> dict[str, Any]:
        """The plugin's identity if it was loaded in this run, else what its spec says (no loading
        just to write provenance)."""
        if self._plugin is not None:
            return self._plugin.identity()
        return self._identity or {"name": self.spec.label, "plugin": self.spec.name, "options": self.spec.options}

    def close(self) -> None:
        if self._plugin is not None:
            plugin, self._plugin = self._plugin, None
            release(plugin)
