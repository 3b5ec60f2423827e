"""The shared back-ends: out-of-memory batch halving, close() releasing models, one-line errors for
missing extras, transient 503s recovered (grader, API generator) or marked transient, GPT-5 requests
from the chat generators, Qwen-Image-Edit batches, and shared components in the interleaved agent."""

from __future__ import annotations

import gc
import json
import sys
import types
import weakref

import pytest
from openai_server import OpenAIServer
from PIL import Image

from bon import registry
from bon.backends import require
from bon.backends.device import HalvingBatches, OutOfMemory
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError

KEY_ENV = "BON_TEST_BACKENDS_KEY"


class OutOfMemoryError(RuntimeError):
    """Named like ``torch.cuda.OutOfMemoryError``."""


def test_out_of_memory_halves_the_batch_down_to_one_then_one_line_error():
    sizes: list[int] = []

    def model(chunk):  # a model that runs out of memory above two items
        sizes.append(len(chunk))
        if len(chunk) > 2:
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")
        return [x * 10 for x in chunk]

    batches = HalvingBatches(8, "judge x", "tiny-model")
    assert batches.run(list(range(11)), model) == [x * 10 for x in range(11)]
    assert sizes == [8, 4, 2, 2, 2, 2, 2, 1] and batches.size == 2  # the working size is kept

    def never(chunk):
        raise OutOfMemoryError("CUDA out of memory")

    with pytest.raises(OutOfMemory) as info:
        HalvingBatches(4, "judge x", "tiny-model").run([1, 2, 3], never)
    assert "tiny-model at batch size 1" in str(info.value) and "\n" not in str(info.value)

    def broken(chunk):
        raise ValueError("not a memory problem")

    with pytest.raises(ValueError):  # other failures are not retried
        HalvingBatches(4, "judge x", "tiny-model").run([1, 2], broken)


def test_missing_extra_is_a_one_line_error_naming_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    with pytest.raises(BonError) as info:
        require("transformers", "vqascore")
    assert str(info.value) == "vqascore: needs the transformers package; install it with pip install '.[gpu]'"
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(BonError, match=r"pip install '\.\[api\]'"):
        registry.create("generator", "openai-images", model="m", base_url="http://127.0.0.1:9", api_key_env=None)
    folder = tmp_path / "pipe"
    folder.mkdir()
    (folder / "model_index.json").write_text('{"_class_name": "StableDiffusionPipeline"}')
    monkeypatch.setitem(sys.modules, "diffusers", None)
    gen = registry.create("generator", "diffusers-t2i", model=str(folder))
    with pytest.raises(BonError) as info:
        gen.sample(Prompt("p", "t2i", Content.of("a cat")), [1])
    assert str(info.value) == "diffusers-t2i: needs the diffusers package; install it with pip install '.[gpu]'"
    from bon.backends.chat_vlm import hf_errors

    with pytest.raises(BonError) as info:
        with hf_errors("qwen judge", "cannot load the processor"):
            # what transformers 5 raises for a Qwen-VL processor without torchvision
            raise ImportError("Qwen2VLVideoProcessor requires the Torchvision library but it was not found in your\nenvironment.")
    assert "torchvision" in str(info.value) and "pip install '.[gpu]'" in str(info.value) and "\n" not in str(info.value)


def test_cuda_asked_for_and_absent_is_one_line(monkeypatch):
    torch = pytest.importorskip("torch")
    from bon.backends.device import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BonError, match="no CUDA device") as info:
        resolve_device("cuda:0", "my judge")
    assert str(info.value).startswith("my judge: ") and resolve_device("auto") in ("cpu", "mps")


def test_free_memory_clears_cublas_workspaces_before_emptying_the_cache(monkeypatch):
    """On CUDA, cuBLAS workspaces sit in torch's allocator after a stage (benchmarks/gpu_check.py on an
    H200 saw them as memory a stage kept); freeing memory clears them, then returns the cache."""
    from bon.backends.device import free_memory

    calls = []
    cuda = types.SimpleNamespace(is_available=lambda: True, empty_cache=lambda: calls.append("empty_cache"))
    c_module = types.SimpleNamespace(_cuda_clearCublasWorkspaces=lambda: calls.append("clear_workspaces"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda, _C=c_module))
    free_memory()
    assert calls == ["clear_workspaces", "empty_cache"]
    del c_module._cuda_clearCublasWorkspaces  # a torch without it: the cache is still emptied
    free_memory()
    assert calls[2:] == ["empty_cache"]


