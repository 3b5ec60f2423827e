"""Shared fixtures: small content and a judge that follows a known total order."""

from __future__ import annotations

import os
from typing import Sequence

import pytest

os.environ.setdefault("BON_QUIET", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# The suite never reaches the Hugging Face hub. huggingface_hub reads these once, when it is first imported
# (by whichever test imports diffusers, transformers or datasets first), so they are set here, before any
# test: a test's own setenv comes too late, and a dry run that reads a hub model's config would otherwise
# try the network, retrying with backoff (seconds per test on a machine without it, or a download with it).
for _offline in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_offline] = "1"

from bon.content import Content, Prompt  # noqa: E402
from bon.plugins import PairwiseJudge  # noqa: E402
from bon.protocol import Comparison, Verdict  # noqa: E402


class OrderJudge(PairwiseJudge):
    """Prefers the response whose text is the larger number: a judge with a known total order."""

    name = "order"

    def __init__(self, template: str = "v1", fail_on: str | None = None):
        self.template = template
        self.fail_on = fail_on
        self.calls = 0
        self.batches: list[int] = []

    def identity(self) -> dict:
        return {"name": self.name, "template": self.template}

    def judge(self, comparisons: Sequence[Comparison]) -> list[Verdict]:
        self.batches.append(len(comparisons))
        out = []
        for c in comparisons:
            self.calls += 1
            if self.fail_on is not None and self.fail_on in (c.a.text, c.b.text):
                out.append(Verdict.failed("unparseable answer: 'maybe'"))
                continue
            a, b = float(c.a.text), float(c.b.text)
            out.append(Verdict("A", 5) if a > b else Verdict("B", 2))
        return out


@pytest.fixture
def order_judge() -> OrderJudge:
    return OrderJudge()


@pytest.fixture
def number_prompt() -> Prompt:
    return Prompt("p0", "t2i", Content.of("pick the largest number"))
