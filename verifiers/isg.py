"""``isg``: interleaved text-and-image answers scored as ISG-Bench scores them.

Two metrics (``metric``):

- ``official`` (default): ISG-Bench's own evaluation item by item and its aggregation (see
  :mod:`verifiers._isg_official`): four numbers, structure (0/1), block (1-10), image (0-1) and holistic
  (1-10), all in the score's details and in :meth:`IsgVerifier.aggregate` per group; the level named by
  ``primary`` (default ``holistic``) is the Best-of-N score, as ``level / 10`` for block and holistic and
  as is for structure and image. The grader's request texts are the official ones, read from a
  checkout of Dongping-Chen/ISG that ``prompts_dir`` points at (not needed with ``grader: replay:FILE``).
  Written answers only (``mode: generate``); an API grader gets the official client's settings unless
  set: temperature 0, ``response_format`` JSON, no token limit, images at their size with ``detail: low``, one
  content part per text.
- ``bon``: bon's own levels, below, combined into one mean on 0-1.

The ``bon`` metric:

- **structure** (0 or 1): the kinds of the answer's parts, in order (``text``, ``image``, ...), against
  what the prompt asks. The expectation is, in this order: ISG's structural answer graph
  (``metadata.isg.structure``), the golden answer's structure (``metadata.golden.structure``), the
  user's ``metadata.expected_structure``, or else the number of pictures the prompt's text asks for
  ("in 3 images", "four pictures"; then only the image count is checked). Adjacent text parts are
  merged first (``merge_text``), since a generator may split one paragraph.
- **block** (0-1): ISG's relation questions between blocks (``metadata.isg.block_qa``: ``<gen_text1>``,
  ``<gen_img2>``, ``<query_img1>`` ...), each graded 0-10 by the VLM with both blocks shown.
- **image** (0-1): ISG's questions about single generated images (``metadata.isg.image_qa``), answered
  yes/no; a question whose ``Preliminary`` questions were not answered yes counts as no (as in ISG).
  The level's score is the share of yes.
- **parts** (0-1): when a prompt has neither block nor image questions (a user's own prompt), each
  generated image is graded 0-10 for how well it serves its place in the answer, given the request and
  the text before it.
- **holistic** (0-1): the whole request and answer, graded 0-10.

As in ISG-Bench, block, image and parts score 0 when the structure is wrong. The verifier's score is
the mean of the levels that apply (``levels`` chooses them; a level without questions is left out and
named in the details). The questions' wording is bon's own.

Modes: ``generate`` (default; the grader writes JSON ``{"score": n}`` or yes/no) or ``logits``
(one forward pass per question: P(yes) over yes+no, or the probability-weighted digit 0-9 rescaled).

Options: ``metric`` (official | bon), ``primary`` and ``prompts_dir`` (official); ``model`` / ``grader``,
``mode``, ``levels`` (default all five), ``merge_text`` (true), ``max_questions`` (20 per level),
``max_new_tokens`` (128) (bon); ``max_image_pixels`` and other local settings.

``read_item`` takes ISG-Bench's own fields (``id``, ``Category``, ``Query``, ``Golden``, ``predict``) and the
answer as ``output`` (ISG's field: ``[{"type": "text" | "image", "content": ...}]``, image paths relative
to the items file).

A question whose answer cannot be read is dropped from its level (counted in ``failed``); a level whose
questions all fail, or a failed holistic grade, makes the score missing with the reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bon.content import Candidate, Content, ImageItem, Prompt, TextItem
from bon.errors import BonError
from bon.plugins import Score, Verifier
from verifiers import _isg_official as official
from verifiers._grader import (DIGITS, GRADER_OPTIONS, YES_NO, GradingFailed, check_grader_settings, digit_expectation, grader_from,
                               grader_modules, parse_scores, parse_yes_no, snippet, yes_probability)
from verifiers._official import check_metric

LEVELS = ("structure", "block", "image", "parts", "holistic")
TAG = re.compile(r"<(gen|query)_(text|img)(\d+)>")
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                "a single": 1, "an": 1, "a": 1}
ASKED_IMAGES = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?:\w+\s+){0,2}?"
                          r"(images|pictures|photos|illustrations|figures|frames|panels|views)\b", re.IGNORECASE)

SCALE_GENERATE = 'Give a score from 0 (not at all) to 10 (completely). Reply with JSON only: {"score": <0-10>}'
SCALE_LOGITS = "Answer with one digit from 0 (not at all) to 9 (completely)."
YES_NO_GENERATE = "Answer yes or no."
BLOCK = "{context}Question: {question}\n"
PART = ("A user asked for an answer mixing text and pictures:\n{request}\n"
        "This is picture {k} of the answer; the text just before it reads:\n\"{before}\"\n"
        "How well does the picture show what this place in the answer needs?\n")
HOLISTIC_HEAD = "A user asked for an answer mixing text and pictures. The request:"
HOLISTIC_MID = "The answer:"
HOLISTIC_TAIL = ("How well does the answer fulfil the request, with text and pictures that are accurate, consistent "
                 "with each other and in the requested form?\n")


# the official client's request settings (ISG_eval/vqa_model.py, config.yaml), unless the user sets them
OFFICIAL_API = {"temperature": 0.0, "max_image_side": None, "image_detail": "low", "merge_texts": False,
                "extra_body": {"response_format": {"type": "json_object"}}}


class IsgVerifier(Verifier):
    plugin = "isg"
    required_modules = staticmethod(grader_modules)  # optional packages (bon.preflight)
    run_only = ("prompts_dir",)  # where the checkout lies; its texts are in the identity (a hash)
    extra_options = GRADER_OPTIONS  # forwarded to the grader back-end; checked by name like the rest
    version = 1
    # the official code scores a failed grade inside the score (block and holistic 1, image no, structure 0),
    # so an official score fails only where the level does not exist: calculate_performance.py leaves an
    # item without block questions out of the block mean
    official_on_failure = "missing"

    def __init__(self, model: str | None = None, name: str | None = None, grader: dict[str, Any] | str | None = None,
                 mode: str = "generate", levels: Any = LEVELS, merge_text: bool = True, max_questions: int | None = 20,
                 max_new_tokens: int = 128, metric: str = "official", primary: str = "holistic",
                 prompts_dir: str | None = None, **grader_options: Any) -> None:
        self.name = name or self.plugin
        check_grader_settings(self.name, mode, grader_options)
        self.metric = check_metric(self.name, metric, mode, grader)
        self.official: official.IsgOfficial | None = None
        if metric == "official":
            self.grader = grader_from(model, grader, grader_options, self.name, defaults=OFFICIAL_API)
            self.official = official.IsgOfficial(self.grader, official.load_prompts(prompts_dir, self.name), primary, self.name)
            self.mode, self.levels = mode, list(official.LEVELS)
            return
        levels = [levels] if isinstance(levels, str) else list(levels)
        bad = [lv for lv in levels if lv not in LEVELS]
        if bad or not levels:
            raise BonError(f"{self.name}: levels must be some of {', '.join(LEVELS)}, got {levels}")
        self.mode = mode
        self.levels = levels
        self.merge_text = bool(merge_text)
        self.max_questions = int(max_questions) if max_questions else None
        self.max_new_tokens = int(max_new_tokens)
        self.grader = None
        if any(lv != "structure" for lv in levels):
            self.grader = grader_from(model, grader, grader_options, self.name)

    def close(self) -> None:
        if self.grader is not None:
            self.grader.close()

    def identity(self) -> dict[str, Any]:
        if self.official is not None:
            return {"name": self.name, "plugin": self.plugin, **self.official.identity(), "grader": self.grader.identity()}
        return {"name": self.name, "plugin": self.plugin, "metric": "bon", "levels": self.levels, "merge_text": self.merge_text,
                "max_questions": self.max_questions, "grader": self.grader.identity() if self.grader else None}

    # --- benchmark items (bon score) -----------------------------------------------------------------
    def item_id(self, item: dict[str, Any]) -> str:
        return str(item.get("id", ""))

    def read_item(self, item: dict[str, Any], base_dir: Any) -> tuple[Prompt, Candidate]:
        return read_isg_item(item, base_dir)

    def aggregate(self, scored: Any) -> dict[str, Any]:
        if self.official is not None:
            return official.aggregate(list(scored), self.official.primary)
        return super().aggregate(scored)

    # --- structure ---------------------------------------------------------------------------------
    def parts_of(self, content: Content) -> list[Any]:
        items: list[Any] = []
        for it in content:
            if isinstance(it, TextItem):
                if not it.text.strip():
                    continue
                if self.merge_text and items and isinstance(items[-1], TextItem):
                    items[-1] = TextItem(items[-1].text + "\n" + it.text)
                    continue
            items.append(it)
        return items

    def structure(self, prompt: Prompt, parts: list[Any]) -> dict[str, Any]:
        got = ["image" if isinstance(p, ImageItem) else "text" for p in parts]
        meta = prompt.metadata
        isg = meta.get("isg") or {}
        expected, rule = None, None
        if isg.get("structure"):
            expected, rule = ["image" if "img" in t else "text" for t in isg["structure"]], "isg structural graph"
        elif (meta.get("golden") or {}).get("structure"):
            expected, rule = list(meta["golden"]["structure"]), "golden answer"
        elif meta.get("expected_structure"):
            expected, rule = list(meta["expected_structure"]), "metadata expected_structure"
        if expected is not None:
            if self.merge_text:
                expected = [k for i, k in enumerate(expected) if not (k == "text" and i and expected[i - 1] == "text")]
            return {"ok": got == expected, "expected": expected, "got": got, "rule": rule}
        asked = asked_images(prompt.content.text)
        if asked is None:
            return {"ok": got.count("image") > 0, "expected": "at least one image", "got": got, "rule": "no count in the prompt"}
        return {"ok": got.count("image") == asked, "expected": f"{asked} images", "got": got, "rule": "image count asked in the prompt"}

    # --- scoring -----------------------------------------------------------------------------------
    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        if self.official is not None:
            return self.official.score(prompt, candidate)
        parts = self.parts_of(candidate.content)
        struct = self.structure(prompt, parts)
        details: dict[str, Any] = {"structure": struct, "mode": self.mode, "levels": {}}
        if self.grader is not None:
            details["grader"] = self.grader.identity()
        scores: dict[str, float] = {}
        if "structure" in self.levels:
            scores["structure"] = 1.0 if struct["ok"] else 0.0
        isg = prompt.metadata.get("isg") or {}
        try:
            tags = self.tag_map(prompt, parts) if struct["ok"] else {}
            has_block, has_image = bool(isg.get("block_qa")), bool(isg.get("image_qa"))
            if "block" in self.levels and has_block:
                scores["block"] = self.block_level(isg["block_qa"], tags, details) if struct["ok"] else 0.0
            if "image" in self.levels and has_image:
                scores["image"] = self.image_level(isg["image_qa"], tags, details) if struct["ok"] else 0.0
            if "parts" in self.levels and not has_block and not has_image:
                scores["parts"] = self.parts_level(prompt, parts, details) if struct["ok"] else 0.0
            if "holistic" in self.levels:
                scores["holistic"] = self.holistic(prompt, parts, details)
        except GradingFailed as exc:
            return Score(None, details, missing=f"{self.name}: {exc}", transient=exc.transient)
        except BonError as exc:
            return Score(None, details, missing=str(exc))
        details["skipped_levels"] = [lv for lv in self.levels if lv not in scores]
        details["level_scores"] = {k: round(v, 4) for k, v in scores.items()}
        if not scores:
            return Score(None, details, missing=f"{self.name}: none of the levels {self.levels} applies to this prompt")
        return Score(sum(scores.values()) / len(scores), details)

    def tag_map(self, prompt: Prompt, parts: list[Any]) -> dict[str, Any]:
        tags: dict[str, Any] = {}
        for side, items in (("gen", parts), ("query", list(prompt.content))):
            t = i = 0
            for it in items:
                if isinstance(it, ImageItem):
                    i += 1
                    tags[f"<{side}_img{i}>"] = it
                else:
                    t += 1
                    tags[f"<{side}_text{t}>"] = it.text
        return tags

    def _cap(self, questions: list[Any]) -> list[Any]:
        return questions[: self.max_questions] if self.max_questions else questions

    def _scale(self, turns: list[list]) -> list[float | str]:
        """0-1 grades of scale questions; a failed one is its reason (str)."""
        if not turns:
            return []
        if self.mode == "logits":
            probs = self.grader.next_word_probs(with_ending(turns, SCALE_LOGITS), DIGITS)
            return ["no probability on the digits 0-9" if e is None else e / 9.0 for e in map(digit_expectation, probs)]
        turns = with_ending(turns, SCALE_GENERATE)
        return self._answers(turns, self.max_new_tokens, lambda a: parse_scores(a, 1)[0] / 10.0)

    def _yes(self, turns: list[list]) -> list[float | str]:
        if not turns:
            return []
        turns = with_ending(turns, YES_NO_GENERATE)
        if self.mode == "logits":
            yes = [yes_probability(p, normalize=True) for p in self.grader.next_word_probs(turns, YES_NO)]
            return ["no probability on yes or no" if y is None else y for y in yes]
        return self._answers(turns, 16, lambda a: 1.0 if parse_yes_no(a) else 0.0)

    def _answers(self, turns: list[list], max_tokens: int, read: Any) -> list[float | str]:
        """The grader's written answers as grades through ``read``; an unreadable one is its reason (str)."""
        out: list[float | str] = []
        for answer in self.grader.answer(turns, max_tokens):
            try:
                out.append(read(answer))
            except GradingFailed as exc:
                out.append(str(exc))
        return out

    @staticmethod
    def _level(name: str, grades: list[float | str], details: dict, asked: int) -> float:
        ok = [g for g in grades if not isinstance(g, str)]
        failed = [g for g in grades if isinstance(g, str)]
        details["levels"][name] = {"asked": asked, "graded": len(ok), "failed": len(failed),
                                   "grades": [round(g, 4) if not isinstance(g, str) else None for g in grades]}
        if failed:
            details["levels"][name]["first_failure"] = snippet(failed[0], 200)
        if grades and not ok:
            raise GradingFailed(f"{name} level: every question failed ({snippet(failed[0], 160)})")
        return sum(ok) / len(ok) if ok else 0.0

    def block_level(self, questions: list[dict], tags: dict[str, Any], details: dict) -> float:
        turns = []
        for q in self._cap(questions):
            subj, obj = q.get("subject"), q.get("object")
            if subj not in tags or obj not in tags:
                continue
            turns.append(block_turn(str(q["Question"]), subj, obj, tags))
        if not turns:
            details["levels"]["block"] = {"asked": 0, "note": "no question refers to blocks of this answer"}
            return 0.0
        return self._level("block", self._scale(turns), details, len(turns))

    def image_level(self, questions: list[dict], tags: dict[str, Any], details: dict) -> float:
        questions = self._cap(questions)
        answered: dict[Any, float] = {}
        grades: list[float | str] = []
        for q in questions:  # in order: a question waits for its preliminaries
            pre = q.get("Preliminary") or []
            image = tags.get(q.get("image"))
            if any(answered.get(p, 0.0) < 0.5 for p in pre) or not isinstance(image, ImageItem):
                answered[q.get("id")] = 0.0
                grades.append(0.0)
                continue
            g = self._yes([[("image", image.load()), ("text", f"Question: {q['Question']}\n")]])[0]
            answered[q.get("id")] = g if not isinstance(g, str) else 0.0
            grades.append(g)
        if not questions:
            return 0.0
        return self._level("image", grades, details, len(questions))

    def parts_level(self, prompt: Prompt, parts: list[Any], details: dict) -> float:
        request = prompt.content.text.strip()
        turns, before, k = [], "", 0
        for it in parts:
            if isinstance(it, TextItem):
                before = it.text
                continue
            k += 1
            if self.max_questions and k > self.max_questions:
                break
            head = [("image", im.load()) for im in prompt.content.images]
            turns.append(head + [("image", it.load()), ("text", PART.format(request=request, k=k, before=snippet(before, 400)))])
        if not turns:
            return 0.0
        return self._level("parts", self._scale(turns), details, len(turns))

    def holistic(self, prompt: Prompt, parts: list[Any], details: dict) -> float:
        turn: list = [("text", HOLISTIC_HEAD)]
        turn += [("image", it.load()) if isinstance(it, ImageItem) else ("text", it.text) for it in prompt.content]
        turn.append(("text", HOLISTIC_MID))
        turn += [("image", it.load()) if isinstance(it, ImageItem) else ("text", it.text) for it in parts] or [("text", "(empty)")]
        turn.append(("text", HOLISTIC_TAIL))
        grade = self._scale([turn])[0]
        details["levels"]["holistic"] = {"grade": None if isinstance(grade, str) else round(grade, 4)}
        if isinstance(grade, str):
            raise GradingFailed(f"holistic grade: {grade}")
        return grade


