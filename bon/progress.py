"""Progress for long stages: a rich bar on a terminal; on a log file or pipe, a line when a stage
starts and ends and a progress line every few seconds (so a batch job's log shows it is alive).
``BON_QUIET=1`` silences both."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True, soft_wrap=True)
LOG_EVERY_S = 5.0  # seconds between progress lines when stderr is not a terminal
_DRIVER_PID = os.getpid()  # a forked worker inherits it: a process whose pid differs is a worker


class _Bar:
    def __init__(self, progress: Progress | None, task_id: int | None):
        self._progress, self._task = progress, task_id

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)


class _LogLines(_Bar):
    """The non-terminal form: ``<stage>: 40/80 (12 s)`` at most every :data:`LOG_EVERY_S` seconds, and
    ``<stage>: 80/80 done in 30.1 s`` at the end."""

    def __init__(self, description: str, total: int):
        super().__init__(None, None)
        self.description, self.total, self.done = description, total, 0
        self.started = self.last = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= LOG_EVERY_S and self.done < self.total:
            self.last = now
            _log(f"{self.description}: {self.done:,}/{self.total:,} ({now - self.started:.0f} s)")

    def finish(self) -> None:
        _log(f"{self.description}: {self.done:,}/{self.total:,} done in {time.monotonic() - self.started:.1f} s")


def _quiet() -> bool:
    return os.environ.get("BON_QUIET") == "1"


def _log(line: str) -> None:
    from bon.redact import redact_text

    print(redact_text(line), file=sys.stderr, flush=True)


@contextmanager
def bar(description: str, total: int) -> Iterator[_Bar]:
    if _quiet():
        yield _Bar(None, None)
        return
    if not sys.stderr.isatty() or os.getpid() != _DRIVER_PID:
        # a forked worker logs lines: a live bar of its own would be drawn over by the driver's lines
        lines = _LogLines(description, total)
        yield lines
        lines.finish()
        return
    columns = (TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        yield _Bar(progress, progress.add_task(description, total=total))


def note(message: str) -> None:
    """A one-line status message on stderr (the stage log)."""
    if not _quiet():
        from bon.redact import redact_text

        console.print(redact_text(message), highlight=False)
