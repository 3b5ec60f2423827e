"""Provenance: which library versions produced an output (recorded in configs, candidates, stats)."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Iterable

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
