"""bon: Best-of-N validation toolkit for Multimodal RewardBench 2.

``bon.load_run(path)`` reads a finished study into pandas frames (:class:`bon.run.Run`).
"""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``load_run`` and ``Run`` on first use, so ``import bon`` stays free of pandas."""
    if name in ("load_run", "Run"):
        from bon import run

        return getattr(run, name)
    raise AttributeError(f"module 'bon' has no attribute {name!r}")
