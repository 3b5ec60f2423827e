"""A small HTTP client for OpenAI-compatible APIs (images, chat), shared by generators and API judges.

Standard library only (``urllib``), so the light install can call APIs and tests can point it at a
local server. What it does:

- :func:`request` sends one request and retries what is worth retrying: HTTP 429, 408, 409 and 5xx,
  timeouts and dropped connections. The wait before attempt ``i+1`` is exponential backoff with full
  jitter (uniform in ``[0, min(max_backoff, backoff * 2**i)]``), except that a server's
  ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` header is honoured: the wait is
  then exactly what the server asked, and a request is given up when the server asks for longer than
  ``max_retry_after``. Other 4xx answers are final at once.
- Failures raise :class:`HttpFailure` whose ``reason`` is one line fit to store as a missing
  candidate's or verdict's reason (status, attempts, the server's error message, shortened).
- :func:`post_json` / :func:`get_bytes` wrap it; :func:`multipart` encodes ``multipart/form-data``
  (image edit uploads); :func:`bearer` builds the auth header from the *name* of an environment
  variable, so the key is read at call time and never stored in an object's options, identity,
  provenance, logs or files; :func:`bounded_map` runs calls on a thread pool with a concurrency limit
  and keeps the input order.

Every sleep goes through ``policy.sleep`` so tests can observe waits without spending them.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import random
import socket
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, TypeVar

from bon.errors import BonError

T = TypeVar("T")
R = TypeVar("R")

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 524, 529})


@dataclass
class RetryPolicy:
    """How hard to try: ``attempts`` in all (1 = no retry), timeouts in seconds."""

    attempts: int = 5
    timeout: float = 120.0
    backoff: float = 1.0
    max_backoff: float = 60.0
    max_retry_after: float = 300.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    rng: random.Random = field(default_factory=random.Random, repr=False)

    @classmethod
    def from_options(cls, where: str, retries: Any = 4, timeout: Any = 120.0, backoff: Any = 1.0,
                     max_backoff: Any = 60.0, max_retry_after: Any = 300.0) -> "RetryPolicy":
        for key, value in (("retries", retries), ("timeout", timeout), ("backoff", backoff),
                           ("max_backoff", max_backoff), ("max_retry_after", max_retry_after)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise BonError(f"{where}: {key} must be a non-negative number, got {value!r}")
        if timeout <= 0:
            raise BonError(f"{where}: timeout must be positive, got {timeout!r}")
        return cls(attempts=int(retries) + 1, timeout=float(timeout), backoff=float(backoff),
                   max_backoff=float(max_backoff), max_retry_after=float(max_retry_after))

    def backoff_delay(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(max_backoff, backoff * 2**attempt)] (attempt counts from 0)."""
        return self.rng.uniform(0.0, min(self.max_backoff, self.backoff * (2 ** attempt)))


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    attempts: int = 1

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


class HttpFailure(Exception):
    """A request that did not succeed; ``reason`` is one line, ``status`` the last HTTP status (if any)."""

    def __init__(self, reason: str, status: int | None = None, attempts: int = 1):
        super().__init__(reason)
        self.reason, self.status, self.attempts = reason, status, attempts


def bearer(api_key_env: str | None) -> dict[str, str]:
    """``Authorization`` header from the environment variable *named* ``api_key_env`` (none if unset/empty)."""
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env, "")
    return {"Authorization": f"Bearer {key}"} if key else {}


def retry_after(headers: dict[str, str]) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or a date)."""
    low = {k.lower(): v for k, v in headers.items()}
    ms = low.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = low.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_message(body: bytes, limit: int = 200) -> str:
    """The server's error text: ``error.message`` of a JSON body, else the body's first line."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data)
        msg = err.get("message") if isinstance(err, dict) else err
        if isinstance(msg, str) and msg.strip():
            text = msg.strip()
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def request(method: str, url: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
            policy: RetryPolicy | None = None) -> Response:
    """One HTTP request with retries (see the module doc); returns a 2xx response or raises HttpFailure."""
    policy = policy or RetryPolicy()
    headers = dict(headers or {})
    secret = headers.get("Authorization", "").partition(" ")[2]
    try:
        return _request(method, url, body, headers, policy)
    except HttpFailure as exc:
        if secret and secret in exc.reason:  # a server that echoes the key back must not get it into a file
            exc.reason = exc.reason.replace(secret, "***")
            exc.args = (exc.reason,)
        raise


