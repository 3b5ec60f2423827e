"""What one call costs, from the study's own requests: the cost model behind ``bon run CONFIG --dry-run``.

For each chat judge and each graded verifier, the first requests of the study are built as the run would
build them (the judge's rubric and markers, the suite's first prompts with their images, two responses
shaped by the generators' settings) and counted:

- text: with the model's own tokenizer where its files are on this machine (``AutoTokenizer`` from a
  local folder or the local Hugging Face cache only, never the Hub), else the rule of about four
  characters per token of English text (:data:`CHARS_PER_TOKEN`);
- images, by the API family's rule for an image of that size after the judge's own downscaling:
  OpenAI (GPT-4o / 4.1 / 5, high detail): fit in 2048 x 2048, shortest side down to 768, then 85 + 170
  per 512 px tile; Gemini (2.x): 258 tokens for an image with both sides at most 384 px, else 258 per
  768 x 768 tile; Anthropic: width x height / 750 after fitting the long side in 1568 px; Qwen2.5-VL:
  one token per 28 x 28 patch (14 px patches merged 2 x 2), Qwen3-VL: per 32 x 32 (16 px, 2 x 2).

Output tokens come from the rubric's reply format (a JSON answer with a short comment per criterion:
:data:`TOKENS_PER_CRITERION` each plus :data:`ANSWER_TOKENS`) and the model's thinking setting: a
reasoning model bills its hidden reasoning as output (:data:`THINKING_TOKENS` per ``reasoning_effort``;
GPT-5, the o-series, Gemini 2.5/3 Pro and 2.5 Flash think by default, priced as the effort named beside them). Every
assumption used is printed with the estimate; ``--calibrate PILOT_DIR`` replaces them with what a pilot
run measured.

A local model's seconds per call come from a stated model of the device: prefill is compute-bound
(2 x parameters x input tokens over the device's FLOP/s at :data:`COMPUTE_USE`), decoding is
memory-bound (every output token reads the weights once; a batch of B shares that read) at
:data:`BANDWIDTH_USE` of the memory bandwidth. The device is an H100 SXM (3.35 TB/s, 989 TFLOP/s dense
bf16) unless ``devices: {bandwidth_gbs, tflops}`` says otherwise.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bon import registry
from bon.config import PluginSpec, StudyConfig
from bon.errors import BonError

CHARS_PER_TOKEN = 4.0  # English text in a BPE tokenizer, when the model's own tokenizer is not on this machine
TOKENS_PER_CRITERION = 30  # a short comment per rubric criterion in the reply
ANSWER_TOKENS = 30  # the JSON answer's keys, score and letter
THINKING_TOKENS = {"minimal": 0, "low": 500, "medium": 2000, "high": 6000}  # hidden reasoning billed as output
# models that think when no reasoning_effort is set, and the effort their default is priced as
DEFAULT_THINKING = {"gpt-5": "medium", "o1": "medium", "o3": "medium", "o4": "medium", "gemini-2.5-pro": "medium",
                    "gemini-3": "high", "gemini-2.5-flash": "low"}
SAMPLE_PROMPTS = 3  # the first prompts per task whose requests are built and counted
# A typical prompt where the suite is not on disk (characters of text, images): the benchmarks' kinds of request
TYPICAL_PROMPT = {"t2i": (120, 0), "edit": (80, 1), "interleaved": (400, 1), "reasoning": (600, 1)}
IMAGE_SIDE = 1024  # pixels of an image whose size no setting gives
DEVICE = {"bandwidth_gbs": 3350.0, "tflops": 989.0, "name": "H100 SXM"}
BANDWIDTH_USE, COMPUTE_USE = 0.6, 0.4  # the fractions of peak a served model reaches
# USD per 1M input / output tokens of the graders the graded verifiers call (a grader has no price option)
GRADER_PRICES = {"gpt-4.1": (2.0, 8.0), "gpt-4o": (2.5, 10.0), "gpt-4.1-mini": (0.4, 1.6)}
# Graded verifiers: calls per candidate, and per call: text tokens of the request, images, output tokens
GRADED = {
    "gedit": {"calls": 2, "text": 600, "images": 1.5, "output": 100,
              "what": "SC (instruction, source and edit) and PQ (the edit) requests per candidate"},
    "isg": {"calls": 11, "text": 400, "images": 1.5, "output": 60,
            "what": "one request per question (~10 block and image questions per item) plus the holistic one"},
    "vqascore": {"calls": 1, "text": 40, "images": 1, "output": 1,
                 "what": "one forward pass per candidate (P('Yes') of the first answer token)"},
}


@dataclass
class CallCost:
    """Per call: tokens in and out, and how they were reached."""

    input_tokens: float
    output_tokens: float
    assumptions: list[str] = field(default_factory=list)
    price: tuple[float, float] | None = None  # USD per 1M tokens in, out
    seconds: float | None = None  # a local model's seconds per call

    @property
    def usd(self) -> float | None:
        if self.price is None:
            return None
        return (self.input_tokens * self.price[0] + self.output_tokens * self.price[1]) / 1e6


# --- image tokens ---------------------------------------------------------------------------------


def family(model: str, base_url: str | None = None) -> str:
    name = model.lower()
    if "gemini" in name or "generativelanguage" in (base_url or ""):
        return "gemini"
    if "claude" in name:
        return "anthropic"
    if "qwen3-vl" in name:
        return "qwen3-vl"
    if "qwen" in name and "vl" in name:
        return "qwen2.5-vl"
    return "openai"


def image_tokens(kind: str, width: int, height: int) -> int:
    """Tokens of one image of ``width`` x ``height`` pixels for an API family (see the module's rules)."""
    if kind == "gemini":
        if width <= 384 and height <= 384:
            return 258
        return 258 * math.ceil(width / 768) * math.ceil(height / 768)
    if kind == "anthropic":
        scale = min(1.0, 1568 / max(width, height))
        return math.ceil(width * scale * height * scale / 750)
    if kind in ("qwen2.5-vl", "qwen3-vl"):
        side = 28 if kind == "qwen2.5-vl" else 32
        return max(1, round(width / side)) * max(1, round(height / side))
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    return 85 + 170 * math.ceil(w * scale / 512) * math.ceil(h * scale / 512)


def fit(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    if not max_side or max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


# --- text tokens ----------------------------------------------------------------------------------


class TextCounter:
    """Tokens of a text: the model's tokenizer from local files where it is there, else the chars rule."""

    _cache: dict[str, Any] = {}

    def __init__(self, model: str | None) -> None:
        self.tokenizer = self._load(model) if model else None
        self.rule = (f"tokenizer of {model} (local files)" if self.tokenizer is not None
                     else f"text at {CHARS_PER_TOKEN:g} characters per token (no local tokenizer)")

    @classmethod
    def _load(cls, model: str) -> Any:
        if model in cls._cache:
            return cls._cache[model]
        folder, tokenizer = local_snapshot(model), None
        if folder is not None and any((folder / f).exists() for f in ("tokenizer.json", "tokenizer_config.json")):
            try:
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            except Exception:  # noqa: BLE001 - any failure: fall back to the stated rule
                tokenizer = None
        cls._cache[model] = tokenizer
        return tokenizer

    def count(self, text: str) -> int:
        if self.tokenizer is not None:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return math.ceil(len(text) / CHARS_PER_TOKEN)


def local_snapshot(model: str) -> Path | None:
    """A local model folder, or the newest snapshot of a hub id in the local Hugging Face cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if "/" not in model or path.is_absolute() or model.startswith("."):
        return None
    hub = os.environ.get("HF_HUB_CACHE") or str(Path(os.environ.get("HF_HOME", "~/.cache/huggingface")).expanduser() / "hub")
    snapshots = Path(hub) / f"models--{model.replace('/', '--')}" / "snapshots"
    found = sorted(snapshots.glob("*"), key=lambda p: p.stat().st_mtime) if snapshots.is_dir() else []
    return found[-1] if found else None


# --- the study's requests -------------------------------------------------------------------------


@dataclass
class Shape:
    """What one prompt or response holds: text and image sizes."""

    text: str = ""
    images: list[tuple[int, int]] = field(default_factory=list)


def sample_prompts(cfg: StudyConfig) -> tuple[dict[str, list[Shape]], str]:
    """The first prompts of each task as shapes: from the suite where it is on disk (or synthetic), else a
    typical prompt of the benchmark's kind (:data:`TYPICAL_PROMPT`)."""
    suite = cfg.suite
    name = suite.get("name", "jsonl" if "path" in suite else "synthetic")
    if name == "synthetic" or (suite.get("path") and Path(suite["path"]).exists()):
        from bon import suites

        try:
            prompts = suites.build({**suite, "limit": SAMPLE_PROMPTS} if name != "synthetic" else
                                   {**suite, "per_task": min(int(suite.get("per_task", 40)), SAMPLE_PROMPTS)}, cfg.tasks, cfg.seed)
        except BonError:
            prompts = []
        shapes: dict[str, list[Shape]] = {}
        for p in prompts:
            if len(shapes.setdefault(p.task, [])) < SAMPLE_PROMPTS:
                shapes[p.task].append(shape_of(p.content))
        if shapes:
            return shapes, f"the first {SAMPLE_PROMPTS} prompts per task of the suite"
    shapes = {task: [Shape("x" * TYPICAL_PROMPT[base(task)][0], [(IMAGE_SIDE, IMAGE_SIDE)] * TYPICAL_PROMPT[base(task)][1])]
              for task in cfg.tasks}
    described = "; ".join(f"{base(t)} {TYPICAL_PROMPT[base(t)][0]} characters and {TYPICAL_PROMPT[base(t)][1]} image(s)"
                          for t in cfg.tasks)
    return shapes, f"suite not on disk: a typical prompt assumed ({described})"


def base(task: str) -> str:
    """bon's name of the task (``image`` -> ``t2i``), the key of the typical-prompt table."""
    from bon.tasks import bon_task

    return bon_task(task)


def shape_of(content: Any) -> Shape:
    shape = Shape()
    for item in content:
        if item.kind == "text":
            shape.text += item.text
        else:
            shape.images.append(image_size(item))
    return shape


def image_size(item: Any) -> tuple[int, int]:
    """An image item's size from its file header (no decoding), else :data:`IMAGE_SIDE` square."""
    try:
        from PIL import Image

        with Image.open(item.path) as im:
            return im.size
    except Exception:  # noqa: BLE001 - in-memory or unreadable: the stated default
        size = getattr(item, "size", None)
        return tuple(size) if size else (IMAGE_SIDE, IMAGE_SIDE)


def response_shape(task: str, spec: PluginSpec, prompt: Shape) -> tuple[Shape, str]:
    """One candidate as its generator's settings shape it, and the assumption said in words."""
    options = spec.options
    task = base(task)
    size = (_size(options) or declared_size(spec)
            or (prompt.images[0] if task == "edit" and prompt.images else (IMAGE_SIDE, IMAGE_SIDE)))
    if task in ("t2i", "edit"):
        return Shape("", [size]), f"{spec.label}: one {size[0]}x{size[1]} image"
    budget = int(options.get("max_new_tokens", 512))
    text = "x" * int(budget / 2 * CHARS_PER_TOKEN)
    if task == "interleaved":
        renderer = (options.get("renderer") or {}).get("options") or {}
        size = _size(renderer) or declared_size(spec) or (IMAGE_SIDE, IMAGE_SIDE)
        count = math.ceil((int(options.get("min_images", 1)) + int(options.get("max_images", 4))) / 2)
        return (Shape(text, [size] * count),
                f"{spec.label}: half of max_new_tokens {budget} as text and {count} images of {size[0]}x{size[1]} "
                "(the middle of min_images..max_images, rounded up)")
    return Shape(text, []), f"{spec.label}: half of max_new_tokens {budget} as text"


def declared_size(spec: PluginSpec) -> tuple[int, int] | None:
    """The image size a generator class declares (``image_size``), when its options give none."""
    try:
        size = getattr(registry.resolve("generator", registry.parse_spec(spec.name)[0]), "image_size", None)
    except BonError:
        return None
    return tuple(size) if size else None  # type: ignore[return-value]


def _size(options: dict[str, Any]) -> tuple[int, int] | None:
    if options.get("width") or options.get("height"):
        w = int(options.get("width") or options.get("height"))
        return w, int(options.get("height") or w)
    return None


def chat_judge(spec: PluginSpec) -> bool:
    """Whether a judge builds chat requests this module can count (its class has ``request_frame``)."""
    try:
        return callable(getattr(registry.resolve("judge", registry.parse_spec(spec.name)[0]), "request_frame", None))
    except BonError:
        return False


def judge_call(cfg: StudyConfig, spec: PluginSpec, prompts: dict[str, list[Shape]], prompt_source: str) -> CallCost | None:
    """Tokens per call of a chat judge over the study's first requests (None for a judge that is not one)."""
    name, from_spec = registry.parse_spec(spec.name)
    options = {**from_spec, **spec.options}
    try:
        cls = registry.resolve("judge", name)
    except BonError:
        return None
    frame_of = getattr(cls, "request_frame", None)
    model = str((spec.serve or {}).get("model") or options.get("model") or "")
    if not callable(frame_of) or not model:
        return None
    kind = family(model, options.get("base_url"))
    counter = TextCounter(model)
    max_side = options.get("max_image_side", 1024)
    max_side = None if max_side in (None, "none") else (1024 if max_side == "auto" else int(max_side))
    if name == "transformers-vlm":  # max_image_pixels (default 1024 x 1024) bounds the area instead
        max_side = 1024
    inputs, outputs, notes = [], [], [f"prompts: {prompt_source}", counter.rule, f"images: {kind} rule after fitting in {max_side} px"]
    for task, shapes in prompts.items():
        try:
            frame = frame_of(task, options)
        except BonError:
            return None
        reply = frame["criteria"] * TOKENS_PER_CRITERION + ANSWER_TOKENS
        for prompt in shapes:
            for g in cfg.generators:
                response, said = response_shape(task, g, prompt)
                text = frame["text"] + prompt.text + 2 * response.text
                images = prompt.images + 2 * response.images
                inputs.append(counter.count(text) + sum(image_tokens(kind, *fit(w, h, max_side)) for w, h in images))
                outputs.append(reply)
                notes.append(said)
        notes.append(f"{base(task)} reply: {frame['criteria']} criteria x {TOKENS_PER_CRITERION} + {ANSWER_TOKENS} tokens")
    if not inputs:
        return None
    thinking, why = thinking_tokens(model, options)
    if why:
        notes.append(why)
    cost = CallCost(sum(inputs) / len(inputs), sum(outputs) / len(outputs) + thinking, list(dict.fromkeys(notes)))
    if options.get("price_input") is not None or options.get("price_output") is not None:
        cost.price = (float(options.get("price_input") or 0), float(options.get("price_output") or 0))
    return cost


def thinking_tokens(model: str, options: dict[str, Any]) -> tuple[int, str]:
    effort = options.get("reasoning_effort")
    if effort is None:
        effort = next((e for prefix, e in DEFAULT_THINKING.items() if model.lower().startswith(prefix)
                       or f"/{prefix}" in model.lower() or (prefix.startswith("gemini") and prefix in model.lower())), None)
        if effort is None:
            return 0, ""
        return THINKING_TOKENS[effort], (f"{model} thinks by default: {THINKING_TOKENS[effort]} reasoning tokens "
                                         f"per call billed as output (assumed, as reasoning_effort {effort})")
    tokens = THINKING_TOKENS.get(str(effort), THINKING_TOKENS["medium"])
    return tokens, f"reasoning_effort {effort}: {tokens} hidden reasoning tokens per call billed as output (assumed)"


def verifier_calls(cfg: StudyConfig, candidates: int | None) -> tuple[CallCost, int, str] | None:
    """A graded verifier's calls: per call cost, how many, and what they are (None: no grader to price)."""
    name = registry.parse_spec(cfg.verifier.name)[0]
    options = cfg.verifier.options
    if name not in GRADED or candidates is None or isinstance(options.get("grader"), str):
        return None
    rule = GRADED[name]
    grader = options.get("grader") or {}
    model = str(grader.get("model") or options.get("model") or "")
    if grader.get("backend") == "t2v-metrics" or not model:
        return None
    kind = family(model, grader.get("base_url"))
    side = int(grader.get("max_image_side") or IMAGE_SIDE)
    size = next((_size(g.options) for g in cfg.generators if _size(g.options)), None) or (IMAGE_SIDE, IMAGE_SIDE)
    per_image = image_tokens(kind, *fit(size[0], size[1], side))
    cost = CallCost(rule["text"] + rule["images"] * per_image, rule["output"],
                    [f"{name}: {rule['what']}; ~{rule['text']} text tokens and {rule['images']:g} images of "
                     f"{size[0]}x{size[1]} ({kind} rule: {per_image} tokens each) per request, {rule['output']} out (assumed)"])
    if grader.get("backend") == "openai":
        price = next((p for m, p in sorted(GRADER_PRICES.items(), key=lambda kv: -len(kv[0])) if model.startswith(m)), None)
        if price is not None:
            cost.price = price
            cost.assumptions.append(f"{model} at ${price[0]:g} / ${price[1]:g} per 1M tokens (list price in bon/costs.py)")
    return cost, int(candidates * rule["calls"]), rule["what"]


# --- local seconds --------------------------------------------------------------------------------


def device(cfg: StudyConfig) -> dict[str, Any]:
    declared = {k: float(cfg.devices[k]) for k in ("bandwidth_gbs", "tflops") if cfg.devices.get(k)}
    return {**DEVICE, **declared, "name": "declared in devices:" if declared else DEVICE["name"]}


def local_seconds(cost: CallCost, weights_gb: float, batch: int, dev: dict[str, Any]) -> tuple[float, str]:
    """Seconds per call of a local model of ``weights_gb`` (bf16: 2 bytes a parameter) at batch ``batch``."""
    params = weights_gb * 1e9 / 2
    prefill = 2 * params * cost.input_tokens / (dev["tflops"] * 1e12 * COMPUTE_USE)
    step = weights_gb * 1e9 / (dev["bandwidth_gbs"] * 1e9 * BANDWIDTH_USE)
    decode = cost.output_tokens * step / max(1, batch)
    said = (f"{dev['name']} ({dev['bandwidth_gbs']:g} GB/s at {BANDWIDTH_USE:.0%}, {dev['tflops']:g} TFLOP/s at "
            f"{COMPUTE_USE:.0%}): prefill {prefill:.2f} s + {cost.output_tokens:.0f} output tokens x {step * 1000:.1f} ms "
            f"per step / batch {batch} = {decode:.2f} s")
    return prefill + decode, said


def batch_of(options: dict[str, Any]) -> int:
    try:
        return max(1, int(options.get("batch_size", 1)))
    except (TypeError, ValueError):
        return 1


def tokens_text(cost: CallCost) -> str:
    return f"{cost.input_tokens:,.0f} in + {cost.output_tokens:,.0f} out tokens per call"

