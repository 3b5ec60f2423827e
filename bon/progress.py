"""Progress bars for long stages (rich), quiet when output is not a terminal or when asked."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True, soft_wrap=True)


class _Bar:
    def __init__(self, progress: Progress | None, task_id: int | None):
        self._progress, self._task = progress, task_id

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)


@contextmanager
def bar(description: str, total: int) -> Iterator[_Bar]:
    quiet = os.environ.get("BON_QUIET") == "1" or not sys.stderr.isatty()
    if quiet:
        yield _Bar(None, None)
        return
    columns = (TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        yield _Bar(progress, progress.add_task(description, total=total))


def note(message: str) -> None:
    """A one-line status message on stderr (the stage log)."""
    if os.environ.get("BON_QUIET") != "1":
        console.print(message, highlight=False)
