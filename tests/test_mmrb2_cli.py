"""`bon mmrb2 accuracy` / `diagnose`: judgment files are matched to tasks by their pair ids (any order),
either task spelling works, and nothing degenerate is scored or written silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bon.cli import main
from bon.tasks import TASKS

RIGHT = {"forward": [{"judgement": "A", "evaluator": "j"}], "reverse": [{"judgement": "B", "evaluator": "j"}]}
WRONG = {"forward": [{"judgement": "B", "evaluator": "j"}], "reverse": [{"judgement": "A", "evaluator": "j"}]}
EMPTY = {"forward": [{"judgement": "", "evaluator": "j"}], "reverse": [{"judgement": "", "evaluator": "j"}]}


def pair(pid: str) -> dict:
    return {"id": pid, "prompt_source": "s", "prompt_metadata": {}, "chosen": "A", "human_annotations": [6, 6, 5],
            "response_a": {"model_name": "m1", "response_content": [["image", "a.png"]]},
            "response_b": {"model_name": "m2", "response_content": [["image", "b.png"]]}}


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    """Four tasks, ten pairs each, ids named after the task."""
    folder = tmp_path / "bench"
    folder.mkdir()
    for task in TASKS:
        (folder / task.file).write_text(json.dumps({"pairs": [pair(f"{task.name}-{i}") for i in range(10)]}))
    return folder


def predictions(folder: Path, task: str, right: int, name: str | None = None, answer: dict = WRONG) -> Path:
    """A judgment file for every pair of ``task``: the first ``right`` pairs judged right, the rest ``answer``."""
    path = folder / (name or f"{task}.json")
    path.write_text(json.dumps({f"{task}-{i}": RIGHT if i < right else answer for i in range(10)}))
    return path


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err.strip()


def strict(path: Path):
    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")
    return json.loads(path.read_text(), parse_constant=refuse)


def test_files_in_any_order_are_scored_against_their_own_tasks(tmp_path, bench, capsys):
    files = {t: predictions(tmp_path, t, right) for t, right in
             (("t2i", 8), ("edit", 6), ("interleaved", 5), ("reasoning", 3))}
    shuffled = [files["edit"], files["t2i"], files["interleaved"], files["reasoning"]]  # the order of issue 12
    out_json = tmp_path / "acc.json"
    rc, out, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "all", "--predictions",
                                *map(str, shuffled), "--json", str(out_json)])
    assert rc == 0, err
    data = strict(out_json)
    assert {t: data["tasks"][t]["accuracy"] for t in data["tasks"]} == {
        "image": 80.0, "edit": 60.0, "interleaved": 50.0, "reasoning": 30.0}
    assert data["overall"]["judgements"] == 80 and data["overall"]["accuracy"] == pytest.approx(55.0)
    assert "unknown ids" not in out
    # without --task the files' own tasks are scored; TASK=FILE names one explicitly, in either spelling
    rc, out, _ = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--predictions", str(files["reasoning"]),
                              f"image={files['t2i']}"])
    assert rc == 0 and "80.00%" in out and "30.00%" in out


@pytest.mark.parametrize("spelling", ["t2i", "image", "IMAGE"])
def test_either_task_spelling(tmp_path, bench, capsys, spelling):
    rc, out, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", spelling,
                                "--predictions", str(predictions(tmp_path, "t2i", 7))])
    assert rc == 0 and "70.00%" in out, err


def test_file_matching_no_task_is_one_line(tmp_path, bench, capsys):
    stray = tmp_path / "stray.json"
    stray.write_text(json.dumps({"elsewhere-1": RIGHT}))
    rc, _, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "image", "--predictions", str(stray)])
    assert rc == 2 and "\n" not in err and "stray.json" in err and "none of its pair ids" in err


def test_two_files_for_one_task_is_one_line(tmp_path, bench, capsys):
    one, two = predictions(tmp_path, "edit", 5, "a.json"), predictions(tmp_path, "edit", 9, "b.json")
    others = [predictions(tmp_path, t, 5) for t in ("t2i", "interleaved")]
    rc, _, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "all",
                              "--predictions", str(one), str(two), *map(str, others)])
    assert rc == 2 and "\n" not in err and "b.json" in err and "edit" in err


def test_task_option_must_match_the_files(tmp_path, bench, capsys):
    rc, _, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "image",
                              "--predictions", str(predictions(tmp_path, "edit", 5))])
    assert rc == 2 and "\n" not in err and "belong to task edit" in err
    rc, _, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "all",
                              "--predictions", str(predictions(tmp_path, "t2i", 5))])
    assert rc == 2 and "no judgment file for edit, interleaved, reasoning" in err
    rc, _, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "video", "--predictions", "x.json"])
    assert rc == 2 and "unknown MMRB2 task 'video'" in err


def test_no_judged_pair_is_an_error_and_writes_nothing(tmp_path, bench, capsys):
    silent = predictions(tmp_path, "t2i", 0, answer=EMPTY)  # ids match, but every answer is empty
    out_json = tmp_path / "acc.json"
    rc, out, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "image",
                                "--predictions", str(silent), "--json", str(out_json)])
    assert rc == 2 and "\n" not in err and "no judged pair" in err
    assert not out_json.exists() and "nan" not in out


def test_missing_numbers_are_null_in_json(tmp_path, bench, capsys):
    silent = predictions(tmp_path, "t2i", 0, answer=EMPTY)
    out_json = tmp_path / "acc.json"
    rc, out, err = run(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--predictions", str(silent),
                                str(predictions(tmp_path, "edit", 4)), "--json", str(out_json)])
    assert rc == 0, err
    data = strict(out_json)
    assert data["tasks"]["image"]["accuracy"] is None and data["tasks"]["image"]["judgements"] == 0
    assert data["tasks"]["edit"]["accuracy"] == 40.0 and data["overall"]["accuracy"] == 40.0
    assert "nan" not in out.lower()


def test_diagnose_replaces_report_and_shares_the_task_assignment(tmp_path, bench, capsys):
    files = [predictions(tmp_path, "edit", 6), predictions(tmp_path, "t2i", 8)]
    out_json = tmp_path / "d.json"
    rc, _, err = run(capsys, ["mmrb2", "diagnose", "--bench-dir", str(bench), "--predictions", *map(str, files),
                              "--json", str(out_json)])
    assert rc == 0, err
    data = strict(out_json)
    assert data["tasks"]["image"]["judges"]["j"]["accuracy"]["correct"] == 16
    assert data["tasks"]["edit"]["judges"]["j"]["accuracy"]["correct"] == 12
    assert main(["mmrb2", "report", "--bench-dir", str(bench)]) == 2  # renamed: no such command any more
