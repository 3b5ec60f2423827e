"""The synthetic-world judges on hand-drawn images: each prefers the right response in both orders
where it has a signal, falls to its seeded coin where it has none, and fails (never raises) on a
response it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from bon import registry
from bon.content import Content, ImageItem, Prompt
from bon.errors import BonError
from bon.protocol import Comparison, Verdict

from judges.synthetic.biased import ImageBiasJudge, PositionBiasJudge, RandomJudge
from judges.synthetic.colour import ColourHistogramJudge, edit_request, palette_histogram
from judges.synthetic.ocr import OcrJudge, similarity
from judges.synthetic.quality import QualityJudge, image_defects
from judges.synthetic.text_overlap import TextOverlapJudge

RED, BLUE, GREEN, YELLOW = (214, 32, 32), (40, 80, 220), (34, 160, 60), (232, 212, 24)
CANVAS = (236, 234, 228)
JUDGES = ["colour-hist", "ocr", "quality", "text-overlap", "position-bias", "image-bias", "random"]


def draw(shapes=(), text: str | None = None, noise: float = 0.0, line: bool = False, blur: float = 0.0, seed: int = 0) -> Image.Image:
    """A 128 px scene: ``shapes`` are (kind, rgb, box) drawn flat on a light canvas; ``text`` goes in a
    white banner at the bottom, one glyph per 17 px cell."""
    im = Image.new("RGB", (128, 128), CANVAS)
    d = ImageDraw.Draw(im)
    for kind, rgb, box in shapes:
        if kind == "circle":
            d.ellipse(box, fill=rgb)
        elif kind == "square":
            d.rectangle(box, fill=rgb)
        else:
            x0, y0, x1, y1 = box
            d.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=rgb)
    if text is not None:
        font = ImageFont.load_default(size=18)
        d.rectangle([0, 100, 127, 123], fill=(255, 255, 255))
        x0 = (128 - 17 * len(text)) // 2
        for i, ch in enumerate(text):
            d.text((x0 + 17 * i + 3, 100), ch, font=font, fill=(0, 0, 0))
    if line:
        d.line([(5, 10), (120, 80)], fill=(20, 20, 20), width=1)
    if blur:
        im = im.filter(ImageFilter.GaussianBlur(blur))
    if noise:
        rng = np.random.default_rng(seed)
        arr = np.asarray(im, dtype=np.float32) + rng.normal(0.0, noise, (128, 128, 3))
        im = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    return im


def circle(rgb, box=(40, 20, 80, 60)):
    return ("circle", rgb, box)


def ask(judge, prompt: Prompt, good: Content, bad: Content, sample: int = 0) -> tuple[Verdict, Verdict]:
    """Both orders: good as A, then good as B."""
    fwd, rev = judge.judge([Comparison(prompt, good, bad, sample), Comparison(prompt, bad, good, sample)])
    return fwd, rev


def assert_prefers(judge, prompt, good, bad):
    fwd, rev = ask(judge, prompt, good, bad)
    assert fwd.better == "A" and fwd.score >= 4, fwd
    assert rev.better == "B" and rev.score <= 3, rev
    assert fwd.meta.get("signal", True) and not fwd.meta.get("tie", False)
    json.dumps(fwd.meta)  # verdict meta is stored as JSON


def assert_no_signal(judge, prompt, a, b):
    v1, v2 = judge.judge([Comparison(prompt, a, b), Comparison(prompt, a, b)])
    assert v1.better in ("A", "B") and v1.meta["signal"] is False and v1.meta["tie"] is True
    assert (v1.better, v1.score) == (v2.better, v2.score)  # the tie coin is seeded, not random


# --- colour histogram -------------------------------------------------------------------------


def test_colour_hist_prefers_named_colour():
    judge = ColourHistogramJudge()
    prompt = Prompt("c1", "t2i", Content.of("a red circle"))
    assert_prefers(judge, prompt, Content.of(draw([circle(RED)])), Content.of(draw([circle(BLUE)])))
    # an unnamed extra colour costs purity
    two = Prompt("c2", "t2i", Content.of("a red circle and a blue square"))
    both = Content.of(draw([circle(RED), ("square", BLUE, (80, 60, 110, 90))]))
    extra = Content.of(draw([circle(RED), ("square", GREEN, (80, 60, 110, 90))]))
    assert_prefers(judge, two, both, extra)


def test_colour_hist_edit_follows_requested_change():
    judge = ColourHistogramJudge()
    before = draw([circle(RED), ("square", YELLOW, (80, 60, 110, 90))])
    prompt = Prompt("e1", "edit", Content.of(before, "make the red circle blue"))
    done = Content.of(draw([circle(BLUE), ("square", YELLOW, (80, 60, 110, 90))]))
    unchanged = Content.of(before.copy())
    wrong = Content.of(draw([circle(GREEN), ("square", YELLOW, (80, 60, 110, 90))]))
    assert_prefers(judge, prompt, done, unchanged)
    assert_prefers(judge, prompt, done, wrong)
    assert edit_request("make the red circle blue") == {"red": -1, "blue": +1}
    assert edit_request("remove the green square") == {"green": -1}
    assert edit_request("add a yellow triangle next to the red circle") == {"yellow": +1}
    assert edit_request("move the red circle to the left") == {}


def test_colour_hist_follows_interleaved_steps():
    judge = ColourHistogramJudge()
    text = (
        "Start with a red circle. Step 1: add a blue square. Step 2: change the colour of the red circle to green. "
        "Show the scene after each step, one short sentence and one image per step."
    )
    prompt = Prompt("s1", "interleaved", Content.of(text))
    sq = (80, 60, 110, 90)
    good = Content.of("Added the square.", draw([circle(RED), ("square", BLUE, sq)]),
                      "Now green.", draw([circle(GREEN), ("square", BLUE, sq)]))
    bad = Content.of("Added the square.", draw([circle(RED), ("square", YELLOW, sq)]),
                     "Now green.", draw([circle(RED), ("square", YELLOW, sq)]))
    assert_prefers(judge, prompt, good, bad)
    fwd, _ = ask(judge, prompt, good, bad)
    assert len(fwd.meta["a"]["per_step"]) == 2


def test_colour_hist_blind_to_text_only_and_colourless_prompts():
    judge = ColourHistogramJudge()
    prompt = Prompt("c3", "t2i", Content.of("a red circle"))
    assert_no_signal(judge, prompt, Content.of("a red circle"), Content.of("nothing"))
    plain = Prompt("c4", "t2i", Content.of("a sign"))
    assert_no_signal(judge, plain, Content.of(draw([circle(RED)])), Content.of(draw([circle(BLUE)])))
    hist = palette_histogram(np.asarray(draw([circle(RED)])))
    assert hist["red"] > 0.05 and hist["blue"] == 0 and hist["other"] < 0.005


# --- OCR ----------------------------------------------------------------------------------------


def test_ocr_reads_quoted_text():
    judge = OcrJudge()
    prompt = Prompt("o1", "t2i", Content.of('a sign that says "CAT"'))
    good = Content.of(draw([circle(RED)], text="CAT"))
    bad = Content.of(draw([circle(RED)], text="CAY"))
    assert_prefers(judge, prompt, good, bad)
    fwd, _ = ask(judge, prompt, good, bad)
    assert fwd.meta["a"]["read"] == ["CAT"] and fwd.meta["b"]["read"] == ["CAY"]
    # noise does not stop it reading; a missing banner reads as nothing
    assert_prefers(judge, prompt, Content.of(draw([circle(RED)], text="CAT", noise=12)), Content.of(draw([circle(RED)])))


def test_ocr_without_quotes_has_no_signal():
    judge = OcrJudge()
    prompt = Prompt("o2", "t2i", Content.of("a red circle"))
    assert_no_signal(judge, prompt, Content.of(draw([circle(RED)], text="CAT")), Content.of(draw([circle(RED)])))
    assert similarity("C A T", "cat") == 1.0 and similarity("CAT", "CAY") == pytest.approx(2 / 3)
    assert similarity("000", "O0O") > 0.8  # O and 0 look alike in this font


def test_ocr_reports_missing_engine(monkeypatch):
    from judges.synthetic import ocr

    monkeypatch.setattr(ocr, "_ENGINE", None)
    monkeypatch.setattr(ocr, "_ENGINE_ERROR", "rapidocr is not installed (No module named 'rapidocr')")
    prompt = Prompt("o3", "t2i", Content.of('a sign that says "DOG"'))
    (v,) = OcrJudge().judge([Comparison(prompt, Content.of(draw(text="DOG")), Content.of(draw(text="DIG")))])
    assert v.better is None and "rapidocr is not installed" in v.missing


# --- quality ------------------------------------------------------------------------------------


def test_quality_prefers_clean_images():
    judge = QualityJudge()
    prompt = Prompt("q1", "t2i", Content.of("a red circle"))
    scene = [circle(RED), ("square", BLUE, (80, 60, 110, 90))]
    clean = Content.of(draw(scene, text="HI"))
    assert_prefers(judge, prompt, clean, Content.of(draw(scene, text="HI", noise=15)))
    assert_prefers(judge, prompt, clean, Content.of(draw(scene, text="HI", line=True)))
    assert_prefers(judge, prompt, clean, Content.of(draw(scene, text="HI", blur=1.5)))
    d = image_defects(np.asarray(draw(scene, text="HI")))
    assert d["noise"] < 0.5 and d["blur"] < 0.1 and d["block"] < 0.1 and d["lines"] == 0


def test_quality_is_prompt_blind_and_text_blind():
    judge = QualityJudge()
    noisy = Content.of(draw([circle(RED)], noise=15))
    clean = Content.of(draw([circle(RED)]))
    p1 = Prompt("q2", "t2i", Content.of("a red circle"))
    p2 = Prompt("q3", "t2i", Content.of("a noisy picture"))
    (v1,), (v2,) = judge.judge([Comparison(p1, clean, noisy)]), judge.judge([Comparison(p2, clean, noisy)])
    assert (v1.better, v1.score) == (v2.better, v2.score)
    assert_no_signal(judge, p1, Content.of("clean words"), Content.of("noisy words"))


def test_opencv_filters_equal_the_scipy_ones_they_replace():
    """The quality judge's edge zone and the OCR judge's speckle filter run through OpenCV because it is
    faster; on noisy, blurred, striped and tiny images they give exactly scipy.ndimage's results."""
    from scipy import ndimage

    from judges.synthetic.quality import _median, edge_zone

    rng = np.random.default_rng(0)
    images = [np.asarray(draw([circle(RED), ("square", BLUE, (80, 60, 110, 90))], text="HI", noise=n, blur=b, line=l))
              for n, b, l in [(0, 0, False), (15, 0, False), (0, 1.5, True), (30, 0.8, True)]]
    images += [rng.integers(0, 256, (7, 5, 3), dtype=np.uint8), rng.integers(0, 256, (40, 64, 3), dtype=np.uint8)]
    for rgb in images:
        grey = rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
        smooth = _median(np.round(grey).astype(np.uint8), 5).astype(np.float32)
        mag = np.hypot(ndimage.sobel(smooth, axis=0), ndimage.sobel(smooth, axis=1)) / 4.0
        for threshold in (5.0, 30.0):
            assert np.array_equal(edge_zone(grey, threshold), ndimage.binary_dilation(mag > threshold, iterations=2))
        import cv2

        assert np.array_equal(cv2.medianBlur(rgb.copy(), 3).astype(np.int16),
                              ndimage.median_filter(rgb.astype(np.int16), size=(3, 3, 1), mode="nearest"))


