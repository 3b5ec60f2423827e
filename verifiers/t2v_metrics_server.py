"""VQAScore from t2v_metrics in its own environment, answering bon over JSON lines (stdin -> stdout).

t2v_metrics (the official VQAScore code, with the CLIP-FlanT5 models GenAI-Bench uses) pins torch,
transformers and numpy versions that bon's environment does not hold, so bon starts this file with the
Python of a separate environment where ``pip install t2v-metrics`` was run::

    python verifiers/t2v_metrics_server.py --model clip-flant5-xxl [--device cuda]

It imports nothing from bon (only the standard library and t2v_metrics). The protocol, one JSON object
per line:

- first line out: ``{"ready": true, "model": ..., "t2v_metrics": VERSION}`` or ``{"error": REASON}``;
- each request in: ``{"id": N, "images": [PATH, ...], "text": PROMPT, "question": TEMPLATE, "answer": "Yes"}``
  (``question`` with ``{}`` where the prompt goes, as t2v_metrics takes it);
- each reply out: ``{"id": N, "scores": [P(answer) per image]}`` or ``{"id": N, "error": REASON}``.

Anything t2v_metrics prints goes to stderr, so stdout carries only the protocol. End of input ends it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any, TextIO


def load(model: str, device: str) -> tuple[Any, str]:
    """The VQAScore model of t2v_metrics and the package's version."""
    import t2v_metrics

    version = getattr(t2v_metrics, "__version__", None)
    if version is None:
        from importlib import metadata

        try:
            version = metadata.version("t2v-metrics")
        except metadata.PackageNotFoundError:
            version = "unknown"
    return t2v_metrics.VQAScore(model=model, device=device), str(version)


def answer(scorer: Any, request: dict[str, Any]) -> dict[str, Any]:
    """One request's reply: P(answer) for each image, from one t2v_metrics forward pass."""
    images, text = request.get("images"), request.get("text")
    if not isinstance(images, list) or not images or not isinstance(text, str):
        return {"id": request.get("id"), "error": "a request needs images (a list of paths) and text"}
    kwargs = {k: request[k] for k in ("question", "answer") if isinstance(request.get(k), str)}
    kwargs = {("question_template" if k == "question" else "answer_template"): v for k, v in kwargs.items()}
    scores = scorer(images=images, texts=[text], **kwargs)  # an images x texts tensor
    return {"id": request.get("id"), "scores": [float(row[0]) for row in scores.tolist()]}


def serve(scorer: Any, stdin: TextIO, out: TextIO) -> None:
    for line in stdin:
        if not line.strip():
            continue
        request: Any = {}
        try:
            request = json.loads(line)
            with contextlib.redirect_stdout(sys.stderr):
                reply = answer(scorer, request)
        except Exception as exc:  # noqa: BLE001 - every failure is a reply, the process keeps serving
            reason = (str(exc).splitlines() or [""])[0]
            reply = {"id": request.get("id") if isinstance(request, dict) else None,
                     "error": f"{type(exc).__name__}: {reason}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="clip-flant5-xxl")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            scorer, version = load(args.model, args.device)
    except Exception as exc:  # noqa: BLE001 - the reason goes to bon as one line
        out.write(json.dumps({"error": f"cannot load {args.model}: {type(exc).__name__}: {exc}".splitlines()[0]}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ready": True, "model": args.model, "t2v_metrics": version}) + "\n")
    out.flush()
    serve(scorer, sys.stdin, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
