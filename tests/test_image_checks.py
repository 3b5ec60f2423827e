"""Images a run or benchmark folder names are read only from inside it (symbolic links followed), and
never decoded past the pixel limit: every reader (the content loader, `bon mmrb2 judge`, `bon tradeoff`,
`bon view`) refuses a link out of the folder or a PNG whose header claims 20000 x 20000 pixels with one
line naming the file, and changes no input file."""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import pytest
import yaml
from PIL import Image

from bon.backends.images import DEFAULT_MAX_PIXELS, MAX_PIXELS_ENV, max_image_pixels, open_image
from bon.cli import main
from bon.content import ImageItem, safe_join
from bon.errors import BonError
from crafted_images import huge_png, png
from fuzz_cases import TINY_STUDY


def hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


# --- the content loader ------------------------------------------------------------------------------


def test_links_out_of_the_folder_are_refused_and_links_inside_followed(tmp_path):
    base, outside = tmp_path / "bench", tmp_path / "secret"
    (base / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "key.png").write_bytes(png())
    (base / "sub" / "real.png").write_bytes(png())
    (base / "out.png").symlink_to(outside / "key.png")
    (base / "dir").symlink_to(outside, target_is_directory=True)
    (base / "dangling.png").symlink_to(outside / "not-yet.png")
    (base / "in.png").symlink_to(base / "sub" / "real.png")
    for rel in ("out.png", "dir/key.png", "dangling.png"):
        with pytest.raises(BonError, match=f"pair 1: image path '{rel}' is a link that leads out of"):
            safe_join(base, rel, "pair 1")
    for rel in ("../secret/key.png", "/etc/hostname"):
        with pytest.raises(BonError, match="escapes its folder"):
            safe_join(base, rel, "pair 1")
    assert ImageItem(safe_join(base, "in.png", "pair 1")).load().size == (6, 4)


@pytest.mark.parametrize("size", [(20000, 20000), (10000, 10000)])
def test_a_huge_png_is_one_error_naming_the_file_without_a_warning(tmp_path, size):
    path = tmp_path / "huge.png"
    path.write_bytes(huge_png(*size))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PIL's multi-line DecompressionBombWarning would fail here
        with pytest.raises(BonError) as err:
            ImageItem(path).load()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: image of ") and f"limit of {DEFAULT_MAX_PIXELS}" in message


def test_the_pixel_limit_is_an_environment_setting(monkeypatch):
    assert max_image_pixels() == DEFAULT_MAX_PIXELS
    monkeypatch.setenv(MAX_PIXELS_ENV, "100")
    assert open_image(png(size=(10, 10)), "ok").size == (10, 10)
    with pytest.raises(BonError, match=r"small: image of 11x10 pixels exceeds the limit of 100 pixels; set BON_MAX_IMAGE_PIXELS"):
        open_image(png(size=(11, 10)), "small")
    for bad in ("0", "-5", "1e9", "many"):
        monkeypatch.setenv(MAX_PIXELS_ENV, bad)
        with pytest.raises(BonError, match="BON_MAX_IMAGE_PIXELS: expected a positive whole number"):
            max_image_pixels()


# --- the readers, through the CLI --------------------------------------------------------------------


def bench(tmp_path: Path) -> Path:
    folder = tmp_path / "bench"
    (folder / "images").mkdir(parents=True)
    pairs = []
    for i in range(2):
        for side in "ab":
            (folder / "images" / f"{i}_{side}.png").write_bytes(png((40 * i, 100, 200 if side == "a" else 20)))
        pairs.append({"id": f"pair{i}", "prompt_source": "s", "prompt_content": [["text", f"square {i}"]],
                      "prompt_metadata": {}, "chosen": "A",
                      "response_a": {"model_name": "m1", "response_content": [["image", f"images/{i}_a.png"]]},
                      "response_b": {"model_name": "m2", "response_content": [["image", f"images/{i}_b.png"]]}})
    (folder / "t2i.json").write_text(json.dumps({"pairs": pairs}))
    return folder


def damage(image: Path, how: str, outside: Path) -> None:
    """Replace one image of a folder: by a link to a file outside it, or by a PNG claiming 20000 x 20000."""
    if how == "link outside":
        outside.write_bytes(image.read_bytes())
        image.unlink()
        image.symlink_to(outside)
    else:
        image.write_bytes(huge_png())


def one_line(capfd) -> str:
    err = capfd.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bon: error: "), err
    return err


@pytest.mark.parametrize("how", ["link outside", "huge png"])
def test_mmrb2_judge_refuses_the_image(tmp_path, capfd, how):
    folder = bench(tmp_path)
    damage(folder / "images" / "1_b.png", how, tmp_path / "elsewhere.png")
    before = hashes(folder)
    rc = main(["mmrb2", "judge", "--judge", "random", "--bench-dir", str(folder), "--task", "t2i",
               "--out-file", str(tmp_path / "out.json")])
    assert rc == 2 and "1_b.png" in one_line(capfd)
    assert hashes(folder) == before


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A finished tiny study (synthetic generator and judges; a few seconds)."""
    root = tmp_path_factory.mktemp("study")
    (root / "tiny.yaml").write_text(yaml.safe_dump({**TINY_STUDY, "out": str(root / "run")}))
    assert main(["run", str(root / "tiny.yaml")]) == 0
    return root / "run"


@pytest.mark.parametrize("how", ["link outside", "huge png"])
@pytest.mark.parametrize("command", [["tradeoff", "--judge", "colour-hist", "--bootstrap", "100"], ["view"]])
def test_run_readers_refuse_the_image(study, tmp_path, capfd, how, command):
    run = tmp_path / "run"
    shutil.copytree(study, run, symlinks=True)
    image = sorted((run / "candidates" / "strong" / "images").iterdir())[0]
    damage(image, how, tmp_path / "elsewhere.png")
    before = hashes(run)
    capfd.readouterr()
    assert main([command[0], "--run", str(run), *command[1:]]) == 2
    assert image.name in one_line(capfd)
    after = hashes(run)
    assert {k: v for k, v in after.items() if k in before} == before


def test_suite_images_are_decoded_under_the_limit_too(tmp_path):
    from generators.suites import decode_image, open_image_file

    with pytest.raises(BonError, match=r"^row 3 image: image of 400000000 pixels exceeds the limit"):
        decode_image({"bytes": huge_png(), "path": None}, None, "row 3 image")
    (tmp_path / "big.png").write_bytes(huge_png(10000, 10000))
    with pytest.raises(BonError, match=r"big.png: image of 10000x10000 pixels exceeds the limit"):
        open_image_file("big.png", tmp_path, "row 4 image")
