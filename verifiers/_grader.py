"""Graders: the vision-language model a graded verifier asks its questions.

A grader answers *turns*: one user message of text and images in order (``[("text", str),
("image", PIL.Image), ...]``), in one of two ways:

- :meth:`Grader.answer`: the model writes an answer (greedy), which the verifier parses;
- :meth:`Grader.next_word_probs`: the probability the model gives each of a few words (``Yes``, ``No``,
  ``0`` ... ``9``) as the first word of its answer, from one forward pass (a local model's logits, or an
  API's top log-probabilities).

Two back-ends, chosen by ``backend`` in the grader spec:

- ``transformers`` (default): a local chat VLM through :class:`bon.backends.chat_vlm.ChatVlm`, the
  same loading, chat template, batching and revision pinning the ``transformers-vlm`` judge uses;
  a batch that runs out of memory is halved.
  Options: ``model`` (hub id or folder), ``revision``, ``dtype``, ``device``, ``device_map``,
  ``attn_implementation``, ``chat_template_kwargs``, ``max_image_pixels`` (default 1048576),
  ``batch_size`` (default 8).
- ``openai``: any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, Gemini's compatible
  endpoint, a vLLM server). Options: ``model``, ``base_url``, ``api_key_env`` (the *name* of the
  variable holding the key; null for none), ``max_image_side`` (1024), ``temperature`` (0),
  ``max_tokens_param``, ``reasoning_model``, ``top_logprobs`` (20), ``concurrency`` (4), ``timeout``
  (120), ``max_retries`` (4), ``preflight`` (true), ``extra_body``, ``image_format`` (png | jpeg | webp), ``image_quality`` (90, for jpeg/webp), ``image_detail`` (low | high | auto; none sent by default), ``merge_texts`` (true: adjacent texts as one part). Requests go through
  :mod:`bon.backends.openai_api` (the SDK's retries on 429/5xx and timeouts, the key read from the
  environment and never stored). Endpoints that return no log-probabilities (and GPT-5 / o-series
  models, which take none) make :meth:`next_word_probs` raise :class:`NoLogprobs`; the verifiers then
  ask for a written answer.

A third, ``grader: replay:FILE``, answers from canned replies (:class:`ReplayGrader`), so a verifier's
whole computation runs with no model: the official metrics ask it through :meth:`Grader.ask`, which
names each request's item and question. The file is JSONL, one reply per line::

    {"item": "0000", "question": "holistic", "reply": "{\"overall_score\": 7}"}
    {"item": "0000", "question": "block/1", "reply": "{\"Judge\": 10}"}
    {"item": "1a2b", "question": "sc", "attempt": 2, "reply": "[6, 0]"}

``item`` is the benchmark item's own id (the prompt id in a study), ``question`` the verifier's name for
the request (ISG: ``holistic``, ``block/<k>``, ``image/<k>`` with ``k`` the question's 0-based position in
the item's list; GEdit: ``sc``, ``pq``), ``reply`` the grader's raw text (null: a call that failed for good). Optional: ``attempt`` (1, 2,
...: the reply to the k-th time the same question is asked; a line without it answers every attempt)
and ``candidate`` (``generator/index``: a reply for one candidate of a study; without it, any). A
request the file does not answer is a one-line error naming the item and question (exit 2).

Any failure to grade raises :class:`GradingFailed` with a one-line reason, which the verifier records
as a missing score (never a zero); its ``transient`` says whether a rerun should try again (timeouts,
5xx, out of memory) or the answer is final (unparseable).
"""

from __future__ import annotations

import hashlib
import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from PIL import Image

from bon.backends.answers import json_objects, key_entries, snippet
from bon.errors import BonError, first_line
from bon.lifecycle import LoadFailed

Part = tuple[str, Any]  # ("text", str) or ("image", PIL.Image)
Turn = list[Part]
BACKENDS = ("transformers", "openai")
MODES = ("generate", "logits")  # a graded verifier asks for text, or reads next-token probabilities
GRADER_OPTIONS = ("revision", "dtype", "device", "device_map", "attn_implementation", "batch_size", "max_image_pixels",
                  "chat_template_kwargs", "base_url", "api_key_env", "max_image_side", "preflight", "timeout", "backend")


class GradingFailed(Exception):
    """Grading could not produce an answer; ``str(exc)`` is the reason recorded as missing."""

    def __init__(self, reason: str, transient: bool = False) -> None:
        super().__init__(reason)
        self.transient = transient


