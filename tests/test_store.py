"""The judgment store: keys, concurrent writers, and strategies against a judge with known truth."""

import multiprocessing as mp
import sqlite3

import pytest

from bon.content import Content, Prompt
from bon.protocol import Comparison, Verdict
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
