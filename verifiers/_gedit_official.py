"""GEdit-Bench's official evaluation, item by item: what ``GEdit-Bench/test_gedit_score.py`` asks through
VIEScore and ``calculate_statistics.py`` averages, in stepfun-ai/Step1X-Edit (read at commit
570eba6ebda0c45c013983a483afbf2fd12bfcbc).

Per edit, two requests (VIEScore's ``tie`` task), each one user message, text first:

- SC: the SC prompt (VIEScore's context, two-image edit rule and SC rule joined by newlines, ``<instruction>``
  replaced), then the source image and the edited image resized to the source's size;
- PQ: the PQ prompt (context and PQ rule), then the edited image.

The official client sends the model, the message and ``max_tokens: 1400``: no temperature (the API's
default), images as JPEG (PIL's default quality, 75). Replies are read as VIEScore's ``mllm_output_to_dict`` reads them (see
:func:`read_reply`): the text between two ``||V^=^V||`` delimiters, else from the first ``{`` to the last
``}``, else a bare ``[a, b]`` list or a bare number 0-10; the JSON's ``score`` (a number becomes a
one-element list), with a repair of unquoted keys when the JSON does not load. When either reply cannot
be read, *both* questions are asked again; from the second attempt a reply with no JSON at all is a
random guess ``score: [0..10]``. SC = min(SC scores), PQ = min(PQ scores), overall = sqrt(SC x PQ), on 0-10.

Aggregation (``calculate_statistics.py``), per instruction language: the mean of SC, PQ and overall per
``task_type``, then the mean of the category means; the same over the items with ``Intersection_exist``.

Where the official code would loop without end (a reply whose JSON cannot be repaired, asked again and
again; a JSON without ``score``, which restarts the whole evaluation), bon asks at most ``max_attempts``
times and then applies ``on_failure``: ``official`` (the random guess, seeded by the item), ``zero`` (the
question scores 0, what published result files hold for failed calls) or ``missing`` (no score). With
``zero`` or ``missing`` no reply is guessed at all. A transient failure (timeout, 5xx) is a transient
missing score, retried on a rerun, whatever the policy.
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
GUESS = "guess"
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
    """What ``mllm_output_to_dict`` makes of a reply: a dict, :data:`GUESS` (no JSON at all, when guessing
    is allowed), or None (unreadable: the official ``False``)."""
    if text.count(DELIMITER) == 2:
        start, end = text.find(DELIMITER) + len(DELIMITER), text.rfind(DELIMITER)
    else:
        start, end = text.find("{"), text.rfind("}") + 1
        if start == -1 or end == 0:
            start, end = text.find("["), text.rfind("]") + 1
            if guess:
                return GUESS
            if BARE_LIST.match(text[start:end]):
                return {"score": json.loads(text[start:end])}
            if is_int_0_10(text):
                return {"score": [int(text)]}
            return None
    if start == -1 or end == -1 or start == end:
        return None
    span = text[start:end].strip().replace("\n", "")
    try:
        data = json.loads(span)
        if not isinstance(data["score"], list):
            data["score"] = [data["score"]]
        return data
    except Exception:  # noqa: BLE001 - any failure goes to the repair, as in the official reader
        try:
            return json.loads(repair_json(span))
        except Exception:  # noqa: BLE001
            return None


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


def scores_of(parsed: Any) -> list[float] | None:
    """The reply's score list, or None when the official code could not take its min (and would retry)."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("score"), list) or not parsed["score"]:
        return None
    values = parsed["score"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None
    return values


def guess_score(seed: str) -> int:
    """The official fallback draws ``random.randint(0, 10)``; bon seeds it by the item and question."""
    return random.Random(hashlib.sha256(seed.encode("utf-8")).digest()).randint(0, 10)


# --- one edit ------------------------------------------------------------------------------------------


class GEditOfficial:
    """The official computation for one verifier: its grader, the prompt texts and the failure policy."""

    def __init__(self, grader: Grader, prompts: dict[str, str] | None, on_failure: str, max_attempts: int, who: str) -> None:
        if on_failure not in ON_FAILURE:
            raise BonError(f"{who}: on_failure must be one of {', '.join(ON_FAILURE)}, got {on_failure!r}")
        if int(max_attempts) < 1:
            raise BonError(f"{who}: max_attempts must be at least 1, got {max_attempts!r}")
        if prompts is None and not isinstance(grader, ReplayGrader):
            raise BonError(f"{who}: metric official needs prompts_dir (a checkout of {REPO}, or its GEdit-Bench folder, "
                           "for viescore/vie_prompts.py)")
        self.grader, self.prompts, self.on_failure, self.max_attempts, self.who = grader, prompts, on_failure, int(max_attempts), who
        self.max_tokens = MAX_TOKENS

    def identity(self) -> dict[str, Any]:
        return {"metric": "official", "on_failure": self.on_failure, "max_attempts": self.max_attempts,
                "official": f"{REPO}@{COMMIT}", "prompts": texts_digest(self.prompts) if self.prompts else None}

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
            scores, notes = self.ask_until_read(item, candidate, turns)
        except ReplayMissing:
            raise
        except GradingFailed as exc:  # transient: a rerun asks again
            return Score(None, details, missing=f"{self.who}: {exc}", transient=True)
        details.update(notes)
        if scores is None:
            return Score(None, details, missing=f"{self.who}: {notes['failed'][0]} reply unreadable after {notes['attempts']} attempts "
                                                f"({snippet(notes['answers'][notes['failed'][0]], 120)!r})")
        sc, pq = min(scores["sc"]), min(scores["pq"])
        if sc * pq < 0:
            return Score(None, details, missing=f"{self.who}: negative scores (SC {sc}, PQ {pq})")
        overall = math.sqrt(sc * pq)
        details.update({"sc": sc, "pq": pq, "overall": overall, "sc_scores": scores["sc"], "pq_scores": scores["pq"]})
        return Score(overall / 10.0, details)

    def ask_until_read(self, item: str, candidate: str | None, turns: dict[str, list]) -> tuple[dict | None, dict]:
        """Both questions asked together until both replies read (the official loop), then the policy."""
        guessed: list[str] = []
        read: dict[str, Any] = {}
        answers: dict[str, str] = {}
        for attempt in range(1, self.max_attempts + 1):
            replies = self.grader.ask([Request(turns[q], item, q, attempt, candidate) for q in ("sc", "pq")], self.max_tokens)
            guess = attempt > 1 and self.on_failure == "official"
            for q, reply in zip(("sc", "pq"), replies):
                answers[q] = "" if reply is None else reply  # a failed call: the official client's empty text
                parsed = read_reply(answers[q], guess)
                read[q] = GUESS if parsed == GUESS else scores_of(parsed)
            if all(v is not None for v in read.values()):
                break
        failed = [q for q in ("sc", "pq") if read[q] is None]
        notes: dict[str, Any] = {"attempts": attempt, "answers": {q: snippet(a, 400) for q, a in answers.items()}}
        if failed:
            notes["failed"] = failed
            if self.on_failure == "missing":
                return None, notes
        scores = {}
        for q in ("sc", "pq"):
            value = read[q]
            if value is None:  # after max_attempts: the policy's value (zero, or the official guess)
                value = [0] if self.on_failure == "zero" else GUESS
            if value == GUESS:
                guessed.append(q)
                value = [guess_score(f"{item}|{candidate}|{q}")]
            scores[q] = value
        if guessed:
            notes["guessed"] = guessed
        return scores, notes


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
