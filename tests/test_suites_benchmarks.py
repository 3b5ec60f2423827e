"""Benchmark suites load small copies written in each benchmark's real schema and keep the benchmark's
ids, categories and reference answers; offline, a suite that needs a download fails in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

os.environ["HF_DATASETS_OFFLINE"] = "1"  # before datasets / huggingface_hub read them at import
os.environ["HF_HUB_OFFLINE"] = "1"
pytest.importorskip("datasets")

from PIL import Image  # noqa: E402

import suite_fixtures as F  # noqa: E402
from bon import suites  # noqa: E402
from bon.config import parse_config  # noqa: E402
from bon.content import ImageItem, TextItem, load_prompts  # noqa: E402
from bon.errors import BonError  # noqa: E402
from bon.runfolder import RunFolder  # noqa: E402
from bon.stages.prompts import prepare_prompts, split  # noqa: E402
from generators.suites import emma, gedit_bench, genai_bench, isg_bench, jsonl  # noqa: E402


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("benchmarks")
    F.write_genai_bench(root / "genai")
    F.write_genai_bench(root / "genai_old", layout="earlier")
    F.write_genai_json(root / "genai_json")
    F.write_gedit_bench(root / "gedit")
    F.write_gedit_bench(root / "gedit_parquet", fmt="parquet")
    F.write_isg_bench(root / "isg")
    F.write_isg_bench(root / "isg_zip", zipped=True)
    F.write_emma(root / "emma")
    return root


def kinds(p) -> list[str]:
    return [it.kind for it in p.content]


# --- GenAI-Bench ------------------------------------------------------------------------------------


def test_genai_bench_current_schema(copies):
    ps = genai_bench.build_suite(path=str(copies / "genai"))
    assert [p.id for p in ps] == ["00001", "00002", "00003", "00004"]
    assert all(p.task == "t2i" and kinds(p) == ["text"] for p in ps)
    two = ps[1]
    assert two.content.text == "three cats sitting on a sofa, none of them black"
    assert two.metadata["category"] == "advanced" and ps[0].metadata["category"] == "basic"
    assert two.metadata["skills"] == {"basic": ["Object", "Attribute"], "advanced": ["Counting", "Negation"]}
    assert two.metadata["benchmark_id"] == "00002" and two.metadata["source"] == "genai-bench"
    ratings = two.metadata["human_ratings"]
    assert set(ratings) == set(F.GENAI_MODELS) and all(len(v) == 3 and all(1 <= x <= 5 for x in v) for v in ratings.values())


def test_genai_bench_earlier_schema_and_t2v_metrics_json(copies):
    old = genai_bench.build_suite(path=str(copies / "genai_old"))
    assert [p.id for p in old] == ["1", "2", "3", "4"]  # the integer Index of that layout
    assert old[1].metadata["skills"]["advanced"] == ["Counting", "Negation"] and len(old[1].metadata["human_ratings"]) == 6
    js = genai_bench.build_suite(path=str(copies / "genai_json" / "genai_image.json"))
    assert [p.id for p in js] == ["00001", "00002", "00003", "00004"]
    assert js[2].metadata["human_ratings"] == {"DALLE_3": [3.0, 4.0, 5.0], "DeepFloyd_I_XL_v1": [3.0, 4.0, 5.0]}


def test_genai_bench_filters(copies):
    adv = genai_bench.build_suite(path=str(copies / "genai"), categories=["advanced"])
    assert [p.id for p in adv] == ["00002", "00004"]
    assert [p.id for p in genai_bench.build_suite(path=str(copies / "genai"), limit=1)] == ["00001"]
    with pytest.raises(BonError, match=r"unknown category expert \(known: advanced, basic\)"):
        genai_bench.build_suite(path=str(copies / "genai"), categories="expert")


@pytest.mark.parametrize("value, expected", [("['Object', 'Scene']", ["Object", "Scene"]), ('["Counting"]', ["Counting"]),
                                             ("Object, Spatial Relation", ["Object", "Spatial Relation"]), ("", []),
                                             ("[]", []), (None, []), (["A", " B "], ["A", "B"])])
def test_skill_strings(value, expected):
    assert genai_bench.parse_list(value) == expected


def test_offline_without_a_copy_is_one_line_naming_what_to_fetch(monkeypatch):
    import datasets.config
    import huggingface_hub.constants

    # offline even when another test module imported these before the variables were set
    for module in (datasets.config, huggingface_hub.constants):
        monkeypatch.setattr(module, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    with pytest.raises(BonError) as err:
        genai_bench.build_suite(dataset="bon-tests/no-such-dataset")
    msg = str(err.value)
    assert "\n" not in msg and "huggingface-cli download bon-tests/no-such-dataset --repo-type dataset" in msg
    assert "path:" in msg
    with pytest.raises(BonError) as err:
        isg_bench.build_suite(dataset="bon-tests/no-such-isg")
    assert "\n" not in str(err.value) and "ISG-Bench.jsonl images.zip" in str(err.value)
    with pytest.raises(BonError, match="local copy .* not found"):
        emma.build_suite(path="/nonexistent/emma/file.parquet")


# --- GEdit-Bench --------------------------------------------------------------------------------------


@pytest.mark.parametrize("copy", ["gedit", "gedit_parquet"])
def test_gedit_bench_english_edits(copies, copy):
    ps = gedit_bench.build_suite(path=str(copies / copy))
    assert [p.id for p in ps] == ["a1b2c3d4", "e5f6a7b8", "c9d0e1f2"]
    p = ps[0]
    assert p.task == "edit" and kinds(p) == ["text", "image"]
    assert p.content.text == "Change the car's colour to green"
    assert p.metadata == {"source": "gedit-bench", "benchmark_id": "a1b2c3d4", "category": "color_alter",
                          "language": "en", "intersection_exist": True}
    assert p.content.images[0].load().size == (40, 32)  # input_image, read when needed
    assert ps[1].metadata["intersection_exist"] is False


def test_gedit_bench_languages_raw_images_and_categories(copies):
    both = gedit_bench.build_suite(path=str(copies / "gedit"), language="all")
    assert len(both) == 6 and {p.id for p in both} >= {"a1b2c3d4_en", "a1b2c3d4_cn"}
    cn = gedit_bench.build_suite(path=str(copies / "gedit"), language="cn", categories=["text_change"])
    assert [p.content.text for p in cn] == ["把牌子上的字改成SALE"]
    raw = gedit_bench.build_suite(path=str(copies / "gedit"), raw_image=True, limit=1)
    assert raw[0].content.images[0].load().size == (80, 64)
    with pytest.raises(BonError, match="language must be en, cn or all"):
        gedit_bench.build_suite(path=str(copies / "gedit"), language="fr")


# --- ISG-Bench ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("copy", ["isg", "isg_zip"])
def test_isg_bench_queries_golden_and_graph(copies, copy):
    ps = isg_bench.build_suite(path=str(copies / copy))
    # id 0001 is used by two categories: both keep it, disambiguated by category
    assert [p.id for p in ps] == ["0000", "0001_HowTo", "0001_Art Style Transfer"]
    p = ps[0]
    assert p.task == "interleaved" and kinds(p) == ["text", "image"]
    assert p.content.images[0].load().size == (40, 40)  # 0000_q1.JPG in the JSONL, 0000_q1.jpg on disk
    assert p.metadata["category"] == "Prediction" and p.metadata["group"] == "Temporal Prediction"
    assert p.metadata["benchmark_id"] == "0000"
    golden = p.metadata["golden"]
    assert {k: golden[k] for k in ("structure", "texts")} == {"structure": ["text", "image", "image"], "texts": ["The person rinses the soap away."]}
    # the official metric's holistic grade shows the Golden answer: its parts, images by file path
    assert [g["type"] for g in golden["parts"]] == golden["structure"] and golden["parts"][0]["content"] == "The person rinses the soap away."
    assert golden["parts"][1]["content"].endswith("0000_g1.jpg") and p.metadata["predict"]["block_qa"]["questions"]
    graph = p.metadata["isg"]
    assert graph["structure"] == ["<gen_text1>", "<gen_img1>", "<gen_img2>"]
    assert len(graph["block_qa"]) == 2 and [q["id"] for q in graph["image_qa"]] == [0, 1, 2]
    assert ps[2].metadata["isg"]["image_qa"][0]["Question"].startswith("Is the image a watercolour")  # a bare list


def test_isg_bench_filters_and_jsonl_path(copies):
    by_group = isg_bench.build_suite(path=str(copies / "isg"), groups=["Style Transfer"])
    assert [p.metadata["category"] for p in by_group] == ["Art Style Transfer"]
    one = isg_bench.build_suite(path=str(copies / "isg" / "ISG-Bench.jsonl"), categories="HowTo")
    assert one[0].metadata["golden"]["structure"] == ["text", "image"] * 3
    with pytest.raises(BonError, match="unknown group"):
        isg_bench.build_suite(path=str(copies / "isg"), groups="Cooking")


def test_isg_bench_missing_image_names_it(tmp_path):
    folder = F.write_isg_bench(tmp_path / "isg")
    (folder / "images" / "0001_q1.png").unlink()
    with pytest.raises(BonError, match="image file images/0001_q1.png not found"):
        isg_bench.build_suite(path=str(folder))


# --- EMMA -------------------------------------------------------------------------------------------


def test_emma_problems_images_options_and_answers(copies):
    """The text as EMMA's build_query lays it out (context, question, option lines), images where the
    text names them, the pieces between them kept as they are (as EMMA's model wrappers send them)."""
    ps = emma.build_suite(path=str(copies / "emma"))
    assert [p.id for p in ps] == ["math_1", "math_2", "phy_1", "chem_1", "code_1"]
    m1 = {p.id: p for p in ps}["math_1"]
    assert m1.task == "reasoning" and kinds(m1) == ["text", "image", "text"]
    assert m1.content.items[0].text == "How many triangles are in "
    assert m1.content.items[-1].text == "?\nA: 3\nB: 4\nC: 5\nD: 6"
    meta = m1.metadata
    assert meta["answer"] == "C" and meta["answer_text"] == "5" and meta["type"] == "Multiple Choice"
    assert meta["options"] == ["3", "4", "5", "6"] and meta["subject"] == "Math" and meta["category"] == "Pattern Inference"
    phy = {p.id: p for p in ps}["phy_1"]
    assert kinds(phy)[:4] == ["text", "image", "text", "image"]  # the context first, then two images in place
    assert phy.content.items[0].text == "A 2 kg block rests on a rough ramp.\n" and phy.metadata["context"].startswith("A 2 kg")
    chem = {p.id: p for p in ps}["chem_1"]
    assert kinds(chem) == ["text"] and chem.metadata["unshown_images"] == [1]  # its text names no image: none sent
    assert chem.metadata["type"] == "Open-ended" and chem.metadata["answer"] == "-2"
    code = {p.id: p for p in ps}["code_1"]
    assert kinds(code) == ["text", "image", "text", "image", "text", "image"]  # options that are images
    assert code.content.items[2].text == " produce?\nA: " and code.content.items[4].text == "\nB: "


def test_emma_official_prompt_config(copies, tmp_path):
    """With a checkout's configs/gpt.yaml (here a stand-in in our own words) the official templates and
    the strategy's instruction give the text; a config without them is one line."""
    config = tmp_path / "gpt.yaml"
    config.write_text(yaml.safe_dump({
        "Strategy_Instruction": {"CoT": " Think first.", "Directly": " Reply briefly."},
        "multi_choice_format": "{context}|{question}|{options}|Pick a letter.",
        "open_ended_format": "{context}|{question}|Give a value."}), encoding="utf-8")
    ps = {p.id: p for p in emma.build_suite(path=str(copies / "emma"), prompt_config=str(config))}
    assert ps["math_2"].content.items[0].text == "|The square in "
    assert ps["math_2"].content.items[-1].text == " has side 3 cm. What is its area in cm^2?|Give a value. Think first."
    direct = {p.id: p for p in emma.build_suite(path=str(copies / "emma"), prompt_config=str(config), strategy="Direct")}
    assert direct["math_1"].content.items[-1].text == "?|A: 3\nB: 4\nC: 5\nD: 6\n|Pick a letter. Reply briefly."
    with pytest.raises(BonError, match="strategy must be CoT or Direct"):
        emma.build_suite(path=str(copies / "emma"), strategy="Fast")
    config.write_text("multi_choice_format: x\n", encoding="utf-8")
    with pytest.raises(BonError, match="expected multi_choice_format, open_ended_format"):
        emma.build_suite(path=str(copies / "emma"), prompt_config=str(config))


def test_emma_subjects_and_limit(copies):
    ps = emma.build_suite(path=str(copies / "emma"), subjects=["Physics", "Coding"])
    assert [p.id for p in ps] == ["phy_1", "code_1"]
    assert [p.id for p in emma.build_suite(path=str(copies / "emma"), subjects="Math", limit=1)] == ["math_1"]
    one_file = emma.build_suite(path=str(copies / "emma" / "Chemistry" / "test-00000-of-00001.parquet"))
    assert [p.id for p in one_file] == ["chem_1"]
    with pytest.raises(BonError, match="unknown subject"):
        emma.build_suite(path=str(copies / "emma"), subjects=["Biology"])


# --- users' own prompts -------------------------------------------------------------------------------


def test_prompts_jsonl_plain_and_bon_forms(tmp_path):
    Image.new("RGB", (10, 8), "red").save(tmp_path / "cat.png")
    lines = [
        {"id": "p1", "prompt": 'a sign that says "OPEN"', "category": "text"},
        {"id": "p2", "task": "edit", "prompt": "remove the cat", "images": ["cat.png"]},
        {"id": "p3", "task": "reasoning", "content": [["text", "How many?"], ["image", "cat.png"]], "metadata": {"answer": "1"}},
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    ps = jsonl.build_suite(path=str(path), task="t2i")
    assert [(p.id, p.task) for p in ps] == [("p1", "t2i"), ("p2", "edit"), ("p3", "reasoning")]
    assert ps[0].metadata == {"category": "text"} and ps[2].metadata == {"answer": "1"}
    assert ps[1].content.images[0].load().size == (10, 8)
    path.write_text(json.dumps({"id": "x", "prompt": "hi", "images": ["gone.png"]}) + "\n")
    with pytest.raises(BonError, match="mine.jsonl:1 image 0: image file gone.png not found"):
        jsonl.build_suite(path=str(path), task="edit")
    path.write_text(json.dumps({"id": "x", "prompt": "hi"}) + "\n")
    with pytest.raises(BonError, match="lacks task"):
        jsonl.build_suite(path=str(path))


# --- through the study's prompt stage -----------------------------------------------------------------


@pytest.mark.parametrize("spec, task, first", [
    ({"name": "gedit-bench", "limit": 2}, "edit", "a1b2c3d4"),
    ({"name": "isg-bench"}, "interleaved", "0000"),
    ({"name": "emma", "subjects": ["Math"]}, "reasoning", "math_1"),
    ({"name": "genai-bench"}, "t2i", "00001"),
])
def test_suites_feed_the_study_prompt_stage(copies, tmp_path, spec, task, first):
    folder = {"gedit-bench": "gedit", "isg-bench": "isg", "emma": "emma", "genai-bench": "genai"}[spec["name"]]
    cfg = parse_config({"out": str(tmp_path / "run"), "tasks": [task], "suite": {**spec, "path": str(copies / folder)},
                        "generators": ["synthetic"], "judges": ["random"]}, where="test")
    run = RunFolder(cfg.out)
    prompts = prepare_prompts(run, cfg)
    bon_prompts, pref = split(prompts)
    assert pref == [] and bon_prompts[0].id == first and all(p.task == task for p in prompts)
    for p in prompts:  # images now live inside the run folder, and read back the same
        for im in p.content.images:
            assert Path(im.path).resolve().is_relative_to(run.root.resolve())
    again = load_prompts(run.prompts)
    assert [p.metadata for p in again] == [p.metadata for p in prompts]
    assert suites.build({**spec, "path": str(copies / folder)}, ["t2i"], 0) == [] or task == "t2i"


def test_lazy_images_decode_on_demand_and_hold_no_pixels(copies):
    p = gedit_bench.build_suite(path=str(copies / "gedit"), limit=1)[0]
    item = p.content.images[0]
    assert isinstance(item, ImageItem) and item.path is None
    item.load()
    assert item._image is None  # not kept
    assert isinstance(p.content.items[0], TextItem)
