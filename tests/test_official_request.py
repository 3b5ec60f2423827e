"""Under --official-prompts, the request bon sends equals what MMRB2's official evaluator would send,
part for part: one content part per segment in the official order, each image its original file bytes
with the MIME type of its extension, no sampling parameters; local judges sample as the official
Qwen3-VL judge does. The expected lists are built here from the official layout, independently of bon."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from PIL import Image

from bon.cli import main
from openai_server import OpenAIServer

KEY = "BON_TEST_OFFICIAL_KEY"
MARKERS = ("[ORIGINAL PROMPT TO MODEL:]", "[RESPONSE A:]", "[RESPONSE B:]")
RUBRICS = {"image": "Rubric for images (test).", "edit": "Rubric for edits (test).",
           "interleaved": "Rubric for interleaved answers (test).", "reasoning": "Rubric for reasoning (test)."}
FUNCTIONS = {"image": "get_image_gen_prompt", "edit": "get_image_edit_prompt",
             "interleaved": "get_interleaved_prompt", "reasoning": "get_reasoning_prompt"}
TASK_FILES = {"image": "t2i.json", "edit": "edit.json", "interleaved": "interleaved.json", "reasoning": "reasoning.json"}


def fake_checkout(root: Path) -> Path:
    """A stand-in for a checkout of facebookresearch/MMRB2 with the same file layout (our own text)."""
    folder = root / "evaluate" / "generate_judgements" / "evaluator_apis" / "llm_judges"
    folder.mkdir(parents=True)
    (folder / "evaluation_prompts.py").write_text("".join(
        f"def {FUNCTIONS[t]}() -> str:\n    return {RUBRICS[t]!r}\n\n\n" for t in RUBRICS))
    (folder / "api_pairwise_evaluator.py").write_text(
        "def pairwise_evaluate(prompt, a, b):\n    parts = []\n"
        + "".join(f"    parts.append(['text', {m!r}])\n" for m in MARKERS) + "    return parts\n")
    return root


def image(path: Path, colour: tuple[int, int, int], size=(40, 24)) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)
    return path.name


def bench(root: Path) -> Path:
    """One pair per task in the official layout: images/ for responses, input_images/ for prompts."""
    img, inp = root / "images", root / "input_images"
    pairs = {
        "image": ([["text", "a red cube on a blue floor"]],
                  [["image", image(img / "t_a.jpg", (200, 0, 0))]], [["image", image(img / "t_b.png", (0, 0, 200))]]),
        "edit": ([["text", "make the sky green"], ["image", image(inp / "e_in.webp", (10, 120, 200))]],
                 [["image", image(img / "e_a.png", (10, 200, 10))]], [["image", image(img / "e_b.jpeg", (10, 10, 10))]]),
        "interleaved": ([["text", "show two steps"], ["image", image(inp / "i_in.png", (1, 2, 3))]],
                        [["text", "step one"], ["image", image(img / "i_a1.jpg", (9, 9, 9))], ["text", "step two"]],
                        [["text", "only text"], ["text", "and more text"]]),
        "reasoning": ([["image", image(inp / "r_in.jpg", (50, 60, 70))], ["text", "how many squares?"]],
                      [["text", "There are 3. Answer: 3"]], [["text", "Four."]]),
    }
    for task, (prompt, a, b) in pairs.items():
        record = {"id": f"{task}-pair-0", "prompt_source": "test", "prompt_content": prompt, "prompt_metadata": {},
                  "response_a": {"model_name": "ma", "response_content": a},
                  "response_b": {"model_name": "mb", "response_content": b}, "chosen": "A", "human_annotations": [5, 5, 4]}
        (root / TASK_FILES[task]).write_text(json.dumps({"pairs": [record]}))
    return root


def expected_parts(bench_dir: Path, task: str, reverse: bool) -> list[dict]:
    """The official evaluator's content for a pair: segments in order, images as file bytes + MIME."""
    pair = json.loads((bench_dir / TASK_FILES[task]).read_text())["pairs"][0]
    a, b = pair["response_a"]["response_content"], pair["response_b"]["response_content"]
    if reverse:
        a, b = b, a
    segments = [["text", RUBRICS[task]], ["text", MARKERS[0]], *[(k, ("input_images", v)) for k, v in pair["prompt_content"]],
                ["text", MARKERS[1]], *[(k, ("images", v)) for k, v in a], ["text", MARKERS[2]], *[(k, ("images", v)) for k, v in b]]
    mime = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif", ".webp": "image/webp"}
    parts = []
    for kind, value in segments:
        if kind == "text":
            parts.append({"type": "text", "text": value if isinstance(value, str) else value[1]})
        else:
            path = bench_dir / value[0] / value[1]
            data = base64.b64encode(path.read_bytes()).decode()
            parts.append({"type": "image_url", "image_url": {"url": f"data:{mime.get(path.suffix, 'image/jpeg')};base64,{data}"}})
    return parts


