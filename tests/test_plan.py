"""`bon run CONFIG --dry-run`: every shipped config plans offline; a stage too big for the declared
device is one line and exit 2; model sizes come from safetensors files, shared components once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bon.cli import main
from bon.config import parse_config
from bon.plan import plan_study, strategy_calls

ROOT = Path(__file__).resolve().parents[1]
STUDY_CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if isinstance(yaml.safe_load(p.read_text()), dict))


# what this CPU machine lacks for the GPU configs, and nothing else, may stop them here
MACHINE = ("torch sees no CUDA device", "model path runs/tiny/models/",  # tiny models: benchmarks/make_tiny_models.py
           ": not there (the config's comments say what to clone)", "torchvision")


def set_api_keys(monkeypatch) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "sk-test")


@pytest.mark.parametrize("config", STUDY_CONFIGS, ids=lambda p: p.name)
def test_every_config_plans_offline(config, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    set_api_keys(monkeypatch)
    out_dir = ROOT / yaml.safe_load(config.read_text())["out"]
    existed = out_dir.exists()
    rc = main(["run", str(config.relative_to(ROOT)), "--dry-run"])
    captured = capsys.readouterr()
    assert "plan for" in captured.out and "verify " in captured.out and "judge " in captured.out
    listed = captured.out.split("would stop `bon run` before it starts:\n")
    problems = [line.strip() for line in listed[1].splitlines() if line.startswith("  ")] if len(listed) > 1 else []
    assert rc == (2 if problems else 0) and len(captured.err.strip().splitlines()) == (1 if problems else 0)
    assert all(any(why in line for why in MACHINE) for line in problems), problems
    assert out_dir.exists() == existed  # a dry run creates no run folder


def test_paper_t2i_plan_names_the_largest_stage(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    set_api_keys(monkeypatch)
    assert main(["run", "configs/paper_t2i.yaml", "--dry-run"]) in (0, 2)  # 2 on a machine without CUDA
    text = capsys.readouterr().out
    assert "1600 prompts, 12800 candidates" in text and "44800 (knockout)" in text
    assert "peak: 66.9 GB of weights (verify vqascore)" in text and "API cost estimate" in text


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)


def test_stage_too_big_for_declared_device_is_one_line_exit_2(tmp_path, capsys):
    cfg = {"out": str(tmp_path / "run"), "tasks": ["t2i"], "suite": {"name": "synthetic", "per_task": 1},
           "devices": {"memory_gb": 24}, "verifier": "synthetic",
           "generators": [{"name": "synthetic", "label": "big", "memory_gb": 33.7}], "judges": ["random"]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", str(tmp_path / "c.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stage 'generate big' needs ~33.7 GB" in err[0] and "24 GB" in err[0]


def test_an_absent_official_checkout_is_named_by_the_plan_and_stops_the_run(tmp_path, capsys, monkeypatch):
    """configs/paper_edit.yaml names `prompts_dir: official/Step1X-Edit`: the dry run plans anyway and names
    it in one line; `bon run` stops on it with one line before the run folder exists."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["run", str(ROOT / "configs" / "paper_edit.yaml"), "--dry-run"]) == 2  # the dry run plans, and says it stops the run
    captured = capsys.readouterr()
    assert "verifier gedit: prompts_dir official/Step1X-Edit: not there" in captured.out
    absent = [line for line in captured.out.splitlines() if line.startswith("not there: ")]
    assert absent == [f"not there: verifier gedit: prompts_dir official/Step1X-Edit (relative to {tmp_path}; the config's "
                      "comments say what to clone): `bon run` stops on it before it starts"]
    monkeypatch.setenv("BON_TEST_GEDIT_KEY", "sk-test")
    grader = {"backend": "openai", "model": "gpt-4.1", "api_key_env": "BON_TEST_GEDIT_KEY", "preflight": False}
    cfg = {"out": str(tmp_path / "run"), "tasks": ["edit"], "suite": {"name": "synthetic", "per_task": 1},
           "generators": [{"name": "synthetic", "label": "g"}], "judges": ["random"],
           "verifier": {"name": "gedit", "options": {"prompts_dir": "official/Step1X-Edit", "grader": grader}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", "c.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "prompts_dir official/Step1X-Edit: not there (the config's comments say what to clone)" in err[0]
    assert not (tmp_path / "run").exists()


def test_sizes_from_safetensors_shared_components_once_and_hub_cache(tmp_path, monkeypatch):
    for pipe, transformer in (("t2i", 3000), ("edit", 5000)):
        write(tmp_path / pipe / "transformer" / "diffusion_pytorch_model.safetensors", transformer)
        write(tmp_path / pipe / "text_encoder" / "model.safetensors", 700)  # the same encoder in both
        write(tmp_path / pipe / "vae" / "diffusion_pytorch_model.safetensors", 100)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    write(tmp_path / "hub" / "models--org--planner" / "snapshots" / "abc123" / "model.safetensors", 2000)
    agent = {"planner": {"backend": "transformers-vlm", "model": "org/planner"},
             "renderer": {"name": "diffusers-t2i", "options": {"model": str(tmp_path / "t2i")}},
             "editor": {"name": "diffusers-edit", "options": {"model": str(tmp_path / "edit")}}}
    raw = {"out": str(tmp_path / "run"), "tasks": ["interleaved"], "suite": {"name": "synthetic", "per_task": 1},
           "preference": {"prompts_per_task": 1, "pairs_per_prompt": 1},
           "generators": [{"name": "interleaved", "label": "agent", "options": agent}],
           "judges": [{"name": "openai-compatible:gpt-5", "label": "api", "options": {"price_input": 1.0, "price_output": 10.0}}]}
    plan = plan_study(parse_config(raw, where="test"), "test")
    generate, verify, judge = plan.stages
    assert generate.memory_gb * 1e9 == pytest.approx(2000 + 3000 + 5000 + 700 + 100)
    assert generate.memory_source == "safetensors"
    assert judge.memory_gb == 0 and judge.memory_source == "API"
    per_call = judge.per_call  # tokens from the study's own requests (bon.costs), priced at the config's rates
    assert judge.cost_usd == pytest.approx((14 + 2) * (per_call.input_tokens * 1.0 + per_call.output_tokens * 10.0) / 1e6)


def test_judge_calls_per_strategy():
    assert strategy_calls(8) == {"knockout": 14, "round-robin": 56, "pointwise": 8}
    assert strategy_calls(4, samples=3) == {"knockout": 18, "round-robin": 36, "pointwise": 4}
