"""GenAI-Bench's official numbers: VQAScore per skill tag, as t2v_metrics' GenAI-Bench evaluation reports them.

The official evaluation (``genai_bench/evaluate.py`` in linzhiqiu/t2v_metrics) scores each prompt's
image(s) with VQAScore, averages a prompt's images, and then, for every skill tag of
``genai_skills.json``, takes the mean (and the sample standard deviation, n - 1) over the prompts
carrying that tag. ``all`` is the same over the union of the tagged prompts. It prints three groups:
basic (attribute, scene, spatial relation, action relation, part relation, basic), advanced (counting,
comparison, differentiation, negation, universal, advanced) and overall (basic, advanced, all).

Here a prompt's tags come from its own fields: each of its skills (lower-cased, ``Spatial Relation`` ->
``spatial relation``), plus ``advanced`` when it has an advanced skill, else ``basic`` (the split the
benchmark reports). A score that failed counts as 0, as the official API back-ends return 0.0 for a
call that failed twice (:data:`FAILED_VALUE`); the number of such scores is reported beside.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Mapping, Sequence

BASIC_GROUP = ("attribute", "scene", "spatial relation", "action relation", "part relation", "basic")
ADVANCED_GROUP = ("counting", "comparison", "differentiation", "negation", "universal", "advanced")
OVERALL_GROUP = ("basic", "advanced", "all")
FAILED_VALUE = 0.0  # t2v_metrics' GPT-4o VQAScore returns 0.0 for a call that failed twice


def prompt_tags(metadata: Mapping[str, Any]) -> list[str]:
    """A prompt's skill tags as ``genai_skills.json`` names them, plus its ``basic``/``advanced`` split."""
    skills = metadata.get("skills") or {}
    basic = [str(s).strip().lower() for s in skills.get("basic") or []]
    advanced = [str(s).strip().lower() for s in skills.get("advanced") or []]
    split = "advanced" if advanced else "basic"
    return list(dict.fromkeys([*basic, *advanced, split]))


def item_value(value: float | None) -> float:
    """A prompt's score as the official aggregation sees it (a failed score is 0)."""
    return FAILED_VALUE if value is None or not math.isfinite(value) else float(value)


def _summary(values: Sequence[float]) -> dict[str, Any]:
    if not values:  # the official mean of no prompts is NaN; strict JSON holds it as null
        return {"mean": None, "std": None, "items": 0}
    std = statistics.stdev(values) if len(values) > 1 else None  # torch's .std(): n - 1, NaN for one prompt
    return {"mean": math.fsum(values) / len(values), "std": std, "items": len(values)}


def skill_breakdown(items: Iterable[tuple[Sequence[str], float | None]]) -> dict[str, Any]:
    """The official numbers from (tags, score) per prompt: ``all``, ``basic``, ``advanced``, every tag's
    ``mean``/``std``/``items`` under ``skills``, and how many scores failed (counted as 0)."""
    by_tag: dict[str, list[float]] = {tag: [] for tag in (*BASIC_GROUP, *ADVANCED_GROUP)}
    tagged: list[float] = []
    failed = 0
    for tags, value in items:
        failed += value is None or not math.isfinite(value)
        v = item_value(value)
        for tag in tags:
            by_tag.setdefault(tag, []).append(v)
        if tags:
            tagged.append(v)
    skills = {tag: _summary(values) for tag, values in by_tag.items()}
    skills["all"] = _summary(tagged)
    return {"score": skills["all"]["mean"], "all": skills["all"]["mean"], "basic": skills["basic"]["mean"],
            "advanced": skills["advanced"]["mean"], "items": len(tagged), "failed": failed,
            "failed_counted_as": FAILED_VALUE, "skills": skills,
            "groups": {"basic": list(BASIC_GROUP), "advanced": list(ADVANCED_GROUP), "overall": list(OVERALL_GROUP)}}
