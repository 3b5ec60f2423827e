"""A real multi-node Ray cluster on one machine, for the fault tests and benchmarks/cluster_faults.py:
``ray start --head`` and ``ray start --address`` as this process's own subprocesses (each in its own
process group, so a node is killed, everything of it, by its group id), and a small demo study that
``bon run`` runs on it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bon.demo import demo_raw

ROOT = Path(__file__).resolve().parents[1]
RAY = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; sys.exit(main())"]


def ray_env() -> dict[str, str]:
    paths = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": paths, "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One ``ray start --block`` process group: a head or a worker node."""

    def __init__(self, args: list[str], log: Path):
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([*RAY, "start", "--block", "--disable-usage-stats", *args], stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=ray_env(),
                                         start_new_session=True)

    def kill(self) -> None:
        """SIGKILL to the node's whole process group (its raylet, object store and workers): a lost node."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        # Ray's own processes may have left the group (they start sessions of their own): stop those too
        for pid in self._descendants():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _descendants(self) -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getsid(int(entry.name)) == self.proc.pid:
                        pids.append(int(entry.name))
                except OSError:
                    continue
        return pids


class Cluster:
    """A head with ``head_cpus`` and one worker node per ``worker_cpus`` entry, all on this machine."""

    def __init__(self, folder: Path, head_cpus: int, worker_cpus: list[int]):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.port = folder, free_port()
        self.address = f"127.0.0.1:{self.port}"
        # a temp dir of its own: `ray start --head` records its address in <temp dir>/ray_current_cluster, where
        # a plain ray.init() of any other process on this machine would otherwise find (and join) it
        self.temp = Path(tempfile.mkdtemp(prefix="bonray-", dir="/tmp"))  # short: Ray's socket paths live under it
        self.head = Node(["--head", f"--port={self.port}", f"--num-cpus={head_cpus}", "--num-gpus=0",
                          "--include-dashboard=false", "--node-ip-address=127.0.0.1", f"--temp-dir={self.temp}"],
                         folder / "head.log")
        self.workers: list[Node] = []
        self.wait_nodes(1)
        for cpus in worker_cpus:
            self.add_worker(cpus)

    def add_worker(self, cpus: int) -> Node:
        node = Node([f"--address={self.address}", f"--num-cpus={cpus}", "--num-gpus=0", "--node-ip-address=127.0.0.1"],
                    self.folder / f"worker-{len(self.workers)}.log")
        self.workers.append(node)
        self.wait_nodes(1 + sum(w.proc.poll() is None for w in self.workers))
        return node

    def wait_nodes(self, count: int, timeout: float = 120.0) -> None:
        """Until ``count`` nodes are alive (asked with ``ray list nodes``-free code: a short driver)."""
        probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                 "print(sum(n['Alive'] for n in ray.nodes()))")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = subprocess.run([sys.executable, "-c", probe, self.address], capture_output=True, text=True, env=ray_env())
            if got.returncode == 0 and got.stdout.strip().splitlines()[-1:] == [str(count)]:
                return
            time.sleep(1.0)
        raise RuntimeError(f"the Ray cluster at {self.address} did not reach {count} nodes; logs in {self.folder}")

    def stop(self) -> None:
        for node in [*self.workers, self.head]:
            node.kill()
        shutil.rmtree(self.temp, ignore_errors=True)


def cluster_study(out: Path, address: str, workers: int, cpus_per_worker: float, lost_node_timeout: float) -> Path:
    """A small demo study (two tasks, the OCR judge among three, so that judging lasts seconds) on the cluster."""
    raw = demo_raw(out=out, prompts=4, n=4, seed=7)
    raw["tasks"] = ["t2i", "edit"]
    raw["judges"] = ["colour-hist", "ocr", "quality"]
    raw["executor"] = {"name": "ray", "options": {"address": address, "workers": workers, "cpus_per_worker": cpus_per_worker,
                                                  "batch": 4, "lost_node_timeout": lost_node_timeout}}
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def local_twin(config: Path, out: Path) -> Path:
    """The same study with the local executor (what a cluster run must equal)."""
    raw = yaml.safe_load(config.read_text())
    raw["out"], raw["executor"] = str(out), {"name": "local"}
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def bon(config: Path, log: Path) -> subprocess.Popen:
    """``bon run CONFIG`` as a subprocess (its own driver, as a user runs it)."""
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "bon.cli", "run", str(config)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=ray_env(), cwd=ROOT)


def judgments(store: Path) -> int:
    """Judgments stored so far (0 before the store exists)."""
    if not store.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            return int(db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0
