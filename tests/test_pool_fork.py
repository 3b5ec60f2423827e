"""Forked workers after the driver used OpenCV's thread pool (a hang found when the official-metric
tests, which resize with OpenCV, ran before a study with workers in one pytest process)."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).parents[1]

DRIVER = textwrap.dedent("""
    import cv2, numpy as np
    from bon.stages.pool import run_jobs
    cv2.setNumThreads(4)
    big = np.random.default_rng(0).random((2000, 2000)).astype("float32")
    for _ in range(5):  # start OpenCV's pool in the driver
        cv2.resize(big, (1500, 1500))
    before = cv2.getNumThreads()
    def job(i):
        return float(cv2.resize(big, (100 + i, 100)).sum() > 0)
    print(sum(run_jobs(job, 4, 2)), before == cv2.getNumThreads())
""")


def test_workers_forked_after_opencv_threads_finish_and_the_driver_keeps_its_pool():
    done = subprocess.run([sys.executable, "-c", DRIVER], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4.0", "True"]


def test_costliest_jobs_start_first_and_results_still_come_in_index_order(monkeypatch):
    """run_jobs with costs hands the jobs out costliest first (the pool stand-in runs them in the order
    handed out) and still yields job(0), job(1), ... in index order."""
    import contextlib

    from bon.stages import pool

    ran: list[int] = []

    @contextlib.contextmanager
    def in_order(job, jobs, workers):
        yield (job(k) for k in range(jobs))

    monkeypatch.setattr(pool, "jobs_started", in_order)

    def job(i: int) -> str:
        ran.append(i)
        return f"job {i}"

    assert list(pool.run_jobs(job, 4, 2, costs=[1.0, 5.0, 2.0, 9.0])) == ["job 0", "job 1", "job 2", "job 3"]
    assert ran == [3, 1, 2, 0]
    ran.clear()
    assert list(pool.run_jobs(job, 3, 2)) == ["job 0", "job 1", "job 2"] and ran == [0, 1, 2]


def test_jobs_started_lets_the_driver_work_while_workers_run_and_run_named_keeps_names():
    from bon.stages.pool import jobs_started, run_named

    with jobs_started(lambda i: i * i, 3, 2) as results:
        mine = sum(range(1000))  # the driver's own work, meanwhile
        assert list(results) == [0, 1, 4]
    assert mine == 499500
    assert run_named({"a": lambda: "x", "b": lambda: [1, 2]}, workers=2) == {"a": "x", "b": [1, 2]}
    assert run_named({"a": lambda: 3}, workers=1) == {"a": 3}


def test_run_named_starts_the_costliest_first_runs_meanwhile_in_the_driver_and_keeps_the_names_order(monkeypatch):
    import contextlib
    import os

    from bon.stages import pool

    events: list[str] = []

    @contextlib.contextmanager
    def in_order(job, jobs, workers):
        yield (job(k) for k in range(jobs))

    monkeypatch.setattr(pool, "jobs_started", in_order)
    jobs = {name: (lambda name=name: events.append(name) or name.upper()) for name in ("a", "b", "c")}
    out = pool.run_named(jobs, workers=2, costs={"c": 3.0, "a": 0.5}, meanwhile=lambda: events.append("meanwhile"))
    assert list(out.items()) == [("a", "A"), ("b", "B"), ("c", "C")]  # the caller's order, whatever ran first
    assert events == ["meanwhile", "c", "b", "a"]  # b counts 1: between c's 3 and a's 0.5
    monkeypatch.undo()
    driver = os.getpid()  # forked for real: the driver's own work runs here, the jobs in the workers
    seen = pool.run_named({"x": os.getpid, "y": os.getpid}, workers=2, meanwhile=lambda: events.append(os.getpid()))
    assert events[-1] == driver and driver not in seen.values()
