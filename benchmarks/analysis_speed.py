"""How long ``bon demo``, ``bon report --run DEMO`` and ``bon tradeoff --run DEMO`` take (targets on 2 quiet cores,
median of 3: demo <= 40 s, report <= 5 s, tradeoff <= 30 s).

    python benchmarks/analysis_speed.py [--prompts 40] [--n 8] [--runs 3] [--demo-runs 1] [--tradeoff] [--cores 0,1]
                                        [--before DIR]

Runs the demo in a fresh temporary folder (``--demo-runs`` times, the last folder kept for the rest), then
``bon report`` on it ``--runs`` times (and ``bon tradeoff`` with ``--tradeoff``), each as its own process, and
prints each run's wall and CPU seconds (the process and its workers) and the medians, with the load average
before and after: on a shared machine the CPU seconds are the steadier figure. ``--cores 0,1`` pins every
command to those cores (``taskset``), to measure "2 cores" on a larger machine. Each ``bon tradeoff`` runs on
a fresh copy of the demo (a replay stores the answers it buys, so a second one on the same folder would do less).
``--before DIR`` times another checkout of the code too (e.g. ``git archive BASE | tar -x -C DIR``), each of
its runs right after the same run of this one, so both see the same load. Each checkout is byte-compiled first
and its commands may write bytecode (``PYTHONDONTWRITEBYTECODE`` dropped), as in an installed ``bon`` (pip
compiles on install): otherwise every command, on a machine that sets it, would time compiling bon's modules.
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


def timed_command(args: list[str], cores: str | None, code: Path = ROOT) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``bon`` command run with the code at ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code), "MPLBACKEND": "Agg", "BON_QUIET": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    pin = ["taskset", "-c", cores] if cores else []
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    subprocess.run([*pin, sys.executable, "-m", "bon.cli", *args], cwd=code, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0, cpu_seconds() - cpu0


def compileall(code: Path) -> None:
    """Byte-compile the checkout's packages, as ``pip install`` does, before any command is timed."""
    packages = [str(code / name) for name in ("bon", "generators", "judges", "verifiers", "analysis") if (code / name).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True, stdout=subprocess.DEVNULL)


def report_line(name: str, runs: list[tuple[float, float]]) -> str:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    each = ", ".join(f"{w:.1f} s ({c:.1f} CPU-s)" for w, c in runs)
    return f"{name:<33} median {statistics.median(walls):6.1f} s wall, {statistics.median(cpus):6.1f} CPU-s   [{each}]"


def main() -> None:
    ap = parser(__doc__, prompts=40, n=8, runs=3, demo_runs=1)
    ap.add_argument("--tradeoff", action="store_true", help="Also time `bon tradeoff --run DEMO`.")
    ap.add_argument("--cores", default=None, help="Pin every command to these cores (taskset -c), e.g. 0,1.")
    ap.add_argument("--before", type=Path, default=None, help="Another checkout of the code, timed alongside.")
    args = ap.parse_args()
    codes = {"": ROOT, **({" (before)": args.before.resolve()} if args.before else {})}
    for code in codes.values():
        compileall(code)
    load0 = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bon-speed-"))
    times: dict[str, list[tuple[float, float]]] = {}
    try:
        demo = tmp / "demo"
        for _ in range(args.demo_runs):
            for label, code in codes.items():
                shutil.rmtree(demo, ignore_errors=True)
                times.setdefault(f"bon demo{label}", []).append(timed_command(
                    ["demo", "--out", str(demo), "--prompts", str(args.prompts), "--n", str(args.n)], args.cores, code))
        for _ in range(args.runs):
            for label, code in codes.items():
                times.setdefault(f"bon report --run DEMO{label}", []).append(
                    timed_command(["report", "--run", str(demo)], args.cores, code))
        for k in range(args.runs if args.tradeoff else 0):
            for label, code in codes.items():
                copy = tmp / "replay"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(demo, copy)
                times.setdefault(f"bon tradeoff --run DEMO{label}", []).append(
                    timed_command(["tradeoff", "--run", str(copy), "--out", str(tmp / f"t{k}")], args.cores, code))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(report_line(name, runs) for name, runs in times.items()))
    print(f"(prompts/task {args.prompts}, N {args.n}, {os.cpu_count()} cores{f', pinned to {args.cores}' if args.cores else ''}; "
          f"load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after)")


if __name__ == "__main__":
    main()
