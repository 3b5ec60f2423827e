"""Decoded images live in one cache bounded in bytes (bon/image_cache.py); a study whose pixels far exceed
the bound gives the same results as one that keeps them all."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from PIL import Image

from bon.content import ImageItem
from bon.errors import BonError
from bon.image_cache import (CACHE_ENV, DEFAULT_CACHE_BYTES, IMAGES, PART_BYTES, ImageCache, cache_limit, estimated_bytes,
                             image_bytes, part_count)


def _png(path: Path, colour: tuple[int, int, int], size: int = 8) -> Path:
    Image.new("RGB", (size, size), colour).save(path)
    return path


def test_the_bound_is_one_setting_with_units_and_a_bad_value_is_one_line(monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert cache_limit() == DEFAULT_CACHE_BYTES == 2**30
    for raw, expected in (("0", 0), ("4096", 4096), ("512M", 512 * 2**20), ("2g", 2 * 2**30), ("1.5GiB", 3 * 2**29)):
        monkeypatch.setenv(CACHE_ENV, raw)
        assert cache_limit() == expected
    monkeypatch.setenv(CACHE_ENV, "lots")
    with pytest.raises(BonError, match=f"{CACHE_ENV}: expected a size"):
        cache_limit()


def test_least_recently_used_images_go_first_and_the_bound_holds(tmp_path):
    paths = [_png(tmp_path / f"{k}.png", (k, 0, 0)) for k in range(4)]
    one = 8 * 8 * 4  # PIL keeps RGB at 4 bytes a pixel
    cache = ImageCache(limit=2 * one)
    decode = lambda p: (lambda: Image.open(p).convert("RGB"))  # noqa: E731
    first = cache.load(paths[0], decode(paths[0]))
    assert image_bytes(first) == one
    assert cache.load(paths[0], decode(paths[0])) is first and cache.hits == 1
    cache.load(paths[1], decode(paths[1]))
    cache.load(paths[0], decode(paths[0]))  # 0 is now the most recent
    cache.load(paths[2], decode(paths[2]))  # pushes 1 out, not 0
    assert cache.load(paths[0], decode(paths[0])) is first
    misses = cache.misses
    cache.load(paths[1], decode(paths[1]))
    assert cache.misses == misses + 1 and cache.peak == cache.bytes == 2 * one
    cache.load(paths[3], decode(paths[3]), evict=False)  # warming: no room, nothing pushed out
    assert cache.bytes == 2 * one and cache.load(paths[1], decode(paths[1])) is not None and cache.misses == misses + 2


def test_a_file_rewritten_in_place_is_decoded_again_and_items_keep_no_pixels(tmp_path):
    path = _png(tmp_path / "a.png", (10, 20, 30))
    item = ImageItem(path=path)
    assert item.load().getpixel((0, 0)) == (10, 20, 30) and item._image is None and item._digest is None
    digest = item.digest
    time.sleep(0.01)
    _png(path, (200, 20, 30))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**6))
    fresh = ImageItem(path=path)
    assert fresh.load().getpixel((0, 0)) == (200, 20, 30) and fresh.digest != digest
    assert item.digest == digest  # computed once and kept


def test_an_unsaved_image_holds_its_pixels_until_written(tmp_path):
    from bon.content import Content

    item = ImageItem.from_pil(Image.new("RGB", (4, 4), (1, 2, 3)))
    Content([item]).to_json(tmp_path, tmp_path / "images")
    assert item._image is None and item.path is not None and item.load().getpixel((0, 0)) == (1, 2, 3)
    held = ImageItem(path=item.path).hold()
    assert held._image is not None  # what a Ray worker sends back when the driver cannot read its disk


def test_parts_held_at_once_fit_the_bound_together_and_keep_every_worker_busy(tmp_path, monkeypatch):
    from bon.study import _parts

    monkeypatch.setattr(IMAGES, "_limit", 100)
    assert part_count(250, 1000, workers=2) == 6  # 42 bytes a part: two parts at once within 100
    assert part_count(50, 1000, workers=2) == 2  # it fits: one part per worker
    assert part_count(10**6, 5, workers=2) == 5  # never more parts than prompts or pairs
    monkeypatch.setattr(IMAGES, "_limit", DEFAULT_CACHE_BYTES)
    assert part_count(2**30, 10**6, workers=2) == 2**30 // PART_BYTES  # a large bound: parts of PART_BYTES
    monkeypatch.setattr(IMAGES, "_limit", 0)
    assert part_count(10**6, 1000, workers=2) == 2  # no cache, nothing to fit: one part per worker
    items = list(range(23))
    parts = _parts(items, 6, lambda x: 1)
    assert [x for part in parts for x in part] == items and {len(part) for part in parts} == {3, 4}
    heavy = _parts(items, 4, lambda x: 10 if x < 4 else 1)  # four items weigh as much as the other 19 and more
    assert [x for part in heavy for x in part] == items and [len(part) for part in heavy] == [1, 1, 6, 15]
    assert [len(part) for part in _parts(items, 3, lambda x: 0)] == [7, 8, 8]  # nothing weighs: by length
    paths = [_png(tmp_path / f"{k}.png", (k, 0, 0), size=8 + k % 2 * 8) for k in range(10)]
    assert estimated_bytes(paths, sample=10) == 5 * (8 * 8 * 4) + 5 * (16 * 16 * 4)  # from the headers: RGB at 4 bytes


def _study(root: Path, out: str, *args: str) -> dict[str, str]:
    from benchmarks._files_study import build_files_study
    from bon.cli import main

    config = build_files_study(root, images=24, size=24, n=4, out=root / out, judges=("colour-hist", "quality", "image-bias"))
    assert main(["run", str(config), *args]) == 0
    run = root / out
    return {name: (run / name).read_text() for name in ("picks.jsonl", "scores.jsonl", "results.csv")}


def test_a_files_study_under_a_tiny_image_cache_equals_the_uncapped_one(tmp_path, monkeypatch):
    from bon import study

    """24 candidates of 24 x 24 pixels (55 KiB decoded) under a 7 KiB cache (3 images): forked judges
    (a part of the study per worker at a time) and judges in one process (a call budget) both re-decode, and
    every pick, score and result equals the run that kept every image."""
    monkeypatch.setenv("BON_QUIET", "1")
    monkeypatch.setenv("BON_WORKERS", "2")  # forked judges even on one core
    monkeypatch.setattr(IMAGES, "_limit", DEFAULT_CACHE_BYTES)
    full = _study(tmp_path, "full")
    limit = 3 * 24 * 24 * 4
    monkeypatch.setattr(IMAGES, "_limit", limit)
    monkeypatch.setattr(IMAGES, "peak", 0)
    IMAGES.clear()
    counts: list[int] = []
    monkeypatch.setattr(study, "part_count", lambda *a, **k: counts.append(part_count(*a, **k)) or counts[-1])
    forked = _study(tmp_path, "capped-forked")
    assert counts[-1] == 6  # the judges' parts: one prompt each (four images, more than the bound)
    misses = IMAGES.misses
    in_driver = _study(tmp_path, "capped-one-process", "--max-calls", "100000")
    # a judge decodes every image (the digests come from the generate stage, hashed as it wrote the files; the
    # verifier's workers decode their own), and no more than the bound was ever held: the cap was in force
    assert IMAGES.misses - misses >= 24
    assert 0 < IMAGES.peak <= limit
    for capped in (forked, in_driver):
        for name in full:
            assert capped[name].replace("capped-forked", "full").replace("capped-one-process", "full") == full[name], name


def test_generated_candidates_keep_the_digests_hashed_when_written(tmp_path):
    """The generate stage hands on each image's digest, hashed from the pixels it wrote (the verifier's
    driver then decodes no file to hash it): the same digest a reader hashes from the file. Candidates
    read back on a resume come without one (it is hashed when first needed)."""
    from bon.runfolder import RunFolder
    from bon.stages.generate import generate
    from generators.synthetic.generator import SyntheticGenerator
    from generators.synthetic.suites import build_suite

    run = RunFolder(tmp_path / "run")
    prompts = build_suite(per_task=1, seed=1, tasks=["t2i", "interleaved"])
    made = generate(run, SyntheticGenerator(skill="weak", name="weak"), prompts, 2, 1)
    items = [item for cands in made.values() for c in cands for item in c.content.images]
    assert len(items) > 2 * len(prompts) - 1 and all(item._digest is not None for item in items)
    assert [item._digest for item in items] == [ImageItem(item.path).digest for item in items]
    resumed = generate(run, SyntheticGenerator(skill="weak", name="weak"), prompts, 2, 1)
    assert all(item._digest is None for cands in resumed.values() for c in cands for item in c.content.images)
