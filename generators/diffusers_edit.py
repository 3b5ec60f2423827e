"""``diffusers-edit``: instruction editing of the prompt's input image with a diffusers pipeline.

One adapter for every pipeline that takes ``image=`` and ``prompt=``: InstructPix2Pix
(``image_guidance_scale``), image-to-image (``strength``; a text-to-image checkpoint such as SD 1.5 is
turned into its image-to-image pipeline), and newer editors (FLUX.1 Kontext, Qwen-Image-Edit). The
pipeline's call signature decides which options apply; an option the pipeline does not take is an
error rather than silently ignored.

Options: those of ``diffusers-t2i`` (model, revision, variant, pipeline, dtype, device, cpu_offload,
steps, guidance, true_cfg, width, height, negative_prompt, scheduler, batch_size, generator_device,
call_options) plus

- ``image_guidance``: InstructPix2Pix image guidance scale
- ``strength``: image-to-image strength (0 = keep the input, 1 = ignore it)
- ``max_area``: FLUX.1 Kontext's output area bound

``width``/``height`` go to the pipeline when it takes them; otherwise the input image is resized to
them first. The input image is the first image of the prompt content; the instruction is its text.
"""

from __future__ import annotations

import inspect
from typing import Any

from bon.content import Prompt
from bon.errors import BonError, first_line
from generators._diffusers import DiffusersGenerator, prompt_text


class DiffusersEdit(DiffusersGenerator):
    adapter = "diffusers-edit"
    extra_options = ("image_guidance", "strength", "max_area")
    handled_options = ("width", "height")

    def adapt(self, pipe: Any) -> Any:
        params = inspect.signature(pipe.__call__).parameters
        if "image" not in params:
            from diffusers import AutoPipelineForImage2Image

            try:
                pipe = AutoPipelineForImage2Image.from_pipe(pipe)
            except Exception as exc:  # noqa: BLE001
                raise BonError(f"{self.adapter}: {type(pipe).__name__} takes no input image and has no "
                               f"image-to-image counterpart ({first_line(exc)})") from None
            params = inspect.signature(pipe.__call__).parameters
        mask = params.get("mask_image")
        if mask is not None and mask.default is inspect.Parameter.empty:
            raise BonError(f"{self.adapter}: {type(pipe).__name__} is an inpainting pipeline (needs a mask); not supported")
        return pipe

    def inputs(self, prompt: Prompt) -> dict[str, Any]:
        images = prompt.content.images
        if not images:
            raise BonError(f"prompt {prompt.id}: {self.adapter} needs an input image in the prompt content, found none")
        item = images[0]
        image = item.load()
        width, height = self.options["width"], self.options["height"]
        if (width or height) and self._pipe is not None and self.call_arg("width") is None:
            image = resize(image, width, height)
        return {"prompt": prompt_text(prompt, self.adapter), "image": image, "_input": {"digest": item.digest, "size": list(item.load().size)}}

    def sample(self, prompt: Prompt, seeds):
        if self._pipe is None:
            self.inputs(prompt)  # an unfit prompt fails before the model loads
            _ = self.pipe
        return super().sample(prompt, seeds)

    def call_kwargs(self, inputs: dict[str, Any], count: int, generators: list[Any]) -> dict[str, Any]:
        inputs = {k: v for k, v in inputs.items() if not k.startswith("_")}
        inputs["image"] = batch_images(self.pipe, inputs["image"], count)
        kwargs = super().call_kwargs(inputs, count, generators)
        if self.call_arg("width") is None:
            kwargs.pop("width", None)
            kwargs.pop("height", None)
        return kwargs

    def extra_provenance(self, inputs: dict[str, Any]) -> dict[str, Any]:
        mode = ("instruct-pix2pix" if self.takes("image_guidance_scale")
                else "image-to-image" if self.takes("strength") else "image-and-prompt")
        return {"edit_mode": mode, "input_image": inputs["_input"]}


def batch_images(pipe: Any, image: Any, count: int) -> Any:
    """The ``image`` argument for ``count`` prompts of one input image.

    SD-family editors want one image per prompt (a single one is deprecated there). Qwen-Image-Edit
    encodes prompt i with image i in its vision-language text encoder, so it needs one image per prompt
    too, each already at the size the pipeline gives a single image (a list is not resized there).
    FLUX.1 Kontext takes one image and repeats it for the batch itself; Qwen-Image-Edit Plus reads a
    list as several reference images, so both keep the single image.
    """
    module = type(pipe).__module__
    if "stable_diffusion" in module:
        return [image] * count
    if type(pipe).__name__ == "QwenImageEditPipeline":
        import sys

        dimensions = getattr(sys.modules.get(module), "calculate_dimensions", None)
        if dimensions is not None:
            width, height, _ = dimensions(1024 * 1024, image.width / image.height)
            image = pipe.image_processor.resize(image, height, width)
        return [image] * count
    return image


def resize(image, width: int | None, height: int | None):
    w, h = image.size
    if width and not height:
        height = max(1, round(h * width / w))
    if height and not width:
        width = max(1, round(w * height / h))
    return image.resize((int(width), int(height)))
