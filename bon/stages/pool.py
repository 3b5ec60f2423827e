"""Cheap CPU plugins in parallel: one forked worker per job, every shared file written by the driver.

A plugin opts in with the class attribute ``forkable = True`` (a pure-CPU plugin that holds no model
worth sharing and no open connection: the synthetic world's judges, generators and verifier), and may
add ``relative_cost`` (default 1), a rough guess of its CPU time next to its kind's others: the costliest
start first. Real models never fork: two copies of a VLM would not fit, and a GPU context does not
survive a fork.

A worker that judges opens its own connection to the judgment store after the fork (SQLite in WAL
mode takes writers from several processes) and stores its answers as it makes them, so a killed
study keeps them; the store holds the same rows as when one process does everything (its keys are
content, and a stored answer is never replaced). Forking (not spawning) means workers inherit what
the driver has already computed (prompts, candidates, perception caches) for free; off Linux (fork
is unsafe there), or when a shared call budget needs one order of calls, everything runs in the
driver as before. The driver holds no open store connection while the workers are forked (a SQLite
connection must not cross a fork).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterator, Mapping, Sequence

WORKERS_ENV = "BON_WORKERS"  # 1 = no worker processes; default: one per usable core


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(plugins: Sequence[Any], jobs: int) -> int:
    """How many worker processes to use for ``jobs`` jobs over ``plugins`` (1 = run in the driver)."""
    if jobs < 2 or not all(getattr(p, "forkable", False) for p in plugins):
        return 1
    return cpu_workers(jobs)


_JOB: Callable[[int], Any] | None = None  # set in the driver just before forking
_LIVE: set[ProcessPoolExecutor] = set()  # pools whose workers may still run: what Ctrl-C must stop


def _worker_setup(driver: int) -> None:
    """Run in each worker right after the fork. Ctrl-C is the driver's to handle (it stops every worker
    at once, :func:`_stop_workers`); the worker dies with the driver (a killed driver
    leaves no orphan judging on and writing to the store next to a rerun), and a thread pool the
    parent had started does not exist in the child, so torch is told to work on the calling thread (one
    worker per core already uses every core). OpenCV's pool is emptied by the driver before the fork
    (:func:`_opencv_single_threaded`): resizing it here would wait forever on the parent's threads."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(driver)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _die_with_parent(driver: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: an orphan then ends when it next reads its dead pipe
        return
    if os.getppid() != driver:  # the driver died before the request took effect
        os._exit(1)


@contextlib.contextmanager
def _opencv_single_threaded() -> Iterator[None]:
    """OpenCV keeps a thread pool; a child forked while it runs inherits its locks but not its threads,
    and any later change of the pool's size in the child hangs (pthread_cond_destroy on a condition the
    vanished threads held). So the driver empties the pool before forking and restores it after."""
    cv2 = sys.modules.get("cv2")
    if cv2 is None:
        yield
        return
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(threads)


@contextlib.contextmanager
def _gc_frozen() -> Iterator[None]:
    """Fork with the driver's objects out of the garbage collector's sight (``gc.freeze``): a worker's
    collections then skip everything it inherited instead of walking it, which costs time and, by
    touching every object, copies the driver's memory page by page into each worker."""
    import gc

    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _call(index: int) -> Any:
    assert _JOB is not None
    return _JOB(index)


def run_jobs(job: Callable[[int], Any], jobs: int, workers: int, costs: Sequence[float] | None = None) -> Iterator[Any]:
    """``job(0) .. job(jobs - 1)`` in ``workers`` forked processes, results yielded in index order.

    The job is handed to the children by fork (it may close over anything, picklable or not);
    only its results travel back by pickle. Every worker is forked before the first result is
    yielded, so what the caller opens after that never crosses a fork. With ``costs`` (a rough guess
    of each job's CPU time) the costliest jobs start first (longest processing time first: when a few
    jobs dominate, the stage ends sooner); the results still come in index order.
    """
    if workers <= 1:
        for i in range(jobs):
            yield job(i)
        return
    order = sorted(range(jobs), key=lambda i: -costs[i]) if costs is not None else list(range(jobs))
    with jobs_started(lambda k: job(order[k]), jobs, workers) as results:
        done: dict[int, Any] = {}
        started = iter(order)  # the job index of each result, in the order they come
        for i in range(jobs):
            while i not in done:
                done[next(started)] = next(results)
            yield done.pop(i)


