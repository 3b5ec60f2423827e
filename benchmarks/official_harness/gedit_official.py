"""Run GEdit-Bench's official evaluation on tests/official_gedit_cases.py and write the expected values.

Not part of bon and not run by the tests: it runs the official code itself, in its own environment::

    git clone https://github.com/stepfun-ai/Step1X-Edit && git -C Step1X-Edit checkout 570eba6ebda0c45c013983a483afbf2fd12bfcbc
    python -m venv venv && venv/bin/pip install numpy pandas pillow regex requests
    venv/bin/python benchmarks/official_harness/gedit_official.py Step1X-Edit/GEdit-Bench tests/official_gedit_expected.json

Replaced: ``requests.post`` in VIEScore's OpenAI client (it answers each call with the case's canned
reply, or with an API error for None, which the client turns into an empty text), ``random.randint`` in
VIEScore's reader (the guess is fixed at the cases' GUESS), ``time.sleep`` in ``test_gedit_score`` (its
waits between evaluations), ``megfile`` (local files) and ``datasets`` (not used). Everything else is the
official code: ``test_gedit_score.process_single_item`` per item (images, resize, VIEScore's requests, reader and re-ask loop, its own ``max_retries`` of new evaluations)
and ``calculate_statistics.analyze_scores`` per language (its GROUPS set to the categories the cases use).
Items are keyed ``<key>_<language>``; an item ``process_single_item`` gives up on is ``"skipped"``.
"""

from __future__ import annotations

import base64
import hashlib
import csv
import io
import json
import math
import os
import sys
import tempfile
import types
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "tests"))
from official_gedit_cases import CATEGORIES, GUESS, RESTART_CATEGORIES, example_items, items, restart_items  # noqa: E402

STATE: dict = {"case": None, "calls": {}, "requests": []}
FIELDS = ["source_image", "edited_image", "instruction", "sementics_score", "quality_score", "intersection_exist", "instruction_language"]


class Response:
    def __init__(self, payload: dict):
        self.payload = payload

    def json(self) -> dict:
        return self.payload


def fake_post(url, json=None, headers=None):  # noqa: A002 - the name requests uses
    content = json["messages"][0]["content"]
    question = "sc" if sum(p["type"] == "image_url" for p in content) == 2 else "pq"
    case = STATE["case"]
    call = (item_id(case), question)
    n = STATE["calls"][call] = STATE["calls"].get(call, 0) + 1
    replies = case["replies"][question]
    reply = replies[min(n, len(replies)) - 1]
    sizes = [Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))).size
             for p in content if p["type"] == "image_url"]
    STATE["requests"].append({"key": case["key"], "question": question, "attempt": n, "body_keys": sorted(json),
                              "max_tokens": json.get("max_tokens"), "kinds": [p["type"] for p in content], "image_sizes": sizes,
                              "image_mime": [p["image_url"]["url"].split(";", 1)[0] for p in content if p["type"] == "image_url"],
                              "image_sha256": [hashlib.sha256(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])).hexdigest()
                                               for p in content if p["type"] == "image_url"]})
    if reply is None:
        return Response({"error": {"code": "server_error", "message": "canned failure"}})
    return Response({"choices": [{"message": {"content": reply}}]})


def item_id(case: dict) -> str:
    return f"{case['key']}_{case['instruction_language']}"


def stub_modules() -> None:
    megfile = types.ModuleType("megfile")
    megfile.smart_open = lambda path, mode="r", **kw: open(path, mode, **kw)
    megfile.smart_exists = os.path.exists
    sys.modules["megfile"] = megfile
    datasets = types.ModuleType("datasets")
    datasets.load_dataset = datasets.load_from_disk = lambda *a, **k: None
    sys.modules["datasets"] = datasets


