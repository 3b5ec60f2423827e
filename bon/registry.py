"""Plugins by name: the one registry for generators, judges, verifiers, strategies and suites.

Each plugin package lists its built-ins as ``{"name": "module:attr"}`` strings (so nothing heavy is
imported until a plugin is created); installed packages add more through one entry-point group per
kind (:data:`KINDS`). A reward model from another package registers in ``bon.judges`` too: an entry
point there names either a judge class or a reward-model scorer factory (see
``judges/reward_models.py``), which becomes a pointwise judge.

Where does a new plugin go? One file plus one line in its package's ``PLUGINS`` table:
``judges/<yours>.py`` + ``judges/__init__.py``; ``generators/<yours>.py`` + ``generators/__init__.py``;
``verifiers/<yours>.py`` + ``verifiers/__init__.py``; ``bon/selection/<yours>.py`` +
``bon/selection/__init__.py``; ``generators/suites/<yours>.py`` + ``generators/suites/__init__.py``.
An installed package instead adds one entry-point line in its own ``pyproject.toml``.

Options are strict: every option must be a parameter of the plugin's constructor (or listed in its
``extra_options``); anything else is a one-line :class:`BonError` naming the nearest valid names.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import re
import sys
from importlib import metadata
from typing import Any, Mapping

from bon.errors import BonError, first_line
from bon.plugins import KINDS, builtin_names, registered_name  # noqa: F401  (re-exported: the registry's names)


def _kind(kind: str) -> tuple[str, str]:
    if kind not in KINDS:
        raise BonError(f"unknown plugin kind {kind!r} (known: {', '.join(KINDS)})")
    return KINDS[kind]


def _builtin(kind: str) -> dict[str, str]:
    _kind(kind)
    return builtin_names(kind)


def _table(kind: str) -> dict[str, str]:
    table = _builtin(kind)
    for name, value in _installed(_kind(kind)[1], tuple(sys.path)):
        table.setdefault(name, value)
    return table


@functools.lru_cache(maxsize=64)
def _installed(group: str, path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The entry points of ``group`` in the packages installed on ``path``: read once per search path
    (reading them walks every installed package's metadata: tens of milliseconds for each plugin built,
    and each part of the demo's judge stage builds its nine judges)."""
    return tuple((ep.name, ep.value) for ep in metadata.entry_points(group=group))


def names(kind: str) -> list[str]:
    return sorted(_table(kind))


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"name"`` or ``"name:model"`` (e.g. ``clipscore:openai/clip-vit-base-patch32``)."""
    name, sep, model = spec.partition(":")
    return name, ({"model": model} if sep else {})


def resolve(kind: str, name: str) -> Any:
    """The factory (usually a class) registered under ``name``."""
    table = _table(kind)
    if name not in table:
        raise BonError(f"unknown {kind} {name!r}{_suggest(name, table)} (known: {', '.join(sorted(table))})")
    module_name, _, attr = table[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BonError(f"{kind} {name!r} needs a package that is not installed: {exc.name or exc}") from None
    try:
        factory = functools.reduce(getattr, attr.split("."), module)
    except AttributeError:
        raise BonError(f"{kind} {name!r}: {table[name]} does not exist") from None
    if kind == "judge" and not _is_judge_class(factory):
        return _reward_model_judge(name)
    return factory


def _is_judge_class(factory: Any) -> bool:
    from bon.plugins import PairwiseJudge

    return isinstance(factory, type) and issubclass(factory, PairwiseJudge)


def _reward_model_judge(entry_point: str) -> Any:
    """An installed reward-model scorer factory, as the pointwise judge ``reward-model:<entry point>``."""
    from judges.reward_models import EntryPointRewardJudge

    return functools.partial(EntryPointRewardJudge, model=entry_point)


def option_names(factory: Any) -> tuple[set[str], bool]:
    """(the options a factory accepts by name, whether it also forwards unlisted ones)."""
    target = factory.__init__ if isinstance(factory, type) else factory
    params = inspect.signature(target).parameters.values()
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}
    forwards = any(p.kind is p.VAR_KEYWORD for p in params)
    extra = getattr(factory.func if isinstance(factory, functools.partial) else factory, "extra_options", ())
    return named | set(extra), forwards and not extra


def check_options(kind: str, name: str, factory: Any, options: Mapping[str, Any], where: str | None = None) -> None:
    """A one-line error for the first option the factory does not take, naming the nearest ones."""
    valid, forwards = option_names(factory)
    unknown = [k for k in options if k not in valid]
    if unknown and not forwards:
        raise BonError(_unknown_option(kind, name, unknown[0], valid, where))


def _unknown_option(kind: str, name: str, option: str, valid: set[str], where: str | None) -> str:
    shown = sorted(valid - {"name"}) or ["none"]
    prefix = f"{where}: " if where else ""
    return f"{prefix}{kind} {name!r}: unknown option {option!r}{_suggest(option, valid)} (valid: {', '.join(shown)})"


def _suggest(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def create(kind: str, spec: str, /, **options: Any) -> Any:
    """The plugin ``spec`` (``name`` or ``name:model``) built with ``options``, strictly checked."""
    return create_from(kind, spec, options)


def create_from(kind: str, spec: str, options: Mapping[str, Any], where: str | None = None) -> Any:
    """Like :func:`create`, with errors prefixed by ``where`` (a config file, a command-line flag)."""
    name, spec_options = parse_spec(spec)
    try:
        factory = resolve(kind, name)
    except BonError as exc:
        raise BonError(f"{where}: {exc}" if where else str(exc)) from None
    merged = {**spec_options, **options}
    check_options(kind, name, factory, merged, where)
    try:
        plugin = factory(**merged)
    except TypeError as exc:
        raise BonError(_bad_call(kind, name, factory, exc, where)) from None
    except BonError as exc:  # the same kind (a Stopped stays a Stopped: exit 3), prefixed
        raise type(exc)(f"{where}: {exc}" if where else str(exc)) from None
    except (ValueError, OverflowError) as exc:  # an option value the constructor cannot use, e.g. seed="1=2"
        options_given = ", ".join(f"{k}={v!r:.40}" for k, v in options.items() if k != "name")
        raise BonError(f"{where + ': ' if where else ''}{kind} {name!r}: an option value it cannot use "
                       f"({first_line(exc)}; options: {options_given or 'none'})") from None
    if kind != "suite":
        plugin._bon_plugin = name
    return plugin


def _bad_call(kind: str, name: str, factory: Any, exc: TypeError, where: str | None) -> str:
    """A constructor's TypeError as one line: an unexpected option gets the nearest valid names."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    unexpected = re.search(r"unexpected keyword argument '([^']+)'", text)
    if unexpected:
        return _unknown_option(kind, name, unexpected.group(1), option_names(factory)[0], where)
    return f"{where + ': ' if where else ''}{kind} {name!r}: bad options ({text})"
