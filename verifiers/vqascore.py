"""``vqascore``: text-to-image alignment as a VLM's probability of "Yes" (VQAScore, as GenAI-Bench uses).

The grader sees the candidate's image and the question ``Does this figure show "{prompt}"? Please
answer yes or no.`` (the default template of t2v_metrics, GenAI-Bench's official code) and the score is
P("Yes") for the first answer token, in [0, 1]; a candidate with several images scores their mean, as
the official evaluation averages a prompt's images. Three back-ends:

- a local chat VLM (``model: HUB_ID``): the ``vqascore`` judge's code path
  (:class:`judges.reward_models.VqaScoreJudge`: loading, batching, halving on out-of-memory, revision pinning);
- an API (``grader: {backend: openai, model, ...}``): the top log-probabilities of the first token, the
  question before the image, read as t2v_metrics' GPT-4o back-end reads them (:func:`official_yes`; under
  ``metric: ocr-blend`` the probability of ``Yes`` alone);
- CLIP-FlanT5, the official default model (``grader: {backend: t2v-metrics, model: clip-flant5-xxl,
  python: ENV/bin/python}``): t2v_metrics itself in a side process (:mod:`verifiers.t2v_side`).

Options:

- ``metric``: ``official`` (default): pure VQAScore, aggregated per skill as GenAI-Bench's evaluation
  does (:meth:`aggregate`); ``ocr-blend``: for prompts that quote text (``a sign that says "OPEN"``),
  ``(1 - ocr_weight) * vqascore + ocr_weight * ocr`` with the ``ocr-text`` check (``ocr_weight``, default
  0.3; ``ocr``: its options); prompts without quotes keep the VQAScore
- ``question``: the template, with ``{prompt}``
- ``fallback_to_answer`` (default false): an API without log-probabilities is an error (VQAScore needs
  P("Yes")); true scores its written answer 1 for yes and 0 for no instead (``mode: answer`` in the
  details, counted in report.md)
- ``dtype``, ``device``, ``device_map``, ``revision``, ``batch_size``, ``max_image_pixels``: local model settings

A candidate without an image, an unreadable image or a failed grader call is a missing score with
its reason; the official code counts such a score as 0 (:attr:`official_on_failure`). Details:
``per_image``, ``question``, ``mode``, ``metric``, ``grader`` (model and revision), and the OCR part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from bon.content import Candidate, Content, ImageItem, Prompt, TextItem, safe_join
from bon.errors import BonError
from bon.lifecycle import LoadFailed
from bon.plugins import Score, Verifier
from verifiers._grader import (GRADER_OPTIONS, YES_NO, Grader, GradingFailed, NoLogprobs, grader_modules, grader_spec, make_grader,
                               parse_yes_no)

QUESTION = 'Does this figure show "{prompt}"? Please answer yes or no.'
METRICS = ("official", "ocr-blend")
DEFAULT_OCR_WEIGHT = 0.3


class VqaScoreVerifier(Verifier):
    plugin = "vqascore"
    required_modules = staticmethod(grader_modules)  # optional packages (bon.preflight)
    version = 1
    official_on_failure = "zero"  # t2v_metrics' API back-end scores a call that failed twice 0.0

    def __init__(self, model: str | None = None, name: str | None = None, grader: dict[str, Any] | None = None,
                 question: str = QUESTION, metric: str = "official", ocr_weight: float | None = None,
                 fallback_to_answer: bool = False, ocr: dict[str, Any] | None = None, **local: Any) -> None:
        self.name = name or self.plugin
        if "{prompt}" not in question:
            raise BonError(f"{self.name}: question must contain {{prompt}}")
        self.metric = metric
        self.ocr_weight = self._ocr_weight(metric, ocr_weight, ocr)
        unknown = sorted(set(local) - set(GRADER_OPTIONS))
        if unknown:
            raise BonError(f"{self.name}: unknown option(s) {', '.join(unknown)}")
        self.question = question
        self.fallback_to_answer = bool(fallback_to_answer)
        self.judge: Any = None
        self.grader: Grader | None = None
        self.side: Any = None
        if isinstance(grader, Grader):  # a ready grader object (tests, or code that builds its own)
            self.grader = grader
        else:
            self._build_backend(grader_spec(model, grader, local, self.name))
        self.ocr = None
        if self.ocr_weight > 0:
            from verifiers.ocr_text import OcrTextVerifier

            self.ocr = OcrTextVerifier(name=f"{self.name}.ocr", **(ocr or {}))

    def _ocr_weight(self, metric: str, weight: float | None, ocr: dict[str, Any] | None) -> float:
        """The OCR blend's weight: only under ``metric: ocr-blend`` (the official metric is pure VQAScore)."""
        if metric not in METRICS:
            raise BonError(f"{self.name}: metric must be one of {', '.join(METRICS)}, got {metric!r}")
        if metric == "official":
            if weight or ocr:
                raise BonError(f"{self.name}: ocr_weight/ocr belong to metric: ocr-blend; the official GenAI-Bench "
                               "metric is pure VQAScore")
            return 0.0
        weight = DEFAULT_OCR_WEIGHT if weight is None else weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= float(weight) <= 1.0:
            raise BonError(f"{self.name}: ocr_weight must lie in [0, 1], got {weight!r}")
        return float(weight)

    def _build_backend(self, spec: dict[str, Any]) -> None:
        backend = spec.get("backend", "transformers")
        if backend == "t2v-metrics":  # CLIP-FlanT5 through t2v_metrics in its own environment
            from verifiers.t2v_side import T2vMetricsProcess

            self.side = T2vMetricsProcess.from_spec(spec, self.name)
            return
        if not spec.get("model"):
            raise BonError(f"{self.name}: option 'model' (the grader VLM) is required, e.g. vqascore:Qwen/Qwen2.5-VL-7B-Instruct")
        if backend == "transformers":  # the vqascore judge's own code path
            from judges.reward_models import VqaScoreJudge

            spec.pop("backend", None)
            self.judge = VqaScoreJudge(name=self.name, question=self.question, **spec)
        else:
            self.grader = make_grader(spec, self.name)

    def grader_identity(self) -> dict[str, Any]:
        if self.judge is not None:
            ident = self.judge.identity()
            return {"backend": "transformers", "model": ident.get("model"), "revision": ident.get("revision"),
                    "dtype": ident.get("dtype")}
        return (self.side or self.grader).identity()

    def close(self) -> None:
        for holder in (self.judge, self.grader, self.side):
            if holder is not None:
                holder.close()

    def identity(self) -> dict[str, Any]:
        ident = {"name": self.name, "plugin": self.plugin, "grader": self.grader_identity(), "metric": self.metric,
                 "ocr_weight": self.ocr_weight}
        if self.fallback_to_answer:
            ident["fallback_to_answer"] = True
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
        base.details["metric"] = self.metric
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
            values, mode = self._ask(candidate.content.images, text, question)
        except GradingFailed as exc:
            return Score(None, missing=f"{self.name}: {exc}", transient=exc.transient)
        details = {"per_image": [round(v, 6) for v in values], "question": question, "mode": mode,
                   "grader": self.grader_identity()}
        return Score(sum(values) / len(values), details)

    def _ask(self, items: Sequence[ImageItem], text: str, question: str) -> tuple[list[float], str]:
        """P("Yes") per image and how it was read (``logprobs``, or ``answer`` under the opted-in fallback)."""
        if self.side is not None:
            return self.side.yes_probabilities(items, text, self.question), "logprobs"
        try:
            images = [it.load() for it in items]
        except BonError as exc:  # an unreadable image: this candidate's score is missing
            raise GradingFailed(str(exc)) from None
        turns = [[("text", question), ("image", im)] for im in images]  # t2v_metrics' API order: question, image
        try:
            if self.metric == "official":
                return [official_yes(p) for p in self.grader.next_word_probs(turns, YES_NO)], "logprobs"
            return [p["Yes"] for p in self.grader.next_word_probs(turns, ["Yes"])], "logprobs"
        except NoLogprobs as exc:
            if not self.fallback_to_answer:  # a setting, not this candidate: the stage stops with one line
                raise LoadFailed(f"{self.name}: {exc}; VQAScore is P(\"Yes\") and needs them (choose a grader that "
                               "returns log-probabilities, or set fallback_to_answer: true to score yes/no answers as 1/0)") from None
        return [1.0 if parse_yes_no(a) else 0.0 for a in self.grader.answer(turns, max_new_tokens=8)], "answer"

    # --- bon score: GenAI-Bench items and the official aggregate -------------------------------------

    def item_id(self, item: dict[str, Any]) -> str:
        return str(item.get("id", item.get("Index", "")))

    def read_item(self, item: dict[str, Any], base_dir: Any) -> tuple[Prompt, Candidate]:
        """A GenAI-Bench row (``id``, ``prompt``, ``basic_skills``, ``advanced_skills``; or the earlier
        ``Index``, ``Prompt``, ``Tags``) with the candidate's ``image`` (or ``images``), paths relative to ``base_dir``."""
        from generators.suites.genai_bench import to_prompt

        where = f"item {self.item_id(item) or '?'}"
        prompt = to_prompt(item, where)
        paths = item.get("images", [item["image"]] if "image" in item else None)
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
            raise BonError(f"GenAI-Bench: {where}: field image (a path) or images (a list of paths) is required")
        files = [safe_join(Path(base_dir), p, f"GenAI-Bench: {where}: image") for p in paths]
        absent = next((f for f in files if not f.is_file()), None)
        if absent is not None:
            raise BonError(f"GenAI-Bench: {where}: image {absent} not found")
        content = Content([TextItem(str(item["response"]))] if item.get("response") else [])
        content.items += [ImageItem(path=f) for f in files]
        return prompt, Candidate(prompt.id, 0, "bon-score", 0, content)

    def aggregate(self, scored: Sequence[tuple[Prompt, Score]]) -> dict[str, Any]:
        """GenAI-Bench's official numbers: VQAScore per skill tag, ``basic``/``advanced`` and ``all``."""
        from verifiers.genai_official import prompt_tags, skill_breakdown

        out = skill_breakdown((prompt_tags(p.metadata), s.value) for p, s in scored)
        answers = sum(s.details.get("mode") == "answer" for _, s in scored)
        return {"metric": self.metric, **out, **({"scored_from_answers": answers} if answers else {})}


def official_yes(probs: dict[str, float]) -> float:
    """P(Yes) from an API's first-token probabilities as t2v_metrics' GPT-4o back-end reads them: the most
    likely of yes/no (any case) decides; P(yes) if it is a yes, 1 - P(no) if it is a no, 0 if neither came."""
    top = max(YES_NO, key=lambda w: probs.get(w, 0.0))
    p = probs.get(top, 0.0)
    if not p > 0:
        return 0.0
    return p if top.lower() == "yes" else 1.0 - p

