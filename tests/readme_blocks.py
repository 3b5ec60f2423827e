"""The README's fenced code blocks, their marks, and how a test runs one (tests/test_readme_blocks.py,
tests/test_demo_e2e.py).

A block is marked by the HTML comment on the line before its fence (the README's "The README's code
blocks are tested" says what each mark means): ``<!-- readme-test: skip network|gpu|long -->`` or
``<!-- readme-test: demo -->``. ``bash`` blocks run under ``bash -e`` with ``bon`` on the PATH meaning this
checkout; ``python`` blocks run as a script; both in a given folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"^<!-- readme-test: (skip (?:network|gpu|long)|demo) -->$")
RUNNABLE = ("bash", "python")


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    mark: str | None

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.lang or 'no language'})"


def readme_blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of the README, in order, with the mark on the line before it."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if text is None else text.splitlines()
    blocks, start = [], None
    for n, line in enumerate(lines):
        if start is None and line.startswith("```"):
            start, lang = n, line[3:].strip()
        elif start is not None and line == "```":
            before = lines[start - 1] if start else ""
            mark = MARK.match(before)
            if before.startswith("<!-- readme-test") and not mark:
                raise ValueError(f"README.md:{start}: unknown mark {before!r}")
            blocks.append(Block(start + 1, lang, "\n".join(lines[start + 1:n]) + "\n", mark.group(1) if mark else None))
            start = None
    if start is not None:
        raise ValueError(f"README.md:{start + 1}: a fence that is never closed")
    return blocks


def scratch_folder(folder: Path) -> dict[str, str]:
    """``folder`` with a copy of examples/ and a ``bon`` command that runs this checkout; the environment."""
    if not (folder / "examples").exists():
        shutil.copytree(ROOT / "examples", folder / "examples")
    bin_dir = folder / ".bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "bon"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bon.cli "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT),
            "MPLBACKEND": "Agg", "BON_QUIET": "1"}


def run_block(block: Block, folder: Path, timeout: float = 300) -> None:
    """Run one bash or python block in ``folder``; a failure names the block and shows its output's end."""
    env = scratch_folder(folder)
    if block.lang == "bash":
        argv = ["bash", "-e", "-c", block.code]
    elif block.lang == "python":
        script = folder / f"readme_block_{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        argv = [sys.executable, str(script)]
    else:
        raise ValueError(f"{block}: not a runnable block")
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-2000:]
        raise AssertionError(f"{block} failed with exit {done.returncode}:\n{tail}")
