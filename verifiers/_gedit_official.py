"""GEdit-Bench's official evaluation, item by item: what ``GEdit-Bench/test_gedit_score.py`` asks through
VIEScore and ``calculate_statistics.py`` averages, in stepfun-ai/Step1X-Edit (read at commit
570eba6ebda0c45c013983a483afbf2fd12bfcbc).

Per edit, two requests (VIEScore's ``tie`` task), each one user message, text first:

- SC: the SC prompt (VIEScore's context, two-image edit rule and SC rule joined by newlines, ``<instruction>``
  replaced), then the source image and the edited image resized to the source's size;
- PQ: the PQ prompt (context and PQ rule), then the edited image.

The official client sends the model, the message and ``max_tokens: 1400``: no temperature (the API's
default), images as JPEG (PIL's default quality, 75).

Replies are read as VIEScore's ``mllm_output_to_dict`` reads them (see
:func:`read_reply`): the text between two ``||V^=^V||`` delimiters, else from the first ``{`` to the last
``}``, else a bare ``[a, b]`` list or a bare number 0-10; the JSON's ``score`` (a number becomes a
one-element list), with a repair of unquoted keys when the JSON does not load.

The control flow is the official one, two nested loops:

- one *evaluation* (VIEScore's ``evaluate``) asks both questions until both replies read; when either
  cannot be read, *both* are asked again, and from its second try a reply with no JSON at all is a random
  guess ``score: [0..10]``. SC = min(SC scores), PQ = min(PQ scores), overall = sqrt(SC x PQ), on 0-10;
- when the replies read but give no usable score (a JSON without ``score``, ``{"score": "7"}``, an empty
  list, ``null``, a negative SC x PQ), ``evaluate`` raises and ``test_gedit_score.process_single_item``
  starts a new evaluation with its try counter afresh (the next replies are read without guessing), up to
  its ``max_retries`` (10000, bon's ``max_evaluations``); after the last one the item has no score (the
  official run leaves it out of its results).

Aggregation (``calculate_statistics.py``), per instruction language: the mean of SC, PQ and overall per
``task_type``, then the mean of the category means; the same over the items with ``Intersection_exist``.

Where the official code would ask without end inside one evaluation (a reply whose JSON cannot be
repaired, asked again and again), bon asks at most ``max_attempts`` times and then applies ``on_failure``:
``official`` (the random guess, seeded by the item), ``zero`` (the question scores 0, what published result
files hold for failed calls) or ``missing`` (no score). With ``zero`` or ``missing`` no reply is guessed at
all; ``zero`` and ``missing`` also decide an item whose evaluations all ended without a usable score
(``official``: no score, as the official run). The official code waits 2, 4, 6... seconds before each new
evaluation and also restarts on a failed HTTP call; bon does not wait, and a transient failure (timeout,
5xx) is a transient missing score, retried on a rerun, whatever the policy. Two departures on values the
official code would keep: a score ``true``/``false`` counts as 1/0 (the official CSV would hold the words),
and a non-finite overall (``NaN`` in a reply) is a missing score with its reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from typing import Any

from PIL import Image, ImageOps

from bon.errors import BonError
from bon.plugins import Score
from verifiers._grader import Grader, GradingFailed, ReplayGrader, ReplayMissing, Request, snippet
from verifiers._official import find_file, python_constants, texts_digest

REPO = "stepfun-ai/Step1X-Edit"
COMMIT = "570eba6ebda0c45c013983a483afbf2fd12bfcbc"
PROMPT_FILES = ("GEdit-Bench/viescore/vie_prompts.py", "viescore/vie_prompts.py", "vie_prompts.py")
PROMPT_NAMES = ("_context_no_delimit", "_prompts_0shot_two_image_edit_rule", "_prompts_0shot_tie_rule_SC",
                "_prompts_0shot_rule_PQ")
CATEGORIES = ("background_change", "color_alter", "material_alter", "motion_change", "ps_human", "style_change",
              "subject-add", "subject-remove", "subject-replace", "text_change", "tone_transfer")
ON_FAILURE = ("official", "zero", "missing")
MAX_TOKENS = 1400
# the official client's request, unless the user sets these: no temperature, full-size JPEG at PIL's default
# quality (75), max_tokens
OFFICIAL_API = {"temperature": None, "max_image_side": None, "image_format": "jpeg", "image_quality": 75,
                "max_tokens_param": "max_tokens"}
DELIMITER = "||V^=^V||"


class _Mark:
    """A reader's verdict that no JSON value can be mistaken for."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNREADABLE = _Mark("UNREADABLE")  # the official reader's False: asked again within the evaluation
