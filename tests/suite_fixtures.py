"""Small copies of the four downstream benchmarks, written in each one's real schema.

Column names, types and file layout follow the released datasets (see generators/suites/*.py for
the sources); the rows are made up and the images drawn with PIL. Used by the suite tests and by
``benchmarks/make_tiny_models.py`` (the tiny paper configs read these folders).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from PIL import Image, ImageDraw

GENAI_MODELS = ("DALLE_3", "DeepFloyd_I_XL_v1", "Midjourney_6", "SDXL_2_1", "SDXL_Base", "SDXL_Turbo")

GENAI_ROWS = [
    ("00001", "a red apple on a wooden table", ["Object", "Attribute", "Spatial Relation"], []),
    ("00002", "three cats sitting on a sofa, none of them black", ["Object", "Attribute"], ["Counting", "Negation"]),
    ("00003", 'a shop sign that says "OPEN" above a blue door', ["Object", "Attribute", "Scene"], []),
    ("00004", "the taller of two trees is covered in snow", ["Object", "Scene"], ["Comparison"]),
]

GEDIT_ROWS = [  # key, task_type, English instruction, Chinese instruction, intersection
    ("a1b2c3d4", "color_alter", "Change the car's colour to green", "把车的颜色改成绿色", True),
    ("e5f6a7b8", "subject-remove", "Remove the bird from the branch", "去掉树枝上的鸟", False),
    ("c9d0e1f2", "text_change", 'Change the text on the sign to "SALE"', "把牌子上的字改成SALE", True),
]

EMMA_ROWS = {  # subject -> rows
    "Math": [
        {"pid": "math_1", "question": "How many triangles are in <image_1>?", "options": ["3", "4", "5", "6"], "answer": "C",
         "type": "Multiple Choice", "category": "Pattern Inference", "task": "", "images": 1},
        {"pid": "math_2", "question": "The square in <image_1> has side 3 cm. What is its area in cm^2?", "options": [],
         "answer": "9", "type": "Open-ended", "category": "Geometry", "task": "", "images": 1},
    ],
    "Physics": [
        {"pid": "phy_1", "question": "<image_1> shows a block on a ramp and <image_2> its free-body diagram. "
                                     "Which force is missing?", "options": ["friction", "gravity", "normal force", "tension"],
         "answer": "A", "type": "Multiple Choice", "category": "Force", "task": "", "images": 2,
         "context": "A 2 kg block rests on a rough ramp."},
    ],
    "Chemistry": [
        {"pid": "chem_1", "question": "What is the total charge of the ion drawn in the image?", "options": [],
         "answer": "-2", "type": "Open-ended", "category": "Structure Recognition", "task": "", "images": 1},
    ],
    "Coding": [
        {"pid": "code_1", "question": "Which plot does the code in <image_1> produce?", "options": ["<image_2>", "<image_3>"],
         "answer": "B", "type": "Multiple Choice", "category": "Code Choose Vis", "task": "", "images": 3},
    ],
}


def picture(seed: int, size: tuple[int, int] = (48, 40), text: str | None = None) -> Image.Image:
    im = Image.new("RGB", size, ((seed * 67) % 256, (seed * 131) % 256, (seed * 29 + 80) % 256))
    d = ImageDraw.Draw(im)
    d.rectangle([4, 4, 4 + seed % 20 + 8, 4 + (seed * 3) % 16 + 8], fill=(255 - (seed * 67) % 256, 40, 200))
    if text:
        d.text((2, size[1] // 2), text, fill=(0, 0, 0))
    return im


def png_bytes(im: Image.Image, fmt: str = "PNG") -> bytes:
    import io

    buf = io.BytesIO()
    im.save(buf, format=fmt)
    return buf.getvalue()


# --- GenAI-Bench ----------------------------------------------------------------------------------


def write_genai_bench(folder: Path, layout: str = "current") -> Path:
    """``data/train-00000-of-00001.parquet`` of BaiqiL/GenAI-Bench (current or earlier columns)."""
    import datasets

    folder = Path(folder)
    cols: dict[str, list] = {}
    for n, (pid, prompt, basic, advanced) in enumerate(GENAI_ROWS):
        ratings = {m: [1 + (n + k + j) % 5 for j in range(3)] for k, m in enumerate(GENAI_MODELS)}
        if layout == "current":
            row = {"id": pid, "prompt": prompt, "basic_skills": str(basic), "advanced_skills": str(advanced)}
            row.update({f"{m}_HumanRating": str(r) for m, r in ratings.items()})
        else:
            row = {"Index": int(pid), "Prompt": prompt, "Tags": {"advanced": advanced, "basic": basic}, "HumanRatings": ratings}
        row.update({m: {"bytes": png_bytes(picture(n * 7 + k)), "path": None} for k, m in enumerate(GENAI_MODELS)})
        for key, value in row.items():
            cols.setdefault(key, []).append(value)
    ds = datasets.Dataset.from_dict(cols)
    for m in GENAI_MODELS:
        ds = ds.cast_column(m, datasets.Image())
    out = folder / "data" / "train-00000-of-00001.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    ds.to_parquet(str(out))
    return folder


def write_genai_json(folder: Path) -> Path:
    """t2v_metrics' ``genai_image.json``: ``{"00001": {"id", "prompt", "models": {model: ratings}}}``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = {pid: {"id": pid, "prompt": prompt, "basic_skills": basic, "advanced_skills": advanced,
                  "models": {m: [3, 4, 5] for m in GENAI_MODELS[:2]}}
            for pid, prompt, basic, advanced in GENAI_ROWS}
    path = folder / "genai_image.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- GEdit-Bench -----------------------------------------------------------------------------------


