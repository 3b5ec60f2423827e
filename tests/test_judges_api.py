"""openai-compatible: a local scripted OpenAI-style server checks retries (429 with Retry-After, 500,
timeouts), garbage answers as missing judgments, the concurrency limit, usage and cost in meta, the
API key staying out of every file, and one-line errors before any work for a dead endpoint or a
missing key variable. Also: the paper's judge config lists only valid judges and options."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from PIL import Image

from bon import registry
from bon.cli import main
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.protocol import Comparison
from bon.referee import Referee
from bon.selection import run_selection
from bon.selection.knockout import Knockout
from bon.store import JudgmentStore
from bon.backends.openai_api import redact
from judges.openai_compatible import OpenAICompatibleJudge
from openai_server import LocalServer
from tiny_models import build_bench

needs_openai = pytest.mark.skipif(importlib.util.find_spec("openai") is None, reason="the openai package is not installed")

KEY = "sk-test-Zq8v1t9KEYMATERIAL-do-not-leak-4242"
KEY_ENV = "BON_TEST_JUDGE_KEY"
ROOT = Path(__file__).resolve().parents[1]

GOOD = '{"reasoning": "A draws the red square", "score": 5, "better_response": "A"}'
FENCED = 'Let me compare.\n```json\n{"reasoning": "B is closer", "score": 2, "better_response": "B"}\n```'
GARBAGE = "Both responses have their charms; I could not possibly choose."


class Server(LocalServer):
    """Answers /v1/chat/completions by the ``case:<name>`` marker in the request's text."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inflight = 0
        self.max_inflight = 0
        self.attempts: dict[str, list[float]] = {}  # request body hash -> arrival times
        self.case_of: dict[str, str] = {}
        self.auth: set[str] = set()
        self.cases: list[str] = []
        self.images = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self._leave()  # before the answer goes out: the client may send its next request at once
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "judge-model", "object": "model"}]})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.lock:
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                    self.counted = True
                try:
                    server.auth.add(self.headers.get("Authorization", ""))
                    self.answer(json.loads(body), hashlib.sha256(body).hexdigest())
                finally:
                    self._leave()

            def _leave(self) -> None:
                """A request stops being in flight once, when its answer is about to be sent."""
                with server.lock:
                    if getattr(self, "counted", False):
                        server.inflight -= 1
                        self.counted = False

            def answer(self, req: dict, key: str) -> None:
                parts = req["messages"][0]["content"]
                text = " ".join(p.get("text", "") for p in parts if p["type"] == "text")
                case = text.split("case:", 1)[1].split()[0] if "case:" in text else "good"
                with server.lock:
                    seen = server.attempts.setdefault(key, [])
                    seen.append(time.monotonic())
                    n = len(seen)
                    server.case_of[key] = case
                    server.cases.append(case)
                    server.images += sum(p["type"] == "image_url" for p in parts)
                assert all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in parts if p["type"] == "image_url")
                if case == "ratelimit" and n == 1:
                    return self._send(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"Retry-After": "0.4"})
                if case == "error500" and n <= 2:
                    return self._send(500, {"error": {"message": "upstream hiccup"}})
                if case == "down":
                    return self._send(503, {"error": {"message": "overloaded"}})
                if case == "timeout" and n == 1:
                    time.sleep(2.5)
                if case == "slow":
                    time.sleep(0.25)
                if case == "echo-key":  # a server that quotes the key back in its error
                    return self._send(400, {"error": {"message": f"bad request from {self.headers.get('Authorization')}"}})
                content = {"garbage": GARBAGE, "fenced": FENCED}.get(case, GOOD)
                self._send(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": req["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200},
                })

        self.serve(Handler)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with Server() as s:
        yield s


def fast_options(server: Server, **extra) -> dict:
    return {"base_url": server.url, "api_key_env": KEY_ENV, "max_retries": 3, "timeout": 1.5, "concurrency": 4, "price_input": 1.25, "price_output": 10.0, **extra}


def refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there any more