GUESS = _Mark("GUESS")  # no JSON at all from the second try: the official random guess
RAISED = _Mark("RAISED")  # the official reader itself raises: a new evaluation
RATE_LIMIT = "rate_limit_exceeded"
QUESTIONS = ("sc", "pq")
MAX_EVALUATIONS = 10000  # process_single_item's max_retries
BARE_LIST = re.compile(r"^\[\d+, ?\d+\]$")


def load_prompts(prompts_dir: str | None, who: str) -> dict[str, str] | None:
    """The SC and PQ prompt texts VIEScore builds for the ``tie`` task, from a checkout."""
    if prompts_dir is None:
        return None
    path = find_file(prompts_dir, PROMPT_FILES, who, f"{REPO} (its GEdit-Bench folder) or TIGER-AI-Lab/VIEScore")
    t = python_constants(path, PROMPT_NAMES, who)
    return {"sc": "\n".join([t["_context_no_delimit"], t["_prompts_0shot_two_image_edit_rule"], t["_prompts_0shot_tie_rule_SC"]]),
            "pq": "\n".join([t["_context_no_delimit"], t["_prompts_0shot_rule_PQ"]])}


# --- reading a reply -----------------------------------------------------------------------------------


def read_reply(text: str, guess: bool) -> Any:
    """What ``mllm_output_to_dict`` makes of a reply: :data:`UNREADABLE` (the official ``False``: asked
    again within the evaluation), :data:`GUESS` (no JSON at all, when guessing is allowed), or the value
    read (a dict, or any other JSON value or text, which :func:`usable_scores` may still find unusable)."""
    if text == RATE_LIMIT:  # returned as it is; evaluate then raises
        return text
    if text.count(DELIMITER) == 2:
        start, end = text.find(DELIMITER) + len(DELIMITER), text.rfind(DELIMITER)
    else:
        start, end = text.find("{"), text.rfind("}") + 1
        if start == -1 or end == 0:
            start, end = text.find("["), text.rfind("]") + 1
            if guess:
                return GUESS
            if BARE_LIST.match(text[start:end]):
                try:
                    return {"score": json.loads(text[start:end])}
                except ValueError:  # \d takes any Unicode digit, json only ASCII: the official reader raises
                    return RAISED
            if is_int_0_10(text):
                return {"score": [int(text)]}
            return UNREADABLE
    if start == -1 or end == -1 or start == end:
        return UNREADABLE
    span = text[start:end].strip().replace("\n", "")
    try:
        data = json.loads(span)
        if not isinstance(data["score"], list):
            data["score"] = [data["score"]]
        return data
    except Exception:  # noqa: BLE001 - any failure goes to the repair, as in the official reader
        try:
            data = json.loads(repair_json(span))
        except Exception:  # noqa: BLE001
            return UNREADABLE
        return UNREADABLE if data is False else data  # a repaired ``false`` is the official "not read"


def is_int_0_10(text: str) -> bool:
    try:
        return 0 <= int(text) <= 10
    except ValueError:
        return False


_BARE_KEY = re.compile(r"(\w+):")
_PAIR = re.compile(r'(".*?"):(.*?)(,|})')


def repair_json(span: str) -> str:
    """VIEScore's repair of a JSON that does not load: every ``word:`` quoted as a key, then each value
    after a quoted key made a one-element list (a number), kept (true/false/null) or quoted (anything else)."""
    def value(m: re.Match) -> str:
        key, val, closing = m.group(1), m.group(2).strip(), m.group(3)
        if re.match(r"^-?\d+(\.\d+)?$", val):
            val = f"[{val}]"
        elif not re.match(r"^(true|false|null)$", val, re.IGNORECASE):
            val = f'"{val}"'
        return f"{key}: {val}{closing}"

    return _PAIR.sub(value, _BARE_KEY.sub(r'"\1":', span))


