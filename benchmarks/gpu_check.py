"""Check, on a machine with a CUDA device and no network, that the paper pipelines run on the device
and give their memory back after every stage.

    python benchmarks/gpu_check.py                    # CUDA if visible (bfloat16), else CPU (float32)
    python benchmarks/gpu_check.py --device cpu       # force the CPU
    python benchmarks/gpu_check.py --configs configs/paper_t2i_tiny.yaml

Builds the tiny random models and benchmark copies (benchmarks/make_tiny_models.py, kept between
runs), then runs each tiny paper config (configs/*_tiny.yaml) in a fresh folder under runs/gpu_check
with every model on the device (bfloat16 on CUDA). For each stage (one generator, the verifier, one
judge: the runner holds one at a time) it prints the wall time, the peak memory and whether memory
returned to its level before the stage:

- on CUDA: ``torch.cuda.max_memory_allocated`` since the stage started, and ``memory_allocated``
  after the stage's model was released, against the level before it was loaded;
- on CPU: a live-bytes counter (the bytes of every torch tensor storage alive, read through the
  garbage collector) when the stage's model is released (its held bytes) and after.

Exit status 0 when every config finished and every stage returned to its baseline, else 1.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _common import ROOT, parser

os.environ.setdefault("BON_QUIET", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

TOLERANCE = 1 << 20  # bytes a stage may leave behind (allocator granularity, small caches)


def live_tensor_bytes() -> int:
    """Bytes of every distinct tensor storage alive in this process (the CPU's memory counter)."""
    import torch

    gc.collect()
    kinds = (torch.Tensor, torch.nn.Parameter)
    seen: dict[int, int] = {}
    for obj in gc.get_objects():
        if type(obj) in kinds and not obj.is_meta:  # exact types: isinstance would wake lazy modules up
            storage = obj.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


@dataclass
class StageRecord:
    kind: str
    label: str
    seconds: float = 0.0
    before: int = 0
    peak: int = 0
    after: int = 0

    @property
    def returned(self) -> bool:
        return self.after - self.before <= TOLERANCE


class Meter:
    """Receives the stage runner's load / released events and measures each stage."""

    def __init__(self, device: str) -> None:
        import torch

        self.torch, self.cuda = torch, device.startswith("cuda")
        self.stages: list[StageRecord] = []
        self._started = 0.0

    def memory(self) -> int:
        if self.cuda:
            self.torch.cuda.synchronize()
            return self.torch.cuda.memory_allocated()
        return live_tensor_bytes()

    def __call__(self, event: str, kind: str, label: str) -> None:
        if event == "load":
            record = StageRecord(kind, label, before=self.memory())
            if self.cuda:
                self.torch.cuda.reset_peak_memory_stats()
            self.stages.append(record)
            self._started = time.perf_counter()
        elif event == "released" and self.stages and self.stages[-1].label == label:
            record = self.stages[-1]
            record.seconds = time.perf_counter() - self._started
            record.after = self.memory()
            record.peak = self.torch.cuda.max_memory_allocated() if self.cuda else record.peak
        if event == "release-now" and self.stages:  # CPU: what the stage holds just before it is released
            self.stages[-1].peak = max(self.stages[-1].peak, self.memory())


def on_device(options: dict[str, Any], device: str) -> dict[str, Any]:
    """The options with every ``device`` set to ``device`` (and bfloat16 beside it on CUDA)."""
    out = {key: on_device(value, device) if isinstance(value, dict) else value for key, value in options.items()}
    if "device" in options:
        out["device"] = device
        if device.startswith("cuda"):
            out["dtype"] = "bfloat16"
    return out


def moved(cfg: Any, device: str, out: Path) -> Any:
    """The study config with every model on ``device`` and a fresh run folder."""
    def spec(s: Any) -> Any:
        return replace(s, options=on_device(s.options, device))

    return replace(cfg, out=out, generators=[spec(g) for g in cfg.generators], judges=[spec(j) for j in cfg.judges],
                   verifier=spec(cfg.verifier))


def run_config(path: Path, device: str, out_root: Path) -> tuple[list[StageRecord], str | None, float]:
    import shutil

    from bon import lifecycle
    from bon.config import load_config
    from bon.study import run_study

    out = out_root / path.stem
    if out.exists():
        shutil.rmtree(out)
    cfg = moved(load_config(path), device, out)
    meter = Meter(device)
    real_release = lifecycle.release

    def release(plugin: Any) -> None:  # measure what the stage holds right before it lets go
        meter("release-now", "", "")
        real_release(plugin)

    lifecycle.release = release
    started = time.perf_counter()
    error = None
    try:
        with lifecycle.observe(meter):
            outcome = run_study(cfg)
        if outcome.pending:
            error = f"pending items: {outcome.pending}"
    except Exception as exc:  # noqa: BLE001 - report and go on with the next config
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        lifecycle.release = real_release
    return meter.stages, error, time.perf_counter() - started


def mb(n: int) -> str:
    return f"{n / 2**20:9.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, device=("auto", "auto (CUDA if visible), cuda, cuda:N or cpu"),
                out=ROOT / "runs" / "gpu_check",
                models=(ROOT / "runs" / "tiny", "where the tiny models are built"))
    ap.add_argument("--configs", nargs="*", type=Path, default=sorted((ROOT / "configs").glob("*_tiny.yaml")))
    args = ap.parse_args(argv)
    import torch

    import make_tiny_models

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    built = make_tiny_models.make(args.models)
    print(f"tiny models: {args.models} ({'built ' + ', '.join(built) if built else 'already present'})")
    where = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU (memory: live tensor bytes)"
    print(f"device: {device} - {where}; torch {torch.__version__}; dtype {'bfloat16' if device.startswith('cuda') else 'float32'}")
    os.chdir(ROOT)  # the tiny configs name their models relative to the repository
    ok = True
    for path in args.configs:
        stages, error, seconds = run_config(path, device, args.out)
        print(f"\n{path.name}: {'FAILED: ' + error if error else 'finished'} in {seconds:.1f} s")
        print(f"  {'stage':<30}{'wall s':>8}{'before MB':>11}{'peak MB':>10}{'after MB':>10}  back to baseline")
        for s in stages:
            print(f"  {s.kind + ' ' + s.label:<30}{s.seconds:8.2f}{mb(s.before):>11}{mb(s.peak):>10}{mb(s.after):>10}  "
                  f"{'yes' if s.returned else 'NO (+' + mb(s.after - s.before).strip() + ' MB)'}")
        ok = ok and error is None and all(s.returned for s in stages)
    print("\nall stages returned to baseline" if ok else "\nsome stage failed or kept memory (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
