"""Reward models: a tiny CLIP drives clipscore and pickscore (pointwise selection and pairwise use), a
tiny LLaVA drives vqascore, and an installed package's scorer plugs in through the judges' entry-point group ``bon.judges``."""

from __future__ import annotations

import importlib.util
import os
import textwrap

import pytest
from PIL import Image

from bon import registry
from bon.cli import main
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.protocol import Comparison
from bon.referee import Referee
from bon.selection import run_selection
from bon.selection.knockout import Knockout
from bon.selection.pointwise import Pointwise
from bon.store import JudgmentStore
from judges.reward_models import ClipScoreJudge, EntryPointRewardJudge
from tiny_models import build_bench, build_tiny_clip, build_tiny_llava

os.environ["HF_HUB_OFFLINE"] = "1"
HAVE_HF = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
needs_hf = pytest.mark.skipif(not HAVE_HF, reason="torch and transformers are not installed")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return build_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


def candidates(prompt: Prompt, n: int = 4) -> list[Candidate]:
    out = []
    for k in range(n):
        images = [Image.new("RGB", (40, 32), (50 * k, 200 - 40 * k, 90))]
        if k % 2:
            images.append(Image.new("RGB", (32, 48), (10, 30 * k, 250)))  # two images: their mean counts
        out.append(Candidate(prompt.id, k, "gen", k, Content.of(f"candidate {k}", *images)))
    return out


def reference_clipscore(clip_path, text: str, images: list[Image.Image]) -> list[float]:
    import torch
    from transformers import CLIPModel, CLIPProcessor

    model, proc = CLIPModel.from_pretrained(clip_path), CLIPProcessor.from_pretrained(clip_path)
    with torch.no_grad():
        out = model(**proc(text=[text], images=images, return_tensors="pt", padding=True))
    t = out.text_embeds / out.text_embeds.norm(dim=-1, keepdim=True)
    i = out.image_embeds / out.image_embeds.norm(dim=-1, keepdim=True)
    return (i @ t[0]).tolist()


@needs_hf
def test_clipscore_is_weighted_clipped_cosine_averaged_over_images(clip):
    judge = registry.create("judge", f"clipscore:{clip}", batch_size=3)
    prompt = Prompt("p", "t2i", Content.of("a green and blue picture"))
    cands = candidates(prompt, 4)
    scores = judge.score(prompt, [c.content for c in cands] + [Content.of("words only")])
    cos = reference_clipscore(clip, "a green and blue picture", [im.load() for c in cands for im in c.content.images])
    expected, pos = [], 0
    for c in cands:
        n = len(c.content.images)
        expected.append(sum(2.5 * max(x, 0.0) for x in cos[pos : pos + n]) / n)
        pos += n
    assert [s.value for s in scores[:4]] == pytest.approx(expected, abs=1e-4)
    assert len(scores[1].details["per_image"]) == 2
    assert scores[4].value is None and "no image" in scores[4].missing


@needs_hf
def test_pointwise_selection_picks_the_argmax_and_rerun_is_free(clip, tmp_path):
    judge = ClipScoreJudge(model=str(clip), name="clip", weight=100.0)  # spread the tiny model's scores out
    groups = []
    for p in range(2):
        prompt = Prompt(f"p{p}", "t2i", Content.of(f"picture number {p}"))
        groups.append((prompt, candidates(prompt, 4)))
    store = JudgmentStore(tmp_path / "j.sqlite")
    referee = Referee(judge, store)
    picks = run_selection(Pointwise(), referee, groups)
    for pick, (prompt, cands) in zip(picks, groups):
        values = [s.value for s in judge.score(prompt, [c.content for c in cands])]
        assert pick.scores == pytest.approx(values) and pick.index == max(range(4), key=lambda k: values[k])
    assert referee.stats.calls_made == 8
    again = Referee(judge, store)
    assert [p.index for p in run_selection(Pointwise(), again, groups)] == [p.index for p in picks]
    assert again.stats.calls_made == 0 and again.stats.calls_cached == 8
    store.close()


@needs_hf
def test_clipscore_pairwise_in_knockout_and_mmrb2_judge(clip, tmp_path, capsys):
    judge = ClipScoreJudge(model=str(clip), name="clip", weight=100.0)
    prompt = Prompt("p", "t2i", Content.of("a red picture"))
    cands = candidates(prompt, 4)
    values = [s.value for s in judge.score(prompt, [c.content for c in cands])]
    comps = [Comparison(prompt, cands[0].content, cands[1].content), Comparison(prompt, cands[1].content, cands[0].content)]
    fwd, rev = judge.judge(comps)
    better = "A" if values[0] > values[1] else "B"
    assert fwd.better == better and rev.better == {"A": "B", "B": "A"}[better]
    assert fwd.meta["score_a"] == pytest.approx(values[0])
    store = JudgmentStore(tmp_path / "j.sqlite")
    (pick,) = run_selection(Knockout(), Referee(judge, store), [(prompt, cands)])
    assert pick.index == max(range(4), key=lambda k: values[k])  # a consistent scorer's knockout finds its argmax
    store.close()
    bench = build_bench(tmp_path / "bench", n_pairs=3)
    out = tmp_path / "clip_t2i.json"
    assert main(["mmrb2", "judge", "--judge", f"clipscore:{clip}", "--bench-dir", str(bench), "--task", "image", "--out-file", str(out)]) == 0
    assert "calls made 6" in capsys.readouterr().out