class NoLogprobs(GradingFailed):
    """The endpoint returned no log-probabilities."""


@dataclass(frozen=True)
class Request:
    """One grading turn and what it asks about: the item's id and the verifier's name for the question
    (what a replay file keys on), the attempt (a re-asked question) and the candidate."""

    turn: Turn
    item: str
    question: str
    attempt: int = 1
    candidate: str | None = None


class ReplayMissing(LoadFailed):
    """A replay file without the reply a request needs: bad input, never a missing score; in a study the
    verify stage stops with this one line (a LoadFailed), as ``bon score`` does (exit 2)."""


class Grader(ABC):
    name: str = "grader"

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What pins the grades: model, revision or endpoint, settings."""

    @abstractmethod
    def answer(self, turns: Sequence[Turn], max_new_tokens: int = 256) -> list[str]:
        """The model's written answer to each turn (greedy)."""

    @abstractmethod
    def next_word_probs(self, turns: Sequence[Turn], words: Sequence[str]) -> list[dict[str, float]]:
        """For each turn, the probability of each word as the answer's first token (softmax over the vocabulary)."""

    def close(self) -> None:
        """Release the model (a local grader's weights); the next question loads it again."""

    def ask(self, requests: Sequence[Request], max_new_tokens: int = 256) -> list[str | None]:
        """Written answers to named requests, None for a call that failed for good (what an official
        client keeps after its retries); a transient failure raises. A model grader only needs the turns."""
        try:
            return list(self.answer([r.turn for r in requests], max_new_tokens))
        except GradingFailed as exc:
            if exc.transient:
                raise
            return [None] * len(requests)


REPLAY = "replay:"


class ReplayGrader(Grader):
    """Canned replies from a JSONL file (see the module docstring): the whole computation with no model."""

    backend_name = "replay"

    def __init__(self, path: str | Path, who: str = "grader") -> None:
        self.name = who
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise BonError(f"{who}: replay file {self.path} not found")
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()
        self.replies = read_replies(self.path)

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "path": str(self.path), "sha256": self.sha256}

    def answer(self, turns: Sequence[Turn], max_new_tokens: int = 256) -> list[str]:
        raise BonError(f"{self.name}: a replay grader answers only named requests (metric: official)")

    def next_word_probs(self, turns: Sequence[Turn], words: Sequence[str]) -> list[dict[str, float]]:
        raise BonError(f"{self.name}: a replay grader holds written replies, not probabilities (mode: generate)")

    def ask(self, requests: Sequence[Request], max_new_tokens: int = 256) -> list[str | None]:
        return [self.reply(r) for r in requests]

    def reply(self, r: Request) -> str | None:
        for key in ((r.item, r.question, r.attempt, r.candidate), (r.item, r.question, None, r.candidate),
                    (r.item, r.question, r.attempt, None), (r.item, r.question, None, None)):
            if key in self.replies:
                return self.replies[key]
        who = f"item {r.item!r}" + (f" candidate {r.candidate}" if r.candidate else "")
        raise ReplayMissing(f"{self.path}: no reply for {who} question {r.question!r} (attempt {r.attempt})")


def read_replies(path: Path) -> dict[tuple[str, str, int | None, str | None], str | None]:
    """The replay file's replies by (item, question, attempt, candidate); a bad line is a one-line error."""
    from bon.content import read_jsonl

    out: dict[tuple[str, str, int | None, str | None], str | None] = {}
    for n, rec in read_jsonl(path, torn_tail_ok=False):
        where = f"{path}:{n}"
        missing = [k for k in ("item", "question", "reply") if k not in rec or (k != "reply" and rec[k] is None)]
        if missing:
            raise BonError(f"{where}: a replay line needs item, question and reply (no {', '.join(missing)})")
        if rec.get("reply", "") is not None and not isinstance(rec["reply"], str):
            raise BonError(f"{where}: reply must be the grader's text (a string; null: the call failed), "
                           f"got {type(rec['reply']).__name__}")
        attempt = rec.get("attempt")
        if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1):
            raise BonError(f"{where}: attempt must be a whole number from 1, got {attempt!r}")
        key = (str(rec["item"]), str(rec["question"]), attempt, None if rec.get("candidate") is None else str(rec["candidate"]))
        if key in out:
            raise BonError(f"{where}: a second reply for item {key[0]!r} question {key[1]!r}")
        out[key] = rec["reply"]
    if not out:
        raise BonError(f"{path}: no replies")
    return out


