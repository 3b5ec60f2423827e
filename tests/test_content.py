import json

import numpy as np
import pytest
from PIL import Image

from bon.content import (Candidate, Content, ImageItem, Prompt, append_jsonl, decode_images, load_candidates, load_prompts,
                         read_jsonl)
from bon.errors import BonError


def _image(colour) -> Image.Image:
    return Image.new("RGB", (16, 16), colour)


def test_content_round_trip_through_jsonl(tmp_path):
    prompt = Prompt("e-1", "edit", Content.of(_image((255, 0, 0)), "make it blue"), {"category": "recolour"})
    cand = Candidate("e-1", 3, "gen", 42, Content.of("step", _image((0, 0, 255)), "done"), {"seed": 42})
    append_jsonl(tmp_path / "prompts.jsonl", [prompt.to_json(tmp_path, tmp_path / "inputs")])
    append_jsonl(tmp_path / "c.jsonl", [cand.to_json(tmp_path, tmp_path / "images")])

    raw = json.loads((tmp_path / "prompts.jsonl").read_text())
    assert raw["content"][0][0] == "image" and not raw["content"][0][1].startswith("/")
    assert raw["content"][1] == ["text", "make it blue"]

    [p2] = load_prompts(tmp_path / "prompts.jsonl")
    [c2] = load_candidates(tmp_path / "c.jsonl")
    assert (p2.id, p2.task, p2.metadata) == ("e-1", "edit", {"category": "recolour"})
    assert p2.content.digest == prompt.content.digest
    assert c2.key == ("gen", "e-1", 3) and c2.seed == 42 and c2.provenance == {"seed": 42}
    assert c2.content.digest == cand.content.digest
    assert [type(i).__name__ for i in c2.content] == ["TextItem", "ImageItem", "TextItem"]
    assert np.array_equal(np.asarray(c2.content.images[0].load()), np.asarray(_image((0, 0, 255))))


def test_digest_depends_on_pixels_not_file_name(tmp_path):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    _image((1, 2, 3)).save(a)
    _image((1, 2, 3)).save(b)
    assert ImageItem(a).digest == ImageItem(b).digest
    _image((1, 2, 4)).save(b)
    assert ImageItem(a).digest != ImageItem(path=b).digest
    assert Content.of("x").digest != Content.of("y").digest


def test_bad_content_is_a_one_line_error(tmp_path):
    with pytest.raises(BonError, match="escapes its folder"):
        Content.from_json([["image", "../secret.png"]], tmp_path)
    with pytest.raises(BonError, match="unknown content kind 'video'"):
        Content.from_json([["video", "x.mp4"]], tmp_path)
    with pytest.raises(BonError, match="missing.png: image file not found"):
        ImageItem(tmp_path / "missing.png").load()
    with pytest.raises(BonError, match="unknown task 'video'"):
        Prompt("p", "video", Content.of("x"))


def test_torn_last_line_is_skipped_and_repaired(tmp_path):
    path = tmp_path / "x.jsonl"
    append_jsonl(path, [{"a": 1}])
    with path.open("a") as fh:
        fh.write('{"a": 2, "b"')  # a killed writer
    assert [r for _, r in read_jsonl(path)] == [{"a": 1}]
    append_jsonl(path, [{"a": 3}])
    assert [r for _, r in read_jsonl(path)] == [{"a": 1}, {"a": 3}]


def test_user_files_refuse_a_torn_last_line(tmp_path):
    path = tmp_path / "suite.jsonl"
    path.write_text('\ufeff{"a": 1}\n{"a": 2, "b"', encoding="utf-8")
    assert [r for _, r in read_jsonl(path)] == [{"a": 1}]  # bon's own files: an interrupted append
    with pytest.raises(BonError, match="suite.jsonl:2: not valid JSON"):
        list(read_jsonl(path, torn_tail_ok=False))


