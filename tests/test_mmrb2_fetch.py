"""`bon mmrb2 fetch`: hub rows become the official layout exactly as MMRB2's own converter
(benchmark/build_from_hf.py) builds it: images in placeholder order whatever their number, saved
losslessly as PNG; `--from` reads a local copy; offline, one line says what to do."""

import json

import numpy as np
import pytest
from PIL import Image

from bon.cli import main
from bon.mmrb2 import load_pairs
from bon.mmrb2.fetch import file_stem, row_to_pair, split_content

COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "white": (255, 255, 255),
           "black": (0, 0, 0), "grey": (128, 128, 128)}


def img(colour: str) -> Image.Image:
    return Image.new("RGB", (6, 4), COLOURS[colour])


def colour_at(path) -> str:
    pixel = Image.open(path).convert("RGB").getpixel((0, 0))
    return next(name for name, rgb in COLOURS.items() if rgb == pixel)


def placed(items, root) -> list:
    """Content with each image replaced by the colour of the file it points to."""
    return [[k, colour_at(root / v) if k == "image" else v] for k, v in items]


@pytest.mark.parametrize("text", [
    "Put <image_0> left of <image_1>.",  # 0-based
    "Put <image_1> left of <image_2>.",  # 1-based (the official release's own numbering varies)
    "Put <image_2> left of <image_1>.",  # out of order: N is ignored, order of appearance counts
    "Put <image_7> left of <image_7>.",  # repeated
])
def test_placeholders_take_images_in_order_of_appearance(tmp_path, text):
    items = split_content(text, [img("red"), img("blue")], tmp_path, "input_images", "p_prompt")
    assert items == [["text", "Put"], ["image", "input_images/p_prompt_0.png"], ["text", "left of"],
                     ["image", "input_images/p_prompt_1.png"], ["text", "."]]
    assert placed(items, tmp_path) == [["text", "Put"], ["image", "red"], ["text", "left of"], ["image", "blue"], ["text", "."]]


def test_unplaced_images_follow_the_official_rules(tmp_path):
    # no placeholder at all: every image is appended after the text
    assert placed(split_content("Two views.", [img("red"), img("blue")], tmp_path, "images", "a"), tmp_path) == [
        ["text", "Two views."], ["image", "red"], ["image", "blue"]]
    # no text: images only
    assert placed(split_content("", [img("green")], tmp_path, "images", "b"), tmp_path) == [["image", "green"]]
    # more images than placeholders: the extra ones are left out; more placeholders than images: dropped
    assert placed(split_content("<image_1> x", [img("red"), img("blue")], tmp_path, "images", "c"), tmp_path) == [
        ["image", "red"], ["text", "x"]]
    assert placed(split_content("<image_1> x <image_2>", [img("red")], tmp_path, "images", "d"), tmp_path) == [
        ["image", "red"], ["text", "x"]]


def test_images_are_saved_losslessly_as_png(tmp_path):
    noise = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    items = split_content("<image_1>", [Image.fromarray(noise)], tmp_path, "images", "n")
    saved = Image.open(tmp_path / items[0][1])
    assert saved.format == "PNG" and np.array_equal(np.asarray(saved), noise)  # JPEG would change pixels


def hub_row(pid: str, chosen: str = "a") -> dict:
    """A row in the hub's schema, placeholders numbered from 1 as in a 1-based release."""
    return {
        "pair_id": pid, "prompt_source": "src", "prompt_text": "Replace <image_1> by <image_2>.",
        "prompt_images": [img("red"), img("green")],
        "response_a_text": "Step one <image_1> step two <image_2>", "response_a_images": [img("blue"), img("white")],
        "response_b_text": "", "response_b_images": [img("red")],
        "response_a_model": "m1", "response_b_model": "m2", "chosen": chosen,
        "human_annotations": "[6, 5, 6]", "prompt_metadata": '{"category": "swap"}',
    }


