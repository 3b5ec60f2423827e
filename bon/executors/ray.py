"""The Ray executor: stage work on a pool of Ray Core actors; the driver keeps store and run folder.

Why Ray Core actors and not Ray Data ``map_batches``: bon's stages already hand over batches (a
generator's prompts, a verifier's candidates, a knockout round's comparisons), and the driver must
store each result as it returns. The executor sends batches to idle workers and takes results with
``ray.wait`` in the order they finish, not the order they were sent, so a batch stuck on a lost node
never holds back the ones others finished (the stages put files back in input order at their end).
Each actor builds a plugin from its spec once and keeps it while that stage lasts (one model at a
time on an actor's GPU). A worker that dies (its process killed, its node lost) has its batch sent
again to a live worker, and the driver starts a replacement; while no worker is alive and no
replacement can be placed, a line says so every ``NOTE_EVERY_S``, and after ``lost_node_timeout``
(default 300 s) the stage stops with exit 3 naming the lost node and what was pending: nothing
waits forever, and nothing the driver stored is asked again.
Workers return candidates with their pixels, scores and verdicts; they read prompt and candidate
images by path, so on a multi-node cluster the run folder must be on a shared filesystem. A served
judge (:mod:`bon.serve`) gets actors of its own, one per replica with its GPUs, each running its
server as a subprocess on its node.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from bon.content import Candidate, Prompt
from bon.errors import BonError, Stopped
from bon.plugins import Generator, PairwiseJudge, Score, Verifier
from bon.progress import note
from bon.protocol import Comparison, Verdict

# Fault injection for tests: "stage:marker-file[,stage:marker-file]" makes the first worker that runs a
# second task of ``stage`` create the marker and kill its own process (as an OOM kill or a lost node would).
KILL_ENV = "BON_RAY_KILL_ONCE"
LOST_NODE_TIMEOUT_S = 300.0  # how long work may wait for a place after its node (or worker) is lost
NOTE_EVERY_S = 15.0  # a progress line this often while waiting for a place
MAX_WORKER_DEATHS = 3  # a batch whose worker died this often (killed by what it asks?) stops the stage


class NodeLost(Stopped):
    """Work of a lost node could not be placed within ``lost_node_timeout``: rerun when the cluster has room."""


@dataclass
class Slot:
    """One worker place: its actor, the node it runs on, and while it (re)starts, the ping it waits for."""

    actor: Any
    starting: Any = None  # the ping's ObjectRef while the actor is not yet placed
    node: str = "?"
    lost: str | None = None  # the node whose worker this slot replaces
    since: float = 0.0  # when this slot began waiting for a place
    busy: bool = False


class PluginWorker:
    """A Ray actor's body: builds plugins from specs on first use and answers batches of one stage."""

    def __init__(self, specs: dict[tuple[str, str], Any]):
        self.specs = specs
        self.loaded: tuple[tuple[str, str], Any] | None = None
        self.done: dict[str, int] = {}

    def _plugin(self, kind: str, label: str) -> Any:
        """The plugin for (kind, label), built once; a worker holds one model at a time (stages run one
        after another, so the previous stage's model is closed before the next one loads)."""
        if self.loaded and self.loaded[0] == (kind, label):
            return self.loaded[1]
        if self.loaded and hasattr(self.loaded[1], "close"):
            self.loaded[1].close()
        self.loaded = None
        plugin = self.specs[(kind, label)].create(kind)
        self.loaded = ((kind, label), plugin)
        return plugin

    def _fault_point(self, stage: str) -> None:
        for entry in filter(None, os.environ.get(KILL_ENV, "").split(",")):
            wanted, _, marker = entry.partition(":")
            if wanted == stage and self.done.get(stage, 0) >= 1 and not os.path.exists(marker):
                Path(marker).write_text(str(os.getpid()))
                os._exit(1)
        self.done[stage] = self.done.get(stage, 0) + 1

    def ping(self) -> str:
        """The node this worker runs on (its IP and the start of its node id)."""
        import ray

        context = ray.get_runtime_context()
        return f"{ray.util.get_node_ip_address()} ({context.get_node_id()[:8]})"

    def sample(self, label: str, prompts: list[Prompt], seeds: list[list[int]]) -> list[list[Candidate] | None]:
        from bon.executors.local import safe_sample

        self._fault_point("generate")
        generator = self._plugin("generator", label)
        out = [safe_sample(generator, p, s) for p, s in zip(prompts, seeds)]
        for cands in filter(None, out):  # pixels travel back, the driver writes the files
            for c in cands:
                for item in c.content:
                    if getattr(item, "kind", "") == "image" and item.path is not None:
                        item.hold()  # a file on this worker's disk: its pixels travel
        return out

    def score(self, label: str, items: list[tuple[Prompt, Candidate]]) -> list[Score]:
        from bon.executors.local import safe_score

        self._fault_point("verify")
        verifier = self._plugin("verifier", label)
        return [safe_score(verifier, p, c) for p, c in items]

    def judge(self, label: str, comparisons: list[Comparison]) -> list[Verdict]:
        self._fault_point("judge")
        return self._plugin("judge", label).judge(comparisons)


