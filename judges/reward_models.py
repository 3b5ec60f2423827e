"""Reward models: pointwise judges that score each response alone (see bon.plugins.PointwiseJudge).

Each works with pointwise selection (argmax of the scores) and, through ``PointwiseJudge.judge``,
as a pairwise judge in knockout, round-robin and ``bon mmrb2 judge``.

* ``clipscore`` (``clipscore:openai/clip-vit-large-patch14``): any transformers ``CLIPModel``;
  ``weight * max(cos(image, text), 0)`` as in CLIPScore (weight 2.5), text = the prompt's text.
* ``pickscore`` (``pickscore:yuvalkirstain/PickScore_v1``): a CLIP checkpoint trained as a
  preference model; ``logit_scale * cos(image, text)``. PickScore's processor lives in another repo:
  ``processor: laion/CLIP-ViT-H-14-laion2B-s32B-b79K``.
* ``vqascore`` (``vqascore:MODEL``): a chat VLM's probability of "Yes" to
  ``Does this image show '<prompt>'? Answer Yes or No.`` (``AutoModelForImageTextToText``).
* ``reward-model:<entry point>`` (or just ``<entry point>``): any scorer an installed package
  registers in the judges' entry-point group ``bon.judges`` (HPSv2, ImageReward, ... wrapped by a
  few lines of the package's own).

A response with several images scores the mean of its images; one without images, or with an image
that cannot be read, gets a missing score with the reason.

Entry-point contract (group ``bon.judges``; a target that is not a judge class is a scorer factory)::

    # pyproject.toml of the providing package
    [project.entry-points."bon.judges"]
    hpsv2 = "my_pkg.bon_plugin:make_hpsv2"

    def make_hpsv2(checkpoint: str | None = None, device: str = "auto", **options) -> Scorer: ...

    class Scorer:                       # anything with this call signature
        margin_scale: float = 1.0       # optional: score difference that counts as a clear win
        def __call__(self, prompt: str, images: list[PIL.Image.Image]) -> list[float]:
            '''One score per image for the prompt text; higher is better.'''

``checkpoint``, ``device`` and the mapping in the ``options`` option are passed to the factory; the
factory is called at the first score, so building the judge stays cheap.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Callable, Sequence

from PIL import Image

from bon.content import Content, Prompt
from bon.errors import BonError, first_line
from bon.plugins import PointwiseJudge, Score
from bon.backends import require
from bon.backends.chat_vlm import ChatVlm, hf_errors, load_config, load_model, model_location, model_revision
from bon.backends.device import dtype_name, free_memory, resolve_device, resolve_dtype
from bon.backends.images import fit_pixels

ENTRY_POINT_GROUP = "bon.judges"  # shared with judge classes: see bon.registry


class _ImageScorer(PointwiseJudge):
    """Shared flow: per response, its images; one batched call for all images; mean per response."""

    plugin = "reward"
    requires = ("torch", "transformers")  # optional packages (bon.preflight)
    version = 1

    def __init__(self, name: str | None, model: str | None, batch_size: int, max_image_pixels: int | None,
                 margin_scale: float | None) -> None:
        self.name = name or (f"{self.plugin}:{model}" if model else self.plugin)
        if int(batch_size) < 1:
            raise BonError(f"{self.name}: batch_size must be at least 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.max_image_pixels = int(max_image_pixels) if max_image_pixels else None
        if margin_scale is not None:  # else the class's own
            self.margin_scale = float(margin_scale)

    def score(self, prompt: Prompt, responses: Sequence[Content]) -> list[Score]:
        text = prompt.content.text.strip()
        if not text:
            return [Score(None, missing=f"{self.name}: the prompt has no text to score against") for _ in responses]
        images: list[Image.Image] = []
        owner: list[int] = []
        out: list[Score | None] = [None] * len(responses)
        for r, response in enumerate(responses):
            try:
                ims = [fit_pixels(it.load(), self.max_image_pixels) for it in response.images]
            except BonError as exc:
                out[r] = Score(None, missing=str(exc))
                continue
            if not ims:
                out[r] = Score(None, missing=f"{self.name}: the response has no image")
                continue
            images.extend(ims)
            owner.extend([r] * len(ims))
        if images:
            try:
                values = self.score_images(text, images)
            except BonError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failed batch is missing scores, not a crash
                reason = f"{self.name}: {type(exc).__name__}: {first_line(exc)}"
                return [s if s is not None else Score(None, missing=reason) for s in out]
            per: dict[int, list[float]] = {}
            for r, v in zip(owner, values):
                per.setdefault(r, []).append(float(v))
            for r, vals in per.items():
                out[r] = Score(sum(vals) / len(vals), details={"per_image": [round(v, 6) for v in vals]})
        return [s if s is not None else Score(None, missing="not scored") for s in out]

    def score_images(self, text: str, images: list[Image.Image]) -> list[float]:
        raise NotImplementedError


# --- CLIP ---------------------------------------------------------------------------------------


class ClipScoreJudge(_ImageScorer):
    """``weight * max(cos, 0)`` between CLIP image and prompt-text embeddings (CLIPScore)."""

    plugin = "clipscore"
    margin_scale = 4.0  # a CLIPScore gap of 0.25 (cos gap 0.1) is a clear preference

    def __init__(self, model: str = "openai/clip-vit-large-patch14", name: str | None = None, processor: str | None = None,
                 revision: str | None = None, weight: float = 2.5, dtype: str = "float32", device: str = "auto",
                 batch_size: int = 16, max_image_pixels: int | None = None, margin_scale: float | None = None) -> None:
        super().__init__(name, model, batch_size, max_image_pixels, margin_scale)
        self.weight = float(weight)
        self.torch, self.transformers = require("torch", self.name), require("transformers", self.name)
        self.model_id = str(model)
        self.processor_id = str(processor or model)
        self.revision = revision
        self.device = resolve_device(str(device), self.name)
        self.dtype = resolve_dtype(str(dtype), self.device, self.name)

        model_location(self.model_id, self.name)
        model_location(self.processor_id, self.name)
        kw = {"revision": revision} if revision else {}
        self.config = load_config(self.model_id, kw, self.name)
        if not _is_dual_encoder(self.config):
            raise BonError(f"{self.name}: {self.model_id} is a {self.config.model_type} model, not a CLIP-style dual encoder")
        with hf_errors(self.name, f"{self.processor_id} has no usable processor"):
            self.processor = self.transformers.AutoProcessor.from_pretrained(self.processor_id, **(kw if processor is None else {}))
        if not hasattr(self.processor, "image_processor") or not hasattr(self.processor, "tokenizer"):
            raise BonError(f"{self.name}: {self.processor_id} has no image processor and tokenizer")
        self.revision_pin = model_revision(self.model_id, self.config, revision)
        self.processor_pin = model_revision(self.processor_id, None, None) if processor else self.revision_pin
        self._model: Any = None
        self._text_cache: dict[str, Any] = {}

    def identity(self) -> dict[str, Any]:
        ident = {"plugin": self.plugin, "revision": self.revision_pin, "dtype": dtype_name(self.dtype),
                 "max_image_pixels": self.max_image_pixels, **self.extra_identity()}
        if self.processor_id != self.model_id:
            ident["processor"] = self.processor_id
            ident["processor_revision"] = self.processor_pin
        return ident

    def extra_identity(self) -> dict[str, Any]:
        return {"weight": self.weight}

    def close(self) -> None:
        self._model = None
        self._text_cache.clear()
        free_memory()

    @property
    def model(self) -> Any:
        if self._model is None:
            model = load_model(self.transformers.AutoModel, self.model_id, self.name, self.dtype, self.revision)
            if not hasattr(model, "get_image_features") or not hasattr(model, "get_text_features"):
                raise BonError(f"{self.name}: {self.model_id} ({type(model).__name__}) has no image/text features")
            self._model = model.to(self.device).eval()
        return self._model

    def _features(self, out: Any) -> Any:
        feats = out if isinstance(out, self.torch.Tensor) else out.pooler_output  # transformers 5 returns an output object
        return feats / feats.norm(dim=-1, keepdim=True)

    def text_embedding(self, text: str) -> Any:
        if text not in self._text_cache:
            max_len = int(getattr(self.config.text_config, "max_position_embeddings", 77))
            enc = self.processor.tokenizer([text], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
            with self.torch.inference_mode():
                out = self.model.get_text_features(**{k: v.to(self.device) for k, v in enc.items()})
            if len(self._text_cache) > 256:
                self._text_cache.clear()
            self._text_cache[text] = self._features(out)[0].float()
        return self._text_cache[text]

    def cosines(self, text: str, images: list[Image.Image]) -> list[float]:
        t = self.text_embedding(text)
        out: list[float] = []
        for start in range(0, len(images), self.batch_size):
            chunk = images[start : start + self.batch_size]
            pix = self.processor.image_processor(images=chunk, return_tensors="pt")["pixel_values"]
            with self.torch.inference_mode():
                feats = self._features(self.model.get_image_features(pixel_values=pix.to(self.device, self.model.dtype)))
            out.extend((feats.float() @ t).tolist())
        return out

    def score_images(self, text: str, images: list[Image.Image]) -> list[float]:
        return [self.weight * max(c, 0.0) for c in self.cosines(text, images)]


def _is_dual_encoder(config: Any) -> bool:
    """Does ``AutoModel`` build a model with both text and image features (CLIP, SigLIP, ...) from this config?"""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    cls = getattr(transformers, MODEL_MAPPING_NAMES.get(config.model_type, ""), None)
    return cls is not None and hasattr(cls, "get_text_features") and hasattr(cls, "get_image_features")


class PickScoreJudge(ClipScoreJudge):
    """``logit_scale * cos``: a CLIP checkpoint fine-tuned on human preferences (PickScore)."""

    plugin = "pickscore"
    margin_scale = 0.5  # PickScore gaps of about 2 are a clear preference

    def __init__(self, model: str = "yuvalkirstain/PickScore_v1", name: str | None = None, processor: str | None = None,
                 revision: str | None = None, dtype: str = "float32", device: str = "auto", batch_size: int = 16,
                 max_image_pixels: int | None = None, margin_scale: float | None = None) -> None:
        super().__init__(model=model, name=name, processor=processor, revision=revision, dtype=dtype, device=device,
                         batch_size=batch_size, max_image_pixels=max_image_pixels, margin_scale=margin_scale)

    def extra_identity(self) -> dict[str, Any]:
        return {}

    def score_images(self, text: str, images: list[Image.Image]) -> list[float]:
        scale = float(self.model.logit_scale.detach().exp())
        return [scale * c for c in self.cosines(text, images)]


# --- VQAScore -----------------------------------------------------------------------------------

VQA_QUESTION = "Does this image show '{prompt}'? Answer Yes or No."


class VqaScoreJudge(_ImageScorer):
    """P("Yes") that a VLM gives to ``Does this image show '<prompt>'? Answer Yes or No.``"""

    plugin = "vqascore"
    margin_scale = 2.0

    def __init__(self, model: str | None = None, name: str | None = None, revision: str | None = None,
                 dtype: str = "auto", device: str = "auto", device_map: str | dict | None = None,
                 attn_implementation: str | None = None, batch_size: int = 8,
                 max_image_pixels: int | None = 1024 * 1024, question: str = VQA_QUESTION,
                 chat_template_kwargs: dict[str, Any] | None = None, margin_scale: float | None = None) -> None:
        super().__init__(name, model, batch_size, max_image_pixels, margin_scale)
        if not model:
            raise BonError(f"{self.name}: option 'model' is required (vqascore:HUB_ID or a folder)")
        if "{prompt}" not in question:
            raise BonError(f"{self.name}: question must contain {{prompt}}")
        self.question = question
        self.backend = ChatVlm(str(model), self.name, revision=revision, dtype=dtype, device=device,
                               device_map=device_map, attn_implementation=attn_implementation,
                               chat_template_kwargs=chat_template_kwargs, batch_size=self.batch_size)
        self._yes: list[int] | None = None

    def close(self) -> None:
        self.backend.close()

    def identity(self) -> dict[str, Any]:
        return {"plugin": self.plugin, **self.backend.identity(), "max_image_pixels": self.max_image_pixels}

    def score_images(self, text: str, images: list[Image.Image]) -> list[float]:
        question = self.question.format(prompt=text)
        rendered = [self.backend.render([("image", im), ("text", question)]) for im in images]
        if self._yes is None:
            self._yes = self.backend.continuation_ids(rendered[0][0], "Yes")
        def yes(chunk: Sequence[tuple[str, list[Image.Image]]]) -> list[float]:
            probs = self.backend.next_token_logits(self.backend.encode(chunk)).softmax(dim=-1)
            return probs[:, self._yes].sum(dim=-1).tolist()

        return self.backend.batches.run(rendered, yes)


# --- installed reward models ------------------------------------------------------------------


def reward_entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


class EntryPointRewardJudge(_ImageScorer):
    """A scorer from the ``bon.judges`` entry-point group: ``reward-model:<name>``."""

    plugin = "reward-model"
    margin_scale = 1.0

    def __init__(self, model: str | None = None, name: str | None = None, checkpoint: str | None = None,
                 device: str = "auto", batch_size: int = 16, max_image_pixels: int | None = None,
                 margin_scale: float | None = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(name, model, batch_size, max_image_pixels, margin_scale)
        available = reward_entry_points()
        if not model or model not in available:
            known = ", ".join(sorted(available)) or "none installed"
            raise BonError(f"{self.name}: no reward model {model!r} in entry-point group {ENTRY_POINT_GROUP} (known: {known})")
        self.entry_point = available[model]
        try:
            self.factory: Callable[..., Any] = self.entry_point.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin package is a one-line error
            raise BonError(f"{self.name}: cannot load {self.entry_point.value}: {type(exc).__name__}: {first_line(exc)}") from None
        self.checkpoint = checkpoint
        self.device = device
        self.options = dict(options or {})
        self._margin_option = margin_scale
        self._scorer: Any = None

    def identity(self) -> dict[str, Any]:
        dist = getattr(self.entry_point, "dist", None)
        return {"plugin": self.plugin, "entry_point": self.entry_point.name, "target": self.entry_point.value,
                "package": f"{dist.metadata['Name']}=={dist.version}" if dist is not None else None,
                "options": self.options, "max_image_pixels": self.max_image_pixels}

    @property
    def scorer(self) -> Any:
        if self._scorer is None:
            try:
                self._scorer = self.factory(checkpoint=self.checkpoint, device=self.device, **self.options)
            except BonError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise BonError(f"{self.name}: {self.entry_point.value} failed to start: {type(exc).__name__}: {first_line(exc)}") from None
            if self._margin_option is None and getattr(self._scorer, "margin_scale", None):
                self.margin_scale = float(self._scorer.margin_scale)
        return self._scorer

    def close(self) -> None:
        close = getattr(self._scorer, "close", None)
        if callable(close):
            close()
        self._scorer = None
        free_memory()

    def score_images(self, text: str, images: list[Image.Image]) -> list[float]:
        out: list[float] = []
        for start in range(0, len(images), self.batch_size):
            chunk = images[start : start + self.batch_size]
            values = list(self.scorer(text, chunk))
            if len(values) != len(chunk):
                raise BonError(f"{self.name}: scorer returned {len(values)} scores for {len(chunk)} images")
            out.extend(float(v) for v in values)
        return out


__all__ = ["ClipScoreJudge", "PickScoreJudge", "VqaScoreJudge", "EntryPointRewardJudge", "ENTRY_POINT_GROUP"]