@contextlib.contextmanager
def jobs_started(job: Callable[[int], Any], jobs: int, workers: int) -> Iterator[Iterator[Any]]:
    """Start ``job(0) .. job(jobs - 1)`` in ``workers`` forked processes and give the block an iterator of
    their results (index order): the driver does other work in the block while the workers run, then
    reads the results. With ``workers <= 1`` the iterator runs each job in the driver as it is read."""
    global _JOB
    if workers <= 1:
        yield (job(i) for i in range(jobs))
        return
    _JOB = job
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_setup, initargs=(os.getpid(),))
    _LIVE.add(pool)
    try:
        with pool:
            try:
                with _opencv_single_threaded(), _gc_frozen():  # the fork start method forks every worker on the first submit
                    futures = [pool.submit(_call, i) for i in range(jobs)]
                yield (future.result() for future in futures)
            except BaseException:  # Ctrl-C, an error, a reader that stopped: nobody reads the rest
                _stop_workers(pool)
                raise
    finally:
        _LIVE.discard(pool)
        _JOB = None


def stop_all_workers() -> None:
    """Stop the workers of every pool still open. An exception raised in the code that reads
    :func:`run_jobs` (Ctrl-C while the driver writes a result) leaves that generator suspended, its pool
    alive until the generator is collected, and at exit Python would wait for every queued job: the
    command's entry point calls this before it reports the interruption or error and exits."""
    for pool in list(_LIVE):
        _stop_workers(pool)
        _LIVE.discard(pool)


def _stop_workers(pool: ProcessPoolExecutor, grace_s: float = 0.5) -> None:
    """End every worker of ``pool`` now (SIGTERM, then SIGKILL after ``grace_s``) and drop its queued
    jobs: after Ctrl-C or a failed stage no worker goes on computing, printing or writing. What a
    worker stored before is kept (the store is crash-safe) and a rerun resumes from it."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(grace_s)
        if process.is_alive():
            process.kill()
            process.join(grace_s)


def run_named(jobs: Mapping[str, Callable[[], Any]], workers: int | None = None,
              costs: Mapping[str, float] | None = None, meanwhile: Callable[[], Any] | None = None) -> dict[str, Any]:
    """``{name: job()}`` for independent jobs, run side by side in forked workers (one per usable core, at
    most one per job; ``BON_WORKERS=1`` or off Linux: one after another in the driver). For pure
    computations whose results pickle (tables, dicts): the report's independent statistics. ``costs``
    (name -> rough CPU time, default 1) starts the costliest first; ``meanwhile`` is work for the driver
    while the workers run (it would otherwise only wait), done before any job when there are no workers."""
    order = sorted(jobs, key=lambda name: -(costs or {}).get(name, 1.0))
    with named_jobs_started({name: jobs[name] for name in order}, workers) as finished:
        if meanwhile is not None:
            meanwhile()
        done = finished()
    return {name: done[name] for name in jobs}


@contextlib.contextmanager
def named_jobs_started(jobs: Mapping[str, Callable[[], Any]],
                       workers: int | None = None) -> Iterator[Callable[[], dict[str, Any]]]:
    """Start ``{name: job}`` in forked workers (:func:`jobs_started`; default: one per usable core, at most one
    per job; one job alone runs in this process) and give the block a function that waits for their results
    as ``{name: result}``: this process does its own work in the block meanwhile."""
    names = list(jobs)
    count = cpu_workers(len(names)) if workers is None else workers
    with jobs_started(lambda k: jobs[names[k]](), len(names), count) as results:
        yield lambda: dict(zip(names, results))


def cpu_workers(jobs: int) -> int:
    """Worker processes for ``jobs`` independent pure-CPU jobs: one per usable core (``BON_WORKERS``
    overrides), at most one per job; 1 (the driver alone) off Linux."""
    if not sys.platform.startswith("linux"):
        return 1
    wanted = os.environ.get(WORKERS_ENV, "")
    cores = int(wanted) if wanted.isdigit() and int(wanted) > 0 else usable_cores()
    return max(1, min(cores, jobs))
