"""Shared model back-ends: what judges, verifiers' graders and generators use to reach a model.

- :mod:`bon.backends.openai_api`: the one OpenAI-compatible client (the ``openai`` SDK's transport and
  retries, bon's rules for transient failures, key redaction, preflight, concurrency, token cost);
- :mod:`bon.backends.chat_vlm`: the one local chat model (a VLM or a text LM through transformers),
  generate and next-token-probability modes, batched, with a ``load()``/``close()`` life cycle;
- :mod:`bon.backends.device`: the device/dtype resolver, freeing accelerator memory, and batches that
  halve on out-of-memory;
- :mod:`bon.backends.answers`: the lenient reader of JSON in model answers;
- :mod:`bon.backends.images`: image downscaling, data URLs and chat content parts.

Nothing heavy is imported here: torch, transformers and openai load inside the functions that use them,
through :func:`require`, so a missing optional library is a one-line error naming the extra to install.
"""

from __future__ import annotations

import importlib
from typing import Any

from bon.errors import BonError

EXTRA_OF = {"torch": "gpu", "transformers": "gpu", "diffusers": "gpu", "accelerate": "gpu", "torchvision": "gpu",
            "openai": "api", "datasets": "datasets", "huggingface_hub": "datasets", "ray": "ray",
            "latex2sympy2": "emma", "word2number": "emma"}


def missing_extra(module: str, who: str, extra: str | None = None) -> BonError:
    """The one-line error for an optional library that is not installed."""
    extra = extra or EXTRA_OF.get(module.split(".")[0], "all")
    return BonError(f"{who}: needs the {module.split('.')[0]} package; install it with pip install '.[{extra}]'")


def require(module: str, who: str, extra: str | None = None) -> Any:
    """``import module``, or a one-line BonError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = (exc.name or module).split(".")[0]
        raise missing_extra(missing if missing in EXTRA_OF else module, who, extra) from None


def library_error(exc: BaseException, who: str, what: str) -> BonError:
    """A library's loading error as one line; one caused by a missing torchvision (the Qwen-VL
    processors from transformers 5 on, so Qwen judges, graders and Qwen-Image-Edit) names the extra."""
    if getattr(exc, "name", None) == "torchvision" or "torchvision" in str(exc).lower():
        return missing_extra("torchvision", who)
    from bon.errors import first_line

    return BonError(f"{who}: {what} ({first_line(exc)})")
