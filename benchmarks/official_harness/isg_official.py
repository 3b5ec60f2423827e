"""Run ISG-Bench's official evaluation on tests/official_isg_cases.py and write the expected values.

Not part of bon and not run by the tests: it runs the official code itself, in its own environment::

    git clone https://github.com/Dongping-Chen/ISG && git -C ISG checkout de504cdda1cab7bd874c252f670eb1833290db5a
    python -m venv venv && venv/bin/pip install numpy pillow tqdm pyyaml
    venv/bin/python benchmarks/official_harness/isg_official.py ISG tests/official_isg_expected.json

The official API client (``openai.OpenAI``) is replaced by a stand-in that answers each request with the
case's canned reply (None: the call raises, as a failed request does); everything else is the official
code: ``ISG-eval.py``'s ``main()`` (structure, block, image, holistic per item) and
``calculate_performance.analyze_data`` (the per-group numbers), per item and over all items; the same for
``fresh_cases`` (a second set, under ``"fresh"``).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import types
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "tests"))
from official_isg_cases import cases, fresh_cases  # noqa: E402

TOKEN = re.compile(r"\((\S+) (block|image)/(\d+)\)")
REPLIES: dict[str, dict] = {}
SCORE_REQUIREMENT: list[str] = []
REQUESTS: list[dict] = []  # what the official client sent for the example item


class _Completions:
    def create(self, messages, **kwargs):
        parts = messages[0]["content"]
        texts = " ".join(p.get("text", "") for p in parts if p.get("type") == "text")
        # an empty block text is "replaced" between every character of the question: undo it to read the token
        m = TOKEN.search(texts) or TOKEN.search(texts.replace(" `Text` ", ""))
        if m:
            cid, kind, k = m.group(1), m.group(2), m.group(3)
            if kind == "block" and SCORE_REQUIREMENT[0] not in texts:
                reply = json.dumps({"Judge": "Yes", "Reason": "the yes/no requirement, never counted"})
            else:
                reply = REPLIES[cid][f"{kind}/{k}"]
        else:
            cid = re.search(r"\[(\S+)\]", texts).group(1)
            reply = REPLIES[cid]["holistic"]
        if cid == "ex-a" and (not m or SCORE_REQUIREMENT[0] in texts or m.group(2) == "image"):
            question = f"{m.group(2)}/{m.group(3)}" if m else "holistic"
            REQUESTS.append({"question": question, "body_keys": sorted(["messages", *(k for k in kwargs if k != "extra_headers")]),
                             "temperature": kwargs.get("temperature"), "response_format": kwargs.get("response_format"),
                             "kinds": [p["type"] for p in parts],
                             "details": [p["image_url"].get("detail") for p in parts if p["type"] == "image_url"]})
        if reply is None:
            raise ConnectionError("the canned call fails")
        message = types.SimpleNamespace(content=reply)
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


class FakeOpenAI:
    def __init__(self, **_):
        self.chat = types.SimpleNamespace(completions=_Completions())


def write_images(root: Path, items: list[dict]) -> None:
    for item in items:
        for field in ("Query", "Golden", "output"):
            for part in item[field]:
                if part["type"] == "image":
                    path = root / part["content"]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    Image.new("RGB", (16, 12), (len(part["content"]) * 9 % 256, 90, 160)).save(path)
                    part["content"] = str(path)


def main(checkout: Path, out: Path) -> None:
    all_cases = cases() + fresh_cases()
    items = [c["item"] for c in all_cases]
    for c in all_cases:
        REPLIES[c["item"]["id"]] = c["replies"]
    work = Path(tempfile.mkdtemp(prefix="isg-official-"))
    write_images(work, items)
    gt = [{k: v for k, v in it.items() if k != "output"} for it in items]
    (work / "gt.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gt))
    (work / "answers.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    sys.modules["openai"] = types.SimpleNamespace(OpenAI=FakeOpenAI)
    os.chdir(checkout)
    config = (checkout / "ISG_eval" / "config.yaml").read_text()
    config = re.sub(r"max_retries: \d+", "max_retries: 1", config)  # a failed call is final at once
    (checkout / "ISG_eval" / "config.yaml").write_text(config)
    sys.path.insert(0, str(checkout))
    import importlib.util

    spec = importlib.util.spec_from_file_location("isg_eval_main", checkout / "ISG-eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    SCORE_REQUIREMENT.append(module.judge_prompt["Requirement"]["Score"])
    sys.argv = ["ISG-eval.py", "--input_file", str(work / "answers.jsonl"), "--GT_file", str(work / "gt.jsonl"),
                "--output_file", str(work / "judged.jsonl"), "--root", str(work), "--end", str(len(items))]
    module.main()
    judged = {json.loads(line)["id"]: json.loads(line) for line in (work / "judged.jsonl").read_text().splitlines()}
    import calculate_performance as perf

    official_groups = dict(perf.Sum_category)

    def numbers(records: list[dict], grouping: dict) -> dict:
        perf.Sum_category = grouping
        stats = perf.analyze_data(records)
        out = {}
        for group, s in stats.items():
            if not s["total"]:
                continue
            out[group] = {"structure": s["structure"] / s["total"],  # print_statistics' formulas
                          "block": sum(s["block"]) / len(s["block"]) if s["block"] else 0,
                          "image": sum(s["image"]) / len(s["image"]) if s["image"] else 0,
                          "holistic": sum(s["holistic"]) / len(s["holistic"]) if s["holistic"] else 0,
                          "items": s["total"], "block_counted": len(s["block"])}
        return out

    per_item = {}
    for iid, rec in judged.items():
        rec["Category"] = next(g["Category"] for g in gt if g["id"] == iid)
        one = numbers([rec], {"item": [rec["Category"]]})["item"]
        per_item[iid] = {"structure": one["structure"], "block": one["block"] if one["block_counted"] else None,
                         "image": one["image"], "holistic": one["holistic"], "item_error": "error" in rec.get("result", {})}
    def summary(ids: list[str]) -> dict:
        records = [judged[i] for i in ids]
        categories = sorted({r["Category"] for r in records})
        return {"items": {i: per_item[i] for i in ids}, "groups": numbers(records, official_groups),
                "all": numbers(records, {"all": categories})["all"]}

    fresh_ids = [c["item"]["id"] for c in fresh_cases()]
    expected = {"repository": "Dongping-Chen/ISG", "commit": "de504cdda1cab7bd874c252f670eb1833290db5a",
                **summary([c["item"]["id"] for c in cases()]), "fresh": summary(fresh_ids),
                "requests": {r["question"]: r for r in REQUESTS}}
    out.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}: {len(per_item)} items")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
