"""What would stop ``bon run`` before it starts, all of it at once: ``bon run CONFIG --dry-run`` lists every
problem here and exits 2 if there is one; ``bon run`` refuses on the first (naming how many more there are).

Checked without loading a model or calling an endpoint: N, a written ``verifier:`` (no silent default),
the strategy, every plugin's options and the API key variables they name, the packages every plugin needs
(each plugin class declares them: ``requires`` or ``required_modules(options)``; nested back-ends in its
options add theirs: ``backend: openai``, ``base_url``, ``backend: transformers``, a nested generator's
``name``), the official checkouts the config names, and each plugin built once with its endpoint's
preflight turned off (its option values checked by its constructor, as ``bon run`` does on a first start).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from bon import registry
from bon.config import PluginSpec, StudyConfig
from bon.errors import BonError, Stopped, first_line

# Back-ends named in a plugin's options, and the packages they import.
BACKEND_MODULES = {"openai": ("openai",), "transformers": ("torch", "transformers"),
                   "transformers-vlm": ("torch", "transformers")}
PAPER_EXTRA = "paper"  # installs what every configs/paper_*.yaml needs (tests/test_extras.py checks it)


def problems(cfg: StudyConfig, build: bool = True, notes: list[str] | None = None) -> list[str]:
    """Every problem that would stop ``bon run`` of ``cfg`` before it starts, one line each; what is worth
    knowing but stops nothing (a model the run will download) goes to ``notes``."""
    where = cfg.source
    found: list[str] = []
    if cfg.n < 2:
        found.append(f"{where}: n = {cfg.n}: a study needs at least 2 candidates per prompt (with fewer there is nothing to choose)")
    if not cfg.verifier_written:
        found.append(f"{where}: no verifier: the config must name the downstream verifier (`verifier: synthetic` for the "
                     "synthetic world's, or the benchmark's: vqascore, gedit, isg, emma)")
    try:
        cfg.strategy.create("strategy", f"{where}: strategy")
    except BonError as exc:
        found.append(str(exc))
    from bon.plan import absent_checkouts

    absent = absent_checkouts(cfg)
    for kind, spec, here in entries(cfg):
        spec_problems = spec_checks(kind, spec, here)
        lacks_checkout = any(line.startswith(f"{kind} {spec.label}: ") for line in absent)  # named once, below
        if build and not spec_problems and not lacks_checkout:
            spec_problems = built(kind, spec, here, notes if notes is not None else [])
        found += spec_problems
    found += [f"{where}: suite {cfg.suite.get('name')}: {line}" for line in suite_packages(cfg)]
    found += [f"{where}: {line}: not there (the config's comments say what to clone)" for line in absent]
    return list(dict.fromkeys(found))


def require(cfg: StudyConfig, build: bool = False) -> None:
    """Refuse on the first problem, saying how many more there are (``bon run``)."""
    found = problems(cfg, build=build)
    if found:
        more = f" (and {len(found) - 1} more: `bon run CONFIG --dry-run` lists them all)" if len(found) > 1 else ""
        raise BonError(found[0] + more)


def entries(cfg: StudyConfig) -> list[tuple[str, PluginSpec, str]]:
    where = cfg.source
    return ([("generator", g, f"{where}: generators[{i}]") for i, g in enumerate(cfg.generators)]
            + [("verifier", cfg.verifier, f"{where}: verifier")]
            + [("judge", j, f"{where}: judges[{i}]") for i, j in enumerate(cfg.judges)])


def spec_checks(kind: str, spec: PluginSpec, here: str) -> list[str]:
    """The plugin's name, options, API key variables and packages."""
    from bon.lifecycle import check_specs

    try:
        check_specs([(kind, spec)])
    except BonError as exc:
        return [f"{here}: {exc}" if not str(exc).startswith(here) else str(exc)]
    missing = [m for m in required_modules(kind, spec) if not installed(m)]
    return [f"{here}: {kind} {spec.label} needs {', '.join(missing)}, not installed: {install_hint(missing)}"] if missing else []


