"""``transformers-vlm``: any chat VLM that ``AutoModelForImageTextToText`` + ``AutoProcessor`` load,
from the Hub or a local folder (no remote code), as an MMRB2 pairwise judge.

The judge's single user turn holds bon's rubric for the task (or the official one), then
``[PROMPT]``, response A and response B, their text and images interleaved in order, rendered by
the processor's own chat template. Two modes:

* ``generate``: the model writes its rubric answer (JSON with ``better_response`` and ``score``),
  read by :func:`judges.prompts.parse_answer`; an unreadable answer is a missing verdict.
* ``logits``: one forward pass with a fixed answer prefix (``{"better_response": "``) appended to the
  assistant turn, comparing the next-token probabilities of ``A`` and ``B``. ``p_a = P(A) / (P(A) +
  P(B))`` gives the letter, the 1-6 score (via :func:`bon.protocol.score_from_margin` on ``2 p_a - 1``)
  and ``confidence = max(p_a, 1 - p_a)`` in meta.

Comparisons are padded on the left and go through the model ``batch_size`` at a time, sorted by
length so little padding is wasted; a batch that runs out of memory is split in halves.

The model folder is checked at construction (processor, chat template, config) so a bad folder is a
one-line error before any work; the weights load at the first comparison.

Options: ``model`` (hub id or folder), ``revision``, ``mode`` (generate | logits), ``dtype`` (auto |
float32 | bfloat16 | float16), ``device`` (auto | cpu | cuda | cuda:N | mps), ``device_map`` (e.g.
auto, for models split over GPUs), ``attn_implementation``, ``max_image_pixels`` (images larger than
this are downscaled first, default 1048576), ``batch_size`` (default 8), ``max_new_tokens`` (default
768), ``do_sample`` (default false), ``temperature``, ``top_p``, ``seed``, ``answer_prefix``,
``chat_template_kwargs`` (e.g. ``{enable_thinking: false}``), ``official_prompts`` (an MMRB2 checkout: its
rubric text and, unless ``official: false``, the official conditions of judges/prompts/official.py: one
chat part per segment, original images unless ``max_image_pixels`` is set, temperature 1.0 sampling with
up to 2,000 new tokens, the official JSON answer).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Sequence

from bon.backends.chat_vlm import ChatVlm, Rendered
from bon.backends.device import OutOfMemory
from bon.backends.images import fit_pixels
from bon.errors import BonError, first_line
from bon.protocol import Comparison, Verdict, score_from_margin, seeded_coin
from judges.prompts import RubricJudge

DEFAULT_PREFIX = '{"better_response": "'
MODES = ("generate", "logits")
Part = tuple[str, Any]  # ("text", str) or ("image", PIL image)


# --- the judge --------------------------------------------------------------------------------


class TransformersVlmJudge(RubricJudge):
    plugin = "transformers-vlm"
    requires = ("torch", "transformers")  # optional packages (bon.preflight)

    def __init__(
        self,
        model: str | None = None,
        name: str | None = None,
        mode: str = "generate",
        revision: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        device_map: str | dict | None = None,
        attn_implementation: str | None = None,
        max_image_pixels: int | str | None = "auto",  # 1024 x 1024, or none under official conditions
        batch_size: int = 8,
        max_new_tokens: int = 768,
        do_sample: bool = False,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int = 0,
        answer_prefix: str = DEFAULT_PREFIX,
        chat_template_kwargs: dict[str, Any] | None = None,
        official_prompts: str | Path | None = None,
        official: bool | None = None,
    ) -> None:
        official = self.setup_rubric(model, name, official_prompts, official)
        if official and (not official_prompts or mode != "generate"):
            raise BonError(f"{self.name}: official conditions need official_prompts: PATH and mode: generate "
                           "(official: false keeps only the official rubric text)")
        if max_image_pixels == "auto":
            max_image_pixels = None if official else 1024 * 1024
        if not model:
            raise BonError(f"{self.name}: option 'model' is required (transformers-vlm:HUB_ID or a folder)")
        if mode not in MODES:
            raise BonError(f"{self.name}: mode must be generate or logits, got {mode!r}")
        if int(batch_size) < 1:
            raise BonError(f"{self.name}: batch_size must be at least 1, got {batch_size}")
        self.mode = mode
        self.max_image_pixels = int(max_image_pixels) if max_image_pixels else None
        self.max_new_tokens = int(max_new_tokens)
        self.do_sample = bool(do_sample)
        self.temperature = temperature
        self.top_p = top_p
        self.seed = int(seed)
        self.answer_prefix = str(answer_prefix)
        self.load_rubric()
        self.backend = ChatVlm(str(model), self.name, revision=revision, dtype=dtype, device=device,
                               device_map=device_map, attn_implementation=attn_implementation,
                               chat_template_kwargs=chat_template_kwargs, batch_size=int(batch_size))
        self._letters: dict[str, tuple[list[int], list[int]]] = {}
        self.store_every = max(self.store_every or 0, int(batch_size))  # each part the referee asks holds a full batch

    def close(self) -> None:
        self.backend.close()

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {
            **self.backend.identity(),
            "mode": self.mode,
            "max_image_pixels": self.max_image_pixels,
            **self.shared_identity(),
        }
        if self.mode == "logits":
            ident["answer_prefix"] = self.answer_prefix
        else:
            ident["sampling"] = self.generation_settings() | {"seed": self.seed}
        return ident

    def generation_settings(self) -> dict[str, Any]:
        if self.official:
            from judges.prompts.official import LOCAL_SAMPLING

            return dict(LOCAL_SAMPLING)
        settings: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.do_sample:
            if self.temperature is not None:
                settings["temperature"] = float(self.temperature)
            if self.top_p is not None:
                settings["top_p"] = float(self.top_p)
        return settings

    # --- building inputs -----------------------------------------------------------------------
    def parts(self, c: Comparison) -> list[Part]:
        """The judge's user turn: rubric, marked prompt, response A, response B, in order."""
        px = self.max_image_pixels
        items = self.template(c).segments(c)
        return [("text", v) if k == "text" else ("image", fit_pixels(v.load(), px)) for k, v in items]

    def render(self, c: Comparison) -> Rendered:
        """The chat-template text and images of one comparison (one part per segment when official)."""
        if not self.official:
            return self.backend.render(self.parts(c), self.suffix())
        from judges.prompts.official import local_turn

        px = self.max_image_pixels
        content, images = local_turn(self.template(c), c, (lambda im: fit_pixels(im, px)) if px else None)
        text = self.backend.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                          tokenize=False, **self.backend.chat_template_kwargs)
        return text, images

    def suffix(self) -> str:
        return self.answer_prefix if self.mode == "logits" else ""

    # --- judging -------------------------------------------------------------------------------
    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(comparisons)
        # longest first (images, then text), so padding is small and a memory problem shows up at once;
        # images are loaded batch by batch, so memory holds one batch, not the whole request
        order = sorted(range(len(comparisons)), key=lambda i: _size(comparisons[i]), reverse=True)
        start = 0
        while start < len(order):
            size = self.backend.batches.size
            ready: list[tuple[int, Rendered]] = []
            for i in order[start : start + size]:
                try:
                    ready.append((i, self.render(comparisons[i])))
                except BonError as exc:  # an unreadable image: this comparison only
                    verdicts[i] = Verdict.failed(str(exc))
                except Exception as exc:  # noqa: BLE001 - e.g. a chat template that rejects the turn
                    verdicts[i] = Verdict.failed(f"{self.name}: {type(exc).__name__}: {first_line(exc)}", transient=True)
            start += size
            if ready:
                results = self._run(ready, comparisons)
                for (i, _), v in zip(ready, results):
                    verdicts[i] = v
        return [v if v is not None else Verdict.failed("not judged") for v in verdicts]

    def _run(self, ready: list[tuple[int, Rendered]], comparisons: Sequence[Comparison]) -> list[Verdict]:
        """The batch through the model, halved on out-of-memory; other failures are transient verdicts."""
        def call(chunk: Sequence[tuple[int, Rendered]]) -> list[Verdict]:
            batch = self.backend.encode([r for _, r in chunk])
            comps = [comparisons[i] for i, _ in chunk]
            if self.mode == "logits":
                return self._from_logits(comps, self.backend.next_token_logits(batch))
            return self._from_text(comps, batch)

        try:
            return self.backend.batches.run(ready, call)
        except OutOfMemory as exc:
            reason = str(exc)
        except BonError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed batch must not end the run
            reason = f"{self.name}: {type(exc).__name__}: {first_line(exc)}"
        return [Verdict.failed(reason, transient=True) for _ in ready]

    def _letter_ids(self, context: str) -> tuple[list[int], list[int]]:
        if context not in self._letters:
            self._letters[context] = (self.backend.continuation_ids(context, "A"), self.backend.continuation_ids(context, "B"))
        return self._letters[context]

    def _from_logits(self, comps: list[Comparison], logits: Any) -> list[Verdict]:
        ids_a, ids_b = self._letter_ids(self.answer_prefix)
        probs = logits.softmax(dim=-1)
        pa_all = probs[:, ids_a].sum(dim=-1).tolist()
        pb_all = probs[:, ids_b].sum(dim=-1).tolist()
        out = []
        for c, pa, pb in zip(comps, pa_all, pb_all):
            mass = pa + pb
            if not mass > 0 or math.isnan(mass):
                out.append(Verdict.failed(f"{self.name}: no probability on A or B"))
                continue
            p_a = pa / mass
            coin = seeded_coin(self.name, c.prompt.content.digest, c.a.digest, c.b.digest, c.sample)
            better, score = score_from_margin(2.0 * p_a - 1.0, coin)
            out.append(Verdict(better, score, meta={"mode": "logits", "p_a": round(p_a, 6),
                                                    "confidence": round(max(p_a, 1.0 - p_a), 6),
                                                    "letter_mass": round(mass, 6)}))
        return out

    def _from_text(self, comps: list[Comparison], batch: dict[str, Any]) -> list[Verdict]:
        seed = None
        if self.do_sample:
            key = "|".join(f"{c.prompt.content.digest}:{c.a.digest}:{c.b.digest}:{c.sample}" for c in comps)
            seed = self.seed ^ int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
        texts = self.backend.generate(batch, seed=seed, **self.generation_settings())
        out = []
        for text in texts:
            v = self.read_answer(text)
            v.meta = {"mode": "generate", "answer": text, **v.meta}
            out.append(v)
        return out


def _size(c: Comparison) -> tuple[int, int]:
    contents = (c.prompt.content, c.a, c.b)
    return sum(len(x.images) for x in contents), sum(len(t) for x in contents for t in x.texts)

