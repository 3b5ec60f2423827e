"""diffusers-t2i, diffusers-edit and the interleaved agent on tiny random models loaded from disk.

The pipelines are built from configs, saved, and loaded back by the adapters through
``DiffusionPipeline.from_pretrained`` (offline), 2 steps at 32x32 px.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from PIL import Image  # noqa: E402

from bon import registry  # noqa: E402
from bon.content import Content, Prompt, load_candidates  # noqa: E402
from bon.errors import BonError  # noqa: E402
from conftest_models import tiny_chat_lm, tiny_pix2pix, tiny_sd  # noqa: E402,F401
from generators.cli_support import generate_command  # noqa: E402
from generators.interleaved import InterleavedAgent  # noqa: E402

os.environ["HF_HUB_OFFLINE"] = "1"


# --- helpers --------------------------------------------------------------------------------------


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny models gain nothing from threads, and on a shared 2-core machine threads only contend."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)



def write_suite(folder: Path, prompts: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "suite.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts), encoding="utf-8")
    return path


def t2i_suite(folder: Path, k: int = 2) -> Path:
    texts = ["a red cube on a table", "two blue birds", "a sign that says hello"]
    return write_suite(folder, [{"id": f"t{i}", "task": "t2i", "content": [["text", texts[i % 3]]]} for i in range(k)])


def edit_suite(folder: Path, with_image: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", (32, 32), (200, 40, 40))
    img.paste((30, 30, 220), (8, 8, 24, 24))
    img.save(folder / "in.png")
    content = [["text", "make the square green"]] + ([["image", "in.png"]] if with_image else [])
    return write_suite(folder, [{"id": "e0", "task": "edit", "content": content}])


def pixels(item) -> np.ndarray:
    return np.asarray(item.load(), dtype=np.int16)


class CallCounter:
    """Counts calls of a pipeline class's __call__ (what ``pipe(...)`` runs) and the batch each got."""

    def __init__(self, monkeypatch, cls, fail_on: int | None = None):
        self.calls: list[int] = []
        original = cls.__call__
        counter = self

        @functools.wraps(original)  # keeps the signature the adapters inspect
        def wrapped(pipe, *args, **kwargs):
            counter.calls.append(len(kwargs.get("generator") or []))
            if fail_on is not None and len(counter.calls) == fail_on:
                raise KeyboardInterrupt
            return original(pipe, *args, **kwargs)

        monkeypatch.setattr(cls, "__call__", wrapped)


def sd_pipeline_class():
    from diffusers import StableDiffusionPipeline

    return StableDiffusionPipeline


# --- diffusers-t2i ------------------------------------------------------------------------------


def test_t2i_n_distinct_candidates_and_same_seed_same_files(tmp_path, tiny_sd, monkeypatch):
    suite = t2i_suite(tmp_path / "suite", k=2)
    counter = CallCounter(monkeypatch, sd_pipeline_class())
    opts = {"model": str(tiny_sd), "steps": 2, "negative_prompt": "blurry"}
    started = time.perf_counter()
    first = generate_command("diffusers-t2i", opts, suite, 3, tmp_path / "a", None, 7, None)
    elapsed = time.perf_counter() - started
    second = generate_command("diffusers-t2i", opts, suite, 3, tmp_path / "b", None, 7, None)
    assert first["generated_prompts"] == 2 and second["generated_prompts"] == 2
    assert counter.calls == [3, 3, 3, 3], "one pipeline call per prompt, N images each"
    cands = load_candidates(Path(first["candidates"]))
    assert len(cands) == 6
    for pid in ("t0", "t1"):
        digests = {c.content.images[0].digest for c in cands if c.prompt_id == pid}
        assert len(digests) == 3, "N distinct candidates per prompt"
    prov = cands[0].provenance
    assert prov["adapter"] == "diffusers-t2i" and prov["model"] == str(tiny_sd)
    assert prov["pipeline"] == "StableDiffusionPipeline" and prov["dtype"] == "float32" and prov["device"] == "cpu"
    assert prov["settings"]["steps"] == 2 and prov["settings"]["guidance"] == 7.5  # pipeline default, recorded
    assert prov["settings"]["negative_prompt"] == "blurry"
    assert prov["seed"] == cands[0].seed and {"torch", "diffusers", "transformers"} <= set(prov["versions"])
    # same seed: byte-identical images and records
    files_a = sorted((tmp_path / "a" / "candidates" / "diffusers-t2i" / "images").iterdir())
    files_b = sorted((tmp_path / "b" / "candidates" / "diffusers-t2i" / "images").iterdir())
    assert [f.name for f in files_a] == [f.name for f in files_b] and len(files_a) == 6
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(files_a, files_b))
    assert Path(first["candidates"]).read_bytes() == Path(second["candidates"]).read_bytes()
    print(f"\n[diffusers-t2i] 2 prompts x N=3 at 32 px, 2 steps: {elapsed:.2f} s with loading; calls {counter.calls}")


