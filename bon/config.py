"""Study configs: YAML in, a validated :class:`StudyConfig` out, one-line errors naming the key.

Everything is checked before a study writes anything: keys, values, every plugin's name and options
(by its constructor's signature) and the suite's options; :func:`create_plugins` then builds the
plugins so their own value checks run too. A run folder's ``config.yaml`` is a valid input: its
``study`` section is the config, the provenance beside it is ignored.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from bon import registry, suites
from bon.content import TASKS
from bon.errors import BonError, first_line
from bon.redact import remember_options


@dataclass
class PluginSpec:
    """A plugin by registered ``name`` (or ``name:model``), the ``label`` it appears under, and options."""

    name: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)
    memory_gb: float | None = None  # declared accelerator memory of its models, for `bon run --dry-run`
    serve: dict[str, Any] | None = None  # a judge whose servers bon starts (bon.serve.parse_serve)
    seconds_per_item: float | None = None  # accelerator seconds per image, score or call, for `--dry-run`'s GPU-hours

    def create(self, kind: str, where: str | None = None) -> Any:
        if self.serve is not None:
            from bon.serve import ServedJudge

            try:
                return ServedJudge(self)
            except BonError as exc:  # the same kind (a Stopped stays a Stopped), prefixed
                raise type(exc)(f"{where}: {exc}" if where else str(exc)) from None
        return registry.create_from(kind, self.name, self._options(kind), where)

    def check(self, kind: str, where: str) -> None:
        """Name and options, checked against the plugin's constructor without building it."""
        name, spec_options = registry.parse_spec(self.name)
        try:
            factory = registry.resolve(kind, name)
        except BonError as exc:
            raise BonError(f"{where}: {exc}") from None
        registry.check_options(kind, name, factory, {**spec_options, **self._options(kind)}, where)

    def _options(self, kind: str) -> dict[str, Any]:
        # generators, judges and verifiers appear under their label; a strategy has none
        return dict(self.options) if kind == "strategy" else {"name": self.label, **self.options}


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
    retry_missing: bool = False  # ask again the missing (unparseable) answers of judges that sample (--retry-missing)
    preference: PreferenceConfig = field(default_factory=PreferenceConfig)
    source: str = field(default="config", repr=False, compare=False)  # where it came from, for error lines
    # whether the config file names its verifier: `bon run` refuses one that does not (no silent default)
    verifier_written: bool = field(default=True, repr=False, compare=False)
    shard: str | None = None  # "I/K": this folder runs the I-th of K deterministic prompt shards (bon merge joins them)
    executor: dict[str, Any] = field(default_factory=lambda: {"name": "local", "options": {}})  # where stage work runs
    devices: dict[str, Any] = field(default_factory=dict)  # e.g. {memory_gb: 80, count: 1}, for the plan's fit check
    official: bool = False  # judges build MMRB2's official request (see judges/prompts/official.py)
    # what the analysis leaves out as leaks: judges sharing the verifier's grader, pairs from the downstream
    # benchmark (analysis/leakage.py); changing it changes only the report, never the run
    leakage: dict[str, Any] = field(default_factory=lambda: {"grader_judges": "exclude", "overlapping_pairs": "drop",
                                                             "sources": []})
    # what a failed verifier score becomes in the Best-of-N metrics: official (the benchmark's own rule), zero or
    # missing (analysis.bon_metrics.apply_on_failure); like leakage, it changes only the report, never the run
    on_failure: str = "official"
    # the report's judge axis: the run's own preference set, the MMRB2 paper's table, or a CSV FILE (judge,
    # task, accuracy[, n_pairs]); like leakage, it changes only the report
    accuracies: str = "preference"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        del d["source"], d["verifier_written"]
        for entry in [*d["generators"], *d["judges"], d["verifier"], d["strategy"]]:
            for key in ("serve", "seconds_per_item"):
                if entry.get(key) is None:  # recorded only where set: older run folders' configs still match
                    entry.pop(key, None)
        return d


def load_config(path: Path, overrides: dict[str, Any] | None = None) -> StudyConfig:
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise BonError(f"{path}: a config must be a mapping of keys to values")
    if isinstance(raw.get("study"), dict):  # a run folder's config.yaml: the study, beside its provenance
        raw = {k: v for k, v in raw["study"].items() if v is not None}
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return parse_config(raw, where=str(path))


MAX_YAML_NODES = 100_000  # far above any study config; an alias bomb expands to billions