def test_decode_once_keeps_digests_caches_pixels_and_leaves_a_missing_file_to_the_judge(tmp_path):
    from bon.study import decode_once

    _image((1, 2, 3)).save(tmp_path / "a.png")
    good, gone = ImageItem(tmp_path / "a.png"), ImageItem(tmp_path / "gone.png")
    cands = [Candidate("p1", i, "g", 0, Content([item])) for i, item in enumerate((good, gone))]
    decode_once({"g": {"p1": cands}})  # no error for the missing file
    assert good._image is None and good._digest == ImageItem(tmp_path / "a.png").digest  # the item: path and digest
    assert good.load() is ImageItem(tmp_path / "a.png").load()  # the pixels: one copy, in the cache
    with pytest.raises(BonError, match="not found"):
        gone.load()  # the judge that reads it reports it, as before


def test_decode_images_keeps_digests_and_leaves_failures_to_the_reader(tmp_path):
    paths = []
    for k in range(5):
        paths.append(tmp_path / f"{k}.png")
        Image.new("RGB", (4 + k, 3), (k, 2 * k, 3 * k)).save(paths[-1])
    (tmp_path / "bad.png").write_bytes(b"not a png")
    for threads in (1, 3):
        items = [ImageItem(path=p) for p in [*paths, tmp_path / "bad.png", tmp_path / "absent.png"]]
        assert decode_images(items, threads) == [True] * 5 + [False, False]
        fresh = [ImageItem(path=p) for p in paths]
        assert [it.digest for it in items[:5]] == [it.digest for it in fresh]
        assert all(it._image is None and it._digest for it in items[:5])


@pytest.mark.parametrize("side", [16, 300])
def test_png_files_keep_every_pixel_and_are_deflated(tmp_path, side):
    """The PNG writer's file decodes to the same pixels, so the digest recorded when it was written is the one
    a reader hashes; and it is deflated (a flat picture shrinks far below its raw size: disk matters at a
    study's size)."""
    from bon.content import pixel_digest, save_png

    rng = np.random.default_rng(side)
    image = Image.fromarray(rng.integers(0, 256, size=(side, side, 3), dtype=np.uint8), "RGB")
    save_png(image, tmp_path / "x.png")
    with Image.open(tmp_path / "x.png") as back:
        assert back.mode == "RGB" and back.tobytes() == image.tobytes()
    assert ImageItem(tmp_path / "x.png").digest == pixel_digest(image)
    flat = Image.new("RGB", (side, side), (9, 9, 9))
    save_png(flat, tmp_path / "flat.png")  # a flat picture shrinks only when deflated
    assert (tmp_path / "flat.png").stat().st_size < side * side


def test_path_checks_resolve_the_last_name_as_the_system_does(tmp_path, monkeypatch):
    """`resolved` (a folder resolved once, the last name looked at each time) gives Path.resolve's answer for
    a file, a missing file, a '..', a relative path and a link; a link as the last name out of the run's
    folder is refused however often its folder was seen before."""
    from bon.content import inside, relative_path, resolved, safe_join

    run, outside = tmp_path / "run", tmp_path / "elsewhere"
    (run / "images").mkdir(parents=True)
    outside.mkdir()
    (run / "images" / "a.png").write_bytes(b"x")
    (outside / "secret.png").write_bytes(b"y")
    (run / "images" / "link.png").symlink_to(outside / "secret.png")
    (run / "images" / "inner.png").symlink_to(run / "images" / "a.png")
    monkeypatch.chdir(tmp_path)
    for path in [run / "images" / "a.png", run / "images" / "missing.png", run / "images" / "..", run / "images" / "link.png",
                 run / "images" / "inner.png", run, tmp_path / "run" / "images" / "x" / ".." / "a.png"]:
        assert resolved(path) == path.resolve(), path
    assert resolved(tmp_path.joinpath("run", "images", "a.png").relative_to(tmp_path)) == (run / "images" / "a.png").resolve()
    assert inside(run / "images" / "a.png", run) and inside(run / "images" / "inner.png", run)
    assert not inside(run / "images" / "link.png", run)
    assert relative_path(run / "images" / "a.png", run) == "images/a.png"
    with pytest.raises(BonError, match="link that leads out"):
        safe_join(run, "images/link.png", where="c.jsonl:1")
    with pytest.raises(BonError, match="outside"):
        relative_path(run / "images" / "link.png", run)