def make_grader(spec: dict[str, Any], who: str) -> Grader:
    """A grader from its mapping (see :func:`grader_spec`): ``backend``, ``model`` and the back-end's options."""
    if not spec.get("model"):
        raise BonError(f"{who}: a grader model is required (option model: HUB_ID or a folder, or grader: {{backend, model, ...}})")
    spec = dict(spec)
    backend = spec.pop("backend", "transformers")
    if backend not in BACKENDS:
        raise BonError(f"{who}: grader backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    try:
        if backend == "openai":
            return ApiGrader(who=who, **spec)
        return TransformersGrader(who=who, **spec)
    except TypeError as exc:
        raise BonError(f"{who}: bad {backend} grader options ({exc})") from None


def check_grader_settings(who: str, mode: str, options: dict[str, Any]) -> None:
    """A graded verifier's ``mode`` and the grader options it forwards, checked before any model loads."""
    if mode not in MODES:
        raise BonError(f"{who}: mode must be generate or logits, got {mode!r}")
    unknown = sorted(set(options) - set(GRADER_OPTIONS))
    if unknown:
        raise BonError(f"{who}: unknown option(s) {', '.join(unknown)}")


def grader_modules(options: dict[str, Any]) -> tuple[str, ...]:
    """The optional packages a graded verifier's grader imports (bon.preflight): none for a replay file or a
    grader in its own environment (t2v-metrics), the OpenAI client for an API, torch and transformers else."""
    grader = options.get("grader")
    if isinstance(grader, str):
        return ()
    backend = (grader or {}).get("backend", options.get("backend", "transformers"))
    return {"openai": ("openai",), "transformers": ("torch", "transformers")}.get(backend, ())


def grader_spec(model: str | None, grader: Any, options: dict[str, Any], who: str) -> dict[str, Any]:
    """The grader mapping from a verifier's ``model`` shorthand, its ``grader`` mapping and top-level grader
    options (``dtype``, ``device``, ``backend``, ...)."""
    if grader is not None and not isinstance(grader, dict):
        raise BonError(f"{who}: grader must be a mapping {{backend, model, ...}}, got {grader!r:.60}")
    spec = dict(grader or {})
    if model:
        spec.setdefault("model", model)
    return {**spec, **options}


def grader_from(model: str | None, grader: Any, options: dict[str, Any], who: str,
                defaults: dict[str, Any] | None = None) -> Grader:
    """The verifier's grader (see :func:`grader_spec`), a replay grader for ``replay:FILE``, or the Grader
    object it was given. ``defaults`` are API request settings a metric asks for unless the user set them."""
    if isinstance(grader, Grader):
        return grader
    if isinstance(grader, str) and grader.startswith(REPLAY):
        return ReplayGrader(grader[len(REPLAY):], who)
    spec = grader_spec(model, grader, options, who)
    if defaults and spec.get("backend") == "openai":
        spec = {**defaults, **spec}
    return make_grader(spec, who)


def yes_probability(probs: dict[str, float], normalize: bool) -> float | None:
    """P(yes) from the probabilities of Yes/yes/No/no; normalized over yes+no when asked."""
    yes = probs.get("Yes", 0.0) + probs.get("yes", 0.0)
    if not normalize:
        return yes
    no = probs.get("No", 0.0) + probs.get("no", 0.0)
    return yes / (yes + no) if yes + no > 0 else None


def digit_expectation(probs: dict[str, float]) -> float | None:
    """The probability-weighted mean of the digits 0-9 (renormalized over them); None without mass."""
    mass = sum(probs.get(str(d), 0.0) for d in range(10))
    if not mass > 0 or math.isnan(mass):
        return None
    return sum(d * probs.get(str(d), 0.0) for d in range(10)) / mass


YES_NO = ("Yes", "yes", "No", "no")
DIGITS = tuple(str(d) for d in range(10))


# --- local transformers model ------------------------------------------------------------------


class TransformersGrader(Grader):
    backend_name = "transformers"

    def __init__(self, model: str, who: str = "grader", revision: str | None = None, dtype: str = "auto",
                 device: str = "auto", device_map: str | dict | None = None, attn_implementation: str | None = None,
                 chat_template_kwargs: dict[str, Any] | None = None, max_image_pixels: int | None = 1024 * 1024,
                 batch_size: int = 8) -> None:
        from bon.backends.chat_vlm import ChatVlm

        if int(batch_size) < 1:
            raise BonError(f"{who}: grader batch_size must be at least 1, got {batch_size}")
        self.name = who
        self.max_image_pixels = int(max_image_pixels) if max_image_pixels else None
        self.backend = ChatVlm(str(model), who, revision=revision, dtype=dtype, device=device, device_map=device_map,
                               attn_implementation=attn_implementation, chat_template_kwargs=chat_template_kwargs,
                               batch_size=int(batch_size))
        self._ids: dict[str, list[int]] = {}

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, **self.backend.identity(), "max_image_pixels": self.max_image_pixels}

    def close(self) -> None:
        self.backend.close()

    def _render(self, turns: Sequence[Turn]) -> list[tuple[str, list[Image.Image]]]:
        from bon.backends.images import fit_pixels

        out = []
        for turn in turns:
            parts = [(k, fit_pixels(v, self.max_image_pixels) if k == "image" else v) for k, v in turn]
            try:
                out.append(self.backend.render(parts))
            except Exception as exc:  # noqa: BLE001 - a chat template that rejects the turn
                raise GradingFailed(f"{self.name}: cannot render the grading turn: {type(exc).__name__}: {first_line(exc)}") from None
        return out

    def _through_model(self, rendered: list[tuple[str, list[Image.Image]]], call: Any) -> list[Any]:
        """``call(batch)`` per batch (halved on out-of-memory); failures as GradingFailed, transient
        unless the model itself refuses the input."""
        from bon.backends.device import OutOfMemory

        try:
            return self.backend.batches.run(rendered, lambda chunk: call(self.backend.encode(chunk)))
        except OutOfMemory as exc:
            raise GradingFailed(str(exc), transient=True) from None
        except BonError:
            raise
        except Exception as exc:  # noqa: BLE001 - a model that rejects the input
            raise GradingFailed(f"{self.name}: {type(exc).__name__}: {first_line(exc)}") from None

    def answer(self, turns: Sequence[Turn], max_new_tokens: int = 256) -> list[str]:
        return self._through_model(self._render(turns),
                                   lambda batch: self.backend.generate(batch, max_new_tokens=int(max_new_tokens), do_sample=False))

    def next_word_probs(self, turns: Sequence[Turn], words: Sequence[str]) -> list[dict[str, float]]:
        rendered = self._render(turns)
        if not rendered:
            return []
        ids = {w: self._word_ids(rendered[0][0], w) for w in words}

        def probs(batch: Any) -> list[dict[str, float]]:
            p = self.backend.next_token_logits(batch).softmax(dim=-1)
            return [{w: float(p[row, i].sum()) if i else 0.0 for w, i in ids.items()} for row in range(p.shape[0])]

        return self._through_model(rendered, probs)

    def _word_ids(self, context: str, word: str) -> list[int]:
        if word not in self._ids:
            try:
                self._ids[word] = self.backend.continuation_ids(context, word)
            except BonError:
                self._ids[word] = []  # the tokenizer cannot start this spelling: it gets no mass
        return self._ids[word]


