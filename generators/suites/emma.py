"""EMMA (multimodal reasoning): 2,788 problems in math, physics, chemistry and coding.

Source: the Hugging Face dataset ``luckychao/EMMA`` (also ``luckychao/EMMA-mini``, 400 problems), one
config per subject (``Math``, ``Physics``, ``Chemistry``, ``Coding``), split ``test``. Columns: ``pid``,
``question`` (with ``<image_1>`` ... placeholders), ``options`` (list of strings; empty for open-ended
problems), ``answer`` (a letter for multiple choice, else the value), ``image_1`` ... ``image_5``,
``solution``, ``subject``, ``task``, ``category`` (the skill, e.g. ``3D Spatial Simulation``),
``source``, ``type`` (``Multiple Choice`` | ``Open-ended``) and ``context``.

Prompt: ``id`` = ``pid``, ``task`` reasoning, content = the question with each ``<image_k>``
replaced by that image (images the text never mentions follow it), then ``Options:`` and one ``A: ...``
line per option. Metadata: ``source`` ``emma``, ``benchmark_id``, ``category``, ``subject``, ``task_name``
(EMMA's ``task``), ``type``, ``answer`` (the reference the ``emma`` verifier checks), ``options``,
``answer_text`` (the correct option's text), ``solution``, ``context``.

Options (besides the shared ones): ``subjects`` (default all four). ``path`` may hold one folder per
subject (``Math/test-*.parquet``, as in the dataset repository) or one file.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from bon.content import Content, Prompt, TextItem
from bon.errors import BonError
from generators.suites import has_image, image_from, open_rows, select

DATASET = "luckychao/EMMA"
NAME = "EMMA"
SUBJECTS = ("Math", "Physics", "Chemistry", "Coding")
IMAGES = tuple(f"image_{k}" for k in range(1, 6))
PLACEHOLDER = re.compile(r"<image_(\d+)>")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def build_suite(dataset: str = DATASET, path: str | None = None, split: str | None = "test", revision: str | None = None,
                subjects: Any = None, categories: Any = None, limit: int | None = None) -> list[Prompt]:
    wanted = list(SUBJECTS) if subjects is None else ([subjects] if isinstance(subjects, str) else list(subjects))
    unknown = [s for s in wanted if s not in SUBJECTS]
    if unknown:
        raise BonError(f"{NAME}: unknown subject(s) {', '.join(unknown)} (known: {', '.join(SUBJECTS)})")
    prompts: list[Prompt] = []
    if path is not None and Path(path).expanduser().is_file():
        sources = [(None, Path(path).expanduser())]
    elif path is not None:
        root = Path(path).expanduser()
        folders = [(s, root / s) for s in wanted if (root / s).is_dir()]
        sources = folders or [(None, root)]
    else:
        sources = [(s, None) for s in wanted]
    for subject, local in sources:
        rows = open_rows(NAME, dataset, local, split, config=subject, revision=revision, image_columns=IMAGES,
                         hint=" (one folder per subject: Math/test-*.parquet ...)")
        for i, row in rows:
            p = to_prompt(rows, i, row, where=f"{rows.where} row {i}")
            if p.metadata.get("subject") in wanted or subject is not None:
                prompts.append(p)
    dup = next((pid for pid, n in Counter(p.id for p in prompts).items() if n > 1), None)
    if dup is not None:
        raise BonError(f"{NAME}: pid {dup} appears twice")
    return select(prompts, categories, limit, NAME)


def to_prompt(rows: Any, i: int, row: dict[str, Any], where: str) -> Prompt:
    pid, question = row.get("pid"), row.get("question")
    if pid is None or question is None:
        raise BonError(f"{NAME}: {where} has no pid or question")
    images = {k: image_from(rows, i, f"image_{k}", origin=f"{NAME} {pid} image_{k}")
              for k in range(1, 6) if f"image_{k}" in row and has_image(rows, i, f"image_{k}")}
    used: set[int] = set()
    items: list[Any] = []
    _interleave(str(question), images, used, items)
    options = [str(o) for o in (row.get("options") or [])]
    if options:
        _interleave("Options:\n" + "\n".join(f"{LETTERS[k]}: {o}" for k, o in enumerate(options)), images, used, items)
    rest = [images[k] for k in sorted(images) if k not in used]
    if rest:  # images the text does not place: after the question, before the options
        at = next((j for j, it in enumerate(items) if isinstance(it, TextItem) and it.text.startswith("Options:")), len(items))
        items[at:at] = rest
    answer = "" if row.get("answer") is None else str(row["answer"]).strip()
    qtype = str(row.get("type") or ("Multiple Choice" if options else "Open-ended"))
    meta: dict[str, Any] = {
        "source": "emma",
        "benchmark_id": str(pid),
        "category": str(row.get("category") or row.get("subject") or ""),
        "subject": str(row.get("subject") or ""),
        "task_name": str(row.get("task") or ""),
        "type": qtype,
        "answer": answer,
        "options": options,
    }
    if options and len(answer) == 1 and answer.upper() in LETTERS[: len(options)]:
        meta["answer_text"] = options[LETTERS.index(answer.upper())]
    for key in ("solution", "context"):
        if row.get(key):
            meta[key] = str(row[key])
    return Prompt(str(pid), "reasoning", Content(items), meta)


def _interleave(text: str, images: dict[int, Any], used: set[int], items: list[Any]) -> None:
    pos = 0
    for m in PLACEHOLDER.finditer(text):
        k = int(m.group(1))
        if k not in images:
            continue  # a placeholder without an image stays as text
        chunk = text[pos : m.start()].strip()
        if chunk:
            items.append(TextItem(chunk))
        items.append(images[k])
        used.add(k)
        pos = m.end()
    chunk = text[pos:].strip()
    if chunk:
        items.append(TextItem(chunk))
