"""The four tasks are defined once (bon/tasks.py) and every spelling of a task resolves through it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bon.errors import BonError
from bon.tasks import SCORER_NAMES, TASK_NAMES, TASKS, bon_task, parse_task, scorer_task

ROOT = Path(__file__).resolve().parents[1]


def test_both_vocabularies():
    assert TASK_NAMES == ("t2i", "edit", "interleaved", "reasoning")
    assert SCORER_NAMES == ("image", "edit", "interleaved", "reasoning")
    assert parse_task("image") is parse_task("t2i") is parse_task(" T2I ") is TASKS[0]
    assert (bon_task("image"), scorer_task("t2i"), scorer_task("reasoning")) == ("t2i", "image", "reasoning")
    assert [t.file for t in TASKS] == ["t2i.json", "edit.json", "interleaved.json", "reasoning.json"]
    assert [t.sample_file for t in TASKS] == ["sample_task1_image.json", "sample_task2_edit.json",
                                              "sample_task3_interleaved.json", "sample_task4_reasoning.json"]


def test_unknown_task_is_one_line():
    with pytest.raises(BonError) as err:
        parse_task("video")
    assert str(err.value) == "unknown MMRB2 task 'video' (expected t2i (or image), edit, interleaved or reasoning)"


# A spelled-out list of the four tasks, or a mapping between the two vocabularies.
SPELLED_OUT = re.compile(r"""["'](t2i|image)["'],\s*["']edit["'],\s*["']interleaved["'],\s*["']reasoning["']"""
                         r"""|["']t2i["']\s*:\s*["']image["']|["']image["']\s*:\s*["']t2i["']""")


def test_the_task_list_is_defined_once():
    hits = [f"{path.relative_to(ROOT)}:{n}" for folder in ("bon", "analysis", "judges", "generators", "verifiers")
            for path in sorted((ROOT / folder).rglob("*.py")) if path != ROOT / "bon" / "tasks.py"
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if SPELLED_OUT.search(line)]
    assert hits == [], "import the task list from bon/tasks.py instead"
