"""What the diffusers adapters (``diffusers-t2i``, ``diffusers-edit``) share: loading a pipeline safely,
choosing the scheduler, device, dtype and offloading, mapping bon's options onto whatever arguments
the pipeline's ``__call__`` takes, and batched seeded sampling.

Seeding: every candidate gets its own ``torch.Generator`` seeded with its seed, and the pipeline is
given the list of generators, so candidate k's initial noise (and any noise a scheduler draws later)
comes from seed k alone, however the N candidates are split into pipeline calls. The images agree
across batch sizes up to the floating-point differences of batched kernels (convolutions pick
different algorithms for different batch sizes: at most one grey level on a few pixels here);
rerunning with the same seeds and batch size gives identical files.

Safety: no ``trust_remote_code``, no ``custom_pipeline``; a folder whose ``model_index.json`` names a
pipeline outside diffusers, or a loaded pipeline whose class does not come from diffusers, is refused.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, Sequence

from PIL import Image

from bon.backends import library_error, require
from bon.backends.device import HalvingBatches, dtype_name, free_memory, resolve_device, resolve_dtype
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError, first_line
from bon.plugins import Generator
from bon.backends.chat_vlm import model_location
from bon.provenance import library_versions
from generators._common import (VERSION_PACKAGES, cached_file, number, positive_int, quiet_loading,
                                revision_of_folder, snapshot_revision)

# components an edit pipeline may take over from a loaded text-to-image pipeline when their configs
# agree (FLUX.1 and FLUX.1 Kontext share both text encoders and the VAE; the denoisers differ)
SHAREABLE = ("text_encoder", "text_encoder_2", "text_encoder_3", "vae")

OFFLOAD = {False: None, None: None, "none": None, True: "model", "model": "model", "sequential": "sequential"}

# bon option -> pipeline __call__ argument (the others have the same name)
CALL_ARGS = {"steps": "num_inference_steps", "guidance": "guidance_scale", "true_cfg": "true_cfg_scale",
             "image_guidance": "image_guidance_scale"}


class DiffusersGenerator(Generator):
    """Base of the diffusers adapters; subclasses say what the pipeline is for and what it is given."""

    adapter = "diffusers"
    requires = ("torch", "diffusers", "transformers", "accelerate")  # optional packages (bon.preflight)
    extra_options: tuple[str, ...] = ()  # option names only the subclass accepts (e.g. strength)

    def __init__(
        self,
        model: str | None = None,
        name: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        cpu_offload: bool | str = False,
        steps: int | None = None,
        guidance: float | None = None,
        true_cfg: float | None = None,
        width: int | None = None,
        height: int | None = None,
        scheduler: str | None = None,
        negative_prompt: str | None = None,
        batch_size: int | None = None,
        revision: str | None = None,
        variant: str | None = None,
        pipeline: str | None = None,
        generator_device: str = "cpu",
        call_options: dict[str, Any] | None = None,
        **extra: Any,
    ) -> None:
        bad = sorted(set(extra) - set(self.extra_options))
        if bad:
            raise BonError(f"{self.adapter}: unknown option(s) {', '.join(bad)}")
        self.location, self.model = model_location(model, self.adapter)
        if self.location == "local":
            check_local_pipeline(Path(self.model), self.adapter)
        if cpu_offload not in OFFLOAD:
            raise BonError(f"{self.adapter}: cpu_offload must be false, true, model or sequential, got {cpu_offload!r}")
        self.name = name or self.adapter
        self.model_arg = str(model)
        self.dtype_arg, self.device_arg, self.offload = dtype, device, OFFLOAD[cpu_offload]
        self.revision, self.variant, self.pipeline_class = revision, variant, pipeline
        self.scheduler_name = scheduler
        self.generator_device = generator_device
        self.batch_size = positive_int(batch_size, f"{self.adapter}: batch_size")
        self.options: dict[str, Any] = {
            "steps": positive_int(steps, f"{self.adapter}: steps"),
            "guidance": number(guidance, f"{self.adapter}: guidance"),
            "true_cfg": number(true_cfg, f"{self.adapter}: true_cfg"),
            "width": positive_int(width, f"{self.adapter}: width"),
            "height": positive_int(height, f"{self.adapter}: height"),
            "negative_prompt": negative_prompt,
        }
        for key in self.extra_options:
            self.options[key] = number(extra.get(key), f"{self.adapter}: {key}")
        self.call_options = dict(call_options or {})
        for reserved in ("prompt", "image", "generator", "output_type", "num_images_per_prompt", "return_dict"):
            if reserved in self.call_options:
                raise BonError(f"{self.adapter}: call_options may not set {reserved!r} (bon sets it)")
        self._pipe: Any = None
        self._params: dict[str, inspect.Parameter] = {}
        self._loaded: dict[str, Any] = {}
        self.batches = HalvingBatches(self.batch_size, self.adapter, self.model_arg)
        self._share_from: DiffusersGenerator | None = None
        self.shared: list[str] = []  # components taken over from _share_from at load

    def share_components_with(self, other: Any) -> None:
        """Build this pipeline from ``other``'s loaded components where their configs agree."""
        if isinstance(other, DiffusersGenerator) and other is not self:
            self._share_from = other

    def held_modules(self) -> list[Any]:
        """The model modules of the loaded pipeline (none before it loads or after :meth:`close`)."""
        if self._pipe is None:
            return []
        return [c for c in self._pipe.components.values() if hasattr(c, "parameters")]

    def close(self) -> None:
        self._pipe = None
        free_memory()

    # --- identity and provenance ----------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "adapter": self.adapter, "model": self.model_arg, "revision": self.revision,
                "scheduler": self.scheduler_name, "options": {k: v for k, v in self.options.items() if v is not None},
                "call_options": self.call_options}

    # --- loading --------------------------------------------------------------------------------

    @property
    def pipe(self) -> Any:
        if self._pipe is None:
            self._pipe = self.load()
        return self._pipe

    def load(self) -> Any:
        require("diffusers", self.adapter)
        device = resolve_device(self.device_arg, self.adapter)
        dtype = resolve_dtype(self.dtype_arg, device, self.adapter)
        cls = pipeline_class(self.pipeline_class, self.adapter)
        kwargs: dict[str, Any] = {dtype_keyword(): dtype, "trust_remote_code": False, **self.shared_components()}
        if self.revision:
            kwargs["revision"] = self.revision
        if self.variant:
            kwargs["variant"] = self.variant
        try:
            with quiet_loading():
                pipe = cls.from_pretrained(self.model, **kwargs)
        except BonError:
            raise
        except Exception as exc:  # noqa: BLE001 - any loading failure is the user's model path or id
            raise library_error(exc, self.adapter, f"cannot load a diffusers pipeline from {self.model_arg!r}") from None
        pipe = self.adapt(pipe)
        check_diffusers_class(pipe, self.adapter)
        self._params = dict(inspect.signature(pipe.__call__).parameters)
        self.check_options(pipe)  # before the weights move to the accelerator: fail fast
        if self.scheduler_name:
            pipe.scheduler = make_scheduler(self.scheduler_name, pipe.scheduler, self.adapter)
        try:
            if self.offload == "model":
                pipe.enable_model_cpu_offload()
            elif self.offload == "sequential":
                pipe.enable_sequential_cpu_offload()
            else:
                pipe.to(device)
        except Exception as exc:  # noqa: BLE001 - no accelerator, accelerate missing, out of memory
            how = f"cpu_offload {self.offload}" if self.offload else f"device {device}"
            raise BonError(f"{self.adapter}: cannot place {self.model_arg!r} with {how} ({first_line(exc)})") from None
        pipe.set_progress_bar_config(disable=True)
        revision = (revision_of_folder(self.model) if self.location == "local"
                    else snapshot_revision(self.model, "model_index.json", self.revision))
        self._loaded = {
            "pipeline": type(pipe).__name__,
            "scheduler": type(pipe.scheduler).__name__ if getattr(pipe, "scheduler", None) is not None else None,
            "dtype": dtype_name(dtype),
            "device": device,
            "cpu_offload": self.offload or False,
            "revision": revision or self.revision,
            "versions": library_versions(VERSION_PACKAGES),
            **({"shared_components": self.shared} if self.shared else {}),
        }
        return pipe

    def adapt(self, pipe: Any) -> Any:
        """Turn the loaded pipeline into one fit for this adapter's purpose (subclasses)."""
        return pipe

    def shared_components(self) -> dict[str, Any]:
        """Modules of the pipeline to share (see :meth:`share_components_with`) whose saved config in
        this model equals the loaded one's, each with its tokenizer, so ``from_pretrained`` does not
        load them a second time."""
        self.shared = []
        if self._share_from is None:
            return {}
        source = self._share_from.pipe.components
        out = {}
        for name in SHAREABLE:
            module = source.get(name)
            saved = component_config(self.model, name, self.revision) if module is not None else None
            if saved is not None and same_config(saved, getattr(module, "config", None)):
                out[name] = module
                tokenizer = name.replace("text_encoder", "tokenizer")
                if tokenizer != name and source.get(tokenizer) is not None:
                    out[tokenizer] = source[tokenizer]
        self.shared = sorted(out)
        return out

    def check_options(self, pipe: Any) -> None:
        """An option the user set that the pipeline's __call__ does not take is an error, not silence."""
        for key, value in self.options.items():
            if value is None or key in self.handled_options:
                continue
            if self.call_arg(key) is None:
                raise BonError(f"{self.adapter}: {type(pipe).__name__} takes no {CALL_ARGS.get(key, key)} "
                               f"(option {key!r}); remove it for this model")
        unknown = [k for k in self.call_options if k not in self._params and not self.takes_kwargs]
        if unknown:
            raise BonError(f"{self.adapter}: {type(pipe).__name__} takes no argument(s) {', '.join(unknown)}")

    handled_options: tuple[str, ...] = ()  # options a subclass applies itself when the pipeline lacks them

    @property
    def takes_kwargs(self) -> bool:
        return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in self._params.values())

    def call_arg(self, option: str) -> str | None:
        arg = CALL_ARGS.get(option, option)
        return arg if arg in self._params else None

    def takes(self, arg: str) -> bool:
        return arg in self._params

    # --- sampling -------------------------------------------------------------------------------

    def inputs(self, prompt: Prompt) -> dict[str, Any]:
        """The per-prompt call arguments (prompt text, input image); raise BonError for an unfit prompt."""
        return {"prompt": prompt_text(prompt, self.adapter)}

    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        inputs = self.inputs(prompt)  # validate the prompt before loading anything
        pipe = self.pipe
        torch = require("torch", self.adapter)
        settings = self.settings()

        def draw(part: Sequence[int]) -> list[Image.Image]:
            gens = [torch.Generator(device=self.generator_device).manual_seed(int(s)) for s in part]
            kwargs = self.call_kwargs(inputs, len(part), gens)
            with torch.inference_mode():
                out = pipe(**kwargs)
            got = list(getattr(out, "images", out[0] if isinstance(out, tuple) else out))
            if len(got) != len(part):
                raise BonError(f"{self.adapter}: pipeline returned {len(got)} images for {len(part)} seeds (prompt {prompt.id})")
            return [im if isinstance(im, Image.Image) else Image.fromarray(im) for im in got]

        images = self.batches.run(list(seeds), draw)  # halved on out-of-memory, and kept halved
        batch = min(self.batches.size or len(seeds), len(seeds))
        cands = []
        for k, (seed, image) in enumerate(zip(seeds, images)):
            prov = {"adapter": self.adapter, "model": self.model_arg, **self._loaded,
                    "settings": settings, "seed": int(seed), "generator_device": self.generator_device,
                    "batch_size": batch, "size": list(image.size), **self.extra_provenance(inputs)}
            cands.append(Candidate(prompt.id, k, self.name, int(seed), Content.of(image), prov))
        return cands

    def extra_provenance(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {}

    def call_kwargs(self, inputs: dict[str, Any], count: int, generators: list[Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(self.call_options)
        kwargs["prompt"] = [inputs["prompt"]] * count
        for key, value in self.options.items():
            arg = self.call_arg(key)
            if value is None or arg is None:
                continue
            if key == "negative_prompt":
                value = [value] * count
            kwargs[arg] = value
        for key, value in inputs.items():
            if key != "prompt":
                kwargs[key] = value
        kwargs["generator"] = generators
        if self.takes("num_images_per_prompt"):
            kwargs["num_images_per_prompt"] = 1
        if self.takes("output_type"):
            kwargs["output_type"] = "pil"
        return kwargs

    def settings(self) -> dict[str, Any]:
        """Every sampling setting as the pipeline will use it: bon's options, else the pipeline's default."""
        out: dict[str, Any] = {}
        for key, value in self.options.items():
            arg = self.call_arg(key)
            if value is None and arg is not None:
                default = self._params[arg].default
                value = None if default is inspect.Parameter.empty else default
            if arg is not None or value is not None:
                out[key] = value
        out.update(self.call_options)
        return out


# --- loading helpers ----------------------------------------------------------------------------


def component_config(model: str, name: str, revision: str | None) -> dict[str, Any] | None:
    """The saved ``<name>/config.json`` of a pipeline component, from a local folder or the hub cache;
    None when it is not on disk."""
    path = Path(model) / name / "config.json"
    if not path.is_file():
        hit = cached_file(model, f"{name}/config.json", revision)
        path = Path(hit) if hit else path
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def same_config(saved: dict[str, Any], live: Any) -> bool:
    """A saved config describes the loaded module (library bookkeeping keys aside)."""
    live = json.loads(json.dumps(live.to_dict() if hasattr(live, "to_dict") else dict(live or {}), default=str))
    skip = ("architectures", "transformers_version", "torch_dtype", "dtype")
    return bool(live) and all(live.get(k) == v for k, v in saved.items() if not k.startswith("_") and k not in skip)


def prompt_text(prompt: Prompt, adapter: str) -> str:
    text = prompt.content.text.strip()
    if not text:
        raise BonError(f"prompt {prompt.id}: {adapter} needs text in the prompt content, found none")
    return text


def dtype_keyword() -> str:
    """``dtype`` where diffusers has renamed ``torch_dtype`` (0.42+), else ``torch_dtype``."""
    try:
        from diffusers.utils import deprecation_utils
    except ImportError:
        return "torch_dtype"
    return "dtype" if hasattr(deprecation_utils, "_resolve_dtype") else "torch_dtype"


def check_local_pipeline(folder: Path, adapter: str) -> None:
    index = folder / "model_index.json"
    if not index.exists():
        raise BonError(f"{adapter}: {folder} is not a diffusers pipeline folder (no model_index.json)")
    try:
        cfg = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BonError(f"{adapter}: {index}: unreadable ({first_line(exc)})") from None
    cls = cfg.get("_class_name") if isinstance(cfg, dict) else None
    if not isinstance(cls, str):
        raise BonError(f"{adapter}: {index} names a custom pipeline ({cls!r}); only diffusers' own pipelines are loaded")


def pipeline_class(name: str | None, adapter: str) -> Any:
    import diffusers

    if not name:
        return diffusers.DiffusionPipeline
    cls = getattr(diffusers, name, None)
    if not (isinstance(cls, type) and issubclass(cls, diffusers.DiffusionPipeline)):
        raise BonError(f"{adapter}: pipeline {name!r} is not a diffusers pipeline class (e.g. StableDiffusionXLPipeline)")
    return cls


def check_diffusers_class(pipe: Any, adapter: str) -> None:
    module = type(pipe).__module__ or ""
    if not module.startswith("diffusers."):
        raise BonError(f"{adapter}: refusing pipeline class {type(pipe).__name__} from {module} (not part of diffusers)")


def make_scheduler(name: str, current: Any, adapter: str) -> Any:
    import diffusers
    from diffusers import SchedulerMixin

    cls = getattr(diffusers, name, None)
    if not (isinstance(cls, type) and issubclass(cls, SchedulerMixin)):
        raise BonError(f"{adapter}: scheduler {name!r} is not a diffusers scheduler class "
                       "(e.g. EulerDiscreteScheduler, DPMSolverMultistepScheduler)")
    try:
        return cls.from_config(current.config)
    except Exception as exc:  # noqa: BLE001
        raise BonError(f"{adapter}: scheduler {name} does not fit this pipeline ({first_line(exc)})") from None
