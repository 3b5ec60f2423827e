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

from PIL import Image

from bon.content import Content
from bon.errors import BonError
from bon.http import chat_parts
from bon.protocol import Comparison, PairwiseJudge, Verdict, score_from_margin, seeded_coin

TASKS = ("image", "edit", "interleaved", "reasoning")
DEFAULT_PREFIX = '{"better_response": "'
MODES = ("generate", "logits")
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")

Part = tuple[str, Any]  # ("text", str) or ("image", PIL image)


# --- loading, shared with the reward models -------------------------------------------------


def _import_hf(who: str = "this judge") -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise BonError(f"{who}: needs torch and transformers (pip install 'bon[transformers]'): {exc.name or exc} missing") from None
    return torch, transformers


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:240] if text else type(exc).__name__


def folder_fingerprint(folder: Path) -> str:
    """A short hash of a local model folder: small files by content, weight files by name and size."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or any(part.startswith(".") for part in p.relative_to(folder).parts):
            continue
        rel = p.relative_to(folder).as_posix()
        size = p.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if size <= 32 * 1024 * 1024 and p.suffix not in (".safetensors", ".bin", ".pt", ".pth", ".gguf"):
            h.update(p.read_bytes())
    return "local:" + h.hexdigest()[:16]


def model_revision(model: str, config: Any, revision: str | None) -> str:
    """What pins the weights: the folder's fingerprint, the Hub commit, or the requested revision."""
    path = Path(model).expanduser()
    if path.is_dir():
        return folder_fingerprint(path)
    commit = getattr(config, "_commit_hash", None)
    return str(commit or revision or "unpinned")


def resolve_device(device: str, torch: Any) -> str:
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    return device


def resolve_dtype(dtype: str, device: str, torch: Any) -> Any:
    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if dtype not in table:
        raise BonError(f"dtype must be auto, float32, bfloat16 or float16, got {dtype!r}")
    return table[dtype]


