"""``bon mmrb2 fetch``: the MMRB2 release from the Hugging Face hub, written in the official layout.

The hub copy (``rl-research/multimodal-rewardbench-2``, one config per task, split ``test``) holds
each side of a pair as text with ``<image_N>`` placeholders plus a list of images; this module turns
every row back into ``[[kind, value], ...]`` content with images saved under ``images/`` (responses)
and ``input_images/`` (prompts), next to ``t2i.json`` ... ``reasoning.json``. The data is CC BY-NC.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from analysis.mmrb2 import BON_TO_SCORER, TASK_FILES, write_pairs
from bon.errors import BonError
from bon.progress import bar

HUB_DATASET = "rl-research/multimodal-rewardbench-2"
PLACEHOLDER = re.compile(r"<image_(\d+)>")
HOW_TO = (f"download the dataset {HUB_DATASET} (configs t2i, edit, interleaved, reasoning) on a machine with "
          "network access, run `bon mmrb2 fetch --out DIR` there, and copy DIR here (or set HF_HOME to a cache that holds it)")


def split_content(text: str | None, images: list[Any] | None, folder: Path, stem: str) -> list[list[str]]:
    """Text with ``<image_N>`` placeholders + images -> content items; unplaced images go last."""
    images = list(images or [])
    items: list[list[str]] = []
    used: set[int] = set()

    def add_image(k: int) -> None:
        if k >= len(images) or k in used:
            return
        used.add(k)
        name = f"{stem}_{k}.jpg"
        images[k].convert("RGB").save(folder / name, "JPEG", quality=95)
        items.append(["image", name])

    pos = 0
    for m in PLACEHOLDER.finditer(text or ""):
        if (text or "")[pos : m.start()].strip():
            items.append(["text", text[pos : m.start()].strip()])
        add_image(int(m.group(1)))
        pos = m.end()
    if (text or "")[pos:].strip():
        items.append(["text", text[pos:].strip()])
    for k in range(len(images)):
        add_image(k)
    return items


def _json_field(row: dict, key: str, default: Any) -> Any:
    value = row.get(key)
    if isinstance(value, str) and value:
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return default
    return value if value is not None else default


def row_to_pair(row: dict[str, Any], out: Path) -> dict[str, Any]:
    pid = str(row["pair_id"])
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", pid)
    return {
        "id": pid,
        "prompt_source": row.get("prompt_source", ""),
        "prompt_content": split_content(row.get("prompt_text"), row.get("prompt_images"), out / "input_images", f"{safe}_prompt"),
        "prompt_metadata": _json_field(row, "prompt_metadata", {}),
        "response_a": {"model_name": row.get("response_a_model", ""),
                       "response_content": split_content(row.get("response_a_text"), row.get("response_a_images"), out / "images", f"{safe}_a")},
        "response_b": {"model_name": row.get("response_b_model", ""),
                       "response_content": split_content(row.get("response_b_text"), row.get("response_b_images"), out / "images", f"{safe}_b")},
        "chosen": str(row.get("chosen") or "").upper(),
        "human_annotations": _json_field(row, "human_annotations", None),
    }


def fetch(out: Path, tasks: Iterable[str] = tuple(BON_TO_SCORER), dataset: str = HUB_DATASET) -> dict[str, int]:
    """Download and convert each task; a task file already present is kept (delete it to refetch)."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise BonError("bon mmrb2 fetch needs the `datasets` package: pip install '.[datasets]'") from None
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "input_images").mkdir(parents=True, exist_ok=True)
    counts = {}
    for task in tasks:
        target = out / TASK_FILES[BON_TO_SCORER[task]]
        if target.exists():
            counts[task] = len(json.loads(target.read_text(encoding="utf-8"))["pairs"])
            continue
        try:
            rows = load_dataset(dataset, task, split="test")
        except Exception as exc:  # offline, unknown repo, auth: all end the same way for the user
            raise BonError(f"cannot load {dataset} ({task}) from the hub ({type(exc).__name__}); {HOW_TO}") from None
        pairs = []
        with bar(f"mmrb2 fetch {task}", len(rows)) as progress:
            for row in rows:
                pairs.append(row_to_pair(row, out))
                progress.advance()
        write_pairs(target, pairs)
        counts[task] = len(pairs)
    return counts