# --- text overlap ---------------------------------------------------------------------------------


def test_text_overlap_prefers_on_topic_answer():
    judge = TextOverlapJudge()
    prompt = Prompt("r1", "reasoning", Content.of(draw([circle(RED)]), "How many red circles are in the picture?"))
    good = Content.of("I count the red circles in the picture: there is one.\nAnswer: 1")
    bad = Content.of("The weather seems pleasant today.")
    assert_prefers(judge, prompt, good, bad)
    # the Answer line alone is worth something on reasoning prompts
    same = "Red circles in the picture: one."
    assert_prefers(judge, prompt, Content.of(same + "\nAnswer: 1"), Content.of(same + "\nso one"))
    assert_no_signal(judge, prompt, Content.of(draw([circle(RED)])), Content.of(draw([circle(BLUE)])))


# --- biased judges --------------------------------------------------------------------------------


def many_pairs(n: int):
    rng = np.random.default_rng(7)
    prompt = Prompt("m", "t2i", Content.of("a red circle"))
    out = []
    for i in range(n):
        a = Content.of(f"response {rng.integers(1e9)} " + "x" * int(rng.integers(0, 300)))
        b = Content.of(f"response {rng.integers(1e9)} " + "y" * int(rng.integers(0, 300)))
        out.append(Comparison(prompt, a, b, sample=i % 3))
    return out


