"""The one lenient reader of model answers: JSON objects inside prose, code fences, single quotes,
trailing commas, curly quotes, Python literals. Judges read verdicts and graders read scores with it;
what the object *means* stays with them (``judges.prompts.parse``, ``verifiers._grader``)."""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Iterator


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every ``{...}`` span of ``text`` that parses as an object, outermost first; a span that fails
    to parse is searched inside."""
    i = text.find("{")
    while i != -1:
        end = _span_end(text, i)
        obj = lenient_json(text[i:end]) if end else None
        if isinstance(obj, dict):
            yield obj
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)


def lenient_json(span: str) -> Any:
    """JSON, then JSON without trailing commas or curly quotes, then a Python literal; None if none fits."""
    try:
        return json.loads(span)
    except ValueError:
        pass
    fixed = span.translate(str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"}))
    fixed = re.sub(r",\s*([}\]])", r"\1", fixed)
    try:
        return json.loads(fixed)
    except ValueError:
        pass
    pythonic = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", fixed)))
    try:
        return ast.literal_eval(pythonic)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def norm_key(key: Any) -> str:
    """A key compared without case, spaces, dashes or underscores (``Better-Response`` = ``betterresponse``)."""
    return re.sub(r"[^a-z]", "", key.lower()) if isinstance(key, str) else ""


def key_entries(obj: Any, *keys: str) -> Iterator[tuple[dict[str, Any], Any]]:
    """``(object holding it, value)`` for each of ``keys`` (normalized by :func:`norm_key`) at any
    depth, outer objects first."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if norm_key(k) in keys:
                yield obj, v
        for v in obj.values():
            if isinstance(v, (dict, list)):
                yield from key_entries(v, *keys)
    elif isinstance(obj, list):
        for v in obj:
            yield from key_entries(v, *keys)


def snippet(text: str, n: int = 80) -> str:
    """The answer on one line, cut to ``n`` characters: enough to see why it was not understood."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def _span_end(text: str, start: int) -> int | None:
    """Index after the brace closing the one at ``start``, skipping braces inside quoted strings."""
    depth, quote, escaped = 0, "", False
    for j in range(start, len(text)):
        ch = text[j]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return None
