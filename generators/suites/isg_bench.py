"""ISG-Bench (interleaved text-and-image generation): 1,150 queries in 21 categories (8 groups).

Source: the Hugging Face dataset repository ``shuaishuaicdp/ISG-Bench``, files ``ISG-Bench.jsonl`` and
``images.zip`` (the GitHub repository Dongping-Chen/ISG keeps the same JSONL under ``ISG_eval/``, the
images unpacked beside it). One JSONL line per query:

- ``id`` (``"0000"``), ``Category`` (e.g. ``Prediction``, ``HowTo``, ``Art Style Transfer``)
- ``Query``: ``[{"type": "text" | "image", "content": text or image path}]``
- ``Golden``: the human-annotated answer in the same form
- ``predict``: the evaluation's scene graph: ``structural`` (``{"Query": [...], "Answer": ["<gen_text1>",
  "<gen_img1>", ...]}``), ``block_qa`` (``{"questions": [{"subject", "object", "relation", "Question"}]}``),
  ``image_qa`` (questions ``{"image", "Question", "id", "Preliminary"}``, as a list or under one key)

Image paths are relative to the JSONL's folder (``images/0000_q1.jpg``); an extension whose case
differs from the file's is tolerated.

Prompt: ``id`` = the benchmark's id (``<id>_<Category>`` for an id that repeats), ``task``
interleaved, content = the query's text and images in order. Metadata: ``source`` ``isg-bench``,
``benchmark_id``, ``category`` (the ``Category``), ``group`` (one of the 8 groups the ISG paper reports),
``golden`` (``{"structure": ["text", "image", ...], "texts": [...], "parts": [{"type", "content"}]}``, an
image part's content the path of its file; golden images are not copied), ``predict`` (the row's own
graph, read by the ``isg`` verifier's official metric) and ``isg`` (the parts of it bon's own metric reads).

``path`` may be the folder holding ``ISG-Bench.jsonl`` (with ``images/`` or ``images.zip``) or the
JSONL file itself.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

from PIL import Image

from bon.content import Content, Prompt, TextItem, read_jsonl
from bon.errors import BonError
from generators.suites import LazyImage, file_image, first_line, resolve_image_path, select, unique_ids

REPO = "shuaishuaicdp/ISG-Bench"
NAME = "ISG-Bench"
JSONL = "ISG-Bench.jsonl"
# the 8 groups the ISG paper reports, by the JSONL's Category names
GROUPS = {
    "Style Transfer": ("Art Style Transfer", "Scene Attribute Transfer", "Photo Variation", "Portrait Variation"),
    "Progressive Transformation": ("Animation Images", "Animation Text-Image", "Attribute Transfer"),
    "3D Scene": ("3D_object", "multi-Perspective Scene Generation"),
    "Image Decomposition": ("Realistic Object Detection", "Imaginary Object Detection"),
    "Image-Text Complementation": ("HowTo", "Scientific"),
    "Temporal Prediction": ("Prediction", "painting"),
    "Visual Story Telling": ("visual storytelling text-image", "visual storytelling image", "visual storytelling text"),
    "VQA": ("Object_VQA", "Historical"),
}
GROUP_OF = {c: g for g, cats in GROUPS.items() for c in cats}


def build_suite(dataset: str = REPO, path: str | None = None, revision: str | None = None, categories: Any = None,
                groups: Any = None, limit: int | None = None) -> list[Prompt]:
    jsonl, images = _locate(dataset, path, revision)
    rows = [rec for _, rec in read_jsonl(jsonl, torn_tail_ok=False)]
    if not rows:
        raise BonError(f"{jsonl}: no queries")
    ids = unique_ids([str(r.get("id")) for r in rows], [str(r.get("Category")) for r in rows])
    prompts = [to_prompt(r, pid, images, where=f"{jsonl}:{n}") for (n, r), pid in zip(enumerate(rows, 1), ids)]
    if groups is not None:
        wanted = {groups} if isinstance(groups, str) else set(groups)
        unknown = sorted(wanted - set(GROUPS))
        if unknown:
            raise BonError(f"{NAME}: unknown group(s) {', '.join(unknown)} (known: {', '.join(GROUPS)})")
        prompts = [p for p in prompts if p.metadata.get("group") in wanted]
    return select(prompts, categories, limit, NAME)


def to_prompt(row: dict[str, Any], pid: str, images: "ImageSource", where: str) -> Prompt:
    if row.get("id") is None or not isinstance(row.get("Query"), list):
        raise BonError(f"{NAME}: {where} has no id or Query list")
    items: list[Any] = []
    for k, block in enumerate(row["Query"]):
        kind, value = block.get("type"), block.get("content")
        if kind == "text":
            if value:
                items.append(TextItem(str(value)))
        elif kind == "image":
            items.append(images.item(str(value), origin=f"{NAME} {row['id']} query image {k}"))
        else:
            raise BonError(f"{NAME}: {where}: Query[{k}] has unknown type {kind!r}")
    golden = [b for b in row.get("Golden") or [] if b.get("type") in ("text", "image")]
    category = str(row.get("Category"))
    meta: dict[str, Any] = {
        "source": "isg-bench",
        "benchmark_id": str(row["id"]),
        "category": category,
        "group": GROUP_OF.get(category),
        "golden": {"structure": [b["type"] for b in golden], "texts": [str(b.get("content", "")) for b in golden if b["type"] == "text"],
                   "parts": [golden_part(b, images) for b in golden]},
        "predict": row.get("predict"),
    }
    graph = evaluation_graph(row.get("predict"))
    if graph:
        meta["isg"] = graph
    return Prompt(pid, "interleaved", Content(items), meta)


def golden_part(block: dict[str, Any], images: "ImageSource") -> dict[str, str]:
    """A Golden answer part for the official metric's holistic grade: text, or the image's file path
    (the official metric reads it from the folder; images kept only in images.zip are not found)."""
    if block["type"] == "text":
        return {"type": "text", "content": str(block.get("content", ""))}
    rel = str(block.get("content", ""))
    found = resolve_image_path(rel, images.folder)
    return {"type": "image", "content": str(found if found is not None else images.folder / rel)}


def evaluation_graph(predict: Any) -> dict[str, Any]:
    """The parts of ISG's ``predict`` the verifier asks about: structure, block and image questions."""
    if not isinstance(predict, dict):
        return {}
    out: dict[str, Any] = {}
    structural = predict.get("structural")
    if isinstance(structural, dict) and isinstance(structural.get("Answer"), list):
        out["structure"] = [str(t) for t in structural["Answer"]]
    block = predict.get("block_qa")
    questions = block.get("questions") if isinstance(block, dict) else block if isinstance(block, list) else None
    if isinstance(questions, list):
        out["block_qa"] = [q for q in questions if isinstance(q, dict) and q.get("Question")]
    image = predict.get("image_qa")
    if isinstance(image, dict):  # one key holding the list, in the released file
        image = next((v for v in image.values() if isinstance(v, list)), None)
    if isinstance(image, list):
        out["image_qa"] = [q for q in image if isinstance(q, dict) and q.get("Question")]
    return out


