"""Build the tiny random models and benchmark copies that the scaled-down paper configs read.

    python benchmarks/make_tiny_models.py            # into runs/tiny (git-ignored), about 20 s on 2 cores
    bon run configs/paper_t2i_tiny.yaml              # then any of the four tiny settings

Models (random weights, built from configs, saved like real checkpoints and loaded back through the
same ``from_pretrained`` calls real ones use; no network, no torchvision):

- ``models/sd``: a Stable Diffusion pipeline (32 px, 2 steps) - the text-to-image generators, and the
  weak editor as its image-to-image pipeline
- ``models/pix2pix``: an InstructPix2Pix pipeline - the strong editor
- ``models/chat_lm``: a Qwen2-style causal LM - the interleaved agent's planner
- ``models/llava`` and ``models/llava_b``: two LLaVA-style chat VLMs (different seeds and tokenizers) - the
  judges, the graders of the ``vqascore`` / ``gedit`` / ``isg`` verifiers, and the reasoning generators
- ``models/clip``: a CLIP dual encoder - the ``clipscore`` judge

Benchmark copies, each in its benchmark's real schema (see ``tests/suite_fixtures.py``):
``suites/genai_bench`` (Parquet), ``suites/gedit_bench`` (``save_to_disk`` Arrow), ``suites/isg_bench``
(JSONL + images), ``suites/emma`` (Parquet per subject).

Everything already present is kept; ``--force`` rebuilds.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from _common import ROOT, parser, timed


def builders() -> dict[str, object]:
    import conftest_models as cm
    import suite_fixtures as sf
    import tiny_models as tm

    return {
        "models/sd": cm.build_sd,
        "models/pix2pix": cm.build_pix2pix,
        "models/chat_lm": cm.build_chat_lm,
        "models/llava": cm.build_llava,
        "models/llava_b": lambda folder: tm.build_tiny_llava(folder, seed=1),
        "models/clip": lambda folder: tm.build_tiny_clip(folder, seed=0),
        "suites/genai_bench": sf.write_genai_bench,
        "suites/gedit_bench": sf.write_gedit_bench,
        "suites/isg_bench": sf.write_isg_bench,
        "suites/emma": sf.write_emma,
    }


def make(out: Path, force: bool = False, only: list[str] | None = None) -> dict[str, float]:
    """Build what is missing under ``out``; returns seconds per item built."""
    timings: dict[str, float] = {}
    for rel, build in builders().items():
        if only and not any(rel.endswith(o) for o in only):
            continue
        folder = out / rel
        done = folder / ".complete"
        if done.exists() and not force:
            continue
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        _, seconds = timed(build, folder)
        done.write_text("ok\n")
        timings[rel] = round(seconds, 2)
    return timings


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, out=(ROOT / "runs" / "tiny", "folder to write (default runs/tiny)"))
    ap.add_argument("--force", action="store_true", help="rebuild everything")
    ap.add_argument("--only", nargs="*", help="build only these (e.g. sd llava emma)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    timings = make(args.out, args.force, args.only)
    for rel, s in timings.items():
        print(f"{rel:<22} {s:6.2f} s")
    print(f"tiny models and suites in {args.out}" + ("" if timings else " (all present)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