def grep_tree(folder: Path, needle: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@needs_openai
def test_cli_judges_with_retries_garbage_and_failures_and_never_writes_the_key(server, tmp_path, capsys):
    cases = ["good", "fenced", "garbage", "ratelimit", "error500", "timeout", "down", "echo-key"]
    bench = build_bench(tmp_path / "bench", n_pairs=len(cases), texts=[f"a red square case:{c} please" for c in cases])
    out = tmp_path / "run" / "api_t2i.json"
    argv = ["mmrb2", "judge", "--judge", "openai-compatible:judge-model", "--bench-dir", str(bench), "--task", "t2i",
            "--out-file", str(out)] + [f"--judge-option={k}={v}" for k, v in fast_options(server, concurrency=8).items()]
    started = time.perf_counter()
    assert main(argv) == 3  # the dead endpoint's two calls are pending (transient): rerun
    assert time.perf_counter() - started < 20
    assert "2 calls pending" in capsys.readouterr().err
    data = json.loads(out.read_text())
    by_case = {c: data[f"pair{i}"] for i, c in enumerate(cases) if f"pair{i}" in data}
    assert "down" not in by_case  # pending, not written as if final

    for case in ("good", "ratelimit", "error500", "timeout"):
        fwd, rev = by_case[case]["forward"][0], by_case[case]["reverse"][0]
        assert fwd["judgement"] == rev["judgement"] == "A", case
        meta = fwd["metadata"]
        assert meta["score"] == 5 and meta["usage"] == {"input_tokens": 1000, "output_tokens": 200}
        assert meta["cost_usd"] == pytest.approx((1000 * 1.25 + 200 * 10.0) / 1e6)
        assert meta["served_model"] == "judge-model" and meta["answer"] == GOOD
    # (at least: on a loaded machine a retry may itself time out and be retried once more)
    assert by_case["ratelimit"]["forward"][0]["metadata"]["attempts"] >= 2
    assert by_case["error500"]["forward"][0]["metadata"]["attempts"] >= 3
    assert by_case["timeout"]["forward"][0]["metadata"]["attempts"] >= 2
    assert by_case["fenced"]["forward"][0]["judgement"] == "B" and by_case["fenced"]["forward"][0]["metadata"]["score"] == 2

    garbage = by_case["garbage"]["forward"][0]
    assert garbage["judgement"] == "" and garbage["metadata"]["missing"].startswith("unparseable")
    echo = by_case["echo-key"]["forward"][0]
    assert echo["judgement"] == "" and "HTTP 400" in echo["metadata"]["missing"]

    # Retry-After was honoured: the retry came no sooner than the server asked
    rate_waits = [t[1] - t[0] for k, t in server.attempts.items() if server.case_of[k] == "ratelimit"]
    assert len(rate_waits) == 2 and min(rate_waits) >= 0.4  # both orders waited as long as asked
    assert server.auth == {f"Bearer {KEY}"}  # the key was sent...
    capsys.readouterr()
    assert grep_tree(tmp_path, KEY) == []  # ...and is nowhere on disk: judgment file, store, WAL
    assert grep_tree(tmp_path, KEY[10:30]) == []

    # the store kept everything but the transient failures (the dead endpoint): judging the pairs
    # again into a fresh file asks only those again
    before = len(server.cases)
    fresh = tmp_path / "run" / "again.json"
    argv[argv.index(str(out))] = str(fresh)
    assert main(argv + ["--store", str(out.parent / "judgments.sqlite")]) == 3
    assert "calls made 2" in capsys.readouterr().out
    assert set(server.cases[before:]) == {"down"}


@needs_openai
def test_judge_against_a_server_down_from_the_start_exits_3_within_the_retry_budget(monkeypatch, tmp_path, capsys):
    """Without a time budget, 12 calls x 50 retries of backoff up to 8 s would take over an hour."""
    monkeypatch.setenv(KEY_ENV, KEY)
    bench = build_bench(tmp_path / "bench", n_pairs=6)
    out = tmp_path / "o.json"
    argv = ["mmrb2", "judge", "--judge", "openai-compatible:m", "--bench-dir", str(bench), "--task", "t2i", "--out-file", str(out)]
    options = {"base_url": refused_url(), "api_key_env": KEY_ENV, "preflight": "false", "max_retries": 50,
               "retry_for": "2s", "concurrency": 2}
    started = time.perf_counter()
    argv += [f"--judge-option={k}={v}" for k, v in options.items()]
    rc = main(argv)
    elapsed = time.perf_counter() - started
    err = capsys.readouterr().err.strip()
    assert rc == 3 and err == "bon: 12 calls pending after transient failures; rerun the same command to continue"
    assert 1.5 < elapsed < 2 + 8 + 5  # the budget, at most one backoff past it, and start-up
    assert json.loads(out.read_text()) == {}  # nothing written as if it were final
    assert main(argv + ["--judge-option", "retry_for=soon"]) == 2
    assert "retry_for: expected seconds" in capsys.readouterr().err


@needs_openai
def test_concurrency_stays_within_the_limit(server):
    judge = OpenAICompatibleJudge(model="judge-model", **fast_options(server, concurrency=3, timeout=5))
    prompt = Prompt("p", "t2i", Content.of("a slow one case:slow"))
    comps = [Comparison(prompt, Content.of(f"answer {i}"), Content.of(f"other {i}"), 0) for i in range(12)]
    started = time.perf_counter()
    verdicts = judge.judge(comps)
    elapsed = time.perf_counter() - started
    assert [v.better for v in verdicts] == ["A"] * 12
    assert server.max_inflight == 3  # reached, never exceeded
    assert elapsed >= 4 * 0.25 * 0.9  # 12 requests, 3 at a time
    assert judge.totals["requests"] == 12 and judge.totals["cost_usd"] == pytest.approx(12 * 0.00325)


@needs_openai
def test_images_are_sent_in_order_as_resized_data_urls(server):
    judge = OpenAICompatibleJudge(model="judge-model", **fast_options(server, max_image_side=64))
    prompt = Prompt("p", "edit", Content.of("make it blue", Image.new("RGB", (300, 200), "red")))
    a = Content.of("before", Image.new("RGB", (500, 100), "blue"), "after", Image.new("RGB", (20, 20), "green"))
    b = Content.of(Image.new("RGB", (100, 500), "red"))
    (msg,) = judge.messages(Comparison(prompt, a, b, 0))
    kinds = [p["type"] for p in msg["content"]]
    assert kinds == ["text", "image_url", "text", "image_url", "text", "image_url", "text", "image_url"]
    texts = [p["text"] for p in msg["content"] if p["type"] == "text"]
    assert texts[0].rstrip().endswith("make it blue") and "[PROMPT]" in texts[0] and "[RESPONSE A]\nbefore" in texts[1]
    import base64
    import io

    sizes = []
    for p in msg["content"]:
        if p["type"] == "image_url":
            raw = base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
            sizes.append(Image.open(io.BytesIO(raw)).size)
    assert sizes == [(64, 43), (64, 13), (20, 20), (13, 64)]
    assert judge.judge([Comparison(prompt, a, b, 0)])[0].better == "A" and server.images == 4


@needs_openai
def test_api_judge_in_a_knockout(server, tmp_path):
    judge = registry.create("judge", "openai-compatible:judge-model", name="api", **fast_options(server))
    prompt = Prompt("p", "reasoning", Content.of("what is 2+2?"))
    cands = [Candidate("p", k, "gen", k, Content.of(f"it is {k}")) for k in range(5)]
    store = JudgmentStore(tmp_path / "j.sqlite")
    referee = Referee(judge, store)
    (pick,) = run_selection(Knockout(), referee, [(prompt, cands)])
    assert referee.stats.calls_made == 8 and referee.stats.missing == 0
    assert pick.index in range(5)
    store.close()
    assert grep_tree(tmp_path, KEY) == []


@needs_openai
def test_identity_holds_settings_not_secrets(server):
    judge = OpenAICompatibleJudge(model="judge-model", **fast_options(server, temperature=0.0))
    ident = judge.identity()
    assert ident["model"] == "judge-model" and ident["base_url"] == server.url and ident["sampling"] == {"temperature": 0.0}
    assert set(ident["templates"]) == {"image", "edit", "interleaved", "reasoning"}
    text = json.dumps(ident) + repr(judge) + json.dumps(vars(judge), default=str)
    assert KEY not in text and KEY_ENV in json.dumps(vars(judge), default=str)
    other = OpenAICompatibleJudge(model="judge-model", **fast_options(server, temperature=0.0, concurrency=1, price_input=9))
    assert other.identity() == ident  # concurrency and prices do not change the judgment
    assert OpenAICompatibleJudge(model="judge-model", **fast_options(server, max_image_side=256)).identity() != ident


@needs_openai
def test_refused_connection_is_a_one_line_error_at_construction(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(KEY_ENV, KEY)
    url = refused_url()
    started = time.perf_counter()
    with pytest.raises(BonError, match="refused the connection") as info:
        OpenAICompatibleJudge(model="m", base_url=url, api_key_env=KEY_ENV)
    assert time.perf_counter() - started < 3 and "\n" not in str(info.value) and KEY not in str(info.value)
    bench = build_bench(tmp_path / "bench", n_pairs=1)
    rc = main(["mmrb2", "judge", "--judge", "openai-compatible:m", "--bench-dir", str(bench), "--task", "t2i",
               "--out-file", str(tmp_path / "o.json"), "--judge-option", f"base_url={url}", "--judge-option", f"api_key_env={KEY_ENV}"])
    err = capsys.readouterr().err.strip()
    assert rc == 3 and "refused the connection" in err and "\n" not in err  # transient: start it, rerun
    assert not (tmp_path / "o.json").exists() and not (tmp_path / "judgments.sqlite").exists()
    # preflight off: the judge is built, and a call that cannot connect is a transient missing verdict
    judge = OpenAICompatibleJudge(model="m", base_url=url, api_key_env=KEY_ENV, preflight=False, max_retries=1)
    (v,) = judge.judge([Comparison(Prompt("p", "t2i", Content.of("x")), Content.of("a"), Content.of("b"))])
    assert v.better is None and v.transient and "(after 2 attempts)" in v.missing


@needs_openai
def test_missing_key_variable_is_a_one_line_error_before_any_request(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("BON_NO_SUCH_KEY", raising=False)
    bench = build_bench(tmp_path / "bench", n_pairs=1)
    rc = main(["mmrb2", "judge", "--judge", "openai-compatible:gpt-5", "--bench-dir", str(bench), "--task", "t2i",
               "--out-file", str(tmp_path / "o.json"), "--judge-option", "api_key_env=BON_NO_SUCH_KEY",
               "--judge-option", f"base_url={refused_url()}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "BON_NO_SUCH_KEY is not set" in err and "\n" not in err
    # a server without keys: api_key_env null
    OpenAICompatibleJudge(model="m", base_url=refused_url(), api_key_env=None, preflight=False)


@needs_openai
def test_rejected_key_at_preflight(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)

    class Reject(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

    with LocalServer().serve(Reject) as server, pytest.raises(BonError, match=f"rejected the key in \\${KEY_ENV}"):
        OpenAICompatibleJudge(model="m", base_url=server.url, api_key_env=KEY_ENV)


def test_keys_are_redacted_from_any_text():
    assert KEY not in redact(f"Incorrect API key provided: {KEY[:8]}***{KEY[-4:]}", KEY)
    assert "[redacted]" in redact(f"Authorization: Bearer {KEY}", KEY)


@needs_openai
def test_gpt5_and_o_series_get_their_parameter_set(server):
    """Reasoning models get max_completion_tokens and no sampling parameters; others keep theirs."""
    seen = []
    options = fast_options(server, temperature=0.3, top_p=0.9, max_tokens=64, seed=7)
    prompt = Prompt("p", "t2i", Content.of("a red square"))
    comp = Comparison(prompt, Content.of("a"), Content.of("b"), 0)
    for model in ("gpt-5", "o3-mini", "openai/gpt-5-mini", "gpt-4o", "gpt-5-chat-latest"):
        body = OpenAICompatibleJudge(model=model, **options).request(comp)
        seen.append((model, sorted(k for k in body if k not in ("model", "messages"))))
    reasoning = ["max_completion_tokens", "seed"]
    sampling = ["max_completion_tokens", "seed", "temperature", "top_p"]
    assert seen == [("gpt-5", reasoning), ("o3-mini", reasoning), ("openai/gpt-5-mini", reasoning),
                    ("gpt-4o", sampling), ("gpt-5-chat-latest", sampling)]
    forced = OpenAICompatibleJudge(model="my-served-reasoner", reasoning_model=True, **options).request(comp)
    assert "temperature" not in forced and forced["max_completion_tokens"] == 64
    old = OpenAICompatibleJudge(model="vllm-model", max_tokens_param="max_tokens", **options).request(comp)
    assert old["max_tokens"] == 64 and old["temperature"] == 0.3
    # and the request a GPT-5 judge sends is accepted end to end by the scripted server
    (v,) = OpenAICompatibleJudge(model="gpt-5", **options).judge([comp])
    assert v.better == "A" and v.meta["served_model"] == "gpt-5"


def test_paper_judge_config_lists_valid_judges_and_options():
    from bon.config import _specs

    entries = yaml.safe_load((ROOT / "configs" / "judges_paper.yaml").read_text())
    specs = _specs(entries, "judge", "judges_paper.yaml", "judges")  # names registered, labels unique
    assert len(specs) >= 6
    for spec in specs:
        factory = registry.resolve("judge", registry.parse_spec(spec.name)[0])
        params = inspect.signature(factory.__init__).parameters
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        unknown = set(spec.options) - set(params)
        assert accepts_any or not unknown, f"{spec.label}: unknown options {unknown}"
        if "api_key_env" in spec.options:
            assert spec.options["api_key_env"] in ("OPENAI_API_KEY", "GEMINI_API_KEY", None)



@needs_openai
def test_a_study_whose_api_judge_has_no_server_yet_exits_3(monkeypatch, tmp_path, capsys):
    """The preflight's refused connection is transient in `bon run` too: exit 3 (start the server, rerun)."""
    import yaml

    from bon.demo import demo_raw

    monkeypatch.setenv(KEY_ENV, KEY)
    raw = demo_raw(out=tmp_path / "run", prompts=2, n=2, seed=1)
    raw["tasks"], raw["judges"] = ["t2i"], [{"name": "openai-compatible:m", "label": "api",
                                              "options": {"base_url": refused_url(), "api_key_env": KEY_ENV}}]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", str(tmp_path / "c.yaml")]) == 3
    err = capsys.readouterr().err.strip()
    assert "refused the connection" in err and err.startswith("bon: stopped") and "\n" not in err
