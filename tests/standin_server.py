"""A stand-in for a vLLM or SGLang server, for the served-judge tests: bon starts it as a real
subprocess in place of the engine's program (``serve: {launcher: [python, tests/standin_server.py, ...]}``)
with the real command line it builds (``serve MODEL --host ... --port ...`` or ``--model-path ...``),
and it serves /health, /v1/models and /v1/chat/completions, answering each judge request with a
verdict that depends only on the request's content (so every replica answers alike).

Its own options come first: ``--record DIR`` writes DIR/<pid>.json (its engine, model, port, parallel
sizes and CUDA_VISIBLE_DEVICES) and a line per request to DIR/<pid>.requests; ``--die-after K
--die-marker FILE`` makes the first replica to receive its K-th request create FILE and kill itself
(SIGKILL, as an OOM kill would) before answering it; replicas started once FILE exists never die.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from openai_server import OpenAIServer  # noqa: E402


def flag(argv: list[str], *names: str) -> str | None:
    for i, word in enumerate(argv[:-1]):
        if word in names:
            return argv[i + 1]
    return None


def verdict(body: dict) -> str:
    """A verdict from a hash of what the judge was shown (rubric, prompt, both responses, images)."""
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
    letter = "A" if digest[0] % 2 else "B"
    score = 4 + digest[1] % 3 if letter == "A" else 1 + digest[1] % 3
    return json.dumps({"reasoning": "stand-in", "score": score, "better_response": letter})


def main(argv: list[str]) -> None:
    record = Path(flag(argv, "--record")) if flag(argv, "--record") else None
    die_after = int(flag(argv, "--die-after") or 0)
    marker = flag(argv, "--die-marker")
    engine = "vllm" if "serve" in argv else "sglang"
    model = argv[argv.index("serve") + 1] if engine == "vllm" else flag(argv, "--model-path")
    served = flag(argv, "--served-model-name") or model
    port = int(flag(argv, "--port") or 8000)
    mortal = bool(die_after and marker and not os.path.exists(marker))
    count, lock = [0], threading.Lock()

    def reply(body: dict) -> str:
        with lock:
            count[0] += 1
            if record is not None:
                with open(record / f"{os.getpid()}.requests", "a") as f:
                    f.write(f"{count[0]}\n")
            if mortal and count[0] >= die_after:
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    pass  # another replica died first
                else:
                    os.kill(os.getpid(), signal.SIGKILL)
        return verdict(body)

    OpenAIServer(reply=reply, models=(served,), port=port)
    if record is not None:
        info = {"pid": os.getpid(), "engine": engine, "model": model, "served": served, "port": port,
                "tensor_parallel": flag(argv, "--tensor-parallel-size", "--tp-size"),
                "data_parallel": flag(argv, "--data-parallel-size", "--dp-size"),
                "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "argv": argv}
        (record / f"{os.getpid()}.json").write_text(json.dumps(info))
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1:])