# --- files -----------------------------------------------------------------------------------------


class ImageSource:
    """Query images from a folder or from ``images.zip`` (members read on demand)."""

    def __init__(self, folder: Path, archive: Path | None):
        self.folder = folder
        self.archive = archive
        self._members: dict[str, str] | None = None

    def item(self, rel: str, origin: str) -> LazyImage:
        if self.archive is None or resolve_image_path(rel, self.folder) is not None:
            return file_image(rel, self.folder, origin, " (unpack images.zip there)")
        member = self.member(rel)
        if member is None:
            raise BonError(f"{origin}: image {rel} is neither under {self.folder} nor in {self.archive}")
        return LazyImage(fetch=lambda: self._from_zip(member), origin=origin)

    def member(self, rel: str) -> str | None:
        if self._members is None:
            with zipfile.ZipFile(self.archive) as z:
                self._members = {_norm(n): n for n in z.namelist() if not n.endswith("/")}
        key = _norm(rel)
        if key in self._members:
            return self._members[key]
        tail = key.split("/")[-1]  # archives that nest one more folder
        hits = [v for k, v in self._members.items() if k.split("/")[-1] == tail]
        return hits[0] if len(hits) == 1 else None

    def _from_zip(self, member: str) -> Image.Image:
        with zipfile.ZipFile(self.archive) as z:
            data = z.read(member)
        im = Image.open(io.BytesIO(data))
        im.load()
        return im


def _norm(name: str) -> str:
    p = name.replace("\\", "/").lower()
    stem, dot, _ = p.rpartition(".")
    return stem if dot else p


def _locate(dataset: str, path: str | None, revision: str | None) -> tuple[Path, ImageSource]:
    if path is not None:
        p = Path(path).expanduser()
        if not p.exists():
            raise BonError(f"{NAME}: local copy {p} not found")
        jsonl = p if p.is_file() else next((c for c in (p / JSONL, p / "ISG_eval" / JSONL) if c.is_file()), None)
        if jsonl is None:
            found = sorted(p.glob("*.jsonl"))
            if len(found) != 1:
                raise BonError(f"{NAME}: no {JSONL} in {p}")
            jsonl = found[0]
    else:
        jsonl = _download(dataset, revision)
    folder = jsonl.parent
    archive = folder / "images.zip"
    return jsonl, ImageSource(folder, archive if archive.is_file() else None)


def _download(repo: str, revision: str | None) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise BonError(f"{NAME}: reading {repo} needs huggingface_hub (pip install '.[datasets]'), or give path:") from None
    try:
        folder = snapshot_download(repo, repo_type="dataset", revision=revision, allow_patterns=[JSONL, "images.zip"])
    except Exception as exc:  # noqa: BLE001 - offline without a cached copy, a wrong name
        raise BonError(f"{NAME}: cannot fetch {repo} ({first_line(exc)}); on a machine with network run "
                       f"`huggingface-cli download {repo} {JSONL} images.zip --repo-type dataset` (it lands in the "
                       "Hugging Face cache, which offline runs read), or set path: to a folder holding "
                       f"{JSONL} and images/ (or images.zip)") from None
    jsonl = Path(folder) / JSONL
    if not jsonl.is_file():
        raise BonError(f"{NAME}: {repo} has no {JSONL}")
    return jsonl


build_suite.requires = ("huggingface_hub",)  # read from the Hub without path: (bon.preflight)
