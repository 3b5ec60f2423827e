"""openai-images (against a local HTTP server), the HTTP retry helper, files, vlm-answers, the interleaved
plan parser and ``generate_command``'s input checks. Only vlm-answers' local model test needs torch."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from PIL import Image

from bon import registry
from bon.content import Content, Prompt, load_candidates
from bon.errors import BonError
from generators.cli_support import generate_command
from generators.interleaved import fit_plan, parse_plan
from generators.vlm_answers import extract_answer
from openai_server import LocalServer

SECRET = "sk-test-DO-NOT-LEAK-0123456789"


def png_b64(colour=(10, 200, 30), size=(16, 16)) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def write_suite(folder: Path, prompts: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "suite.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts), encoding="utf-8")
    return path


# --- a scripted OpenAI-compatible server ----------------------------------------------------------


class Api(LocalServer):
    """Behaviour by prompt text: ok, busy (one 429 with Retry-After, then ok), broken (always 500),
    slow (answers after 1 s), garbage (200, not JSON), nodata (200, JSON without an image), denied (400),
    echo-key (401 whose message repeats the key)."""

    def __init__(self):
        self.hits: Counter = Counter()
        self.auth: list[str] = []
        self.paths: list[str] = []
        self.seeds: list = []
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path.endswith("/chat/completions"):
                    return api.chat(self, json.loads(body))
                if "multipart/form-data" in self.headers.get("Content-Type", ""):
                    m = re.search(rb'name="prompt"\r\n\r\n(.*?)\r\n', body, re.S)
                    prompt = m.group(1).decode() if m else ""
                    assert b'name="image"; filename="input.png"' in body
                    seed = None
                else:
                    data = json.loads(body)
                    prompt, seed = data["prompt"], data.get("seed")
                with api.lock:
                    api.hits[prompt] += 1
                    api.auth.append(self.headers.get("Authorization", ""))
                    api.paths.append(self.path)
                    api.seeds.append(seed)
                    n = api.hits[prompt]
                kind = prompt.split()[0]
                if kind == "busy" and n == 1:
                    return self.send(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
                if kind == "broken":
                    return self.send(500, {"error": {"message": "internal error"}})
                if kind == "slow":
                    time.sleep(1.0)
                if kind == "garbage":
                    return self.raw(200, b"<html>oops</html>")
                if kind == "nodata":
                    return self.send(200, {"created": 1})
                if kind == "denied":
                    return self.send(400, {"error": {"message": "content policy"}})
                if kind == "echo-key":
                    return self.send(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}})
                return self.send(200, {"created": 1, "data": [{"b64_json": png_b64((n * 40 % 255, 20, 20))}]})

            def send(self, status, payload, headers=None):
                self.raw(status, json.dumps(payload).encode(), headers)

            def raw(self, status, data, headers=None):
                try:
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

        self.serve(Handler)

    def chat(self, handler, data):
        text = " ".join(p.get("text", "") for m in data["messages"] for p in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}]))
        images = sum(1 for m in data["messages"] if isinstance(m["content"], list) for p in m["content"] if p.get("type") == "image_url")
        with self.lock:
            self.hits["chat"] += 1
            self.seeds.append(data.get("seed"))
        if "broken" in text:
            return handler.send(503, {"error": {"message": "overloaded"}})
        answer = f"I see {images} image(s). Reasoning... The answer is \\boxed{{{data.get('seed', 0) % 7}}}."
        handler.send(200, {"choices": [{"message": {"role": "assistant", "content": answer}}]})


@pytest.fixture
def api():
    with Api() as server:
        yield server


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("BON_TEST_IMAGES_KEY", SECRET)
    return "BON_TEST_IMAGES_KEY"


def images_gen(api, api_key, **kw):
    opts = dict(model="img-model", base_url=api.url, api_key_env=api_key, retries=2, timeout=5.0, name="oai")
    opts.update(kw)
    return registry.create("generator", "openai-images", **opts)


# --- openai-images --------------------------------------------------------------------------------


def test_openai_images_success_and_retry_after(api, api_key):
    gen = images_gen(api, api_key, max_concurrency=3, send_seed=True)
    cands = gen.sample(Prompt("p", "t2i", Content.of("ok a cat")), [1, 2, 3])
    assert [len(c.content.images) for c in cands] == [1, 1, 1] and api.hits["ok a cat"] == 3
    assert all(c.provenance["attempts"] == 1 and "missing" not in c.provenance for c in cands)
    assert sorted(api.seeds) == [1, 2, 3] and set(api.auth) == {f"Bearer {SECRET}"}
    started = time.perf_counter()
    busy = gen.sample(Prompt("q", "t2i", Content.of("busy dog")), [4])[0]
    assert busy.content.images and busy.provenance["attempts"] == 2 and api.hits["busy dog"] == 2
    assert time.perf_counter() - started >= 1.0, "the server's Retry-After is honoured"
    assert "transient" not in busy.provenance
    assert SECRET not in json.dumps(busy.provenance) + json.dumps(gen.identity())


def test_openai_images_failures_become_missing_with_reasons(api, api_key):
    gen = images_gen(api, api_key, timeout=0.3, max_concurrency=4)
    started = time.perf_counter()
    out = {}
    for kind in ("broken", "slow", "garbage", "nodata", "denied", "echo-key"):
        out[kind] = gen.sample(Prompt(kind, "t2i", Content.of(f"{kind} picture")), [1])[0]
    elapsed = time.perf_counter() - started
    for kind, cand in out.items():
        assert len(cand.content) == 0 and cand.provenance["missing"], kind
    assert out["broken"].provenance["missing"] == "HTTP 500: internal error (after 3 attempts)"
    assert out["broken"].provenance["transient"] and out["slow"].provenance["transient"]
    assert "transient" not in out["denied"].provenance and "transient" not in out["garbage"].provenance
    assert api.hits["broken picture"] == 3 and out["broken"].provenance["status"] == 500
    assert out["slow"].provenance["missing"].startswith("timed out after 0.3 s") and api.hits["slow picture"] == 3
    assert out["garbage"].provenance["missing"].startswith("malformed response: not JSON") and api.hits["garbage picture"] == 1
    assert out["nodata"].provenance["missing"] == "malformed response: no data[0] image"
    assert out["denied"].provenance["missing"] == "HTTP 400: content policy" and api.hits["denied picture"] == 1
    assert SECRET not in out["echo-key"].provenance["missing"] and "***" in out["echo-key"].provenance["missing"]
    print(f"\n[openai-images] 6 failure kinds, {sum(api.hits.values())} requests, {elapsed:.2f} s")


def test_openai_images_edit_and_generate_command_never_writes_the_key(api, api_key, tmp_path):
    suite_dir = tmp_path / "suite"
    suite_dir.mkdir()
    Image.new("RGB", (16, 16), "red").save(suite_dir / "in.png")
    suite = write_suite(suite_dir, [
        {"id": "g", "task": "t2i", "content": [["text", "ok tree"]]},
        {"id": "e", "task": "edit", "content": [["text", "ok make it blue"], ["image", "in.png"]]},
        {"id": "b", "task": "t2i", "content": [["text", "broken tree"]]},
    ])
    opts = {"model": "img-model", "base_url": api.url, "api_key_env": api_key, "retries": 1, "max_concurrency": 2}
    summary = generate_command("openai-images", opts, suite, 2, tmp_path / "out", None, 0, None)
    # "broken tree" still answers HTTP 500 after the retries: transient, so the prompt is pending (not stored)
    assert summary["missing_candidates"] == 0 and summary["pending_prompts"] == 1 and summary["generated_prompts"] == 3
    cands = load_candidates(Path(summary["candidates"]))
    by = {(c.prompt_id, c.index): c for c in cands}
    assert by[("e", 0)].provenance["mode"] == "edit" and by[("g", 0)].provenance["mode"] == "generate"
    assert "/v1/images/edits" in api.paths and "/v1/images/generations" in api.paths
    assert ("b", 0) not in by and ("b", 1) not in by  # generated again by the next run
    for f in (tmp_path / "out").rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f"key written to {f}"
    assert "BON_TEST_IMAGES_KEY" in (Path(summary["candidates"]).parent / "generate.json").read_text()


def test_openai_images_bad_options():
    with pytest.raises(BonError, match="NAME of an environment variable"):
        registry.create("generator", "openai-images", model="m", api_key_env=SECRET)
    with pytest.raises(BonError, match="is not set"):
        registry.create("generator", "openai-images", model="m", api_key_env="BON_SURELY_UNSET_VARIABLE")
    with pytest.raises(BonError, match="mode"):
        registry.create("generator", "openai-images", model="m", base_url="http://127.0.0.1:9", mode="paint")


def test_api_gives_up_at_once_when_server_asks_to_wait_too_long(api, api_key):
    class Long(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.send_response(429)
            self.send_header("Retry-After", "3600")
            self.send_header("Content-Length", "0")
            self.end_headers()

    with LocalServer().serve(Long) as server:
        gen = images_gen(api, api_key, base_url=server.url)
        started = time.perf_counter()
        (cand,) = gen.sample(Prompt("p", "t2i", Content.of("ok")), [1])
        assert time.perf_counter() - started < 5 and cand.provenance["missing"].startswith("HTTP 429")
        assert cand.provenance["attempts"] == 1 and cand.provenance["transient"]


# --- vlm-answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text,answer,rule", [
    ("so x = 4, thus \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}", "boxed"),
    ("Thinking...\nAnswer: **B**\n", "B", "answer-line"),
    ("step 1\nFinal answer: 42.", "42", "answer-line"),
    ("Hence the answer is yes.", "yes", "answer-is"),
    ("no idea", None, None),
])
def test_final_answer_extraction(text, answer, rule):
    assert extract_answer(text) == (answer, rule)


def test_vlm_answers_through_an_openai_compatible_api(api, api_key):
    gen = registry.create("generator", "vlm-answers", backend="openai", model="vlm", base_url=api.url,
                          api_key_env=api_key, retries=1, instruction="Box the answer.", name="vlm")
    prompt = Prompt("r", "reasoning", Content.of("How many squares?", Image.new("RGB", (8, 8))))
    cands = gen.sample(prompt, [3, 9])
    assert [c.provenance["final_answer"] for c in cands] == ["3", "2"]
    assert cands[0].content.text.startswith("I see 1 image(s)") and cands[0].provenance["final_answer_rule"] == "boxed"
    broken = gen.sample(Prompt("r2", "reasoning", Content.of("broken question")), [1])[0]
    assert broken.provenance["missing"].startswith("HTTP 503") and len(broken.content) == 0
    assert broken.provenance["transient"], "a 503 after the retries is retried on a rerun, not stored as final"


def test_vlm_answers_with_a_tiny_local_llava(tmp_path_factory, request):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from conftest_models import build_llava, cached

    import torch

    folder = cached("llava", tmp_path_factory, build_llava)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model gains nothing from threads; on a shared machine they contend
    request.addfinalizer(lambda: torch.set_num_threads(threads))
    gen = registry.create("generator", "vlm-answers", model=str(folder), max_new_tokens=12, temperature=1.0,
                          answer_pattern=r"(.)$", name="llava")
    prompt = Prompt("r", "reasoning", Content.of(Image.new("RGB", (40, 30), "blue"), "Which colour is it?"))
    a = gen.sample(prompt, [1, 2, 3])
    b = gen.sample(prompt, [1, 2, 3])
    assert [c.content.text for c in a] == [c.content.text for c in b], "same seed, same answer"
    assert len({c.content.text for c in a}) == 3
    assert all("final_answer" in c.provenance for c in a) and a[0].provenance["class"] == "LlavaForConditionalGeneration"
    assert a[0].provenance["settings"]["temperature"] == 1.0 and a[0].provenance["seed"] == 1


# --- interleaved plan parsing -----------------------------------------------------------------------


def test_plan_parser_and_fitting():
    plan = "Intro.\n<image>a red barn</image>More text.< Image >two cows</IMAGE>[image: a tractor]\n<img>a field</img> end <image>unclosed slot\n\nTail."
    pieces = parse_plan(plan)
    assert [v for k, v in pieces if k == "image"] == ["a red barn", "two cows", "a tractor", "a field", "unclosed slot"]
    assert [v for k, v in pieces if k == "text"] == ["Intro.", "More text.", "end", "Tail."]
    assert parse_plan("<image></image> </image> just words") == [("text", "just words")]
    fitted, repairs = fit_plan(pieces, 1, 2, "fallback")
    assert [k for k, _ in fitted].count("image") == 2 and len(repairs) == 3
    fitted, repairs = fit_plan([("text", "garbage")], 2, 3, "the prompt")
    assert fitted == [("text", "garbage"), ("image", "the prompt"), ("image", "the prompt")] and len(repairs) == 2


# --- files ------------------------------------------------------------------------------------------


def make_folder_layout(root: Path) -> None:
    (root / "p1").mkdir(parents=True)
    Image.new("RGB", (8, 8), "red").save(root / "p1" / "0.png")
    Image.new("RGB", (8, 8), "blue").save(root / "p1" / "1.jpg")
    (root / "p1" / "2.txt").write_text("a text answer", encoding="utf-8")
    (root / "p_2").mkdir()
    Image.new("RGB", (8, 8), "green").save(root / "p_2" / "pic.png")
    (root / "p_2" / "0.json").write_text(json.dumps({"content": [["text", "step"], ["image", "pic.png"]], "seed": 77}))
    (root / "p_2" / "1.txt").write_text("b", encoding="utf-8")
    (root / "p_2" / "2.txt").write_text("c", encoding="utf-8")
    (root / "p_2" / "3.txt").write_text("extra", encoding="utf-8")


def files_suite(folder: Path) -> Path:
    return write_suite(folder, [{"id": "p1", "task": "t2i", "content": [["text", "x"]]},
                                {"id": "p/2", "task": "interleaved", "content": [["text", "y"]]}])


def test_files_folder_layout(tmp_path):
    make_folder_layout(tmp_path / "cands")
    suite = files_suite(tmp_path / "suite")
    summary = generate_command("files", {"root": str(tmp_path / "cands")}, suite, 3, tmp_path / "out", None, 0, None)
    cands = {(c.prompt_id, c.index): c for c in load_candidates(Path(summary["candidates"]))}
    assert len(cands) == 6
    assert cands[("p1", 2)].content.text == "a text answer" and len(cands[("p1", 1)].content.images) == 1
    mixed = cands[("p/2", 0)]
    assert [it.kind for it in mixed.content] == ["text", "image"] and mixed.seed == 77
    assert mixed.provenance["source"].endswith("0.json")
    # images were copied into the run folder, pixels unchanged
    assert Path(cands[("p1", 0)].content.images[0].path).is_relative_to(tmp_path / "out")
    assert cands[("p1", 0)].content.images[0].load().getpixel((0, 0)) == (255, 0, 0)
    with pytest.raises(BonError, match=r"p_2.*has 4 candidates, expected 3"):
        generate_command("files", {"root": str(tmp_path / "cands"), "allow_extra": False}, suite, 3, tmp_path / "o2", None, 0, None)


def test_files_manifest_and_validation(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    Image.new("RGB", (8, 8), "red").save(root / "a.png")
    lines = [{"prompt_id": "p1", "index": 0, "content": [["image", "a.png"]]},
             {"prompt_id": "p1", "index": 1, "content": [["text", "hello"]], "seed": 5, "provenance": {"model": "x"}},
             {"prompt_id": "p/2", "index": 0, "content": [["text", "y0"]]},
             {"prompt_id": "p/2", "index": 1, "content": [["text", "y1"]]}]
    manifest = root / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    suite = files_suite(tmp_path / "suite")
    summary = generate_command("files", {"manifest": str(manifest)}, suite, 2, tmp_path / "out", None, 0, None)
    cands = load_candidates(Path(summary["candidates"]))
    assert len(cands) == 4 and cands[1].seed == 5 and cands[1].provenance["source_provenance"] == {"model": "x"}

    def fails(text_lines, match, n=2):
        m = root / f"bad{abs(hash(match)) % 10**6}.jsonl"
        m.write_text("".join(json.dumps(x) + "\n" for x in text_lines))
        with pytest.raises(BonError, match=match) as err:
            generate_command("files", {"manifest": str(m)}, suite, n, tmp_path / "o", None, 0, None)
        assert "\n" not in str(err.value)

    fails(lines + [{"prompt_id": "p1", "index": 0, "content": [["text", "dup"]]}], r":5: candidate 0 of prompt p1 already given on line 1")
    fails([{**lines[0], "content": [["image", "gone.png"]]}] + lines[1:], r":1: image file .*gone.png not found")
    fails(lines, r"prompt p1 has 2 of 3 candidates \(missing index 2\)", n=3)
    fails(lines[:2], r"no candidates for prompt p/2")
    (root / "broken.png").write_bytes(b"not a png at all")
    fails([{"prompt_id": "p1", "index": 0, "content": [["image", "broken.png"]]}] + lines[1:], r"broken.png: unreadable image")


def test_files_folder_errors(tmp_path):
    root = tmp_path / "c"
    (root / "p1").mkdir(parents=True)
    (root / "p1" / "0.txt").write_text("a")
    (root / "p1" / "0.png").write_bytes(b"garbage")
    suite = write_suite(tmp_path / "s", [{"id": "p1", "task": "t2i", "content": [["text", "x"]]}])
    with pytest.raises(BonError, match="two files for candidate 0"):
        generate_command("files", {"root": str(root)}, suite, 1, tmp_path / "o", None, 0, None)
    (root / "p1" / "0.txt").unlink()
    with pytest.raises(BonError, match=r"0.png: unreadable image"):
        generate_command("files", {"root": str(root)}, suite, 1, tmp_path / "o", None, 0, None)
    with pytest.raises(BonError, match="candidate folder .* not found"):
        generate_command("files", {"root": str(tmp_path / "nope")}, suite, 1, tmp_path / "o", None, 0, None)
    with pytest.raises(BonError, match="exactly one of"):
        registry.create("generator", "files")


# --- generate_command input checks -----------------------------------------------------------------------


def test_generate_command_bad_input(tmp_path):
    suite = write_suite(tmp_path / "s", [{"id": "p1", "task": "t2i", "content": [["text", "x"]]}])
    (tmp_path / "c" / "p1").mkdir(parents=True)
    (tmp_path / "c" / "p1" / "0.txt").write_text("a")
    opts = {"root": str(tmp_path / "c")}
    for n in (0, -2):
        with pytest.raises(BonError, match="--n must be at least 1"):
            generate_command("files", opts, suite, n, tmp_path / "o", None, 0, None)
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for out in (blocker, blocker / "sub"):
        with pytest.raises(BonError, match=r"output path is a file|cannot create the run folder|not writable") as err:
            generate_command("files", opts, suite, 1, out, None, 0, None)
        assert "\n" not in str(err.value)
    with pytest.raises(BonError, match="suite file not found"):
        generate_command("files", opts, tmp_path / "none.jsonl", 1, tmp_path / "o", None, 0, None)
    with pytest.raises(BonError, match="does not batch"):
        generate_command("files", opts, suite, 1, tmp_path / "o", 4, 0, None)
    with pytest.raises(BonError, match="unknown generator"):
        generate_command("no-such-generator", {}, suite, 1, tmp_path / "o", None, 0, None)
    assert generate_command("files", opts, suite, 1, tmp_path / "o", None, 0, 1)["prompts"] == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into read-only folders")
def test_generate_command_read_only_folder(tmp_path):
    suite = write_suite(tmp_path / "s", [{"id": "p1", "task": "t2i", "content": [["text", "x"]]}])
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(BonError, match="not writable"):
            generate_command("files", {"root": str(tmp_path)}, suite, 1, ro, None, 0, None)
    finally:
        ro.chmod(0o700)


def test_plugin_modules_import_without_heavy_packages():
    import subprocess
    import sys

    code = ("import sys, generators.diffusers_t2i, generators.diffusers_edit, generators.interleaved, "
            "generators.vlm_answers, generators.openai_images, generators.files, generators.cli_support; "
            "print(sorted(m for m in ('torch', 'diffusers', 'transformers', 'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1], check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("config", ["genai_bench_flux.yaml", "gedit_bench_kontext.yaml"])
def test_gpu_configs_parse_and_build_their_generators(config):
    from bon.config import load_config

    cfg = load_config(Path(__file__).parents[1] / "configs" / config)
    real = {"genai_bench_flux.yaml": ("genai-bench", "vqascore"), "gedit_bench_kontext.yaml": ("gedit-bench", "gedit")}
    assert (cfg.suite["name"], cfg.verifier.name) == real[config] and cfg.n == 8  # real suites and verifiers
    gens = [spec.create("generator") for spec in cfg.generators]  # nothing is downloaded or loaded yet
    assert all(g.identity()["model"] for g in gens) and len({g.name for g in gens}) == len(gens)


def test_generate_cli_takes_generator_options_a_label_and_json(tmp_path, capsys):
    from bon.cli import main

    make_folder_layout(tmp_path / "cands")
    suite = files_suite(tmp_path / "suite")
    out, summary = tmp_path / "out", tmp_path / "g.json"
    argv = ["generate", "--generator", "files", "--generator-option", f"root={tmp_path / 'cands'}", "--label", "mine",
            "--suite", str(suite), "--n", "3", "--out", str(out), "--json", str(summary)]
    assert main(argv) == 0
    data = json.loads(summary.read_text())
    assert data["generator"] == "mine" and data["prompts"] == 2 and Path(data["candidates"]).parent.name == "mine"
    # a bad generator option is refused before the output folder exists
    fresh = tmp_path / "fresh"
    assert main(["generate", "--generator", "files", "--generator-option", "root=/no/such/folder",
                 "--suite", str(suite), "--n", "3", "--out", str(fresh)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "/no/such/folder" in err, err
    assert not fresh.exists()
