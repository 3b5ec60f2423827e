"""Served judges (``serve:`` on a judge entry): bon starts the servers when the judge's stage starts,
spreads each batch over the replicas and stops them at the end, also on errors and interrupts; a
replica killed mid-stage ends the run with exit 3, and the rerun ends where an uninterrupted run ends.

The servers are tests/standin_server.py, started by bon as real subprocesses with the real ``vllm
serve`` / ``sglang.launch_server`` command lines (``serve.launcher`` replaces only the program). The
Ray path is in tests/test_ray_executor.py (one small cluster for the module).
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from bon.cli import main
from bon.config import parse_config
from bon.content import Content, Prompt
from bon.errors import BonError
from bon.lifecycle import loaded
from bon.protocol import Comparison
from bon.serve import free_port
from bon.study import load_study
from serve_helpers import alive, assert_all_stopped, outcome, served_study, servers, write_config

pytest.importorskip("openai")

@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted local run with two replicas."""
    tmp = tmp_path_factory.mktemp("whole")
    record = tmp / "servers"
    record.mkdir()
    assert main(["run", str(write_config(tmp, "whole", served_study(tmp / "run", record)))]) == 0
    return tmp / "run", record


def test_two_replicas_share_every_round_and_stop_with_the_stage(whole):
    run, record = whole
    started = servers(record)
    assert len(started) == 2 and all(s["requests"] > 0 for s in started)  # both replicas answered
    assert {s["engine"] for s in started} == {"vllm"} and {s["served"] for s in started} == {"org/judge-7b"}
    assert {s["gpus"] for s in started} == {"0", "1"}  # each replica on its own GPU
    assert {(s["tensor_parallel"], s["data_parallel"]) for s in started} == {("1", "1")}
    stats = json.loads((run / "stats.json").read_text())["judges"]["served"]
    assert sum(s["requests"] for s in started) == stats["calls_made"] > 0
    assert stats["missing"] == 0
    assert_all_stopped(record)
    recorded = load_study(run).judge("served")  # later commands rebuild it from the run's config.yaml
    assert recorded.identity() == json.loads((run / "stats.json").read_text())["identities"]["judges"]["served"]
    assert not recorded.replicas  # built, not started: everything it would ask is in the store


def test_a_replica_killed_mid_stage_exits_3_and_the_rerun_completes_it(whole, tmp_path):
    record = tmp_path / "servers"
    record.mkdir()
    study = served_study(tmp_path / "run", record, die=(3, tmp_path / "died"))
    config = write_config(tmp_path, "dying", study)
    assert main(["run", str(config)]) == 3
    assert (tmp_path / "died").exists()
    assert_all_stopped(record)  # the survivor was stopped too
    answered = outcome(tmp_path / "run")["verdicts"]
    assert answered and all(v[4] in ("A", "B") for v in answered)  # what was answered is kept; no failure stored
    assert main(["run", str(config)]) == 0
    assert outcome(tmp_path / "run") == outcome(whole[0])
    assert_all_stopped(record)