def gedit_dataset():
    import datasets

    cols: dict[str, list] = {k: [] for k in ("task_type", "key", "instruction", "instruction_language", "input_image",
                                             "input_image_raw", "Intersection_exist")}
    for n, (key, task, en, cn, inter) in enumerate(GEDIT_ROWS):
        for lang, text in (("en", en), ("cn", cn)):
            cols["task_type"].append(task)
            cols["key"].append(key)
            cols["instruction"].append(text)
            cols["instruction_language"].append(lang)
            cols["input_image"].append({"bytes": png_bytes(picture(n + 1, (40, 32))), "path": None})
            cols["input_image_raw"].append({"bytes": png_bytes(picture(n + 1, (80, 64))), "path": None})
            cols["Intersection_exist"].append(inter)
    ds = datasets.Dataset.from_dict(cols)
    for c in ("input_image", "input_image_raw"):
        ds = ds.cast_column(c, datasets.Image())
    return ds


def write_gedit_bench(folder: Path, fmt: str = "arrow") -> Path:
    """stepfun-ai/GEdit-Bench: ``train/`` saved with ``save_to_disk`` (Arrow), or one Parquet file."""
    folder = Path(folder)
    ds = gedit_dataset()
    if fmt == "arrow":
        ds.save_to_disk(str(folder / "train"))
    else:
        out = folder / "data" / "train-00000-of-00001.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        ds.to_parquet(str(out))
    return folder


# --- ISG-Bench --------------------------------------------------------------------------------------