def _request(method: str, url: str, body: bytes | None, headers: dict[str, str], policy: RetryPolicy) -> Response:
    last_reason, last_status = "no attempt made", None
    for attempt in range(max(1, policy.attempts)):
        wait: float | None = None
        try:
            req = urllib.request.Request(url, data=body, headers=headers, method=method)
            with urllib.request.urlopen(req, timeout=policy.timeout) as resp:  # noqa: S310 - URL is the user's API
                return Response(resp.status, dict(resp.headers.items()), resp.read(), attempt + 1)
        except urllib.error.HTTPError as exc:
            data = exc.read() if exc.fp is not None else b""
            hdrs = dict(exc.headers.items()) if exc.headers else {}
            last_status = exc.code
            message = error_message(data)
            last_reason = f"HTTP {exc.code}" + (f": {message}" if message else "")
            if exc.code not in RETRY_STATUS:
                raise HttpFailure(last_reason, exc.code, attempt + 1) from None
            wait = retry_after(hdrs)
            if wait is not None and wait > policy.max_retry_after:
                raise HttpFailure(f"{last_reason} (server asked to retry after {wait:.0f} s, "
                                  f"over max_retry_after {policy.max_retry_after:.0f} s)", exc.code, attempt + 1) from None
        except (TimeoutError, socket.timeout):
            last_status, last_reason = None, f"timed out after {policy.timeout:g} s"
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                last_status, last_reason = None, f"timed out after {policy.timeout:g} s"
            else:
                last_status, last_reason = None, f"connection failed: {reason}"
        except (ConnectionError, OSError, http.client.HTTPException) as exc:  # reset, refused, closed, cut short
            last_status, last_reason = None, f"connection failed: {type(exc).__name__}: {exc}"
        if attempt + 1 < policy.attempts:
            policy.sleep(policy.backoff_delay(attempt) if wait is None else wait)
    attempts = max(1, policy.attempts)
    suffix = f" (after {attempts} attempts)" if attempts > 1 else ""
    raise HttpFailure(last_reason + suffix, last_status, attempts)


def post_json(url: str, payload: dict[str, Any], headers: dict[str, str] | None = None,
              policy: RetryPolicy | None = None) -> Any:
    """POST a JSON body; return the decoded JSON answer (HttpFailure if it is not JSON)."""
    hdrs = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
    resp = request("POST", url, body=json.dumps(payload).encode("utf-8"), headers=hdrs, policy=policy)
    return decode_json(resp)


def post_multipart(url: str, fields: dict[str, Any], files: Sequence[tuple[str, str, bytes, str]],
                   headers: dict[str, str] | None = None, policy: RetryPolicy | None = None) -> Any:
    body, content_type = multipart(fields, files)
    hdrs = {"Content-Type": content_type, "Accept": "application/json", **(headers or {})}
    return decode_json(request("POST", url, body=body, headers=hdrs, policy=policy))


def get_bytes(url: str, headers: dict[str, str] | None = None, policy: RetryPolicy | None = None) -> bytes:
    return request("GET", url, headers=headers, policy=policy).body


def decode_json(resp: Response) -> Any:
    try:
        return resp.json()
    except (UnicodeDecodeError, ValueError):
        snippet = resp.body[:60].decode("utf-8", "replace").replace("\n", " ")
        raise HttpFailure(f"malformed response: not JSON ({snippet!r})", resp.status) from None


def multipart(fields: dict[str, Any], files: Sequence[tuple[str, str, bytes, str]]) -> tuple[bytes, str]:
    """Encode form fields and files ``(field, filename, data, content type)`` as multipart/form-data."""
    boundary = f"bon-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for name, value in fields.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{text}\r\n'.encode())
    for name, filename, data, ctype in files:
        head = (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n").encode()
        parts.append(head + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def bounded_map(fn: Callable[[T], R], items: Iterable[T], max_concurrency: int) -> list[R]:
    """``[fn(x) for x in items]`` on at most ``max_concurrency`` threads, results in input order."""
    items = list(items)
    if max_concurrency <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(max_concurrency, len(items))) as pool:
        return list(pool.map(fn, items))


def join_url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")
