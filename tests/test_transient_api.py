"""Transient failures behind an OpenAI-compatible endpoint: a 503 outage leaves work pending (exit 3),
and the rerun after the server recovers ends where an uninterrupted run ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bon.cli import main
from bon.content import Content, Prompt, read_jsonl
from openai_server import OpenAIServer

KEY = "BON_TEST_TRANSIENT_KEY"


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY, "sk-transient-test")


def scores(run: Path) -> dict:
    return {(r["generator"], r["prompt_id"], r["index"]): r for _, r in read_jsonl(run / "scores.jsonl")}


def grader_study(out: Path, url: str) -> dict:
    return {
        "out": str(out), "seed": 2, "n": 2, "tasks": ["t2i"], "suite": {"name": "synthetic", "per_task": 2},
        "preference": {"prompts_per_task": 1, "pairs_per_prompt": 1},
        "generators": [{"name": "synthetic", "label": "strong", "options": {"skill": "strong"}}],
        "verifier": {"name": "vqascore", "options": {"grader": {"backend": "openai", "model": "grader", "base_url": url,
                                                                "api_key_env": KEY, "max_retries": 0}}},
        "judges": ["scene-full"],
    }


def test_grader_503_then_recovery(tmp_path):
    server = OpenAIServer()  # one server (one URL, so the graders' identities match), healthy, then failing
    try:
        whole, broken = tmp_path / "whole", tmp_path / "broken"
        (tmp_path / "a.yaml").write_text(yaml.safe_dump(grader_study(whole, server.url)))
        (tmp_path / "b.yaml").write_text(yaml.safe_dump(grader_study(broken, server.url)))
        assert main(["run", str(tmp_path / "a.yaml")]) == 0
        server.fail = 3
        assert main(["run", str(tmp_path / "b.yaml")]) == 3  # three candidates pending, none stored as missing
        assert len(scores(broken)) == len(scores(whole)) - 3
        assert all(r["score"] is not None for r in scores(broken).values())
        assert main(["run", str(tmp_path / "b.yaml")]) == 0
    finally:
        server.close()
    assert scores(broken) == scores(whole)


def candidate_records(out: Path) -> dict:
    records = {}
    for _, r in read_jsonl(out / "candidates" / "vlm" / "candidates.jsonl"):
        prov = {k: v for k, v in r["provenance"].items() if k not in ("seconds", "attempts", "time", "created")}
        records[(r["prompt_id"], r["index"])] = (json.dumps(r["content"]), json.dumps(prov, sort_keys=True, default=str))
    return records


def generate_args(suite: Path, out: Path, url: str) -> list[str]:
    return ["generate", "--generator", "vlm-answers", "--suite", str(suite), "--n", "2", "--out", str(out),
            "--generator-option", "backend=openai", "--generator-option", "model=vlm", "--generator-option", f"base_url={url}",
            "--generator-option", f"api_key_env={KEY}", "--generator-option", "retries=0", "--generator-option", "label=vlm"]


def test_generator_503_then_recovery(tmp_path):
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(Prompt(f"q{i}", "reasoning", Content.of(f"What is {i} + {i}?")).to_json(tmp_path)) + "\n"
                             for i in range(3)))
    server = OpenAIServer()
    try:
        assert main(generate_args(suite, tmp_path / "whole", server.url)) == 0
        server.fail = 2
        assert main(generate_args(suite, tmp_path / "broken", server.url)) == 3
        assert main(generate_args(suite, tmp_path / "broken", server.url)) == 0
    finally:
        server.close()
    whole, broken = candidate_records(tmp_path / "whole"), candidate_records(tmp_path / "broken")
    assert whole == broken and len(whole) == 6
