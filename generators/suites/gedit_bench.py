"""GEdit-Bench (image editing): 606 real-world edit requests, each in English and in Chinese.

Source: the Hugging Face dataset ``stepfun-ai/GEdit-Bench`` (split ``train``, the only one; 1,212 rows).
Columns: ``key`` (the edit's id, shared by its two languages), ``task_type`` (one of 11 categories:
background_change, color_alter, material_alter, motion_change, ps_human, style_change, subject-add,
subject-remove, subject-replace, text_change, tone_transfer), ``instruction``, ``instruction_language``
(``en`` | ``cn``), ``input_image`` (the image editors receive), ``input_image_raw`` (the original) and
``Intersection_exist`` (bool; GEdit-Bench also reports the subset where it is true). A mirror that
names the image ``source_image`` is read too.

Prompt: ``id`` = ``key`` (``<key>_<language>`` when both languages are loaded), ``task`` edit, content
= the instruction then the input image. Metadata: ``source`` ``gedit-bench``, ``benchmark_id``,
``category`` (= ``task_type``), ``language``, ``intersection_exist``.

Options (besides the shared ones): ``language`` en (default) | cn | all; ``raw_image`` (default false):
give editors ``input_image_raw`` instead of ``input_image``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from bon.content import Content, Prompt, TextItem
from bon.errors import BonError
from generators.suites import image_from, open_rows, select

DATASET = "stepfun-ai/GEdit-Bench"
NAME = "GEdit-Bench"
CATEGORIES = ("background_change", "color_alter", "material_alter", "motion_change", "ps_human", "style_change",
              "subject-add", "subject-remove", "subject-replace", "text_change", "tone_transfer")
IMAGE_COLUMNS = ("input_image", "input_image_raw", "source_image")


def build_suite(dataset: str = DATASET, path: str | None = None, split: str | None = "train", revision: str | None = None,
                language: str = "en", raw_image: bool = False, categories: Any = None, limit: int | None = None) -> list[Prompt]:
    if language not in ("en", "cn", "all"):
        raise BonError(f"{NAME}: language must be en, cn or all, got {language!r}")
    rows = open_rows(NAME, dataset, path, split, revision=revision, image_columns=IMAGE_COLUMNS,
                     hint=" (the dataset's .arrow or .parquet files)")
    column = "input_image_raw" if raw_image else "input_image"
    prompts = []
    for i, row in rows:
        where = f"{rows.where} row {i}"
        lang = str(row.get("instruction_language") or "en")
        if language != "all" and lang != language:
            continue
        key, instruction = row.get("key"), row.get("instruction")
        if key is None or not instruction:
            raise BonError(f"{NAME}: {where} has no key or instruction")
        col = column if column in row else "source_image" if "source_image" in row else None
        image = image_from(rows, i, col, origin=f"{NAME} {key} ({lang})") if col else None
        if image is None:
            raise BonError(f"{NAME}: {where} ({key}) has no input image (column {column})")
        pid = f"{key}_{lang}" if language == "all" else str(key)
        meta = {
            "source": "gedit-bench",
            "benchmark_id": str(key),
            "category": str(row.get("task_type")),
            "language": lang,
            "intersection_exist": bool(row.get("Intersection_exist", False)),
        }
        prompts.append(Prompt(pid, "edit", Content([TextItem(str(instruction)), image]), meta))
    dup = next((pid for pid, n in Counter(p.id for p in prompts).items() if n > 1), None)
    if dup is not None:
        raise BonError(f"{NAME}: key {dup} appears twice for one language in {rows.where}")
    if not prompts:
        raise BonError(f"{NAME}: no rows with instruction_language {language} in {rows.where}")
    return select(prompts, categories, limit, NAME)


build_suite.requires = ("datasets",)  # read from the Hub without path: (bon.preflight)
