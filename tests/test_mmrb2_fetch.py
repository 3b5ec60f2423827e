"""`bon mmrb2 fetch`: hub rows become the official layout; offline, one line says what to do."""

import json

import pytest
from PIL import Image

from analysis.mmrb2 import load_pairs
from analysis.mmrb2_fetch import row_to_pair
from bon.cli import main


def test_row_becomes_official_pair_with_images_in_place(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "input_images").mkdir()
    red, blue = Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "blue")
    row = {
        "pair_id": "src_1/x", "prompt_source": "src", "prompt_text": "<image_0> Make it blue.",
        "prompt_images": [red], "response_a_text": "Step 1 <image_0> done", "response_a_images": [blue],
        "response_b_text": "", "response_b_images": [red], "response_a_model": "m1", "response_b_model": "m2",
        "chosen": "a", "human_annotations": "[6, 5, 6]", "prompt_metadata": '{"category": "recolour"}',
    }
    pair = row_to_pair(row, tmp_path)
    assert pair["prompt_content"] == [["image", "src_1_x_prompt_0.jpg"], ["text", "Make it blue."]]
    assert pair["response_a"]["response_content"] == [["text", "Step 1"], ["image", "src_1_x_a_0.jpg"], ["text", "done"]]
    assert pair["response_b"]["response_content"] == [["image", "src_1_x_b_0.jpg"]]
    assert pair["chosen"] == "A" and pair["human_annotations"] == [6, 5, 6]
    assert pair["prompt_metadata"] == {"category": "recolour"}
    assert (tmp_path / "input_images" / "src_1_x_prompt_0.jpg").exists()
    (tmp_path / "t2i.json").write_text(json.dumps({"pairs": [pair]}))
    assert load_pairs(tmp_path / "t2i.json")[0].chosen == "A"


def test_offline_fetch_is_one_line(tmp_path, monkeypatch, capsys):
    datasets = pytest.importorskip("datasets")

    def offline(*a, **k):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    assert main(["mmrb2", "fetch", "--out", str(tmp_path / "mm")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "rl-research/multimodal-rewardbench-2" in err and "--out DIR" in err
