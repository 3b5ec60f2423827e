"""Every code block of the README that needs no network, GPU or long run works as printed.

``bash`` and ``python`` blocks run in a scratch folder holding a copy of examples/ (``bon`` is this
checkout); ``yaml`` blocks parse to a mapping and every line of a ``jsonl`` block is one JSON object.
Marked blocks (tests/readme_blocks.py) are skipped here; ``demo`` blocks run in tests/test_demo_e2e.py.
"""

from __future__ import annotations

import json

import pytest
import yaml

from readme_blocks import RUNNABLE, Block, readme_blocks, run_block

BLOCKS = readme_blocks()
RUN_HERE = [b for b in BLOCKS if b.lang in RUNNABLE and b.mark is None]


def test_every_block_has_a_known_language_and_the_runnable_ones_are_run():
    assert {b.lang for b in BLOCKS} <= {"bash", "python", "yaml", "jsonl", ""}, [str(b) for b in BLOCKS]
    assert all(b.mark is None for b in BLOCKS if b.lang not in RUNNABLE), "a mark on a block that is never run"
    assert any("bon score" in b.code for b in RUN_HERE)  # the examples/ commands run here
    assert [b for b in BLOCKS if b.mark == "demo" and b.lang == "bash"]  # and the finished-study ones in the demo test


def test_a_mark_is_read_from_the_line_before_the_fence_and_a_bad_one_refused():
    text = "intro\n<!-- readme-test: skip gpu -->\n```bash\nnvidia-smi\n```\n```yaml\na: 1\n```\n"
    assert [(b.line, b.lang, b.mark) for b in readme_blocks(text)] == [(3, "bash", "skip gpu"), (6, "yaml", None)]
    with pytest.raises(ValueError, match="unknown mark"):
        readme_blocks("<!-- readme-test: skip slow -->\n```bash\ntrue\n```\n")


@pytest.mark.parametrize("block", RUN_HERE, ids=str)
def test_a_runnable_block_runs(block: Block, tmp_path):
    run_block(block, tmp_path)


def test_a_failing_block_fails(tmp_path):
    with pytest.raises(AssertionError, match="exit 1"):  # a failing line in the middle fails the block
        run_block(Block(1, "bash", "true\nfalse\necho after\n", None), tmp_path)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "yaml"], ids=str)
def test_a_yaml_block_parses(block: Block):
    assert isinstance(yaml.safe_load(block.code), dict), str(block)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "jsonl"], ids=str)
def test_a_jsonl_block_parses(block: Block):
    assert all(isinstance(json.loads(line), dict) for line in block.code.splitlines() if line.strip()), str(block)


def test_the_genai_example_items_read_without_a_model():
    """The GenAI-Bench example only runs with its model (a marked block); its items are checked here:
    each reads as a prompt with its skill tags and one image (read_item needs no model)."""
    from pathlib import Path

    from bon.content import read_jsonl
    from verifiers.vqascore import VqaScoreVerifier

    folder = Path(__file__).resolve().parents[1] / "examples" / "genai"
    reader = VqaScoreVerifier.__new__(VqaScoreVerifier)  # no grader: read_item reads files only
    rows = [row for _, row in read_jsonl(folder / "items.jsonl")]
    read = [reader.read_item(row, folder) for row in rows]
    assert [p.id for p, _ in read] == [r["id"] for r in rows] and all(len(c.content.images) == 1 for _, c in read)
