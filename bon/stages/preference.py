"""Stage 4: a mini preference set built the way MMRB2 was, written in MMRB2's exact layout.

For each held-out prompt, pairs are drawn from different generators and from the same generator,
labelled by the verifier, and kept only where the label is clear: the score gap passes a margin and
a majority of simulated annotators (verifier gap plus rating noise, on MMRB2's 1-6 scale) agree.
This filter stands in for MMRB2's human consensus. Files: ``t2i.json``, ``edit.json``,
``interleaved.json``, ``reasoning.json`` (``{"pairs": [...]}``), ``images/``, ``input_images/``.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from bon.config import PreferenceConfig
from bon.content import Candidate, Content, ImageItem, Prompt, save_png, slug
from bon.errors import BonError
from bon.runfolder import write_json
from bon.seeds import derive_seed
from bon.stages.verify import ScoreKey
from bon.tasks import TASK_NAMES, parse_task



def build_preference_set(
    out: Path,
    prompts: list[Prompt],
    candidates: dict[str, list[Candidate]],  # prompt id -> candidates of every generator
    scores: dict[ScoreKey, dict],
    cfg: PreferenceConfig,
    seed: int,
) -> dict[str, int]:
    """Write the set under ``out``; returns the number of pairs per task. Deterministic from ``seed``."""
    pairs_by_task: dict[str, list[dict[str, Any]]] = {task: [] for task in TASK_NAMES}
    for prompt in prompts:
        rng = np.random.default_rng(derive_seed(seed, "preference", prompt.id))
        scored = [(c, scores[c.key]["score"]) for c in candidates.get(prompt.id, [])]
        scored = [(c, s) for c, s in scored if s is not None]
        for a, b, label, ratings in _choose_pairs(scored, cfg, rng):
            pairs_by_task[prompt.task].append(_pair_record(out, prompt, a, b, label, ratings))
    for task, pairs in pairs_by_task.items():
        if pairs:
            write_json(out / parse_task(task).file, {"pairs": pairs})
    return {task: len(p) for task, p in pairs_by_task.items() if p}


def _choose_pairs(scored: list[tuple[Candidate, float]], cfg: PreferenceConfig, rng: np.random.Generator):
    """Alternate different-model and same-model pairs until enough clear ones are found."""
    pools = {
        "cross": [(x, y) for x, y in itertools.combinations(scored, 2) if x[0].generator != y[0].generator],
        "same": [(x, y) for x, y in itertools.combinations(scored, 2) if x[0].generator == y[0].generator],
    }
    for pool in pools.values():
        rng.shuffle(pool)  # type: ignore[arg-type]
    used: set[tuple] = set()
    chosen = []
    kinds = itertools.cycle(["cross", "same"])
    for kind in itertools.islice(kinds, 4 * cfg.pairs_per_prompt):
        if len(chosen) >= cfg.pairs_per_prompt:
            break
        while pools[kind]:
            (ca, sa), (cb, sb) = pools[kind].pop()
            if ca.key in used or cb.key in used or abs(sa - sb) < cfg.margin:
                continue
            if rng.random() < 0.5:  # random position, as in MMRB2
                (ca, sa), (cb, sb) = (cb, sb), (ca, sa)
            ratings = _annotate(sa - sb, cfg.annotators, rng)
            label = "A" if sa > sb else "B"
            if _consensus(ratings) != label:
                continue
            used.update({ca.key, cb.key})
            chosen.append((ca, cb, label, ratings))
            break
    return chosen


def _annotate(gap: float, annotators: int, rng: np.random.Generator) -> list[int]:
    """Simulated 1-6 ratings (6 = A much better): the verifier's gap seen through rating noise."""
    raw = 3.5 + 5.0 * gap + rng.normal(0.0, 0.9, size=annotators)
    return [int(v) for v in np.clip(np.rint(raw), 1, 6)]


def _consensus(ratings: list[int]) -> str | None:
    """MMRB2's reading of ratings: 5-6 vote A, 1-2 vote B, 3-4 abstain; a strict majority decides."""
    a = sum(r >= 5 for r in ratings)
    b = sum(r <= 2 for r in ratings)
    need = len(ratings) // 2 + 1
    return "A" if a >= need else "B" if b >= need else None


def _pair_record(out: Path, prompt: Prompt, a: Candidate, b: Candidate, label: str, ratings: list[int]) -> dict:
    pair_id = f"{prompt.id}_{a.generator}_{a.index}_{b.generator}_{b.index}"
    return {
        "id": pair_id,
        "prompt_source": str(prompt.metadata.get("source", "synthetic")),
        "prompt_content": _export(prompt.content, out / "input_images", slug(prompt.id)),
        "prompt_metadata": {"id": prompt.id, "category": prompt.metadata.get("category")},
        "response_a": {"model_name": a.generator, "response_content": _export(a.content, out / "images", slug(f"{a.generator}_{a.prompt_id}_{a.index}"))},
        "response_b": {"model_name": b.generator, "response_content": _export(b.content, out / "images", slug(f"{b.generator}_{b.prompt_id}_{b.index}"))},
        "chosen": label,
        "human_annotations": ratings,
    }


def _export(content: Content, folder: Path, stem: str) -> list[list[str]]:
    """Content as MMRB2 items; images copied (hard-linked where possible) into ``folder`` by file name."""
    items: list[list[str]] = []
    k = 0
    for item in content:
        if not isinstance(item, ImageItem):
            items.append(["text", item.text])
            continue
        name = f"{stem}_{k}{item.path.suffix if item.path else '.png'}"
        k += 1
        _place_image(item, folder / name)
        items.append(["image", name])
    return items


def _place_image(item: ImageItem, target: Path) -> None:
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if item.path is None:
        save_png(item.load(), target)
        return
    if not item.path.exists():
        raise BonError(f"{item.path}: image file not found")
    try:
        os.link(item.path, target)
    except OSError:
        shutil.copyfile(item.path, target)