# --- OpenAI-compatible endpoint ------------------------------------------------------------------


class ApiGrader(Grader):
    """An OpenAI-compatible chat endpoint, through the shared client."""

    backend_name = "openai"

    def __init__(self, model: str, who: str = "grader", base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY",
                 max_image_side: int | None = 1024, temperature: float | None = 0.0,
                 max_tokens_param: str = "max_completion_tokens", reasoning_model: bool | None = None,
                 top_logprobs: int = 20, concurrency: int = 4, timeout: float = 120.0, max_retries: int = 4,
                 preflight: bool = True, preflight_timeout: float = 5.0, extra_body: dict[str, Any] | None = None,
                 image_format: str = "png", image_quality: int = 90, image_detail: str | None = None,
                 merge_texts: bool = True) -> None:
        from bon.backends.openai_api import OpenAIEndpoint

        if extra_body is not None and not isinstance(extra_body, dict):
            raise BonError(f"{who}: extra_body must be a mapping")
        self.name = who
        self.endpoint = OpenAIEndpoint(model, who, base_url, api_key_env, timeout=timeout, max_retries=max_retries,
                                       concurrency=concurrency, preflight=preflight, preflight_timeout=preflight_timeout,
                                       reasoning_model=reasoning_model, max_tokens_param=max_tokens_param)
        self.model = self.endpoint.model
        self.max_image_side = int(max_image_side) if max_image_side else None
        self.temperature = temperature
        self.top_logprobs = int(top_logprobs)
        self.extra_body = dict(extra_body or {})
        if str(image_format).lower() not in ("png", "jpeg", "webp"):
            raise BonError(f"{who}: image_format must be png, jpeg or webp, got {image_format!r}")
        self.image_format = str(image_format).lower()
        if image_detail not in (None, "low", "high", "auto"):
            raise BonError(f"{who}: image_detail must be low, high or auto, got {image_detail!r}")
        self.image_detail = image_detail
        self.image_quality = int(image_quality)
        self.merge_texts = bool(merge_texts)
        self.served_models: set[str] = set()

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"backend": self.backend_name, "model": self.model, "base_url": self.endpoint.shown_url,
                                 "temperature": self.temperature, "max_image_side": self.max_image_side}
        if self.image_format != "png":
            ident["image_format"] = self.image_format
            ident["image_quality"] = self.image_quality
        if self.image_detail:
            ident["image_detail"] = self.image_detail
        if not self.merge_texts:
            ident["merge_texts"] = False
        if self.served_models:
            ident["served_model"] = sorted(self.served_models)
        return ident

    def close(self) -> None:
        self.endpoint.close()

    def messages(self, turn: Turn) -> list[dict[str, Any]]:
        from bon.backends.images import chat_parts, image_data_url

        def image_part(image: Image.Image) -> dict[str, Any]:
            url: dict[str, Any] = {"url": image_data_url(image, self.max_image_side, self.image_format, self.image_quality)}
            if self.image_detail:
                url["detail"] = self.image_detail
            return {"type": "image_url", "image_url": url}

        if not self.merge_texts:  # one content part per text, as some official clients send them
            return [{"role": "user", "content": [{"type": "text", "text": v} if k == "text" else image_part(v) for k, v in turn]}]
        return [{"role": "user", "content": chat_parts(turn, image_part)}]

    def _post(self, turns: Sequence[Turn], max_tokens: int, **extra: Any) -> list[dict[str, Any] | GradingFailed]:
        """The first choice of each turn's answer, or its failure (transient or not)."""
        from bon.backends.openai_api import ApiFailure

        def body(turn: Turn) -> dict[str, Any]:
            return {**self.endpoint.chat_body(self.messages(turn), max_tokens, temperature=self.temperature, **extra),
                    **self.extra_body}

        out: list[dict[str, Any] | GradingFailed] = []
        for reply in self.endpoint.post_all("/chat/completions", [lambda t=t: body(t) for t in turns]):
            if isinstance(reply, ApiFailure):
                out.append(GradingFailed(f"{self.name}: {reply.reason}", transient=reply.transient))
                continue
            got = reply.get("choices")
            if not isinstance(got, list) or not got or not isinstance(got[0], dict):
                out.append(GradingFailed(f"{self.name}: {self.endpoint.shown_url} answered without choices"))
                continue
            if reply.get("model"):
                self.served_models.add(str(reply.get("model")))
            out.append(got[0])
        return out

    def _ask(self, turns: Sequence[Turn], max_tokens: int, **extra: Any) -> list[dict[str, Any]]:
        """The first choice of each turn's answer; any failure raises GradingFailed (transient or not)."""
        choices = self._post(turns, max_tokens, **extra)
        failed = next((c for c in choices if isinstance(c, GradingFailed)), None)
        if failed is not None:
            raise failed
        return choices  # type: ignore[return-value]

    def ask(self, requests: Sequence[Request], max_new_tokens: int = 256) -> list[str | None]:
        from bon.backends.openai_api import ApiFailure, Reply, chat_text

        out: list[str | None] = []
        for choice in self._post([r.turn for r in requests], int(max_new_tokens)):
            if isinstance(choice, GradingFailed):
                if choice.transient:
                    raise choice
                out.append(None)
                continue
            try:
                out.append(chat_text(Reply({"choices": [choice]})))
            except ApiFailure:
                out.append(None)
        return out

    def answer(self, turns: Sequence[Turn], max_new_tokens: int = 256) -> list[str]:
        from bon.backends.openai_api import ApiFailure, Reply, chat_text

        out = []
        for choice in self._ask(turns, int(max_new_tokens)):
            try:
                out.append(chat_text(Reply({"choices": [choice]})))
            except ApiFailure as exc:
                raise GradingFailed(f"{self.name}: {exc.reason}") from None
        return out

    def next_word_probs(self, turns: Sequence[Turn], words: Sequence[str]) -> list[dict[str, float]]:
        if self.endpoint.reasoning:
            raise NoLogprobs(f"{self.name}: {self.model} takes no log-probability requests")
        out = []
        for choice in self._ask(turns, 1, logprobs=True, top_logprobs=self.top_logprobs):
            content = (choice.get("logprobs") or {}).get("content")
            if not content:
                raise NoLogprobs(f"{self.name}: {self.endpoint.shown_url} returned no log-probabilities")
            first = content[0] or {}
            probs = {w: 0.0 for w in words}
            for t in first.get("top_logprobs") or [first]:
                token = str(t.get("token", "")).strip()
                if token in probs and t.get("logprob") is not None:
                    probs[token] += math.exp(float(t["logprob"]))
            out.append(probs)
        return out