def test_t2i_candidate_k_does_not_depend_on_batch_size(tiny_sd, monkeypatch):
    from generators.diffusers_t2i import DiffusersT2I

    prompt = Prompt("p", "t2i", Content.of("a green tree"))
    seeds = [11, 22, 33, 44]
    counter = CallCounter(monkeypatch, sd_pipeline_class())
    noise: dict[int, list] = {}
    results = {}
    for bs in (None, 3, 1):
        gen = DiffusersT2I(model=str(tiny_sd), steps=2, batch_size=bs)
        original = gen.pipe.prepare_latents
        got: list = []

        def capture(*args, _orig=original, _got=got, **kwargs):
            out = _orig(*args, **kwargs)
            _got.extend(out.clone())
            return out

        gen.pipe.prepare_latents = capture
        start = len(counter.calls)
        results[bs] = gen.sample(prompt, seeds)
        noise[bs] = got
        assert [c.index for c in results[bs]] == [0, 1, 2, 3]
        assert {None: [4], 3: [3, 1], 1: [1, 1, 1, 1]}[bs] == counter.calls[start:], f"batch_size {bs}"
    import torch

    worst = 0
    for k in range(4):
        # the initial noise of candidate k is bit-identical whatever the batch
        assert torch.equal(noise[None][k], noise[1][k]) and torch.equal(noise[None][k], noise[3][k])
        for bs in (3, 1):
            diff = np.abs(pixels(results[None][k].content.images[0]) - pixels(results[bs][k].content.images[0]))
            worst = max(worst, int(diff.max()))
            assert diff.max() <= 2 and (diff > 0).mean() < 0.01
    print(f"\n[batch invariance] max pixel difference across batch sizes: {worst} grey level(s)")
    # the same batch twice is bit-identical
    again = DiffusersT2I(model=str(tiny_sd), steps=2, batch_size=3).sample(prompt, seeds)
    assert all(np.array_equal(pixels(a.content.images[0]), pixels(b.content.images[0])) for a, b in zip(again, results[3]))


def test_t2i_scheduler_size_and_bad_options(tiny_sd, tmp_path):
    from generators.diffusers_t2i import DiffusersT2I

    gen = registry.create("generator", f"diffusers-t2i:{tiny_sd}", name="sd", steps=2,
                          scheduler="EulerDiscreteScheduler", width=48, height=40)
    cand = gen.sample(Prompt("p", "t2i", Content.of("x")), [5])[0]
    assert cand.provenance["scheduler"] == "EulerDiscreteScheduler" and cand.content.images[0].load().size == (48, 40)
    with pytest.raises(BonError, match="not a diffusers scheduler class"):
        DiffusersT2I(model=str(tiny_sd), scheduler="NoSuchScheduler").sample(Prompt("p", "t2i", Content.of("x")), [1])
    with pytest.raises(BonError, match="takes no image_guidance_scale"):  # img2img has no image guidance
        registry.create("generator", "diffusers-edit", model=str(tiny_sd), strength=0.5, image_guidance=1.2).pipe
    with pytest.raises(BonError, match="unknown option"):
        registry.create("generator", "diffusers-t2i", model=str(tiny_sd), stepz=3)


@pytest.mark.parametrize("where", ["missing-abs", "missing-rel", "not-a-pipeline", "hub-offline"])
def test_unknown_model_path_is_one_line_error(tmp_path, where):
    (tmp_path / "empty").mkdir()
    model = {"missing-abs": str(tmp_path / "nope"), "missing-rel": "./no/such/folder",
             "not-a-pipeline": str(tmp_path / "empty"), "hub-offline": "bon-test-org/no-such-model"}[where]
    suite = t2i_suite(tmp_path / "suite", k=1)
    with pytest.raises(BonError) as err:
        generate_command("diffusers-t2i", {"model": model, "steps": 2}, suite, 2, tmp_path / "out", None, 0, None)
    assert "\n" not in str(err.value) and len(str(err.value)) < 400
    assert ("not found" in str(err.value)) or ("model_index.json" in str(err.value)) or ("cannot load" in str(err.value))


