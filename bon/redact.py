"""Secrets out of everything bon writes or prints: one :func:`redact` for text and data.

A key reaches bon in four ways: in the environment variable ``api_key_env`` names, inside a
``base_url`` (``https://user:KEY@host/v1`` or ``...?key=KEY``), as the value of a secret flag in a
served judge's ``serve: {args: [--api-key, KEY]}``, or quoted back by a server in an error
(``Authorization: Bearer KEY``). Redaction masks URL user-info and query values, the values of
secret flags, bearer tokens and ``api_key=...`` / ``sk-...`` shapes, and every exact secret value bon
has seen in this process (:func:`remember`: configs and clients call it as they read keys), wherever
it appears. Config files, stats, reports, the judgment store, ``--dry-run`` and log lines all pass
through it, so a key never lands on disk or on the screen.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Iterable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"
MIN_SECRET = 8  # shorter remembered values are not masked everywhere (too likely to be ordinary text)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SECRET_FLAG = re.compile(r"(?i)^--?[a-z0-9_-]*?(api[-_]?key|token|secret|password|passwd|credentials?)$")
SECRET_QUERY = re.compile(r"(?i)(key|token|secret|password|passwd|sig|signature|auth|credential)")
URL_KEYS = ("base_url", "url", "endpoint")  # in these, every query value is masked, not only secret-named ones

_KEYISH = re.compile(r"(?i)(api[\s_-]*key(?![\s_-]*env)[^:=\n/\\]{0,20}[:=]\s*)([^\s\"',;]+)")  # not across a path
_BEARER = re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{8,})")
_AUTH_HEADER = re.compile(r"(?i)((?:authorization|x-api-key|api-key)[\"']?\s*[:=]\s*[\"']?)((?:bearer\s+|basic\s+)?[^\s\"',;}]+)")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s\"'<>]+")
_FLAG_IN_TEXT = re.compile(r"(?i)(--?[a-z0-9_-]*?(?:api[-_]?key|token|secret|password|passwd)(?:=|\s+))([^\s\"',;]+)")

_TRIGGER = re.compile(r"://|bearer|authoriz|api[\s_-]*key|sk-|token|secret|passw")  # on lowercased text: what any rule needs

_known: set[str] = set()


def remember(*values: Any) -> None:
    """Secret values seen in this process (a key read from the environment, the user-info of a URL):
    from now on :func:`redact` masks each of them wherever it appears."""
    for value in values:
        if isinstance(value, str) and len(value.strip()) >= MIN_SECRET:
            _known.add(value.strip())


def remember_url(url: Any) -> None:
    """The user-info and query values of a URL, remembered as secrets."""
    if not isinstance(url, str):
        return
    try:
        parts = urlsplit(url)
        remember(parts.username, parts.password, *(v for _, v in parse_qsl(parts.query)))
    except ValueError:
        return


def remember_args(args: Iterable[Any]) -> None:
    """The values of secret flags in a command line (``--api-key KEY``, ``--token=KEY``), remembered."""
    words = [str(w) for w in args]
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if SECRET_FLAG.match(flag):
            remember(value if eq else (words[i + 1] if i + 1 < len(words) else None))


def redact(value: Any, *secrets: str | None, key: str = "") -> Any:
    """``value`` (text, or data: mappings, lists, the strings within) with every secret masked, its shape
    kept; under a key named like a URL (``base_url``) every query value of the URL is masked too."""
    if isinstance(value, str):
        if key.lower() in URL_KEYS:
            value = redact_url(value, every_query=True)
        return redact_text(value, *secrets)
    if isinstance(value, dict):
        return {k: redact(v, *secrets, key=str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [redact(v, *secrets) for v in redact_args(value)]
        return tuple(items) if isinstance(value, tuple) else items
    return value


def redacted_json(value: Any) -> str:
    """``json.dumps(redact(value), default=str)``, in one scan of the JSON text when nothing in it could need
    masking (every stored verdict's metadata, where walking the data was a visible share of a demo's time).
    The scan is sound only on text without escapes, where each string of ``value`` stands verbatim (a rule that
    would fire on a string fires on the text); anything else takes the full :func:`redact`."""
    text = json.dumps(value, default=str)
    lowered = text.lower()
    if ("\\" in text or _TRIGGER.search(lowered) or "credential" in lowered  # secret flags (redact_args) too
            or any(secret in text for secret in _known)):
        return json.dumps(redact(value), default=str)
    return text


def redact_text(text: str, *secrets: str | None, mask: str = MASK) -> str:
    """One string without secrets: known values, URL credentials and secret-named query values, secret
    flags' values, authorization headers, bearer tokens, ``api_key=...`` and ``sk-...`` shapes (servers
    quote keys, often half-masked, in their errors)."""
    text = str(text)
    given = [s for s in secrets if s and len(s) >= 4]
    if not _TRIGGER.search(text.lower()) and not any(s in text for s in (*_known, *given)):
        return text  # the common case (a judge's answer, a label): one scan, nothing to mask
    for secret in sorted({*_known, *given}, key=len, reverse=True):
        text = text.replace(secret, mask)
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    for pattern in (_FLAG_IN_TEXT, _AUTH_HEADER, _KEYISH, _BEARER):
        text = pattern.sub(lambda m: m.group(1) + mask, text)
    return _SK.sub(mask, text)


def redact_url(url: str, every_query: bool = False) -> str:
    """The URL with its user-info masked, and its secret-named query values (every one with
    ``every_query``); scheme, host, path and the query's names kept."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        authority = f"{MASK}@{authority.rpartition('@')[2]}"
    path, qmark, query = tail.partition("?")
    if qmark:
        query, hash_, fragment = query.partition("#")
        fields = (pair.partition("=") for pair in query.split("&"))
        query = "&".join(f"{name}={MASK}" if eq and value and (every_query or SECRET_QUERY.search(name)) else f"{name}{eq}{value}"
                         for name, eq, value in fields) + hash_ + fragment
    return f"{scheme}://{authority}{path}{qmark}{query}"


