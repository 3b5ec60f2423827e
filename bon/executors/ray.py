"""The Ray executor: stage work on a pool of Ray Core actors; the driver keeps store and run folder.

Why a Ray Core actor pool and not Ray Data ``map_batches``: bon's stages already hand over ordered
batches (a generator's prompts, a verifier's candidates, a knockout round's comparisons) and must
write results in a fixed order for resume and byte-identical run folders; ``ray.util.ActorPool.map``
gives exactly that (dynamic dispatch to idle actors, ordered results) without a dataset round trip.
Each actor builds a plugin from its spec once and keeps it while that stage lasts (one model at a
time on an actor's GPU); actors are created with ``max_restarts=-1, max_task_retries=-1``, so a
killed worker process is restarted and its task retried: nothing the driver stored is asked again,
since the driver stores only what came back (a judge's verdicts batch by batch, as each returns).
Workers return candidates with their pixels, scores and verdicts; they read prompt and candidate
images by path, so on a multi-node cluster the run folder must be on a shared filesystem. A served
judge (:mod:`bon.serve`) gets actors of its own, one per replica with its GPUs, each running its
server as a subprocess on its node.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from bon.content import Candidate, Prompt
from bon.errors import BonError
from bon.plugins import Generator, PairwiseJudge, Score, Verifier
from bon.progress import note
from bon.protocol import Comparison, Verdict

# Fault injection for tests: "stage:marker-file[,stage:marker-file]" makes the first worker that runs a
# second task of ``stage`` create the marker and kill its own process (as an OOM kill or a lost node would).
KILL_ENV = "BON_RAY_KILL_ONCE"


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

    def ping(self) -> int:
        return os.getpid()

    def sample(self, label: str, prompts: list[Prompt], seeds: list[list[int]]) -> list[list[Candidate] | None]:
        from bon.executors.local import safe_sample

        self._fault_point("generate")
        generator = self._plugin("generator", label)
        out = [safe_sample(generator, p, s) for p, s in zip(prompts, seeds)]
        for cands in filter(None, out):  # pixels travel back, the driver writes the files
            for c in cands:
                for item in c.content:
                    if getattr(item, "kind", "") == "image" and item.path is not None:
                        item.load()
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
                 gpus_per_worker: float = 0, batch: int = 16, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise BonError("executor ray: the ray package is not installed (pip install '.[ray]')") from None
        if workers < 1 or batch < 1:
            raise BonError(f"executor ray: workers and batch must be at least 1, got {workers} and {batch}")
        self.ray = ray
        self.workers, self.batch = int(workers), int(batch)
        self.specs = _plugin_specs(study)
        self.started_cluster = False
        self._pool = None
        self._actors: list[Any] = []
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

    def pool(self):
        if self._pool is None:
            from ray.util import ActorPool

            env = {k: v for k, v in os.environ.items() if k.startswith("BON_")}  # bon's settings reach the workers
            remote = self.ray.remote(PluginWorker).options(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=-1,
                                                           max_task_retries=-1, runtime_env={"env_vars": env})
            self._actors = [remote.remote(self.specs) for _ in range(self.workers)]
            self.ray.get([a.ping.remote() for a in self._actors])
            self._pool = ActorPool(self._actors)
        return self._pool

    def sample_all(self, generator: Generator, prompts: Sequence[Prompt],
                   seeds_of: Callable[[Prompt], list[int]]) -> Iterator[list[Candidate] | None]:
        """One task per prompt (its N seeds are the model's batch); results in prompt order."""
        label = self._label("generator", generator.name)
        tasks = [([p], [seeds_of(p)]) for p in prompts]
        for result in self._map(lambda a, t: a.sample.remote(label, *t), tasks):
            yield result[0]

    def score_all(self, verifier: Verifier, items: Sequence[tuple[Prompt, Candidate]]) -> Iterator[Score]:
        label = self._label("verifier", verifier.name)
        for scores in self._map(lambda a, chunk: a.score.remote(label, chunk), self._chunks(list(items))):
            yield from scores

    def judge(self, judge: PairwiseJudge, comparisons: Sequence[Comparison]) -> list[Verdict]:
        """A round's comparisons in batches over the actor pool, verdicts back in order."""
        return [v for part in self.judge_parts(judge, comparisons) for v in part]

    def judge_parts(self, judge: PairwiseJudge, comparisons: Sequence[Comparison]) -> Iterator[list[Verdict]]:
        """The verdicts of each batch, in order, as the batches come back (the referee stores each at
        once); a served judge's over its own replica actors instead, ``store_every`` at a time."""
        from bon.serve import ServedJudge

        if isinstance(judge, ServedJudge):
            judge.launcher = self.start_replicas
            for start in range(0, len(comparisons), judge.store_every):
                yield judge.judge(comparisons[start : start + judge.store_every])
            return
        label = self._label("judge", judge.name)
        yield from self._map(lambda a, chunk: a.judge.remote(label, chunk), self._chunks(list(comparisons)))

    def start_replicas(self, judge: Any) -> list[RayReplica]:
        """One actor per replica with ``gpus_per_replica`` GPUs, each server started on its node; all
        waited for together, and all stopped again if one fails."""
        from ray.exceptions import RayTaskError

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
        try:
            wheres = self.ray.get([r.actor.ready.remote() for r in replicas])
        except BaseException as exc:
            for replica in replicas:
                replica.stop()
            cause = getattr(exc, "cause", None) if isinstance(exc, RayTaskError) else None
            if isinstance(cause, BonError):
                raise BonError(str(cause)) from None
            raise
        for replica, where in zip(replicas, wheres):
            replica.where = where
        return replicas

    def _map(self, submit: Callable, tasks: list) -> Iterator[Any]:
        """Results in task order; a plugin's own one-line error (BonError) stays one line."""
        from ray.exceptions import RayTaskError

        try:
            yield from self.pool().map(submit, tasks)
        except RayTaskError as exc:
            cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else None
            if isinstance(cause, BonError):
                raise BonError(str(cause)) from None
            raise

    def _chunks(self, items: list) -> list[list]:
        """At most ``batch`` items per task, and enough tasks to keep every worker busy."""
        size = max(1, min(self.batch, math.ceil(len(items) / self.workers)))
        return [items[i : i + size] for i in range(0, len(items), size)]

    def _label(self, kind: str, label: str) -> str:
        if (kind, label) not in self.specs:
            raise BonError(f"executor ray: {kind} {label!r} is not in the study config, so workers cannot build it")
        return label

    def close(self) -> None:
        for actor in self._actors:
            self.ray.kill(actor)
        self._actors, self._pool = [], None
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

