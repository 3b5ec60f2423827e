"""Where a model runs and in what precision, releasing its memory, and batches that survive
out-of-memory by halving (never by reloading the model per item)."""

from __future__ import annotations

import gc
from typing import Any, Callable, Sequence, TypeVar

from bon.backends import require
from bon.errors import BonError

T = TypeVar("T")
R = TypeVar("R")

DTYPES = {
    "float32": "float32", "fp32": "float32", "float": "float32",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
}


def resolve_device(device: str | None, who: str = "model") -> str:
    """``auto`` is CUDA, then Apple MPS, then CPU; asking for CUDA without one is a one-line error."""
    torch = require("torch", who)
    name = str(device or "auto").strip()
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return "mps"
        return "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise BonError(f"{who}: device {name!r} asked for, but torch sees no CUDA device (use device: cpu or auto)")
    return name


def resolve_dtype(dtype: str | None, device: str, who: str = "model") -> Any:
    """A torch dtype from a name; ``auto`` is bfloat16 on CUDA (float16 without bf16 support), else float32."""
    torch = require("torch", who)
    name = str(dtype or "auto").strip().lower()
    if name == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if name not in DTYPES:
        raise BonError(f"{who}: dtype {dtype!r} not known (use auto, float32, float16 or bfloat16)")
    return getattr(torch, DTYPES[name])


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def free_memory() -> None:
    """Collect garbage and hand cached accelerator memory back (after a model is dropped or an OOM).

    cuBLAS keeps its workspaces in torch's allocator until told otherwise; they go too, so a finished
    stage leaves the device as it found it (without this, benchmarks/gpu_check.py on an H200 found the
    first CUDA stage's memory never returning to its baseline). Without torch loaded there is no model
    memory for a collection to hand back, and a full collection of a large study's objects costs seconds."""
    import sys

    torch = sys.modules.get("torch")  # never import torch just to free nothing
    if torch is None:
        return
    gc.collect()
    if torch.cuda.is_available():
        clear_cublas_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear_cublas_workspaces is not None:
            clear_cublas_workspaces()
        torch.cuda.empty_cache()


def is_oom(exc: BaseException) -> bool:
    """An accelerator (or host) out-of-memory error, whatever library raised it."""
    return type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()


class OutOfMemory(BonError):
    """Out of memory even one item at a time: a one-line error naming the model and the batch size."""


class HalvingBatches:
    """Runs items through a model ``size`` at a time; on out-of-memory the batch is halved and retried,
    down to 1, and the smaller size is kept for the following batches (a batch that failed once would
    fail again). One item that does not fit raises :class:`OutOfMemory`."""

    def __init__(self, size: int | None, who: str, model: str) -> None:
        self.size = max(1, int(size)) if size else None
        self.who, self.model = who, model

    def run(self, items: Sequence[T], call: Callable[[Sequence[T]], list[R]]) -> list[R]:
        out: list[R] = []
        start = 0
        while start < len(items):
            chunk = items[start : start + (self.size or len(items))]
            try:
                got = call(chunk)
            except Exception as exc:  # noqa: BLE001 - only out-of-memory is handled here
                if not is_oom(exc):
                    raise
                free_memory()
                if len(chunk) == 1:
                    raise OutOfMemory(f"{self.who}: out of memory running {self.model} at batch size 1; "
                                      "use a smaller model, a lower dtype or cpu_offload") from None
                self.size = len(chunk) // 2
                continue
            out.extend(got)
            start += len(chunk)
        return out
