"""The judgment store: keys, concurrent writers, and strategies against a judge with known truth."""

import multiprocessing as mp
import sqlite3

import pytest

from bon.protocol import Verdict
from bon.selection.knockout import Knockout
from bon.selection.round_robin import RoundRobin
from bon.simulate import NoisyJudge, true_best_rate
from bon.store import JudgmentStore, judge_id


def _writer(path, worker, rows):
    store = JudgmentStore(path)
    jid = store.register({"name": f"w{worker}"})
    for i in range(rows):
        store.put_many(jid, [((f"p{i}", "a", "b", 0), Verdict("A", 5, meta={"worker": worker}))])
    store.close()


def test_parallel_writer_processes_lose_nothing(tmp_path):
    path = tmp_path / "j.sqlite"
    JudgmentStore(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 150)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0] == 600
        assert db.execute("SELECT COUNT(DISTINCT judge_id) FROM judgments").fetchone()[0] == 4


def test_identity_settings_change_the_key():
    base = {"name": "vlm", "model": "m", "template": "abc", "temperature": 0.0}
    assert judge_id(base) == judge_id(dict(reversed(list(base.items()))))
    assert judge_id(base) != judge_id({**base, "template": "abd"})
    assert judge_id(base) != judge_id({**base, "temperature": 0.7})


def test_transient_failures_are_retried_on_a_later_run(tmp_path):
    store = JudgmentStore(tmp_path / "j.sqlite")
    jid = store.register({"name": "api"})
    store.put_many(jid, [(("p", "a", "b", 0), Verdict.failed("HTTP 429", transient=True)),
                         (("p", "a", "c", 0), Verdict.failed("unparseable: 'hmm'"))])
    found = store.get_many(jid, [("p", "a", "b", 0), ("p", "a", "c", 0)])
    assert list(found) == [("p", "a", "c", 0)] and found[("p", "a", "c", 0)].missing == "unparseable: 'hmm'"


@pytest.mark.parametrize("strategy", [Knockout(), RoundRobin("copeland"), RoundRobin("borda"), RoundRobin("bradley-terry")],
                         ids=lambda s: getattr(s, "aggregate", s.name))
def test_every_strategy_finds_the_best_with_a_noiseless_judge(tmp_path, strategy):
    rate, _ = true_best_rate(strategy, NoisyJudge(noise=0.0), 30, 7, tmp_path / "j.sqlite")
    assert rate == 1.0


def test_round_robin_beats_knockout_with_a_noisy_judge(tmp_path):
    rates = {}
    for label, strategy in {"ko": Knockout(), "copeland": RoundRobin("copeland"), "bt": RoundRobin("bradley-terry")}.items():
        rates[label], calls = true_best_rate(strategy, NoisyJudge(noise=0.5), 200, 8, tmp_path / f"{label}.sqlite")
        assert calls == (14 if label == "ko" else 56)
    assert rates["copeland"] >= rates["ko"] and rates["bt"] >= rates["ko"]
    assert 0.2 < rates["ko"] < 0.9  # noisy enough to matter


OLD_SCHEMA = """
CREATE TABLE judges (judge_id TEXT PRIMARY KEY, identity TEXT NOT NULL);
CREATE TABLE judgments (judge_id TEXT NOT NULL, prompt TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL,
    sample INTEGER NOT NULL, better TEXT, score INTEGER, missing TEXT, meta TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (judge_id, prompt, a, b, sample)) WITHOUT ROWID;
CREATE TABLE scores (judge_id TEXT NOT NULL, prompt TEXT NOT NULL, response TEXT NOT NULL, sample INTEGER NOT NULL,
    value REAL, missing TEXT, meta TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (judge_id, prompt, response, sample)) WITHOUT ROWID;
"""


def test_old_store_is_migrated_and_keeps_its_answers(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        db.execute("INSERT INTO judgments VALUES ('j', 'p', 'a', 'b', 0, 'A', 5, NULL, '{}', 1.0)")
    store = JudgmentStore(path)
    assert store.get_many("j", [("p", "a", "b", 0)])[("p", "a", "b", 0)].better == "A"
    store.put_many("j", [(("p", "b", "a", 0), Verdict("B", 2, meta={"usage": {"input_tokens": 7, "output_tokens": 3}, "cost_usd": 0.5}))],
                   stage="selection", seconds_each=0.25)
    totals = store.totals("j", [store.invocation])
    assert totals == {"selection": {"calls_made": 1, "missing_made": 0, "judge_seconds": 0.25, "input_tokens": 7,
                                    "output_tokens": 3, "cost_usd": 0.5, "first": totals["selection"]["first"],
                                    "last": totals["selection"]["last"]}}
    store.close()
    with sqlite3.connect(path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(judgments)")}
        assert {"invocation", "stage", "seconds", "cost_usd"} <= columns
        assert db.execute("SELECT COUNT(*) FROM invocations").fetchone()[0] == 1


def test_totals_add_up_over_invocations_and_exclude_others(tmp_path):
    path = tmp_path / "j.sqlite"
    first = JudgmentStore(path, invocation="one")
    first.put_many("j", [((f"p{i}", "a", "b", 0), Verdict("A", 5, meta={"cost_usd": 0.1})) for i in range(3)], stage="mmrb2", seconds_each=1.0)
    first.close()
    second = JudgmentStore(path, invocation="two")
    second.put_many("j", [(("q", "a", "b", 0), Verdict(None, None, missing="unparseable", meta={"cost_usd": 0.1}))], stage="mmrb2", seconds_each=2.0)
    other = JudgmentStore(path, invocation="someone-else")
    other.put_many("j", [(("r", "a", "b", 0), Verdict("A", 5, meta={"cost_usd": 9.0}))], stage="mmrb2")
    both = second.totals("j", ["one", "two"])["mmrb2"]
    assert (both["calls_made"], both["missing_made"], both["judge_seconds"], both["cost_usd"]) == (4, 1, 5.0, 0.4)
    assert second.totals("j", ["two"])["mmrb2"]["calls_made"] == 1
    assert second.totals("j", []) == {}
    second.close()
    other.close()