def test_generation_resumes_after_interrupt(tmp_path, tiny_sd, monkeypatch):
    suite = t2i_suite(tmp_path / "suite", k=3)
    opts = {"model": str(tiny_sd), "steps": 2}
    counter = CallCounter(monkeypatch, sd_pipeline_class(), fail_on=2)
    with pytest.raises(KeyboardInterrupt):
        generate_command("diffusers-t2i", opts, suite, 2, tmp_path / "run", None, 0, None)
    done_before = load_candidates(tmp_path / "run" / "candidates" / "diffusers-t2i" / "candidates.jsonl")
    assert {c.prompt_id for c in done_before} == {"t0"}
    image_dir = tmp_path / "run" / "candidates" / "diffusers-t2i" / "images"
    stamps = {f.name: f.stat().st_mtime_ns for f in image_dir.iterdir()}
    counter = CallCounter(monkeypatch, sd_pipeline_class())
    summary = generate_command("diffusers-t2i", opts, suite, 2, tmp_path / "run", None, 0, None)
    assert summary["skipped_prompts"] == 1 and summary["generated_prompts"] == 2
    assert len(counter.calls) == 2, "only the unfinished prompts ran"
    assert all(image_dir.joinpath(n).stat().st_mtime_ns == t for n, t in stamps.items())
    assert len(load_candidates(Path(summary["candidates"]))) == 6
    # a third run does nothing; other generation settings are refused
    counter = CallCounter(monkeypatch, sd_pipeline_class())
    assert generate_command("diffusers-t2i", opts, suite, 2, tmp_path / "run", 1, 0, None)["generated_prompts"] == 0
    assert counter.calls == []
    with pytest.raises(BonError, match="other options"):
        generate_command("diffusers-t2i", {**opts, "steps": 3}, suite, 2, tmp_path / "run", None, 0, None)


# --- diffusers-edit ------------------------------------------------------------------------------


def test_edit_instruct_pix2pix_and_img2img(tmp_path, tiny_pix2pix, tiny_sd, monkeypatch):
    from diffusers import StableDiffusionInstructPix2PixPipeline

    suite = edit_suite(tmp_path / "suite")
    counter = CallCounter(monkeypatch, StableDiffusionInstructPix2PixPipeline)
    opts = {"model": str(tiny_pix2pix), "steps": 2, "image_guidance": 1.5}
    a = generate_command("diffusers-edit", opts, suite, 3, tmp_path / "a", None, 3, None)
    b = generate_command("diffusers-edit", opts, suite, 3, tmp_path / "b", None, 3, None)
    assert counter.calls == [3, 3]
    ca, cb = load_candidates(Path(a["candidates"])), load_candidates(Path(b["candidates"]))
    assert len({c.content.images[0].digest for c in ca}) == 3
    assert [c.content.images[0].digest for c in ca] == [c.content.images[0].digest for c in cb]
    prov = ca[0].provenance
    assert prov["edit_mode"] == "instruct-pix2pix" and prov["settings"]["image_guidance"] == 1.5
    assert prov["input_image"]["size"] == [32, 32]
    # a text-to-image checkpoint edits as image-to-image, with strength
    edit = registry.create("generator", "diffusers-edit", model=str(tiny_sd), steps=2, strength=0.6, name="i2i")
    prompt = Prompt("e", "edit", Content.of("make it green", Image.new("RGB", (32, 32), "red")))
    cands = edit.sample(prompt, [1, 2])
    assert cands[0].provenance["edit_mode"] == "image-to-image" and cands[0].provenance["pipeline"] == "StableDiffusionImg2ImgPipeline"
    assert cands[0].content.images[0].digest != cands[1].content.images[0].digest


def test_edit_prompt_without_image_names_the_prompt(tmp_path, tiny_pix2pix):
    suite = edit_suite(tmp_path / "suite", with_image=False)
    with pytest.raises(BonError, match=r"prompt e0: .*needs an input image") as err:
        generate_command("diffusers-edit", {"model": str(tiny_pix2pix), "steps": 2}, suite, 2, tmp_path / "out", None, 0, None)
    assert "\n" not in str(err.value)


