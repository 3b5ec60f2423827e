"""Prompt language: a structured spec per prompt, the English that states it, and a parser back.

A prompt's spec (``prompt.metadata["spec"]``) has a *public* part, everything its text says, and
ground-truth keys only the world knows (intended scenes, the reference answer). Judges never read
metadata: they call :func:`interpret` on the prompt text and get the public part back exactly.
"""

from __future__ import annotations

import re
from typing import Any

from bon.content import Prompt
from bon.errors import BonError
from generators.synthetic.scene import PALETTE, SHAPES, seed_of

COLOURS = tuple(PALETTE)
RELATIONS = ("left of", "right of", "above", "below")
REL_PHRASE = {"left of": "to the left of", "right of": "to the right of", "above": "above", "below": "below"}
PHRASE_REL = {v: k for k, v in REL_PHRASE.items()}
POSITIONS = ("leftmost", "rightmost", "topmost", "bottommost")
POSITION_PHRASE = {
    "leftmost": "furthest to the left", "rightmost": "furthest to the right",
    "topmost": "nearest the top", "bottommost": "nearest the bottom",
}
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve")
WORD_NUMBER = {w: i for i, w in enumerate(NUMBER_WORDS)}

# keys of a spec that its text does not state
GROUND_TRUTH = ("reference", "input", "output", "initial", "scenes", "scene", "answer", "input_artefacts")

_C = "|".join(COLOURS)
_S = "|".join(SHAPES)
_REL = "|".join(re.escape(p) for p in sorted(PHRASE_REL, key=len, reverse=True))
_THE = rf"the ({_C}) ({_S})"