def dtype_kwarg(transformers: Any) -> str:
    """``dtype`` from transformers 4.56 on, ``torch_dtype`` before."""
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def load_config(model_id: str, kw: dict[str, Any], who: str) -> Any:
    """``AutoConfig.from_pretrained(model_id, **kw)``; a one-line BonError if it cannot be read."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(model_id, **kw)
    except (OSError, ValueError) as exc:
        raise BonError(f"{who}: cannot read the model config of {model_id}: {_first_line(exc)}") from None


def load_model(cls: Any, model_id: str, who: str, transformers: Any, dtype: Any, revision: str | None,
               as_what: str = "", **extra: Any) -> Any:
    """``cls.from_pretrained`` in ``dtype`` at ``revision`` (plus ``extra`` keyword arguments); a one-line
    BonError naming the model (``as_what`` after it) if it cannot be loaded."""
    kw: dict[str, Any] = {dtype_kwarg(transformers): dtype}
    if revision:
        kw["revision"] = revision
    kw.update(extra)
    try:
        return cls.from_pretrained(model_id, **kw)
    except (OSError, ValueError) as exc:
        raise BonError(f"{who}: cannot load {model_id}{as_what}: {_first_line(exc)}") from None


def check_source(model: str, who: str) -> None:
    path = Path(model).expanduser()
    looks_local = model.startswith((".", "/", "~")) or path.exists() or model.count("/") > 1
    if looks_local and not path.is_dir():
        raise BonError(f"{who}: model folder {model} not found")


def fit_pixels(image: Image.Image, max_pixels: int | None) -> Image.Image:
    """Downscale (never upscale) so width x height is at most ``max_pixels``."""
    if not max_pixels or image.width * image.height <= max_pixels:
        return image
    scale = math.sqrt(max_pixels / (image.width * image.height))
    size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    return image.resize(size, Image.Resampling.BICUBIC)


class VlmBackend:
    """A chat VLM with its processor: checked at construction, weights loaded on first use."""

    def __init__(self, model: str, who: str, revision: str | None = None, dtype: str = "auto", device: str = "auto",
                 device_map: str | dict | None = None, attn_implementation: str | None = None,
                 chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.torch, self.transformers = _import_hf(who)
        self.model_id = str(model)
        self.who = who
        self.revision = revision
        self.device = resolve_device(str(device), self.torch)
        self.dtype = resolve_dtype(str(dtype), self.device, self.torch)
        self.device_map = device_map
        self.attn_implementation = attn_implementation
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        check_source(self.model_id, who)
        from transformers import AutoProcessor

        folder = Path(self.model_id).expanduser()
        if folder.is_dir() and not any((folder / f).is_file() for f in PROCESSOR_FILES):
            raise BonError(f"{who}: {self.model_id} has no processor ({' or '.join(PROCESSOR_FILES)}); "
                           "save the model's processor beside it (processor.save_pretrained)")
        kw = {"revision": revision} if revision else {}
        self.config = load_config(self.model_id, kw, who)
        try:
            self.processor = AutoProcessor.from_pretrained(self.model_id, **kw)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise BonError(f"{who}: {self.model_id} has no usable processor (preprocessor_config.json / "
                           f"processor_config.json): {_first_line(exc)}") from None
        if not hasattr(self.processor, "image_processor") or not hasattr(self.processor, "tokenizer"):
            raise BonError(f"{who}: {self.model_id} has no image processor (got {type(self.processor).__name__}); "
                           "a transformers-vlm judge needs a multimodal processor")
        if not getattr(self.processor, "chat_template", None):
            raise BonError(f"{who}: the processor of {self.model_id} has no chat template")
        self.tokenizer = self.processor.tokenizer
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.revision_pin = model_revision(self.model_id, self.config, revision)
        self._model: Any = None

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).replace("torch.", "")

    @property
    def model(self) -> Any:
        if self._model is None:
            from transformers import AutoModelForImageTextToText

            extra: dict[str, Any] = {}
            if self.device_map is not None:
                extra["device_map"] = self.device_map
            if self.attn_implementation:
                extra["attn_implementation"] = self.attn_implementation
            model = load_model(AutoModelForImageTextToText, self.model_id, self.who, self.transformers, self.dtype,
                               self.revision, " as an image-text-to-text model", **extra)
            if self.device_map is None:
                model = model.to(self.device)
            model.eval()
            self._model = model
        return self._model

    def render(self, parts: Sequence[Part], suffix: str = "") -> tuple[str, list[Image.Image]]:
        """Chat-template text of one user turn (plus ``suffix`` after the generation prompt) and its images."""
        images: list[Image.Image] = []

        def image_part(image: Image.Image) -> dict[str, Any]:
            images.append(image)
            return {"type": "image"}

        content = chat_parts(parts, image_part)
        text = self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                  tokenize=False, **self.chat_template_kwargs)
        return text + suffix, images

    def encode(self, rendered: Sequence[tuple[str, list[Image.Image]]]) -> Any:
        """One left-padded batch on the model's device."""
        self.tokenizer.padding_side = "left"
        texts = [t for t, _ in rendered]
        kw: dict[str, Any] = {"text": texts, "padding": True, "return_tensors": "pt", "add_special_tokens": False}
        nested = [ims for _, ims in rendered]
        if any(nested):
            kw["images"] = nested
        try:
            batch = self.processor(**kw)
        except (ValueError, TypeError):
            if "images" not in kw:
                raise
            kw["images"] = [im for ims in nested for im in ims]  # processors that want one flat list
            batch = self.processor(**kw)
        model = self.model
        out = {}
        for k, v in batch.items():
            if hasattr(v, "to"):
                v = v.to(model.device)
                if v.is_floating_point():
                    v = v.to(model.dtype)
            out[k] = v
        return out

    def next_token_logits(self, batch: dict[str, Any]) -> Any:
        """Logits of the next token after each row: one forward pass (prefill only)."""
        torch = self.torch
        with torch.inference_mode():
            out = self.model.generate(**batch, max_new_tokens=1, do_sample=False, output_logits=True,
                                      return_dict_in_generate=True, pad_token_id=self.tokenizer.pad_token_id)
        return out.logits[0].float()

    def generate(self, batch: dict[str, Any], **settings: Any) -> list[str]:
        torch = self.torch
        with torch.inference_mode():
            seqs = self.model.generate(**batch, pad_token_id=self.tokenizer.pad_token_id, **settings)
        new = seqs[:, batch["input_ids"].shape[1]:]
        return self.tokenizer.batch_decode(new, skip_special_tokens=True)

    def continuation_ids(self, context: str, word: str) -> list[int]:
        """Token ids that can start ``word`` right after ``context``: the token the tokenizer really
        produces there, plus the bare and space-led spellings, each kept only if it decodes to ``word``
        (or, for a tokenizer with no such token, to the start of ``word``)."""
        tok = self.tokenizer
        ids: list[int] = []
        full = tok.encode(context + word, add_special_tokens=False)
        base = tok.encode(context, add_special_tokens=False)
        k = 0
        while k < min(len(full), len(base)) and full[k] == base[k]:
            k += 1
        if k < len(full):
            ids.append(full[k])
        for variant in (word, " " + word):
            enc = tok.encode(variant, add_special_tokens=False)
            if enc:
                ids.append(enc[0])
        unique = list(dict.fromkeys(ids))
        keep = [i for i in unique if tok.decode([i]).strip() == word]
        if not keep:  # no single token spells the word: its first piece stands for it (an upper bound)
            keep = [i for i in unique if tok.decode([i]).strip() and word.startswith(tok.decode([i]).strip())]
        if not keep:
            raise BonError(f"{self.who}: the tokenizer cannot start {word!r} after {context[-30:]!r}")
        return keep

    def identity(self) -> dict[str, Any]:
        return {"model": self.model_id, "revision": self.revision_pin, "dtype": self.dtype_name,
                "chat_template_kwargs": self.chat_template_kwargs}