def read_yaml(path: Path) -> Any:
    """A YAML file as data, or a one-line :class:`BonError` naming it. Stricter than ``yaml.safe_load``
    where a hand-edited file would otherwise mean something else than it says: a key given twice (PyYAML
    keeps the last silently) and aliases that expand past :data:`MAX_YAML_NODES` items are refused."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # -sig: an editor's byte-order mark is not data
    except FileNotFoundError:
        raise BonError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise BonError(f"{path}: is a folder, expected a YAML file") from None
    except UnicodeDecodeError as exc:
        raise BonError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml(node, path)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise BonError(f"{path}: not valid YAML{where}") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise BonError(f"{path}: a value YAML cannot read ({first_line(exc, 120)})") from None
    finally:
        loader.dispose()


def _check_yaml(root: yaml.Node, path: Path) -> None:
    """Refuse duplicate keys in any mapping, and aliases that expand too far (sizes memoised per node,
    so the check itself stays linear in the file)."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, depth: int = 0) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if depth > 500:
            raise BonError(f"{path}: nested more than 500 levels deep")
        sizes[id(node)] = 1  # a node that contains itself counts once
        total = 1
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if (key.tag, key.value) in seen:
                        raise BonError(f"{path}: key {key.value!r} appears twice (lines {seen[key.tag, key.value]} and "
                                       f"{key.start_mark.line + 1}); keep one")
                    seen[key.tag, key.value] = key.start_mark.line + 1
                total += size(key, depth + 1) + size(value, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(item, depth + 1) for item in node.value)
        if total > MAX_YAML_NODES:
            raise BonError(f"{path}: its aliases expand to more than {MAX_YAML_NODES:,} items (an alias bomb?)")
        sizes[id(node)] = total
        return total

    size(root)


