"""Provenance: which library versions produced an output (recorded in configs, candidates, stats)."""

from __future__ import annotations

import functools
import platform
from importlib import metadata
from typing import Any, Iterable

STUDY_PACKAGES = ("bon", "numpy", "scipy", "pandas", "pillow", "matplotlib", "rapidocr", "onnxruntime", "choix",
                  "torch", "diffusers", "transformers")


def library_versions(packages: Iterable[str] = STUDY_PACKAGES) -> dict[str, str]:
    """Python's version and each installed package's; packages not installed are left out."""
    found = {"python": platform.python_version()}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


@functools.lru_cache(maxsize=1)
def _environment() -> dict[str, Any]:
    return {"platform": platform.platform(), "packages": library_versions()}


def runtime_facts(plugin: Any) -> dict[str, Any]:
    """What a plugin's answers were computed with beyond its identity: the environment (platform,
    Python and package versions), its class, and its run-only settings (device, batch size,
    concurrency...), which never change its key but may change the last digits of an answer."""
    from bon.plugins import RUN_ONLY, SECRET

    cls = type(plugin)
    run_only = RUN_ONLY | set(getattr(cls, "run_only", ()))
    settings = {k: v for k, v in (getattr(plugin, "_bon_arguments", None) or {}).items()
                if k in run_only and k != "name" and not SECRET.search(k)}
    return {**_environment(), "backend": {"class": f"{cls.__module__}.{cls.__qualname__}", **settings}}