def install_hint(modules: list[str]) -> str:
    from bon.backends import EXTRA_OF

    extras = sorted({EXTRA_OF.get(m, "all") for m in modules})
    return (f"pip install '.[{','.join(extras)}]'" + ("" if extras == [PAPER_EXTRA] else
            f" ('.[{PAPER_EXTRA}]' installs what every paper config needs)"))


# a constructor that needed the Hub (a model's config file): offline, the run would download it
NOT_CACHED = re.compile(r"couldn't connect|cached files|offline mode|HF_HUB_OFFLINE", re.IGNORECASE)


def built(kind: str, spec: PluginSpec, here: str, notes: list[str]) -> list[str]:
    """The plugin built once, as ``bon run`` builds it on a first start, with no endpoint contacted and
    the Hugging Face Hub offline (a model file that is not cached is a note: the run downloads it)."""
    quiet = PluginSpec(spec.name, spec.label, no_preflight(spec.options, spec.name), spec.memory_gb, spec.serve,
                       spec.seconds_per_item)
    try:
        with hub_offline():
            plugin = quiet.create(kind, here)
    except Exception as exc:  # noqa: BLE001 - a constructor's own failure (a BonError, or anything), named with the plugin
        line = str(exc) if isinstance(exc, BonError) else f"cannot build: {type(exc).__name__}: {first_line(exc)}"
        line = line if line.startswith(here) else f"{here}: {line}"
        if NOT_CACHED.search(line) and not isinstance(exc, Stopped):
            notes.append(f"{line} -- not checked offline: `bon run` downloads what is not cached")
            return []
        return [line]
    from bon.lifecycle import release

    release(plugin)
    return []


@contextmanager
def hub_offline() -> Iterator[None]:
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def no_preflight(options: dict[str, Any], name: str) -> dict[str, Any]:
    """``options`` with ``preflight: false`` wherever an endpoint would be contacted at construction."""
    from bon.plan import API_PLUGINS

    out = copy.deepcopy(options)

    def walk(mapping: dict[str, Any], remote: bool) -> None:
        if remote or mapping.get("backend") == "openai" or mapping.get("base_url"):
            mapping["preflight"] = False
        for value in mapping.values():
            if isinstance(value, dict):
                walk(value, False)

    walk(out, registry.parse_spec(name)[0] in API_PLUGINS)
    return out


def required_modules(kind: str, spec: PluginSpec) -> list[str]:
    """The import names of the optional packages a plugin needs: its class's declaration and the
    back-ends its options name."""
    name, from_spec = registry.parse_spec(spec.name)
    options = {**from_spec, **spec.options}
    if spec.serve is not None:  # bon's served judge talks to its servers through the OpenAI client
        return list(dict.fromkeys(["openai", *_declared(kind, name, options)]))
    return list(dict.fromkeys([*_declared(kind, name, options), *_nested(options)]))


def _declared(kind: str, name: str, options: dict[str, Any]) -> Iterator[str]:
    try:
        cls = registry.resolve(kind, name)
    except BonError:
        return
    yield from getattr(cls, "requires", ())
    custom = getattr(cls, "required_modules", None)
    if callable(custom):
        yield from custom(options)


def _nested(options: dict[str, Any]) -> Iterator[str]:
    for value in options.values():
        if not isinstance(value, dict):
            continue
        backend = value.get("backend")
        if backend in BACKEND_MODULES:
            yield from BACKEND_MODULES[backend]
        elif value.get("base_url"):
            yield "openai"
        if isinstance(value.get("name"), str) and value["name"] in registry.names("generator"):
            yield from _declared("generator", value["name"], value.get("options") or {})
        yield from _nested(value)


def suite_packages(cfg: StudyConfig) -> list[str]:
    """A benchmark suite read from the Hub (no ``path:``) needs its reader's packages."""
    suite = cfg.suite
    if suite.get("path"):
        return []
    try:
        factory = registry.resolve("suite", suite.get("name", "synthetic"))
    except BonError:
        return []
    missing = [m for m in getattr(factory, "requires", ()) if not installed(m)]
    return [f"reading it from the Hub needs {', '.join(missing)}, not installed: {install_hint(missing)} (or give path:)"] if missing else []


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (a module blocked as None in
    ``sys.modules`` counts as absent, as ``import`` treats it)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
