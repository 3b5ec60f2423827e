"""A study of candidates from disk, built for memory checks: the ``files`` generator reading PNGs, the
``labels`` verifier, three CPU judges (see JUDGES), knockout selection (used by
benchmarks/scale.py and tests/test_image_cache.py).

    build_files_study(root, images=320, size=1024) -> Path of config.yaml; run it with
    ``python -m bon.cli run CONFIG --max-calls 100000000`` (a call budget: the judges run one after
    another in one process, nothing forks) or without the budget (forked judges).

Images are smooth gradients with a few rectangles (small PNG files, realistic decode work): every
image differs, so nothing is shared by content. Labels are seeded numbers, one per candidate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import yaml
from PIL import Image

# light on 1024 x 1024: colour-hist reads every image's pixels, scene-lowres decodes them but finds no scene spec
# in these prompts (its verdicts are missing), image-bias reads digests; ("colour-hist", "quality", "image-bias")
# reads more (quality: four defect measures, slow at this size)
JUDGES = ("colour-hist", "scene-lowres", "image-bias")


def build_files_study(root: Path, images: int, size: int = 1024, n: int = 8, seed: int = 0,
                      out: Path | None = None, judges: Sequence[str] = JUDGES) -> Path:
    """Write ``images`` PNGs of ``size`` x ``size`` (``images / n`` t2i prompts of ``n`` candidates), their
    labels and a study config under ``root``; returns the config's path (the run goes to ``out``, default
    ``root / "run"``)."""
    if images % n:
        raise ValueError(f"images ({images}) must be a multiple of n ({n})")
    root.mkdir(parents=True, exist_ok=True)
    rng, label_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])  # labels: the same on a rebuild
    prompts, labels = [], ["prompt_id,index,score"]
    ramp = np.linspace(0, 1, size, dtype=np.float32)
    for p in range(images // n):
        pid = f"t2i-{p:05d}"
        prompts.append({"id": pid, "task": "t2i", "content": [["text", f"A picture number {p} with coloured boxes."]],
                        "metadata": {}})
        folder = root / "candidates" / pid
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(n):
            target = folder / f"{k}.png"
            labels.append(f"{pid},{k},{label_rng.uniform():.4f}")
            picture = _picture(rng, ramp, size)
            if not target.exists():
                picture.save(target, compress_level=1)
    (root / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (root / "labels.csv").write_text("\n".join(labels) + "\n")
    config = {
        "out": str(out or root / "run"), "seed": seed, "n": n, "tasks": ["t2i"],
        "suite": {"name": "jsonl", "path": str(root / "prompts.jsonl")},
        "preference": {"prompts_per_task": 0},
        "generators": [{"name": "files", "label": "disk", "options": {"root": str(root / "candidates")}}],
        "verifier": {"name": "labels", "options": {"path": str(root / "labels.csv")}},
        "strategy": {"name": "knockout"},
        "judges": list(judges),
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _picture(rng: np.random.Generator, ramp: np.ndarray, size: int) -> Image.Image:
    a, b = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    pixels = (a[None, None, :] * ramp[None, :, None] + b[None, None, :] * ramp[:, None, None]) / 2
    for _ in range(4):
        x0, y0 = rng.integers(0, size - size // 4, 2)
        w, h = rng.integers(size // 16, size // 4, 2)
        pixels[y0:y0 + h, x0:x0 + w] = rng.uniform(0, 255, 3)
    return Image.fromarray(pixels.astype(np.uint8), "RGB")
