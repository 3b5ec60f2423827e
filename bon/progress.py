"""Progress for long stages: a rich bar on a terminal; on a log file or pipe, a line when a stage
starts and ends and a progress line every few seconds (so a batch job's log shows it is alive).
``BON_QUIET=1`` silences both."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.text import Text

console = Console(stderr=True, soft_wrap=True)
LOG_EVERY_S = 5.0  # seconds between progress lines when stderr is not a terminal
_DRIVER_PID = os.getpid()  # a forked worker inherits it: a process whose pid differs is a worker


class _Bar:
    def __init__(self, progress: Progress | None, task_id: int | None):
        self._progress, self._task = progress, task_id

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)


def progress_line(description: str, done: int, total: int, elapsed: float) -> str:
    """``<stage>: 40,000/100,000 (12 s, 3,333/s, about 18 s left)``: counts, the rate so far and the time
    it leaves (the rate once a second has passed; a stage of 100,000 candidates says how long it will take)."""
    line = f"{description}: {done:,}/{total:,} ({elapsed:.0f} s"
    if elapsed >= 1.0 and done > 0:
        rate = done / elapsed
        line += f", {rate:,.1f}/s" if rate < 10 else f", {rate:,.0f}/s"
        if total > done:
            line += f", about {_duration((total - done) / rate)} left"
    return line + ")"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class _LogLines(_Bar):
    """The non-terminal form: :func:`progress_line` at most every :data:`LOG_EVERY_S` seconds, and
    ``<stage>: 80/80 done in 30.1 s (2.7/s)`` at the end."""

    def __init__(self, description: str, total: int):
        super().__init__(None, None)
        self.description, self.total, self.done = description, total, 0
        self.started = self.last = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= LOG_EVERY_S and self.done < self.total:
            self.last = now
            _log(progress_line(self.description, self.done, self.total, now - self.started))

    def finish(self) -> None:
        elapsed = time.monotonic() - self.started
        rate = f" ({self.done / elapsed:,.1f}/s)" if elapsed >= 1.0 and self.done else ""
        _log(f"{self.description}: {self.done:,}/{self.total:,} done in {elapsed:.1f} s{rate}")


_MUTED: list[bool] = []  # inside :func:`muted`


@contextmanager
def muted() -> Iterator[None]:
    """No progress or notes from this process inside the block (a worker doing a part of a stage whose
    progress the driver shows)."""
    _MUTED.append(True)
    try:
        yield
    finally:
        _MUTED.pop()


def _quiet() -> bool:
    return bool(_MUTED) or os.environ.get("BON_QUIET") == "1"


def _log(line: str) -> None:
    from bon.redact import redact_text

    print(redact_text(line), file=sys.stderr, flush=True)


class _RateColumn(ProgressColumn):
    """Items per second on the terminal bar (blank until rich has measured a rate)."""

    def render(self, task: Any) -> Text:
        return Text(f"{task.speed:,.1f}/s" if task.speed else "", style="progress.data.speed")


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
    columns = (TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(), _RateColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        yield _Bar(progress, progress.add_task(description, total=total))


def note(message: str) -> None:
    """A one-line status message on stderr (the stage log)."""
    if not _quiet():
        from bon.redact import redact_text

        console.print(redact_text(message), highlight=False)
