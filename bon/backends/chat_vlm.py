"""The one local chat model: a VLM (``AutoModelForImageTextToText`` + ``AutoProcessor``) or a text
LM (``AutoModelForCausalLM`` + ``AutoTokenizer``) from the Hub or a folder, never with remote code.

Judges, graders, reward models and the text-writing generators all use it, in two modes:
:meth:`ChatVlm.generate` (written answers, batched, seeded) and :meth:`ChatVlm.next_token_logits`
(one forward pass: the next-token distribution after each turn). Turns are rendered by the model's own
chat template and left-padded into batches, sent ``batch_size`` at a time by :attr:`ChatVlm.batches`
(halved on out-of-memory).

Life cycle: the processor and config are read at construction (a bad folder is a one-line error
before any work); the weights load on first use (or :meth:`load`) and :meth:`close` drops them
(``gc.collect()``, ``torch.cuda.empty_cache()``), so a stage runner can hold one model at a time.
"""

from __future__ import annotations

import hashlib
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from bon.backends import library_error, require
from bon.backends.device import HalvingBatches, dtype_name, free_memory, resolve_device, resolve_dtype
from bon.backends.images import chat_parts
from bon.errors import BonError

PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")
Part = tuple[str, Any]  # ("text", str) or ("image", PIL image)
Rendered = tuple[str, list[Any]]  # chat-template text and its images


