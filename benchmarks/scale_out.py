"""Scaling of the Ray executor at 1, 2, 4, 8 workers (target: >= 80% of linear at 8 workers per stage).

    PYTHONPATH=. python benchmarks/scale_out.py [--workers 1 2 4 8] [--prompts 32] [--n 8]

Each stage runs through bon's own stage code (``generate`` writing candidates to a run folder,
``verify`` writing scores, knockout ``select`` through the referee and the judgment store) with the
Ray executor, but the plugins are latency-bound stand-ins: every call sleeps the time a GPU model
would take (``--gen-latency`` per prompt's N images, ``--verify-latency`` per candidate,
``--judge-latency`` per comparison), so this 2-core machine can model many GPUs. Printed per stage
and worker count: wall time, throughput, speed-up, efficiency (speed-up / workers) and per-task
overhead = (workers x wall - total sleep) / tasks, i.e. worker time per task not spent "on the GPU".
Actors reserve fractional CPUs so the driver keeps one (on 2 CPUs, actors that reserve every CPU starve it).
"""

from __future__ import annotations

import tempfile
import time
import zlib
from pathlib import Path
from types import SimpleNamespace

from PIL import Image

from _common import parser, timed
from bon.content import Candidate, Content, Prompt
from bon.executors.ray import RayExecutor
from bon.plugins import Generator, PairwiseJudge, Score, Verifier
from bon.protocol import Verdict
from bon.referee import Referee
from bon.runfolder import RunFolder
from bon.selection.knockout import Knockout
from bon.stages.generate import generate
from bon.stages.select import select
from bon.stages.verify import verify
from bon.store import JudgmentStore


class Sleeps:
    """A latency-bound stand-in that is also its own plugin spec (duck-types :class:`bon.config.PluginSpec`):
    each worker gets a pickled copy and builds nothing."""

    def __init__(self, label: str, latency: float):
        self.name = self.label = label
        self.latency = latency

    def create(self, kind: str):
        return self


class SleepGenerator(Sleeps, Generator):
    def sample(self, prompt, seeds):
        time.sleep(self.latency)  # one batched pipeline call for the prompt's N images
        return [Candidate(prompt.id, k, self.name, s, Content.of(Image.new("RGB", (8, 8), (s % 256, k * 30, 0))))
                for k, s in enumerate(seeds)]


class SleepVerifier(Sleeps, Verifier):
    def score(self, prompt, candidate):
        time.sleep(self.latency)
        return Score((candidate.seed % 1000) / 1000)


class SleepJudge(Sleeps, PairwiseJudge):
    def judge(self, comparisons):
        time.sleep(self.latency * len(comparisons))  # a batch costs its size: latency-bound, not batched
        return [Verdict("A" if zlib.crc32((c.a.digest + c.b.digest).encode()) % 2 else "B", 4) for c in comparisons]


class CountingExecutor(RayExecutor):
    """Counts the Ray tasks the stages send (the denominator of the per-task overhead)."""

    tasks = 0

    def _chunks(self, items: list) -> list[list]:
        chunks = super()._chunks(items)
        self.tasks += len(chunks)
        return chunks


def run_stages(workers: int, args, root: Path) -> dict[str, tuple[float, int, float]]:
    """(wall seconds, tasks, total sleep seconds) per stage for one worker count."""
    gen, ver, jud = (SleepGenerator("gen", args.gen_latency), SleepVerifier("ver", args.verify_latency),
                     SleepJudge("judge", args.judge_latency))
    study = SimpleNamespace(generators=[gen], judges=[jud], verifier=ver)
    executor = CountingExecutor(study, address="local", workers=workers, batch=args.batch)
    try:
        executor.pool()  # actor start-up is a one-off, not part of a stage's throughput
        run = RunFolder(root / f"w{workers}")
        prompts = [Prompt(f"p{i:04d}", "t2i", Content.of(f"prompt {i}")) for i in range(args.prompts)]
        out: dict[str, tuple[float, int, float]] = {}
        candidates, wall = timed(generate, run, gen, prompts, args.n, 0, executor)
        out["generate"] = (wall, len(prompts), len(prompts) * args.gen_latency)
        everything = [c for cands in candidates.values() for c in cands]
        _, wall = timed(verify, run, ver, {p.id: p for p in prompts}, everything, executor=executor)
        out["verify"] = (wall, executor.tasks, len(everything) * args.verify_latency)
        store = JudgmentStore(run.store)
        referee = Referee(jud, store, executor=executor)
        _, wall = timed(select, referee, Knockout(), prompts, {"gen": candidates}, 0)
        out["judge"] = (wall, executor.tasks - out["verify"][1], referee.stats.calls_made * args.judge_latency)
        store.close()
        return out
    finally:
        executor.close()


def main() -> None:
    args = parser(__doc__, workers=[1, 2, 4, 8], prompts=32, n=8,
                  batch=(16, "items per Ray task (verification, judging)"),
                  gen_latency=(0.25, "seconds per prompt (N images)"),
                  verify_latency=(0.02, "seconds per candidate"),
                  judge_latency=(0.02, "seconds per comparison")).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {w: run_stages(w, args, Path(tmp)) for w in args.workers}
    base = args.workers[0]
    print(f"{args.prompts} prompts x N={args.n}; stand-in latencies: generate {args.gen_latency}s/prompt, "
          f"verify {args.verify_latency}s/candidate, judge {args.judge_latency}s/comparison")
    print(f"{'stage':<9}{'workers':>8}{'tasks':>7}{'wall s':>8}{'items/s':>9}{'speed-up':>9}{'efficiency':>11}{'overhead/task':>15}")
    for stage in ("generate", "verify", "judge"):
        items = {"generate": args.prompts, "verify": args.prompts * args.n}.get(stage)
        for w in args.workers:
            wall, tasks, work = results[w][stage]
            count = items or round(work / args.judge_latency)
            speedup = results[base][stage][0] / wall * base
            overhead = (w * wall - work) / tasks
            print(f"{stage:<9}{w:>8}{tasks:>7}{wall:>8.2f}{count / wall:>9.1f}{speedup:>9.2f}{speedup / w:>10.0%}"
                  f"{overhead * 1000:>12.1f} ms")


if __name__ == "__main__":
    main()
