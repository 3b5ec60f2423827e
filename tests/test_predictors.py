"""Which MMRB2 number predicts Best-of-N: per-judge predictors by hand, paired bootstrap, twin flags;
and the worker store that keeps judgment writes in the driver."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bon.mmrb2 import Pair
from analysis.predictors import correlations, flag_records, grader_family, judge_records, shared_grader
from analysis.statistics import pair_outcomes


def _pair(pid: str, chosen: str, model_a: str = "m", model_b: str = "m") -> Pair:
    return Pair(id=pid, prompt_source="s", prompt_content=None, prompt_metadata={}, model_a=model_a, model_b=model_b,
                response_a=[], response_b=[], chosen=chosen)


def _answer(fwd: str, rev: str) -> dict:
    return {"forward": [{"judgement": fwd}], "reverse": [{"judgement": rev}]}


def test_predictors_by_hand():
    pairs = [_pair("p1", "A"), _pair("p2", "B"), _pair("p3", "A", "m", "n"), _pair("p4", "B", "n", "m")]
    judgments = {"j": {"p1": _answer("A", "B"),   # right, right (consistent)
                       "p2": _answer("A", "A"),   # wrong, right (inconsistent: always "A")
                       "p3": _answer("B", ""),    # wrong, missing
                       "p4": _answer("B", "tie")}}  # right, non-A/B (counted, wrong)
    tp = pair_outcomes("t2i", pairs, judgments)
    assert list(tp.same_model) == [True, True, False, False]
    [row] = judge_records({"t2i": tp})
    assert row["overall"] == pytest.approx(100 * 4 / 7)  # 4 right of 7 counted answers
    assert row["same_model"] == pytest.approx(75.0) and row["different_model"] == pytest.approx(100 / 3)
    assert row["position_consistency"] == pytest.approx(50.0)  # p1 yes, p2 no; p3, p4 lack an A/B pair
    assert row["tie_missing"] == pytest.approx(25.0)  # 2 of 8 answers
    assert row["same_model_pairs"] == 2 and row["pairs"] == 4


def _study(rng, judges=15, pairs=400, prompts=30, same_signal=True):
    """Judges whose same-model accuracy drives the pick score (or not)."""
    chosen = rng.choice(["A", "B"], pairs)
    same = np.arange(pairs) % 2 == 0
    skill_same, skill_diff = rng.uniform(0.5, 0.95, judges), rng.uniform(0.5, 0.95, judges)
    judgments = {}
    plist = [_pair(f"p{q}", chosen[q], "m", "m" if same[q] else "n") for q in range(pairs)]
    for j in range(judges):
        entries = {}
        for q in range(pairs):
            p = skill_same[j] if same[q] else skill_diff[j]
            right = [rng.random() < p for _ in range(2)]
            fwd = chosen[q] if right[0] else ("B" if chosen[q] == "A" else "A")
            rev_choice = chosen[q] if right[1] else ("B" if chosen[q] == "A" else "A")
            entries[f"p{q}"] = _answer(fwd, {"A": "B", "B": "A"}[rev_choice])
        judgments[f"j{j}"] = entries
    driver = skill_same if same_signal else skill_diff
    rows = [{"task": "t2i", "generator": "g", "judge": f"j{j}", "strategy": "k", "prompt_id": f"x{k}",
             "pick_score": 0.3 + 0.6 * driver[j] + rng.normal(0, 0.02), "random_score": 0.5, "oracle_score": 1.0}
            for j in range(judges) for k in range(prompts)]
    return {"t2i": pair_outcomes("t2i", plist, judgments)}, pd.DataFrame(rows)


def test_paired_bootstrap_tells_which_predictor_drives_best_of_n():
    tasks, prompts = _study(np.random.default_rng(4), same_signal=True)
    table, paired = correlations(tasks, prompts, bootstrap=300, seed=1)
    r = {row["predictor"]: row["r"] for row in table}
    assert r["same_model"] > 0.8 and r["same_model"] > r["different_model"]
    for row in table:
        if row["r"] is not None:
            assert row["r_lo"] <= row["r"] <= row["r_hi"]
    assert paired[0]["difference"] > 0 and paired[0]["diff_lo"] > 0
    assert paired[0]["verdict"] == "same-model accuracy predicts better"
    tasks, prompts = _study(np.random.default_rng(5), same_signal=False)
    _, paired = correlations(tasks, prompts, bootstrap=300, seed=1)
    assert paired[0]["difference"] < 0 and paired[0]["verdict"] != "same-model accuracy predicts better"


class _Plugin:
    def __init__(self, name, family=None, model=None):
        self.name, self.grader_family, self.model = name, family, model

    def identity(self):
        return {"model": self.model} if self.model else {}


def test_judges_sharing_the_verifiers_grader_are_flagged_with_their_residual():
    verifier = _Plugin("v", model="gpt-4.1")
    judges = [_Plugin("twin", model="gpt-4.1"), _Plugin("other", model="qwen"), _Plugin("code", family="x")]
    assert grader_family(verifier) == "gpt-4.1" and grader_family(_Plugin("c", family="x", model="m")) == "x"

    class Gedit(_Plugin):  # a verifier that names its grader in a nested identity, as GEdit-Bench's does
        def identity(self):
            return {"name": "gedit", "grader": {"backend": "openai", "model": "openai/GPT-4.1"}}

    assert shared_grader(judges, Gedit("gedit")) == {"twin": "gpt-4.1"}
    flags = shared_grader(judges, verifier)
    assert flags == {"twin": "gpt-4.1"}
    accuracy = [{"judge": j, "task": "t2i", "overall": a} for j, a in
                [("twin", 70.0), ("a", 50.0), ("b", 60.0), ("c", 80.0)]]
    bon = [{"task": "t2i", "generator": "g", "judge": j, "gain": g} for j, g in
           [("twin", 0.5), ("a", 0.1), ("b", 0.2), ("c", 0.4)]]
    [row] = flag_records(flags, accuracy, bon)
    assert row["expected_gain"] == pytest.approx(0.3) and row["residual"] == pytest.approx(0.2)


def test_same_model_flag_comes_from_the_real_mmrb2_files(tmp_path):
    import json
    import os
    from pathlib import Path

    from bon import mmrb2
    from analysis.predictors import benchmark_task_pairs

    root = os.environ.get("BON_MMRB2_DIR")
    if not root or not Path(root).is_dir():
        pytest.skip("BON_MMRB2_DIR not set")
    pairs = mmrb2.load_pairs(mmrb2.find_task_file(Path(root), "t2i"))
    always_a = tmp_path / "a.json"  # a judge that always says "A": 50% whatever the subset, never consistent
    always_a.write_text(json.dumps({p.id: _answer("A", "A") for p in pairs}))
    [row] = judge_records(benchmark_task_pairs(Path(root), {"always-a": {"t2i": always_a}}))
    assert row["same_model_pairs"] == sum(p.model_a == p.model_b for p in pairs) and 0 < row["same_model_pairs"] < len(pairs)
    assert row["overall"] == pytest.approx(50.0) and row["position_consistency"] == 0.0 and row["tie_missing"] == 0.0
