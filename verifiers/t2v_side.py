"""The CLIP-FlanT5 back-end of VQAScore: t2v_metrics in a side process, in its own environment.

t2v_metrics pins torch, transformers and numpy versions bon's environment does not hold, so bon runs
:mod:`verifiers.t2v_metrics_server` with the Python of a separate environment (``python``) and asks it
over JSON lines (the protocol is in that module). Spec (the ``grader`` mapping of ``vqascore``)::

    grader: {backend: t2v-metrics, model: clip-flant5-xxl, python: /opt/t2v/bin/python, device: cuda}

``server`` overrides the script bon starts (tests use it for a stand-in). The process starts on the
first question and ends with :meth:`close`; a process that died is a transient failure (a rerun starts
it again), an error reply a final one.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Sequence

from bon.content import ImageItem
from bon.errors import BonError
from bon.lifecycle import LoadFailed
from verifiers._grader import GradingFailed

SERVER = Path(__file__).with_name("t2v_metrics_server.py")
OPTIONS = ("model", "python", "device", "server", "backend")


class T2vMetricsProcess:
    """VQAScore of a t2v_metrics model, asked of a side process (one request per candidate)."""

    backend_name = "t2v-metrics"

    def __init__(self, who: str, model: str = "clip-flant5-xxl", python: str | None = None, device: str = "cuda",
                 server: str | None = None) -> None:
        if not python:
            raise BonError(f"{who}: the t2v-metrics back-end needs python: the interpreter of an environment "
                           "with t2v-metrics installed (see the README)")
        self.who, self.model, self.python, self.device = who, str(model), str(python), str(device)
        self.server = str(server or SERVER)
        self.proc: subprocess.Popen[str] | None = None
        self.version: str | None = None
        self.asked = 0

    @classmethod
    def from_spec(cls, spec: dict[str, Any], who: str) -> "T2vMetricsProcess":
        unknown = sorted(set(spec) - set(OPTIONS))
        if unknown:
            raise BonError(f"{who}: unknown t2v-metrics grader option(s) {', '.join(unknown)} (known: {', '.join(OPTIONS[:-1])})")
        return cls(who, **{k: v for k, v in spec.items() if k != "backend"})

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "model": self.model, "t2v_metrics": self.version, "device": self.device}

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        try:
            self.proc = subprocess.Popen([self.python, self.server, "--model", self.model, "--device", self.device],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        except OSError as exc:
            raise LoadFailed(f"{self.who}: cannot start {self.python} ({exc.strerror or exc})") from None
        hello = self._read()
        if not hello.get("ready"):
            self.close()
            raise LoadFailed(f"{self.who}: the t2v-metrics process did not start: {hello.get('error', hello)}")
        self.version = hello.get("t2v_metrics")
        return self.proc

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline() if self.proc and self.proc.stdout else ""
        if not line:
            code = self.proc.poll() if self.proc else None
            self.proc = None
            raise GradingFailed(f"the t2v-metrics process ended (exit {code})", transient=True)
        try:
            reply = json.loads(line)
        except ValueError:
            raise GradingFailed(f"the t2v-metrics process wrote {line.strip()[:80]!r}, not JSON") from None
        return reply if isinstance(reply, dict) else {"error": f"not a JSON object: {line.strip()[:80]}"}

    def yes_probabilities(self, images: Sequence[ImageItem], text: str, question: str) -> list[float]:
        """P("Yes") per image for ``question`` (``{prompt}`` where the prompt goes) about ``text``."""
        proc = self._start()
        with tempfile.TemporaryDirectory(prefix="bon-t2v-") as tmp:
            try:
                paths = [str(_on_disk(im, Path(tmp) / f"{i}.png")) for i, im in enumerate(images)]
            except BonError as exc:  # an unreadable image: this candidate's score is missing
                raise GradingFailed(str(exc)) from None
            self.asked += 1
            request = {"id": self.asked, "images": paths, "text": text,
                       "question": question.replace("{prompt}", "{}"), "answer": "Yes"}
            try:
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self.proc = None
                raise GradingFailed(f"the t2v-metrics process ended", transient=True) from None
            reply = self._read()
        if "error" in reply or reply.get("id") != self.asked:
            raise GradingFailed(f"t2v-metrics: {reply.get('error') or 'a reply to another request'}")
        scores = reply.get("scores")
        if not isinstance(scores, list) or len(scores) != len(paths) or not all(isinstance(s, (int, float)) for s in scores):
            raise GradingFailed(f"t2v-metrics replied {json.dumps(reply)[:80]}, not one score per image")
        return [float(s) for s in scores]

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.stdin:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout:
                self.proc.stdout.close()
            self.proc = None


def _on_disk(image: ImageItem, fallback: Path) -> Path:
    """The image's own file, or its pixels written to ``fallback`` (t2v_metrics reads paths)."""
    if image.path is not None and Path(image.path).is_file():
        return Path(image.path).resolve()
    image.load().save(fallback, format="PNG")
    return fallback
