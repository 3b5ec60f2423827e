"""Read a judge's free-text answer into a :class:`Verdict`.

LLM judges wrap the requested JSON in code fences and prose, use single quotes or trailing commas,
write "Response A" for "A", or stop mid-object. The parser accepts all of that, but it never guesses:
an answer that names both letters, or none, is recorded as missing with a short snippet, never a vote.

Order of attempts: (1) every JSON-like object in the text, leniently parsed, that has a
``better_response`` key; (2) a ``better_response: X`` fragment, for objects cut off or malformed;
(3) a ``score`` alone (4-6 means A, 1-3 means B, as the rubric defines); (4) only as a last resort,
a bare letter on the last line ("B", "Final answer: B", "[[B]]").
"""

from __future__ import annotations

import re
from typing import Any

from bon.backends.answers import json_objects, key_entries, norm_key, snippet
from bon.protocol import Verdict

_LETTER = re.compile(
    r"^(?:the\s+)?(?:response|assistant|option|answer|model|output)?[\s_\-:]*[(\[]*\s*([ab])\s*[)\]]*"
    r"(?:\s+is\s+(?:the\s+)?better)?[\s.!]*$",
    re.IGNORECASE,
)
_KEY_VALUE = re.compile(
    r"""better[\s_\-]?response['"]?\s*[:=]\s*['"]?\s*(?:response|assistant)?[\s_\-]*([ab])"""
    r"""(?=\s*(?:$|[\n'"}\],.;!)]|or\s|/))(\s*['"]?\s*(?:or\s|/))?""",
    re.IGNORECASE,
)
_KEY_SCORE = re.compile(r"""['"]?score['"]?\s*[:=]\s*['"]?([1-6])\b""", re.IGNORECASE)
_LAST_LINE = re.compile(
    r"^(?:(?:my\s+)?(?:final\s+)?(?:answer|verdict|judg(?:e)?ment|choice|decision|preference)\s*(?:is)?\s*[:\-]?\s*)?"
    r"(?:response|assistant|option)?\s*[(\[]*\s*([ab])\s*[)\]]*\s*[.!]?$",
    re.IGNORECASE,
)
_DOUBLE_BRACKET = re.compile(r"\[\[\s*([ab])\s*\]\]", re.IGNORECASE)


def parse_answer(text: str) -> Verdict:
    """The verdict in ``text``; ``Verdict.failed("unparseable: ...")`` when it is not unambiguous."""
    if not isinstance(text, str) or not text.strip():
        return Verdict.failed("unparseable: empty answer")
    found = [(holder, raw, _letter(raw)) for obj in json_objects(text) for holder, raw in key_entries(obj, "betterresponse")]
    if found:
        letters = {letter for _, _, letter in found if letter}
        if len(letters) == 1:
            letter = letters.pop()
            holder = [h for h, _, l in found if l == letter][-1]
            return _verdict(letter, holder)
        if letters:
            return _fail(text, "ambiguous, both A and B given")
        return _fail(text, f"better_response is {str(found[-1][1])[:20]!r}")
    pairs = [(m.group(1).upper(), bool(m.group(2))) for m in _KEY_VALUE.finditer(text)]
    if pairs:
        letters = {x for x, _ in pairs}
        if len(letters) == 1 and not any(echo for _, echo in pairs):
            letter = letters.pop()
            scores = {int(x) for x in _KEY_SCORE.findall(text)}
            score = scores.pop() if len(scores) == 1 else None
            if score is not None and (score >= 4) != (letter == "A"):
                score = None
            return Verdict(better=letter, score=score, meta={"parsed_by": "key"})
        return _fail(text, "ambiguous better_response")
    scores = [s for obj in json_objects(text) for s in (_score(v) for _, v in key_entries(obj, "score")) if s is not None]
    if scores and len(set(scores)) == 1:
        return Verdict(better="A" if scores[0] >= 4 else "B", score=scores[0], meta={"parsed_by": "score"})
    letter = _last_resort(text)
    if letter:
        return Verdict(better=letter, meta={"parsed_by": "letter"})
    return _fail(text)


def _verdict(letter: str, holder: dict[str, Any]) -> Verdict:
    """Letter plus the score and confidence found beside it in the same object."""
    meta: dict[str, Any] = {"parsed_by": "json"}
    score = _score(_get(holder, "score"))
    if score is not None and (score >= 4) != (letter == "A"):
        meta["score_conflict"] = score  # the letter is the answer MMRB2 scores; a contradicting score is dropped
        score = None
    conf = _get(holder, "confidence")
    if isinstance(conf, (int, float)) and not isinstance(conf, bool):
        meta["confidence"] = float(conf)
    return Verdict(better=letter, score=score, meta=meta)


def _fail(text: str, why: str = "") -> Verdict:
    return Verdict.failed(f"unparseable: {why + ': ' if why else ''}{snippet(text, 61)}")


def _letter(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    m = _LETTER.match(value.strip().strip("'\"`*"))
    return m.group(1).upper() if m else None


def _score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not re.fullmatch(r"[1-6](?:\.0+)?", value):
            return None
        value = float(value)
    if isinstance(value, (int, float)) and float(value).is_integer() and 1 <= value <= 6:
        return int(value)
    return None


def _get(obj: dict[str, Any], key: str) -> Any:
    return next((v for k, v in obj.items() if norm_key(k) == key), None)


def _last_resort(text: str) -> str | None:
    """A lone letter on the last line, or one ``[[X]]`` letter throughout; anything else is ambiguous."""
    brackets = {m.upper() for m in _DOUBLE_BRACKET.findall(text)}
    if len(brackets) == 1:
        return brackets.pop()
    if brackets:
        return None
    lines = [re.sub(r"[*_`]", "", ln).strip().strip("#> ").strip() for ln in text.strip().splitlines()]
    lines = [ln for ln in lines if ln]
    m = _LAST_LINE.match(lines[-1]) if lines else None
    return m.group(1).upper() if m else None
