"""ISG-Bench's official evaluation, item by item: what ``ISG-eval.py`` asks and ``calculate_performance.py``
counts in Dongping-Chen/ISG (read at commit de504cdda1cab7bd874c252f670eb1833290db5a).

Per item and answer (``output``), four numbers the official code never combines:

- **structure**: the answer's part kinds equal the Golden answer's, part for part (adjacent text parts
  are *not* merged: ``[text, text, image]`` against ``[text, image]`` is wrong);
- **block** (1-10): with the right structure, each relation question of ``predict.block_qa.questions``
  whose ``subject`` and ``object`` name blocks of the item is graded; the level is the mean of the
  replies' ``Judge`` values (1 when none has one, or when one reply is no JSON object or a ``Judge`` is
  no number: the official ``try`` falls back to 1); a wrong structure gives 1; an item without block
  questions is left out of the block mean;
- **image** (0-1): with the right structure, the share of ``predict.image_qa`` questions whose reply's
  ``Judge`` is "yes" (over *all* the item's questions). A question with a ``Preliminary`` is asked only
  when every preliminary id is one of the answer's block tags and was answered yes: the official check
  compares question ids with tags (``<gen_img1>`` ...), so in practice such a question is never asked
  and counts as no. A wrong structure gives 0;
- **holistic** (1-10): the whole query, the answer and the Golden answer shown to the grader (asked
  whatever the structure); the reply's ``overall_score``, or 1 when the reply has none, the answer is
  empty or its first part is an empty text.

An item whose processing raises in the official code (no ``block_qa`` questions list, an image question
without ``id`` or ``Preliminary``, a yes/no reply whose ``Judge`` is no string, ...) is stored with an
error and scored as a wrong structure with holistic 1: structure 0, block 1, image 0, holistic 1.

Aggregation (``calculate_performance.py``): per group of categories, structure = items with the right
structure / items, and block, image, holistic the means of the values above. bon adds ``all``, the same
rule over every item.

Requests: the official prompt texts (read from ``prompts_dir``), images before the text for block and
image questions, the holistic request's parts in order with newlines turned to spaces; over an API,
temperature 0, JSON response format, no token limit, ``detail: low``, one content part per text. bon
does not send the official ``Yes_No`` twin of each block question (its reply is never counted) and sends
images re-encoded as PNG (the same pixels) rather than the file's own bytes.

The official grader replies are JSON (``response_format: json_object``); a reply that is not JSON is
kept as an error object, as the official client does. Where the official code would crash (a holistic
reply that is a bare number, a non-numeric ``overall_score``), bon counts the grade as failed: 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bon.content import Candidate, ImageItem, Prompt, TextItem
from bon.errors import BonError
from bon.plugins import Score
from verifiers._grader import Grader, GradingFailed, ReplayGrader, ReplayMissing, Request
from verifiers._official import find_file, python_constants, texts_digest
from generators.suites import isg_bench

REPO = "Dongping-Chen/ISG"
COMMIT = "de504cdda1cab7bd874c252f670eb1833290db5a"
PROMPT_FILES = ("ISG_eval/get_judge_prompt.py", "get_judge_prompt.py")
PROMPT_NAMES = ("_TEXT_TEXT_JUDGE_PROMPT", "_TEXT_IMAGE_JUDGE_PROMPT", "_IMAGE_IMAGE_JUDGE_PROMPT",
                "_EVALUATE_WHOLE_W_GT_PROMPT", "_DSG_PROMPT", "VQA_dict")
LEVELS = ("structure", "block", "image", "holistic")
SCALE = {"structure": 1.0, "block": 10.0, "image": 1.0, "holistic": 10.0}  # Score.value = level / SCALE
# the 8 groups calculate_performance.py reports, under its own names (spelling included): the suite's
# groups of the JSONL's Category names, two of them renamed
OFFICIAL_GROUP_NAMES = {"Style Transfer": "Style Transer", "Progressive Transformation": "Progressive"}
GROUPS = {OFFICIAL_GROUP_NAMES.get(g, g): cats for g, cats in isg_bench.GROUPS.items()}
GROUP_OF = {c: g for g, cats in GROUPS.items() for c in cats}
ERROR_RECORD = {"structure": False, "block": 1, "image": 0, "holistic": 1}


class ItemError(Exception):
    """What makes the official ``process_item`` fail: the item is stored with an error."""


def load_prompts(prompts_dir: str | None, who: str) -> dict[str, Any] | None:
    if prompts_dir is None:
        return None
    path = find_file(prompts_dir, PROMPT_FILES, who, REPO)
    return python_constants(path, PROMPT_NAMES, who)


def official_json(text: str | None) -> Any:
    """A reply as the official client keeps it: the parsed JSON, or an error object for other text."""
    if text is None:
        return None
    try:
        return json.loads(text.strip())
    except json.JSONDecodeError:
        return {"error": "Invalid JSON response", "raw_output": text}


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float))


@dataclass
class Answer:
    """One item and answer as the official evaluation sees them: parts are ("text", str) or ("image", ImageItem)."""

    item: str
    candidate: str | None
    query: list[tuple[str, Any]]
    golden: list[tuple[str, Any]]
    output: list[tuple[str, Any]]
    predict: Any


class IsgOfficial:
    """The official computation for one verifier: its grader, the official prompt texts, the primary level."""

    def __init__(self, grader: Grader, prompts: dict[str, Any] | None, primary: str, who: str) -> None:
        if primary not in LEVELS:
            raise BonError(f"{who}: primary must be one of {', '.join(LEVELS)}, got {primary!r}")
        if prompts is None and not isinstance(grader, ReplayGrader):
            raise BonError(f"{who}: metric official needs prompts_dir (a checkout of {REPO}: its ISG_eval/get_judge_prompt.py)")
        self.grader, self.prompts, self.primary, self.who = grader, prompts, primary, who
        # the official client sends no token limit: an API grader gets none (0 leaves it out of the body)
        self.max_tokens = 0 if getattr(grader, "backend_name", "") == "openai" else 2048

    def identity(self) -> dict[str, Any]:
        return {"metric": "official", "primary": self.primary, "official": f"{REPO}@{COMMIT}",
                "prompts": texts_digest(self.prompts) if self.prompts else None}

    # --- one item ----------------------------------------------------------------------------------
    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        try:
            record = self.evaluate(self.answer_of(prompt, candidate))
        except ReplayMissing:
            raise  # a reply file that does not cover the item is bad input (exit 2)
        except GradingFailed as exc:  # only transient failures reach here
            return Score(None, missing=f"{self.who}: {exc}", transient=exc.transient)
        except BonError as exc:  # an image that cannot be read
            return Score(None, missing=str(exc))
        details = {"metric": "official", "primary": self.primary, **record, "category": prompt.metadata.get("category"),
                   "grader": self.grader.identity()}
        value = record[self.primary]
        if value is None:
            return Score(None, details, missing=f"{self.who}: no {self.primary} level for this item (no block questions)")
        return Score(float(value) / SCALE[self.primary], details)

    def answer_of(self, prompt: Prompt, candidate: Candidate) -> Answer:
        meta = prompt.metadata
        golden = (meta.get("golden") or {}).get("parts")
        if not isinstance(golden, list):
            raise BonError(f"{self.who}: prompt {prompt.id} has no Golden answer (metadata golden.parts)")
        return Answer(item=prompt.id, candidate=f"{candidate.generator}/{candidate.index}",
                      query=[as_part(it) for it in prompt.content], golden=[golden_part(p, prompt.id) for p in golden],
                      output=[as_part(it) for it in candidate.content], predict=meta.get("predict"))

    def evaluate(self, a: Answer) -> dict[str, Any]:
        structure = [k for k, _ in a.output] == [k for k, _ in a.golden]
        record: dict[str, Any] = {"structure": structure, "block": 1, "image": 0, "item_error": None}
        if structure:
            tags = rename(a)
            try:
                record["image"] = self.image_level(a, tags)
                record["block"] = self.block_level(a, tags)
            except ItemError as exc:
                return {**ERROR_RECORD, "item_error": str(exc)}
        record["holistic"] = self.holistic(a)
        return record

    # --- requests ----------------------------------------------------------------------------------
    def ask(self, a: Answer, asks: list[tuple[str, list]]) -> list[Any]:
        """The parsed replies to ``(question, turn)`` asks; a call that failed for good is None (as the
        official client returns after its retries); a transient failure raises."""
        if not asks:
            return []
        requests = [Request(turn, a.item, q, candidate=a.candidate) for q, turn in asks]
        return [official_json(r) for r in self.grader.ask(requests, self.max_tokens)]

    def text(self, name: str, **fields: Any) -> str:
        if self.prompts is None:
            return ""
        return self.prompts[name].format(**fields)

    # --- levels ------------------------------------------------------------------------------------
    def image_level(self, a: Answer, tags: dict[str, Any]) -> float:
        predict = a.predict if isinstance(a.predict, dict) else {}
        if "image_qa" not in predict:
            return 0
        questions = predict["image_qa"]
        if not isinstance(questions, list):
            if not isinstance(questions, dict) or not questions:
                raise ItemError("image_qa holds no question list")
            questions = next(iter(questions.values()))
        if not isinstance(questions, list):
            raise ItemError("image_qa holds no question list")
        free = [k for k, q in enumerate(questions) if isinstance(q, dict) and q.get("Preliminary") == [] and q.get("image") in tags]
        replies = dict(zip(free, self.ask(a, [(f"image/{k}", self.dsg_turn(questions[k], tags)) for k in free])))
        answered: dict[Any, str] = {}
        yes = 0
        for k, q in enumerate(questions):
            if not isinstance(q, dict) or "id" not in q or "Preliminary" not in q:
                raise ItemError(f"image question {k} has no id or Preliminary")
            answered[q["id"]] = "No"
            if any(p not in tags or answered.get(p) != "Yes" for p in q["Preliminary"]):
                continue
            if "image" not in q:
                raise ItemError(f"image question {k} has no image")
            if q["image"] not in tags:
                continue
            reply = replies[k] if k in replies else self.ask(a, [(f"image/{k}", self.dsg_turn(q, tags))])[0]
            if reply is None:
                continue
            if is_number(reply):
                raise ItemError(f"image question {k}: the reply is a bare number")
            if "Judge" not in reply:
                continue
            if not isinstance(reply, dict) or not isinstance(reply["Judge"], str):
                raise ItemError(f"image question {k}: Judge is not a string")
            if reply["Judge"].lower() == "yes":
                answered[q["id"]] = "Yes"
                yes += 1
        return yes / len(questions) if questions else 0

    def dsg_turn(self, q: dict, tags: dict[str, Any]) -> list:
        return [("image", load(tags[q["image"]])), ("text", self.text("_DSG_PROMPT", question=q.get("Question")))]

    def block_level(self, a: Answer, tags: dict[str, Any]) -> float | None:
        try:
            questions = a.predict["block_qa"]["questions"]
        except (KeyError, TypeError):
            raise ItemError("predict has no block_qa questions list") from None
        asks = []
        for k, q in enumerate(questions):
            if "subject" not in q or "object" not in q or q["subject"] not in tags or q["object"] not in tags or "Question" not in q:
                continue
            asks.append((f"block/{k}", self.block_turn(q, tags)))
        if not questions:
            return None  # left out of the block mean
        values = []
        for reply in self.ask(a, asks):
            if reply is None or is_number(reply):
                return 1
            if "Judge" in reply:
                if not isinstance(reply, dict):
                    return 1
                values.append(reply["Judge"])
        if not values:
            return 1
        if not all(is_number(v) for v in values):
            return 1
        return sum(values) / len(values)

    def block_turn(self, q: dict, tags: dict[str, Any]) -> list:
        subj, obj, question = q["subject"], q["object"], q["Question"]
        requirement = self.prompts["VQA_dict"]["Score"] if self.prompts else ""
        s, o = tags[subj], tags[obj]
        if "img" in subj and "img" in obj:
            return [("image", load(s)), ("image", load(o)),
                    ("text", self.text("_IMAGE_IMAGE_JUDGE_PROMPT", requirement=requirement, question=question))]
        if "text" in subj and "text" in obj:
            question = question.replace(subj, " `Text 1` ").replace(obj, " `Text 2` ")
            return [("text", self.text("_TEXT_TEXT_JUDGE_PROMPT", requirement=requirement, text1=s, text2=o, question=question))]
        text, image = (s, o) if "text" in subj else (o, s)
        question = question.replace(text, " `Text` ")  # the official code replaces the block's text, not its tag
        return [("image", load(image)),
                ("text", self.text("_TEXT_IMAGE_JUDGE_PROMPT", requirement=requirement, text=text, question=question))]

    def holistic(self, a: Answer) -> float:
        if not a.output or (a.output[0][0] == "text" and a.output[0][1] == ""):
            return 1  # the official count ignores the grade of an empty answer
        head = self.prompts["_EVALUATE_WHOLE_W_GT_PROMPT"] if self.prompts else ["", "", "", ""]
        turn: list = [("text", head[0])]
        for parts, closing in ((a.query, head[1]), (a.output, head[2]), (a.golden, head[3])):
            turn += [(k, v.replace("\n", " ") if k == "text" else v) for k, v in parts]
            turn.append(("text", closing))
        turn = [(k, v.replace("\n", " ") if k == "text" else load(v)) for k, v in turn]
        reply = self.ask(a, [("holistic", turn)])[0]
        if not reply or is_number(reply) or "overall_score" not in reply or not isinstance(reply, dict):
            return 1
        value = reply["overall_score"]
        return value if is_number(value) else 1


def rename(a: Answer) -> dict[str, Any]:
    """The official block tags: ``<gen_text1>``, ``<gen_img1>`` ... over the answer, ``<query_...>`` over the query."""
    tags: dict[str, Any] = {}
    for side, parts in (("gen", a.output), ("query", a.query)):
        counts = {"text": 0, "image": 0}
        for kind, value in parts:
            counts[kind] += 1
            tags[f"<{side}_{'text' if kind == 'text' else 'img'}{counts[kind]}>"] = value
    return tags


def as_part(item: Any) -> tuple[str, Any]:
    return ("text", item.text) if isinstance(item, TextItem) else ("image", item)


def golden_part(part: Any, pid: str) -> tuple[str, Any]:
    if not isinstance(part, dict) or part.get("type") not in ("text", "image"):
        raise BonError(f"prompt {pid}: a Golden part must be {{type: text|image, content}}, got {part!r:.80}")
    if part["type"] == "text":
        return "text", str(part.get("content", ""))
    path = Path(str(part.get("content")))
    if not path.is_file():
        raise BonError(f"prompt {pid}: Golden image {path} not found")
    return "image", ImageItem(path=path)


def load(value: Any) -> Any:
    return value.load() if isinstance(value, ImageItem) else value


# --- aggregation -------------------------------------------------------------------------------------


def aggregate(scored: list[tuple[Prompt, Score]], primary: str) -> dict[str, Any]:
    """calculate_performance.py's four numbers per group, and the same over every item (``all``)."""
    records = [(p, s.details) for p, s in scored if s.details.get("metric") == "official" and "holistic" in s.details]
    groups: dict[str, list[dict]] = {}
    for p, d in records:
        group = GROUP_OF.get(str(p.metadata.get("category")))
        if group is not None:
            groups.setdefault(group, []).append(d)
    return {"metric": "official", "primary": primary, "official": f"{REPO}@{COMMIT}",
            "all": four_numbers([d for _, d in records]),
            "groups": {g: four_numbers(groups[g]) for g in GROUPS if g in groups},
            "items": len(scored), "failed": len(scored) - len(records)}


def four_numbers(records: list[dict]) -> dict[str, Any]:
    def mean(values: list) -> float:
        return sum(values) / len(values) if values else 0

    return {"structure": sum(1 for d in records if d["structure"]) / len(records) if records else 0,
            "block": mean([d["block"] for d in records if d["block"] is not None]),
            "image": mean([d["image"] for d in records]),
            "holistic": mean([d["holistic"] for d in records]),
            "items": len(records)}