def test_image_bias_prefers_more_images():
    judge = ImageBiasJudge()
    prompt = Prompt("i1", "reasoning", Content.of(draw([circle(RED)]), "How many circles?"))
    with_sketch = Content.of("Wrong reasoning.", draw([circle(BLUE)]), "Answer: 7")
    correct_text = Content.of("There is exactly one circle, counted carefully.\nAnswer: 1")
    assert_prefers(judge, prompt, with_sketch, correct_text)
    assert_prefers(judge, prompt, Content.of("a much longer answer " * 5), Content.of("short"))


def test_position_bias_says_a_mostly():
    comparisons = many_pairs(300)
    verdicts = PositionBiasJudge().judge(comparisons)
    share_a = np.mean([v.better == "A" for v in verdicts])
    assert share_a >= 0.7
    assert np.mean([v.meta["biased"] for v in verdicts]) == pytest.approx(0.8, abs=0.07)
    unbiased = PositionBiasJudge(bias=0.0).judge(comparisons)
    assert 0.3 < np.mean([v.better == "A" for v in unbiased]) < 0.7  # then it follows text length


def test_random_judge_is_fair_and_deterministic():
    comparisons = many_pairs(400)
    judge = RandomJudge(seed=3)
    first = judge.judge(comparisons)
    again = RandomJudge(seed=3).judge(comparisons)
    other = RandomJudge(seed=4).judge(comparisons)
    assert [(v.better, v.score) for v in first] == [(v.better, v.score) for v in again]
    assert [v.better for v in first] != [v.better for v in other]
    assert 0.42 < np.mean([v.better == "A" for v in first]) < 0.58
    scores = {v.score for v in first}
    assert scores <= {2, 3, 4, 5} and {3, 4} <= scores
    assert all((v.better == "A") == (v.score >= 4) for v in first)


