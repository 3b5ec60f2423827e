"""The demo's analysis outputs as recorded before the analysis moved onto ``bon.load_run`` (issue 29).

``tests/data/demo_reference/`` holds the files today's code must still write on the same small demo
(``bon demo --prompts 3 --n 4 --seed 1``, then ``bon tradeoff --bootstrap 200 --cascade text-overlap``): any difference is either
a bug fix a note names, or a bug. ``python tests/demo_reference.py DIR`` writes them again (only ever
on purpose, with the reason in the commit message).

What is compared, and what not (volatile, so left out on both sides before comparing):
- the run folder's own path, wherever a file prints it (``accuracies.csv``'s ``source``, ``report.json``'s
  ``run_dir`` and ``study.out``), is replaced by ``<run>``;
- ``seconds_per_prompt`` (``leaderboard.csv`` and ``report.json``'s leaderboards) is measured judge time;
- numbers are compared to a relative 1e-9 (summation order may change the last bits; CSVs print 6 digits).
Nothing else is left out: every row, column, key and order must match.

Recorded again once, after issues 26, 28 and 30 merged onto the Run (the first recording was of the code
before issue 29; against it the analysis on ``bon.load_run`` wrote identical files). Only these changed,
each a fix its issue names; results.csv, correlations.csv, metrics.csv, accuracies.csv and headroom.csv
stayed identical:
- leaderboard.csv: columns ``no_information`` (issue 28: a judge without information is never best) and
  ``left_out`` (issue 30: the best judge is the best one the leakage policy keeps; the verifier's twins are
  ranked after the kept judges, with the reason), so ranks and differences to the best changed;
- report.json: ``scoring`` (issue 26: the verifier's metric and its failed scores), the same leaderboards,
  the predictor table without the leakage-excluded judges (issue 30), ``study`` with ``on_failure`` and
  ``accuracies``;
- tradeoff.json: ``left_out``, and per record ``decided_by``, ``costs_more``, ``gating_reason``,
  ``calls_pending`` (issues 28, 30); ``calls_made``/``calls_cached`` of 11 records, because every judge now
  replays against the store as it was before the command (so the records do not depend on the order).

Edited in place for issue 36 (the two intended changes applied to the recorded files, nothing else touched):
- leaderboard.csv and report.json's leaderboards: ``tied_with_best`` is decided by the printed 95% interval of
  the difference to the best (it includes 0), and a judge the leakage policy leaves out gets no label; 21 rows
  went from True to False (the verifier's twins, and judges whose interval excludes 0);
- report.json's ``scoring.failed``: each row names its task (no ``?``) and says whether it counts the Best-of-N
  prompts (``best_of_n``) or the others (the preference set's); the counts are the same.

Added for issue 38, in place: tradeoff.json's 80 records of the new ``prefilter`` family (knockout among the top k
of each pointwise judge the leakage policy keeps: k = 2 and auto at N = 4, for each of the 9 judges but itself),
inserted where the code writes them (after each judge's other settings). The 129 recorded records and every other
key are byte-for-byte as recorded (the code before and after issue 38 gives identical old records on the same
demo); a fresh demo and trade-off of this code match every reference file with no difference.

Recorded again for issue 37 (will this judge help?):
- report.json gained ``prediction`` (the held-out validation of ``bon
  predict``: leave one judge out, one generator out, its summary and level), and ``predictions.csv`` (every
  held-out prediction) is compared too; every other file stayed identical.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd

REFERENCE = Path(__file__).parent / "data" / "demo_reference"
DEMO_ARGS = ["--prompts", "3", "--n", "4", "--seed", "1"]
# the cascade's cheap judge is pinned: by default `bon tradeoff` picks the cheapest judge by *measured* judge
# seconds per call, which a loaded machine reorders (the recorded run picked text-overlap)
TRADEOFF_ARGS = ["--bootstrap", "200", "--cascade", "text-overlap"]
CSV_FILES = ["results.csv", "correlations.csv", "metrics.csv", "accuracies.csv", "leaderboard.csv", "headroom.csv",
             "predictions.csv"]
JSON_FILES = ["report.json", "tradeoff.json"]
VOLATILE_COLUMNS = {"leaderboard.csv": ["seconds_per_prompt"]}
RTOL = 1e-9


def run_demo(out: Path, tradeoff_out: Path) -> None:
    """The demo study and its trade-off records (written to ``tradeoff_out`` so the demo folder stays as the demo left it)."""
    from bon.cli import main

    assert main(["demo", "--out", str(out), *DEMO_ARGS]) == 0
    assert main(["tradeoff", "--run", str(out), *TRADEOFF_ARGS, "--out", str(tradeoff_out)]) == 0


def normal_csv(path: Path, run_dir: Path) -> pd.DataFrame:
    frame = pd.read_csv(io.StringIO(path.read_text().replace(str(run_dir), "<run>")))
    return frame.drop(columns=VOLATILE_COLUMNS.get(path.name, []))


def normal_json(text: str, run_dir: Path) -> Any:
    data = json.loads(text.replace(json.dumps(str(run_dir))[1:-1], "<run>"))
    if isinstance(data, dict):
        for board in data.get("leaderboards") or []:
            board.pop("seconds_per_prompt", None)
    return data


def differences(ref: Any, new: Any, where: str = "") -> list[str]:
    """Where two JSON values differ (numbers to RTOL), as paths."""
    if isinstance(ref, dict) and isinstance(new, dict):
        if list(ref) != list(new):
            return [f"{where}: keys {list(ref)} != {list(new)}"]
        return [d for k in ref for d in differences(ref[k], new[k], f"{where}/{k}")]
    if isinstance(ref, list) and isinstance(new, list):
        if len(ref) != len(new):
            return [f"{where}: {len(ref)} items != {len(new)}"]
        return [d for i, (a, b) in enumerate(zip(ref, new)) for d in differences(a, b, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(ref, numbers) and isinstance(new, numbers) and not isinstance(ref, bool) and not isinstance(new, bool):
        if math.isclose(ref, new, rel_tol=RTOL, abs_tol=1e-12):
            return []
    elif ref == new and type(ref) is type(new):
        return []
    return [f"{where}: {ref!r} != {new!r}"]


def frame_differences(ref: pd.DataFrame, new: pd.DataFrame, name: str) -> list[str]:
    if list(ref.columns) != list(new.columns) or len(ref) != len(new):
        return [f"{name}: columns/rows {list(ref.columns)} x {len(ref)} != {list(new.columns)} x {len(new)}"]
    as_records = lambda f: json.loads(f.to_json(orient="records"))  # noqa: E731 - NaN -> null on both sides
    return [f"{name}{d}" for d in differences(as_records(ref), as_records(new))]


def compare(run_dir: Path, tradeoff_dir: Path, reference: Path = REFERENCE) -> list[str]:
    """Every difference between a fresh demo's files and the recorded ones (empty: identical)."""
    problems = []
    for name in CSV_FILES:
        problems += frame_differences(normal_csv(reference / name, Path("<run>")), normal_csv(run_dir / name, run_dir), name)
    for name in JSON_FILES:
        folder = tradeoff_dir if name == "tradeoff.json" else run_dir
        ref = normal_json(gzip.decompress((reference / f"{name}.gz").read_bytes()).decode(), Path("<run>"))
        problems += [f"{name}{d}" for d in differences(ref, normal_json((folder / name).read_text(), folder))]
    return problems


def record(run_dir: Path, tradeoff_dir: Path, reference: Path = REFERENCE) -> None:
    """Write the reference files (paths already replaced by ``<run>``)."""
    reference.mkdir(parents=True, exist_ok=True)
    for name in CSV_FILES:
        (reference / name).write_text((run_dir / name).read_text().replace(str(run_dir), "<run>"))
    for name in JSON_FILES:
        folder = tradeoff_dir if name == "tradeoff.json" else run_dir
        text = (folder / name).read_text().replace(json.dumps(str(folder))[1:-1], "<run>")
        (reference / f"{name}.gz").write_bytes(gzip.compress(text.encode(), mtime=0))


if __name__ == "__main__":
    work = Path(sys.argv[1])
    shutil.rmtree(work, ignore_errors=True)
    run_demo(work / "run", work / "tradeoff")
    record(work / "run", work / "tradeoff")
    print(f"recorded {REFERENCE}")
