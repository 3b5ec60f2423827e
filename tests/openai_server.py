"""A tiny OpenAI-compatible chat server on 127.0.0.1 for tests: records every request body, can fail
the first ``fail`` requests with a status (a 503 outage that recovers, optionally asking the client to
retry after ``retry_after_ms``), and answers deterministically."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def boxed_length(body: dict[str, Any]) -> str:
    """A reply that depends only on the request: the length of its text, boxed."""
    content = body["messages"][-1]["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return f"The answer is \\boxed{{{len(text) % 7}}}."


class OpenAIServer:
    def __init__(self, fail: int = 0, status: int = 503, reply: Callable[[dict], str] = boxed_length,
                 message: str = "Service Unavailable", retry_after_ms: int | None = None) -> None:
        self.fail, self.status, self.reply = fail, status, reply
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": []})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    failing = server.fail > 0
                    server.fail -= failing
                if failing:
                    wait = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else None
                    return self._send(server.status, {"error": {"message": message}}, wait)
                choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": server.reply(body)}}
                if body.get("logprobs"):
                    top = [{"token": "Yes", "logprob": math.log(0.7)}, {"token": "No", "logprob": math.log(0.3)}]
                    choice["message"]["content"] = "Yes"
                    choice["logprobs"] = {"content": [{"token": "Yes", "logprob": math.log(0.7), "top_logprobs": top}]}
                self._send(200, {"id": "x", "object": "chat.completion", "model": body.get("model", "m"),
                                 "choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "OpenAIServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
