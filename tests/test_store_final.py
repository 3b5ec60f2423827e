"""The store keeps only final answers, as they are made (issues 20 and 23): answers are stored part by
part (a judge that dies midway keeps what it answered), from forked workers while they run; transient
failures are never stored; missing answers of judges that sample are asked again with
``--retry-missing`` and still one answer per key; every answer records what makes it reproducible;
merging shard stores counts each answer once."""

from __future__ import annotations

import importlib.util
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import pytest

from bon.content import Content, Prompt
from bon.merge import _merge_stores
from bon.protocol import Comparison, Verdict
from bon.provenance import runtime_facts
from bon.referee import Referee
from bon.stages.pool import run_jobs
from bon.store import JudgmentStore
from conftest import OrderJudge

PROMPT = Prompt("p0", "t2i", Content.of("pick the largest number"))


def comparisons(n: int) -> list[Comparison]:
    return [Comparison(PROMPT, Content.of(str(i)), Content.of(str(i + 1))) for i in range(n)]


class DiesAfter(OrderJudge):
    """Answers ``parts`` judge calls, then its process "dies" (raises) in the middle of the next."""

    store_every = 10
    parts = 10**9  # set on an instance (not a constructor argument: that would be another identity)

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        if len(self.batches) >= self.parts:
            raise KeyboardInterrupt("killed")
        return super().judge(comparisons)


def test_a_judge_killed_midway_keeps_every_part_it_answered(tmp_path):
    store = JudgmentStore(tmp_path / "j.sqlite")
    judge = DiesAfter()
    judge.parts = 3
    with pytest.raises(KeyboardInterrupt):
        Referee(judge, store).ask(comparisons(45))
    assert judge.batches == [10, 10, 10]  # parts of store_every, each stored before the next was asked
    assert store.count() == 30
    again = Referee(DiesAfter(), store)
    verdicts = again.ask(comparisons(45))
    assert again.stats.calls_made == 15 and again.stats.calls_cached == 30  # never paid twice
    assert [v.better for v in verdicts] == ["B"] * 45 and store.count() == 45


class Parts:
    """An executor that answers in parts, as the Ray executor does (one part per worker batch)."""

    def __init__(self, size: int):
        self.size, self.seen = size, []

    def judge_parts(self, judge, comps):
        for start in range(0, len(comps), self.size):
            self.seen.append(JudgmentStore(self.path).count())  # what the driver had stored before this part
            yield start, judge.judge(comps[start : start + self.size])


def test_an_executor_answering_in_parts_has_each_part_stored_as_it_arrives(tmp_path):
    executor = Parts(4)
    executor.path = tmp_path / "j.sqlite"
    referee = Referee(OrderJudge(), JudgmentStore(executor.path), executor=executor)
    assert len(referee.ask(comparisons(10))) == 10
    assert executor.seen == [0, 4, 8] and referee.stats.calls_made == 10


def test_forked_workers_store_answers_while_they_run(tmp_path, monkeypatch):
    """The driver sees a worker's first answers before that worker has returned."""
    path, seen = tmp_path / "j.sqlite", tmp_path / "seen"
    JudgmentStore(path).close()

    def job(i: int) -> int:
        store = JudgmentStore(path)  # opened after the fork, in the worker
        Referee(OrderJudge(template=f"w{i}"), store).ask(comparisons(5))
        deadline = time.time() + 20
        while not seen.exists() and time.time() < deadline:  # the driver must see the answers first
            time.sleep(0.01)
        store.close()
        return int(seen.exists())

    # The watcher is a process, not a thread: a thread inside SQLite while the workers fork would leave
    # SQLite's mutex locked in the children (a deadlock that only shows under load).
    watch = (f"import sqlite3, time, pathlib\ndeadline = time.time() + 20\nwhile time.time() < deadline:\n"
             f"    with sqlite3.connect({str(path)!r}) as db:\n"
             f"        if db.execute('SELECT COUNT(DISTINCT judge_id) FROM judgments').fetchone()[0] == 2:\n"
             f"            pathlib.Path({str(seen)!r}).touch()\n            break\n    time.sleep(0.01)\n")
    watcher = subprocess.Popen([sys.executable, "-c", watch])
    assert list(run_jobs(job, 2, 2)) == [1, 1]
    assert watcher.wait(timeout=30) == 0


