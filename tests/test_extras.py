"""The install extras: GPU machines get torchvision; the CPU test install never does (it breaks there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

EXTRAS = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def _names(extra: str) -> set[str]:
    return {re.split(r"[<>=\[ ;]", req, maxsplit=1)[0].lower() for req in EXTRAS[extra]}


def test_gpu_extra_names_torchvision_and_what_the_real_models_need():
    assert {"torch", "torchvision", "diffusers", "transformers", "accelerate"} <= _names("gpu")
    pins = {re.split(r"[<>=]", r, maxsplit=1)[0]: r for r in EXTRAS["gpu"]}
    assert pins["diffusers"].endswith(">=0.35") and pins["transformers"].endswith(">=4.57")  # Qwen-Image-Edit, Qwen3-VL


def test_the_test_command_installs_no_torchvision():
    assert "torchvision" not in _names("all") | _names("test")
    assert "ray" in _names("all")  # the Ray executor tests run in CI