# --- every judge --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", JUDGES)
def test_missing_image_fails_without_raising(name: str, tmp_path: Path):
    judge = registry.create("judge", name)
    prompt = Prompt("x", "t2i", Content.of('a red circle on a sign that says "CAT"'))
    gone = Content([ImageItem(path=tmp_path / "missing.png")])
    ok = Content.of(draw([circle(RED)], text="CAT"))
    verdicts = judge.judge([Comparison(prompt, gone, ok), Comparison(prompt, ok, gone)])
    assert all(v.better is None and v.missing and "missing.png" in v.missing for v in verdicts)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    (v,) = judge.judge([Comparison(prompt, ok, Content([ImageItem(path=broken)]))])
    assert v.better is None and "broken.png" in v.missing


@pytest.mark.parametrize("name", JUDGES)
def test_identity_names_seed_and_options(name: str):
    base = registry.create("judge", name)
    ident = base.identity()
    assert ident["algorithm"] == name and ident["seed"] == 0
    json.dumps(ident)
    assert registry.create("judge", name, seed=1).identity() != ident
    relabelled = registry.create("judge", name, name="mine")
    assert relabelled.name == "mine" and relabelled.identity() == ident  # a label is not a new judge
    with pytest.raises(BonError, match=rf"judge '{name}': unknown option 'sed'; did you mean seed\?"):
        registry.create("judge", name, sed=1)  # a typo is an error naming the nearest option, never ignored


@pytest.mark.parametrize(
    "name, options",
    [
        ("colour-hist", {"min_share": 0.02}),
        ("quality", {"weights": {"noise": 2.0}}),
        ("text-overlap", {"answer_bonus": 0.0}),
        ("position-bias", {"bias": 0.6}),
        ("random", {"firm": 0.0}),
    ],
)
def test_identity_changes_with_options(name: str, options: dict):
    assert registry.create("judge", name, **options).identity() != registry.create("judge", name).identity()


def test_quality_grey_levels_are_the_same_bits_on_every_machine():
    """The quality judge's grey image is the exactly rounded weighted sum (a float32 matrix product's rounding
    depends on the CPU's kernels and flipped the demo's verdicts between machines)."""
    from fractions import Fraction

    from judges.synthetic.quality import LUMA, luma

    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, size=(64, 64, 3), dtype=np.uint8)
    got = luma(rgb)
    weights = [Fraction(float(w)) for w in LUMA]
    for y, x in zip(*rng.integers(0, 64, size=(2, 500))):
        exact = sum(int(v) * w for v, w in zip(rgb[y, x], weights))
        assert got[y, x] == np.float32(float(exact)), (y, x)
