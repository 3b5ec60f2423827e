"""``diffusers-t2i``: text-to-image with any pipeline diffusers loads (SD 1.x/2.x/XL/3.x, FLUX.1, ...).

Options (all optional but ``model``):

- ``model``: hub id or local pipeline folder (``model_index.json``); ``revision``, ``variant`` (e.g. fp16)
- ``pipeline``: a diffusers pipeline class name to load with (default: the one ``model_index.json`` names)
- ``dtype``: auto (bf16 on CUDA, else fp32) | float32 | float16 | bfloat16; ``device``: auto | cpu | cuda[:i] | mps
- ``cpu_offload``: false | true/model (model offload) | sequential
- ``steps``, ``guidance``, ``true_cfg`` (real CFG of FLUX-style pipelines), ``width``, ``height``,
  ``negative_prompt``; unset means the pipeline's own default, which provenance records
- ``scheduler``: a diffusers scheduler class name (e.g. EulerDiscreteScheduler), built from the
  pipeline's scheduler config
- ``batch_size``: candidates per pipeline call (default: all N of a prompt in one call)
- ``generator_device``: where the per-candidate torch.Generator lives (default cpu: same noise on any device)
- ``call_options``: further keyword arguments for the pipeline call (e.g. ``max_sequence_length``)

The prompt is the prompt content's text; input images, if any, are ignored.
"""

from __future__ import annotations

import inspect
from typing import Any

from bon.errors import BonError, first_line
from generators._diffusers import DiffusersGenerator


class DiffusersT2I(DiffusersGenerator):
    adapter = "diffusers-t2i"

    def adapt(self, pipe: Any) -> Any:
        image = inspect.signature(pipe.__call__).parameters.get("image")
        if image is None or image.default is not inspect.Parameter.empty:
            return pipe
        from diffusers import AutoPipelineForText2Image

        try:
            return AutoPipelineForText2Image.from_pipe(pipe)
        except Exception as exc:  # noqa: BLE001
            raise BonError(f"{self.adapter}: {type(pipe).__name__} needs an input image and has no "
                           f"text-to-image counterpart ({first_line(exc)}); use diffusers-edit") from None