def redact_args(args: Iterable[Any]) -> list[Any]:
    """A command line with the value of every secret flag masked (``--api-key KEY``, ``--api-key=KEY``)."""
    out: list[Any] = []
    hide_next = False
    for word in args:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = word.partition("=") if isinstance(word, str) else ("", "", "")
        if flag and SECRET_FLAG.match(flag):
            out.append(f"{flag}={MASK}" if eq else word)
            hide_next = not eq
        else:
            out.append(word)
    return out


SECRET_OPTION = re.compile(r"(?i)(^|_)(key|api_key|token|secret|password)$")  # as bon.plugins.SECRET


def remember_options(options: Any, who: str) -> None:
    """A plugin's options read for secrets: values of secret-named options, keys inside URLs, and the
    key held by the variable ``api_key_env`` names (that name checked first, never echoed)."""
    if not isinstance(options, dict):
        return
    for key, value in options.items():
        if key == "api_key_env":
            check_env_name(value, f"{who}: option api_key_env")
            if value:
                remember(os.environ.get(value))
        elif isinstance(value, dict):
            remember_options(value, who)
        elif isinstance(value, str) and SECRET_OPTION.search(str(key)):
            remember(value)
        elif isinstance(value, str) and "://" in value:
            remember_url(value)


def check_env_name(value: Any, who: str) -> None:
    """``api_key_env`` must NAME a variable; anything else may be the key itself, so it is never echoed."""
    from bon.errors import BonError

    if value not in (None, "") and not (isinstance(value, str) and ENV_NAME.fullmatch(value)):
        remember(value if isinstance(value, str) else None)
        raise BonError(f"{who}: api_key_env must be the NAME of an environment variable holding the key (letters, "
                       "digits and _), not the key itself; the value given is not shown")
