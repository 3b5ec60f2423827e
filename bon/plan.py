"""What a study will cost before it runs: ``bon run CONFIG --dry-run``.

Per stage (each generator, the verifier, each judge: the stage runner holds one of them at a time),
the models it loads and their memory, and the calls it makes; the API cost where a judge sets prices;
and whether each stage fits the devices. Nothing is loaded and nothing is called: model sizes come
from the safetensors files of a local folder or of the local Hugging Face cache, else from the spec's
``memory_gb``, else they are "unknown"; prompt counts come from a suite that is on disk, or from the
benchmark's published size.

API dollars and local seconds per call come from :mod:`bon.costs` (the study's own first requests,
counted; every assumption printed); ``--calibrate PILOT_DIR`` puts what a pilot run measured beside them
and scales the totals by it. ``--shard I/K`` plans that shard's share. The host memory and disk the run
needs are estimated too (:func:`host_needs`).

Memory means weights only (activations come on top, see the configs' notes). Where one plugin loads
several diffusers pipelines (the interleaved agent), components that are the same in both (same
folder name and size: FLUX's text encoders and VAE) are counted once, as the agent shares them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from bon import costs, registry
from bon.costs import local_snapshot
from bon.config import PluginSpec, StudyConfig
from bon.errors import BonError
from bon.redact import redact

GB = 1e9
# Published sizes of the benchmark suites (prompts), used when the suite is not on disk.
SUITE_SIZES = {"genai-bench": 1600, "gedit-bench": 606, "isg-bench": 1150, "emma": 2788}
API_PLUGINS = {"openai-compatible", "openai-images"}
# Host memory and disk (see host_needs): a process's own memory with bon and its libraries imported is
# measured; torch with a CUDA context and a loaded model's host-side buffers come on top
TORCH_HOST_GB = 3.0
RECORD_BYTES = 2048  # per candidate held in memory: its path, digest, seeds, provenance and score
PNG_BYTES_PER_PIXEL = 1.5  # a generated photo-like RGB image as PNG (raw 3 bytes a pixel, ~2x compression)
TEXT_BYTES_PER_TOKEN = 4


@dataclass
class ModelRef:
    model: str
    remote: bool  # served by an API: no local memory
    on_device: bool  # not pinned to the CPU


@dataclass
class Stage:
    name: str
    spec: PluginSpec
    models: list[ModelRef]
    memory_gb: float | None  # None: unknown
    memory_source: str
    calls: str
    cost_usd: float | None = None
    on_device: bool = True
    serve: Any = None  # bon.serve.ServeSettings of a served judge
    items: int | None = None  # images to generate, candidates to score or judge calls
    seconds_per_item: float | None = None  # accelerator seconds per item: the config's, the cost model's, else the plugin's
    seconds_source: str = ""
    per_call: Any = None  # bon.costs.CallCost of one call (a chat judge, a graded verifier's grader)
    grader_calls: int | None = None  # a graded verifier's API calls
    notes: list[str] = field(default_factory=list)  # the assumptions behind this stage's figures
    pilot: dict[str, float] = field(default_factory=dict)  # what a pilot run measured per item (--calibrate)
    pilot_lines: list[str] = field(default_factory=list)  # the model's figure beside the pilot's, in words

    @property
    def gpu_hours(self) -> float | None:
        """Accelerator hours: items x seconds per item (0 for an API stage; None when either is unknown)."""
        if not self.on_device or (self.memory_source == "API"):
            return 0.0
        if self.items is None or self.seconds_per_item is None:
            return None
        return self.items * self.seconds_per_item / 3600


@dataclass
class Plan:
    config: str
    prompts: dict[str, int | None]  # "best_of_n" and "preference" prompts; None when unknown
    prompt_source: str
    n: int
    strategy: str
    stages: list[Stage] = field(default_factory=list)
    device_gb: float | None = None
    device_count: int = 1
    device_source: str = "none declared and no CUDA device visible: fit not checked"
    executor: str = "local"
    absent: list[str] = field(default_factory=list)  # official checkouts the config names that are not there
    shard: str | None = None  # "I/K": this plan is that shard's share
    full_prompts: dict[str, int | None] = field(default_factory=dict)  # the whole study's, when sharded
    host: dict[str, Any] = field(default_factory=dict)  # host memory and disk the run needs (host_needs)
    problems: list[str] = field(default_factory=list)  # what would stop `bon run` before it starts (bon.preflight)
    pilot: str | None = None  # the pilot run folder the figures were calibrated by

    def too_big(self) -> Stage | None:
        """The first stage whose known memory exceeds what one device (or all, for device_map; a served
        replica's tensor-parallel GPUs) holds."""
        if self.device_gb is None:
            return None
        for stage in self.stages:
            spans = stage.spec.options.get("device_map") not in (None, "cuda", "cpu")
            room = self.device_gb * (self.device_count if spans else stage.serve.tensor_parallel if stage.serve else 1)
            if stage.on_device and stage.memory_gb is not None and stage.memory_gb > room:
                return stage
        return None


def plan_study(cfg: StudyConfig, config_name: str) -> Plan:
    prompts, source = count_prompts(cfg)
    full = dict(prompts)
    if cfg.shard:
        prompts = shard_share(prompts, cfg.shard)
    plan = Plan(config_name, prompts, source, cfg.n, cfg.strategy.name, executor=cfg.executor.get("name", "local"),
                shard=cfg.shard, full_prompts=full)
    bon = prompts["best_of_n"]
    for spec in cfg.generators:
        calls = f"{bon} prompts, {bon * cfg.n} candidates" if bon is not None else "unknown prompts"
        # every prompt's candidates, the preference set's held-out prompts included
        images = sum(prompts.values()) * cfg.n if None not in prompts.values() else None
        plan.stages.append(_stage(f"generate {spec.label}", spec, "generator", calls, images))
    candidates = (sum(prompts.values()) * cfg.n * len(cfg.generators)) if None not in prompts.values() else None
    verify = _stage(f"verify {cfg.verifier.label}", cfg.verifier, "verifier",
                    f"{candidates} candidates" if candidates is not None else "unknown candidates", candidates)
    price_verifier(cfg, verify)
    plan.stages.append(verify)
    shapes: Any = None
    for spec in cfg.judges:
        calls, count = judge_calls(cfg, spec, prompts)
        stage = _stage(f"judge {spec.label}", spec, "judge", calls, count)
        if stage.serve is not None and stage.serve.replicas > 1 and count is not None:
            stage.calls += f"; over {stage.serve.replicas} replicas, ~{-(-count // stage.serve.replicas)} each"
        if costs.chat_judge(spec):  # the suite's first prompts are read once, for the judges that are priced by them
            shapes = shapes or costs.sample_prompts(cfg)
            price_judge(cfg, stage, shapes)
        plan.stages.append(stage)
    plan.device_gb, plan.device_count, plan.device_source = device_memory(cfg)
    plan.absent = absent_checkouts(cfg)
    plan.host = host_needs(cfg, prompts)
    return plan


def calibrate(plan: Plan, pilot_dir: Path) -> None:
    """Scale each stage by what a pilot run of the same study (``bon run CONFIG --limit 50``) measured per
    item: seconds per candidate generated and scored (the stage's wall time over its candidates, all
    generators together), and per judge call its tokens, dollars and judge seconds (stats.json). The
    model's figure stays beside the pilot's; the totals use the pilot's."""
    from bon.shards import read_stats_object

    pilot_dir = Path(pilot_dir)
    stats = read_stats_object(pilot_dir / "stats.json")
    timings = stats.get("timings_s") or {}
    per_generator = {p.parent.name: _lines(p) for p in (pilot_dir / "candidates").glob("*/candidates.jsonl")}
    candidates = sum(per_generator.values())
    scored = _lines(pilot_dir / "scores.jsonl")
    plan.pilot = str(pilot_dir)
    for stage in plan.stages:
        kind, _, label = stage.name.partition(" ")
        if kind == "generate" and candidates and "generate" in timings:
            _calibrate_seconds(stage, float(timings["generate"]) / candidates,
                               f"{timings['generate']} s for {candidates} candidates of all generators")
        elif kind == "verify" and scored and "verify" in timings:
            _calibrate_seconds(stage, float(timings["verify"]) / scored, f"{timings['verify']} s for {scored} candidates")
        elif kind == "judge":
            spent = ((stats.get("judges") or {}).get(label) or {}).get("total") or {}
            calls = int(spent.get("calls_made") or 0)
            if not calls:
                stage.pilot_lines.append("no calls made in the pilot (all answers served from its store, or not a judge there)")
                continue
            _calibrate_judge(stage, spent, calls)


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


def _calibrate_seconds(stage: Stage, seconds: float, measured: str) -> None:
    model = f"{stage.seconds_per_item:.3g} s ({stage.seconds_source})" if stage.seconds_per_item is not None else "unknown"
    stage.pilot["seconds_per_item"] = seconds
    stage.pilot_lines.append(f"seconds per item {model} -> {seconds:.3g} s (pilot: {measured}; wall time)")
    stage.seconds_per_item, stage.seconds_source = seconds, "pilot"


def _calibrate_judge(stage: Stage, spent: dict[str, Any], calls: int) -> None:
    per = {"input_tokens": float(spent.get("input_tokens") or 0) / calls, "output_tokens": float(spent.get("output_tokens") or 0) / calls,
           "usd": float(spent.get("cost_usd") or 0) / calls, "seconds_per_item": float(spent.get("judge_seconds") or 0) / calls}
    stage.pilot.update(per, calls=calls)
    model = stage.per_call
    tokens = f"{costs.tokens_text(model)}" if model is not None else "no token model"
    stage.pilot_lines.append(f"{tokens} -> {per['input_tokens']:,.0f} in + {per['output_tokens']:,.0f} out (pilot, {calls} calls)")
    if model is not None and model.usd is not None or per["usd"]:
        before = f"${model.usd:.4f}" if model is not None and model.usd is not None else "unpriced"
        stage.pilot_lines.append(f"{before} -> ${per['usd']:.4f} per call")
        if stage.items is not None:
            stage.cost_usd = stage.items * per["usd"]
    seconds = f"{stage.seconds_per_item:.3g} s ({stage.seconds_source})" if stage.seconds_per_item is not None else "unknown"
    stage.pilot_lines.append(f"seconds per call {seconds} -> {per['seconds_per_item']:.3g} s (judge seconds)")
    stage.seconds_per_item, stage.seconds_source = per["seconds_per_item"], "pilot"
    if stage.items is not None:
        stage.pilot_lines.append(f"{stage.items} calls: ~${stage.items * per['usd']:,.2f}, "
                                 f"~{stage.items * per['seconds_per_item'] / 3600:,.2f} hours of judge time")


def shard_share(prompts: dict[str, int | None], shard: str) -> dict[str, int | None]:
    """The prompts one shard runs: ``bon.shards`` stripes the Best-of-N and the preference prompts, each
    ``i % K == I`` in suite order."""
    from bon.config import parse_shard

    index, count = parse_shard(shard)  # type: ignore[misc]
    return {k: None if v is None else len(range(index, v, count)) for k, v in prompts.items()}


def price_judge(cfg: StudyConfig, stage: Stage, shapes: tuple[dict, str]) -> None:
    """A chat judge's tokens per call from the study's first requests, its API dollars, and for a local
    model its seconds per call from the device model (the config's figure is kept beside, in the notes)."""
    per_call = costs.judge_call(cfg, stage.spec, *shapes)
    if per_call is None:
        return
    stage.per_call = per_call
    stage.notes += per_call.assumptions
    if per_call.usd is not None and stage.items is not None:
        stage.cost_usd = stage.items * per_call.usd
    if stage.memory_source != "API" and stage.memory_gb:
        seconds, said = costs.local_seconds(per_call, stage.memory_gb, costs.batch_of(stage.spec.options), costs.device(cfg))
        per_call.seconds = seconds
        stage.notes.append(f"local seconds per call {seconds:.2f}: {said}" + _declared_wins(stage, seconds))


def price_verifier(cfg: StudyConfig, stage: Stage) -> None:
    """A graded verifier's grader calls: their API dollars, or a local grader's seconds per candidate."""
    found = costs.verifier_calls(cfg, stage.items)
    if found is None:
        return
    per_call, calls, what = found
    stage.per_call, stage.grader_calls = per_call, calls
    stage.notes += per_call.assumptions
    api = stage.memory_source == "API" or not [m for m in stage.models if not m.remote]
    if api:
        stage.calls += f"; {calls} grader calls ({costs.tokens_text(per_call)})"
        stage.cost_usd = calls * per_call.usd if per_call.usd is not None else None
    elif stage.memory_gb and stage.items:
        seconds, said = costs.local_seconds(per_call, stage.memory_gb, costs.batch_of(stage.spec.options), costs.device(cfg))
        per_item = seconds * calls / stage.items
        stage.notes.append(f"local seconds per candidate {per_item:.2f}: {said}" + _declared_wins(stage, per_item))


def _declared_wins(stage: Stage, modelled: float) -> str:
    """The stage's seconds per item: the config's ``seconds_per_item`` where it sets one (said beside the
    model's), else the cost model's."""
    if stage.seconds_source == "config":
        return f"; the config's seconds_per_item {stage.seconds_per_item:g} s is used"
    stage.seconds_per_item, stage.seconds_source = modelled, "cost model"
    return ""


def host_needs(cfg: StudyConfig, prompts: dict[str, int | None]) -> dict[str, Any]:
    """Host memory and disk the run needs: the candidates' files at their generators' resolution, and a
    process's memory (this one's, measured, with bon imported), plus torch where a model runs locally, the
    bounded decoded-image cache and a small record per candidate."""
    import resource

    total = sum(prompts.values()) if None not in prompts.values() else None  # type: ignore[arg-type]
    if total is None:
        return {}
    disk = 0.0
    said = []
    for spec in cfg.generators:
        per_task = []
        for task in cfg.tasks:
            shape, _ = costs.response_shape(task, spec, costs.Shape("", [(costs.IMAGE_SIDE, costs.IMAGE_SIDE)]))
            size = sum(w * h for w, h in shape.images) * PNG_BYTES_PER_PIXEL + len(shape.text) / costs.CHARS_PER_TOKEN * TEXT_BYTES_PER_TOKEN
            per_task.append(size)
            said.append(f"{costs.base(task)} {len(shape.images)} x {'/'.join(f'{w}x{h}' for w, h in dict.fromkeys(shape.images)) or 'text'}")
        disk += sum(per_task) / len(per_task) * total * cfg.n
        said[-len(cfg.tasks)] = f"{spec.label}: {said[-len(cfg.tasks)]}"
    candidates = total * cfg.n * len(cfg.generators)
    cache, cache_said = image_cache_bytes()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB
    local = any(not m.remote for spec in [*cfg.generators, cfg.verifier, *cfg.judges]
                for m in model_refs(spec, "judge" if spec in cfg.judges else "verifier" if spec is cfg.verifier else "generator"))
    memory = base + cache / GB + candidates * RECORD_BYTES / GB + (TORCH_HOST_GB if local else 0)
    return {"disk_gb": disk / GB, "memory_gb": memory, "candidates": candidates,
            "assumptions": [f"disk: {candidates} candidates as PNG at {PNG_BYTES_PER_PIXEL:g} bytes per pixel "
                            f"({', '.join(said)} per candidate), text at {TEXT_BYTES_PER_TOKEN} bytes a token",
                            f"memory: this process {base:.2f} GB (bon imported, measured) + decoded-image cache "
                            f"{cache / 2**30:g} GiB ({cache_said}) + {RECORD_BYTES} bytes per candidate"
                            + (f" + {TORCH_HOST_GB:g} GB for torch, its CUDA context and a model's host buffers (assumed)" if local else "")
                            + "; model weights are in accelerator memory (above), not counted here"]}


def image_cache_bytes() -> tuple[int, str]:
    """The decoded-image cache's bound: bon.image_cache's setting where it exists, else its planned 1 GiB default."""
    try:
        from bon.image_cache import cache_limit  # type: ignore[import-not-found]
    except ImportError:
        return 2**30, "assumed: the default of the bounded cache issue 34 adds; this build has no bounded cache yet"
    return cache_limit(), "BON_IMAGE_CACHE or its default"


# options that name an official checkout (or a file in one) the user clones: the texts stay outside bon
CHECKOUT_OPTIONS = ("prompts_dir", "prompt_config", "judge_prompt")


def absent_checkouts(cfg: StudyConfig) -> list[str]:
    """Each plugin or suite option naming a checkout that is not there, as ``where: option path``. A plan
    does not need the texts, so the dry run only names them; ``bon run`` stops on the first with one line
    before anything starts (the plugin is built then)."""
    places = [("suite", cfg.suite), ("suite", cfg.suite.get("options") or {})]
    places += [(f"{kind} {spec.label}", spec.options) for kind, specs in
               (("generator", cfg.generators), ("verifier", [cfg.verifier]), ("judge", cfg.judges)) for spec in specs]
    return [f"{where}: {key} {value}" for where, options in places if isinstance(options, dict) for key in CHECKOUT_OPTIONS
            if isinstance(value := options.get(key), str) and not Path(value).expanduser().exists()]


def count_prompts(cfg: StudyConfig) -> tuple[dict[str, int | None], str]:
    """Best-of-N and preference prompts: built from a suite on disk, else the benchmark's size."""
    suite = dict(cfg.suite)
    name = suite.get("name", "jsonl" if "path" in suite else "synthetic")
    path = suite.get("path")
    if name == "synthetic":  # its contract: per_task prompts per task, the preference prompts drawn beside
        per_task, limit = suite.get("per_task", 40), suite.get("limit")
        if isinstance(per_task, bool) or not isinstance(per_task, int) or per_task < 0:
            raise BonError(f"{cfg.source}: suite: per_task must be a whole number of prompts (0 or more), got {per_task!r:.40}")
        per_task = min(per_task, limit) if isinstance(limit, int) and limit > 0 else per_task
        return ({"best_of_n": per_task * len(cfg.tasks), "preference": cfg.preference.prompts_per_task * len(cfg.tasks)},
                "synthetic suite read from the synthetic world")
    if path and Path(path).exists():
        from bon import suites
        from bon.stages.prompts import split

        try:
            prompts = suites.build(suite, cfg.tasks, cfg.seed)
        except BonError as exc:
            return {"best_of_n": None, "preference": 0}, f"unknown ({exc})"
        bon, pref = split(prompts)
        return {"best_of_n": len(bon), "preference": len(pref)}, f"{name} suite read from {path}"
    if name in SUITE_SIZES and not path:
        size = SUITE_SIZES[name]
        if suite.get("limit"):
            size = min(size, int(suite["limit"]))
        return {"best_of_n": size, "preference": 0}, f"{name}: its published size{' with limit' if suite.get('limit') else ''}"
    return {"best_of_n": None, "preference": 0}, f"unknown ({path or name} is not on disk)"


def judge_calls(cfg: StudyConfig, spec: PluginSpec, prompts: dict[str, int | None]) -> tuple[str, int | None]:
    """Calls of one judge: the study's strategy first, then what the others would cost."""
    bon = prompts["best_of_n"]
    if bon is None:
        return "unknown prompts", None
    groups = bon * len(cfg.generators)
    per_group = strategy_calls(cfg.n, cfg.samples)
    pref_calls = cfg.preference.pairs_per_prompt * prompts["preference"] * 2 * cfg.samples
    chosen = per_group.get(cfg.strategy.name)
    total = None if chosen is None else chosen * groups + pref_calls
    others = ", ".join(f"{k} {v * groups}" for k, v in per_group.items() if k != cfg.strategy.name)
    head = f"{total} ({cfg.strategy.name})" if total is not None else f"unknown ({cfg.strategy.name})"
    return f"{head}; {others}" + (f"; incl. {pref_calls} preference-set calls" if pref_calls else ""), total


def strategy_calls(n: int, samples: int = 1) -> dict[str, int]:
    """Judge calls per prompt and generator: knockout 2(N-1), round-robin N(N-1) (both orders of
    each match, times ``samples``), pointwise N (each candidate scored once)."""
    return {"knockout": 2 * (n - 1) * samples, "round-robin": n * (n - 1) * samples, "pointwise": n}


def _stage(name: str, spec: PluginSpec, kind: str, calls: str, items: int | None = None) -> Stage:
    stage = _memory_stage(name, spec, kind, calls)
    stage.items = items
    stage.seconds_per_item, stage.seconds_source = seconds_per_item(spec, kind)
    return stage


def seconds_per_item(spec: PluginSpec, kind: str) -> tuple[float | None, str]:
    """Accelerator seconds per item: the config's ``seconds_per_item``, else what the plugin class declares
    (its ``seconds_per_item`` attribute), else unknown."""
    if spec.seconds_per_item is not None:
        return float(spec.seconds_per_item), "config"
    try:
        declared = getattr(registry.resolve(kind, registry.parse_spec(spec.name)[0]), "seconds_per_item", None)
    except BonError:
        declared = None
    return (float(declared), "plugin") if isinstance(declared, (int, float)) and not isinstance(declared, bool) else (None, "")


def _memory_stage(name: str, spec: PluginSpec, kind: str, calls: str) -> Stage:
    serve = None
    if spec.serve is not None:  # bon runs the server: its weights are on this study's GPUs, not an API's
        from bon.serve import ServeSettings

        serve = ServeSettings.of(spec)
        spec = PluginSpec(registry.parse_spec(spec.name)[0], spec.label, {"model": serve.model}, spec.memory_gb, spec.serve,
                          spec.seconds_per_item)
    models = list(model_refs(spec, kind))
    local = [m for m in models if not m.remote]
    on_device = any(m.on_device for m in local) if local else spec.memory_gb is not None
    if spec.memory_gb is not None:
        memory, source = float(spec.memory_gb), "declared"
    elif not local:
        memory, source = 0.0, "API" if models else "no model"
    else:
        sizes = model_components([m.model for m in local])
        if sizes is None:
            memory, source = None, "unknown"
        else:
            memory, source = sum(sizes.values()) / GB, "safetensors"
    return Stage(name, spec, models, memory, source, calls, on_device=on_device, serve=serve)


def model_refs(spec: PluginSpec, kind: str) -> Iterator[ModelRef]:
    """Every model a plugin spec names: ``name:model``, and ``model`` / ``*_model`` keys anywhere in its
    options (a planner, renderer, editor or grader). A mapping with ``backend: openai`` or a
    ``base_url`` is served remotely, as are the API plugins."""
    name, from_spec = registry.parse_spec(spec.name)
    top = {**spec.options, **from_spec}
    if "model" not in top and name not in API_PLUGINS:
        default = default_model(spec, kind)
        if default:
            top["model"] = default
    yield from _walk(top, remote=name in API_PLUGINS and spec.serve is None, on_device=True)


def default_model(spec: PluginSpec, kind: str) -> str | None:
    """The model a plugin loads when the spec names none: the string default of its ``model`` argument."""
    import inspect

    try:
        param = inspect.signature(registry.resolve(kind, registry.parse_spec(spec.name)[0])).parameters.get("model")
    except (BonError, TypeError, ValueError):
        return None
    return param.default if param is not None and isinstance(param.default, str) else None


def _walk(options: dict[str, Any], remote: bool, on_device: bool) -> Iterator[ModelRef]:
    remote = remote or options.get("backend") == "openai" or bool(options.get("base_url"))
    if "device" in options:
        on_device = str(options["device"]) != "cpu"
    for key, value in options.items():
        if (key == "model" or key.endswith("_model")) and isinstance(value, str):
            yield ModelRef(value, remote, on_device)
        elif isinstance(value, dict):
            yield from _walk(value, remote, on_device)


def model_components(models: list[str]) -> dict[tuple[str, int], int] | None:
    """Safetensors bytes per (component folder, size) over ``models``: a component two pipelines have
    in common is counted once. None when a model's files are not on this machine."""
    sizes: dict[tuple[str, int], int] = {}
    for model in models:
        folder = local_snapshot(model)
        if folder is None:
            return None
        per_component: dict[str, int] = {}
        for f in folder.rglob("*.safetensors"):
            rel = f.relative_to(folder)
            component = rel.parts[0] if len(rel.parts) > 1 else f"{model}/"
            per_component[component] = per_component.get(component, 0) + f.stat().st_size
        if not per_component:
            return None
        for component, size in per_component.items():
            sizes[(component, size)] = size
    return sizes


def device_memory(cfg: StudyConfig) -> tuple[float | None, int, str]:
    """Per-device GB and device count: the config's ``devices``, else the visible CUDA devices."""
    if cfg.devices.get("memory_gb"):
        count = int(cfg.devices.get("count", 1))
        return float(cfg.devices["memory_gb"]), count, f"{count} x {cfg.devices['memory_gb']:g} GB (declared in devices:)"
    try:
        import torch
    except ImportError:
        return None, 1, "torch not installed and none declared: fit not checked"
    if not torch.cuda.is_available():
        return None, 1, "no CUDA device visible and none declared (devices: {memory_gb: ...}): fit not checked"
    count = torch.cuda.device_count()
    smallest = min(torch.cuda.get_device_properties(i).total_memory for i in range(count)) / GB
    return smallest, count, f"{count} x {smallest:.1f} GB (visible CUDA devices)"


def render(plan: Plan) -> list[str]:
    bon, pref = plan.prompts["best_of_n"], plan.prompts["preference"]
    lines = [
        f"plan for {plan.config} (dry run: nothing loaded, nothing called)",
        f"prompts: {bon if bon is not None else 'unknown'} for Best-of-N, {pref} for the preference set "
        f"({plan.prompt_source}); N = {plan.n}; strategy {plan.strategy}",
    ]
    if plan.shard:
        whole = plan.full_prompts.get("best_of_n")
        lines.append(f"shard {plan.shard}: this plan is the shard's share, {bon} of {whole if whole is not None else 'unknown'} "
                     f"Best-of-N prompts and {pref} of {plan.full_prompts.get('preference')} preference prompts (every "
                     f"{plan.shard.split('/')[1]}th in suite order); the other shards plan the rest, `bon merge` joins them")
    lines += [f"devices: {plan.device_source}", f"{'stage':<30}{'memory (weights)':<34}calls  [models]"]
    for s in plan.stages:
        memory = "unknown" if s.memory_gb is None else f"{size(s.memory_gb)} ({s.memory_source})"
        if s.memory_gb and not s.on_device:
            memory += " on CPU"
        cost = f"; ~${s.cost_usd:,.0f}" if s.cost_usd is not None else ""
        hours = s.gpu_hours
        cost += f"; ~{hours:,.1f} GPU-hours" if hours else ""
        models = ", ".join(m.model + (" (API)" if m.remote else f" ({s.serve.engine})" if s.serve else "") for m in s.models)
        lines.append(f"{s.name:<30}{memory:<34}{s.calls}{cost}  [{models or '-'}]")
    for s in plan.stages:
        if s.serve is not None:
            import shlex

            where = "Ray actors" if plan.executor == "ray" else "subprocesses of bon"
            lines.append(f"serve {s.spec.label}: {s.serve.describe()}, as {where}, started when the stage starts and "
                         f"stopped when it ends; each replica runs: {shlex.join(redact(s.serve.command('PORT')))}")
    known = [s for s in plan.stages if s.memory_gb is not None]
    if known:
        top = max(known, key=lambda s: s.memory_gb)
        lines.append(f"peak: {size(top.memory_gb)} of weights ({top.name}): the runner holds one stage's models at a time"
                     + ("" if len(known) == len(plan.stages) else "; some stages unknown"))
    hours = [s.gpu_hours for s in plan.stages if s.on_device and s.memory_source != "API"]
    if any(hours):
        unknown = [s.name for s in plan.stages if s.on_device and s.memory_source != "API" and s.gpu_hours is None]
        lines.append(f"GPU time estimate: ~{sum(h for h in hours if h):,.1f} GPU-hours (items x seconds per item: the "
                     "config's seconds_per_item, else the cost model's for chat judges and graders, else the plugin's)"
                     + (f"; unknown for {', '.join(unknown)}" if unknown else ""))
    costs_usd = [s.cost_usd for s in plan.stages if s.cost_usd is not None]
    if costs_usd:
        lines.append(f"API cost estimate: ~${sum(costs_usd):,.0f} (list prices from the config or bon/costs.py; tokens per "
                     "call from the study's own requests, below)")
    per_call = [s for s in plan.stages if s.per_call is not None or s.notes]
    if per_call:
        lines.append("cost model, per stage (assumptions as stated):")
    for s in per_call:
        if s.per_call is not None:
            usd = f", ${s.per_call.usd:.4f} per call" if s.per_call.usd is not None else ""
            lines.append(f"  {s.name}: {costs.tokens_text(s.per_call)}{usd}")
        lines += [f"    {note}" for note in s.notes]
    if plan.pilot:
        lines.append(f"calibrated by the pilot run {plan.pilot} (model -> pilot, per item; totals above use the pilot's):")
        for s in plan.stages:
            if s.pilot:
                lines.append(f"  {s.name}: " + "; ".join(s.pilot_lines))
    if plan.host:
        lines.append(f"host: ~{size(plan.host['memory_gb'])} of memory, ~{size(plan.host['disk_gb'])} of disk for "
                     f"{plan.host['candidates']} candidates")
        lines += [f"  {note}" for note in plan.host["assumptions"]]
    lines += [f"not there: {where} (relative to {Path.cwd()}; the config's comments say what to clone): `bon run` "
              "stops on it before it starts" for where in plan.absent]
    return lines


def size(gb: float) -> str:
    return f"{gb:.1f} GB" if gb >= 1 or gb == 0 else f"{gb * 1000:.1f} MB"


def fit_problems(plan: Plan) -> list[str]:
    """Stages the devices cannot hold: a served judge wanting more GPUs than this machine has, a stage
    whose weights exceed a device (one line each)."""
    found = []
    for s in plan.stages:  # local replicas share this machine's devices; a Ray cluster checks its own at start
        if s.serve is not None and plan.executor == "local" and plan.device_gb is not None and s.serve.gpus > plan.device_count:
            found.append(f"{plan.config}: stage '{s.name}' serves {s.serve.describe()} but this machine has "
                         f"{plan.device_count} ({plan.device_source})")
    stage = plan.too_big()
    if stage is not None:
        found.append(f"{plan.config}: stage '{stage.name}' needs ~{stage.memory_gb:.1f} GB of weights "
                     f"({stage.memory_source}) but the device holds {plan.device_gb:g} GB ({plan.device_source})")
    return found


def check_fit(plan: Plan) -> None:
    found = fit_problems(plan)
    if found:
        raise BonError(found[0])


def plan_json(plan: Plan) -> dict[str, Any]:
    """The plan as strict JSON: what ``--dry-run --json FILE`` writes."""
    def stage(s: Stage) -> dict[str, Any]:
        per_call = s.per_call
        return {"name": s.name, "label": s.spec.label, "plugin": s.spec.name, "calls": s.calls, "items": s.items,
                "memory_gb": s.memory_gb, "memory_source": s.memory_source, "on_device": s.on_device,
                "models": [{"model": m.model, "remote": m.remote} for m in s.models],
                "seconds_per_item": s.seconds_per_item, "seconds_source": s.seconds_source, "gpu_hours": s.gpu_hours,
                "cost_usd": s.cost_usd, "grader_calls": s.grader_calls,
                "per_call": None if per_call is None else {"input_tokens": per_call.input_tokens, "output_tokens": per_call.output_tokens,
                                                           "usd": per_call.usd, "seconds": per_call.seconds},
                "assumptions": s.notes, "pilot": s.pilot or None}

    costs_usd = [s.cost_usd for s in plan.stages if s.cost_usd is not None]
    hours = [s.gpu_hours for s in plan.stages if s.gpu_hours]
    return {"config": plan.config, "prompts": plan.prompts, "prompt_source": plan.prompt_source, "n": plan.n,
            "strategy": plan.strategy, "shard": plan.shard, "whole_study_prompts": plan.full_prompts if plan.shard else None,
            "devices": plan.device_source, "stages": [stage(s) for s in plan.stages],
            "api_cost_usd": sum(costs_usd) if costs_usd else None, "gpu_hours": sum(hours) if hours else None,
            "host": plan.host or None, "absent_checkouts": plan.absent, "pilot": plan.pilot, "problems": plan.problems}