class Flaky(OrderJudge):
    """An API-like judge that samples: the first answer to each comparison fails (transiently, or
    unparseably), the next one is right."""

    samples_answers = True

    def __init__(self, transient: bool):
        super().__init__()
        self.transient, self.asked = transient, set()

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        out = []
        for c, right in zip(comparisons, super().judge(comparisons)):
            first = (c.a.text, c.b.text) not in self.asked
            self.asked.add((c.a.text, c.b.text))
            right.meta = {"cost_usd": 1.0}
            out.append(Verdict.failed("unparseable answer: 'hmm'", transient=self.transient, cost_usd=1.0) if first else right)
        return out


def _rows(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT prompt, a, b, sample, better, missing, invocation, cost_usd FROM judgments").fetchall()


def test_transient_failures_are_never_stored_and_a_rerun_stores_one_answer(tmp_path):
    path, judge = tmp_path / "j.sqlite", Flaky(transient=True)
    first = Referee(judge, JudgmentStore(path, invocation="one"))
    assert all(v.better is None for v in first.ask(comparisons(3))) and _rows(path) == []
    second = Referee(judge, JudgmentStore(path, invocation="two"))
    assert [v.better for v in second.ask(comparisons(3))] == ["B"] * 3
    assert len(_rows(path)) == 3 and {r[6] for r in _rows(path)} == {"two"}
    assert second.store.totals(second.judge_id, ["one", "two"])[""]["calls_made"] == 3  # counted once


def test_retry_missing_asks_again_once_and_keeps_one_answer_per_key(tmp_path):
    path, judge = tmp_path / "j.sqlite", Flaky(transient=False)
    Referee(judge, JudgmentStore(path, invocation="one")).ask(comparisons(2))
    assert [r[4:6] for r in _rows(path)] == [(None, "unparseable answer: 'hmm'")] * 2  # missing, with its reason
    plain = Referee(judge, JudgmentStore(path, invocation="two"))
    assert all(v.better is None for v in plain.ask(comparisons(2))) and plain.stats.calls_made == 0
    retry = Referee(judge, JudgmentStore(path, invocation="three"), retry_missing=True)
    assert [v.better for v in retry.ask(comparisons(2))] == ["B", "B"] and retry.stats.calls_made == 2
    retry.ask(comparisons(2))  # within one invocation a retried key is not asked again
    assert retry.stats.calls_made == 2
    rows = _rows(path)
    assert len(rows) == 2 and all(r[4] == "B" and r[5] is None and r[6] == "three" for r in rows)
    assert all(r[7] == 2.0 for r in rows)  # both paid answers' costs, on the one answer kept
    assert retry.store.totals(retry.judge_id, ["one", "two", "three"])[""]["calls_made"] == 2
    later = Referee(judge, JudgmentStore(path, invocation="four"), retry_missing=True)
    later.ask(comparisons(2))
    assert later.stats.calls_made == 0  # a real answer is final


def test_retry_missing_leaves_judges_that_do_not_sample_alone(tmp_path):
    path = tmp_path / "j.sqlite"
    judge = OrderJudge(fail_on="1")
    Referee(judge, JudgmentStore(path, invocation="one")).ask(comparisons(2))
    retry = Referee(judge, JudgmentStore(path, invocation="two"), retry_missing=True)
    assert [v.better for v in retry.ask(comparisons(2))] == [None, None] and retry.stats.calls_made == 0


def test_every_answer_records_what_makes_it_reproducible(tmp_path):
    from judges.openai_compatible import OpenAICompatibleJudge

    judge = OpenAICompatibleJudge(model="judge-model", base_url="http://127.0.0.1:9/v1", api_key_env=None,
                                  temperature=0.7, seed=3, concurrency=5, preflight=False)
    store = JudgmentStore(tmp_path / "j.sqlite")
    jid = store.register(judge.identity(), runtime=runtime_facts(judge))
    key = (PROMPT.content.digest, Content.of("1").digest, Content.of("2").digest, 0)
    store.put_many(jid, [(key, Verdict("A", 5))])
    record = store.provenance(jid, key)
    assert record["identity"]["model"] == "judge-model" and record["identity"]["sampling"] == {"temperature": 0.7, "seed": 3}
    assert (record["prompt"], record["a"], record["b"], record["sample"]) == key
    runtime = record["runtime"]
    assert runtime["packages"]["python"] and "bon" in runtime["packages"] and runtime["platform"]
    assert runtime["backend"]["class"] == "judges.openai_compatible.OpenAICompatibleJudge"
    assert runtime["backend"]["concurrency"] == 5 and "api_key_env" in runtime["backend"]
    assert judge.samples_answers and judge.store_every == 20  # four rounds of the requests in flight


OLD_SHARD = """
CREATE TABLE judges (judge_id TEXT PRIMARY KEY, identity TEXT NOT NULL);
CREATE TABLE judgments (judge_id TEXT NOT NULL, prompt TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL,
    sample INTEGER NOT NULL, better TEXT, score INTEGER, missing TEXT, meta TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (judge_id, prompt, a, b, sample)) WITHOUT ROWID;
INSERT INTO judges VALUES ('j', '{}');
INSERT INTO judgments VALUES ('j', 'p1', 'a', 'b', 0, 'A', 5, NULL, '{}', 1.0);
INSERT INTO judgments VALUES ('j', 'p9', 'a', 'b', 0, 'B', 2, NULL, '{}', 1.0);
"""


def test_merge_joins_shard_stores_counting_each_answer_once(tmp_path):
    shards = []
    for i, prompts in enumerate((["p0", "p1"], ["p1", "p2"])):  # p1 in both shards
        store = JudgmentStore(tmp_path / f"s{i}.sqlite", invocation=f"shard{i}")
        store.register({"name": "j"})
        store.put_many("j", [((p, "a", "b", 0), Verdict("A", 5, meta={"cost_usd": 1.0})) for p in prompts], stage="mmrb2")
        store.close()
        shards.append(tmp_path / f"s{i}.sqlite")
    with sqlite3.connect(tmp_path / "old.sqlite") as db:  # a shard written by an older bon: fewer columns
        db.executescript(OLD_SHARD)
    shards.append(tmp_path / "old.sqlite")
    target = tmp_path / "merged.sqlite"
    for _ in range(2):  # merging again adds nothing
        _merge_stores(shards, target)
        merged = JudgmentStore(target)
        assert merged.count("j") == 4  # p0, p1, p2 and the old shard's p9
        assert merged.totals("j", ["shard0", "shard1"])["mmrb2"]["calls_made"] == 3
        assert merged.get_many("j", [("p9", "a", "b", 0)])[("p9", "a", "b", 0)].better == "B"
        merged.close()


API_KEY_ENV = "BON_TEST_STORE_KEY"
GOOD = '{"reasoning": "A is closer", "score": 5, "better_response": "A"}'


@pytest.mark.skipif(importlib.util.find_spec("openai") is None, reason="the openai package is not installed")
def test_a_study_with_transient_failures_then_a_rerun_stores_and_counts_each_answer_once(tmp_path, monkeypatch):
    import json

    import yaml

    from bon.cli import main
    from openai_server import OpenAIServer

    monkeypatch.setenv(API_KEY_ENV, "sk-store-test")
    with OpenAIServer(fail=3, reply=lambda body: GOOD) as server:  # the first three requests: HTTP 503
        config = tmp_path / "study.yaml"
        config.write_text(yaml.safe_dump({
            "out": str(tmp_path / "run"), "seed": 2, "n": 2, "tasks": ["t2i"], "suite": {"name": "synthetic", "per_task": 2},
            "preference": {"prompts_per_task": 1, "pairs_per_prompt": 1},
            "generators": [{"name": "synthetic", "label": "strong", "options": {"skill": "strong"}}],
            "verifier": {"name": "synthetic"},
            "judges": [{"name": "openai-compatible", "label": "api", "options": {
                "model": "judge-model", "base_url": server.url, "api_key_env": API_KEY_ENV, "max_retries": 0,
                "concurrency": 1, "preflight": False}}]}))
        first = main(["run", str(config)])
        assert main(["run", str(config)]) == 0
        paid = len(server.requests) - 3
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())["judges"]["api"]
    with sqlite3.connect(tmp_path / "run" / "judgments.sqlite") as db:
        rows = db.execute("SELECT COUNT(*), COUNT(DISTINCT prompt || a || b || sample), SUM(better IS NULL) FROM judgments").fetchone()
    assert rows == (paid, paid, 0)  # every answer the server gave, once per key, none a stored failure
    assert stats["total"]["calls_made"] == paid  # the three failed requests are not counted
    assert stats["last_invocation"]["calls_made"] == 3  # the rerun asked exactly the failed ones again
    assert first == 3  # "3 items pending because of transient failures (judge calls 3); rerun to continue"


