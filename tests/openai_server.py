"""A tiny OpenAI-compatible chat server on 127.0.0.1 for tests: records every request body, can fail
the first ``fail`` requests with a status (a 503 outage that recovers, optionally asking the client to
retry after ``retry_after_ms``), and answers deterministically."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 for one test (its ``url`` ends in ``/v1``); stops on close or
    at the end of a ``with`` block: ``with LocalServer().serve(Handler) as server``, or a subclass that
    keeps state builds its handler and calls :meth:`serve`."""

    def serve(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> "LocalServer":
        class Httpd(ThreadingHTTPServer):
            request_queue_size = 64  # the default backlog of 5 drops connections under concurrent load
            daemon_threads = True

        self.httpd = Httpd(("127.0.0.1", port), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def boxed_length(body: dict[str, Any]) -> str:
    """A reply that depends only on the request: the length of its text, boxed."""
    content = body["messages"][-1]["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return f"The answer is \\boxed{{{len(text) % 7}}}."


class OpenAIServer(LocalServer):
    def __init__(self, fail: int = 0, status: int = 503, reply: Callable[[dict], str] = boxed_length,
                 message: str = "Service Unavailable", retry_after_ms: int | None = None, models: tuple[str, ...] = (),
                 port: int = 0) -> None:
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

            def do_GET(self) -> None:  # /v1/models (with ``models``), and a health check's 200 on any path
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})

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

        self.serve(Handler, port)