def is_oom(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower() or type(exc).__name__ == "OutOfMemoryError"


# --- the judge --------------------------------------------------------------------------------


class TransformersVlmJudge(PairwiseJudge):
    plugin = "transformers-vlm"
    version = 1  # bump when the message built from a comparison changes

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
        self.name = name or (f"{self.plugin}:{model}" if model else self.plugin)
        self.official = bool(official_prompts) if official is None else bool(official)
        if self.official and (not official_prompts or mode != "generate"):
            raise BonError(f"{self.name}: official conditions need official_prompts: PATH and mode: generate "
                           "(official: false keeps only the official rubric text)")
        if max_image_pixels == "auto":
            max_image_pixels = None if self.official else 1024 * 1024
        if not model:
            raise BonError(f"{self.name}: option 'model' is required (transformers-vlm:HUB_ID or a folder)")
        if mode not in MODES:
            raise BonError(f"{self.name}: mode must be generate or logits, got {mode!r}")
        if int(batch_size) < 1:
            raise BonError(f"{self.name}: batch_size must be at least 1, got {batch_size}")
        self.mode = mode
        self.max_image_pixels = int(max_image_pixels) if max_image_pixels else None
        self.batch_size = int(batch_size)
        self.max_new_tokens = int(max_new_tokens)
        self.do_sample = bool(do_sample)
        self.temperature = temperature
        self.top_p = top_p
        self.seed = int(seed)
        self.answer_prefix = str(answer_prefix)
        self.official_prompts = Path(official_prompts) if official_prompts else None
        from judges.prompts import rubric

        self.templates = {t: rubric(t, self.official_prompts) for t in TASKS}
        self.backend = VlmBackend(str(model), self.name, revision=revision, dtype=dtype, device=device,
                                  device_map=device_map, attn_implementation=attn_implementation,
                                  chat_template_kwargs=chat_template_kwargs)
        self._letters: dict[str, tuple[list[int], list[int]]] = {}
        self.forward_batches: list[int] = []  # sizes of the batches sent through the model

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {
            "plugin": self.plugin,
            "version": self.version,
            **self.backend.identity(),
            "mode": self.mode,
            "templates": {t: tpl.sha256 for t, tpl in self.templates.items()},
            "max_image_pixels": self.max_image_pixels,
        }
        if self.mode == "logits":
            ident["answer_prefix"] = self.answer_prefix
        else:
            ident["sampling"] = self.generation_settings() | {"seed": self.seed}
        if self.official:
            ident["conditions"] = "official"
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
        tpl = self.templates[_scorer_task(c.prompt.task)]
        px = self.max_image_pixels
        items = tpl.render(_raw(c.prompt.content), _raw(c.a), _raw(c.b))
        return [("text", v) if k == "text" else ("image", fit_pixels(v.load(), px)) for k, v in items]

    def render(self, c: Comparison) -> tuple[str, list[Image.Image]]:
        """The chat-template text and images of one comparison (one part per segment when official)."""
        if not self.official:
            return self.backend.render(self.parts(c), self.suffix())
        from judges.prompts.official import local_turn

        px = self.max_image_pixels
        content, images = local_turn(self.templates[_scorer_task(c.prompt.task)], c, (lambda im: fit_pixels(im, px)) if px else None)
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
        for start in range(0, len(order), self.batch_size):
            ready: list[tuple[int, tuple[str, list[Image.Image]]]] = []
            for i in order[start : start + self.batch_size]:
                try:
                    ready.append((i, self.render(comparisons[i])))
                except BonError as exc:  # an unreadable image: this comparison only
                    verdicts[i] = Verdict.failed(str(exc))
                except Exception as exc:  # noqa: BLE001 - e.g. a chat template that rejects the turn
                    verdicts[i] = Verdict.failed(f"{self.name}: {type(exc).__name__}: {_first_line(exc)}", transient=True)
            if ready:
                results = self._run_batch([comparisons[i] for i, _ in ready], [r for _, r in ready])
                for (i, _), v in zip(ready, results):
                    verdicts[i] = v
        return [v if v is not None else Verdict.failed("not judged") for v in verdicts]

    def _run_batch(self, comps: list[Comparison], rendered: list[tuple[str, list[Image.Image]]]) -> list[Verdict]:
        try:
            batch = self.backend.encode(rendered)
            self.forward_batches.append(len(rendered))
            if self.mode == "logits":
                return self._from_logits(comps, self.backend.next_token_logits(batch))
            return self._from_text(comps, batch)
        except BonError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed batch must not end the run
            if is_oom(exc) and len(rendered) > 1:
                self._free_memory()
                half = len(rendered) // 2
                return self._run_batch(comps[:half], rendered[:half]) + self._run_batch(comps[half:], rendered[half:])
            reason = f"{self.name}: {type(exc).__name__}: {_first_line(exc)}"
            return [Verdict.failed(reason, transient=True) for _ in comps]

    def _free_memory(self) -> None:
        torch = self.backend.torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

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
        from judges.prompts import parse_answer
        from judges.prompts.official import verdict as official_verdict

        torch = self.backend.torch
        if self.do_sample:
            key = "|".join(f"{c.prompt.content.digest}:{c.a.digest}:{c.b.digest}:{c.sample}" for c in comps)
            torch.manual_seed(self.seed ^ int(hashlib.sha256(key.encode()).hexdigest()[:8], 16))
        texts = self.backend.generate(batch, **self.generation_settings())
        out = []
        for text in texts:
            v = (official_verdict if self.official else parse_answer)(text)
            v.meta = {"mode": "generate", "answer": text, **v.meta}
            out.append(v)
        return out


def _size(c: Comparison) -> tuple[int, int]:
    contents = (c.prompt.content, c.a, c.b)
    return sum(len(x.images) for x in contents), sum(len(t) for x in contents for t in x.texts)


def _raw(content: Content) -> list[list[Any]]:
    return [["text", it.text] if it.kind == "text" else ["image", it] for it in content]


def _scorer_task(task: str) -> str:
    from analysis.mmrb2 import scorer_task

    return scorer_task(task)