def test_dry_run_shows_replicas_gpus_calls_and_the_launch_command(tmp_path, capsys):
    study = served_study(tmp_path / "run", tmp_path)
    study["judges"][0]["serve"] = {"engine": "vllm", "tensor_parallel": 2, "replicas": 2, "args": ["--max-model-len", "8192"]}
    study["devices"] = {"memory_gb": 80, "count": 4}
    assert main(["run", str(write_config(tmp_path, "plan", study)), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "serve served: vllm, 2 replicas x 2 GPUs = 4 GPUs (tensor_parallel 2, data_parallel 1)" in text
    assert ("vllm serve org/judge-7b --host 127.0.0.1 --port PORT --served-model-name org/judge-7b "
            "--tensor-parallel-size 2 --data-parallel-size 1 --max-model-len 8192") in text
    assert "over 2 replicas, ~" in text and "[org/judge-7b (vllm)]" in text
    assert not (tmp_path / "run").exists()
    study["judges"][0]["serve"] = "vllm"  # the short form: one server on one GPU
    assert parse_config(study, where="c.yaml").judges[0].serve["startup_timeout"] == 1800
    assert main(["run", str(write_config(tmp_path, "plan", study)), "--dry-run"]) == 0
    assert "serve served: vllm, 1 replica x 1 GPU = 1 GPU (tensor_parallel 1, data_parallel 1)" in capsys.readouterr().out
    study["judges"][0]["serve"] = {"engine": "vllm", "tensor_parallel": 2, "replicas": 2}
    study["devices"]["count"] = 2  # 4 GPUs wanted on a machine with 2: one line, exit 2
    assert main(["run", str(write_config(tmp_path, "plan", study)), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "serves vllm, 2 replicas x 2 GPUs = 4 GPUs" in err[0] and "has 2" in err[0]


def test_sglang_command_line(tmp_path):
    from bon.serve import ServeSettings

    cfg = parse_config(served_study(tmp_path / "run", tmp_path, engine="sglang"), where="c.yaml")
    spec = cfg.judges[0]
    spec.serve.update(launcher=None, tensor_parallel=2, data_parallel=2, model="/models/judge")
    settings = ServeSettings.of(spec)  # other weights (a local folder) served under the judge's model name
    assert settings.command(30000) == [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/judge",
                                       "--host", "127.0.0.1", "--port", "30000", "--served-model-name", "org/judge-7b",
                                       "--tp-size", "2", "--dp-size", "2"]


@pytest.mark.parametrize("serve, options, wanted", [
    ({"engine": "tgi"}, {}, "serve: engine must be vllm, sglang, transformers or command, got 'tgi'"),
    ({"engine": "command"}, {}, "serve: engine command needs command: the server's command line"),
    ({"engine": "command", "command": "srv --port {prot}"}, {}, "command word '{prot}': unknown"),
    ({"engine": "vllm", "command": ["x"]}, {}, "serve: command is for engine command"),
    ({"engine": "command", "command": ["x"], "health": "health"}, {}, "serve: health must be a path starting with /"),
    ({"engine": "transformers", "model": "/w"}, {}, "transformers serve names its model by the weights it loads"),
    ({"engine": "transformers", "tensor_parallel": 2}, {}, "transformers serve has no tensor or data parallelism"),
    ({"engine": "vllm", "replica": 2}, {}, "serve: unknown key(s) replica (known: engine, model,"),
    ({"engine": "vllm", "replicas": 0}, {}, "serve: replicas must be an integer of at least 1, got 0"),
    ({"engine": "vllm", "tensor_parallel": 2, "gpus_per_replica": 1}, {}, "gpus_per_replica 1 is less than"),
    ({"engine": "vllm", "args": {"a": 1}}, {}, "serve: args must be a list of command-line words"),
    ("vllm", {"base_url": "http://h:8000/v1"}, "serve: remove options.base_url"),
    ("vllm", {"batch": True}, "serve: options.batch is the OpenAI Batch API"),
])
def test_bad_serve_settings_are_one_line_naming_the_key(tmp_path, serve, options, wanted):
    study = served_study(tmp_path / "run", tmp_path)
    study["judges"][0]["serve"], study["judges"][0]["options"] = serve, options
    with pytest.raises(BonError) as err:
        parse_config(study, where="c.yaml")
    assert str(err.value).startswith("c.yaml: judges[0]: serve") and wanted in str(err.value)
    assert "\n" not in str(err.value)


def test_only_http_judges_can_be_served(tmp_path):
    study = served_study(tmp_path / "run", tmp_path)
    study["judges"][1] = {"name": "colour-hist", "serve": "vllm"}
    with pytest.raises(BonError, match=r"judges\[1\]: serve: this judge does not talk to a server"):
        parse_config(study, where="c.yaml")


def comparison(k: int) -> Comparison:
    prompt = Prompt(id=f"p{k}", task="t2i", content=Content.of(f"a red square {k}"))
    return Comparison(prompt, Content.of(f"left {k}"), Content.of(f"right {k}"))


def test_an_interrupt_or_a_failing_start_leaves_no_server_running(tmp_path):
    record = tmp_path / "servers"
    record.mkdir()
    study = served_study(tmp_path / "run", record)
    port = free_port()
    study["judges"][0]["serve"]["port"] = port  # replica i on port + i
    spec = parse_config(study, where="c.yaml").judges[0]
    with pytest.raises(KeyboardInterrupt):
        with loaded(spec, "judge") as judge:
            assert [v.better in ("A", "B") for v in judge.judge([comparison(k) for k in range(4)])] == [True] * 4
            raise KeyboardInterrupt
    assert_all_stopped(record)
    assert sorted(s["port"] for s in servers(record)) == [port, port + 1]
    broken = dict(spec.serve, launcher=[sys.executable, "-c", "print('CUDA out of memory'); raise SystemExit(1)"])
    with loaded(type(spec)(spec.name, spec.label, spec.options, serve=broken), "judge") as judge:
        with pytest.raises(BonError, match=r"judge served: replica 0 .*exited with code 1 before it was ready "
                                           r"\(CUDA out of memory; log: "):
            judge.judge([comparison(0)])
    pid_file = tmp_path / "hung.pid"
    sleeper = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    hung = dict(spec.serve, launcher=[sys.executable, "-c", sleeper], startup_timeout=0.5, replicas=1)
    with loaded(type(spec)(spec.name, spec.label, spec.options, serve=hung), "judge") as judge:
        with pytest.raises(BonError, match=r"not healthy \(GET /health\) within startup_timeout 0.5 s"):
            judge.judge([comparison(0)])
    assert not alive(int(pid_file.read_text()))


def test_a_server_whose_bon_process_is_killed_is_stopped_by_its_watchdog(tmp_path):
    """bon SIGKILLed (no finally runs): the watchdog beside each server stops its process group."""
    import subprocess

    parent = (f"import os, sys; from pathlib import Path; from bon.serve import ServerProcess\n"
              f"s = ServerProcess([sys.executable, '-c', 'import time; time.sleep(60)'], dict(os.environ), "
              f"Path({str(tmp_path / 'log')!r}), 'test')\n"
              f"s.start(); print(s.proc.pid, flush=True); os.kill(os.getpid(), 9)")
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=30)
    server = int(done.stdout.split()[0])
    deadline = time.monotonic() + 5
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server)


def test_engine_command_runs_any_server_from_its_template(whole, tmp_path):
    """``engine: command``: the server's own command line with {fields} filled in and nothing added (no
    --served-model-name, no parallel sizes), ready at its ``health`` path; the study ends where the vLLM
    run ends."""
    from serve_helpers import STANDIN

    record = tmp_path / "servers"
    record.mkdir()
    study = served_study(tmp_path / "run", record, replicas=2)
    template = [sys.executable, str(STANDIN), "--record", str(record), "serve", "{model}", "--host", "{host}",
                "--port", "{port}"]
    study["judges"][0]["serve"] = {"engine": "command", "command": template, "health": "/v1/models", "replicas": 2,
                                   "gpus_per_replica": 0, "startup_timeout": 30}
    assert main(["run", str(write_config(tmp_path, "command", study))]) == 0
    started = servers(record)
    assert len(started) == 2 and all(s["requests"] for s in started)
    for s in started:
        assert s["argv"] == ["--record", str(record), "serve", "org/judge-7b", "--host", "127.0.0.1", "--port", str(s["port"])]
    assert_all_stopped(record)
    assert outcome(tmp_path / "run") == outcome(whole[0])


def test_a_server_log_never_holds_the_key_the_engine_echoes(tmp_path):
    """Engines print their command line (vLLM: "non-default args"): the log bon keeps masks the key."""
    import os

    from bon.redact import remember_args
    from bon.serve import ServerProcess

    secret = "k3y-" + "q7" * 12
    remember_args(["--api-key", secret])  # as bon.serve does with a served judge's args
    echo = f"import sys; print('non-default args:', sys.argv[1:]); print('serving with', {secret!r}, flush=True)"
    server = ServerProcess([sys.executable, "-c", echo, "--api-key", secret], dict(os.environ), tmp_path / "s.log", "test")
    server.start()
    try:
        server.proc.wait(30)
        deadline = time.monotonic() + 10
        while (tmp_path / "s.log").read_text().count("\n") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.stop()
    text = (tmp_path / "s.log").read_text()
    assert "non-default args" in text and "serving with" in text and secret not in text


def test_a_served_judges_verdicts_are_found_without_stats_json(whole, tmp_path):
    """stats.json lost: the served judge's identity is rebuilt from config.yaml (no server started), so its
    store id, and with it every match's verdicts, are found as with stats.json."""
    import shutil

    import bon

    run, record = whole
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "stats.json").unlink()
    before = len(servers(record))
    with_stats, without = bon.load_run(run), bon.load_run(copy)
    assert without.judge_ids["served"] == with_stats.judge_ids["served"]
    mine = without.matches[without.matches["judge"] == "served"]
    assert len(mine) > 0 and mine["fwd_verdict"].notna().all() and mine["rev_verdict"].notna().any()
    assert len(servers(record)) == before  # nothing was started to rebuild it