# --- reading written answers ---------------------------------------------------------------------

_SCORE_LIST = re.compile(r"""['"]?scores?['"]?\s*[:=]\s*\[([^\]]*)\]""", re.IGNORECASE)
_SCORE_ONE = re.compile(r"""['"]?scores?['"]?\s*[:=]\s*['"]?(-?\d+(?:\.\d+)?)""", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_scores(text: str, count: int, lo: float = 0.0, hi: float = 10.0) -> list[float]:
    """``count`` scores in [lo, hi] from an answer like ``{"score": [7, 9], "reasoning": "..."}``.

    Accepts the JSON inside code fences or prose, single quotes, a bare ``score: [7, 9]`` fragment, and
    for one score ``score: 7`` or a lone number on the last line. Raises :class:`GradingFailed` otherwise.
    """
    if not isinstance(text, str) or not text.strip():
        raise GradingFailed("unparseable: empty answer")
    found: list[float] | None = None
    for obj in json_objects(text):
        value = next((v for _, v in key_entries(obj, "score", "scores")), None)
        if value is not None:
            found = _as_numbers(value)
    if found is None:
        m = _SCORE_LIST.search(text)
        if m:
            found = [float(x) for x in _NUMBER.findall(m.group(1))]
    if found is None and count == 1:
        m = _SCORE_ONE.search(text)
        if m:
            found = [float(m.group(1))]
        else:
            last = text.strip().splitlines()[-1].strip().rstrip(".")
            if re.fullmatch(r"-?\d+(?:\.\d+)?(?:\s*/\s*10)?", last):
                found = [float(_NUMBER.match(last).group(0))]
    if not found:
        raise GradingFailed(f"unparseable: no score in {snippet(text)!r}")
    if len(found) < count:
        raise GradingFailed(f"unparseable: {len(found)} score(s) where {count} were asked, in {snippet(text)!r}")
    found = found[:count]
    bad = [v for v in found if not lo <= v <= hi]
    if bad:
        raise GradingFailed(f"score {bad[0]:g} outside {lo:g}-{hi:g} in {snippet(text)!r}")
    return found


def parse_yes_no(text: str) -> bool:
    """True for a yes answer, False for no; ``{"answer": "yes"}`` or a leading Yes/No word."""
    if not isinstance(text, str) or not text.strip():
        raise GradingFailed("unparseable: empty answer")
    for obj in json_objects(text):
        for _, v in key_entries(obj, "answer", "judge", "judgement", "judgment"):
            if str(v).strip().lower() in ("yes", "no"):
                return str(v).strip().lower() == "yes"
    words = re.findall(r"[a-z]+", text.lower())
    first = words[0] if words else ""
    if first in ("yes", "no"):
        return first == "yes"
    has_yes, has_no = "yes" in words, "no" in words
    if has_yes != has_no:
        return has_yes
    raise GradingFailed(f"unparseable: no yes/no in {snippet(text)!r}")


def _as_numbers(value: Any) -> list[float] | None:
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for v in items:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            m = _NUMBER.search(str(v))
            if not m:
                return None
            out.append(float(m.group(0)))
    return out or None


def resize_to_area(image: Image.Image, area: int | None) -> Image.Image:
    """Scale (up or down) to about ``area`` pixels, keeping the aspect ratio."""
    if not area:
        return image
    ratio = image.width / image.height
    w = max(1, int(round(math.sqrt(area * ratio))))
    h = max(1, int(round(w / ratio)))
    return image if (w, h) == image.size else image.resize((w, h), Image.Resampling.BICUBIC)
