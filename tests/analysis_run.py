"""A small, hand-made run folder for the analysis tests (no study has to run).

Judges have a known quality q: on every preference pair a judge answers correctly with probability q
(both orders), and for every prompt it picks the verifier's best candidate with probability q, else a
uniformly random one. So accuracy and Best-of-N score are related through q, and a set of judges with
one q is uninformative by construction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import yaml
from PIL import Image

from bon import mmrb2
from bon.tasks import parse_task



def make_run(root: Path, qualities: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95), prompts: int = 6, n: int = 4,
             tasks: Sequence[str] = ("t2i", "edit"), generators: Sequence[str] = ("g1", "g2"), pairs: int = 24,
             seed: int = 0, images: bool = True, cost_usd: float = 0.0, sources: Sequence[str] = ("alpha", "beta")) -> Path:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    judges = [f"judge-{k}" for k in range(len(qualities))]
    prompt_recs, score_recs, pick_recs = [], [], []
    for task in tasks:
        for p in range(prompts):
            pid = f"{task}-{p:04d}"
            prompt_recs.append({"id": pid, "task": task, "content": [["text", f"Draw prompt {p} of {task}."]],
                                "metadata": {}})
    for gen_i, gen in enumerate(generators):
        folder = root / "candidates" / gen
        (folder / "images").mkdir(parents=True, exist_ok=True)
        cands = []
        for rec in prompt_recs:
            pid = rec["id"]
            scores = np.round(rng.uniform(0.1 + 0.2 * gen_i, 1.0, n), 2)
            for k in range(n):
                content = [["text", f"candidate {k}"]]
                if images:
                    name = f"images/{pid}_{k}.png"
                    colour = tuple(int(c) for c in rng.integers(0, 255, 3))
                    Image.new("RGB", (24, 16), colour).save(folder / name)
                    content = [["image", name]]
                cands.append({"prompt_id": pid, "index": k, "generator": gen, "seed": 0, "content": content,
                              "provenance": {}})
                score_recs.append({"generator": gen, "prompt_id": pid, "index": k, "score": float(scores[k]),
                                   "missing": None, "details": {}})
            best = int(np.argmax(scores))
            for judge, q in zip(judges, qualities):
                pick = best if rng.random() < q else int(rng.integers(0, n))
                pick_recs.append({"judge": judge, "strategy": "knockout", "task": rec["task"], "prompt_id": pid,
                                  "generator": gen, "index": pick, "calls": 2 * (n - 1), "missing": 0, "matches": []})
        (folder / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    _lines(root / "prompts.jsonl", prompt_recs)
    _lines(root / "scores.jsonl", score_recs)
    _lines(root / "picks.jsonl", pick_recs)
    bench = root / "mmrb2"
    for task in tasks:
        pair_list = []
        for i in range(pairs):
            pair_list.append({"id": f"{task}-pair-{i}", "prompt_source": sources[i % len(sources)],
                              "prompt_content": [["text", "p"]], "prompt_metadata": {},
                              "response_a": {"model_name": "m1", "response_content": [["text", "a"]]},
                              "response_b": {"model_name": "m2", "response_content": [["text", "b"]]},
                              "chosen": "A" if rng.random() < 0.5 else "B", "human_annotations": None})
        mmrb2.write_pairs(bench / parse_task(task).file, pair_list)
        for judge, q in zip(judges, qualities):
            data = {}
            for pr in pair_list:
                right = pr["chosen"]
                wrong = mmrb2.FLIP[right]
                fwd = right if rng.random() < q else wrong
                rev_truth = mmrb2.FLIP[right]  # in the reverse order the chosen response is shown as the other letter
                rev = rev_truth if rng.random() < q else mmrb2.FLIP[rev_truth]
                data[pr["id"]] = {"forward": [{"judgement": fwd, "evaluator": judge}],
                                  "reverse": [{"judgement": rev, "evaluator": judge}]}
            mmrb2.write_judgments(bench / "judgments" / judge / parse_task(task).file, data)
    calls = len(tasks) * len(generators) * prompts * 2 * (n - 1)
    stats = {"judges": {j: {"calls_made": calls, "calls_cached": 0, "cost_usd": cost_usd * calls,
                            "judge_seconds": 0.01 * (k + 1) * calls,
                            "selection": {"calls_made": calls, "cost_usd": cost_usd * calls,
                                          "judge_seconds": 0.01 * (k + 1) * calls}}
                        for k, j in enumerate(judges)}}
    (root / "stats.json").write_text(json.dumps(stats))
    (root / "config.yaml").write_text(yaml.safe_dump({"study": {"seed": seed, "n": n, "tasks": list(tasks)},
                                                      "versions": {"bon": "test"}}))
    return root


def _lines(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
