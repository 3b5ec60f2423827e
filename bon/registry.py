"""Plugins by name. Each plugin package lists its built-ins as ``{"name": "module:attr"}`` strings,
so nothing heavy is imported until a plugin is actually created; installed packages add more through
the entry-point groups ``bon.generators``, ``bon.judges``, ``bon.verifiers``, ``bon.strategies``.

Where does a new judge go? ``judges/<yours>.py`` plus one line in ``judges/__init__.py``.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any

from bon.errors import BonError

KINDS = {
    "generator": ("generators", "bon.generators"),
    "judge": ("judges", "bon.judges"),
    "verifier": ("verifiers", "bon.verifiers"),
    "strategy": ("bon.selection", "bon.strategies"),
    "suite": ("bon.suites", "bon.suites"),
}


def _table(kind: str) -> dict[str, str]:
    if kind not in KINDS:
        raise BonError(f"unknown plugin kind {kind!r}")
    package, group = KINDS[kind]
    table = dict(importlib.import_module(package).PLUGINS)
    for ep in metadata.entry_points(group=group):
        table.setdefault(ep.name, ep.value)
    return table


def names(kind: str) -> list[str]:
    return sorted(_table(kind))


def resolve(kind: str, name: str) -> Any:
    """The factory (usually a class) registered under ``name``."""
    table = _table(kind)
    if name not in table:
        known = ", ".join(sorted(table))
        raise BonError(f"unknown {kind} {name!r} (known: {known})")
    module_name, _, attr = table[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BonError(f"{kind} {name!r} needs a package that is not installed: {exc.name or exc}") from None
    return getattr(module, attr)


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"name"`` or ``"name:model"`` (e.g. ``clipscore:openai/clip-vit-base-patch32``)."""
    name, sep, model = spec.partition(":")
    return name, ({"model": model} if sep else {})


def create(kind: str, spec: str, **options: Any) -> Any:
    name, spec_options = parse_spec(spec)
    factory = resolve(kind, name)
    try:
        return factory(**{**spec_options, **options})
    except TypeError as exc:
        raise BonError(f"{kind} {name!r}: bad options {sorted(options)} ({exc})") from None