class ReplicaWorker:
    """A Ray actor's body for one replica of a served judge: it holds the replica's GPUs (Ray sets its
    ``CUDA_VISIBLE_DEVICES``), runs the server as its own subprocess on its node and sends the
    requests of its share of each batch to it, so the driver never needs to reach a node's port."""

    def __init__(self, spec: Any, index: int):
        from bon.serve import LocalReplica

        settings = spec.serve
        port = None if settings.get("port") is None else settings["port"] + index
        self.replica = LocalReplica(spec, index, port)  # gpus None: the ones Ray gave this actor
        self.replica.start()

    def ready(self) -> str:
        import time

        return self.replica.wait_ready(time.monotonic() + self.replica.settings.startup_timeout)

    def judge(self, comparisons: list[Comparison]) -> tuple[list[Verdict], str | None]:
        return self.replica.judge(comparisons)

    def stop(self) -> None:
        self.replica.stop()


class RayReplica:
    """The driver's handle on a :class:`ReplicaWorker`; a dead actor is a lost replica."""

    def __init__(self, ray: Any, actor: Any, where: str):
        self.ray, self.actor, self.where = ray, actor, where

    def judge(self, comparisons: list[Comparison]) -> tuple[list[Verdict], str | None]:
        from ray.exceptions import RayActorError

        try:
            return self.ray.get(self.actor.judge.remote(comparisons))
        except RayActorError as exc:
            reason = f"{self.where}: its Ray actor died ({str(exc).splitlines()[0][:120]})"
            return [Verdict.failed(reason, transient=True) for _ in comparisons], reason

    def stop(self) -> None:
        """The server stopped by its actor first (killing the actor alone would leave it running)."""
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            self.ray.get(self.actor.stop.remote(), timeout=30)
        except (RayActorError, GetTimeoutError):
            pass  # the actor is gone: the watchdog beside its server stops the server
        self.ray.kill(self.actor)