def usable_scores(parsed: Any) -> list[float] | None:
    """The reply's score list, or None where the official ``min(...['score'])`` raises or gives no number
    (then ``evaluate`` raises: a new evaluation). ``true``/``false`` count as 1/0, as Python's min does."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("score"), list) or not parsed["score"]:
        return None
    values = parsed["score"]
    if not all(isinstance(v, (int, float)) for v in values):
        return None
    return [int(v) if isinstance(v, bool) else v for v in values]


def overall_of(sc_scores: list[float], pq_scores: list[float]) -> tuple[float, float, float] | None:
    """(SC, PQ, overall) as ``evaluate`` computes them, or None where its ``math.sqrt`` raises."""
    sc, pq = min(sc_scores), min(pq_scores)
    try:
        return sc, pq, math.sqrt(sc * pq)
    except (ValueError, OverflowError):  # a negative product; an integer too large for a float
        return None


def guess_score(seed: str) -> int:
    """The official fallback draws ``random.randint(0, 10)``; bon seeds it by the item and question."""
    return random.Random(hashlib.sha256(seed.encode("utf-8")).digest()).randint(0, 10)


# --- one edit ------------------------------------------------------------------------------------------


class GEditOfficial:
    """The official computation for one verifier: its grader, the prompt texts and the failure policy."""

    def __init__(self, grader: Grader, prompts: dict[str, str] | None, on_failure: str, max_attempts: int, who: str,
                 max_evaluations: int = MAX_EVALUATIONS) -> None:
        if on_failure not in ON_FAILURE:
            raise BonError(f"{who}: on_failure must be one of {', '.join(ON_FAILURE)}, got {on_failure!r}")
        if int(max_attempts) < 1:
            raise BonError(f"{who}: max_attempts must be at least 1, got {max_attempts!r}")
        if int(max_evaluations) < 1:
            raise BonError(f"{who}: max_evaluations must be at least 1, got {max_evaluations!r}")
        if prompts is None and not isinstance(grader, ReplayGrader):
            raise BonError(f"{who}: metric official needs prompts_dir (a checkout of {REPO}, or its GEdit-Bench folder, "
                           "for viescore/vie_prompts.py)")
        self.grader, self.prompts, self.on_failure, self.max_attempts, self.who = grader, prompts, on_failure, int(max_attempts), who
        self.max_evaluations = int(max_evaluations)
        self.max_tokens = MAX_TOKENS

    def identity(self) -> dict[str, Any]:
        return {"metric": "official", "on_failure": self.on_failure, "max_attempts": self.max_attempts,
                "max_evaluations": self.max_evaluations, "official": f"{REPO}@{COMMIT}",
                "prompts": texts_digest(self.prompts) if self.prompts else None}

    def turns(self, instruction: str, source: Image.Image, edited: Image.Image) -> dict[str, list]:
        sc = self.prompts["sc"].replace("<instruction>", instruction) if self.prompts else ""
        return {"sc": [("text", sc), ("image", source), ("image", edited)],
                "pq": [("text", self.prompts["pq"] if self.prompts else ""), ("image", edited)]}

    def score(self, item: str, candidate: str | None, instruction: str, source: Image.Image, edited: Image.Image,
              meta: dict[str, Any]) -> Score:
        source = ImageOps.exif_transpose(source).convert("RGB")
        edited = ImageOps.exif_transpose(edited.convert("RGB").resize(source.size))
        turns = self.turns(instruction, source, edited)
        details: dict[str, Any] = {"metric": "official", **meta, "grader": self.grader.identity()}
        try:
            result, notes = self.evaluate_until_scored(item, candidate, turns)
        except ReplayMissing:
            raise
        except GradingFailed as exc:  # transient: a rerun asks again
            return Score(None, details, missing=f"{self.who}: {exc}", transient=True)
        why = notes.pop("why", None)
        details.update(notes)
        if result is None:
            return Score(None, details, missing=f"{self.who}: {why}")
        (sc, pq, overall), scores = result
        details.update({"sc": sc, "pq": pq, "overall": overall, "sc_scores": scores["sc"], "pq_scores": scores["pq"]})
        if not math.isfinite(overall):
            return Score(None, details, missing=f"{self.who}: overall {overall} is not a number (SC {sc}, PQ {pq})")
        return Score(overall / 10.0, details)

    def evaluate_until_scored(self, item: str, candidate: str | None, turns: dict[str, list]) -> tuple[Any, dict[str, Any]]:
        """``process_single_item``: evaluations until one gives a score, at most ``max_evaluations``.
        Returns ``((sc, pq, overall), score lists)`` or None (with ``why`` in the notes), and the notes."""
        asked = 0
        for evaluation in range(1, self.max_evaluations + 1):
            read, answers, tries = self.read_both(item, candidate, turns, asked)
            asked += tries
            notes: dict[str, Any] = {"attempts": asked, "evaluations": evaluation,
                                     "answers": {q: snippet(a, 400) for q, a in answers.items()}}
            failed = [q for q in QUESTIONS if read[q] is UNREADABLE]
            if failed:
                notes["failed"] = failed
                if self.on_failure == "missing":
                    notes["why"] = f"{failed[0]} reply unreadable after {tries} attempts ({snippet(answers[failed[0]], 120)!r})"
                    return None, notes
            scores = self.policy_scores(read, f"{item}|{candidate}", notes)
            result = None if None in scores.values() else overall_of(scores["sc"], scores["pq"])
            if result is not None:
                return (result, scores), notes
        if self.on_failure == "zero":
            notes["failed"] = list(QUESTIONS)
            return ((0, 0, 0.0), {"sc": [0], "pq": [0]}), notes
        notes["why"] = (f"no usable score in {self.max_evaluations} evaluations (last replies: "
                        f"SC {snippet(answers['sc'], 80)!r}, PQ {snippet(answers['pq'], 80)!r})")
        return None, notes

    def read_both(self, item: str, candidate: str | None, turns: dict[str, list], asked: int) -> tuple[dict, dict, int]:
        """One ``evaluate``: both questions asked together until both replies read (guessing from the
        second try), at most ``max_attempts`` tries. ``asked`` counts the asks before (the replay's attempt)."""
        read: dict[str, Any] = {}
        answers: dict[str, str] = {}
        for tries in range(1, self.max_attempts + 1):
            requests = [Request(turns[q], item, q, asked + tries, candidate) for q in QUESTIONS]
            guess = tries > 1 and self.on_failure == "official"
            for q, reply in zip(QUESTIONS, self.grader.ask(requests, self.max_tokens)):
                answers[q] = "" if reply is None else reply  # a failed call: the official client's empty text
                read[q] = read_reply(answers[q], guess)
            if all(read[q] is not UNREADABLE for q in QUESTIONS):
                break
        return read, answers, tries

    def policy_scores(self, read: dict[str, Any], seed: str, notes: dict[str, Any]) -> dict[str, list | None]:
        """Each question's score list: read, guessed, the policy's value after ``max_attempts``, or None
        (read but unusable: the official ``evaluate`` raises)."""
        scores: dict[str, list | None] = {}
        guessed = []
        for q in QUESTIONS:
            value = read[q]
            if value is UNREADABLE:  # after max_attempts: the policy's value (zero, or the official guess)
                value = {"score": [0]} if self.on_failure == "zero" else GUESS
            if value is GUESS:
                guessed.append(q)
                value = {"score": [guess_score(f"{seed}|{q}")]}
            scores[q] = usable_scores(value)
        if guessed:
            notes["guessed"] = guessed
        return scores


# --- aggregation ---------------------------------------------------------------------------------------


def aggregate(records: list[dict[str, Any]], failed: int, items: int) -> dict[str, Any]:
    """calculate_statistics.py per language: category means, their mean, and the Intersection subset."""
    import numpy as np

    def table(rows: list[dict]) -> dict[str, Any]:
        by_cat: dict[str, list[dict]] = {}
        for r in rows:
            by_cat.setdefault(r["category"], []).append(r)
        cats = {c: {k: float(np.mean([r[k] for r in by_cat[c]])) for k in ("sc", "pq", "overall")} | {"items": len(by_cat[c])}
                for c in sorted(by_cat, key=lambda c: (c not in CATEGORIES, CATEGORIES.index(c) if c in CATEGORIES else 0, c))}
        out: dict[str, Any] = {k: float(np.mean([v[k] for v in cats.values()])) if cats else None for k in ("sc", "pq", "overall")}
        return {**out, "categories": cats, "categories_missing": [c for c in CATEGORIES if c not in cats]}

    languages: dict[str, Any] = {}
    for lang in sorted({r["language"] for r in records}):
        rows = [r for r in records if r["language"] == lang]
        languages[lang] = {**table(rows), "intersection": table([r for r in rows if r["intersection_exist"]])}
    return {"metric": "official", "official": f"{REPO}@{COMMIT}", "languages": languages, "items": items, "failed": failed}
