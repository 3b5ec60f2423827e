"""``vqascore``: text-to-image alignment as a VLM's probability of "Yes" (VQAScore, as GenAI-Bench uses).

The grader sees the candidate's image and the question ``Does this figure show "{prompt}"? Please
answer yes or no.`` and the score is P("Yes") over its whole vocabulary for the first answer token,
in [0, 1]; a candidate with several images scores their mean. With a local model this reuses the
``vqascore`` judge (:class:`judges.reward_models.VqaScoreJudge`: same loading, batching, halving on
out-of-memory and revision pinning); with an API grader it reads the top log-probabilities of the first token.

Options:

- ``model``: the grader, a hub id or folder (``vqascore:Qwen/Qwen2.5-VL-7B-Instruct``); or ``grader``: a
  mapping ``{backend: transformers | openai, model, ...}`` (see :mod:`verifiers._grader`)
- ``question``: the template, with ``{prompt}`` (default GenAI-Bench's VQAScore question)
- ``dtype``, ``device``, ``device_map``, ``revision``, ``batch_size``, ``max_image_pixels``: local model settings
- ``ocr_weight`` (default 0): for prompts that quote text (``a sign that says "OPEN"``), blend in the
  ``ocr-text`` score: ``(1 - w) * vqascore + w * ocr``; prompts without quotes keep the VQAScore
- ``fallback_to_answer`` (default true): an API without log-probabilities answers in words, scored 1 for
  yes and 0 for no (recorded as ``mode: answer`` in the details)

A candidate without an image, an unreadable image or a failed grader call is a missing score with
its reason. Details: ``per_image``, ``question``, ``grader`` (model and revision), and the OCR part.
"""

from __future__ import annotations

from typing import Any

from bon.content import Candidate, Prompt
from bon.errors import BonError
from bon.plugins import Score, Verifier
from verifiers._grader import GRADER_OPTIONS, Grader, GradingFailed, NoLogprobs, grader_spec, make_grader, parse_yes_no

QUESTION = 'Does this figure show "{prompt}"? Please answer yes or no.'


class VqaScoreVerifier(Verifier):
    plugin = "vqascore"
    version = 1

    def __init__(self, model: str | None = None, name: str | None = None, grader: dict[str, Any] | None = None,
                 question: str = QUESTION, ocr_weight: float = 0.0, fallback_to_answer: bool = True,
                 ocr: dict[str, Any] | None = None, **local: Any) -> None:
        self.name = name or self.plugin
        if "{prompt}" not in question:
            raise BonError(f"{self.name}: question must contain {{prompt}}")
        if not 0.0 <= float(ocr_weight) <= 1.0:
            raise BonError(f"{self.name}: ocr_weight must lie in [0, 1], got {ocr_weight}")
        unknown = sorted(set(local) - set(GRADER_OPTIONS))
        if unknown:
            raise BonError(f"{self.name}: unknown option(s) {', '.join(unknown)}")
        self.question = question
        self.ocr_weight = float(ocr_weight)
        self.fallback_to_answer = bool(fallback_to_answer)
        self.judge: Any = None
        self.grader: Grader | None = None
        if isinstance(grader, Grader):  # a ready grader object (tests, or code that builds its own)
            self.grader = grader
        else:
            spec = grader_spec(model, grader, local, self.name)
            if not spec.get("model"):
                raise BonError(f"{self.name}: option 'model' (the grader VLM) is required, e.g. vqascore:Qwen/Qwen2.5-VL-7B-Instruct")
            if spec.get("backend", "transformers") == "transformers":  # the vqascore judge's own code path
                from judges.reward_models import VqaScoreJudge

                spec.pop("backend", None)
                self.judge = VqaScoreJudge(name=self.name, question=question, **spec)
            else:
                self.grader = make_grader(spec, self.name)
        self.ocr = None
        if self.ocr_weight > 0:
            from verifiers.ocr_text import OcrTextVerifier

            self.ocr = OcrTextVerifier(name=f"{self.name}.ocr", **(ocr or {}))

    def grader_identity(self) -> dict[str, Any]:
        if self.judge is not None:
            ident = self.judge.identity()
            return {"backend": "transformers", "model": ident.get("model"), "revision": ident.get("revision"),
                    "dtype": ident.get("dtype")}
        return self.grader.identity()

    def close(self) -> None:
        for holder in (self.judge, self.grader):
            if holder is not None:
                holder.close()

    def identity(self) -> dict[str, Any]:
        ident = {"name": self.name, "plugin": self.plugin, "grader": self.grader_identity(),
                 "ocr_weight": self.ocr_weight}
        if self.ocr is not None:
            ident["ocr"] = self.ocr.identity()
        return ident

    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        text = prompt.content.text.strip()
        if not text:
            return Score(None, missing=f"{self.name}: the prompt has no text to ask about")
        if not candidate.content.images:
            return Score(None, missing=f"{self.name}: the candidate has no image")
        base = self._vqa(prompt, candidate, text)
        if base.value is None or self.ocr is None:
            return base
        ocr = self.ocr.score(prompt, candidate)
        if ocr.missing and ocr.details.get("quotes") == []:
            base.details["ocr"] = "no quoted text"
            return base  # nothing to read: VQAScore alone
        if ocr.value is None:
            return Score(None, details=base.details, missing=f"{self.name}: OCR check failed: {ocr.missing}")
        value = (1 - self.ocr_weight) * base.value + self.ocr_weight * ocr.value
        return Score(value, {**base.details, "vqascore": base.value, "ocr": ocr.details, "ocr_score": ocr.value})

    def _vqa(self, prompt: Prompt, candidate: Candidate, text: str) -> Score:
        question = self.question.format(prompt=text)
        if self.judge is not None:
            s = self.judge.score(prompt, [candidate.content])[0]
            details = {**s.details, "question": question, "grader": self.grader_identity()}
            return Score(s.value, details, s.missing)
        try:
            images = [it.load() for it in candidate.content.images]
        except BonError as exc:
            return Score(None, missing=str(exc))
        turns = [[("image", im), ("text", question)] for im in images]
        mode = "logprobs"
        try:
            try:
                values = [p["Yes"] for p in self.grader.next_word_probs(turns, ["Yes"])]
            except NoLogprobs:
                if not self.fallback_to_answer:
                    raise
                mode = "answer"
                values = [1.0 if parse_yes_no(a) else 0.0 for a in self.grader.answer(turns, max_new_tokens=8)]
        except GradingFailed as exc:
            return Score(None, missing=f"{self.name}: {exc}", transient=exc.transient)
        details = {"per_image": [round(v, 6) for v in values], "question": question, "mode": mode,
                   "grader": self.grader.identity()}
        return Score(sum(values) / len(values), details)