def isg_rows() -> list[dict]:
    return [
        {
            "id": "0000", "Category": "Prediction",
            "Query": [{"type": "text", "content": "I will give you a picture of a person washing their hands. Show in 2 images "
                                                  "what happens next, with an overall description first."},
                      {"type": "image", "content": "images/0000_q1.JPG"}],  # case differs from the file, as in the release
            "Golden": [{"type": "text", "content": "The person rinses the soap away."},
                       {"type": "image", "content": "images/0000_g1.jpg"}, {"type": "image", "content": "images/0000_g2.jpg"}],
            "predict": {
                "structural": {"Query": ["<query_text1>", "<query_img1>"], "Answer": ["<gen_text1>", "<gen_img1>", "<gen_img2>"]},
                "block_qa": {"questions": [
                    {"subject": "<gen_text1>", "object": "<query_img1>", "relation": "describes",
                     "Question": "Does <gen_text1> describe what happens after this image?"},
                    {"subject": "<gen_img1>", "object": "<gen_img2>", "relation": "precedes",
                     "Question": "Does <gen_img1> show an earlier moment than <gen_img2>?"}]},
                "image_qa": {"questions": [
                    {"image": "<gen_img1>", "Question": "Are there hands in this image?", "id": 0, "Preliminary": []},
                    {"image": "<gen_img1>", "Question": "Is there soap on the hands?", "id": 1, "Preliminary": [0]},
                    {"image": "<gen_img2>", "Question": "Is there running water?", "id": 2, "Preliminary": []}]},
            },
        },
        {
            "id": "0001", "Category": "HowTo",
            "Query": [{"type": "text", "content": "How do I fold a paper boat? Answer in 3 steps, a picture with each step."}],
            "Golden": [{"type": "text", "content": "Fold the sheet in half."}, {"type": "image", "content": "images/0001_g1.jpg"},
                       {"type": "text", "content": "Fold the corners down."}, {"type": "image", "content": "images/0001_g2.jpg"},
                       {"type": "text", "content": "Open the base into a boat."}, {"type": "image", "content": "images/0001_g3.jpg"}],
            "predict": {"structural": {"Query": ["<query_text1>"], "Answer": ["<gen_text1>", "<gen_img1>", "<gen_text2>",
                                                                               "<gen_img2>", "<gen_text3>", "<gen_img3>"]}},
        },
        {
            "id": "0001", "Category": "Art Style Transfer",  # the same id in another category, as happens in the release
            "Query": [{"type": "text", "content": "Redraw this photo as a watercolour painting."},
                      {"type": "image", "content": "images/0001_q1.png"}],
            "Golden": [{"type": "image", "content": "images/0001_g9.png"}],
            "predict": {"structural": {"Answer": ["<gen_img1>"]}, "image_qa": [
                {"image": "<gen_img1>", "Question": "Is the image a watercolour painting?", "id": 0, "Preliminary": []}]},
        },
    ]


def write_isg_bench(folder: Path, zipped: bool = False) -> Path:
    """``ISG-Bench.jsonl`` with ``images/`` beside it (or ``images.zip``), as in the release."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = isg_rows()
    (folder / "ISG-Bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    images = {"images/0000_q1.jpg": picture(3, (40, 40)), "images/0001_q1.png": picture(5, (36, 30))}
    if zipped:
        with zipfile.ZipFile(folder / "images.zip", "w") as z:
            for name, im in images.items():
                z.writestr(name, png_bytes(im, "JPEG" if name.endswith(".jpg") else "PNG"))
    else:
        for name, im in images.items():
            p = folder / name
            p.parent.mkdir(parents=True, exist_ok=True)
            im.save(p)
    return folder


# --- EMMA ---------------------------------------------------------------------------------------------


def write_emma(folder: Path, subjects: tuple[str, ...] = ("Math", "Physics", "Chemistry", "Coding")) -> Path:
    """``<Subject>/test-00000-of-00001.parquet`` per subject, the columns of luckychao/EMMA."""
    import datasets

    folder = Path(folder)
    for s, subject in enumerate(subjects):
        cols: dict[str, list] = {k: [] for k in ("pid", "question", "options", "answer", *[f"image_{k}" for k in range(1, 6)],
                                                 "solution", "subject", "task", "category", "source", "type", "context")}
        for n, row in enumerate(EMMA_ROWS[subject]):
            cols["pid"].append(row["pid"])
            cols["question"].append(row["question"])
            cols["options"].append(row["options"])
            cols["answer"].append(row["answer"])
            for k in range(1, 6):
                cols[f"image_{k}"].append({"bytes": png_bytes(picture(10 * s + n + k)), "path": None} if k <= row["images"] else None)
            cols["solution"].append("worked solution")
            cols["subject"].append(subject)
            cols["task"].append(row["task"])
            cols["category"].append(row["category"])
            cols["source"].append("made up")
            cols["type"].append(row["type"])
            cols["context"].append(row.get("context", ""))
        feats = datasets.Features({
            "pid": datasets.Value("string"), "question": datasets.Value("string"),
            "options": datasets.Sequence(datasets.Value("string")), "answer": datasets.Value("string"),
            **{f"image_{k}": datasets.Image() for k in range(1, 6)},
            **{k: datasets.Value("string") for k in ("solution", "subject", "task", "category", "source", "type", "context")},
        })
        ds = datasets.Dataset.from_dict(cols, features=feats)
        out = folder / subject / "test-00000-of-00001.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        ds.to_parquet(str(out))
    return folder
