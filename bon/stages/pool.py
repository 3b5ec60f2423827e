"""Cheap CPU plugins in parallel: one forked worker per job, every shared file written by the driver.

A plugin opts in with the class attribute ``forkable = True`` (a pure-CPU plugin that holds no model
worth sharing and no open connection: the synthetic world's judges, generators and verifier). Real
models never fork: two copies of a VLM would not fit, and a GPU context does not survive a fork.

Workers read the judgment store but never write it: a :class:`BufferedStore` keeps their new
verdicts in memory and the driver stores them, in judge order, when each worker returns. Forking
(not spawning) means workers inherit what the driver has already computed (prompts, candidates,
perception caches) for free; off Linux (fork is unsafe there), or when a shared call budget needs one order of
calls, everything runs in the driver as before.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from bon.plugins import Score
from bon.protocol import Verdict
from bon.store import JudgmentStore, Key, judge_id

WORKERS_ENV = "BON_WORKERS"  # 1 = no worker processes; default: one per usable core


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(plugins: Sequence[Any], jobs: int) -> int:
    """How many worker processes to use for ``jobs`` jobs over ``plugins`` (1 = run in the driver)."""
    if jobs < 2 or not sys.platform.startswith("linux"):  # fork is unsafe with macOS system libraries
        return 1
    if not all(getattr(p, "forkable", False) for p in plugins):
        return 1
    wanted = os.environ.get(WORKERS_ENV)
    cores = int(wanted) if wanted and wanted.isdigit() and int(wanted) > 0 else usable_cores()
    return max(1, min(cores, jobs))


_JOB: Callable[[int], Any] | None = None  # set in the driver just before forking


def _single_threaded_libraries() -> None:
    """Run in each worker right after the fork: a thread pool the parent had started does not exist
    in the child, so libraries that keep one are told to work on the calling thread (one worker per
    core already uses every core)."""
    cv2 = sys.modules.get("cv2")
    if cv2 is not None:
        cv2.setNumThreads(1)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _call(index: int) -> Any:
    assert _JOB is not None
    return _JOB(index)


def run_jobs(job: Callable[[int], Any], jobs: int, workers: int) -> Iterator[Any]:
    """``job(0) .. job(jobs - 1)`` in ``workers`` forked processes, results yielded in index order.

    The job is handed to the children by fork (it may close over anything, picklable or not);
    only its results travel back by pickle.
    """
    global _JOB
    if workers <= 1:
        for i in range(jobs):
            yield job(i)
        return
    _JOB = job
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_single_threaded_libraries) as pool:
            futures = [pool.submit(_call, i) for i in range(jobs)]
            for future in futures:
                yield future.result()
    finally:
        _JOB = None


class BufferedStore(JudgmentStore):
    """A read-only view of a judgment store that keeps new verdicts and scores in memory.

    Used in worker processes: the driver later writes :attr:`verdicts` and :attr:`scores` to the
    real store with :meth:`flush_into`.
    """

    def __init__(self, path: Path):  # not super().__init__: that would create tables and switch modes
        self.path = Path(path)
        self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=60, check_same_thread=False)
        self.verdicts: dict[str, dict[Key, tuple[Verdict, str, float]]] = {}  # answer, stage, seconds
        self.scores: dict[str, dict[tuple[str, str, int], tuple[Score, str, float]]] = {}
        self.identities: list[dict[str, Any]] = []

    def register(self, identity: dict[str, Any]) -> str:
        self.identities.append(identity)
        return judge_id(identity)

    def get_many(self, jid: str, keys: Sequence[Key]) -> dict[Key, Verdict]:
        mine = self.verdicts.get(jid, {})
        found = super().get_many(jid, [k for k in keys if k not in mine])
        found.update({k: mine[k][0] for k in keys if k in mine})
        return found

    def put_many(self, jid: str, items, stage: str = "", seconds_each: float = 0.0) -> None:
        self.verdicts.setdefault(jid, {}).update((k, (v, stage, seconds_each)) for k, v in items if not v.transient)

    def get_scores(self, jid: str, keys: Sequence[tuple[str, str, int]]) -> dict[tuple[str, str, int], Score]:
        mine = self.scores.get(jid, {})
        found = super().get_scores(jid, [k for k in keys if k not in mine])
        found.update({k: mine[k][0] for k in keys if k in mine})
        return found

    def put_scores(self, jid: str, items, stage: str = "", seconds_each: float = 0.0) -> None:
        self.scores.setdefault(jid, {}).update((k, (v, stage, seconds_each)) for k, v in items)

    def pending(self) -> dict[str, Any]:
        """What the driver must store (picklable): each answer with the stage and seconds it cost."""
        return {"identities": self.identities, "verdicts": self.verdicts, "scores": self.scores}


def flush_into(store: JudgmentStore, pending: dict[str, Any]) -> None:
    """Write a worker's buffered judgments into the real store, one transaction per batch of calls
    (answers of one batch share their stage and seconds), so costs add up as in the driver."""
    for identity in pending["identities"]:
        store.register(identity)
    for table, put in (("verdicts", store.put_many), ("scores", store.put_scores)):
        for jid, answers in pending[table].items():
            batches: dict[tuple[str, float], list] = {}
            for key, (answer, stage, seconds) in answers.items():
                batches.setdefault((stage, seconds), []).append((key, answer))
            for (stage, seconds), items in batches.items():
                put(jid, items, stage=stage, seconds_each=seconds)
