"""How `bon` grows with the study: the synthetic study at several sizes and a study of 1024 x 1024 images
from disk at two sizes, with wall seconds, CPU seconds and peak memory per command and the growth ratios.

    python benchmarks/scale.py [--prompts 40 160 640] [--n 8] [--images 320 1280] [--size 1024]
                               [--skip-files | --skip-synthetic] [--out DIR] [--keep]

For each ``--prompts`` K (prompts per task; the demo's default is 40) it runs, each as its own process:
``bon demo --prompts K``, ``bon report``, ``bon tradeoff`` (on a copy: a replay stores what it buys),
``bon view`` (and the time headless Chromium takes to open its page and show the first cards, where
Chromium is installed) and ``bon.load_run`` with every frame read (``load_run``). For each ``--images`` count it
builds a files-based study (``benchmarks/_files_study.py``: the ``files`` generator, the ``labels`` verifier,
three CPU judges, a call budget so nothing forks) and runs ``bon run`` on it. The default sizes, 320 and
1,280 images of 1024 x 1024 (1.25 and 5 GiB decoded, at PIL's 4 bytes a pixel), both exceed the image
cache's default bound (``BON_IMAGE_CACHE``, 1 GiB: 256 such images), as a real study's do: their ratio
measures what grows with the study besides the bounded pixels. Smaller studies fit the bound whole, and
comparing one that fits with one that does not measures the bound instead (80 images hold 320 MiB of
pixels, 320 hold the full 1 GiB).

Per command it prints wall seconds, CPU seconds (the process and every worker it waited for) and peak
memory (the largest resident set of the process or any one of its workers: ``ru_maxrss`` from ``wait4``),
then each figure's ratio to the smallest size, and checks the targets of issue 34 (PASS/FAIL per target):
the files study's peak memory at the larger size within 1.25x of the smaller; the demo's peak memory at the
second size within 1.5x of the first; ``tradeoff``, ``load_run`` and ``report`` at the second size within
1.25 x (its prompts / the first's) of the first's time (5x for 4x the prompts; CPU seconds, steadier than wall
time on a shared machine); view.html's first page (the page and the shards it loads first) the same size.
Exit status 1 when a target fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, parser

LOAD_RUN = ("import sys, bon; run = bon.load_run(sys.argv[1]); "
            "[getattr(run, f) for f in ('prompts', 'candidates', 'scores', 'picks', 'matches', 'calls', 'accuracies')]")


def measured(args: list[str], cwd: Path) -> dict[str, float]:
    """Wall and CPU seconds and peak memory (MiB) of one command; a one-line failure when it fails."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "BON_QUIET": "1"}
    started = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}: {err.decode(errors='replace').strip()[-600:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "mem": usage.ru_maxrss / 1024}


def bon(*args: str) -> list[str]:
    return [sys.executable, "-m", "bon.cli", *args]


def first_page_bytes(folder: Path) -> int:
    """view.html and the shards its first page loads (with no filter: the first shard)."""
    from analysis.viewer import read_index

    page = folder / "view.html"
    shards = read_index(page)["shards"]
    return page.stat().st_size + ((folder / shards[0][0]).stat().st_size if shards else 0)


def open_seconds(page: Path) -> float | None:
    """Wall seconds headless Chromium takes to open the page and show its first cards (None without Chromium;
    a failure when it shows none or logs a console message)."""
    from view_check import check_page, find_chromium

    chromium = find_chromium()
    if chromium is None:
        return None
    started = time.perf_counter()
    found = check_page(chromium, page, budget_ms=5000)
    seconds = time.perf_counter() - started
    if found["returncode"] or found["console"] or not found["cards"]:
        raise SystemExit(f"{page}: Chromium showed {found['cards']} cards, console {found['console'][:3]}")
    return seconds


def synthetic(work: Path, prompts: int, n: int) -> dict[str, dict[str, float]]:
    """Every command's figures on the synthetic study with ``prompts`` prompts per task."""
    run, copy = work / f"demo-{prompts}", work / f"replay-{prompts}"
    out = {"demo": measured(bon("demo", "--out", str(run), "--prompts", str(prompts), "--n", str(n)), work)}
    out["report"] = measured(bon("report", "--run", str(run), "--out", str(work / f"report-{prompts}")), work)
    shutil.copytree(run, copy)
    out["tradeoff"] = measured(bon("tradeoff", "--run", str(copy), "--out", str(work / f"tradeoff-{prompts}")), work)
    shutil.rmtree(copy)
    out["view"] = measured(bon("view", "--run", str(run), "--out", str(work / f"view-{prompts}")), work)
    out["view"]["page_mb"] = first_page_bytes(work / f"view-{prompts}") / 2**20
    out["view"]["open_s"] = open_seconds(work / f"view-{prompts}" / "view.html")
    out["load_run"] = measured([sys.executable, "-c", LOAD_RUN, str(run)], work)
    return out


def files_study(work: Path, images: int, size: int) -> dict[str, dict[str, float]]:
    """``bon run`` on a study of ``images`` PNGs of ``size`` x ``size`` (one process: a call budget)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from _files_study import build_files_study

    config = build_files_study(work / f"files-{images}", images, size)
    return {"run": measured(bon("run", str(config), "--max-calls", "100000000"), work)}


def table(title: str, sizes: list[int], found: dict[int, dict[str, dict[str, float]]]) -> list[str]:
    base = sizes[0]
    lines = [f"{title}", f"| command | {' | '.join(f'{s}: wall s, CPU s, peak MiB' for s in sizes)} | "
             + " | ".join(f"x{s / base:g}: wall, CPU, memory" for s in sizes[1:]) + " |",
             "|---|" + "---:|" * (2 * len(sizes) - 1)]
    for command in found[base]:
        cells = [f"{f[command]['wall']:.1f}, {f[command]['cpu']:.1f}, {f[command]['mem']:.0f}" for f in (found[s] for s in sizes)]
        ratios = [", ".join(f"{found[s][command][k] / found[base][command][k]:.2f}x" for k in ("wall", "cpu", "mem"))
                  for s in sizes[1:]]
        lines.append(f"| {command} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    return lines


def targets(sizes: list[int], found: dict, images: list[int], files: dict) -> list[tuple[str, bool]]:
    """Issue 34's targets, on the first two sizes of each study."""
    checks = []
    if len(sizes) > 1:
        a, b = found[sizes[0]], found[sizes[1]]
        growth = sizes[1] / sizes[0]
        checks.append((f"demo peak memory at x{growth:g} within 1.5x of x1 ({b['demo']['mem']:.0f} vs {a['demo']['mem']:.0f} MiB)",
                       b["demo"]["mem"] <= 1.5 * a["demo"]["mem"]))
        for command in ("tradeoff", "load_run", "report"):
            ratio = b[command]["cpu"] / a[command]["cpu"]
            checks.append((f"{command} at x{growth:g} within {1.25 * growth:g}x the CPU time of x1 ({ratio:.2f}x)",
                           ratio <= 1.25 * growth))
        pa, pb = a["view"]["page_mb"], b["view"]["page_mb"]
        checks.append((f"view.html's first page the same size at x{growth:g} ({pb:.3f} vs {pa:.3f} MB, within 10%)",
                       pb <= 1.1 * pa))
    if len(images) > 1:
        a, b = files[images[0]]["run"]["mem"], files[images[1]]["run"]["mem"]
        checks.append((f"files study peak memory at {images[1]} images within 1.25x of {images[0]} ({b:.0f} vs {a:.0f} MiB)",
                       b <= 1.25 * a))
    return checks


def _seconds(value: float | None) -> str:
    return "no Chromium" if value is None else f"{value:.1f}"


def main() -> int:
    ap = parser(__doc__, prompts=[40, 160, 640], n=8, images=[320, 1280], size=1024,
                out=("", "work folder (default: a temporary one, removed unless --keep)"))
    ap.add_argument("--skip-files", action="store_true", help="Leave out the files-based study.")
    ap.add_argument("--skip-synthetic", action="store_true", help="Leave out the synthetic study.")
    ap.add_argument("--keep", action="store_true", help="Keep the work folder.")
    args = ap.parse_args()
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bon-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# bon scale: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; work folder {work}")
    try:
        found = {}
        sizes = [] if args.skip_synthetic else args.prompts
        for k in sizes:
            found[k] = synthetic(work, k, args.n)
            print(f"prompts {k}: " + ", ".join(f"{c} {f['wall']:.1f} s / {f['cpu']:.1f} CPU-s / {f['mem']:.0f} MiB"
                                              for c, f in found[k].items()), flush=True)
        files: dict[int, Any] = {}
        for images in [] if args.skip_files else args.images:
            files[images] = files_study(work, images, args.size)
            f = files[images]["run"]
            print(f"files study {images} images: run {f['wall']:.1f} s / {f['cpu']:.1f} CPU-s / {f['mem']:.0f} MiB", flush=True)
        if found:
            print()
            print("\n".join(table(f"Synthetic study (prompts per task; n = {args.n})", sizes, found)))
        if files:
            print()
            print("\n".join(table(f"Files study ({args.size} x {args.size} PNGs; images)", list(files), files)))
        if found:
            print("\nview.html first page (MB): " + ", ".join(f"{k}: {found[k]['view']['page_mb']:.3f}" for k in sizes))
            print("view.html opened in headless Chromium, first cards shown (wall s): "
                  + ", ".join(f"{k}: {_seconds(found[k]['view']['open_s'])}" for k in sizes))
        print(f"load average at the end: {os.getloadavg()[0]:.1f}\n")
        checks = targets(sizes, found, list(files), files)
        for text, ok in checks:
            print(f"{'PASS' if ok else 'FAIL'}  {text}")
        return 0 if all(ok for _, ok in checks) else 1
    finally:
        if not args.keep and not args.out:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
