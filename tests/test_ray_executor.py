"""The Ray executor writes the run folder a local run writes, also when workers are killed mid-stage,
and runs a served judge's replicas as actors holding their GPUs.

One small Ray cluster (2 CPUs, 2 GPUs that exist only in Ray's books) serves the module; each study
starts its own actors on it.
"""

import json
import os
from pathlib import Path

import pytest

from bon.cli import main
from scale_helpers import assert_same_run, store_rows
from serve_helpers import assert_all_stopped, outcome, served_study, servers, write_config

ray = pytest.importorskip("ray")

DEMO = ["demo", "--prompts", "8", "--n", "2", "--seed", "5"]
TINY = ["demo", "--prompts", "2", "--n", "3", "--seed", "5"]  # 3 candidates: knockout with a bye, two rounds


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    root = str(Path(__file__).resolve().parents[1])
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": root}})
    yield
    ray.shutdown()


def _local(tmp_path_factory, args):
    out = tmp_path_factory.mktemp("local") / "run"
    assert main([*args, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    return _local(tmp_path_factory, DEMO)


@pytest.fixture(scope="module")
def tiny_local_run(tmp_path_factory):
    return _local(tmp_path_factory, TINY)


def _calls_made(run: Path, last: bool = False) -> int:
    """Judge calls paid for: the study's total over every invocation, or only the last invocation's."""
    stats = json.loads((run / "stats.json").read_text())
    return sum((j["last_invocation"] if last else j)["calls_made"] for j in stats["judges"].values())


def test_ray_demo_writes_the_local_run_folder(cluster, local_run, tmp_path):
    out = tmp_path / "ray"
    assert main([*DEMO, "--out", str(out), "--executor", "ray"]) == 0
    assert_same_run(out, local_run)
    assert _calls_made(out) == _calls_made(local_run) == len(store_rows(out / "judgments.sqlite")["judgments"])


def test_killed_workers_are_retried_and_no_judgment_is_asked_twice(cluster, tiny_local_run, tmp_path, monkeypatch):
    markers = {stage: tmp_path / f"killed-{stage}" for stage in ("generate", "judge")}
    monkeypatch.setenv("BON_RAY_KILL_ONCE", ",".join(f"{s}:{m}" for s, m in markers.items()))
    out = tmp_path / "ray"
    assert main([*TINY, "--out", str(out), "--executor", "ray"]) == 0
    assert all(m.exists() for m in markers.values())  # a worker process really died in each stage
    assert_same_run(out, tiny_local_run)
    made = _calls_made(out)  # every call paid for is one stored judgment: nothing was asked twice
    assert made == _calls_made(tiny_local_run) == len(store_rows(out / "judgments.sqlite")["judgments"])
    monkeypatch.delenv("BON_RAY_KILL_ONCE")
    assert main([*TINY, "--out", str(out)]) == 0  # the other executor resumes the same folder: nothing new to ask
    assert _calls_made(out, last=True) == 0 and _calls_made(out) == made
    assert_same_run(out, tiny_local_run)


def test_served_judge_on_ray_replica_actors_same_as_local(cluster, tmp_path):
    """Two replicas, one Ray actor each holding its own GPU, each running its server: the run ends
    where a local run with one replica ends (the same judge identity), and no server is left running. (A replica killed mid-stage: exit 3, then a
    rerun completes it; tests/test_served_judge.py, the same code inside the actor.)"""
    (tmp_path / "local").mkdir()
    local = served_study(tmp_path / "local" / "run", tmp_path / "local", replicas=1)  # how it is served: not an answer
    assert main(["run", str(write_config(tmp_path, "local", local))]) == 0
    record = tmp_path / "ray"
    record.mkdir()
    study = {**served_study(tmp_path / "run", record), "executor": {"name": "ray", "options": {"workers": 1}}}
    assert main(["run", str(write_config(tmp_path, "ray", study))]) == 0
    started = servers(record)
    assert len(started) == 2 and all(s["requests"] for s in started)
    assert sorted(s["gpus"] for s in started) == ["0", "1"]  # the GPU Ray gave each replica's actor
    assert_all_stopped(record)
    assert outcome(tmp_path / "run") == outcome(tmp_path / "local" / "run")
    identity = [json.loads((run / "stats.json").read_text())["identities"]["judges"]["served"]
                for run in (tmp_path / "run", tmp_path / "local" / "run")]
    assert identity[0] == identity[1] and identity[0]["served"]["engine"] == "vllm"