def parse_config(raw: dict[str, Any], where: str) -> StudyConfig:
    known = set(StudyConfig.__dataclass_fields__) - {"source", "verifier_written"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise BonError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    if "out" not in raw:
        raise BonError(f"{where}: missing key 'out' (the run folder)")
    if not isinstance(raw["out"], str) or not raw["out"].strip():
        raise BonError(f"{where}: out must be the run folder's path, got {raw['out']!r:.60}")
    cfg = StudyConfig(out=Path(raw["out"]), source=where)
    cfg.seed = _int(raw, "seed", cfg.seed, where)
    cfg.n = _int(raw, "n", cfg.n, where, minimum=1)
    cfg.samples = _int(raw, "samples", cfg.samples, where, minimum=1)
    if raw.get("max_calls") is not None:
        cfg.max_calls = _int(raw, "max_calls", 0, where, minimum=0)
    cfg.tasks = _tasks(raw.get("tasks", cfg.tasks), where)
    if not isinstance(raw.get("suite", {}), dict):
        raise BonError(f"{where}: suite must be a mapping with 'name' and the suite's options")
    cfg.suite = dict(raw.get("suite", cfg.suite))
    cfg.generators = _specs(raw.get("generators"), "generator", where, "generators")
    cfg.judges = _specs(raw.get("judges"), "judge", where, "judges")
    if "verifier" in raw:
        cfg.verifier = _spec(raw["verifier"], "verifier", f"{where}: verifier")
    cfg.verifier_written = "verifier" in raw
    if "strategy" in raw:
        cfg.strategy = _spec(raw["strategy"], "strategy", f"{where}: strategy")
    pref = raw.get("preference") or {}
    if not isinstance(pref, dict):
        raise BonError(f"{where}: preference must be a mapping")
    bad = sorted(set(pref) - set(PreferenceConfig.__dataclass_fields__))
    if bad:
        raise BonError(f"{where}: preference: unknown key(s) {', '.join(bad)}"
                       f" (known: {', '.join(PreferenceConfig.__dataclass_fields__)})")
    for key, least in (("prompts_per_task", 0), ("pairs_per_prompt", 1), ("annotators", 1)):
        if key in pref:
            _int(pref, key, 0, f"{where}: preference", minimum=least)
    if "margin" in pref and (isinstance(pref["margin"], bool) or not isinstance(pref["margin"], (int, float))
                             or not math.isfinite(pref["margin"])):
        raise BonError(f"{where}: preference: margin must be a number, got {pref['margin']!r}")
    cfg.preference = PreferenceConfig(**pref)
    suites.suite_call(cfg.suite, cfg.tasks, cfg.seed, where=f"{where}: suite")
    if raw.get("shard") is not None:
        cfg.shard = str(raw["shard"])
        parse_shard(cfg.shard, where=f"{where}: shard")
    if raw.get("executor") is not None:
        cfg.executor = parse_executor(raw["executor"], where=f"{where}: executor")
    cfg.devices = _devices(raw.get("devices"), where)
    for key in ("official", "retry_missing"):
        if not isinstance(raw.get(key, False), bool):
            raise BonError(f"{where}: {key} must be true or false, got {raw[key]!r}")
    cfg.official, cfg.retry_missing = bool(raw.get("official", False)), bool(raw.get("retry_missing", False))
    cfg.leakage = parse_policy(raw.get("leakage"), where).as_dict()
    cfg.on_failure = raw.get("on_failure", "official")
    if cfg.on_failure not in ("official", "zero", "missing"):
        raise BonError(f"{where}: on_failure must be official, zero or missing, got {cfg.on_failure!r:.60}")
    cfg.accuracies = _accuracies(raw.get("accuracies", "preference"), where)
    return cfg


ACCURACY_SOURCES = ("preference", "published")


def _accuracies(raw: Any, where: str) -> str:
    """``accuracies: preference | published | FILE``: a CSV file is kept as an absolute path, so the
    recorded config still finds it when ``bon report`` runs from another folder."""
    if raw in ACCURACY_SOURCES:
        return str(raw)
    if not isinstance(raw, str) or not raw.endswith(".csv"):
        raise BonError(f"{where}: accuracies must be preference, published or a CSV file (judge, task, accuracy), got {raw!r}")
    path = Path(raw).expanduser().resolve()
    if not path.is_file():
        raise BonError(f"{where}: accuracies: {raw} is not a file")
    return str(path)


EXECUTORS = ("local", "ray")
RAY_OPTIONS = ("address", "workers", "cpus_per_worker", "gpus_per_worker", "batch", "num_cpus", "lost_node_timeout")


def parse_executor(raw: Any, where: str) -> dict[str, Any]:
    """A validated ``{name, options}`` mapping (a bare name is accepted)."""
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict) or raw.get("name") not in EXECUTORS:
        raise BonError(f"{where}: expected a mapping with name one of {', '.join(EXECUTORS)}, got {raw!r}")
    unknown = sorted(set(raw) - {"name", "options"})
    if unknown:
        raise BonError(f"{where}: unknown key(s) {', '.join(unknown)} (known: name, options)")
    options = raw.get("options") or {}
    if not isinstance(options, dict):
        raise BonError(f"{where}: options must be a mapping")
    allowed = RAY_OPTIONS if raw["name"] == "ray" else ()
    bad = sorted(set(options) - set(allowed))
    if bad:
        raise BonError(f"{where}: unknown option(s) {', '.join(bad)} for executor {raw['name']} "
                       f"(known: {', '.join(allowed) or 'none'})")
    return {"name": raw["name"], "options": dict(options)}


def parse_shard(text: str | None, where: str = "--shard") -> tuple[int, int] | None:
    """``"I/K"`` -> (I, K) with 0 <= I < K; None stays None."""
    if text is None:
        return None
    index, sep, count = str(text).partition("/")
    try:
        i, k = int(index), int(count)
    except ValueError:
        i, k = -1, 0
    if not sep or k < 1 or not 0 <= i < k:
        raise BonError(f"{where}: expected I/K with 0 <= I < K (e.g. 0/4), got {text!r}")
    return i, k


# --- the leakage policy (config ``leakage:``; analysis.leakage applies it) ---------------------------

GRADER_POLICIES = ("exclude", "keep")
PAIR_POLICIES = ("drop", "keep")
LEAKAGE_KEYS = ("grader_judges", "overlapping_pairs", "sources")


@dataclass(frozen=True)
class LeakagePolicy:
    """What the analysis does with leaky judges and pairs (config ``leakage:``, CLI flags override)."""

    grader_judges: str = "exclude"
    overlapping_pairs: str = "drop"
    sources: tuple[str, ...] = ()

    @property
    def excludes_graders(self) -> bool:
        return self.grader_judges == "exclude"

    def as_dict(self) -> dict[str, Any]:
        return {"grader_judges": self.grader_judges, "overlapping_pairs": self.overlapping_pairs,
                "sources": list(self.sources)}


