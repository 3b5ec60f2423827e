"""What the benchmark scripts share: the repository and its tests' model builders on the import path
with the Hugging Face hub offline, a command line built from keyword defaults, and a stopwatch."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def parser(doc: str, **flags: Any) -> argparse.ArgumentParser:
    """A script's command line, described by its docstring's first line: one ``--flag`` per keyword
    (``gen_latency`` gives ``--gen-latency``) typed by its default, a list default taking one or more
    values, a ``(default, help)`` pair with a help text. Flags of other shapes are added by the caller."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, value in flags.items():
        default, text = value if isinstance(value, tuple) else (value, None)
        many = isinstance(default, list)
        ap.add_argument(f"--{name.replace('_', '-')}", default=default, help=text,
                        type=type(default[0] if many else default), nargs="+" if many else None)
    return ap


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``fn(*args, **kwargs)`` and the wall seconds it took."""
    started = time.perf_counter()
    return fn(*args, **kwargs), time.perf_counter() - started
