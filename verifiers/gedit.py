"""``gedit``: instruction editing graded by a VLM the way GEdit-Bench scores edits.

Two metrics (``metric``):

- ``official`` (default): GEdit-Bench's own evaluation (VIEScore's SC and PQ requests, reply reader,
  re-ask and fallback, and the per-category aggregation; see :mod:`verifiers._gedit_official`). The request
  texts are read from a checkout that ``prompts_dir`` points at (stepfun-ai/Step1X-Edit, its GEdit-Bench
  folder, or TIGER-AI-Lab/VIEScore; not needed with ``grader: replay:FILE``); an API grader gets the
  official request (no temperature, 1400 tokens, JPEG images at their size) unless set. Options:
  ``on_failure`` (official | zero | missing: what a question still unreadable after the re-ask scores,
  inside the score: the guess, 0, or no score; only ``missing`` leaves a failed score for the study's own
  ``on_failure``, which the class's ``official_on_failure`` resolves), ``max_attempts`` (3: tries within
  one evaluation, where the official code asks without end) and ``max_evaluations`` (10000, the official
  limit on evaluations restarted after a reply that reads but gives no usable score; each is two calls, so
  lower it to cap what a grader that never scores costs). The score is ``overall / 10``;
  :meth:`GEditVerifier.aggregate` gives the official numbers per language: category means and their mean,
  and the Intersection subset.
- ``bon``: bon's own wording and settings, below.

The ``bon`` metric: two questions per candidate, each answered with two scores on GEdit-Bench's 0-10 scale:

- semantic consistency (SC), shown the input image, the edited image and the instruction: how fully the
  edit carries out the instruction, and how well everything else is left alone (over-editing);
- perceptual quality (PQ), shown the edited image alone: naturalness, and freedom from artifacts.

As in GEdit-Bench, ``SC = min(SC scores)``, ``PQ = min(PQ scores)`` and the overall ``O = sqrt(SC * PQ)``
(0-10); the verifier's score is ``O / 10`` in [0, 1]. Images are resized to about ``image_area``
pixels first (512 x 512, as GEdit-Bench's scorer does). The wording of the questions is bon's own.

Modes:

- ``generate`` (default): the grader writes ``{"reasoning": ..., "score": [a, b]}`` per question (2 calls);
- ``logits``: four single-criterion questions, each answered by one digit 0-9; a criterion's score is
  the probability-weighted mean digit rescaled to 0-10 (4 forward passes, no text parsing).

Options: ``model`` / ``grader`` (see :mod:`verifiers._grader`), ``mode``, ``image_area`` (262144; null keeps
sizes), ``max_new_tokens`` (256), and the local model settings (``dtype``, ``device``, ``batch_size``...).

``read_item`` takes GEdit-Bench's fields (``key``, ``task_type``, ``instruction``, ``instruction_language``,
``Intersection_exist``, ``source_image`` or ``input_image``: a path) and the edit as ``edited_image`` (the
official result file's column), paths relative to the items file. An item is its key *and* language (the
benchmark keeps the languages apart): its id, the prompt id and a replay file's ``item`` are ``<key>_<language>``.

The input image is the prompt's first image, the instruction its text; the edit is the candidate's
first image. No image, an unreadable answer or a failed call: a missing score with the reason.
Details: ``sc``, ``pq``, ``overall`` (0-10), the per-criterion scores, the grader's answers, ``grader``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bon.content import Candidate, Content, ImageItem, Prompt, TextItem
from bon.errors import BonError
from bon.plugins import Score, Verifier
from verifiers import _gedit_official as official
from verifiers._grader import (DIGITS, GRADER_OPTIONS, GradingFailed, check_grader_settings, digit_expectation, grader_from,
                               grader_modules, parse_scores, resize_to_area, snippet)
from verifiers._official import check_metric


SC_GENERATE = (
    "You are checking an image edit. The first image is the original; the second is the result of editing it "
    "with this instruction:\n\"{instruction}\"\n"
    "Give two scores from 0 to 10:\n"
    "1. How completely and correctly does the second image carry out the instruction? (0 = not at all, 10 = perfectly)\n"
    "2. How well does the second image keep everything the instruction did not ask to change? "
    "(0 = an unrelated or heavily altered image, 10 = nothing else changed)\n"
    'Reply with JSON only: {{"reasoning": "<one short sentence>", "score": [<first>, <second>]}}'
)
PQ_GENERATE = (
    "You are checking the visual quality of an AI-generated image, not what it shows.\n"
    "Give two scores from 0 to 10:\n"
    "1. Naturalness: does it look like a plausible photograph or artwork, with consistent lighting, perspective "
    "and proportions? (0 = clearly unnatural, 10 = fully natural)\n"
    "2. Artifacts: is it free of distortions, blur, noise, smeared textures and broken details? "
    "(0 = heavily damaged, 10 = no artifacts)\n"
    'Reply with JSON only: {"reasoning": "<one short sentence>", "score": [<naturalness>, <artifacts>]}'
)
SC_LOGITS = (
    "The first image is the original; the second is the result of editing it with this instruction:\n"
    "\"{instruction}\"\n{question}\nAnswer with one digit from 0 ({low}) to 9 ({high})."
)
SC_QUESTIONS = (
    ("How completely and correctly does the second image carry out the instruction?", "not at all", "perfectly"),
    ("How well does the second image keep everything the instruction did not ask to change?", "heavily altered",
     "nothing else changed"),
)
PQ_LOGITS = "This is an AI-generated image.\n{question}\nAnswer with one digit from 0 ({low}) to 9 ({high})."
PQ_QUESTIONS = (
    ("How natural does it look (lighting, perspective, proportions)?", "clearly unnatural", "fully natural"),
    ("How free is it of distortions, blur, noise and broken details?", "heavily damaged", "no artifacts"),
)


ITEM_FIELDS = ("key", "task_type", "instruction", "instruction_language")


class GEditVerifier(Verifier):
    plugin = "gedit"
    required_modules = staticmethod(grader_modules)  # optional packages (bon.preflight)
    run_only = ("prompts_dir",)  # where the checkout lies; its texts are in the identity (a hash)
    extra_options = GRADER_OPTIONS  # forwarded to the grader back-end; checked by name like the rest
    version = 2  # 2: a reply that reads but gives no usable score starts a new evaluation (the official flow)
    # an unreadable grade is handled inside the score by the option ``on_failure`` (official: re-ask, then a
    # guess); what still fails (no edited image, or the option's ``missing``) is left out, as
    # test_gedit_score.py skips an item whose edited image is absent and the statistics average what is there
    official_on_failure = "missing"

    def __init__(self, model: str | None = None, name: str | None = None, grader: dict[str, Any] | str | None = None,
                 mode: str = "generate", image_area: int | None = 512 * 512, max_new_tokens: int = 256,
                 metric: str = "official", prompts_dir: str | None = None, on_failure: str = "official",
                 max_attempts: int = 3, max_evaluations: int = official.MAX_EVALUATIONS, **grader_options: Any) -> None:
        self.name = name or self.plugin
        check_grader_settings(self.name, mode, grader_options)
        self.metric = check_metric(self.name, metric, mode, grader)
        self.official: official.GEditOfficial | None = None
        if metric == "official":
            self.grader = grader_from(model, grader, grader_options, self.name, defaults=official.OFFICIAL_API)
            self.official = official.GEditOfficial(self.grader, official.load_prompts(prompts_dir, self.name), on_failure,
                                                   max_attempts, self.name, max_evaluations)
            self.mode = mode
            return
        self.grader = grader_from(model, grader, grader_options, self.name)
        self.mode = mode
        self.image_area = int(image_area) if image_area else None
        self.max_new_tokens = int(max_new_tokens)

    def close(self) -> None:
        if self.grader is not None:
            self.grader.close()

    def identity(self) -> dict[str, Any]:
        if self.official is not None:
            return {"name": self.name, "plugin": self.plugin, **self.official.identity(), "grader": self.grader.identity()}
        return {"name": self.name, "plugin": self.plugin, "metric": "bon", "image_area": self.image_area,
                "grader": self.grader.identity()}

    # --- benchmark items (bon score) -----------------------------------------------------------------
    def item_id(self, item: dict[str, Any]) -> str:
        """``<key>_<language>``: one key in both languages is two items (their results are kept apart)."""
        return f"{item.get('key', '')}_{item.get('instruction_language', '')}"

    def read_item(self, item: dict[str, Any], base_dir: Any) -> tuple[Prompt, Candidate]:
        return read_gedit_item(item, Path(base_dir))

    def aggregate(self, scored: Any) -> dict[str, Any]:
        if self.official is None:
            return super().aggregate(scored)
        scored = list(scored)
        records = [{"category": str(p.metadata.get("category")), "language": str(p.metadata.get("language", "en")),
                    "intersection_exist": bool(p.metadata.get("intersection_exist")), "sc": s.details["sc"],
                    "pq": s.details["pq"], "overall": s.details["overall"]} for p, s in scored if s.value is not None]
        return official.aggregate(records, failed=len(scored) - len(records), items=len(scored))

    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        if self.official is not None:
            return self.official_score(prompt, candidate)
        instruction = prompt.content.text.strip()
        if not prompt.content.images:
            return Score(None, missing=f"{self.name}: the edit prompt has no input image")
        if not candidate.content.images:
            return Score(None, missing=f"{self.name}: the candidate has no image")
        try:
            source = resize_to_area(prompt.content.images[0].load(), self.image_area)
            edited = resize_to_area(candidate.content.images[0].load(), self.image_area)
        except BonError as exc:
            return Score(None, missing=str(exc))
        details: dict[str, Any] = {"mode": self.mode}
        try:
            if self.mode == "generate":
                sc_scores, pq_scores = self._generate(instruction, source, edited, details)
            else:
                sc_scores, pq_scores = self._logits(instruction, source, edited, details)
        except GradingFailed as exc:
            details["grader"] = self.grader.identity()
            return Score(None, details, missing=f"{self.name}: {exc}", transient=exc.transient)
        sc, pq = min(sc_scores), min(pq_scores)
        overall = math.sqrt(sc * pq)
        details.update({"sc": round(sc, 4), "pq": round(pq, 4), "overall": round(overall, 4),
                        "sc_scores": [round(v, 4) for v in sc_scores], "pq_scores": [round(v, 4) for v in pq_scores],
                        "grader": self.grader.identity()})
        return Score(overall / 10.0, details)

    def official_score(self, prompt: Prompt, candidate: Candidate) -> Score:
        if not prompt.content.images:
            return Score(None, missing=f"{self.name}: the edit prompt has no input image")
        if not candidate.content.images:
            return Score(None, missing=f"{self.name}: the candidate has no image")
        try:
            source, edited = prompt.content.images[0].load(), candidate.content.images[0].load()
        except BonError as exc:
            return Score(None, missing=str(exc))
        meta = {"key": prompt.metadata.get("benchmark_id", prompt.id), "category": prompt.metadata.get("category"),
                "language": prompt.metadata.get("language"), "intersection_exist": prompt.metadata.get("intersection_exist")}
        return self.official.score(prompt.id, f"{candidate.generator}/{candidate.index}", prompt.content.text, source, edited, meta)

    def sc_turn(self, instruction: str, source: Any, edited: Any) -> list:
        return [("image", source), ("image", edited), ("text", SC_GENERATE.format(instruction=instruction))]

    def pq_turn(self, edited: Any) -> list:
        return [("image", edited), ("text", PQ_GENERATE)]

    def _generate(self, instruction: str, source: Any, edited: Any, details: dict) -> tuple[list[float], list[float]]:
        answers = self.grader.answer([self.sc_turn(instruction, source, edited), self.pq_turn(edited)], self.max_new_tokens)
        details["answers"] = {"sc": snippet(answers[0], 400), "pq": snippet(answers[1], 400)}
        scores = []
        for question, answer in zip(("semantic-consistency", "perceptual-quality"), answers):
            try:
                scores.append(parse_scores(answer, 2))
            except GradingFailed as exc:
                raise GradingFailed(f"{question} answer {exc}", exc.transient) from None
        return scores[0], scores[1]

    def _logits(self, instruction: str, source: Any, edited: Any, details: dict) -> tuple[list[float], list[float]]:
        turns = [[("image", source), ("image", edited),
                  ("text", SC_LOGITS.format(instruction=instruction, question=q, low=lo, high=hi))] for q, lo, hi in SC_QUESTIONS]
        turns += [[("image", edited), ("text", PQ_LOGITS.format(question=q, low=lo, high=hi))] for q, lo, hi in PQ_QUESTIONS]
        probs = self.grader.next_word_probs(turns, DIGITS)
        expected = [digit_expectation(p) for p in probs]
        if None in expected:
            raise GradingFailed("no probability on the digits 0-9")
        values = [10.0 * e / 9.0 for e in expected]
        details["digit_mass"] = [round(sum(p.values()), 6) for p in probs]
        return values[:2], values[2:]


def read_gedit_item(item: dict[str, Any], base: Path) -> tuple[Prompt, Candidate]:
    """A GEdit-Bench item (its own fields) and the edit to score as a prompt and candidate."""
    key = item.get("key")
    who = f"GEdit item {key if key not in (None, '') else '(no key)'}"
    for field in ITEM_FIELDS:
        if not isinstance(item.get(field), str) or not item[field]:
            raise BonError(f"{who}: field {field} is missing or not a string")
    source_field = "source_image" if "source_image" in item else "input_image"
    source, edited = (_image_path(item, f, base, who) for f in (source_field, "edited_image"))
    lang = item["instruction_language"]
    meta = {"source": "gedit-bench", "benchmark_id": item["key"], "category": item["task_type"], "language": lang,
            "intersection_exist": bool(item.get("Intersection_exist", False))}
    prompt = Prompt(f"{item['key']}_{lang}", "edit", Content([TextItem(item["instruction"]), ImageItem(path=source)]), meta)
    return prompt, Candidate(prompt.id, 0, "edit", 0, Content([ImageItem(path=edited)]))


def _image_path(item: dict[str, Any], field: str, base: Path, who: str) -> Path:
    value = item.get(field)
    if not isinstance(value, str) or not value:
        raise BonError(f"{who}: field {field} (an image path) is missing")
    from bon.content import safe_join

    path = safe_join(base, value, f"{who}: {field}")  # the one path rule: inside the items' folder
    if not path.is_file():
        raise BonError(f"{who}: {field} {value} not found under {base}")
    return path