def parse_policy(raw: Any, where: str) -> LeakagePolicy:
    """A config's ``leakage:`` mapping (None: the defaults); a one-line error naming the bad key."""
    if raw is None:
        return LeakagePolicy()
    if not isinstance(raw, Mapping):
        raise BonError(f"{where}: leakage must be a mapping with {', '.join(LEAKAGE_KEYS)}")
    unknown = sorted(set(raw) - set(LEAKAGE_KEYS))
    if unknown:
        raise BonError(f"{where}: leakage: unknown key(s) {', '.join(unknown)} (known: {', '.join(LEAKAGE_KEYS)})")
    for key, allowed in (("grader_judges", GRADER_POLICIES), ("overlapping_pairs", PAIR_POLICIES)):
        if key in raw and raw[key] not in allowed:
            raise BonError(f"{where}: leakage: {key} must be {' or '.join(allowed)}, got {raw[key]!r}")
    sources = raw.get("sources") or []
    if isinstance(sources, str) or not all(isinstance(s, str) and s.strip() for s in sources):
        raise BonError(f"{where}: leakage: sources must be a list of prompt source names, got {sources!r}")
    return LeakagePolicy(raw.get("grader_judges", "exclude"), raw.get("overlapping_pairs", "drop"), tuple(sources))


def _devices(raw: Any, where: str) -> dict[str, Any]:
    """``devices: {memory_gb: 80, count: 1}``: what the plan checks each stage against."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - {"memory_gb", "count"}:
        raise BonError(f"{where}: devices must be a mapping with memory_gb (per device) and optionally count")
    for key in raw:
        if isinstance(raw[key], bool) or not isinstance(raw[key], (int, float)) or not raw[key] > 0 or not math.isfinite(raw[key]):
            raise BonError(f"{where}: devices: {key} must be a positive number, got {raw[key]!r}")
    return dict(raw)


def _tasks(raw: Any, where: str) -> list[str]:
    """A non-empty list of distinct task names (a bare string or a mapping is not a list of tasks)."""
    if not isinstance(raw, list) or not raw:
        raise BonError(f"{where}: tasks must be a non-empty list of {', '.join(TASKS)}, got {raw!r:.60}")
    for t in raw:
        if not isinstance(t, str) or t not in TASKS:
            raise BonError(f"{where}: tasks: unknown task {t!r:.60} (expected one of {', '.join(TASKS)})")
    if len(set(raw)) < len(raw):
        raise BonError(f"{where}: tasks: a task is listed twice in {raw}")
    return list(raw)


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
    specs: list[PluginSpec] = []
    for i, entry in enumerate(raw):
        here = f"{where}: {key}[{i}]"
        spec = _spec(entry, kind, here)
        if spec.label in {s.label for s in specs}:
            raise BonError(f"{here}: duplicate label {spec.label!r}; give each {kind} its own label")
        specs.append(spec)
    return specs


def _spec(entry: Any, kind: str, here: str) -> PluginSpec:
    """One plugin entry (``name`` or ``{name, label, options}``), its name and options checked."""
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict) or "name" not in entry:
        raise BonError(f"{here}: expected a name or a mapping with 'name'")
    known = ("name", "label", "options", "memory_gb", "seconds_per_item") + (("serve",) if kind == "judge" else ())
    bad = sorted(set(entry) - set(known))
    if bad:
        raise BonError(f"{here}: unknown key(s) {', '.join(bad)} (known: {', '.join(known)})")
    options = entry.get("options") or {}
    if not isinstance(options, dict):
        raise BonError(f"{here}: options must be a mapping")
    memory = entry.get("memory_gb")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory < 0):
        raise BonError(f"{here}: memory_gb must be a number of GB, got {memory!r}")
    seconds = entry.get("seconds_per_item")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0):
        raise BonError(f"{here}: seconds_per_item must be a number of seconds, got {seconds!r}")
    name = str(entry["name"])
    remember_options(options, here)  # before any check that could quote a value
    spec = PluginSpec(name, str(entry.get("label", name)), dict(options), memory,
                      seconds_per_item=None if seconds is None else float(seconds))
    spec.check(kind, here)
    if entry.get("serve") is not None:
        _serve(spec, entry["serve"], here)
    return spec


def _serve(spec: PluginSpec, raw: Any, here: str) -> None:
    """A served judge: its ``serve:`` checked, and no API key asked for unless its options name one."""
    from bon.serve import check_servable, judge_model, parse_serve

    check_servable(registry.resolve("judge", registry.parse_spec(spec.name)[0]), spec.options, here)
    spec.serve = parse_serve(raw, judge_model(spec), here)
    spec.options.setdefault("api_key_env", None)
