"""A lost Ray node with no spare capacity: exit 3 within lost_node_timeout, and a rerun that equals the local run.

A two-node cluster on this machine (``ray start --head`` with no CPUs, the coordinator only, and
``ray start --address`` with one CPU, RAY_AUTH_MODE=disabled) runs a small demo study (two tasks,
three judges, OCR among them) with ``bon run``: once uninterrupted, then with the worker node killed
(SIGKILL to its whole process group) once judging is under way (``--kill-after`` judgments stored). With nowhere to place the lost
worker's batches, bon must end with exit 3 within the node-death detection plus ``lost_node_timeout``,
keeping what returned; a worker node rejoins, the rerun asks only the rest, and every result equals
the local run's. Prints: uninterrupted time, time from the node kill to bon's exit 3, calls kept,
rerun calls, and "results equal: yes" (or no).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from _common import parser, timed  # noqa: F401  (puts the repository and tests/ on the path)

from cluster_helpers import Cluster, bon, cluster_study, judgments, local_twin  # noqa: E402
from scale_helpers import SAME_FILES, store_rows  # noqa: E402


def calls_made(run: Path, last: bool = False) -> int:
    stats = json.loads((run / "stats.json").read_text())
    return sum((j["last_invocation"] if last else j)["calls_made"] for j in stats["judges"].values())


def same_run(got: Path, want: Path) -> bool:
    """The two run folders hold the same outcome: the result files and every stored judgment."""
    files = all((got / f).read_text() == (want / f).read_text() for f in SAME_FILES)
    return files and store_rows(got / "judgments.sqlite") == store_rows(want / "judgments.sqlite")


def run(folder: Path, config: Path, log: Path, timeout: float = 600.0) -> tuple[int, float]:
    started = time.perf_counter()
    proc = bon(config, log)
    return proc.wait(timeout), time.perf_counter() - started


def scenario(folder: Path, lost_node_timeout: float = 30.0, kill_after: int = 100) -> dict:
    """Every figure the script prints, measured on a fresh cluster in ``folder``."""
    cluster = Cluster(folder / "cluster", head_cpus=0, worker_cpus=[1])
    try:
        whole = cluster_study(folder / "whole", cluster.address, workers=1, cpus_per_worker=1, lost_node_timeout=lost_node_timeout)
        rc_local, local_s = run(folder, local_twin(whole, folder / "local"), folder / "local.log")
        rc_whole, whole_s = run(folder, whole, folder / "whole.log")
        faulty = cluster_study(folder / "faulty", cluster.address, workers=1, cpus_per_worker=1, lost_node_timeout=lost_node_timeout)
        proc = bon(faulty, folder / "faulty.log")
        store = folder / "faulty" / "judgments.sqlite"
        while judgments(store) < kill_after and proc.poll() is None:  # judging is under way
            time.sleep(0.05)
        killed = time.perf_counter()
        cluster.workers[0].kill()
        rc_fault = proc.wait(600)
        exit_after = time.perf_counter() - killed
        kept = judgments(store)
        cluster.add_worker(1)  # a node rejoins
        rc_rerun, rerun_s = run(folder, faulty, folder / "rerun.log")
        return {"rc_local": rc_local, "local_s": local_s, "rc_uninterrupted": rc_whole, "uninterrupted_s": whole_s,
                "rc_fault": rc_fault, "kill_to_exit_s": exit_after, "lost_node_timeout_s": lost_node_timeout,
                "calls_kept": kept, "rc_rerun": rc_rerun, "rerun_s": rerun_s,
                "rerun_calls": calls_made(folder / "faulty", last=True), "calls_total": calls_made(folder / "whole"),
                "results_equal": same_run(folder / "faulty", folder / "local") and same_run(folder / "whole", folder / "local"),
                "stopped_line": _stopped_line(folder / "faulty.log")}
    finally:
        cluster.stop()


def _stopped_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("bon: stopped")]
    return lines[-1] if lines else ""


def main() -> None:
    args = parser(__doc__, lost_node_timeout=(30.0, "seconds bon waits for a place for the lost node's work"),
                  kill_after=(100, "judgments stored before the worker node is killed")).parse_args()
    with tempfile.TemporaryDirectory(prefix="bon-cluster-") as tmp:
        r = scenario(Path(tmp), args.lost_node_timeout, args.kill_after)
    print(f"uninterrupted time: {r['uninterrupted_s']:.1f} s on the cluster (local: {r['local_s']:.1f} s), "
          f"{r['calls_total']} judge calls")
    print(f"time from node kill to bon's exit {r['rc_fault']}: {r['kill_to_exit_s']:.1f} s "
          f"(lost_node_timeout {r['lost_node_timeout_s']:g} s plus Ray's node-death detection)")
    print(f"  {r['stopped_line']}")
    print(f"calls kept: {r['calls_kept']}")
    print(f"rerun calls: {r['rerun_calls']} (exit {r['rc_rerun']}, {r['rerun_s']:.1f} s)")
    print(f"results equal: {'yes' if r['results_equal'] else 'no'}")
    ok = (r["rc_local"], r["rc_uninterrupted"], r["rc_fault"], r["rc_rerun"]) == (0, 0, 3, 0) and r["results_equal"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