def official_answer(body: dict) -> str:
    return '```json\n{"reasoning": "A is closer.", "score": 5, "better_response": "A", "confidence": 0.4}\n```'


@pytest.mark.parametrize("task", list(TASK_FILES))
def test_api_request_equals_the_official_content_list(tmp_path, monkeypatch, task):
    monkeypatch.setenv(KEY, "sk-official-test")
    checkout, bench_dir = fake_checkout(tmp_path / "MMRB2"), bench(tmp_path / "bench")
    server = OpenAIServer(reply=official_answer)
    out = tmp_path / "judgments" / TASK_FILES[task]
    try:
        rc = main(["mmrb2", "judge", "--judge", "openai-compatible:judge-model", "--bench-dir", str(bench_dir), "--task", task,
                   "--out-file", str(out), "--official-prompts", str(checkout),
                   "--judge-option", f"base_url={server.url}", "--judge-option", f"api_key_env={KEY}", "--judge-option", "temperature=0.3"])
    finally:
        server.close()
    assert rc == 0 and len(server.requests) == 2
    forward, reverse = ([{"role": "user", "content": expected_parts(bench_dir, task, flipped)}] for flipped in (False, True))
    assert [body["messages"] for body in server.requests] in ([forward, reverse], [reverse, forward])
    for body in server.requests:
        assert set(body) == {"model", "messages", "n"} and body["n"] == 1  # no sampling parameters at all
    entry = json.loads(out.read_text())[f"{task}-pair-0"]["forward"][0]
    assert entry["judgement"] == "A" and entry["metadata"]["score"] == 5 and entry["metadata"]["official"]["confidence"] == 0.4


def test_study_official_true_asks_capable_judges_for_official_conditions():
    from bon.config import PluginSpec
    from bon.study import official_spec

    api = PluginSpec("openai-compatible:m", "m", {"official_prompts": "MMRB2"})
    assert official_spec(api, True).options == {"official_prompts": "MMRB2", "official": True}
    assert official_spec(PluginSpec("random", "random"), True).options == {}  # a judge without official conditions
    assert official_spec(api, False) is api


def test_official_answer_needs_better_response():
    from judges.prompts.official import verdict

    assert verdict('{"score": 5}').better is None  # a score alone is not the official answer
    v = verdict('{"better_response": "B", "score": 2}')
    assert v.better == "B" and v.score is None and v.meta["score"] == 2 and v.meta["official"]["score"] == 2


def test_local_judge_uses_official_parts_images_and_sampling(tmp_path_factory, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from conftest_models import cached
    from tiny_models import build_tiny_llava

    from bon.stages.judge_bench import pair_comparisons
    from bon.mmrb2 import load_pairs
    from bon import registry

    folder = cached("llava", tmp_path_factory, build_tiny_llava)
    checkout, bench_dir = fake_checkout(tmp_path / "MMRB2"), bench(tmp_path / "bench")
    judge = registry.create("judge", "transformers-vlm", model=str(folder), official_prompts=str(checkout), device="cpu")
    seen: dict = {}
    processor = judge.backend.processor
    real_template = processor.apply_chat_template

    def capture(messages, **kw):
        seen["messages"] = messages
        return real_template(messages, **kw)

    processor.apply_chat_template = capture
    judge.backend.generate = lambda batch, seed=None, **settings: seen.setdefault("settings", settings) and ['{"better_response": "A", "score": 4}'] * 2
    pair = load_pairs(bench_dir / "interleaved.json")[0]
    comps = pair_comparisons(pair, "interleaved", bench_dir, 1)
    text, images = judge.render(comps[0])
    parts = seen["messages"][0]["content"]
    expected = [{"type": "text", "text": p["text"]} if p["type"] == "text" else {"type": "image"}
                for p in expected_parts(bench_dir, "interleaved", False)]
    assert parts == expected  # one part per segment, texts not merged
    originals = [Image.open(bench_dir / "input_images" / "i_in.png"), Image.open(bench_dir / "images" / "i_a1.jpg")]
    assert [im.size for im in images] == [im.size for im in originals]
    assert [im.convert("RGB").tobytes() for im in images] == [im.convert("RGB").tobytes() for im in originals]
    verdicts = judge.judge(comps)
    assert seen["settings"] == {"do_sample": True, "temperature": 1.0, "max_new_tokens": 2000}
    assert [v.better for v in verdicts] == ["A", "A"] and verdicts[0].meta["score"] == 4
    assert judge.identity()["conditions"] == "official"