class RayExecutor:
    name = "ray"

    def __init__(self, study: Any, address: str | None = None, workers: int = 2, cpus_per_worker: float | None = None,
                 gpus_per_worker: float = 0, batch: int = 16, num_cpus: int | None = None,
                 lost_node_timeout: float = LOST_NODE_TIMEOUT_S):
        try:
            import ray
        except ImportError:
            raise BonError("executor ray: the ray package is not installed (pip install '.[ray]')") from None
        if workers < 1 or batch < 1:
            raise BonError(f"executor ray: workers and batch must be at least 1, got {workers} and {batch}")
        self.ray = ray
        if isinstance(lost_node_timeout, bool) or not isinstance(lost_node_timeout, (int, float)) or not lost_node_timeout > 0:
            raise BonError(f"executor ray: lost_node_timeout must be a positive number of seconds, got {lost_node_timeout!r}")
        self.workers, self.batch, self.lost_node_timeout = int(workers), int(batch), float(lost_node_timeout)
        self.specs = _plugin_specs(study)
        self.started_cluster = False
        self._slots: list[Slot] = []
        self._remote: Any = None
        self._noted = -1  # the last waiting line printed (in NOTE_EVERY_S steps)
        if not ray.is_initialized():
            self._start(address, num_cpus)
        total = ray.cluster_resources()
        # leave a CPU for the driver (on a 2-core machine actors that reserve every CPU starve it)
        cpus = total.get("CPU", 1.0)
        self.cpus = cpus_per_worker if cpus_per_worker is not None else max(0.01, min(1.0, (cpus - 1) / self.workers))
        self.gpus = gpus_per_worker
        for what, each in (("CPU", self.cpus), ("GPU", self.gpus)):
            if each and self.workers * each > total.get(what, 0) + 1e-9:  # Ray would wait for them forever
                self.close()
                raise BonError(f"executor ray: {self.workers} workers x {each:g} {what} need {self.workers * each:g} "
                               f"{what}s; the cluster has {total.get(what, 0):g}")

    def _start(self, address: str | None, num_cpus: int | None) -> None:
        """Join ``address`` (``auto``: the cluster ``ray start`` runs here; default: $RAY_ADDRESS if set),
        else start a local cluster that :meth:`close` shuts down."""
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        address = address or os.environ.get("RAY_ADDRESS") or "local"
        if address != "local":
            try:
                self.ray.init(address=address, **quiet)
            except (ConnectionError, RuntimeError) as exc:
                raise BonError(f"executor ray: cannot join the Ray cluster at {address} ({str(exc).splitlines()[0][:160]}); "
                               "start one with `ray start --head` or use address: local") from None
            note(f"[bold]ray[/]: joined the cluster at {address} ({self.ray.cluster_resources().get('CPU', 0):g} CPUs)")
            return
        root = str(Path(__file__).resolve().parents[2])  # bon's checkout, for workers that do not have it installed
        paths = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
        self.ray.init(num_cpus=num_cpus or max(2, os.cpu_count() or 2), runtime_env={"env_vars": {"PYTHONPATH": paths}}, **quiet)
        self.started_cluster = True

    def slots(self) -> list[Slot]:
        """The worker places, created on first use (placed while the first batches wait for them)."""
        if not self._slots:
            env = {k: v for k, v in os.environ.items() if k.startswith("BON_")}  # bon's settings reach the workers
            # no restarts by Ray: the driver replaces a lost worker itself, with a time limit
            self._remote = self.ray.remote(PluginWorker).options(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=0,
                                                                 max_task_retries=0, runtime_env={"env_vars": env})
            self._slots = [self._new_slot() for _ in range(self.workers)]
        return self._slots

    def _new_slot(self, lost: str | None = None) -> Slot:
        actor = self._remote.remote(self.specs)
        return Slot(actor, starting=actor.ping.remote(), lost=lost, since=time.monotonic())

    def sample_all(self, generator: Generator, prompts: Sequence[Prompt],
                   seeds_of: Callable[[Prompt], list[int]]) -> Iterator[tuple[int, list[Candidate] | None]]:
        """(prompt index, candidates) as each prompt's task returns (its N seeds are the model's batch)."""
        label = self._label("generator", generator.name)
        tasks = [([p], [seeds_of(p)]) for p in prompts]
        for i, result in self._unordered(lambda a, t: a.sample.remote(label, *t), tasks, f"generator {label}"):
            yield i, result[0]

    def score_all(self, verifier: Verifier, items: Sequence[tuple[Prompt, Candidate]]) -> Iterator[tuple[int, Score]]:
        """(item index, score) batch by batch, as each batch returns."""
        label = self._label("verifier", verifier.name)
        chunks = self._chunks(list(range(len(items))))
        work = lambda a, idx: a.score.remote(label, [items[i] for i in idx])  # noqa: E731
        for c, scores in self._unordered(work, chunks, f"verifier {label}"):
            yield from zip(chunks[c], scores)

    def judge(self, judge: PairwiseJudge, comparisons: Sequence[Comparison]) -> list[Verdict]:
        """A round's comparisons in batches over the workers, verdicts back in order."""
        verdicts: list[Verdict | None] = [None] * len(comparisons)
        for offset, part in self.judge_parts(judge, comparisons):
            verdicts[offset : offset + len(part)] = part
        return verdicts  # type: ignore[return-value]

    def judge_parts(self, judge: PairwiseJudge, comparisons: Sequence[Comparison]) -> Iterator[tuple[int, list[Verdict]]]:
        """(offset, verdicts) of each batch as it returns (the referee stores each at once); a served
        judge's over its own replica actors instead, ``store_every`` at a time."""
        from bon.serve import ServedJudge

        if isinstance(judge, ServedJudge):
            judge.launcher = self.start_replicas
            for start in range(0, len(comparisons), judge.store_every):
                yield start, judge.judge(comparisons[start : start + judge.store_every])
            return
        label = self._label("judge", judge.name)
        size = self._chunk_size(len(comparisons))
        chunks = [list(comparisons[i : i + size]) for i in range(0, len(comparisons), size)]
        for c, verdicts in self._unordered(lambda a, chunk: a.judge.remote(label, chunk), chunks, f"judge {label}"):
            yield c * size, verdicts

    def start_replicas(self, judge: Any) -> list[RayReplica]:
        """One actor per replica with ``gpus_per_replica`` GPUs, each server started on its node; all
        waited for together, and all stopped again if one fails."""
        from ray.exceptions import GetTimeoutError, RayTaskError

        settings = judge.settings
        have = self.ray.cluster_resources().get("GPU", 0)
        if settings.gpus > have + 1e-9:  # Ray would wait for them forever
            raise BonError(f"judge {judge.name}: serve needs {settings.gpus} GPUs ({settings.describe()}); "
                           f"the Ray cluster has {have:g}")
        env = {k: v for k, v in os.environ.items() if k.startswith("BON_")}
        remote = self.ray.remote(ReplicaWorker).options(num_cpus=0, num_gpus=settings.gpus_per_replica, max_restarts=0,
                                                        max_task_retries=0, runtime_env={"env_vars": env})
        replicas = [RayReplica(self.ray, remote.remote(judge.spec, i), f"judge {judge.name}: replica {i}")
                    for i in range(settings.replicas)]
        wait = settings.startup_timeout + self.lost_node_timeout  # loading, plus finding a place: never forever
        try:
            wheres = self.ray.get([r.actor.ready.remote() for r in replicas], timeout=wait)
        except BaseException as exc:
            for replica in replicas:
                replica.stop()
            cause = getattr(exc, "cause", None) if isinstance(exc, RayTaskError) else None
            if isinstance(cause, BonError):
                raise BonError(str(cause)) from None
            if isinstance(exc, GetTimeoutError):
                raise NodeLost(f"judge {judge.name}: {settings.replicas} replicas not ready within startup_timeout + "
                               f"lost_node_timeout = {wait:g} s (no place for a replica's actor, or its server still "
                               "loading); rerun when the cluster has room") from None
            raise
        for replica, where in zip(replicas, wheres):
            replica.where = where
        return replicas

    def _unordered(self, submit: Callable, tasks: list, what: str) -> Iterator[tuple[int, Any]]:
        """(task index, result) as each task returns. A task whose worker died goes back to the queue
        for a live worker; a plugin's own one-line error (BonError) stays one line."""
        from ray.exceptions import RayActorError, RayTaskError

        queue, running, deaths = deque(range(len(tasks))), {}, [0] * len(tasks)
        while queue or running:
            for slot in self.slots():
                if queue and slot.starting is None and not slot.busy:
                    i = queue.popleft()
                    running[submit(slot.actor, tasks[i])] = (slot, i)
                    slot.busy = True
            starting = {slot.starting: slot for slot in self._slots if slot.starting is not None}
            done, _ = self.ray.wait([*running, *starting], num_returns=1, timeout=NOTE_EVERY_S / 3)
            for ref in done:
                if ref in starting:
                    self._placed(starting[ref], ref)
                    continue
                slot, i = running.pop(ref)
                slot.busy = False
                try:
                    result = self.ray.get(ref)
                except RayActorError as exc:
                    deaths[i] += 1
                    if deaths[i] >= MAX_WORKER_DEATHS:  # not a lost node but a batch that kills its worker
                        raise Stopped(f"executor ray: {what}: a batch of {len(tasks[i]) if isinstance(tasks[i], list) else 1} "
                                      f"items lost its worker {deaths[i]} times ({str(exc).splitlines()[0][:120]}); "
                                      "everything returned is stored: rerun (with a smaller batch) to retry it") from None
                    queue.appendleft(i)
                    self._lost(slot, exc)
                    continue
                except RayTaskError as exc:
                    cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else None
                    if isinstance(cause, BonError):
                        raise BonError(str(cause)) from None
                    raise
                yield i, result
            self._check_waiting(what, [tasks[i] for i in queue])

    def _placed(self, slot: Slot, ref: Any) -> None:
        """A (replacement) worker answered its ping, or died before it could."""
        from ray.exceptions import RayActorError

        try:
            slot.node = self.ray.get(ref)
        except RayActorError as exc:
            self._lost(slot, exc)
            return
        if slot.lost:
            note(f"[bold]ray[/]: a worker replacing the one on lost node {slot.lost} runs on {slot.node} "
                 f"after {time.monotonic() - slot.since:.0f} s")
        slot.starting, slot.lost, self._noted = None, None, -1

    def _lost(self, slot: Slot, exc: BaseException) -> None:
        """A worker died: its place gets a replacement, which Ray places when the cluster has room."""
        node, was_running = slot.lost or slot.node, slot.starting is None
        if was_running:  # a running worker died, not a replacement that never started
            note(f"[bold red]ray[/]: the worker on node {node} was lost ({str(exc).splitlines()[0][:120]}); its batch "
                 f"goes to a live worker, a replacement is started (waiting at most {self.lost_node_timeout:g} s)")
        self.ray.kill(slot.actor)
        fresh = self._new_slot(lost=node)
        slot.actor, slot.starting, slot.lost = fresh.actor, fresh.starting, node
        slot.since = fresh.since if was_running else slot.since  # a replacement's wait counts from the loss

    def _check_waiting(self, what: str, queued: list) -> None:
        """While no worker is alive and work waits: a line now and then, and exit 3 after the timeout."""
        if not queued or any(slot.starting is None for slot in self._slots):
            return
        waited = time.monotonic() - min(slot.since for slot in self._slots)
        lost = sorted({slot.lost for slot in self._slots if slot.lost})
        nodes = f"node {', '.join(lost)} was lost and " if lost else ""
        items = sum(len(t) if isinstance(t, (list, tuple)) else 1 for t in queued)
        pending = f"{what}: {len(queued)} batches ({items} items) pending"
        if waited > self.lost_node_timeout:
            raise NodeLost(f"executor ray: {nodes}no worker could be placed within lost_node_timeout "
                           f"{self.lost_node_timeout:g} s ({pending}); everything returned is stored: rerun when the "
                           "cluster has room")
        if int(waited // NOTE_EVERY_S) > self._noted:
            self._noted = int(waited // NOTE_EVERY_S)
            note(f"[bold]ray[/]: {nodes}waiting for a place for a worker: {waited:.0f} of "
                 f"{self.lost_node_timeout:g} s (lost_node_timeout; {pending})")

    def _chunk_size(self, count: int) -> int:
        """At most ``batch`` items per task, and enough tasks to keep every worker busy."""
        return max(1, min(self.batch, math.ceil(count / self.workers)))

    def _chunks(self, items: list) -> list[list]:
        size = self._chunk_size(len(items))
        return [items[i : i + size] for i in range(0, len(items), size)]

    def _label(self, kind: str, label: str) -> str:
        if (kind, label) not in self.specs:
            raise BonError(f"executor ray: {kind} {label!r} is not in the study config, so workers cannot build it")
        return label

    def close(self) -> None:
        for slot in self._slots:
            self.ray.kill(slot.actor)
        self._slots = []
        if self.started_cluster:
            self.ray.shutdown()
            self.started_cluster = False


def _plugin_specs(study: Any) -> dict[tuple[str, str], Any]:
    """(kind, label) -> PluginSpec of every plugin a study names; workers build plugins from these."""
    if study is None:
        return {}
    specs = {("generator", g.label): g for g in study.generators}
    specs.update({("judge", j.label): j for j in study.judges})
    specs[("verifier", study.verifier.label)] = study.verifier
    return specs