def with_ending(turns: list[list], instruction: str) -> list[list]:
    """Each turn with ``instruction`` appended to its closing text."""
    return [t[:-1] + [("text", t[-1][1] + instruction)] for t in turns]


def block_turn(question: str, subj: str, obj: str, tags: dict[str, Any]) -> list:
    """The grading turn for one ISG relation question: both blocks shown, tags renamed for the grader."""
    images = [t for t in (subj, obj) if isinstance(tags[t], ImageItem)]
    texts = [t for t in (subj, obj) if not isinstance(tags[t], ImageItem)]
    names: dict[str, str] = {}
    for n, t in enumerate(images, 1):
        names[t] = f"Image {n}" if len(images) > 1 else "the image"
    for n, t in enumerate(texts, 1):
        names[t] = f"Text {n}" if len(texts) > 1 else "the text"
    q = question
    for t, label in names.items():
        q = q.replace(t, label)
    q = TAG.sub("it", q)
    context = "".join(f"{names[t][0].upper() + names[t][1:]}: \"{snippet(tags[t], 600)}\"\n" for t in texts)
    return [("image", tags[t].load()) for t in images] + [("text", BLOCK.format(context=context, question=q))]


def asked_images(text: str) -> int | None:
    """The number of pictures a request asks for ("use 4 images", "three pictures"), if it says."""
    m = ASKED_IMAGES.search(text)
    if not m:
        return None
    word = m.group(1).lower()
    return int(word) if word.isdigit() else NUMBER_WORDS.get(word)