class ChatVlm:
    """A local chat model with its processor: checked at construction, weights loaded on first use."""

    def __init__(self, model: str, who: str, revision: str | None = None, dtype: str = "auto", device: str = "auto",
                 device_map: str | dict | None = None, attn_implementation: str | None = None,
                 chat_template_kwargs: dict[str, Any] | None = None, vision: bool = True,
                 batch_size: int | None = None) -> None:
        self.transformers = require("transformers", who)
        self.torch = require("torch", who)
        self.model_id, self.who, self.revision, self.vision = str(model), who, revision, vision
        self.device = resolve_device(str(device), who)
        self.dtype = resolve_dtype(str(dtype), self.device, who)
        self.device_map, self.attn_implementation = device_map, attn_implementation
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        model_location(self.model_id, who)
        kw = {"revision": revision} if revision else {}
        self.config = load_config(self.model_id, kw, who)
        self.processor = self._processor(kw)
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.revision_pin = model_revision(self.model_id, self.config, revision)
        self._model: Any = None
        self.loaded_info: dict[str, Any] = {}
        self.batches = HalvingBatches(batch_size, who, self.model_id)
        self.forward_batches: list[int] = []  # sizes of the batches encoded for the model

    def _processor(self, kw: dict[str, Any]) -> Any:
        folder = Path(self.model_id).expanduser()
        if not self.vision:
            with hf_errors(self.who, f"{self.model_id} has no usable tokenizer"):
                return self.transformers.AutoTokenizer.from_pretrained(self.model_id, **kw)
        if folder.is_dir() and not any((folder / f).is_file() for f in PROCESSOR_FILES):
            raise BonError(f"{self.who}: {self.model_id} has no processor ({' or '.join(PROCESSOR_FILES)}); "
                           "save the model's processor beside it (processor.save_pretrained)")
        with hf_errors(self.who, f"{self.model_id} has no usable processor (preprocessor_config.json / processor_config.json)"):
            processor = self.transformers.AutoProcessor.from_pretrained(self.model_id, **kw)
        if not hasattr(processor, "image_processor") or not hasattr(processor, "tokenizer"):
            raise BonError(f"{self.who}: {self.model_id} has no image processor (got {type(processor).__name__}); "
                           "a vision-language model needs a multimodal processor")
        if not getattr(processor, "chat_template", None):
            raise BonError(f"{self.who}: the processor of {self.model_id} has no chat template")
        return processor

    # --- life cycle -------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self) -> Any:
        return self.load()

    def load(self) -> Any:
        """The weights, loaded once (on ``device`` in ``dtype``, or spread by ``device_map``)."""
        if self._model is None:
            t = self.transformers
            cls = t.AutoModelForImageTextToText if self.vision else t.AutoModelForCausalLM
            extra: dict[str, Any] = {}
            if self.device_map is not None:
                extra["device_map"] = self.device_map
            if self.attn_implementation:
                extra["attn_implementation"] = self.attn_implementation
            kind = " as an image-text-to-text model" if self.vision else " as a causal language model"
            model = load_model(cls, self.model_id, self.who, self.dtype, self.revision, kind, **extra)
            if self.device_map is None:
                model = model.to(self.device)
            self._model = model.eval()
            from bon.provenance import library_versions

            self.loaded_info = {"class": type(model).__name__, "device": self.device,
                                "versions": library_versions(("bon", "torch", "transformers", "tokenizers"))}
        return self._model

    def held_modules(self) -> list[Any]:
        """The loaded model (none before the first use or after :meth:`close`)."""
        return [self._model] if self._model is not None else []

    def close(self) -> None:
        """Drop the weights and hand their memory back; the next use loads them again."""
        if self._model is not None:
            self._model = None
            free_memory()

    # --- inputs -----------------------------------------------------------------------------------

    def render(self, parts: Sequence[Part], suffix: str = "", system: str | None = None) -> Rendered:
        """Chat-template text of one user turn (after an optional system message), plus ``suffix``
        after the generation prompt, and the turn's images. A text-only model sees ``[image i]``."""
        images: list[Any] = []

        def image_part(image: Any) -> dict[str, Any]:
            images.append(image)
            return {"type": "image"} if self.vision else {"type": "text", "text": f"[image {len(images)}]"}

        content = chat_parts(parts, image_part)
        messages = ([{"role": "system", "content": [{"type": "text", "text": system}]}] if system else [])
        messages.append({"role": "user", "content": content})
        if not self.vision:
            messages = [{"role": m["role"], "content": "\n".join(c["text"] for c in m["content"])} for m in messages]
            images = []
            if not getattr(self.tokenizer, "chat_template", None):  # a bare LM: a plain role layout
                return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: " + suffix, images
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                                  **self.chat_template_kwargs)
        return text + suffix, images

    def encode(self, rendered: Sequence[Rendered]) -> dict[str, Any]:
        """One left-padded batch on the model's device."""
        self.tokenizer.padding_side = "left"
        kw: dict[str, Any] = {"text": [t for t, _ in rendered], "padding": True, "return_tensors": "pt",
                              "add_special_tokens": False}
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
        for k, v in dict(batch).items():
            if hasattr(v, "to"):
                v = v.to(model.device)
                if v.is_floating_point():
                    v = v.to(model.dtype)
            out[k] = v
        self.forward_batches.append(len(rendered))
        return out

    # --- the two modes ----------------------------------------------------------------------------

    def next_token_logits(self, batch: dict[str, Any]) -> Any:
        """Logits of the next token after each row: one forward pass (prefill only)."""
        with self.torch.inference_mode():
            out = self.model.generate(**batch, max_new_tokens=1, do_sample=False, output_logits=True,
                                      return_dict_in_generate=True, pad_token_id=self.tokenizer.pad_token_id)
        return out.logits[0].float()

    def generate(self, batch: dict[str, Any], seed: int | None = None, **settings: Any) -> list[str]:
        """The new text of each row; ``seed`` seeds torch right before sampling."""
        if seed is not None:
            self.torch.manual_seed(int(seed))
        with self.torch.inference_mode():
            seqs = self.model.generate(**batch, pad_token_id=self.tokenizer.pad_token_id, **settings)
        return self.tokenizer.batch_decode(seqs[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)

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
        """What pins this model's outputs (not where it runs)."""
        return {"model": self.model_id, "revision": self.revision_pin, "dtype": dtype_name(self.dtype),
                "chat_template_kwargs": self.chat_template_kwargs}


# --- loading helpers, shared with the reward models ---------------------------------------------


@contextmanager
def hf_errors(who: str, what: str) -> Iterator[None]:
    """A library's loading error as one line (see :func:`bon.backends.library_error`)."""
    try:
        yield
    except (ImportError, OSError, ValueError, TypeError, KeyError) as exc:
        raise library_error(exc, who, what) from None


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def model_location(model: Any, what: str) -> tuple[str, str]:
    """``("local", resolved folder)`` or ``("hub", id)``; a path that does not exist is a one-line BonError.

    Anything that exists on disk is a local folder; a string shaped like ``org/name`` (or ``name``) is a
    hub id; anything else (``./x``, ``/abs/x``, ``~/x``, ``a/b/c``) is a path that was not found.
    """
    if not isinstance(model, (str, Path)) or not str(model).strip():
        raise BonError(f"{what}: option 'model' (a hub id or a local folder) is required")
    text = str(model).strip()
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise BonError(f"{what}: model path {text} is a file; expected a model folder")
        return "local", str(path.resolve())
    if _HUB_ID.match(text) and not text.startswith("."):
        return "hub", text
    raise BonError(f"{what}: model path {text} not found")


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


def load_config(model_id: str, kw: dict[str, Any], who: str) -> Any:
    """``AutoConfig.from_pretrained(model_id, **kw)``; a one-line BonError if it cannot be read."""
    transformers = require("transformers", who)
    with hf_errors(who, f"cannot read the model config of {model_id}"):
        return transformers.AutoConfig.from_pretrained(model_id, **kw)


def load_model(cls: Any, model_id: str, who: str, dtype: Any, revision: str | None, as_what: str = "", **extra: Any) -> Any:
    """``cls.from_pretrained`` in ``dtype`` at ``revision`` (plus ``extra`` keyword arguments); a one-line
    BonError naming the model (``as_what`` after it) if it cannot be loaded."""
    kw: dict[str, Any] = {"dtype": dtype, **({"revision": revision} if revision else {}), **extra}
    with hf_errors(who, f"cannot load {model_id}{as_what}"):
        return cls.from_pretrained(model_id, **kw)