@pytest.mark.skipif(importlib.util.find_spec("openai") is None, reason="the openai package is not installed")
def test_mmrb2_judge_retry_missing_asks_unparseable_answers_again(tmp_path, monkeypatch, capsys):
    import json

    from bon.cli import main
    from openai_server import OpenAIServer
    from tiny_models import build_bench

    monkeypatch.setenv(API_KEY_ENV, "sk-store-test")
    seen: set[str] = set()

    def garbage_first(body: dict) -> str:  # a sampling API: the first answer to a request is unreadable
        key = json.dumps(body, sort_keys=True)
        first = key not in seen
        seen.add(key)
        return "I could not possibly choose." if first else GOOD

    bench = build_bench(tmp_path / "bench", n_pairs=2)
    out = tmp_path / "run" / "api_t2i.json"
    with OpenAIServer(reply=garbage_first) as server:
        argv = ["mmrb2", "judge", "--judge", "openai-compatible:judge-model", "--bench-dir", str(bench), "--task", "t2i",
                "--out-file", str(out)] + [f"--judge-option={k}={v}" for k, v in
                                           {"base_url": server.url, "api_key_env": API_KEY_ENV, "preflight": False}.items()]
        for extra, made in (([], 4), ([], 0), (["--retry-missing"], 4), (["--retry-missing"], 0)):
            assert main(argv + extra) == 0
            assert f"calls made {made}," in capsys.readouterr().out
    answers = [d["judgement"] for entry in json.loads(out.read_text()).values() for d in entry["forward"] + entry["reverse"]]
    assert answers == ["A"] * 4
    with sqlite3.connect(tmp_path / "run" / "judgments.sqlite") as db:
        assert db.execute("SELECT COUNT(*), SUM(better IS NULL) FROM judgments").fetchone() == (4, 0)


DRIVER = """
import os, sys, time
from bon.stages.pool import run_jobs

def job(i):
    with open(sys.argv[1], "a") as f:
        f.write(f"{os.getpid()}\\n")
    time.sleep(60)

list(run_jobs(job, 2, 2))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers (and prctl) are Linux-only")
def test_workers_die_with_their_driver(tmp_path):
    """A driver killed alone (an OOM kill, `kill -9 PID`) leaves no worker judging on beside a rerun."""
    import os
    import signal
    import subprocess

    pids = tmp_path / "pids"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(pids)], env={**os.environ, "BON_WORKERS": "2"})
    deadline = time.time() + 30
    while time.time() < deadline and len(pids.read_text().split() if pids.exists() else []) < 2:
        time.sleep(0.02)
    workers = [int(p) for p in pids.read_text().split()]
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    deadline = time.time() + 10
    alive = workers
    while alive and time.time() < deadline:
        time.sleep(0.05)
        alive = [p for p in workers if _running(p)]
    assert alive == []


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie is dead, only not yet reaped
    except FileNotFoundError:
        return False