# --- ISG-Bench items -------------------------------------------------------------------------------------


def read_isg_item(item: dict[str, Any], base_dir: Any) -> tuple[Prompt, Candidate]:
    """An item in ISG-Bench's fields plus its answer (``output``) as the prompt and candidate to score."""
    from generators.suites.isg_bench import evaluation_graph

    base = Path(base_dir)
    iid = item.get("id")
    if iid is None or str(iid) == "":
        raise BonError(f"ISG item {json.dumps(item)[:60]}: no id")
    who = f"ISG item {iid}"
    for field in ("Query", "Golden", "output"):
        if not isinstance(item.get(field), list):
            raise BonError(f"{who}: field {field} must be a list of {{type, content}} parts")
    query = Content([_item_part(p, base, f"{who} Query[{k}]") for k, p in enumerate(item["Query"])])
    output = Content([_item_part(p, base, f"{who} output[{k}]") for k, p in enumerate(item["output"])])
    golden = []
    for k, p in enumerate(item["Golden"]):
        kind, value = _item_part(p, base, f"{who} Golden[{k}]"), p.get("content")
        golden.append({"type": "text", "content": str(value)} if isinstance(kind, TextItem)
                      else {"type": "image", "content": str(kind.path)})
    meta = {"source": "isg-bench", "benchmark_id": str(iid), "category": str(item.get("Category")),
            "golden": {"structure": [g["type"] for g in golden], "parts": golden}, "predict": item.get("predict")}
    graph = evaluation_graph(item.get("predict"))
    if graph:
        meta["isg"] = graph
    prompt = Prompt(str(iid), "interleaved", query, meta)
    return prompt, Candidate(str(iid), 0, "answer", 0, output)


def _item_part(part: Any, base: Path, where: str) -> Any:
    if not isinstance(part, dict) or part.get("type") not in ("text", "image"):
        raise BonError(f"{where}: a part must be {{type: text | image, content}}, got {json.dumps(part)[:60]}")
    content = part.get("content")
    if part["type"] == "text":
        if not isinstance(content, str):
            raise BonError(f"{where}: text content must be a string")
        return TextItem(content)
    if not isinstance(content, str) or not content:
        raise BonError(f"{where}: image content must be a path")
    from generators.suites import resolve_image_path

    path = resolve_image_path(content, base, where)
    if path is None:
        raise BonError(f"{where}: image {content} not found under {base}")
    return ImageItem(path=path)
