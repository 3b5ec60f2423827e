"""``emma``: EMMA-style answer extraction and exact match against the reference (multimodal reasoning).

The final answer is taken from the candidate's text by the first rule that finds one:

1. the last ``\\boxed{...}`` (nested braces allowed; a ``\\text{...}`` inside is unwrapped);
2. the last ``Answer: ...`` / ``Final answer: ...`` line;
3. the last "the (final / correct) answer is ..." phrase;
4. a short reply as a whole (one line of at most 40 characters: ``C``, ``(C)``, ``C.``, ``12 cm``);
5. for multiple choice, the last option letter written as ``(C)`` / ``option C``; for open-ended
   questions, the last number in the text.

Then, by the prompt's ``metadata.type``:

- ``Multiple Choice``: the answer becomes a letter (``C``, ``(C)``, ``C.``, ``C: 5``, ``option c``), or the
  letter of the option whose text it equals; correct when it equals the reference letter;
- open-ended: correct when the normalised strings agree (case, spaces, ``$``, ``\\text{}``, a trailing
  period ignored), or both read as numbers that agree to 2 decimals (EMMA's rule) or within
  ``rel_tol``; numbers may carry units (``9 cm^2``), thousands separators, ``%``, ``a/b``,
  ``\\frac{a}{b}``, scientific notation (``3e-5``, ``3 \\times 10^{-5}``) or be spelled (``seven``);
  a reference smaller than 0.1 must agree to 2 significant figures instead of 2 decimals.

Score 1.0 for a correct answer, 0.0 for a wrong one or none found (the candidate's failure, recorded
as ``rule: none``). A prompt without a reference answer (``metadata.answer``) is a missing score.

Options: ``rel_tol`` (default 0: only the 2-decimal rule), ``use_generator_answer`` (default false: when
the text yields nothing, use ``provenance.final_answer`` from the ``vlm-answers`` generator).
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

from bon.content import Candidate, Prompt
from bon.errors import BonError
from bon.plugins import Score, Verifier

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
ANSWER_LINE = re.compile(r"(?im)^[\s>*#_\-]*(?:the\s+)?(?:final\s+)?answer\s*\**\s*[:：]\s*\**\s*(.+?)\s*$")
ANSWER_IS = re.compile(r"(?i)\b(?:final|correct)?\s*answer\s+(?:is|should\s+be|would\s+be)\s*[:：]?\s*(.+?)(?:\.\s|\.$|\n|$)")
LETTER_MARK = re.compile(r"(?:\(([A-Z])\)|\boption\s+([A-Z])\b)", re.IGNORECASE)
NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
         "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
         "hundred": 100}


def boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}``, braces balanced."""
    found = None
    start = text.find("\\boxed{")
    while start != -1:
        i, depth = start + len("\\boxed{"), 1
        j = i
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth == 0:
            found = text[i : j - 1]
        start = text.find("\\boxed{", j if depth == 0 else start + 1)
    return found


def unwrap_latex(s: str) -> str:
    s = s.strip()
    for _ in range(3):
        s = re.sub(r"\\(?:text|mathrm|textbf|mathbf|operatorname)\{([^{}]*)\}", r"\1", s)
    return s.strip().strip("$").strip()


def extract(text: str, multiple_choice: bool) -> tuple[str | None, str]:
    """``(answer, rule)``; ``(None, "none")`` when no rule finds one."""
    text = (text or "").strip()
    if not text:
        return None, "none"
    b = boxed(text)
    if b is not None and b.strip():
        return unwrap_latex(b), "boxed"
    lines = ANSWER_LINE.findall(text)
    if lines and lines[-1].strip():
        return unwrap_latex(lines[-1]), "answer line"
    phrases = ANSWER_IS.findall(text)
    if phrases and phrases[-1].strip():
        return unwrap_latex(phrases[-1]), "answer is"
    if "\n" not in text and len(text) <= 40:
        return unwrap_latex(text), "whole reply"
    if multiple_choice:
        marks = LETTER_MARK.findall(text)
        if marks:
            return (marks[-1][0] or marks[-1][1]).upper(), "option mark"
        return None, "none"
    nums = NUMBER.findall(text)
    if nums:
        return nums[-1], "last number"
    return None, "none"


def normalise(s: str) -> str:
    s = unicodedata.normalize("NFKC", unwrap_latex(str(s))).lower()
    s = s.replace("\\%", "%").replace("\\,", "").replace("\\ ", "").replace("\\!", "")
    s = re.sub(r"\s+", "", s)
    return s.rstrip(".").strip()