def test_row_becomes_official_pair_with_images_in_place(tmp_path):
    pair = row_to_pair(hub_row("src_1"), tmp_path, "t2i")
    stem = file_stem("t2i", "src_1")
    assert stem.startswith("src_1_") and len(stem) == len("src_1_") + 12
    assert pair["prompt_content"] == [["text", "Replace"], ["image", f"input_images/{stem}_prompt_0.png"], ["text", "by"],
                                      ["image", f"input_images/{stem}_prompt_1.png"], ["text", "."]]
    assert placed(pair["prompt_content"], tmp_path)[1::2] == [["image", "red"], ["image", "green"]]
    assert placed(pair["response_a"]["response_content"], tmp_path) == [
        ["text", "Step one"], ["image", "blue"], ["text", "step two"], ["image", "white"]]
    assert pair["response_b"]["response_content"] == [["image", f"images/{stem}_b_0.png"]]
    assert pair["chosen"] == "A" and pair["human_annotations"] == [6, 5, 6]
    assert pair["prompt_metadata"] == {"category": "swap"}


def hub_dataset(rows):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({
        **{k: datasets.Value("string") for k in ("pair_id", "prompt_source", "prompt_text", "response_a_text",
                                                  "response_b_text", "response_a_model", "response_b_model", "chosen",
                                                  "human_annotations", "prompt_metadata")},
        **{k: datasets.Sequence(datasets.Image()) for k in ("prompt_images", "response_a_images", "response_b_images")},
    })
    return datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in features}, features=features)


OFFICIAL_T2I = {  # what benchmark/build_from_hf.py writes for hub_row("t2i_1") and its images' colours
    "prompt_content": [["text", "Replace"], ["image", "red"], ["text", "by"], ["image", "green"], ["text", "."]],
    "response_a": [["text", "Step one"], ["image", "blue"], ["text", "step two"], ["image", "white"]],
    "response_b": [["image", "red"]],
}


@pytest.mark.parametrize("layout", ["save_to_disk per config", "save_to_disk of all configs", "parquet folders",
                                    "parquet files"])
def test_fetch_from_local_copy_then_accuracy(tmp_path, layout, capsys):
    datasets = pytest.importorskip("datasets")
    copy = tmp_path / "hub"
    rows = {"t2i": [hub_row("t2i_1"), hub_row("t2i_2", "b")], "edit": [hub_row("edit_1")]}
    if layout == "save_to_disk of all configs":
        datasets.DatasetDict({config: hub_dataset(r) for config, r in rows.items()}).save_to_disk(str(copy))
    for config, config_rows in rows.items():
        data = hub_dataset(config_rows)
        if layout == "save_to_disk per config":
            datasets.DatasetDict({"test": data}).save_to_disk(str(copy / config))
        elif layout == "parquet folders":
            (copy / config).mkdir(parents=True)
            data.to_parquet(str(copy / config / "test-00000-of-00001.parquet"))
        elif layout == "parquet files":
            (copy / "data").mkdir(parents=True, exist_ok=True)
            data.to_parquet(str(copy / "data" / f"{config}-00000-of-00001.parquet"))
    bench = tmp_path / "bench"
    assert main(["mmrb2", "fetch", "--from", str(copy), "--out", str(bench), "--task", "image", "--task", "edit"]) == 0
    assert "t2i: 2 pairs, edit: 1 pairs" in capsys.readouterr().out
    raw = json.loads((bench / "t2i.json").read_text())["pairs"][0]
    stem = file_stem("t2i", "t2i_1")
    assert raw["prompt_content"][1] == ["image", f"input_images/{stem}_prompt_0.png"]
    assert raw["response_a"]["response_content"][1] == ["image", f"images/{stem}_a_0.png"]
    assert placed(raw["prompt_content"], bench) == OFFICIAL_T2I["prompt_content"]
    assert placed(raw["response_a"]["response_content"], bench) == OFFICIAL_T2I["response_a"]
    assert placed(raw["response_b"]["response_content"], bench) == OFFICIAL_T2I["response_b"]
    assert [p.chosen for p in load_pairs(bench / "t2i.json")] == ["A", "B"]
    assert all(Image.open(p).format == "PNG" for p in (bench / "images").iterdir())

    preds = tmp_path / "judge.json"
    answer = {"forward": [{"judgement": "A"}], "reverse": [{"judgement": "B"}]}
    preds.write_text(json.dumps({"t2i_1": answer, "t2i_2": answer}))
    assert main(["mmrb2", "accuracy", "--bench-dir", str(bench), "--predictions", str(preds)]) == 0
    assert "50.00%" in capsys.readouterr().out  # t2i_1 right twice, t2i_2 wrong twice


