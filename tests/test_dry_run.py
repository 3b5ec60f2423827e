"""`bon run CONFIG --dry-run` (issue 36): it refuses what the run would refuse, all of it at once; --json
writes the plan; --shard plans that shard's share; the price comes from the study's own requests (a cost
model per judge and graded verifier, every assumption printed); --calibrate scales it by a pilot run.
Each test here failed on the main branch before this change (the dry run passed all of these configs,
ignored --json and --shard, and priced every call at 3,000 / 800 tokens)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from bon import costs
from bon.cli import main
from bon.config import load_config, parse_config
from bon.plan import calibrate, plan_study

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from openai_server import OpenAIServer  # noqa: E402


def tiny(tmp_path: Path, **replace) -> Path:
    raw = {"out": str(tmp_path / "run"), "n": 3, "tasks": ["t2i"], "suite": {"name": "synthetic", "per_task": 4},
           "preference": {"prompts_per_task": 0}, "generators": [{"name": "synthetic", "label": "g"}],
           "verifier": "synthetic", "judges": ["random"], **replace}
    raw = {k: v for k, v in raw.items() if v is not None}
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    return tmp_path / "c.yaml"


def dry(argv: list[str], capsys) -> tuple[int, str, str]:
    rc = main(["run", *argv, "--dry-run"])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_a_missing_extra_stops_the_dry_run_naming_it(capsys, monkeypatch):
    """EMMA's official matching needs latex2sympy2 and word2number (extra emma, in [paper])."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setitem(sys.modules, "latex2sympy2", None)  # as if not installed
    rc, out, err = dry(["configs/paper_reasoning.yaml"], capsys)
    assert rc == 2
    line = next(line for line in out.splitlines() if "latex2sympy2" in line)
    assert "verifier emma needs latex2sympy2, not installed" in line and "pip install '.[emma]'" in line and "'.[paper]'" in line
    assert err.startswith("bon: error: ") and len(err.strip().splitlines()) == 1


