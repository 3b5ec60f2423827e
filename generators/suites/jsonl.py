"""``prompts``: a user's own prompts, one JSON object a line, in either of two forms.

bon's own (what a run folder's ``prompts.jsonl`` holds)::

    {"id": "p1", "task": "edit", "content": [["text", "make the sky pink"], ["image", "imgs/p1.png"]],
     "metadata": {"category": "colour"}}

or a plain one, for prompts typed by hand::

    {"id": "p2", "task": "t2i", "prompt": "a sign that says \\"OPEN\\"", "category": "text"}
    {"id": "p3", "task": "edit", "prompt": "remove the cat", "images": ["imgs/cat.png"]}
    {"id": "p4", "task": "reasoning", "prompt": "How many apples?", "images": ["imgs/apples.png"], "answer": "7"}

In the plain form ``prompt`` (or ``text``) comes first, then ``images``; every other key goes into the
metadata (``answer``, ``options``, ``type``, ``category``, ``expected_structure`` ... are read by the
verifiers). Image paths are relative to the file; images are read when the run folder's copy is
written. ``task`` may be left out of lines when the ``task`` option gives it. Prompts whose metadata
says ``split: preference`` form the study's held-out preference set.

Options: ``path`` (required), ``task`` (default task), ``categories``, ``limit``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bon.content import TASKS, Content, Prompt, TextItem, read_jsonl
from bon.errors import BonError
from generators.suites import file_image, select

NAME = "prompts"
PLAIN_TEXT = ("prompt", "text")


def build_suite(path: str | None = None, task: str | None = None, categories: Any = None, limit: int | None = None) -> list[Prompt]:
    if not path:
        raise BonError(f"{NAME}: option 'path' (the JSONL file) is required")
    file = Path(path).expanduser()
    if not file.is_file():
        raise BonError(f"{file}: suite file not found")
    if task is not None and task not in TASKS:
        raise BonError(f"{NAME}: task must be one of {', '.join(TASKS)}, got {task!r}")
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for n, rec in read_jsonl(file, torn_tail_ok=False):
        where = f"{file}:{n}"
        p = parse_line(rec, file.parent, task, where)
        if p.id in seen:
            raise BonError(f"{where}: id {p.id} appears twice")
        seen.add(p.id)
        prompts.append(p)
    if not prompts:
        raise BonError(f"{file}: the suite holds no prompts")
    return select(prompts, categories, limit, NAME)


def parse_line(rec: dict[str, Any], base: Path, default_task: str | None, where: str) -> Prompt:
    if "id" not in rec:
        raise BonError(f"{where}: prompt lacks id")
    task = rec.get("task", default_task)
    if task is None:
        raise BonError(f"{where}: prompt lacks task (or give the suite option task:)")
    if "content" in rec:
        content = Content.from_json(rec["content"], base, f"{where}: content",
                                    image=lambda rel, origin: file_image(rel, base, origin))
        meta = dict(rec.get("metadata") or {})
    else:
        text = next((rec[k] for k in PLAIN_TEXT if k in rec), None)
        if not isinstance(text, str) or not text.strip():
            raise BonError(f"{where}: expected 'content' or a 'prompt' string")
        images = rec.get("images") or []
        if isinstance(images, str):
            images = [images]
        items: list[Any] = [TextItem(text)] + [file_image(str(v), base, f"{where} image {k}") for k, v in enumerate(images)]
        content = Content(items)
        meta = {k: v for k, v in rec.items() if k not in ("id", "task", *PLAIN_TEXT, "images", "metadata")}
        meta.update(rec.get("metadata") or {})
    try:
        return Prompt(str(rec["id"]), str(task), content, meta)
    except BonError as exc:
        raise BonError(f"{where}: {exc}") from None
