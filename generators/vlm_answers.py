"""``vlm-answers``: N sampled answers of a vision-language model to a reasoning prompt (text + images).

Options:

- ``backend``: transformers (local ``AutoModelForImageTextToText`` + ``AutoProcessor``; default) | openai
  (an OpenAI-compatible chat API: ``base_url``, ``api_key_env`` = name of the key's environment
  variable, ``send_seed``, ``extra``, ``retries``, ``timeout``, ``reasoning_model``, ``max_tokens_param``,
  ``max_concurrency``)
- ``model`` (hub id or local folder), ``revision``, ``dtype``, ``device``, ``batch_size`` (local back-end:
  answers sampled per forward batch, default 8)
- ``temperature`` (0.7), ``top_p`` (none), ``max_new_tokens`` (512): sampling; temperature 0 is greedy
  (then all N candidates of a local model coincide)
- ``system``: a system message; ``instruction``: text appended to the prompt (e.g. how to state the
  final answer)
- ``answer_pattern``: a regular expression whose first group is the final answer (last match wins);
  without it the answer is the last ``\\boxed{...}``, else the last ``Answer: ...`` line, else the last
  "the answer is ..." phrase

Each candidate is the answer text; ``provenance["final_answer"]`` holds the extracted answer (None when
none was found, with ``final_answer_rule`` saying how it was found). A failed API call leaves the
candidate empty with ``provenance["missing"]`` (and ``transient`` when a rerun should try again). Local
candidates are sampled ``batch_size`` at a time, each batch seeded from its seeds: the same seeds and
batch size give the same answers (with ``batch_size: 1``, candidate k does not depend on N).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.plugins import Generator
from generators._common import positive_int
from generators._llm import content_parts, make_chat, sampling

ANSWER_LINE = re.compile(r"(?im)^[ \t>*_#-]*(?:final[ \t]+)?answer[ \t]*\**[ \t]*[:：][ \t]*(.+?)[ \t]*$")
ANSWER_IS = re.compile(r"(?i)\bthe\s+(?:final\s+)?answer\s+is\s*[:：]?\s*([^\n]+?)\s*(?:\.\s*$|$|\n)")


class VlmAnswers(Generator):
    adapter = "vlm-answers"

    @staticmethod
    def required_modules(options: dict[str, Any]) -> tuple[str, ...]:
        """Optional packages (bon.preflight): the back-end's."""
        return ("openai",) if options.get("backend") == "openai" else ("torch", "transformers")

    def __init__(self, model: Any = None, name: str | None = None, backend: str = "transformers",
                 temperature: float = 0.7, top_p: float | None = None, max_new_tokens: int = 512,
                 system: str | None = None, instruction: str | None = None, answer_pattern: str | None = None,
                 max_concurrency: int = 4, **backend_options: Any) -> None:
        if backend not in ("transformers", "openai"):
            raise BonError(f"{self.adapter}: backend must be transformers or openai, got {backend!r}")
        self.name = name or self.adapter
        self.max_concurrency = positive_int(max_concurrency, f"{self.adapter}: max_concurrency", allow_none=False)
        spec = {"backend": "transformers-vlm" if backend == "transformers" else "openai", "model": model, **backend_options}
        if backend == "openai":
            spec["max_concurrency"] = self.max_concurrency
        self.chat = make_chat(spec, self.adapter)
        self.sampling = sampling(self.adapter, temperature, top_p, max_new_tokens)
        self.system, self.instruction = system, instruction
        try:
            self.pattern = re.compile(answer_pattern) if answer_pattern else None
        except re.error as exc:
            raise BonError(f"{self.adapter}: answer_pattern is not a valid regular expression ({exc})") from None
        if self.pattern is not None and self.pattern.groups < 1:
            raise BonError(f"{self.adapter}: answer_pattern needs a group around the answer, e.g. 'Answer: (.+)'")

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "adapter": self.adapter, **self.chat.describe(), "settings": self.settings()}

    def settings(self) -> dict[str, Any]:
        return {**self.sampling, "system": self.system, "instruction": self.instruction,
                "answer_pattern": self.pattern.pattern if self.pattern else None}

    def messages(self, prompt: Prompt) -> list[dict[str, Any]]:
        parts = content_parts(prompt.content)
        if self.instruction:
            parts.append({"type": "text", "text": self.instruction})
        msgs = [{"role": "system", "content": [{"type": "text", "text": self.system}]}] if self.system else []
        return msgs + [{"role": "user", "content": parts}]

    def close(self) -> None:
        self.chat.close()

    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        answers = self.chat.chat_many(self.messages(prompt), [int(s) for s in seeds], **self.sampling)
        described = self.chat.describe()
        out = []
        for k, (seed, text) in enumerate(zip(seeds, answers)):
            prov: dict[str, Any] = {"adapter": self.adapter, **described, "settings": self.settings(), "seed": int(seed)}
            if not isinstance(text, str):  # an ApiFailure
                prov.update(text.info())
                out.append(Candidate(prompt.id, k, self.name, int(seed), Content([]), prov))
                continue
            answer, rule = extract_answer(text or "", self.pattern)
            prov.update({"final_answer": answer, "final_answer_rule": rule})
            out.append(Candidate(prompt.id, k, self.name, int(seed), Content.of(text or ""), prov))
        return out


def extract_answer(text: str, pattern: re.Pattern[str] | None = None) -> tuple[str | None, str | None]:
    """(final answer, rule that found it) or (None, None)."""
    if pattern is not None:
        hits = list(pattern.finditer(text))
        return (clean(hits[-1].group(1)), "pattern") if hits else (None, None)
    boxed = last_boxed(text)
    if boxed is not None:
        return clean(boxed), "boxed"
    hits = ANSWER_LINE.findall(text)
    if hits:
        return clean(hits[-1]), "answer-line"
    hits = ANSWER_IS.findall(text)
    if hits:
        return clean(hits[-1]), "answer-is"
    return None, None


def last_boxed(text: str) -> str | None:
    """Contents of the last ``\\boxed{...}`` (braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth, begin = start + len("\\boxed{"), 1, start + len("\\boxed{")
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[begin:i]
        i += 1
    return None


def clean(answer: str) -> str:
    answer = answer.strip().strip("*_`").strip()
    if answer.startswith("$") and answer.endswith("$") and len(answer) > 1:
        answer = answer.strip("$").strip()
    return answer.rstrip(".").strip()
