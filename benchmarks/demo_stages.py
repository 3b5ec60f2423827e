"""Where the time of ``bon demo`` goes (target: defaults in at most 60 s wall on a 2-core machine).

    python benchmarks/demo_stages.py [--prompts 40] [--n 8] [--runs 1] [--workers N]

Runs the demo in a fresh temporary folder ``--runs`` times and prints, per run, the wall time, the
CPU time of the process and its worker processes (on a shared machine the CPU seconds are the
steadier figure), each stage's time from ``stats.json`` and each judge's time; then the median wall.
``--workers 1`` runs everything in one process (no forked workers), for comparison.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, parser


def cpu_seconds() -> float:
    """User + system CPU of finished child processes (the demo and every worker it forked)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def one_run(prompts: int, n: int, workers: int | None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "BON_QUIET": "1"}
    if workers:
        env["BON_WORKERS"] = str(workers)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "bon.cli", "demo", "--out", str(out), "--prompts", str(prompts), "--n", str(n)],
                       cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
        stats = json.loads((out / "stats.json").read_text())
    stages = stats["timings_s"]
    stages["analyse+report (rest)"] = round(wall - sum(stages.values()), 2)
    judges = {name: s.get("wall_seconds") for name, s in stats["judges"].items()}
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "stages_s": stages, "judges_s": judges}


def main() -> None:
    ap = parser(__doc__, prompts=40, n=8, runs=1)
    ap.add_argument("--workers", type=int, default=None, help="BON_WORKERS for the run (default: one per core)")
    args = ap.parse_args()
    walls = []
    for k in range(args.runs):
        r = one_run(args.prompts, args.n, args.workers)
        walls.append(r["wall_s"])
        print(f"run {k + 1}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU (all processes)")
        for stage, sec in r["stages_s"].items():
            print(f"  {stage:<24} {sec:7.2f} s")
        print("  judges (wall each, in parallel workers when forkable):")
        for judge, sec in r["judges_s"].items():
            print(f"    {judge:<22} {sec:7.2f} s")
    print(f"median wall over {len(walls)} run(s): {statistics.median(walls):.1f} s "
          f"(prompts/task {args.prompts}, N {args.n}, {os.cpu_count()} cores, load now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
