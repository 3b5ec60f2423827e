"""Throughput of async judges with fixed latency (target: >= 80% of the ideal concurrency / latency).

    python benchmarks/async_judge.py [--latency 0.05] [--concurrency 32] [--calls 1280]

Two measurements, both through the referee and the judgment store:
- ``engine``: a judge whose every call awaits ``latency`` seconds (no network): what the selection
  engine's batching and the store allow;
- ``http``: the real ``openai-compatible`` judge against a local OpenAI-style server on 127.0.0.1 (in
  its own process) that answers after ``latency`` seconds: adds the HTTP client's CPU per request,
  which on a 2-core machine shared with the server is the limit.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from _common import parser, timed
from bon.content import Content, Prompt
from bon.plugins import PairwiseJudge
from bon.protocol import Comparison, Verdict
from bon.referee import Referee
from bon.store import JudgmentStore
from judges.openai_compatible import OpenAICompatibleJudge

ANSWER = json.dumps({"better_response": "A", "score": 5})


def _server_process(latency: float, port_out) -> None:
    """A small asyncio HTTP/1.1 server (keep-alive) in its own process, so the judge's client is
    what the benchmark measures, not the test server competing for the same core."""
    models = json.dumps({"object": "list", "data": [{"id": "bench", "object": "model"}]}).encode()
    completion = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "bench",
                             "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ANSWER}}],
                             "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next((int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")), 0)
                if length:
                    await reader.readexactly(length)
                body = models
                if lines[0].startswith("POST"):
                    await asyncio.sleep(latency)
                    body = completion
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def serve_forever() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=256)
        port_out.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(serve_forever())


def serve(latency: float):
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    port = ctx.Queue()
    proc = ctx.Process(target=_server_process, args=(latency, port), daemon=True)
    proc.start()
    return proc, port.get(timeout=30)


class SleepJudge(PairwiseJudge):
    """An async judge whose calls each take ``latency`` seconds, ``concurrency`` at a time."""

    name = "sleep"

    def __init__(self, latency: float, concurrency: int):
        self.latency, self.concurrency = latency, concurrency

    def judge(self, comparisons):
        async def run():
            gate = asyncio.Semaphore(self.concurrency)

            async def one(c):
                async with gate:
                    await asyncio.sleep(self.latency)
                    return Verdict("A" if len(c.a.text) >= len(c.b.text) else "B", 4)

            return await asyncio.gather(*(one(c) for c in comparisons))

        return list(asyncio.run(run()))


def measure(judge: PairwiseJudge, calls: int) -> tuple[float, int]:
    prompt = Prompt("p", "t2i", Content.of("a red circle"))
    comps = [Comparison(prompt, Content.of(f"answer {i}"), Content.of(f"other {i}")) for i in range(calls)]
    with tempfile.TemporaryDirectory() as tmp:
        store = JudgmentStore(Path(tmp) / "j.sqlite")
        verdicts, took = timed(Referee(judge, store).ask, comps)
        store.close()
    return calls / took, sum(v.better is not None for v in verdicts)


def main() -> None:
    args = parser(__doc__, latency=0.05, concurrency=32, calls=1280).parse_args()
    ideal = args.concurrency / args.latency
    print(f"{args.calls} calls, concurrency {args.concurrency}, latency {args.latency * 1000:.0f} ms: ideal {ideal:,.0f} calls/s")
    rate, ok = measure(SleepJudge(args.latency, args.concurrency), args.calls)
    print(f"engine (async judge, no network): {rate:,.0f} calls/s = {rate / ideal:.0%} of ideal ({ok} answered; target >= 80%)")
    server, port = serve(args.latency)
    try:
        judge = OpenAICompatibleJudge(model="bench", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None,
                                      concurrency=args.concurrency, max_retries=0)
        rate, ok = measure(judge, args.calls)
    finally:
        server.terminate()
    print(f"http (openai-compatible judge, local server): {rate:,.0f} calls/s = {rate / ideal:.0%} of ideal ({ok} answered)")


if __name__ == "__main__":
    main()