# --- an endpoint that fails first, then recovers -------------------------------------------------


def flaky(failures: int, answer: str = "Yes") -> OpenAIServer:
    """Answers chat completions with ``answer``; the first ``failures`` POSTs get a 503 "overloaded"
    that asks for a 10 ms wait. Records the request bodies."""
    return OpenAIServer(fail=failures, reply=lambda body: answer, message="overloaded", retry_after_ms=10)


RED = Image.new("RGB", (16, 16), "red")


def vqa_verifier(url: str, retries: int):
    return registry.create("verifier", "vqascore", grader={"backend": "openai", "model": "grader", "base_url": url,
                                                         "api_key_env": KEY_ENV, "max_retries": retries,
                                                         "reasoning_model": True},
                           fallback_to_answer=True)  # a reasoning model gives no log-probabilities: opted into yes/no


@pytest.mark.parametrize("failures,retries", [(1, 2), (5, 1)])
def test_grader_recovers_from_a_503_or_reports_it_as_transient(monkeypatch, failures, retries):
    pytest.importorskip("openai")
    monkeypatch.setenv(KEY_ENV, "sk-backends-test-secret-9876")
    prompt = Prompt("t", "t2i", Content.of("a red square"))
    with flaky(failures) as api:
        score = vqa_verifier(api.url, retries).score(prompt, Candidate("t", 0, "g", 0, Content.of(RED)))
    if failures <= retries:  # recovered inside the SDK's retries: a real score, nothing failed
        assert score.value == 1.0 and score.missing is None and not score.transient
    else:  # still failing: missing and transient, so a rerun asks again instead of keeping a final failure
        assert score.value is None and score.transient and "HTTP 503: overloaded (after 2 attempts)" in score.missing
    # a reasoning model is asked for a written answer (no logprobs, no temperature)
    assert all("logprobs" not in b and "temperature" not in b and "max_completion_tokens" in b for b in api.requests)


def test_api_generator_recovers_from_a_503_and_speaks_gpt5(monkeypatch):
    pytest.importorskip("openai")
    monkeypatch.setenv(KEY_ENV, "sk-backends-test-secret-9876")
    prompt = Prompt("r", "reasoning", Content.of("What is 2+2?"))
    with flaky(1, answer="The answer is \\boxed{4}.") as api:
        gen = registry.create("generator", "vlm-answers", backend="openai", model="gpt-5-mini", base_url=api.url,
                              api_key_env=KEY_ENV, retries=2, max_concurrency=1, temperature=0.7, name="vlm")
        (cand,) = gen.sample(prompt, [5])
    assert "missing" not in cand.provenance and cand.provenance["final_answer"] == "4"
    assert len(api.requests) == 2 and api.requests[0] == api.requests[1]
    body = api.requests[0]
    assert body["max_completion_tokens"] == 512 and "temperature" not in body and "max_tokens" not in body
    with flaky(9) as api:
        gen = registry.create("generator", "vlm-answers", backend="openai", model="gpt-4o", base_url=api.url,
                              api_key_env=KEY_ENV, retries=1, name="vlm")
        (cand,) = gen.sample(prompt, [5])
    assert cand.provenance["transient"] and cand.provenance["missing"].startswith("HTTP 503")
    assert api.requests[0]["temperature"] == 0.7 and "sk-backends" not in json.dumps(cand.provenance)


# --- local models: close() and the interleaved agent's shared components ---------------------------