def public(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of a spec that the prompt text states (what :func:`interpret` recovers)."""
    return {k: v for k, v in spec.items() if k not in GROUND_TRUTH}


# --- noun phrases -----------------------------------------------------------------------------


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def thing(obj: dict[str, str], definite: bool = False) -> str:
    """``a red circle`` / ``the red circle``."""
    words = f"{obj['colour']} {obj['shape']}"
    return f"the {words}" if definite else f"{article(words)} {words}"


def group_phrase(group: dict[str, Any]) -> str:
    n = int(group["count"])
    if n == 1:
        return thing(group)
    return f"{NUMBER_WORDS[n]} {group['colour']} {group['shape']}s"


def join_list(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def kind_phrase(kind: dict[str, str | None]) -> str:
    """Plural noun phrase for a (colour?, shape?) filter: ``red circles``, ``red objects``, ``circles``."""
    colour, shape = kind.get("colour"), kind.get("shape")
    noun = f"{shape}s" if shape else "objects"
    return f"{colour} {noun}" if colour else noun


_KIND_RE = rf"(?:({_C}) )?({'|'.join(s + 's' for s in SHAPES)}|objects)"


def parse_kind(colour: str | None, noun: str) -> dict[str, str | None]:
    return {"colour": colour or None, "shape": None if noun == "objects" else noun[:-1]}


# --- describe ---------------------------------------------------------------------------------

T2I_OPENERS = ("Draw {body}.", "Generate an image of {body}.", "Create a picture with {body}.",
               "Render {body} on a plain background.")
REL_CLAUSES = (", with {a} {rel} {b}", ", where {a} is {rel} {b}", ", {a} placed {rel} {b}")
TEXT_CLAUSES = (' and a white sign at the bottom that says "{t}"', ', plus a white banner reading "{t}"')
ANSWER_FORMAT = "Think it through, then give your final answer on the last line as 'Answer: <answer>'."
INTERLEAVED_TAIL = "Show the scene after each step, one short sentence and one image per step."


def describe(task: str, spec: dict[str, Any], seed: object = 0) -> str:
    """The prompt text stating ``spec``; ``seed`` picks among phrasings."""
    v = seed_of("phrasing", task, seed)
    if task == "t2i":
        return describe_t2i(spec, v)
    if task == "edit":
        return describe_op(spec, v) + ". Keep everything else unchanged."
    if task == "interleaved":
        return describe_interleaved(spec, v)
    if task == "reasoning":
        return describe_question(spec["question"], v) + " " + ANSWER_FORMAT
    raise BonError(f"unknown task {task!r}")


def describe_t2i(spec: dict[str, Any], v: int) -> str:
    groups = spec["groups"]
    body = join_list([group_phrase(g) for g in groups])
    for i, r in enumerate(spec.get("relations", [])):
        clause = REL_CLAUSES[(v >> (4 + i)) % len(REL_CLAUSES)]
        body += clause.format(a=thing(groups[r["a"]], True), rel=REL_PHRASE[r["rel"]], b=thing(groups[r["b"]], True))
    if spec.get("text") is not None:
        body += TEXT_CLAUSES[(v >> 8) % len(TEXT_CLAUSES)].format(t=spec["text"])
    return T2I_OPENERS[v % len(T2I_OPENERS)].format(body=body)


def describe_op(step: dict[str, Any], v: int, capital: bool = True) -> str:
    """One edit operation as an imperative sentence (without the full stop)."""
    op = step["op"]
    if op == "recolour":
        forms = ("Change the colour of {o} to {c}", "Make {o} {c}", "Recolour {o} {c}")
        s = forms[v % 3].format(o=thing(step["object"], True), c=step["new_colour"])
    elif op == "add":
        s = ("Add {o}", "Put {o}")[v % 2].format(o=thing(step["object"]))
        if step.get("relation"):
            s += f" {REL_PHRASE[step['relation']['rel']]} {thing(step['relation']['anchor'], True)}"
    elif op == "remove":
        forms = ("Remove {o}", "Delete {o} from the picture", "Take out {o}")
        s = forms[v % 3].format(o=thing(step["object"], True))
    elif op == "move":
        forms = ("Move {o} so that it is {r} {a}", "Move {o} to a spot {r} {a}")
        rel = step["relation"]
        s = forms[v % 2].format(o=thing(step["object"], True), r=REL_PHRASE[rel["rel"]], a=thing(rel["anchor"], True))
    elif op == "retext":
        s = ('Change the sign to say "{t}"', 'Replace the text on the sign with "{t}"')[v % 2].format(t=step["text"])
    else:
        raise BonError(f"unknown edit operation {op!r}")
    return s if capital else s[0].lower() + s[1:]


def describe_interleaved(spec: dict[str, Any], v: int) -> str:
    start = join_list([thing(o) for o in spec["start"]])
    parts = [f"Start with {start}."]
    for i, step in enumerate(spec["steps"]):
        parts.append(f"Step {i + 1}: {describe_op(step, v >> (3 * i), capital=False)}.")
    parts.append(INTERLEAVED_TAIL)
    return " ".join(parts)


def describe_question(q: dict[str, Any], v: int) -> str:
    kind = q["kind"]
    if kind == "count":
        forms = ("How many {k} are there in the image?", "Count the {k} in the image.", "How many {k} can you see?")
        return forms[v % 3].format(k=kind_phrase(q["target"]))
    if kind == "colour_of":
        forms = ("What colour is the {p} object?", "Which colour does the object {pp} have?")
        return forms[v % 2].format(p=q["position"], pp=POSITION_PHRASE[q["position"]])
    if kind == "shape_of":
        forms = ("What shape is the {p} object?", "Which shape is {pp}?")
        return forms[v % 2].format(p=q["position"], pp=POSITION_PHRASE[q["position"]])
    if kind == "more":
        forms = ("Are there more {a} than {b}? Answer yes or no.", "Does the image contain more {a} than {b}? Answer yes or no.")
        return forms[v % 2].format(a=kind_phrase(q["a"]), b=kind_phrase(q["b"]))
    raise BonError(f"unknown question kind {kind!r}")


# --- interpret --------------------------------------------------------------------------------


def interpret(prompt: Prompt) -> dict[str, Any]:
    """Parse the prompt's text back into the public spec (raises BonError if it is not this world's)."""
    text = prompt.content.text
    parsers = {"t2i": parse_t2i, "edit": lambda t: parse_op(re.split(r"(?<=\.)\s", t.strip())[0]),  # the first sentence
               "interleaved": parse_interleaved, "reasoning": parse_reasoning}
    try:
        return parsers[prompt.task](text)
    except (KeyError, ValueError, AttributeError, IndexError) as exc:
        raise BonError(f"prompt {prompt.id}: not a synthetic-world prompt ({exc})") from None


def parse_t2i(text: str) -> dict[str, Any]:
    quoted = re.search(r'"([A-Z0-9 ]*)"', text)
    body = text[: quoted.start()] if quoted else text
    groups = []
    pattern = rf"\b(a|an|{'|'.join(NUMBER_WORDS[1:])}) ({_C}) ({_S})s?\b"
    for m in re.finditer(pattern, body):
        n = 1 if m.group(1) in ("a", "an") else WORD_NUMBER[m.group(1)]
        groups.append({"count": n, "colour": m.group(2), "shape": m.group(3)})
    if not groups:
        raise ValueError("no objects named")
    index = {(g["colour"], g["shape"]): i for i, g in enumerate(groups)}
    relations = []
    for m in re.finditer(rf"{_THE} (?:is |placed )?({_REL}) {_THE}", body):
        a, b = index[(m.group(1), m.group(2))], index[(m.group(4), m.group(5))]
        relations.append({"a": a, "rel": PHRASE_REL[m.group(3)], "b": b})
    return {"groups": groups, "relations": relations, "text": quoted.group(1) if quoted else None}


def parse_op(sentence: str) -> dict[str, Any]:
    """One imperative edit sentence back into an operation dict (inverse of :func:`describe_op`)."""
    s = sentence.strip().rstrip(".")
    low = s.lower()
    if m := re.search(r'"([A-Z0-9 ]*)"', s):
        return {"op": "retext", "text": m.group(1)}
    if low.startswith("move"):
        m = re.match(rf"move {_THE} (?:so that it is|to a spot) ({_REL}) {_THE}", low)
        return {"op": "move", "object": obj(m.group(1), m.group(2)),
                "relation": {"rel": PHRASE_REL[m.group(3)], "anchor": obj(m.group(4), m.group(5))}}
    if low.startswith(("add", "put")):
        m = re.match(rf"(?:add|put) (?:a|an) ({_C}) ({_S})(?: ({_REL}) {_THE})?$", low)
        rel = None
        if m.group(3):
            rel = {"rel": PHRASE_REL[m.group(3)], "anchor": obj(m.group(4), m.group(5))}
        return {"op": "add", "object": obj(m.group(1), m.group(2)), "relation": rel}
    if low.startswith(("remove", "delete", "take out")):
        m = re.match(rf"(?:remove|delete|take out) {_THE}", low)
        return {"op": "remove", "object": obj(m.group(1), m.group(2))}
    m = re.match(rf"(?:change the colour of|make|recolour) {_THE}(?: to)? ({_C})$", low)
    return {"op": "recolour", "object": obj(m.group(1), m.group(2)), "new_colour": m.group(3)}


def obj(colour: str, shape: str) -> dict[str, str]:
    return {"colour": colour, "shape": shape}


def parse_interleaved(text: str) -> dict[str, Any]:
    m = re.search(r"Start with (.*?)\.", text)
    start = [obj(c, s) for c, s in re.findall(rf"\b(?:a|an) ({_C}) ({_S})\b", m.group(1))]
    steps = [parse_op(body) for _, body in re.findall(r"Step (\d+): (.*?)(?=\.(?:\s|$))", text)]
    if not steps:
        raise ValueError("no steps")
    return {"start": start, "steps": steps}


def parse_reasoning(text: str) -> dict[str, Any]:
    low = text.lower()
    if m := re.search(rf"(?:how many|count the) {_KIND_RE}", low):
        return {"question": {"kind": "count", "target": parse_kind(m.group(1), m.group(2))}}
    if m := re.search(rf"more {_KIND_RE} than {_KIND_RE}", low):
        a, b = parse_kind(m.group(1), m.group(2)), parse_kind(m.group(3), m.group(4))
        return {"question": {"kind": "more", "a": a, "b": b}}
    pos = position_in(low)
    if "colour" in low:
        return {"question": {"kind": "colour_of", "position": pos}}
    if "shape" in low:
        return {"question": {"kind": "shape_of", "position": pos}}
    raise ValueError("unknown question")


def position_in(low: str) -> str:
    for p in POSITIONS:
        if p in low or POSITION_PHRASE[p] in low:
            return p
    raise ValueError("no position named")


# --- answers ----------------------------------------------------------------------------------


def normalise_answer(text: str | None) -> str | None:
    """Canonical answer: lower case, no punctuation, number words as digits, shapes singular."""
    if text is None:
        return None
    s = re.sub(r"[^a-z0-9 ]", " ", text.lower())
    words = [w for w in s.split() if w not in ("the", "a", "an", "is", "it", "object", "objects")]
    if not words:
        return None
    w = words[0] if len(words) == 1 else " ".join(words)
    if w in WORD_NUMBER:
        return str(WORD_NUMBER[w])
    if w.endswith("s") and w[:-1] in SHAPES:
        return w[:-1]
    if w == "color":
        return "colour"
    return w


def extract_answer(text: str) -> str | None:
    """The value on the last ``Answer: <x>`` line, normalised; None when there is no such line."""
    hits = re.findall(r"(?im)^\s*\**\s*(?:final\s+)?answer\s*\**\s*[:\-]\s*\**(.+?)\**\s*$", text)
    return normalise_answer(hits[-1]) if hits else None
