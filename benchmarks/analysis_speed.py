"""How long ``bon demo``, ``bon report --run DEMO`` and ``bon tradeoff --run DEMO`` take (targets on 2 quiet cores,
median of 3: demo <= 40 s, report <= 5 s, tradeoff <= 30 s).

    python benchmarks/analysis_speed.py [--prompts 40] [--n 8] [--runs 3] [--demo-runs 1] [--tradeoff] [--cores 0,1]

Runs the demo in a fresh temporary folder (``--demo-runs`` times, the last folder kept for the rest), then
``bon report`` on it ``--runs`` times (and ``bon tradeoff`` with ``--tradeoff``), each as its own process, and
prints each run's wall and CPU seconds (the process and its workers) and the medians, with the load average
before and after: on a shared machine the CPU seconds are the steadier figure. ``--cores 0,1`` pins every
command to those cores (``taskset``), to measure "2 cores" on a larger machine.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, parser


def cpu_seconds() -> float:
    """User + system CPU of finished child processes (each command and every worker it forked)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed_command(args: list[str], cores: str | None) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``bon`` command."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "BON_QUIET": "1"}
    pin = ["taskset", "-c", cores] if cores else []
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    subprocess.run([*pin, sys.executable, "-m", "bon.cli", *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0, cpu_seconds() - cpu0


def report_line(name: str, runs: list[tuple[float, float]]) -> str:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    each = ", ".join(f"{w:.1f} s ({c:.1f} CPU-s)" for w, c in runs)
    return f"{name:<22} median {statistics.median(walls):6.1f} s wall, {statistics.median(cpus):6.1f} CPU-s   [{each}]"


def main() -> None:
    ap = parser(__doc__, prompts=40, n=8, runs=3, demo_runs=1)
    ap.add_argument("--tradeoff", action="store_true", help="Also time `bon tradeoff --run DEMO`.")
    ap.add_argument("--cores", default=None, help="Pin every command to these cores (taskset -c), e.g. 0,1.")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bon-speed-"))
    try:
        demo, demos = tmp / "demo", []
        for _ in range(args.demo_runs):
            shutil.rmtree(demo, ignore_errors=True)
            demos.append(timed_command(["demo", "--out", str(demo), "--prompts", str(args.prompts), "--n", str(args.n)],
                                       args.cores))
        reports = [timed_command(["report", "--run", str(demo)], args.cores) for _ in range(args.runs)]
        lines = [report_line("bon demo", demos), report_line("bon report --run DEMO", reports)]
        if args.tradeoff:
            trades = [timed_command(["tradeoff", "--run", str(demo), "--out", str(tmp / f"t{k}")], args.cores)
                      for k in range(args.runs)]
            lines.append(report_line("bon tradeoff --run DEMO", trades))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(lines))
    print(f"(prompts/task {args.prompts}, N {args.n}, {os.cpu_count()} cores{f', pinned to {args.cores}' if args.cores else ''}; "
          f"load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after)")


if __name__ == "__main__":
    main()