def test_fetch_from_missing_copy_is_one_line_and_writes_nothing(tmp_path, capsys):
    assert main(["mmrb2", "fetch", "--from", str(tmp_path / "nowhere"), "--out", str(tmp_path / "mm")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nowhere" in err
    assert not (tmp_path / "mm").exists()
    (tmp_path / "empty").mkdir()
    assert main(["mmrb2", "fetch", "--from", str(tmp_path / "empty"), "--out", str(tmp_path / "mm"), "--task", "t2i"]) == 2
    assert "no copy of config 't2i'" in capsys.readouterr().err
    assert not (tmp_path / "mm").exists()


def test_offline_fetch_is_one_line(tmp_path, monkeypatch, capsys):
    datasets = pytest.importorskip("datasets")

    def offline(*a, **k):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    assert main(["mmrb2", "fetch", "--out", str(tmp_path / "mm")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "rl-research/multimodal-rewardbench-2" in err and "--from DIR" in err


# --- names, duplicate ids and image cells: every bad copy is one line naming the pair and field ---------

from crafted_images import NOT_AN_IMAGE, huge_png, png, truncated_png  # noqa: E402

def cell(data: bytes) -> dict:
    """An image cell as the hub's Image feature stores it."""
    return {"bytes": data, "path": None}


def stored_row(pid: str, colour: str = "red", **fields) -> dict:
    row = {"pair_id": pid, "prompt_source": "s", "prompt_text": "Draw <image_1>.", "prompt_images": [cell(png(COLOURS["red"]))],
           "response_a_text": "", "response_a_images": [cell(png(COLOURS[colour]))], "response_b_text": "",
           "response_b_images": [cell(png(COLOURS["blue"]))], "response_a_model": "m1", "response_b_model": "m2",
           "chosen": "A", "human_annotations": "", "prompt_metadata": ""}
    return {**row, **fields}


def parquet_copy(root, rows, config: str = "t2i"):
    """A local copy of the hub layout: ROOT/<config>/test-00000-of-00001.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / config).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), root / config / "test-00000-of-00001.parquet")
    return root


def hashes(root) -> dict:
    import hashlib

    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def fetch_copy(copy, bench, capfd) -> tuple[int, str]:
    rc = main(["mmrb2", "fetch", "--from", str(copy), "--out", str(bench), "--task", "t2i"])
    return rc, capfd.readouterr().err.strip()


def test_ids_that_slug_alike_get_their_own_images(tmp_path, capfd):
    ids = {"x/1": "red", "x_1": "green", ".": "blue", "_.": "white", "X": "black", "x": "grey"}
    assert len({file_stem("t2i", pid) for pid in ids}) == len(ids)
    assert file_stem("t2i", "x") != file_stem("edit", "x")  # one id in two tasks: the images folder is shared
    copy = parquet_copy(tmp_path / "hub", [stored_row(pid, colour) for pid, colour in ids.items()])
    bench = tmp_path / "bench"
    assert fetch_copy(copy, bench, capfd)[0] == 0
    for pair in load_pairs(bench / "t2i.json"):
        assert colour_at(bench / pair.response_a[0][1]) == ids[pair.id]
    names = [p.name for p in (bench / "images").iterdir()]
    assert len(names) == 2 * len(ids) and not any(n.startswith(".") for n in names)


def test_duplicate_pair_id_is_refused_at_fetch_and_undone(tmp_path, capfd):
    copy = parquet_copy(tmp_path / "hub", [stored_row("p1"), stored_row("p2"), stored_row("p1", "green")])
    before = hashes(copy)
    rc, err = fetch_copy(copy, tmp_path / "new", capfd)
    assert rc == 2 and "\n" not in err and "pair_id 'p1' appears twice" in err
    assert not (tmp_path / "new").exists()  # nothing half-written
    existing = tmp_path / "existing"
    existing.mkdir()
    assert fetch_copy(copy, existing, capfd)[0] == 2
    assert not [p for p in existing.rglob("*") if p.is_file()]  # p1's and p2's images removed again
    assert hashes(copy) == before


@pytest.mark.parametrize("field, value, said", [
    ("response_a_images", ["images/x.png"], "image given as a file path"),
    ("response_b_images", [{"bytes": None, "path": "/etc/hostname"}], "image given as a file path"),
    ("prompt_images", [cell(NOT_AN_IMAGE)], "not an image"),
    ("response_a_images", [cell(truncated_png())], "truncated"),
    ("response_b_images", [cell(huge_png(20000, 20000))], "exceeds the limit of 50000000 pixels"),
    ("response_a_images", [cell(huge_png(10000, 10000))], "image of 10000x10000 pixels exceeds the limit"),
    ("prompt_text", 7, "prompt_text must be text"),
    ("response_b_images", "abc", "response_b_images must be a list"),
    ("chosen", "C", '"chosen" must be "A" or "B"'),
])
def test_bad_image_cells_are_one_line_naming_pair_and_field(tmp_path, capfd, field, value, said):
    copy = parquet_copy(tmp_path / "hub", [stored_row("bad", **{field: value})])
    before = hashes(copy)
    rc, err = fetch_copy(copy, tmp_path / "bench", capfd)
    assert rc == 2 and "\n" not in err and err.startswith("bon: error: ")  # no DecompressionBomb warning either
    assert said in err and "pair bad" in err
    assert field in err or field == "chosen"
    assert not (tmp_path / "bench").exists() and hashes(copy) == before


def test_pixel_limit_is_configurable(tmp_path, capfd, monkeypatch):
    copy = parquet_copy(tmp_path / "hub", [stored_row("p1")])
    monkeypatch.setenv("BON_MAX_IMAGE_PIXELS", "20")  # the 6x4 test images have 24
    rc, err = fetch_copy(copy, tmp_path / "bench", capfd)
    assert rc == 2 and "image of 6x4 pixels exceeds the limit of 20 pixels" in err and "BON_MAX_IMAGE_PIXELS" in err
    monkeypatch.setenv("BON_MAX_IMAGE_PIXELS", "lots")
    rc, err = fetch_copy(copy, tmp_path / "bench", capfd)
    assert rc == 2 and "\n" not in err and "BON_MAX_IMAGE_PIXELS: expected a positive whole number" in err
    monkeypatch.setenv("BON_MAX_IMAGE_PIXELS", "24")
    assert fetch_copy(copy, tmp_path / "bench", capfd)[0] == 0


def test_symlink_out_of_the_copy_is_refused(tmp_path, capfd):
    outside = parquet_copy(tmp_path / "elsewhere", [stored_row("p1")])
    copy = tmp_path / "hub"
    (copy / "t2i").mkdir(parents=True)
    (copy / "t2i" / "test-00000-of-00001.parquet").symlink_to(outside / "t2i" / "test-00000-of-00001.parquet")
    rc, err = fetch_copy(copy, tmp_path / "bench", capfd)
    assert rc == 2 and "\n" not in err and "leads out of" in err and "test-00000-of-00001.parquet" in err
    assert not (tmp_path / "bench").exists()
