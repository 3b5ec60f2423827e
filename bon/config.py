"""Study configs: YAML in, a validated :class:`StudyConfig` out, one-line errors naming the key."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bon import registry
from bon.content import TASKS
from bon.errors import BonError


@dataclass
class PluginSpec:
    """A plugin by registered ``name`` (or ``name:model``), the ``label`` it appears under, and options."""

    name: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)
    memory_gb: float | None = None  # declared accelerator memory of its models, for `bon run --dry-run`

    def create(self, kind: str) -> Any:
        return registry.create(kind, self.name, name=self.label, **self.options)


@dataclass
class PreferenceConfig:
    """How the mini MMRB2-style preference set is built from held-out prompts."""

    prompts_per_task: int = 30
    pairs_per_prompt: int = 4
    margin: float = 0.25
    annotators: int = 3


@dataclass
class StudyConfig:
    out: Path
    seed: int = 0
    n: int = 8
    tasks: list[str] = field(default_factory=lambda: list(TASKS))
    suite: dict[str, Any] = field(default_factory=lambda: {"name": "synthetic", "per_task": 40})
    generators: list[PluginSpec] = field(default_factory=list)
    judges: list[PluginSpec] = field(default_factory=list)
    verifier: PluginSpec = field(default_factory=lambda: PluginSpec("synthetic", "synthetic"))
    strategy: PluginSpec = field(default_factory=lambda: PluginSpec("knockout", "knockout"))
    samples: int = 1
    max_calls: int | None = None
    preference: PreferenceConfig = field(default_factory=PreferenceConfig)
    devices: dict[str, Any] = field(default_factory=dict)  # e.g. {memory_gb: 80, count: 1}, for the plan's fit check
    official: bool = False  # judges build MMRB2's official request (see judges/prompts/official.py)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        return d


def load_config(path: Path, overrides: dict[str, Any] | None = None) -> StudyConfig:
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BonError(f"{path}: config file not found") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise BonError(f"{path}: not valid YAML{where}") from None
    if not isinstance(raw, dict):
        raise BonError(f"{path}: a config must be a mapping of keys to values")
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return parse_config(raw, where=str(path))


def parse_config(raw: dict[str, Any], where: str) -> StudyConfig:
    known = set(StudyConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise BonError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    if "out" not in raw:
        raise BonError(f"{where}: missing key 'out' (the run folder)")
    cfg = StudyConfig(out=Path(raw["out"]))
    cfg.seed = _int(raw, "seed", cfg.seed, where)
    cfg.n = _int(raw, "n", cfg.n, where, minimum=1)
    cfg.samples = _int(raw, "samples", cfg.samples, where, minimum=1)
    if raw.get("max_calls") is not None:
        cfg.max_calls = _int(raw, "max_calls", 0, where, minimum=0)
    cfg.tasks = list(raw.get("tasks", cfg.tasks))
    for t in cfg.tasks:
        if t not in TASKS:
            raise BonError(f"{where}: tasks: unknown task {t!r} (expected one of {', '.join(TASKS)})")
    cfg.suite = dict(raw.get("suite", cfg.suite))
    cfg.generators = _specs(raw.get("generators"), "generator", where, "generators")
    cfg.judges = _specs(raw.get("judges"), "judge", where, "judges")
    if "verifier" in raw:
        cfg.verifier = _specs([raw["verifier"]], "verifier", where, "verifier")[0]
    if "strategy" in raw:
        cfg.strategy = _specs([raw["strategy"]], "strategy", where, "strategy")[0]
    pref = raw.get("preference") or {}
    bad = sorted(set(pref) - set(PreferenceConfig.__dataclass_fields__))
    if bad:
        raise BonError(f"{where}: preference: unknown key(s) {', '.join(bad)}")
    cfg.preference = PreferenceConfig(**pref)
    cfg.devices = _devices(raw.get("devices"), where)
    if not isinstance(raw.get("official", False), bool):
        raise BonError(f"{where}: official must be true or false, got {raw['official']!r}")
    cfg.official = bool(raw.get("official", False))
    return cfg


def _devices(raw: Any, where: str) -> dict[str, Any]:
    """``devices: {memory_gb: 80, count: 1}``: what the plan checks each stage against."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - {"memory_gb", "count"}:
        raise BonError(f"{where}: devices must be a mapping with memory_gb (per device) and optionally count")
    for key in raw:
        if isinstance(raw[key], bool) or not isinstance(raw[key], (int, float)) or raw[key] <= 0:
            raise BonError(f"{where}: devices: {key} must be a positive number, got {raw[key]!r}")
    return dict(raw)


def _int(raw: dict, key: str, default: int, where: str, minimum: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BonError(f"{where}: {key} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise BonError(f"{where}: {key} must be at least {minimum}, got {value}")
    return value


def _specs(raw: Any, kind: str, where: str, key: str) -> list[PluginSpec]:
    if not raw:
        raise BonError(f"{where}: {key}: at least one {kind} is needed")
    if not isinstance(raw, list):
        raise BonError(f"{where}: {key} must be a list")
    specs, labels = [], set()
    for i, entry in enumerate(raw):
        here = f"{where}: {key}[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict) or "name" not in entry:
            raise BonError(f"{here}: expected a name or a mapping with 'name'")
        name = str(entry["name"])
        if registry.parse_spec(name)[0] not in registry.names(kind):
            raise BonError(f"{here}: unknown {kind} {name!r} (known: {', '.join(registry.names(kind))})")
        label = str(entry.get("label", name))
        if label in labels:
            raise BonError(f"{here}: duplicate label {label!r}; give each {kind} its own label")
        labels.add(label)
        options = entry.get("options") or {}
        if not isinstance(options, dict):
            raise BonError(f"{here}: options must be a mapping")
        memory = entry.get("memory_gb")
        if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory < 0):
            raise BonError(f"{here}: memory_gb must be a number of GB, got {memory!r}")
        specs.append(PluginSpec(name, label, dict(options), memory))
    return specs
