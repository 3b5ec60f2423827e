"""The four MMRB2 tasks, defined once, with both vocabularies.

bon names a task the way prompts, run folders and reports do (``t2i``, ``edit``, ``interleaved``,
``reasoning``); MMRB2's official scorer calls the first one ``image``. Every place that lists the tasks,
maps one name to the other, or needs a task's file name reads it from here, so the two vocabularies
cannot drift apart and every command can accept either spelling.
"""

from __future__ import annotations

from dataclasses import dataclass

from bon.errors import BonError


@dataclass(frozen=True)
class Task:
    name: str  # bon's name: prompts, run folders, reports, the hub dataset's config
    scorer: str  # the official scorer's name (compute_accuracy.py --task)
    number: int  # the official task number (sample_task1_image.json ...)
    title: str  # for tables and figures

    @property
    def file(self) -> str:
        """The benchmark file in an MMRB2 folder (``t2i.json``), also bon's preference-set file."""
        return f"{self.name}.json"

    @property
    def sample_file(self) -> str:
        """The official sample judgment file's name (``sample_task1_image.json``)."""
        return f"sample_task{self.number}_{self.scorer}.json"


TASKS: tuple[Task, ...] = (
    Task("t2i", "image", 1, "Text-to-image"),
    Task("edit", "edit", 2, "Image editing"),
    Task("interleaved", "interleaved", 3, "Interleaved"),
    Task("reasoning", "reasoning", 4, "Reasoning"),
)
TASK_NAMES: tuple[str, ...] = tuple(t.name for t in TASKS)  # bon's vocabulary, in the official order
SCORER_NAMES: tuple[str, ...] = tuple(t.scorer for t in TASKS)  # the official scorer's vocabulary
TASK_TITLES: dict[str, str] = {t.name: t.title for t in TASKS}
_BY_NAME: dict[str, Task] = {**{t.scorer: t for t in TASKS}, **{t.name: t for t in TASKS}}
SPELLINGS = "t2i (or image), edit, interleaved or reasoning"


def parse_task(name: str | Task) -> Task:
    """The task for either spelling (``t2i`` or ``image``); anything else is a one-line :class:`BonError`."""
    if isinstance(name, Task):
        return name
    task = _BY_NAME.get(str(name).strip().lower())
    if task is None:
        raise BonError(f"unknown MMRB2 task {name!r} (expected {SPELLINGS})")
    return task


def is_task(name: str) -> bool:
    return str(name).strip().lower() in _BY_NAME


def bon_task(name: str | Task) -> str:
    """bon's name for either spelling: ``image`` -> ``t2i``."""
    return parse_task(name).name


def scorer_task(name: str | Task) -> str:
    """The official scorer's name for either spelling: ``t2i`` -> ``image``."""
    return parse_task(name).scorer
