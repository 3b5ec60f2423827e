"""Stage 4: a mini preference set labelled by simulated expert annotators, in MMRB2's exact layout.

Three things are kept apart here, as they are in MMRB2: the *truth* (what each candidate really
shows; the synthetic generator drew it and records it in ``provenance["truth"]`` as defects with
costs), the *annotators* (simulated experts who look at that truth with human-like noise and their
own leanings) and the downstream *verifier* (an automatic metric, never consulted here: the set
does not change when the verifier does). For each held-out prompt, pairs are drawn from different
generators and from the same generator; each is rated by ``annotators`` experts picked from a pool
on MMRB2's 1-6 scale, and kept only where a strict majority agrees on a side and the mean rating is
clear of the neutral middle by ``margin`` of the scale's half-width (the consensus filter).
How often the verifier agrees with these labels is measured afterwards (:func:`verifier_agreement`).
Files: ``t2i.json``, ``edit.json``, ``interleaved.json``, ``reasoning.json`` (``{"pairs": [...]}``),
``images/``, ``input_images/``.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
from dataclasses import dataclass, field
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

POOL = 12  # expert annotators in the pool; each pair gets ``cfg.annotators`` of them
LEANING_SD = 0.4  # spread (log scale) of how much one annotator weighs one aspect
RATING_SD = 0.6  # rating noise, in points of the 1-6 scale
RATING_GAIN = 6.0  # rating points per unit of perceived quality difference
NOTICE_COST = 0.3  # defects costing this much or more are always noticed; smaller ones may be missed
MIDPOINT, HALF_WIDTH = 3.5, 2.5


@dataclass
class PreferenceSet:
    """What was written: the pairs per task as (label, candidate key of A, candidate key of B)."""

    pairs: dict[str, list[tuple[str, ScoreKey, ScoreKey]]] = field(default_factory=dict)
    skipped_no_truth: int = 0  # candidates without a latent truth (not from the synthetic world)

    def counts(self) -> dict[str, int]:
        return {task: len(p) for task, p in self.pairs.items() if p}


@dataclass
class Annotator:
    """One simulated expert with a fixed leaning (cost multiplier) per aspect of quality."""

    seed: int
    leanings: dict[str, float] = field(default_factory=dict)

    def lean(self, aspect: str) -> float:
        if aspect not in self.leanings:
            rng = np.random.default_rng(derive_seed(self.seed, "leaning", aspect))
            self.leanings[aspect] = float(np.exp(rng.normal(0.0, LEANING_SD)))
        return self.leanings[aspect]

    def perceived(self, truth: dict[str, Any], rng: np.random.Generator) -> float:
        """Quality as this annotator sees it: small defects may be missed, costs weighed by leaning."""
        quality = 1.0
        for aspect, cost in truth.get("defects", []):
            if rng.random() < min(1.0, 0.5 + 0.5 * cost / NOTICE_COST):
                quality *= 1.0 - min(0.95, cost * self.lean(aspect))
        return quality


def annotator_pool(seed: int, size: int = POOL) -> list[Annotator]:
    return [Annotator(derive_seed(seed, "annotator", i)) for i in range(size)]


def build_preference_set(
    out: Path,
    prompts: list[Prompt],
    candidates: dict[str, list[Candidate]],  # prompt id -> candidates of every generator
    cfg: PreferenceConfig,
    seed: int,
) -> PreferenceSet:
    """Write the set under ``out``. Labels come from the candidates' latent truth through simulated
    annotators; no score of any verifier or judge is read. Deterministic from ``seed``."""
    result = PreferenceSet({task: [] for task in TASK_NAMES})
    records: dict[str, list[dict[str, Any]]] = {task: [] for task in TASK_NAMES}
    pool = annotator_pool(seed)
    for prompt in prompts:
        rng = np.random.default_rng(derive_seed(seed, "preference", prompt.id))
        known = [c for c in candidates.get(prompt.id, []) if isinstance(c.provenance.get("truth"), dict)]
        result.skipped_no_truth += len(candidates.get(prompt.id, [])) - len(known)
        for a, b, label, ratings in _choose_pairs(known, pool, cfg, rng):
            records[prompt.task].append(_pair_record(out, prompt, a, b, label, ratings))
            result.pairs[prompt.task].append((label, a.key, b.key))
    for task, pairs in records.items():
        if pairs:
            write_json(out / parse_task(task).file, {"pairs": pairs})
    return result


def _choose_pairs(cands: list[Candidate], pool: list[Annotator], cfg: PreferenceConfig, rng: np.random.Generator):
    """Alternate different-model and same-model pairs until enough pass the annotators' consensus."""
    pools = {
        "cross": [(x, y) for x, y in itertools.combinations(cands, 2) if x.generator != y.generator],
        "same": [(x, y) for x, y in itertools.combinations(cands, 2) if x.generator == y.generator],
    }
    for pairs in pools.values():
        rng.shuffle(pairs)  # type: ignore[arg-type]
    used: set[tuple] = set()
    chosen = []
    kinds = itertools.cycle(["cross", "same"])
    for kind in itertools.islice(kinds, 4 * cfg.pairs_per_prompt):
        if len(chosen) >= cfg.pairs_per_prompt:
            break
        while pools[kind]:
            ca, cb = pools[kind].pop()
            if ca.key in used or cb.key in used:
                continue
            if rng.random() < 0.5:  # random position, as in MMRB2
                ca, cb = cb, ca
            ratings = annotate(ca.provenance["truth"], cb.provenance["truth"], pool, cfg.annotators, rng)
            label = consensus(ratings, cfg.margin)
            if label is None:
                continue
            used.update({ca.key, cb.key})
            chosen.append((ca, cb, label, ratings))
            break
    return chosen