def run_cases(module, vie_score, cases: list[dict], work: Path) -> dict:
    """process_single_item per case; the rows written to per-group CSVs as test_gedit_score.py does."""
    save_path = work / "results" / "model"
    module.save_path = str(save_path)
    rows: dict[str, list[dict]] = {}
    per_item = {}
    for case in cases:
        group, lang, key = case["task_type"], case["instruction_language"], case["key"]
        folder = save_path / "fullset" / group / lang
        folder.mkdir(parents=True, exist_ok=True)
        w, h = case["size"]
        Image.new("RGB", (w, h), (200, 40, 40)).save(folder / f"{key}_SRCIMG.png")
        Image.new("RGB", (w + 13, h + 5), (40, 200, 40)).save(folder / f"{key}.png")  # resized by the official code
        STATE["case"] = case
        module.group_name = group
        row = module.process_single_item(dict(case), vie_score)  # its own max_retries
        calls = {q: STATE["calls"].get((item_id(case), q), 0) for q in ("sc", "pq")}
        if row is None:  # given up after max_retries evaluations: test_gedit_score.py writes no row
            per_item[item_id(case)] = {"skipped": True, "calls": calls}
            continue
        rows.setdefault(group, []).append(row)
        sc, pq = row["sementics_score"], row["quality_score"]
        per_item[item_id(case)] = {"sc": sc, "pq": pq, "overall": math.sqrt(sc * pq), "calls": calls}
    out_dir = save_path / "gpt4o" / "eval_results_new"
    out_dir.mkdir(parents=True, exist_ok=True)
    for group, group_rows in rows.items():
        with open(out_dir / f"model_{group}_gpt_score.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(group_rows)
    return {"items": per_item, "out_dir": out_dir, "groups": sorted(rows)}


def statistics(stats, out_dir: Path, groups: list[str], languages: list[str]) -> dict:
    stats.GROUPS = groups
    result = {}
    for lang in languages:
        sem, qual, over, sem_i, qual_i, over_i = stats.analyze_scores(str(out_dir), ["model"], language=lang)
        def table(s, q, o, tail):
            return {"sc": float(s["model"][f"avg_semantics"]), "pq": float(q["model"]["avg_quality"]),
                    "overall": float(o["model"]["avg_overall"]),
                    "categories": {g: {"sc": float(s["model"][g]), "pq": float(q["model"][g]), "overall": float(o["model"][g])}
                                   for g in groups}}
        result[lang] = {**table(sem, qual, over, ""), "intersection": table(sem_i, qual_i, over_i, "")}
    return result


def main(gedit: Path, out: Path) -> None:
    stub_modules()
    os.chdir(gedit)
    sys.path.insert(0, str(gedit))
    import requests

    requests.post = fake_post
    key_file = Path(tempfile.mkdtemp()) / "key.env"
    key_file.write_text("sk-canned\n")
    import test_gedit_score as module
    import calculate_statistics as stats
    import utils as viescore_utils  # viescore/ is on the path once VIEScore is imported

    viescore_utils.random.randint = lambda a, b: GUESS
    module.time.sleep = lambda seconds: None  # its waits between evaluations (2, 4, 6... s)
    vie_score = module.VIEScore(backbone="gpt4o", task="tie", key_path=str(key_file))
    expected: dict = {"repository": "stepfun-ai/Step1X-Edit", "commit": "570eba6ebda0c45c013983a483afbf2fd12bfcbc", "guess": GUESS}
    sets = (("main", items(), CATEGORIES), ("example", example_items(), CATEGORIES),
            ("restarts", restart_items(), RESTART_CATEGORIES))
    for name, cases, categories in sets:
        work = Path(tempfile.mkdtemp(prefix=f"gedit-{name}-"))
        run = run_cases(module, vie_score, cases, work)
        groups = [c for c in categories if c in run["groups"]]
        languages = sorted({c["instruction_language"] for c in cases})
        expected[name] = {"items": run["items"], "languages": statistics(stats, run["out_dir"], groups, languages)}
    first = [r for r in STATE["requests"] if r["key"] == "plain-json"]
    expected["max_retries"] = module.process_single_item.__defaults__[0]
    expected["requests"] = {r["question"]: r for r in first}
    out.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