def test_close_releases_the_local_model_and_next_use_reloads(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_models import build_tiny_llava

    from judges.transformers_vlm import TransformersVlmJudge

    judge = TransformersVlmJudge(model=str(build_tiny_llava(tmp_path / "llava")), mode="logits")
    assert not judge.backend.loaded  # weights load lazily
    model = weakref.ref(judge.backend.model)
    assert judge.backend.loaded and judge.backend.held_modules() == [model()]
    judge.close()
    gc.collect()
    assert model() is None and not judge.backend.loaded, "close() drops the last reference to the weights"
    assert judge.backend.held_modules() == []
    from bon.protocol import Comparison

    prompt = Prompt("p", "t2i", Content.of("a red square"))
    (v,) = judge.judge([Comparison(prompt, Content.of(RED), Content.of(Image.new("RGB", (16, 16), "blue")), 0)])
    assert v.better in ("A", "B") and judge.backend.loaded


def test_qwen_image_edit_gets_one_input_image_per_prompt():
    from generators.diffusers_edit import batch_images

    module = types.ModuleType("diffusers.pipelines.qwenimage.fake_edit")
    module.calculate_dimensions = lambda area, ratio: (64, 32, None)
    monkey = {module.__name__: module}
    sys.modules.update(monkey)
    try:
        class QwenImageEditPipeline:
            image_processor = types.SimpleNamespace(resize=lambda image, h, w: image.resize((w, h)))

        QwenImageEditPipeline.__module__ = module.__name__

        class FluxKontextPipeline:
            pass

        image = Image.new("RGB", (100, 40))
        images = batch_images(QwenImageEditPipeline(), image, 3)
        assert isinstance(images, list) and len(images) == 3 and all(im.size == (64, 32) for im in images)
        assert batch_images(FluxKontextPipeline(), image, 3) is image  # Kontext repeats one image itself
    finally:
        for name in monkey:
            sys.modules.pop(name, None)


def test_interleaved_agent_holds_shared_components_once(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from conftest_models import build_sd, cached

    from generators.interleaved import InterleavedAgent

    sd = cached("sd", tmp_path_factory, build_sd)

    class Planner:
        def describe(self):
            return {"backend": "scripted"}

        def chat_many(self, messages, seeds, *, temperature, top_p, max_new_tokens):
            return ["<image>a red barn</image> then <image>the barn at night</image>"] * len(seeds)

        def close(self):
            pass

    agent = InterleavedAgent(planner=Planner(), renderer={"name": "diffusers-t2i", "options": {"model": str(sd), "steps": 2}},
                             editor={"name": "diffusers-edit", "options": {"model": str(sd), "steps": 2, "strength": 0.5}},
                             name="agent", max_images=2)
    assert agent.held_modules() == []
    (cand,) = agent.sample(Prompt("i", "interleaved", Content.of("a barn")), [3])
    assert len(cand.content.images) == 2
    renderer, editor = agent.renderer.pipe, agent.editor.pipe
    assert {"text_encoder", "vae"} <= set(agent.editor.shared)
    assert editor.text_encoder is renderer.text_encoder and editor.vae is renderer.vae
    held = agent.held_modules()
    assert len(held) == len({id(m) for m in held}) == len(renderer.components.keys() & {"unet", "vae", "text_encoder"}) + 1
    assert cand.provenance["slots"][1]["provenance"]["shared_components"] == agent.editor.shared
    agent.close()
    assert agent.held_modules() == []


def test_diffusers_generator_halves_its_batch_on_out_of_memory_without_reloading(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from conftest_models import build_sd, cached

    from generators.diffusers_t2i import DiffusersT2I

    gen = DiffusersT2I(model=str(cached("sd", tmp_path_factory, build_sd)), steps=2)
    real, calls, loads = gen.pipe, [], []

    class SmallCard:  # the loaded pipeline on a card that fits one image at a time
        def __call__(self, **kwargs):
            calls.append(len(kwargs["prompt"]))
            if len(kwargs["prompt"]) > 1:
                raise OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
            return real(**kwargs)

    gen._pipe = SmallCard()
    gen.load = lambda: loads.append(1)  # a reload would show here
    prompt = Prompt("p", "t2i", Content.of("a red square"))
    cands = gen.sample(prompt, [1, 2, 3])
    assert [len(c.content.images) for c in cands] == [1, 1, 1] and calls == [3, 1, 1, 1] and loads == []
    assert cands[0].provenance["batch_size"] == 1 and gen.sample(prompt, [4, 5]) and calls[-2:] == [1, 1]