def test_no_verifier_written_stops_the_run_and_the_dry_run(tmp_path, capsys):
    config = tiny(tmp_path, verifier=None)
    rc, out, err = dry([str(config)], capsys)
    assert rc == 2 and "no verifier: the config must name the downstream verifier (`verifier: synthetic`" in err
    assert main(["run", str(config)]) == 2
    assert "no verifier" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_n_1_a_missing_key_and_every_problem_listed(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BON_TEST_ABSENT_KEY", raising=False)
    judge = {"name": "openai-compatible:gpt-5", "label": "api", "options": {"api_key_env": "BON_TEST_ABSENT_KEY"}}
    config = tiny(tmp_path, n=1, verifier=None, judges=[judge])
    rc, out, err = dry([str(config)], capsys)
    assert rc == 2 and "3 problem(s) would stop `bon run` before it starts:" in out
    listed = out.split("before it starts:\n")[1]
    assert "n = 1: a study needs at least 2 candidates" in listed and "no verifier" in listed
    assert "environment variable BON_TEST_ABSENT_KEY is not set" in listed
    assert "(and 2 more, listed above)" in err
    assert main(["run", str(config)]) == 2 and "(and 2 more: `bon run CONFIG --dry-run` lists them all)" in capsys.readouterr().err


def test_json_writes_the_plan_and_shard_plans_its_share(tmp_path, capsys):
    config = tiny(tmp_path, suite={"name": "synthetic", "per_task": 40}, n=8)
    assert main(["run", str(config), "--dry-run", "--json", str(tmp_path / "plan.json")]) == 0
    whole = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"), parse_constant=pytest.fail)
    assert main(["run", str(config), "--dry-run", "--shard", "0/4", "--json", str(tmp_path / "shard.json")]) == 0
    out = capsys.readouterr().out
    shard = json.loads((tmp_path / "shard.json").read_text(encoding="utf-8"), parse_constant=pytest.fail)
    assert "shard 0/4: this plan is the shard's share, 10 of 40 Best-of-N prompts" in out
    calls = {s["name"]: s["items"] for s in whole["stages"]}
    share = {s["name"]: s["items"] for s in shard["stages"]}
    assert calls["judge random"] == 40 * 14 and share["judge random"] == 10 * 14  # a quarter of the calls
    assert shard["shard"] == "0/4" and shard["whole_study_prompts"]["best_of_n"] == 40 and whole["shard"] is None


def test_paper_edit_prices_the_gedit_grader(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(ROOT / "configs" / "paper_edit.yaml")
    plan = plan_study(cfg, "paper_edit")
    verify = next(s for s in plan.stages if s.name == "verify gedit")
    assert verify.grader_calls == 2 * verify.items  # SC and PQ per candidate
    price_in, price_out = costs.GRADER_PRICES["gpt-4.1"]
    per_call = verify.per_call
    assert verify.cost_usd == pytest.approx(verify.grader_calls * (per_call.input_tokens * price_in + per_call.output_tokens * price_out) / 1e6)
    rc, out, _ = dry(["configs/paper_edit.yaml"], capsys)  # exit 2 here (no API keys, no checkout), the plan printed
    assert f"{verify.grader_calls} grader calls" in out and "gpt-4.1 at $2 / $8 per 1M tokens" in out


def test_interleaved_calls_cost_more_tokens_than_t2i_each_with_its_assumption(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    per_call = {}
    for name in ("paper_t2i", "paper_interleaved"):
        plan = plan_study(load_config(ROOT / "configs" / f"{name}.yaml"), name)
        gpt5 = next(s for s in plan.stages if s.name == "judge GPT-5")
        per_call[name] = gpt5.per_call
        assert any("reasoning_effort medium: 2000 hidden reasoning tokens" in n for n in gpt5.notes)
    t2i, interleaved = per_call["paper_t2i"], per_call["paper_interleaved"]
    assert interleaved.input_tokens > 2 * t2i.input_tokens
    assert any("t2i reply: 6 criteria" in n for n in t2i.assumptions)
    assert any("images of 1024x1024 (the middle of min_images..max_images" in n for n in interleaved.assumptions)
    rc, out, _ = dry(["configs/paper_interleaved.yaml"], capsys)
    assert f"judge GPT-5: {costs.tokens_text(interleaved)}" in out and "interleaved reply: 7 criteria" in out


@pytest.mark.parametrize("kind, size, tokens", [
    ("openai", (1024, 1024), 85 + 170 * 4),     # scaled to 768 x 768: 2 x 2 tiles
    ("openai", (512, 512), 85 + 170),
    ("openai", (4096, 1024), 85 + 170 * 4),     # fit in 2048: 2048 x 512, shortest side already under 768: 4 x 1 tiles
    ("gemini", (384, 300), 258),
    ("gemini", (1024, 1024), 258 * 4),          # 768 px tiles
    ("anthropic", (1000, 1000), 1334),
    ("qwen2.5-vl", (1024, 1024), 37 * 37),      # 28 px patches
    ("qwen3-vl", (1024, 1024), 32 * 32),        # 32 px patches
])
def test_image_token_rules(kind, size, tokens):
    assert costs.image_tokens(kind, *size) == tokens


def test_local_seconds_are_prefill_plus_decode_over_the_batch():
    cost = costs.CallCost(input_tokens=2000, output_tokens=200)
    dev = {"bandwidth_gbs": 1000.0, "tflops": 100.0, "name": "test"}
    seconds, said = costs.local_seconds(cost, weights_gb=16.0, batch=4, dev=dev)
    prefill = 2 * 8e9 * 2000 / (100e12 * costs.COMPUTE_USE)
    decode = 200 * 16e9 / (1000e9 * costs.BANDWIDTH_USE) / 4
    assert seconds == pytest.approx(prefill + decode) and "batch 4" in said


def test_calibration_from_a_tiny_pilot_run(tmp_path, capsys, monkeypatch):
    """A pilot run against a local OpenAI-compatible server (10 input and 5 output tokens a call, at $1 / $10
    per 1M): the calibrated plan prices each call at what the pilot paid, and prints the model beside it."""
    monkeypatch.setenv("BON_TEST_PILOT_KEY", "sk-test")
    answer = json.dumps({"reasoning": "r", "score": 5, "better_response": "A"})
    with OpenAIServer(reply=lambda body: answer) as server:
        judge = {"name": "openai-compatible:gpt-4.1", "label": "api",
                 "options": {"base_url": server.url, "api_key_env": "BON_TEST_PILOT_KEY", "preflight": False,
                             "temperature": 0, "price_input": 1.0, "price_output": 10.0}}
        pilot = tiny(tmp_path / "pilot", n=2, suite={"name": "synthetic", "per_task": 2}, judges=[judge])
        assert main(["run", str(pilot)]) == 0
        capsys.readouterr()
        stats = json.loads((tmp_path / "pilot" / "run" / "stats.json").read_text(encoding="utf-8"))
        spent = stats["judges"]["api"]["total"]
        assert spent["input_tokens"] == 10 * spent["calls_made"] and spent["output_tokens"] == 5 * spent["calls_made"]
        config = tiny(tmp_path, n=4, judges=[judge])
        cfg = parse_config(yaml.safe_load(config.read_text(encoding="utf-8")), "c.yaml")
        plan = plan_study(cfg, "c.yaml")
        stage = next(s for s in plan.stages if s.name == "judge api")
        modelled = stage.cost_usd
        calibrate(plan, tmp_path / "pilot" / "run")
    assert stage.items == 4 * 2 * (4 - 1)  # knockout: 2 (N - 1) calls per prompt
    assert stage.pilot["input_tokens"] == 10 and stage.pilot["output_tokens"] == 5
    assert stage.pilot["usd"] == pytest.approx((10 * 1.0 + 5 * 10.0) / 1e6)
    assert stage.cost_usd == pytest.approx(stage.items * 60e-6) and stage.cost_usd != pytest.approx(modelled)
    assert stage.seconds_per_item == pytest.approx(spent["judge_seconds"] / spent["calls_made"])
    generate = next(s for s in plan.stages if s.name == "generate g")
    assert generate.seconds_per_item == pytest.approx(stats["timings_s"]["generate"] / (2 * 2))  # 2 prompts x N = 2
    rc, out, _ = dry([str(config), "--calibrate", str(tmp_path / "pilot" / "run")], capsys)
    assert rc == 0 and "calibrated by the pilot run" in out
    assert f"{costs.tokens_text(stage.per_call)} -> 10 in + 5 out (pilot, {spent['calls_made']} calls)" in out
