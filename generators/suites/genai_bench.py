"""GenAI-Bench (text-to-image): 1,600 compositional prompts from professional designers.

Source: the Hugging Face dataset ``BaiqiL/GenAI-Bench`` (split ``train``). Two layouts of that dataset
exist and both are read:

- current: ``id`` (string), ``prompt``, ``basic_skills`` and ``advanced_skills`` (strings holding a
  list of skill names), one image column per rated model (``DALLE_3``, ``DeepFloyd_I_XL_v1``,
  ``Midjourney_6``, ``SDXL_2_1``, ``SDXL_Base``, ``SDXL_Turbo``) and ``<model>_HumanRating`` (strings
  holding the 1-5 Likert ratings);
- earlier: ``Index`` (int), ``Prompt``, ``Tags`` (``{"basic": [...], "advanced": [...]}``),
  ``HumanRatings`` (``{model: [ratings]}``) and the same image columns.

A local copy may be those Parquet files, or the ``genai_image.json`` of the t2v_metrics release
(``{"00001": {"prompt": ..., "models": {model: [ratings]}, ...}}``).

Prompt: ``id`` = the benchmark's id, ``task`` t2i, content = the prompt text. Metadata: ``source``
``genai-bench``, ``benchmark_id``, ``category`` (``advanced`` when the prompt exercises an advanced skill
- counting, comparison, differentiation, negation, universality - else ``basic``, the split GenAI-Bench
reports), ``skills`` (``{"basic": [...], "advanced": [...]}``) and ``human_ratings`` (``{model: [1-5
ratings]}``, the benchmark's reference judgments of its own images). The rated images are not loaded.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from typing import Any

from bon.content import Content, Prompt, TextItem
from bon.errors import BonError
from generators.suites import open_rows, select

DATASET = "BaiqiL/GenAI-Bench"
NAME = "GenAI-Bench"
MODELS = ("DALLE_3", "DeepFloyd_I_XL_v1", "Midjourney_6", "SDXL_2_1", "SDXL_Base", "SDXL_Turbo")


def build_suite(dataset: str = DATASET, path: str | None = None, split: str | None = "train", revision: str | None = None,
                categories: Any = None, limit: int | None = None) -> list[Prompt]:
    rows = open_rows(NAME, dataset, path, split, revision=revision, image_columns=MODELS,
                     hint=" (the Parquet files of BaiqiL/GenAI-Bench, or t2v_metrics' genai_image.json)")
    prompts = [to_prompt(row, where=f"{rows.where} row {i}") for i, row in rows]
    dup = next((pid for pid, n in Counter(p.id for p in prompts).items() if n > 1), None)
    if dup is not None:
        raise BonError(f"{NAME}: id {dup} appears twice in {rows.where}")
    return select(prompts, categories, limit, NAME)


def to_prompt(row: dict[str, Any], where: str) -> Prompt:
    raw_id = _first(row, "id", "Index", "__key__")
    text = _first(row, "prompt", "Prompt")
    if raw_id is None or text is None or not str(text).strip():
        raise BonError(f"{NAME}: {where} has no id or prompt (expected columns id/prompt or Index/Prompt)")
    tags = row.get("Tags") if isinstance(row.get("Tags"), dict) else {}
    basic = parse_list(row.get("basic_skills", tags.get("basic")))
    advanced = parse_list(row.get("advanced_skills", tags.get("advanced")))
    meta: dict[str, Any] = {
        "source": "genai-bench",
        "benchmark_id": str(raw_id),
        "category": "advanced" if advanced else "basic",
        "skills": {"basic": basic, "advanced": advanced},
    }
    ratings = human_ratings(row)
    if ratings:
        meta["human_ratings"] = ratings
    return Prompt(str(raw_id), "t2i", Content([TextItem(str(text).strip())]), meta)


def human_ratings(row: dict[str, Any]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    nested = row.get("HumanRatings") or row.get("models")
    if isinstance(nested, dict):
        for model, values in nested.items():
            vals = _numbers(values)
            if vals:
                out[str(model)] = vals
    for key, value in row.items():
        if isinstance(key, str) and key.endswith("_HumanRating"):
            vals = _numbers(value)
            if vals:
                out[key[: -len("_HumanRating")]] = vals
    return out


def parse_list(value: Any) -> list[str]:
    """A list of names from a list, a JSON / Python list literal, or a comma-separated string."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    text = str(value).strip()
    if not text or text.lower() in ("none", "nan", "[]"):
        return []
    for parse in (json.loads, ast.literal_eval):
        try:
            parsed = parse(text)
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(parsed, (list, tuple)):
            return [str(v).strip() for v in parsed if str(v).strip()]
        if isinstance(parsed, str):
            text = parsed
            break
    return [part.strip().strip("'\"") for part in text.split(",") if part.strip().strip("'\"")]


def _numbers(value: Any) -> list[float]:
    if value is None:
        return []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    items = value if isinstance(value, (list, tuple)) else parse_list(value)
    out = []
    for v in items:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            continue
    return out


def _first(row: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if row.get(k) is not None:
            return row[k]
    return None


build_suite.requires = ("datasets",)  # read from the Hub without path: (bon.preflight)
