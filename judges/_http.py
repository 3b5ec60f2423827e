"""HTTP plumbing shared by API plugins: retry policy, Retry-After, data URLs, preflight, redaction.

Nothing here imports a heavy client; the plugins bring their own (``openai``) and describe each failure
to :func:`retry_async` / :func:`retry_sync` through a ``classify`` callback returning a
:class:`Failure`. The policy: retry 408, 409, 425, 429 and 5xx answers, timeouts and dropped
connections, up to ``max_retries`` times; wait what the server's ``Retry-After`` (or
``retry-after-ms``) asks, else an exponential backoff with jitter.

API keys: plugins take the *name* of an environment variable and read it when they need it. Any
text that may end up in a verdict, a log or a file goes through :func:`redact` first.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import io
import random
import re
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, TypeVar

from PIL import Image

from bon.errors import BonError

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


@dataclass(frozen=True)
class Failure:
    """How one failed attempt should be treated.

    ``retryable``: try again (after ``retry_after`` seconds if the server said so). ``transient``: if
    it is the final failure, is it worth retrying on a later run (rate limits, outages, a rejected
    key) rather than an answer about this input (a 400 for an oversized image)?
    """

    reason: str
    retryable: bool
    transient: bool = True
    retry_after: float | None = None


class GaveUp(Exception):
    """The call failed for good: not retryable, or still failing after every retry."""

    def __init__(self, failure: Failure, attempts: int, waited: float):
        self.failure = failure
        self.attempts = attempts
        self.waited = waited
        prefix = f"gave up after {attempts} attempts: " if failure.retryable else ""
        super().__init__(prefix + failure.reason)

    @property
    def transient(self) -> bool:
        return self.failure.transient


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` retries after the first attempt; backoff ``base_delay * 2**k`` capped at
    ``max_delay`` with ``jitter`` (a fraction of the delay drawn away at random, so many clients that
    failed together do not retry together); a server's Retry-After is honoured up to
    ``max_retry_after`` seconds."""

    max_retries: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.5
    max_retry_after: float = 300.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise BonError(f"max_retries must be at least 0, got {self.max_retries}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise BonError("retry delays must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise BonError(f"jitter must lie in [0, 1], got {self.jitter}")

    def delay(self, retry: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        rng = rng or random
        if retry_after is not None and retry_after >= 0:
            wait = min(retry_after, self.max_retry_after)
            return wait + rng.uniform(0.0, 0.1 * wait + 0.05)  # never earlier than asked
        wait = min(self.max_delay, self.base_delay * (2.0**retry))
        return wait * (1.0 - self.jitter * rng.random())


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds a server asks us to wait: ``retry-after-ms``, ``retry-after`` in seconds or an HTTP date."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


async def retry_async(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    classify: Callable[[BaseException], Failure],
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> tuple[T, int, float]:
    """``(result, attempts, seconds waited between attempts)``; raises :class:`GaveUp`."""
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call(), attempt, waited
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - classify decides
            failure = classify(exc)
            if not failure.retryable or attempt > policy.max_retries:
                raise GaveUp(failure, attempt, waited) from None
            pause = policy.delay(attempt - 1, failure.retry_after, rng)
            waited += pause
            await sleep(pause)


def retry_sync(
    call: Callable[[], T],
    policy: RetryPolicy,
    classify: Callable[[BaseException], Failure],
    sleep: Callable[[float], Any] = time.sleep,
    rng: random.Random | None = None,
) -> tuple[T, int, float]:
    """The blocking twin of :func:`retry_async`."""
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        try:
            return call(), attempt, waited
        except Exception as exc:  # noqa: BLE001 - classify decides
            failure = classify(exc)
            if not failure.retryable or attempt > policy.max_retries:
                raise GaveUp(failure, attempt, waited) from None
            pause = policy.delay(attempt - 1, failure.retry_after, rng)
            waited += pause
            sleep(pause)


# --- images -----------------------------------------------------------------------------------


def fit_max_side(image: Image.Image, max_side: int | None) -> Image.Image:
    """Downscale (never upscale) so the longer side is at most ``max_side`` pixels."""
    if not max_side or max(image.size) <= max_side:
        return image
    scale = max_side / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.BICUBIC)


def image_data_url(image: Image.Image, max_side: int | None = None, fmt: str = "png", quality: int = 90) -> str:
    """``data:image/...;base64,...`` of the image, resized to ``max_side`` first."""
    fmt = fmt.lower()
    if fmt not in ("png", "jpeg", "webp"):
        raise BonError(f"image format must be png, jpeg or webp, got {fmt!r}")
    im = fit_max_side(image.convert("RGB"), max_side)
    buf = io.BytesIO()
    if fmt == "png":
        im.save(buf, format="PNG", optimize=False, compress_level=6)
    else:
        im.save(buf, format=fmt.upper(), quality=quality)
    return f"data:image/{fmt};base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# --- secrets ----------------------------------------------------------------------------------

_KEYISH = re.compile(r"(?i)(api[\s_-]*key[^:=\n]{0,20}[:=]\s*)(\S+)")
_BEARER = re.compile(r"(?i)(bearer\s+)(\S+)")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}")


def redact(text: str, *secrets: str | None) -> str:
    """``text`` without the given secrets nor anything that looks like a (masked) key."""
    text = str(text)
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "[redacted]")
    text = _KEYISH.sub(r"\1[redacted]", text)
    text = _BEARER.sub(r"\1[redacted]", text)
    return _SK.sub("[redacted]", text)


def safe_url(url: str) -> str:
    """The URL without user info or query string (either may carry a key)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


# --- preflight --------------------------------------------------------------------------------


def preflight(base_url: str, api_key: str | None, timeout: float, who: str, key_env: str | None = None) -> None:
    """One cheap ``GET {base_url}/models`` so a dead endpoint or a rejected key fails at once.

    Raises a one-line :class:`BonError` when the connection is refused, the host is unknown, nothing
    answers within ``timeout`` or the key is rejected (401/403). Any other answer, even a 404 from a
    server without ``/models``, means the endpoint is alive.
    """
    url = base_url.rstrip("/") + "/models"
    shown = safe_url(base_url)
    req = urllib.request.Request(url, method="GET")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    hint = "(set option preflight=false to skip this check)"
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - user-configured endpoint
            resp.read(1024)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            holder = f"${key_env}" if key_env else "the configured key"
            raise BonError(f"{who}: {shown} rejected the key in {holder} (HTTP {exc.code})") from None
        return
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            raise BonError(f"{who}: {shown} refused the connection; is the server running? {hint}") from None
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise BonError(f"{who}: {shown} did not answer within {timeout:g} s {hint}") from None
        raise BonError(f"{who}: cannot reach {shown} ({redact(str(reason), api_key)}) {hint}") from None
    except (socket.timeout, TimeoutError):
        raise BonError(f"{who}: {shown} did not answer within {timeout:g} s {hint}") from None
    except (ConnectionError, OSError, ValueError) as exc:
        raise BonError(f"{who}: cannot reach {shown} ({type(exc).__name__}: {redact(str(exc), api_key)}) {hint}") from None
