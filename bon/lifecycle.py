"""Model life cycle in the stage runner: a plugin is created when its stage first needs it and closed
as soon as that stage is done, so a study's peak accelerator memory is its largest stage, not the sum
of every model it uses.

Plugins that hold weights may define ``close()`` (delete the weights; a served judge stops its
servers, see :mod:`bon.serve`); the runner calls it when it exists, then, if torch is already imported
(it never imports torch itself), collects garbage and empties torch's CUDA cache.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from bon.backends.device import free_memory
from bon.config import PluginSpec
from bon.errors import BonError, Stopped, first_line
from bon.redact import check_env_name


class LoadFailed(BonError):
    """A stage's plugin could not be created (e.g. out of memory while loading): the stage stops with one
    line instead of trying again for every item."""

def load_failed(kind: str, label: str, exc: BaseException, where: str = "") -> LoadFailed:
    """The one line for a plugin that could not be built: its own BonError as it is, anything else
    (out of memory, a broken model folder) named with the plugin."""
    if isinstance(exc, BonError):
        return LoadFailed(str(exc))
    return LoadFailed(f"{where + ': ' if where else ''}{kind} {label}: cannot load: {type(exc).__name__}: {first_line(exc)}")


# Called with ("load" | "released", kind, label) around every stage's model: benchmarks/gpu_check.py
# measures each stage's time and memory through this.
Observer = Callable[[str, str, str], None]
_observers: list[Observer] = []


@contextmanager
def observe(callback: Observer) -> Iterator[None]:
    _observers.append(callback)
    try:
        yield
    finally:
        _observers.remove(callback)


def _notify(event: str, kind: str, label: str) -> None:
    for callback in list(_observers):
        callback(event, kind, label)


def create(spec: PluginSpec, kind: str) -> Any:
    _notify("load", kind, spec.label)
    return spec.create(kind)


def release(plugin: Any) -> None:
    """Close ``plugin`` if it can be closed (its weights deleted)."""
    close = getattr(plugin, "close", None)
    if callable(close):
        close()


def finished(kind: str, label: str) -> None:
    """After the last reference to a stage's plugin is gone: free its memory (never importing torch),
    tell the observers."""
    free_memory()
    _notify("released", kind, label)


@contextmanager
def loaded(spec: PluginSpec, kind: str) -> Iterator[Any]:
    """The plugin of ``spec`` for the duration of a ``with`` block, closed on the way out; the caller
    calls :func:`finished` once it holds no reference to it any more. A plugin's ``stage_ended()``, if
    it has one, runs when the block completes: it raises when the stage could not really finish (a
    served judge that lost a replica)."""
    plugin = create(spec, kind)
    try:
        yield plugin
        ended = getattr(plugin, "stage_ended", None)
        if callable(ended):
            ended()
    finally:
        release(plugin)


class LazyPlugin:
    """Stands in for a generator or verifier until a stage calls it: a resumed stage with nothing left
    to do never loads the model. ``name`` is the spec's label; any other attribute creates the plugin."""

    def __init__(self, spec: PluginSpec, kind: str) -> None:
        self.spec = spec
        self.kind = kind
        self._plugin: Any = None
        self._identity: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.spec.label

    def plugin(self) -> Any:
        if self._plugin is None:
            try:
                self._plugin = create(self.spec, self.kind)
            except Stopped:
                raise  # transient (an API endpoint that is not up yet): exit 3, not a load failure
            except Exception as exc:  # noqa: BLE001 - out of memory, a broken model folder
                raise load_failed(self.kind, self.spec.label, exc) from None
            self._identity = self._plugin.identity()
        return self._plugin

    def __getattr__(self, attr: str) -> Any:  # only reached for what this class does not define
        if attr.startswith("__") or attr in ("spec", "kind", "_plugin", "_identity"):
            raise AttributeError(attr)
        return getattr(self.plugin(), attr)

    def identity(self) -> dict[str, Any]:
        """The plugin's identity if it was loaded in this run, else what its spec says (no loading
        just to write provenance)."""
        if self._plugin is not None:
            return self._plugin.identity()
        return self._identity or {"name": self.spec.label, "plugin": self.spec.name, "options": self.spec.options}

    def close(self) -> None:
        if self._plugin is not None:
            release(self._plugin)
            self._plugin = None
            finished(self.kind, self.spec.label)


def check_specs(specs: list[tuple[str, PluginSpec]]) -> None:
    """Before any stage runs: each plugin's options fit its constructor and the API keys its options
    name are set. Plugins are created only when their stage starts, so without this a typo or a
    missing key in a judge would surface after hours of generation."""
    import inspect
    import os

    from bon import registry

    for kind, spec in specs:
        name, from_spec = registry.parse_spec(spec.name)
        options = {**from_spec, **spec.options}
        factory = registry.resolve(kind, name)
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):
            continue
        try:
            signature.bind(name=spec.label, **options)
        except TypeError as exc:
            raise BonError(f"{kind} {spec.label}: bad options ({exc})") from None
        default = signature.parameters.get("api_key_env")
        variables = [default.default] if default is not None and "api_key_env" not in options else []
        for variable in [*variables, *_named_keys(options)]:
            check_env_name(variable, f"{kind} {spec.label}: option api_key_env")
            if isinstance(variable, str) and variable and not os.environ.get(variable):
                raise BonError(f"{kind} {spec.label}: environment variable {variable} is not set (it should hold the API key)")


def _named_keys(options: dict[str, Any]) -> Iterator[Any]:
    for key, value in options.items():
        if key == "api_key_env":
            yield value
        elif isinstance(value, dict):
            yield from _named_keys(value)


def check_values(cfg: Any) -> None:
    """On a first start, before anything is written: every generator, the verifier and every judge is
    built (its option values checked by its constructor) and released again, one at a time, so that
    no two models are ever held together. Plugins load their weights on first use, so building one
    is cheap."""
    where = cfg.source
    entries = [("generator", g, f"{where}: generators[{i}]") for i, g in enumerate(cfg.generators)]
    entries += [("verifier", cfg.verifier, f"{where}: verifier")]
    entries += [("judge", j, f"{where}: judges[{i}]") for i, j in enumerate(cfg.judges)]
    for kind, spec, here in entries:
        try:
            plugin = spec.create(kind, here)
        except Stopped:
            raise  # transient (an API endpoint that is not up yet): exit 3, not a bad config
        except Exception as exc:  # noqa: BLE001 - out of memory, a broken model folder
            raise load_failed(kind, spec.label, exc, here) from None
        release(plugin)
        del plugin
