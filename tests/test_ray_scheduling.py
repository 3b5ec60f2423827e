"""The Ray executor's scheduling, against a scripted stand-in for Ray (deterministic, no cluster):
results come back in the order they finish, a lost worker's batch goes to a live one, and work that
no worker can take within ``lost_node_timeout`` ends the stage with exit 3 naming the node (issue 28,
cases 2 and 3; the real clusters are in tests/test_cluster_faults.py)."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("ray")

from ray.exceptions import RayActorError  # noqa: E402

from bon.executors import ray as ray_executor  # noqa: E402
from bon.executors.ray import NodeLost, RayExecutor  # noqa: E402
from bon.protocol import Verdict  # noqa: E402


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


class Ref:
    def __init__(self, at: float | None, value=None, error: BaseException | None = None):
        self.at, self.value, self.error = at, value, error  # at None: never finishes


class Actor:
    """A worker on a node: a judge batch takes ``seconds[batch size]``; a node that dies at ``dies``
    fails what is running on it; a worker that cannot be placed never answers its ping."""

    names = itertools.count()

    def __init__(self, fake: "FakeRay"):
        self.fake, self.name = fake, f"node-{next(Actor.names)}"
        self.placed = fake.places > 0
        fake.places -= self.placed
        self.ping = Method(lambda: Ref(fake.clock.now if self.placed else None, self.name))
        self.judge = Method(self._judge)

    def _judge(self, label, chunk):
        fake, seconds = self.fake, self.fake.seconds(self.name, chunk)
        if self.name in fake.dies and fake.clock.now + seconds >= fake.dies[self.name]:
            return Ref(fake.dies[self.name], error=RayActorError())
        fake.started.append((self.name, [c for c in chunk]))
        return Ref(fake.clock.now + seconds, [Verdict("A", None) for _ in chunk])


class Method:
    def __init__(self, fn):
        self.remote = fn


class FakeRay:
    def __init__(self, clock: Clock, places: int, seconds, dies: dict[str, float] | None = None):
        self.clock, self.places, self.seconds, self.dies = clock, places, seconds, dies or {}
        self.started: list = []

    def remote(self, cls):
        fake = self

        class Factory:
            def options(self, **_):
                return self

            def remote(self, specs):
                return Actor(fake)

        return Factory()

    def wait(self, refs, num_returns=1, timeout=None):
        ready = [r for r in refs if r.at is not None and r.at <= self.clock.now]
        if ready:
            return [min(ready, key=lambda r: r.at)], []
        upcoming = [r.at for r in refs if r.at is not None]
        self.clock.now = min([*upcoming, self.clock.now + timeout]) if upcoming else self.clock.now + timeout
        return self.wait(refs, num_returns, timeout) if upcoming and min(upcoming) <= self.clock.now else ([], refs)

    def get(self, ref):
        if ref.error is not None:
            raise ref.error
        return ref.value

    def kill(self, actor):
        pass


def executor(fake: FakeRay, workers: int, timeout: float = 60.0) -> RayExecutor:
    ex = object.__new__(RayExecutor)
    ex.ray, ex.workers, ex.batch, ex.lost_node_timeout = fake, workers, 2, timeout
    ex.specs, ex.cpus, ex.gpus = {("judge", "j"): None}, 0.5, 0
    ex._slots, ex._remote, ex._noted = [], None, -1
    return ex


class Judge:
    name = "j"


@pytest.fixture
def notes(monkeypatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(ray_executor, "note", seen.append)
    return seen


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(ray_executor.time, "monotonic", c)
    Actor.names = itertools.count()
    return c


def test_batches_come_back_as_they_finish_not_behind_a_stuck_one(clock):
    """Worker node-0 is stuck on the first batch for 100 s; node-1 answers the other three in 1 s
    each: all three are handed over (and stored) long before the first."""
    fake = FakeRay(clock, places=2, seconds=lambda node, chunk: 100.0 if chunk[0] == 0 else 1.0)
    parts = []
    for offset, verdicts in executor(fake, workers=2).judge_parts(Judge(), list(range(8))):
        parts.append((offset, clock.now))
    assert [o for o, _ in parts] == [2, 4, 6, 0]
    assert [t for _, t in parts[:3]] == [1.0, 2.0, 3.0] and parts[3][1] == 100.0


def test_a_lost_worker_s_batch_goes_to_a_live_worker(clock, notes):
    fake = FakeRay(clock, places=2, seconds=lambda node, chunk: 1.0, dies={"node-1": 0.5})
    verdicts = RayExecutor.judge(executor(fake, workers=2), Judge(), list(range(8)))
    assert len(verdicts) == 8 and all(v.better == "A" for v in verdicts)
    assert sorted(c for _, chunk in fake.started for c in chunk) == list(range(8))  # each asked once, all by node-0
    assert {node for node, _ in fake.started} == {"node-0"}
    assert any("the worker on node node-1 was lost" in line for line in notes)


def test_work_no_worker_can_take_ends_the_stage_within_the_timeout(clock, notes):
    """One worker, its node lost, no room for a replacement: exit 3 (Stopped) after lost_node_timeout,
    naming the node and what was pending, with lines while it waits; what returned before is kept."""
    fake = FakeRay(clock, places=1, seconds=lambda node, chunk: 1.0, dies={"node-0": 2.5})
    got = []
    with pytest.raises(NodeLost) as err:
        for offset, _ in executor(fake, workers=1, timeout=40.0).judge_parts(Judge(), list(range(8))):
            got.append(offset)
    assert got == [0, 2]  # the two batches that returned before the node was lost
    assert 2.5 + 40.0 <= clock.now <= 2.5 + 40.0 + ray_executor.NOTE_EVERY_S
    message = str(err.value)
    assert "node node-0 was lost and no worker could be placed within lost_node_timeout 40 s" in message
    assert "judge j: 2 batches (4 items) pending" in message and "rerun" in message
    assert sum("waiting for a place for a worker" in line for line in notes) >= 2


def test_a_batch_that_keeps_killing_its_worker_stops_the_stage(clock, notes):
    """Not a lost node but a batch that kills every worker it reaches (say, out of memory): exit 3 after
    MAX_WORKER_DEATHS tries, never a restart loop."""
    from bon.errors import Stopped

    class Deadly(Actor):
        def _judge(self, label, chunk):
            if 0 in chunk:
                return Ref(self.fake.clock.now + 1.0, error=RayActorError())
            return super()._judge(label, chunk)

    fake = FakeRay(clock, places=10, seconds=lambda node, chunk: 1.0)
    fake.remote = lambda cls: type("F", (), {"options": lambda self, **_: self, "remote": lambda self, specs: Deadly(fake)})()
    with pytest.raises(Stopped, match=r"judge j: a batch of 2 items lost its worker 3 times"):
        list(executor(fake, workers=2).judge_parts(Judge(), list(range(8))))