@needs_hf
def test_pickscore_is_logit_scale_times_cosine(clip):
    judge = registry.create("judge", f"pickscore:{clip}")
    prompt = Prompt("p", "t2i", Content.of("a blue thing"))
    images = [Image.new("RGB", (32, 32), (0, 0, 255)), Image.new("RGB", (32, 32), (255, 0, 0))]
    scores = judge.score(prompt, [Content.of(im) for im in images])
    scale = float(judge.model.logit_scale.detach().exp())
    assert [s.value for s in scores] == pytest.approx([scale * c for c in reference_clipscore(clip, "a blue thing", images)], abs=1e-3)
    ident = judge.identity()
    assert ident["plugin"] == "pickscore" and ident["model"] == str(clip) and "weight" not in ident


@needs_hf
def test_vqascore_is_probability_of_yes(tmp_path):
    llava = build_tiny_llava(tmp_path / "llava")
    judge = registry.create("judge", f"vqascore:{llava}", batch_size=2)
    prompt = Prompt("p", "t2i", Content.of("a cat on a mat"))
    cands = candidates(prompt, 3)
    scores = judge.score(prompt, [c.content for c in cands])
    assert all(0.0 < s.value < 1.0 for s in scores) and len(scores[1].details["per_image"]) == 2
    assert judge.identity()["question"].startswith("Does this image show")
    verdicts = judge.judge([Comparison(prompt, cands[0].content, cands[2].content)])
    assert verdicts[0].better in ("A", "B")


@needs_hf
def test_missing_clip_folder_and_non_clip_model_are_one_line_errors(clip, tmp_path):
    with pytest.raises(BonError, match="not found"):
        ClipScoreJudge(model=str(tmp_path / "missing"))
    llava = build_tiny_llava(tmp_path / "llava")
    with pytest.raises(BonError, match="not a CLIP-style dual encoder"):
        ClipScoreJudge(model=str(llava))


def test_installed_reward_model_plugs_in_through_entry_points(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "bright_reward-1.0.dist-info").mkdir(parents=True)
    (site / "bright_reward-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: bright-reward\nVersion: 1.0\n")
    (site / "bright_reward-1.0.dist-info" / "entry_points.txt").write_text("[bon.judges]\nbrightness = bright_reward:make\n")
    (site / "bright_reward.py").write_text(textwrap.dedent('''
        import numpy as np

        class Brightness:
            margin_scale = 4.0

            def __init__(self, checkpoint, device, gain=1.0):
                self.gain = gain

            def __call__(self, prompt, images):
                return [self.gain * float(np.asarray(im.convert("L")).mean()) / 255.0 for im in images]

        def make(checkpoint=None, device="auto", **options):
            return Brightness(checkpoint, device, **options)
    '''))
    monkeypatch.syspath_prepend(str(site))
    judge = registry.create("judge", "reward-model:brightness", batch_size=1, options={"gain": 2.0})
    prompt = Prompt("p", "t2i", Content.of("something bright"))
    dark, light = Content.of(Image.new("RGB", (8, 8), (0, 0, 0))), Content.of(Image.new("RGB", (8, 8), (255, 255, 255)))
    assert [s.value for s in judge.score(prompt, [dark, light])] == pytest.approx([0.0, 2.0])
    (v,) = judge.judge([Comparison(prompt, dark, light)])
    assert v.better == "B" and v.score == 1 and judge.margin_scale == 4.0
    ident = judge.identity()
    assert ident["package"] == "bright-reward==1.0" and ident["target"] == "bright_reward:make" and ident["options"] == {"gain": 2.0}
    with pytest.raises(BonError, match="no reward model 'hpsv2'.*brightness"):
        EntryPointRewardJudge(model="hpsv2")
    # one entry-point group per kind: the scorer is also a judge under its own name
    assert "brightness" in registry.names("judge")
    direct = registry.create("judge", "brightness", batch_size=1, options={"gain": 2.0})
    assert [s.value for s in direct.score(prompt, [dark, light])] == pytest.approx([0.0, 2.0])
    assert direct.identity() == ident  # the same judge, the same stored judgments
    with pytest.raises(BonError, match="unknown option 'gian'"):
        registry.create("judge", "brightness", gian=2.0)
