"""How much does batching save a transformers-vlm judge? 8 comparisons in one padded forward pass
versus 8 passes of one comparison each, in logits mode (the one-pass mode) by default.

    python benchmarks/vlm_batching.py                          # the test suite's tiny random LLaVA (CPU)
    python benchmarks/vlm_batching.py --hidden 256 --layers 4  # a bigger random one
    python benchmarks/vlm_batching.py --model Qwen/Qwen3-VL-8B-Instruct --device cuda --dtype bfloat16

Prints the median wall time of each way over ``--repeats`` runs and the ratio single / batched.
Each run uses fresh images, so nothing is cached between runs.

What to expect: on a GPU a batch of 8 costs little more than one comparison, so the ratio approaches
8 for short answers. On a 2-core CPU the forward pass is compute-bound and batching saves only the
per-call overhead: measured here (tiny model) 1.1-2.0x, and about 1x (0.7-1.0x) for a hidden-256,
4-layer model, where padding costs what batching saves.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from _common import parser


def comparisons(n: int, run: int):
    from PIL import Image

    from bon.content import Content, Prompt
    from bon.protocol import Comparison

    prompt = Prompt(f"bench{run}", "t2i", Content.of(f"a red square above a blue circle, take {run}"))
    out = []
    for i in range(n):
        a = Content.of(Image.new("RGB", (256, 256), (200, (20 * i + run) % 256, 0)))
        b = Content.of("Here is the image:", Image.new("RGB", (256, 192), (0, 0, (25 * i + run) % 256)))
        out.append(Comparison(prompt, a, b, 0))
    return out


def main() -> None:
    ap = parser(__doc__, device="auto", dtype="auto", n=(8, "comparisons per measurement"), repeats=5,
                max_new_tokens=32, hidden=(32, "hidden size of the built random model"),
                layers=(2, "layers of the built random model (each tower)"))
    ap.add_argument("--model", default=None, help="hub id or folder (default: a tiny random LLaVA)")
    ap.add_argument("--mode", default="logits", choices=["logits", "generate"])
    args = ap.parse_args()

    import torch

    from bon.backends.device import dtype_name
    from judges.transformers_vlm import TransformersVlmJudge

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from tiny_models import build_tiny_llava

            model = str(build_tiny_llava(Path(tmp) / "tiny-llava", hidden=args.hidden, layers=args.layers))
        common = dict(model=model, mode=args.mode, device=args.device, dtype=args.dtype, max_new_tokens=args.max_new_tokens)
        batched = TransformersVlmJudge(batch_size=args.n, **common)
        single = TransformersVlmJudge(batch_size=1, **common)
        single.backend._model = batched.backend.model  # one copy of the weights serves both
        sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
        batched.judge(comparisons(args.n, -1))  # warm-up: weights, kernels, tokenizer caches
        single.judge(comparisons(1, -2))
        times = {"batched": [], "single": []}
        for run in range(args.repeats):
            for way, judge in (("batched", batched), ("single", single)):
                comps = comparisons(args.n, run * 2 + (way == "single"))
                sync()
                started = time.perf_counter()
                judge.judge(comps)
                sync()
                times[way].append(time.perf_counter() - started)
        tb, ts = statistics.median(times["batched"]), statistics.median(times["single"])
        built = f"random LLaVA (hidden {args.hidden}, {args.layers} layers, byte tokenizer)"
        print(f"model {model if args.model else built}  mode {args.mode}  device {batched.backend.device}  "
              f"dtype {dtype_name(batched.backend.dtype)}  torch threads {torch.get_num_threads()}")
        print(f"{args.n} comparisons, one batched pass : {tb * 1000:8.1f} ms (median of {args.repeats})")
        print(f"{args.n} comparisons, {args.n} single passes  : {ts * 1000:8.1f} ms")
        print(f"ratio single / batched            : {ts / tb:8.2f}x")
        print(f"forward passes per measurement    : batched {len(batched.backend.forward_batches) // (args.repeats + 1)}, "
              f"single {(len(single.backend.forward_batches) - 1) // args.repeats}")


if __name__ == "__main__":
    main()
