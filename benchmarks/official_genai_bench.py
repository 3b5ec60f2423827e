"""The expected numbers of tests/test_official_genai_bench.py, from t2v_metrics' own GenAI-Bench evaluation.

Runs ``genai_bench/evaluate.py`` (``main``) and ``dataset.py`` of a t2v_metrics checkout unchanged, in
an environment of their own (torch 2.5.1, numpy 1.26.4, pandas, scipy, scikit-learn, opencv, Pillow; not
bon's), on the test's hand-made ``ITEMS`` written as ``genai_image.json`` / ``genai_skills.json``. A
stand-in ``t2v_metrics`` module (written to ``--work``) answers each prompt's P(Yes) from the items, 0.0
for a failed call as the official API back-end does; the per-skill ``tag_result`` is read at the return
of ``show_performance_per_skill`` (which only prints it)::

    git clone https://github.com/linzhiqiu/t2v_metrics && git -C t2v_metrics checkout 6ecb74f
    python -m venv /tmp/t2v-eval && /tmp/t2v-eval/bin/pip install torch==2.5.1 numpy==1.26.4 pandas scipy \\
        scikit-learn 'opencv-python-headless<4.11' pillow
    /tmp/t2v-eval/bin/python benchmarks/official_genai_bench.py --checkout t2v_metrics --work /tmp/genai-eval

prints ``{"full": {...}, "small": {...}}``: per tag ``[mean, std]`` (null for NaN), the questions asked
(``--template``: the CLIP-FlanT5 default question, ``clip_t5_model.py`` of 10d549b) and the error the
official code stopped with, if any. Imports nothing from bon.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import json
import math
import shutil
import sys
from pathlib import Path

TEST = Path(__file__).resolve().parents[1] / "tests" / "test_official_genai_bench.py"
STANDIN = '''
import json, os
import torch

class constants:
    HF_CACHE_DIR = "./hf_cache"

QUESTIONS = []

class StandInModel:
    def batch_forward(self, model_output, batch_size=16, **kwargs):
        table = json.load(open(os.environ["STANDIN_PYES"]))
        template = kwargs.get("question_template", os.environ["STANDIN_TEMPLATE"])
        rows = []
        for item in model_output:
            (text,) = item["texts"]
            QUESTIONS.append(template.format(text))
            rows.append([[0.0 if table[text] is None else float(table[text])]])
        return torch.tensor(rows, dtype=torch.float64)

def get_score_model(model, device="cuda", cache_dir=None, **kwargs):
    return StandInModel()
'''


def literal(name: str):
    """A literal assigned at the test module's top level (ITEMS, SMALL), read without importing it."""
    for node in ast.parse(TEST.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return ast.literal_eval(node.value)
    raise KeyError(name)


def tags_of(basic: list[str], advanced: list[str]) -> list[str]:
    """genai_skills.json's tags of one prompt: its skills lower-cased, and basic or advanced."""
    return list(dict.fromkeys([s.strip().lower() for s in [*basic, *advanced]] + ["advanced" if advanced else "basic"]))


def write_inputs(items: list, work: Path) -> None:
    root = work / "datasets" / "GenAI-Image-1600"
    root.mkdir(parents=True)
    skills: dict[str, list[int]] = {}  # only tags with prompts: an empty one is a KeyError in the official code
    for i, it in enumerate(items):
        for tag in tags_of(it[2], it[3]):
            skills.setdefault(tag, []).append(i)
    (root / "genai_image.json").write_text(json.dumps({f"{i:05d}": {"prompt": it[1], "models": {}} for i, it in enumerate(items)}))
    (root / "genai_skills.json").write_text(json.dumps(skills))
    out = work / "outputs" / "standin-gen"
    out.mkdir(parents=True)
    for i in range(len(items)):
        (out / f"{i:05d}.jpeg").write_bytes(b"stand-in")  # evaluate.py checks the files exist; the stand-in never opens them
    (work / "pyes.json").write_text(json.dumps({it[1]: it[4] for it in items}))


def run(items: list, work: Path) -> dict:
    import os

    if work.exists():
        shutil.rmtree(work)
    write_inputs(items, work)
    os.environ["STANDIN_PYES"] = str(work / "pyes.json")
    t2v = importlib.import_module("t2v_metrics")
    t2v.QUESTIONS.clear()
    evaluate = importlib.import_module("genai_bench.evaluate")
    captured: dict = {}

    def profile(frame, event, arg):
        if event == "return" and frame.f_code.co_name == "show_performance_per_skill":
            captured.update(frame.f_locals.get("tag_result") or {})

    sys.argv = ["evaluate.py", "--root_dir", str(work / "datasets"), "--output_dir", str(work / "outputs"),
                "--gen_model", "standin-gen", "--device", "cpu", "--result_dir", str(work / "results")]
    error = None
    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # what the official code prints; stdout is the JSON
            evaluate.main()
    except KeyError as exc:  # printing a group tag the items lack; tag_result is complete by then
        error = f"KeyError: {exc}"
    finally:
        sys.setprofile(None)

    def num(x):
        return None if math.isnan(float(x)) else float(x)

    return {"per_skill": {tag: [num(v["standin-gen"]["metric"]["mean"]), num(v["standin-gen"]["metric"]["std"])]
                          for tag, v in captured.items()}, "questions": list(t2v.QUESTIONS), "error": error}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, required=True, help="a t2v_metrics checkout (commit 6ecb74f)")
    parser.add_argument("--work", type=Path, required=True, help="a scratch folder (emptied)")
    parser.add_argument("--template", default='Does this figure show "{}"? Please answer yes or no.')
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "standin" / "t2v_metrics").mkdir(parents=True, exist_ok=True)
    (args.work / "standin" / "t2v_metrics" / "__init__.py").write_text(STANDIN)
    import os

    os.environ["STANDIN_TEMPLATE"] = args.template
    sys.path[:0] = [str(args.work / "standin"), str(args.checkout.resolve())]
    items = literal("ITEMS")
    full = run(items, args.work / "full")
    small = run([it for it in items if it[0] in literal("SMALL")], args.work / "small")
    print(json.dumps({"full": full, "small": small}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