def annotate(truth_a: dict[str, Any], truth_b: dict[str, Any], pool: list[Annotator], k: int,
             rng: np.random.Generator) -> list[int]:
    """1-6 ratings (6 = A much better) from ``k`` annotators drawn from the pool."""
    ratings = []
    for i in rng.choice(len(pool), size=min(k, len(pool)), replace=False):
        who = pool[int(i)]
        gap = who.perceived(truth_a, rng) - who.perceived(truth_b, rng)
        raw = MIDPOINT + RATING_GAIN * gap + rng.normal(0.0, RATING_SD)
        ratings.append(int(np.clip(np.rint(raw), 1, 6)))
    return ratings


def consensus(ratings: list[int], margin: float = 0.0) -> str | None:
    """MMRB2's reading of ratings: 5-6 vote A, 1-2 vote B, 3-4 abstain; a strict majority decides,
    and the mean rating must lie ``margin`` (of the half-width 2.5) away from the neutral 3.5."""
    a = sum(r >= 5 for r in ratings)
    b = sum(r <= 2 for r in ratings)
    need = len(ratings) // 2 + 1
    side = "A" if a >= need else "B" if b >= need else None
    if side is None or abs(float(np.mean(ratings)) - MIDPOINT) < margin * HALF_WIDTH:
        return None
    return side


def verifier_agreement(pref: PreferenceSet, scores: dict[ScoreKey, dict]) -> dict[str, dict[str, Any]]:
    """Per task: how often the verifier's score order agrees with the annotators' label (a verifier
    tie counts as half, as a coin would), like GenAI-Bench's agreement of VQAScore with humans."""
    out: dict[str, dict[str, Any]] = {}
    for task, pairs in pref.pairs.items():
        agree = ties = counted = 0
        for label, ka, kb in pairs:
            sa, sb = (scores.get(k, {}).get("score") for k in (ka, kb))
            if sa is None or sb is None:
                continue
            counted += 1
            if math.isclose(sa, sb, abs_tol=1e-9):
                ties += 1
            elif (sa > sb) == (label == "A"):
                agree += 1
        if counted:
            out[task] = {"agreement": round((agree + 0.5 * ties) / counted, 4), "pairs": counted, "ties": ties}
    return out


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
