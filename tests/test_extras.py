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


PAPER_CONFIGS = sorted((Path(__file__).parents[1] / "configs").glob("paper_*.yaml"))


@pytest.mark.parametrize("config", [c for c in PAPER_CONFIGS if not c.stem.endswith("_tiny")], ids=lambda p: p.stem)
def test_paper_extra_installs_what_every_paper_config_needs(config):
    """Each plugin's declared packages (bon.preflight.required_modules: the class's ``requires`` or
    ``required_modules(options)`` and the back-ends its options name) and the suite's reader are in
    ``[paper]``, the one extra the README and the configs' comments name (issue 36: EMMA's latex2sympy2 and
    word2number were missing)."""
    from bon import preflight, registry
    from bon.config import load_config

    cfg = load_config(config)
    needed = {m for kind, spec, _ in preflight.entries(cfg) for m in preflight.required_modules(kind, spec)}
    if not cfg.suite.get("path"):
        needed |= set(getattr(registry.resolve("suite", cfg.suite["name"]), "requires", ()))
    assert needed, "every paper config needs optional packages"
    assert {m.lower() for m in needed} <= _names("paper"), sorted({m.lower() for m in needed} - _names("paper"))
    assert "pip install '.[paper]'" in config.read_text(encoding="utf-8")  # the comments name the same extra
