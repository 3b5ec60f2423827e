"""The served-judge tests' study and checks (tests/test_served_judge.py, and the Ray run in
tests/test_ray_executor.py): a tiny study whose judge is served by tests/standin_server.py."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from pathlib import Path

import yaml

STANDIN = Path(__file__).resolve().parent / "standin_server.py"


def served_study(out: Path, record: Path, replicas: int = 2, die: tuple[int, Path] | None = None,
                 engine: str = "vllm") -> dict:
    """A tiny study (one task, one generator, N = 3) with one served judge and one synthetic judge."""
    launcher = [sys.executable, str(STANDIN), "--record", str(record)]
    if die:
        launcher += ["--die-after", str(die[0]), "--die-marker", str(die[1])]
    serve = {"engine": engine, "replicas": replicas, "launcher": launcher, "startup_timeout": 30}
    return {
        "out": str(out), "seed": 4, "n": 3, "tasks": ["t2i"], "suite": {"name": "synthetic", "per_task": 3},
        "preference": {"prompts_per_task": 2, "pairs_per_prompt": 2},
        "generators": [{"name": "synthetic", "label": "strong", "options": {"skill": "strong"}}],
        "verifier": {"name": "synthetic"},
        "judges": [{"name": "openai-compatible:org/judge-7b", "label": "served", "serve": serve,
                    "options": {"max_retries": 0, "timeout": 10, "concurrency": 4, "max_image_side": 64}},
                   "colour-hist"],
    }


def write_config(tmp_path: Path, name: str, study: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def servers(record: Path) -> list[dict]:
    """Every stand-in server that started, with how many requests it answered."""
    out = []
    for info in sorted(record.glob("*.json")):
        entry = json.loads(info.read_text())
        requests = record / f"{entry['pid']}.requests"
        entry["requests"] = len(requests.read_text().split()) if requests.exists() else 0
        out.append(entry)
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by a parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def assert_all_stopped(record: Path) -> None:
    deadline = time.monotonic() + 5
    while any(alive(s["pid"]) for s in servers(record)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert servers(record) and not [s["pid"] for s in servers(record) if alive(s["pid"])]


def outcome(run: Path) -> dict:
    """What the study decided: picks, results and every stored verdict (without latencies)."""
    db = sqlite3.connect(run / "judgments.sqlite")
    try:
        rows = db.execute("SELECT prompt, a, b, sample, better, score, missing FROM judgments")
        verdicts = sorted(rows, key=lambda row: tuple((v is None, 0 if v is None else v) for v in row))
    finally:
        db.close()
    return {"picks": (run / "picks.jsonl").read_text(), "results": (run / "results.csv").read_text(), "verdicts": verdicts}
