"""One exception type for bad input (and its subtype for a run that stopped early): the CLI prints its
message as one line, never a traceback."""

from __future__ import annotations


class BonError(Exception):
    """A user-facing error; the message names the file or item and what is wrong with it."""


class Stopped(BonError):
    """The run stopped for a reason a rerun removes (a call budget, a lost server): everything done so
    far is kept, and the command ends with exit 3 ("rerun to continue")."""


def first_line(exc: BaseException | str, limit: int = 300) -> str:
    """The first non-empty line of an exception's message (its type name when it has none), shortened:
    what a one-line BonError or a stored missing reason quotes from a library's multi-line error."""
    text = exc if isinstance(exc, str) else (str(exc) or type(exc).__name__)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else text.strip()
    return first if len(first) <= limit else first[: limit - 3] + "..."
