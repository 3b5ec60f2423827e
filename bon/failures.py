"""Transient or final: the one rule every stage applies to a failed model or API call.

Transient failures say nothing about the input (out of memory, timeouts, rate limits, 5xx answers,
dropped connections): they are never stored, so a rerun asks again. Final failures are answers about
the input (an unparseable reply, refused content, an image the model rejects): they are stored with
their reason and never retried.
"""

from __future__ import annotations

import re

# What a transient failure's one-line reason looks like, whichever client or library produced it.
TRANSIENT_TEXT = re.compile(
    r"out of memory|\bOOM\b|CUDA error: out|timed? ?out|timeout|deadline exceeded|rate.?limit|too many requests"
    r"|\bHTTP (?:429|5\d\d)\b|\bstatus(?: code)?:? (?:429|5\d\d)\b|\b(?:429|50[0-4]) (?:Too Many|Internal|Bad Gateway|"
    r"Service Unavailable|Gateway Time)|service unavailable|bad gateway|overloaded|connection (?:refused|reset|"
    r"aborted|error)|could not connect|cannot connect|temporarily unavailable|remote end closed|gave up after",
    re.IGNORECASE,
)

TRANSIENT_TYPES = ("OutOfMemoryError", "TimeoutError", "Timeout", "ConnectTimeout", "ReadTimeout",
                   "APITimeoutError", "APIConnectionError", "RateLimitError", "InternalServerError",
                   "ConnectionError", "ServiceUnavailableError")


def is_transient(exc: BaseException) -> bool:
    """Whether an exception raised by a model or API call is worth retrying on a later run."""
    flag = getattr(exc, "transient", None)
    if isinstance(flag, bool):
        return flag
    if isinstance(exc, (MemoryError, TimeoutError, ConnectionError)):
        return True
    if any(t.__name__ in TRANSIENT_TYPES for t in type(exc).__mro__):
        return True
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    if isinstance(status, int) and (status == 429 or 500 <= status <= 599):
        return True
    return looks_transient(str(exc))


def looks_transient(reason: str | None) -> bool:
    """Whether a recorded failure reason describes a transient fault (for plugins that only give text)."""
    return bool(reason) and bool(TRANSIENT_TEXT.search(reason))
