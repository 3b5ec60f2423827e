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