def as_letter(answer: str, options: list[str]) -> str | None:
    """The option letter an answer names, or None."""
    n = max(len(options), 1)
    a = unwrap_latex(answer).strip()
    m = re.fullmatch(r"(?i)(?:option\s+|choice\s+)?[(\[]?\s*([A-Z])\s*[)\]]?[.:]?", a)
    if m and (not options or m.group(1).upper() in LETTERS[:n]):
        return m.group(1).upper()
    m = re.match(r"(?i)^(?:option\s+)?(?:\(([A-Z])\)|\[([A-Z])\]|([A-Z])[.:)])\s*\S", a)
    if m:
        letter = next(g for g in m.groups() if g).upper()
        if letter in LETTERS[:n]:
            return letter
    hits = [LETTERS[k] for k, o in enumerate(options) if normalise(o) and normalise(o) == normalise(a)]
    return hits[0] if len(hits) == 1 else None


def as_number(s: str) -> float | None:
    """A number from an answer string (units, separators, %, fractions, scientific notation, words)."""
    t = unwrap_latex(str(s)).strip().lower().replace("−", "-")
    t = t.replace("\\%", "%").replace("\\cdot", "*").replace("\\times", "*").replace("×", "*")
    m = re.fullmatch(r"\s*\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}\s*", t)
    if m:
        a, b = as_number(m.group(1)), as_number(m.group(2))
        return a / b if a is not None and b not in (None, 0) else None
    m = re.match(r"\s*([-+]?\d+(?:\.\d+)?)\s*\*\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?", t)
    if m:
        return float(m.group(1)) * 10 ** int(m.group(2))
    m = re.match(r"\s*([-+]?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\b", t)
    if m and float(m.group(2)) != 0:
        return float(m.group(1)) / float(m.group(2))
    m = re.match(r"\s*([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?)", t)
    if m:
        try:
            return float(m.group(1).replace(",", ""))
        except ValueError:
            return None
    word = re.fullmatch(r"\s*([a-z]+)\s*", t)
    if word and word.group(1) in WORDS:
        return float(WORDS[word.group(1)])
    return None


def same_number(a: float, b: float, rel_tol: float) -> bool:
    """EMMA's rule (equal to 2 decimals); for a reference below 0.1 in size, to 2 significant figures
    instead, since 2 decimals would call 0.001 and 0.004 equal; or within ``rel_tol``."""
    if rel_tol > 0 and math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0):
        return True
    if abs(b) >= 0.1 or b == 0:
        return round(a, 2) == round(b, 2)
    return float(f"{a:.2g}") == float(f"{b:.2g}")


def judge(answer: str | None, reference: str, options: list[str], multiple_choice: bool, rel_tol: float = 0.0) -> tuple[bool, dict]:
    """Whether ``answer`` matches ``reference``; the second value says how it was read."""
    if answer is None:
        return False, {"read_as": None}
    if multiple_choice:
        letter = as_letter(answer, options)
        ref = as_letter(reference, options) or reference.strip().upper()
        return letter is not None and letter == ref, {"read_as": letter}
    if normalise(answer) == normalise(reference):
        return True, {"read_as": normalise(answer), "match": "string"}
    a, r = as_number(answer), as_number(reference)
    if a is not None and r is not None:
        return same_number(a, r, rel_tol), {"read_as": a, "reference_number": r, "match": "number"}
    return False, {"read_as": normalise(answer), "match": "string"}


class EmmaVerifier(Verifier):
    plugin = "emma"
    version = 1

    def __init__(self, name: str | None = None, rel_tol: float = 0.0, use_generator_answer: bool = False) -> None:
        self.name = name or self.plugin
        if float(rel_tol) < 0:
            raise BonError(f"{self.name}: rel_tol must not be negative, got {rel_tol}")
        self.rel_tol = float(rel_tol)
        self.use_generator_answer = bool(use_generator_answer)

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "plugin": self.plugin, "rel_tol": self.rel_tol,
                "use_generator_answer": self.use_generator_answer}

    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        meta = prompt.metadata
        reference = meta.get("answer")
        if reference is None or str(reference).strip() == "":
            return Score(None, missing=f"{self.name}: prompt {prompt.id} has no reference answer (metadata.answer)")
        reference = str(reference).strip()
        options = [str(o) for o in meta.get("options") or []]
        qtype = str(meta.get("type") or ("Multiple Choice" if options else "Open-ended"))
        mc = qtype.lower().startswith("multiple")
        answer, rule = extract(candidate.content.text, mc)
        if answer is None and self.use_generator_answer and candidate.provenance.get("final_answer"):
            answer, rule = str(candidate.provenance["final_answer"]), "generator final_answer"
        correct, how = judge(answer, reference, options, mc, self.rel_tol)
        if not correct and mc and answer is not None and meta.get("answer_text"):
            alt, how2 = judge(answer, str(meta["answer_text"]), [], False, self.rel_tol)  # the option's text itself
            if alt:
                correct, how = True, {**how2, "match": "option text"}
        details = {"extracted": answer, "rule": rule, "reference": reference, "type": qtype, "correct": correct, **how}
        return Score(1.0 if correct else 0.0, details)
