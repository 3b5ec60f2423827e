"""Served judges: ``bon run`` starts a judge's OpenAI-compatible servers when its stage starts, spreads
every batch over them and stops them when the stage ends.

A judge entry's ``serve:`` (``serve: vllm`` or a mapping, see :data:`SERVE_KEYS`) names the engine
and how to run it: ``replicas`` independent servers, each with ``tensor_parallel`` x ``data_parallel``
GPUs (``gpus_per_replica``). The engines: ``vllm`` and ``sglang`` (their own flags for the served
name and the parallel sizes), ``transformers`` (``transformers serve MODEL``, CPU with
``gpus_per_replica: 0``, else GPU; it serves the model under the name it loads, so the judge's model
is the weights), and ``command``: any OpenAI-compatible server from a ``command`` template whose
``{model}``, ``{served_name}``, ``{host}``, ``{port}``, ``{gpus}``, ``{tensor_parallel}`` and
``{data_parallel}`` bon fills in, ready when ``GET {health}`` (default ``/health``) answers 200. The judge itself stays the OpenAI-compatible client it always was; bon
fills in each replica's ``base_url``. Locally the replicas are subprocesses of this process, each on
its own block of ``CUDA_VISIBLE_DEVICES``; on Ray they are actors that hold their GPUs (see
:mod:`bon.executors.ray`). Servers start at the judge's first batch (a resumed stage with nothing
left to ask starts none), must answer ``GET /health`` within ``startup_timeout`` and list the judge's
model at ``GET /v1/models``, and are stopped (their whole process group) when the stage ends, fails
or is interrupted; a watchdog process stops them if bon itself is killed.

A replica that dies mid-stage turns its share of the batch into transient missing verdicts (never
stored) and stops the study with exit 3 (:class:`ServerLost`); what the other replicas answered is
stored, so a rerun asks only the rest. How a model is served (replicas, parallel sizes, port,
launcher) is not part of the judge's identity: the same questions, the same store keys.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from bon.errors import BonError, Stopped
from bon.progress import note
from bon.protocol import Comparison, Verdict
from bon.redact import redact, remember_args

ENGINES = ("vllm", "sglang", "transformers", "command")
SERVE_KEYS = ("engine", "model", "tensor_parallel", "data_parallel", "replicas", "gpus_per_replica", "port", "args",
              "launcher", "command", "health", "startup_timeout")
TEMPLATE_FIELDS = ("model", "served_name", "host", "port", "gpus", "tensor_parallel", "data_parallel")
HOST = "127.0.0.1"  # every request to a replica comes from the process that started it (or its Ray actor)
PLACEHOLDER_URL = "http://127.0.0.1:9/v1"  # the client built before any server runs (options and identity only)
STOP_GRACE_S = 10.0  # SIGTERM, then SIGKILL for a server that has not exited
HEALTH_NOTE_S = 30.0  # a progress line this often while a server loads
# Fault injection for tests: "MARKER:K" makes the first replica that has sent K requests create MARKER
# and kill its own server (SIGKILL to its process group, as an OOM kill would) before its next batch.
KILL_ENV = "BON_SERVE_KILL_ONCE"


class ServerLost(Stopped):
    """A replica died mid-stage: its requests failed transiently; rerun to finish the stage."""


# --- settings ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServeSettings:
    engine: str
    model: str  # the weights the server loads; requests name the judge's model (--served-model-name)
    served_name: str
    tensor_parallel: int = 1
    data_parallel: int = 1
    replicas: int = 1
    gpus_per_replica: int = 1
    port: int | None = None  # replica i listens on port + i; None: a free port
    args: tuple[str, ...] = ()
    launcher: tuple[str, ...] | None = None  # replaces the engine's program (a container wrapper, a stand-in)
    command_template: tuple[str, ...] = ()  # engine command: the whole command line, {fields} filled in
    health: str = "/health"
    startup_timeout: float = 1800.0

    @classmethod
    def of(cls, spec: Any) -> "ServeSettings":
        """The settings of a served judge's PluginSpec (its ``serve`` as :func:`parse_serve` left it)."""
        serve = {k: v for k, v in spec.serve.items() if k != "command"}
        return cls(**{**serve, "served_name": judge_model(spec), "args": tuple(serve.get("args") or ()),
                      "launcher": tuple(serve["launcher"]) if serve.get("launcher") else None,
                      "command_template": tuple(spec.serve.get("command") or ()),
                      "health": serve.get("health") or "/health"})

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    def command(self, port: int | str, gpus: str | None = None) -> list[str]:
        """The real launch command line of one replica: each engine with only the flags it takes."""
        if self.engine == "command":
            fields = {"model": self.model, "served_name": self.served_name, "host": HOST, "port": port,
                      "gpus": gpus if gpus is not None else "", "tensor_parallel": self.tensor_parallel,
                      "data_parallel": self.data_parallel}
            return [word.format(**fields) for word in self.command_template] + list(self.args)
        if self.engine == "vllm":
            program = ["vllm"]
            args = ["serve", self.model, "--host", HOST, "--port", str(port), "--served-model-name", self.served_name,
                    "--tensor-parallel-size", str(self.tensor_parallel), "--data-parallel-size", str(self.data_parallel)]
        elif self.engine == "sglang":
            program = [sys.executable, "-m", "sglang.launch_server"]
            args = ["--model-path", self.model, "--host", HOST, "--port", str(port), "--served-model-name", self.served_name,
                    "--tp-size", str(self.tensor_parallel), "--dp-size", str(self.data_parallel)]
        else:  # transformers serve: the model it loads is the name requests use; one device per replica
            program = [sys.executable, "-m", "transformers.cli.transformers"]  # `transformers`, from this Python
            args = ["serve", self.model, "--host", HOST, "--port", str(port),
                    "--device", "cpu" if self.gpus_per_replica == 0 else "auto"]
        return [*(self.launcher or program), *args, *self.args]

    def describe(self) -> str:
        return (f"{self.engine}, {_plural(self.replicas, 'replica')} x {_plural(self.gpus_per_replica, 'GPU')} = "
                f"{_plural(self.gpus, 'GPU')} (tensor_parallel {self.tensor_parallel}, data_parallel {self.data_parallel})")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def parse_serve(raw: Any, model: str | None, where: str) -> dict[str, Any]:
    """A judge entry's ``serve:`` as the plain mapping a config records; one-line errors naming the key."""
    here = f"{where}: serve"
    if isinstance(raw, str):
        raw = {"engine": raw}
    engines = ", ".join(ENGINES[:-1]) + " or " + ENGINES[-1]
    if not isinstance(raw, dict):
        raise BonError(f"{here}: expected an engine name ({engines}) or a mapping with 'engine'")
    unknown = sorted(set(raw) - set(SERVE_KEYS))
    if unknown:
        raise BonError(f"{here}: unknown key(s) {', '.join(map(str, unknown))} (known: {', '.join(SERVE_KEYS)})")
    if raw.get("engine") not in ENGINES:
        raise BonError(f"{here}: engine must be {engines}, got {raw.get('engine')!r}")
    if not model:
        raise BonError(f"{here}: the judge names no model (openai-compatible:MODEL), so there is nothing to serve")
    out: dict[str, Any] = {"engine": raw["engine"]}
    out["model"] = raw.get("model", model)
    if not isinstance(out["model"], str) or not out["model"].strip():
        raise BonError(f"{here}: model must be a model name or folder, got {out['model']!r}")
    for key in ("tensor_parallel", "data_parallel", "replicas"):
        out[key] = _count(raw, key, 1, 1, here)
    least = out["tensor_parallel"] * out["data_parallel"]
    out["gpus_per_replica"] = _count(raw, "gpus_per_replica", least, 0, here)
    if 0 < out["gpus_per_replica"] < least:
        raise BonError(f"{here}: gpus_per_replica {out['gpus_per_replica']} is less than tensor_parallel x "
                       f"data_parallel = {least} (0 serves without GPUs)")
    out["port"] = None if raw.get("port") is None else _count(raw, "port", 0, 1, here)
    if out["port"] is not None and out["port"] + out["replicas"] - 1 > 65535:
        raise BonError(f"{here}: port {out['port']} + {out['replicas']} replicas runs past 65535")
    out["args"] = _words(raw, "args", here)
    remember_args(out["args"])  # a key among them (--api-key KEY) is masked wherever it would be written
    out["launcher"] = _words(raw, "launcher", here) or None
    _engine_keys(raw, out, model, here)
    remember_args(out.get("command") or ())  # the same for a command template's words
    timeout = raw.get("startup_timeout", 1800.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise BonError(f"{here}: startup_timeout must be a positive number of seconds, got {timeout!r}")
    out["startup_timeout"] = float(timeout)
    return out


def _engine_keys(raw: dict, out: dict[str, Any], model: str, here: str) -> None:
    """What only some engines take: ``command`` (engine command), one model name and no parallel sizes
    (transformers, which has no flag for either); ``health``, the readiness path, for all."""
    engine = out["engine"]
    command = _words(raw, "command", here)
    if engine == "command":
        out["command"] = command
        if not command:
            raise BonError(f"{here}: engine command needs command: the server's command line, with "
                           f"{{{'}, {'.join(TEMPLATE_FIELDS)}}} filled in by bon")
        for word in out["command"]:
            try:
                word.format(**{f: "" for f in TEMPLATE_FIELDS})
            except (KeyError, IndexError, ValueError) as exc:
                raise BonError(f"{here}: command word {word!r}: unknown or broken placeholder ({exc}); "
                               f"known: {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}") from None
        if out["launcher"]:
            raise BonError(f"{here}: engine command takes command, not launcher")
    elif command:
        raise BonError(f"{here}: command is for engine command (engine {engine} builds its own command line)")
    health = raw.get("health", "/health")
    if not isinstance(health, str) or not health.startswith("/"):
        raise BonError(f"{here}: health must be a path starting with /, got {health!r}")
    out["health"] = health
    if engine == "transformers":
        if out["model"] != model:
            raise BonError(f"{here}: transformers serve names its model by the weights it loads: give the judge "
                           f"that model (openai-compatible:{out['model']}) and leave out serve.model")
        if out["tensor_parallel"] != 1 or out["data_parallel"] != 1:
            raise BonError(f"{here}: transformers serve has no tensor or data parallelism; use replicas")


def judge_model(spec: Any) -> str | None:
    """The model a judge spec's requests name (``openai-compatible:MODEL`` or its ``model`` option)."""
    from bon import registry

    return spec.options.get("model") or registry.parse_spec(spec.name)[1].get("model")


def check_servable(factory: Any, options: dict[str, Any], where: str) -> None:
    """Only an OpenAI-compatible client can be served, and bon, not the options, gives it its URL."""
    import inspect

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if "base_url" not in params:
        raise BonError(f"{where}: serve: this judge does not talk to a server (serve needs an OpenAI-compatible judge "
                       "such as openai-compatible:MODEL)")
    if options.get("base_url"):
        raise BonError(f"{where}: serve: remove options.base_url (bon points the judge at the replicas it starts)")
    if options.get("batch"):
        raise BonError(f"{where}: serve: options.batch is the OpenAI Batch API, which a served engine does not offer")


def _count(raw: dict, key: str, default: int, least: int, here: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise BonError(f"{here}: {key} must be an integer of at least {least}, got {value!r}")
    return value


def _words(raw: dict, key: str, here: str) -> list[str]:
    value = raw.get(key) or []
    if isinstance(value, str):
        value = shlex.split(value)
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        raise BonError(f"{here}: {key} must be a list of command-line words, got {raw.get(key)!r}")
    return [str(v) for v in value]


# --- one server process ------------------------------------------------------------------------

# Kills the server's process group once the process that started it is gone (bon killed, a Ray actor
# lost), so no server outlives its study holding GPUs; exits by itself when the group is gone.
WATCHDOG = """import os, signal, sys, time
parent, group = int(sys.argv[1]), int(sys.argv[2])
while True:
    time.sleep(0.5)
    try:
        os.killpg(group, 0)
    except OSError:
        sys.exit(0)
    if os.getppid() != parent:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(group, sig)
            except OSError:
                sys.exit(0)
            time.sleep(10)
"""

_running: set["ServerProcess"] = set()  # stopped at exit if a stage could not stop them itself


def _log_redacted(output: Any, log: Any) -> None:
    """Copy a server's output into its log (an open text file, closed at the end) line by line with every
    secret masked: engines echo their command line (``--api-key KEY`` among it) and the log outlives the stage."""
    with log, output:
        for raw in output:
            log.write(redact(raw.decode("utf-8", errors="replace")))
            log.flush()


class ServerProcess:
    """One server subprocess in its own process group, its output in a log file."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path, where: str):
        self.command, self.env, self.log_path, self.where = command, env, log, where
        self.proc: subprocess.Popen | None = None
        self.watchdog: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.log_path, "w", encoding="utf-8")
        try:
            self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)
        except OSError as exc:
            log.close()
            raise BonError(f"{self.where}: cannot start {shlex.join(self.command[:3])} ({exc.strerror or exc}); "
                           "install the engine or set serve.launcher (serve.command for engine command)") from None
        threading.Thread(target=_log_redacted, args=(self.proc.stdout, log), daemon=True).start()
        _running.add(self)
        if os.name == "posix":
            self.watchdog = subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid()), str(self.proc.pid)],
                                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_reason(self) -> str:
        code = self.proc.poll() if self.proc is not None else None
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        return f"{self.where}: the server {how}"

    def wait_healthy(self, root: str, deadline: float, timeout: float, health: str = "/health") -> None:
        """Poll ``GET {health}`` until it answers 200; one line (with the log's last line) if the server
        exits first or the deadline passes, the server stopped."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        started = last = time.monotonic()
        while True:
            if not self.alive():
                reason = self.exit_reason()
                self.stop()
                raise BonError(f"{reason} before it was ready ({self.last_line()}; log: {self.log_path})")
            try:
                with opener.open(f"{root}{health}", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            now = time.monotonic()
            if now > deadline:
                self.stop()
                raise BonError(f"{self.where}: not healthy (GET {health}) within startup_timeout {timeout:g} s; "
                               f"log: {self.log_path}")
            if now - last >= HEALTH_NOTE_S:  # loading a large model takes minutes: show it is alive
                last = now
                note(f"{self.where}: loading, {now - started:.0f} s ({self.last_line()[:100]})")
            time.sleep(0.2)

    def last_line(self) -> str:
        try:
            lines = [ln.strip() for ln in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        except OSError:
            lines = []
        return redact(lines[-1])[:200] if lines else "no output"

    def stop(self) -> None:
        """SIGTERM to the whole process group (an engine's workers too), SIGKILL after a grace period."""
        _running.discard(self)
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc is not None:
            _signal_group(proc.pid, signal.SIGKILL)  # workers the server left behind in its group
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait()
            self.watchdog = None


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# --- replicas ----------------------------------------------------------------------------------


class Replica(Protocol):
    where: str

    def judge(self, comparisons: list[Comparison]) -> tuple[list[Verdict], str | None]:
        """Verdicts in order, and why the replica is lost (None while it is alive)."""

    def stop(self) -> None: ...


class LocalReplica:
    """One server on this machine and the judge's client pointed at it."""

    def __init__(self, spec: Any, index: int, port: int | None = None, gpus: str | None = None, log_dir: Path | None = None):
        self.spec, self.index = spec, index
        self.settings = ServeSettings.of(spec)
        self.port = port or free_port()
        self.root = f"http://{HOST}:{self.port}"
        self.where = f"judge {spec.label}: replica {index} ({self.settings.engine} on {HOST}:{self.port}" + \
                     (f", GPUs {gpus})" if gpus else ")")
        env = {**os.environ, **({"CUDA_VISIBLE_DEVICES": gpus} if gpus is not None else {})}
        log_dir = log_dir or Path(tempfile.mkdtemp(prefix="bon-serve-"))
        command = self.settings.command(self.port, gpus if gpus is not None else os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.server = ServerProcess(command, env, log_dir / f"{spec.label}-{index}.log", self.where)
        self.client: Any = None
        self.sent = 0  # requests this replica's client has sent

    def start(self) -> None:
        self.server.start()

    def wait_ready(self, deadline: float) -> str:
        """Healthy, the judge's model listed, the client built (its own preflight included)."""
        self.server.wait_healthy(self.root, deadline, self.settings.startup_timeout, self.settings.health)
        served = self._models()
        if served is not None and self.settings.served_name not in served:
            self.stop()
            raise BonError(f"{self.where}: serves {', '.join(served) or 'no model'}, not {self.settings.served_name}")
        self.client = client(self.spec, f"{self.root}/v1", preflight=True)
        return self.where

    def _models(self) -> list[str] | None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"{self.root}/v1/models", timeout=10) as resp:
                data = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None  # the client's preflight reports an endpoint that does not answer
        entries = data.get("data") if isinstance(data, dict) else None
        return [str(e.get("id")) for e in entries if isinstance(e, dict)] if isinstance(entries, list) else None

    def judge(self, comparisons: list[Comparison]) -> tuple[list[Verdict], str | None]:
        self._fault_point()
        if not self.server.alive():
            reason = self.server.exit_reason()
            return [Verdict.failed(reason, transient=True) for _ in comparisons], reason
        verdicts = self.client.judge(comparisons)
        self.sent += len(comparisons)
        return verdicts, None if self.server.alive() else self.server.exit_reason()

    def _fault_point(self) -> None:
        marker, _, after = os.environ.get(KILL_ENV, "").rpartition(":")
        if not marker or self.sent < int(after or 1) or not self.server.alive():
            return
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # another replica was killed already
        _signal_group(self.server.proc.pid, signal.SIGKILL)
        self.server.proc.wait()

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        self.server.stop()


def client(spec: Any, base_url: str, preflight: bool) -> Any:
    """The judge's own OpenAI-compatible client for one replica (or, before any runs, a placeholder)."""
    from bon import registry

    return registry.create_from("judge", spec.name, {**spec.options, "name": spec.label, "base_url": base_url,
                                                     "preflight": preflight})


def gpu_blocks(settings: ServeSettings, where: str) -> list[str | None]:
    """Each local replica's ``CUDA_VISIBLE_DEVICES``: consecutive blocks of the visible devices."""
    if settings.gpus_per_replica == 0:
        return [None] * settings.replicas
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in visible.split(",") if d.strip()] if visible is not None else [str(i) for i in range(settings.gpus)]
    if len(ids) < settings.gpus:
        raise BonError(f"{where}: serve needs {settings.gpus} GPUs ({settings.describe()}); "
                       f"CUDA_VISIBLE_DEVICES lists {len(ids)}")
    size = settings.gpus_per_replica
    return [",".join(ids[i * size:(i + 1) * size]) for i in range(settings.replicas)]


def start_local(judge: "ServedJudge") -> list[Replica]:
    """Every replica started at once (loading in parallel), then each waited for; all stopped on a failure."""
    settings = judge.settings
    blocks = gpu_blocks(settings, f"judge {judge.name}")
    log_dir = Path(tempfile.mkdtemp(prefix=f"bon-serve-{judge.name}-".replace("/", "_")))
    replicas = [LocalReplica(judge.spec, i, None if settings.port is None else settings.port + i, blocks[i], log_dir)
                for i in range(settings.replicas)]
    deadline = time.monotonic() + settings.startup_timeout
    note(f"[bold]serve[/] {judge.name}: server logs in {log_dir}")
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            replica.wait_ready(deadline)
    except BaseException:
        for replica in replicas:
            replica.stop()
        raise
    return replicas


# --- the judge the stages see -----------------------------------------------------------------

Launcher = Callable[["ServedJudge"], list[Replica]]


class ServedJudge:
    """The judge of a ``serve:`` spec: its replicas start at the first batch (on this machine, or as Ray
    actors when the Ray executor sets :attr:`launcher`), each batch is split into one contiguous part
    per replica, answered concurrently, and the replicas stop at :meth:`close`."""

    def __init__(self, spec: Any):
        self.spec, self.name = spec, spec.label
        self.settings = ServeSettings.of(spec)
        self._client = client(spec, PLACEHOLDER_URL, preflight=False)  # options checked, identity known
        self.launcher: Launcher = start_local
        self.replicas: list[Replica] = []
        self.lost: str | None = None
        self._reported = False

    @property
    def store_every(self) -> int:
        """Comparisons per referee part: a full part for every replica (the client's own part size
        each), so the replicas stay busy while each part is stored as it comes back."""
        return self.settings.replicas * (getattr(self._client, "store_every", None) or 256)

    def identity(self) -> dict[str, Any]:
        served = {"engine": self.settings.engine, "model": self.settings.model, "args": redact(list(self.settings.args))}
        if self.settings.engine == "command":  # the server's whole command line is what serves the model
            served["command"] = redact(list(self.settings.command_template))
        return {**self._client.identity(), "base_url": None, "served": served}

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        if self.lost:
            self._stop_here()
        if not comparisons:
            return []
        if not self.replicas:
            started = time.perf_counter()
            note(f"[bold]serve[/] {self.name}: starting {self.settings.describe()}")
            self.replicas = self.launcher(self)
            note(f"[bold]serve[/] {self.name}: {len(self.replicas)} replicas ready in {time.perf_counter() - started:.1f} s")
        parts = split(list(comparisons), len(self.replicas))
        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            answers = list(pool.map(lambda job: job[0].judge(job[1]), zip(self.replicas, parts)))
        verdicts: list[Verdict] = []
        for got, lost in answers:
            verdicts += got
            if lost and not self.lost:
                self.lost = lost
                note(f"[bold red]replica lost[/]: {lost}; its requests are left for a rerun")
        return verdicts

    def stage_ended(self) -> None:
        """Called by the stage runner when the judge's stage is done: a replica lost on the way means
        some verdicts are missing for now, so the study stops (exit 3) instead of reporting them."""
        if self.lost and not self._reported:
            self._stop_here()

    def _stop_here(self) -> None:
        self._reported = True
        raise ServerLost(f"{self.lost}; everything answered so far is stored: rerun to continue")

    def close(self) -> None:
        replicas, self.replicas = self.replicas, []
        for replica in replicas:
            replica.stop()
        if replicas:
            note(f"[bold]serve[/] {self.name}: {len(replicas)} replicas stopped")
        self._client.close()


def split(items: list, parts: int) -> list[list]:
    """``items`` in at most ``parts`` contiguous runs whose sizes differ by at most one."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (i < extra)
        out.append(items[start:end])
        start = end
    return out
