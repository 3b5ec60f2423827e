"""``batch: true`` on the openai-compatible judge, against a local fake of the files + batches routes."""

from __future__ import annotations

import json
import re
import threading
from email.parser import BytesParser
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler

import pytest

from bon import registry
from bon.content import Candidate, Content, Prompt
from bon.protocol import Comparison
from bon.referee import Referee
from bon.selection import run_selection
from bon.selection.knockout import Knockout
from bon.store import JudgmentStore
from openai_server import LocalServer

pytest.importorskip("openai")

KEY_ENV = "BON_TEST_BATCH_KEY"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}


def preference(model: str, k: int) -> int:
    """How much model ``model`` likes candidate ``cand-k`` (two models with different tastes)."""
    return (k * 5) % 8 if model == "judge-a" else -k


def completion(req: dict) -> dict:
    text = " ".join(p.get("text", "") for p in req["messages"][0]["content"] if p["type"] == "text")
    a, b = (int(k) for k in re.findall(r"cand-(\d+)", text)[:2])  # response A is rendered before response B
    better = "A" if preference(req["model"], a) > preference(req["model"], b) else "B"
    answer = json.dumps({"reasoning": "fake", "score": 5 if better == "A" else 2, "better_response": better})
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": req["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": USAGE}


class BatchServer(LocalServer):
    """/v1/models, /v1/chat/completions, /v1/files (+ /content) and /v1/batches, all in memory.
    A request whose text holds ``flaky`` fails in the error file the first time it is submitted."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.submissions: list[tuple[str, int]] = []  # (model, lines) per batch created
        self.sync_calls = 0
        self.flaked: set[str] = set()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, payload, status: int = 200, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if raw is not None else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                path = self.path.split("?")[0]
                if path.endswith("/models"):
                    return self._send({"object": "list", "data": [{"id": "judge-a", "object": "model"}]})
                if m := re.fullmatch(r"/v1/files/([\w-]+)/content", path):
                    return self._send(None, raw=server.files[m.group(1)])
                if m := re.fullmatch(r"/v1/batches/([\w-]+)", path):
                    return self._send(server.poll(m.group(1)))
                self._send({"error": {"message": "not found"}}, 404)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/chat/completions":
                    with server.lock:
                        server.sync_calls += 1
                    return self._send(completion(json.loads(body)))
                if self.path == "/v1/files":
                    head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
                    message = BytesParser(policy=email_policy).parsebytes(head + body)
                    parts = {p.get_param("name", header="content-disposition"): p for p in message.iter_parts()}
                    assert parts["purpose"].get_content().strip() == "batch"
                    return self._send(server.add_file(parts["file"].get_payload(decode=True), "bon-batch.jsonl"))
                if self.path == "/v1/batches":
                    return self._send(server.create(json.loads(body)))
                self._send({"error": {"message": "not found"}}, 404)

        self.serve(Handler)

    def add_file(self, data: bytes, name: str) -> dict:
        with self.lock:
            fid = f"file-{len(self.files)}"
            self.files[fid] = data
        return {"id": fid, "object": "file", "bytes": len(data), "created_at": 0, "filename": name, "purpose": "batch"}

    def create(self, req: dict) -> dict:
        assert req["endpoint"] == "/v1/chat/completions" and req["completion_window"] == "24h"
        lines = [json.loads(x) for x in self.files[req["input_file_id"]].decode().splitlines()]
        with self.lock:
            bid = f"batch-{len(self.batches)}"
            self.submissions.append((lines[0]["body"]["model"], len(lines)))
            self.batches[bid] = {"id": bid, "object": "batch", "endpoint": req["endpoint"], "input_file_id": req["input_file_id"],
                                 "completion_window": "24h", "status": "validating", "created_at": 0, "lines": lines}
        return self._public(bid)

    def poll(self, bid: str) -> dict:
        """The first poll finds the job in progress, the second finds it done with its files written."""
        batch = self.batches[bid]
        if batch["status"] == "validating":
            batch["status"] = "in_progress"
        elif batch["status"] == "in_progress":
            out, err = [], []
            for line in batch["lines"]:
                text = json.dumps(line["body"])
                if "flaky" in text and text not in self.flaked:
                    self.flaked.add(text)
                    err.append({"id": "r", "custom_id": line["custom_id"], "response": None,
                                "error": {"code": "server_error", "message": "the model had a hiccup"}})
                    continue
                out.append({"id": "r", "custom_id": line["custom_id"],
                            "response": {"status_code": 200, "request_id": "q", "body": completion(line["body"])}, "error": None})
            batch["output_file_id"] = self.add_file("".join(json.dumps(x) + "\n" for x in out).encode(), "out.jsonl")["id"]
            if err:
                batch["error_file_id"] = self.add_file("".join(json.dumps(x) + "\n" for x in err).encode(), "err.jsonl")["id"]
            batch["status"] = "completed"
        return self._public(bid)

    def _public(self, bid: str) -> dict:
        return {k: v for k, v in self.batches[bid].items() if k != "lines"}

@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-batch-test")
    with BatchServer() as s:
        yield s


def make_judge(server: BatchServer, model: str, batch: bool):
    return registry.create("judge", f"openai-compatible:{model}", name=model, base_url=server.url, api_key_env=KEY_ENV,
                           batch=batch, batch_poll=0.01, price_input=1.25, price_output=10.0, max_retries=1)


def groups(count: int = 2, n: int = 8):
    out = []
    for p in range(count):
        prompt = Prompt(f"p{p}", "reasoning", Content.of(f"question {p}"))
        out.append((prompt, [Candidate(prompt.id, k, "gen", k, Content.of(f"cand-{(k + 3 * p) % n}")) for k in range(n)]))
    return out


def test_knockout_makes_one_batch_per_round_and_the_synchronous_picks(server, tmp_path):
    picks = {}
    for batch in (True, False):
        store = JudgmentStore(tmp_path / f"store-{batch}.sqlite")
        for model in ("judge-a", "judge-b"):
            referee = Referee(make_judge(server, model, batch), store)
            picks[batch, model] = [p.index for p in run_selection(Knockout(), referee, groups())]
            assert referee.stats.calls_made == 2 * 2 * 7 and referee.stats.missing == 0
            if batch:  # half the synchronous price: 1000 in, 200 out at 1.25 / 10 USD per 1M tokens, 28 calls
                assert referee.stats.cost_usd == pytest.approx(28 * 0.00325 * 0.5)
        store.close()
    assert [m for m, _ in server.submissions] == ["judge-a"] * 3 + ["judge-b"] * 3  # 3 rounds: 3 jobs per judge
    assert [lines for _, lines in server.submissions][:3] == [16, 8, 4]  # both orders of 8, 4, 2 matches
    assert server.sync_calls == 2 * 28
    assert picks[True, "judge-a"] == picks[False, "judge-a"] and picks[True, "judge-b"] == picks[False, "judge-b"]
    assert picks[True, "judge-a"] != picks[True, "judge-b"]


def test_a_failed_line_is_transient_and_asked_again_on_rerun(server, tmp_path):
    prompt = Prompt("p", "reasoning", Content.of("question"))
    ok, other, flaky = Content.of("cand-1"), Content.of("cand-3"), Content.of("cand-2 flaky")
    asked = [Comparison(prompt, ok, flaky), Comparison(prompt, flaky, ok), Comparison(prompt, ok, other)]
    store = JudgmentStore(tmp_path / "s.sqlite")
    referee = Referee(make_judge(server, "judge-a", True), store)
    first = referee.ask(asked)
    assert [v.better is None for v in first] == [True, True, False]  # the lines showing the flaky response failed
    assert all(v.transient and "line failed" in v.missing for v in first[:2])
    assert store.count() == 1  # failed lines are not stored: a rerun asks them again
    second = referee.ask(asked)
    assert all(v.better in ("A", "B") for v in second) and store.count() == 3
    assert [lines for _, lines in server.submissions] == [3, 2]
    store.close()