# --- interleaved --------------------------------------------------------------------------------


class ScriptedPlanner:
    """Answers with fixed plans in turn; records what it was asked."""

    def __init__(self, plans: list[str]):
        self.plans, self.asked = plans, []

    def describe(self) -> dict:
        return {"backend": "scripted"}

    def chat_many(self, messages, seeds, *, temperature, top_p, max_new_tokens) -> list[str]:
        out = []
        for seed in seeds:
            self.asked.append((messages, seed, temperature))
            out.append(self.plans[(len(self.asked) - 1) % len(self.plans)])
        return out

    def close(self) -> None:
        pass


def test_interleaved_scripted_plan_renders_every_slot(tiny_sd, tiny_pix2pix):
    plans = [
        "Step one: cut the bread.\n<image>a loaf of bread on a board</image>\nStep two: toast it.\n<IMG>toasted bread slices</img> Done.",
        "Intro text <image>  </image> then [image: a cup of tea] and an unclosed <image>a teapot on a table\n\nThe end.",
    ]
    planner = ScriptedPlanner(plans)
    agent = InterleavedAgent(planner=planner, renderer={"name": "diffusers-t2i", "options": {"model": str(tiny_sd), "steps": 2}},
                             editor={"name": "diffusers-edit", "options": {"model": str(tiny_pix2pix), "steps": 2}},
                             name="agent", max_images=3)
    prompt = Prompt("i0", "interleaved", Content.of("Show me how to make toast."))
    cands = agent.sample(prompt, [101, 202])
    kinds = [[it.kind for it in c.content] for c in cands]
    assert kinds[0] == ["text", "image", "text", "image", "text"]
    assert kinds[1] == ["text", "text", "image", "text"] or kinds[1].count("image") == 2
    for c in cands:
        slots = c.provenance["slots"]
        assert len(slots) == len(c.content.images) and c.provenance["plan"] in plans
        assert all(isinstance(s["seed"], int) and s["description"] for s in slots)
        assert slots[0]["via"] == "renderer" and all(s["via"] == "editor" for s in slots[1:])
        assert slots[0]["provenance"]["adapter"] == "diffusers-t2i" and slots[1]["provenance"]["adapter"] == "diffusers-edit"
    assert [s["description"] for s in cands[1].provenance["slots"]] == ["a cup of tea", "a teapot on a table"]
    assert [seed for _, seed, _ in planner.asked] == [101, 202]
    # same seed, same candidate
    again = InterleavedAgent(planner=ScriptedPlanner(plans), renderer={"name": "diffusers-t2i", "options": {"model": str(tiny_sd), "steps": 2}},
                             editor={"name": "diffusers-edit", "options": {"model": str(tiny_pix2pix), "steps": 2}},
                             name="agent", max_images=3).sample(prompt, [101, 202])
    assert [c.content.digest for c in again] == [c.content.digest for c in cands]


def test_interleaved_with_a_real_tiny_language_model(tmp_path, tiny_sd, tiny_chat_lm):
    suite = write_suite(tmp_path / "suite", [{"id": "i0", "task": "interleaved", "content": [["text", "Explain rain, with pictures."]]}])
    opts = {"planner": {"backend": "transformers", "model": str(tiny_chat_lm)}, "max_new_tokens": 24,
            "renderer": {"name": "diffusers-t2i", "options": {"model": str(tiny_sd), "steps": 2}},
            "min_images": 2, "max_images": 3, "temperature": 1.0}
    summary = generate_command("interleaved", opts, suite, 2, tmp_path / "out", None, 5, None)
    cands = load_candidates(Path(summary["candidates"]))
    assert len(cands) == 2
    for c in cands:
        assert 2 <= len(c.content.images) <= 3 and len(c.provenance["slots"]) == len(c.content.images)
        assert isinstance(c.provenance["plan"], str) and c.provenance["planner"]["class"] == "Qwen2ForCausalLM"
        assert all(kind in ("text", "image") for kind in (it.kind for it in c.content))
    assert cands[0].provenance["plan"] != cands[1].provenance["plan"], "temperature and seeds make candidates differ"
    again = generate_command("interleaved", opts, suite, 2, tmp_path / "again", None, 5, None)
    assert Path(again["candidates"]).read_bytes() == Path(summary["candidates"]).read_bytes(), "same seeds, same plans"
