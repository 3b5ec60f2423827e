"""transformers-vlm: a tiny random LLaVA judges pairs in both modes, through `bon mmrb2 judge` and a
knockout, batching comparisons into one forward pass; bad model folders fail in one line, early."""

from __future__ import annotations

import functools
import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ["HF_HUB_OFFLINE"] = "1"

from PIL import Image  # noqa: E402

from bon import registry  # noqa: E402
from bon.cli import main  # noqa: E402
from bon.content import Candidate, Content, Prompt  # noqa: E402
from bon.protocol import Comparison  # noqa: E402
from bon.referee import Referee  # noqa: E402
from bon.selection import run_selection  # noqa: E402
from bon.selection.knockout import Knockout  # noqa: E402
from bon.store import JudgmentStore  # noqa: E402
from judges.transformers_vlm import TransformersVlmJudge, fit_pixels  # noqa: E402
from tiny_models import build_bench, build_tiny_llava  # noqa: E402


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return build_tiny_llava(tmp_path_factory.mktemp("models") / "tiny-llava")


def count_forward(model):
    """Wrap ``model.forward`` (keeping its signature, which generate inspects) and count calls."""
    calls = {"n": 0}
    real = model.forward

    @functools.wraps(real)
    def forward(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    model.forward = forward
    return calls


def comparisons(n: int, task: str = "t2i") -> list[Comparison]:
    prompt = Prompt("p", task, Content.of("draw a red square on grey"))
    out = []
    for i in range(n):
        a = Content.of(Image.new("RGB", (48, 40), (200, 20 * i, 0)))
        b = Content.of("one square:", Image.new("RGB", (40, 56), (0, 0, 25 * i)), "done" * (i + 1))
        out.append(Comparison(prompt, a, b, 0))
    return out


def test_logits_mode_through_cli_then_free_from_store(llava, tmp_path, capsys):
    bench = build_bench(tmp_path / "bench", n_pairs=4)
    out = tmp_path / "out" / "vlm_t2i.json"
    argv = ["mmrb2", "judge", "--judge", f"transformers-vlm:{llava}", "--bench-dir", str(bench), "--task", "image",
            "--out-file", str(out), "--judge-option", "mode=logits", "--judge-option", "batch_size=8"]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert list(data) == [f"pair{i}" for i in range(4)]
    for entry in data.values():
        for d in ("forward", "reverse"):
            (j,) = entry[d]
            assert j["judgement"] in ("A", "B")
            meta = j["metadata"]
            assert 1 <= meta["score"] <= 6 and (meta["score"] >= 4) == (j["judgement"] == "A")
            assert 0.5 <= meta["confidence"] <= 1 and 0 <= meta["p_a"] <= 1 and meta["mode"] == "logits"
    assert "calls made 8" in capsys.readouterr().out
    assert main(argv) == 0
    assert "calls made 0" in capsys.readouterr().out


def test_generate_mode_through_cli_records_unreadable_answers_as_missing(llava, tmp_path, capsys):
    bench = build_bench(tmp_path / "bench", n_pairs=2)
    out = tmp_path / "gen.json"
    assert main(["mmrb2", "judge", "--judge", f"transformers-vlm:{llava}", "--bench-dir", str(bench), "--task", "t2i",
                 "--out-file", str(out), "--judge-option", "max_new_tokens=6"]) == 0
    data = json.loads(out.read_text())
    entries = [e for pair in data.values() for d in ("forward", "reverse") for e in pair[d]]
    assert len(entries) == 4
    for e in entries:  # a random model writes noise: never a vote, always a reason
        assert e["judgement"] == "" and e["metadata"]["missing"].startswith("unparseable")
    assert "missing 4" in capsys.readouterr().out


def test_generate_mode_parses_the_new_tokens_only(llava):
    judge = TransformersVlmJudge(model=str(llava), max_new_tokens=32, batch_size=4)
    tok = judge.backend.tokenizer
    answer = tok.encode('```json\n{"reasoning": "B fits", "score": 2, "better_response": "B"}\n```', add_special_tokens=False)
    model = judge.backend.model
    seen = {}

    def scripted_generate(input_ids, **kwargs):
        seen.setdefault("batches", []).append(input_ids.shape[0])
        seen["settings"] = {k: kwargs[k] for k in ("max_new_tokens", "do_sample")}
        tail = torch.tensor([answer + [tok.eos_token_id]] * input_ids.shape[0])
        return torch.cat([input_ids, tail], dim=1)

    model.generate = scripted_generate
    verdicts = judge.judge(comparisons(5))
    assert seen["batches"] == [4, 1] and seen["settings"] == {"max_new_tokens": 32, "do_sample": False}
    assert [(v.better, v.score) for v in verdicts] == [("B", 2)] * 5
    assert verdicts[0].meta["answer"].startswith("```json") and "<|assistant|>" not in verdicts[0].meta["answer"]


def test_logits_batch_of_eight_is_one_forward_pass_and_matches_single_passes(llava):
    batched = TransformersVlmJudge(model=str(llava), mode="logits", batch_size=8)
    calls = count_forward(batched.backend.model)
    comps = comparisons(8)
    together = batched.judge(comps)
    assert calls["n"] == 1 and batched.backend.forward_batches == [8]
    single = TransformersVlmJudge(model=str(llava), mode="logits", batch_size=1)
    calls1 = count_forward(single.backend.model)
    alone = single.judge(comps)
    assert calls1["n"] == 8
    for t, a in zip(together, alone):  # left padding changes nothing
        assert t.better == a.better and t.meta["p_a"] == pytest.approx(a.meta["p_a"], abs=1e-4)


def test_vlm_judge_inside_a_knockout(llava, tmp_path):
    judge = registry.create("judge", f"transformers-vlm:{llava}", name="tiny-vlm", mode="logits", batch_size=8)
    calls = count_forward(judge.backend.model)
    groups = []
    for p in range(2):
        prompt = Prompt(f"p{p}", "t2i", Content.of(f"a square number {p}"))
        cands = [Candidate(prompt.id, k, "gen", k, Content.of(Image.new("RGB", (32, 32), (60 * k, 40 * p, 90))))
                 for k in range(4)]
        groups.append((prompt, cands))
    store = JudgmentStore(tmp_path / "judgments.sqlite")
    referee = Referee(judge, store)
    picks = run_selection(Knockout(), referee, groups)
    assert [p.index in range(4) for p in picks] == [True, True]
    assert all(len(p.matches) == 3 and p.missing == 0 for p in picks)
    # round 1: 2 prompts x 2 matches x 2 orders = 8 comparisons, one pass; the final: 4 in one pass
    assert referee.stats.calls_made == 12 and calls["n"] == 2 and judge.backend.forward_batches == [8, 4]
    again = Referee(judge, store)
    assert [p.index for p in run_selection(Knockout(), again, groups)] == [p.index for p in picks]
    assert again.stats.calls_made == 0 and calls["n"] == 2
    store.close()


def test_identity_names_what_changes_the_judgment(llava):
    base = TransformersVlmJudge(model=str(llava), mode="logits")
    ident = base.identity()
    assert ident["model"] == str(llava) and ident["revision"].startswith("local:") and ident["dtype"] == "float32"
    assert set(ident["templates"]) == {"image", "edit", "interleaved", "reasoning"} and ident["mode"] == "logits"
    assert ident == TransformersVlmJudge(model=str(llava), mode="logits", batch_size=2).identity()  # batching is not identity
    assert ident != TransformersVlmJudge(model=str(llava), mode="logits", max_image_pixels=4096).identity()
    gen = TransformersVlmJudge(model=str(llava), temperature=0.7, do_sample=True).identity()
    assert gen["sampling"]["temperature"] == 0.7 and gen != ident
    assert "device" not in json.dumps(ident)


def test_images_are_downscaled_to_max_pixels():
    big = Image.new("RGB", (400, 200))
    small = fit_pixels(big, 20_000)
    assert small.width * small.height <= 20_000 and abs(small.width / small.height - 2) < 0.05
    assert fit_pixels(big, None) is big and fit_pixels(big, 10**6) is big


def test_folder_without_processor_is_a_one_line_error_before_work(tmp_path, capsys):
    folder = build_tiny_llava(tmp_path / "no-processor", with_processor=False)
    bench = build_bench(tmp_path / "bench", n_pairs=1)
    out = tmp_path / "o.json"
    capsys.readouterr()
    rc = main(["mmrb2", "judge", "--judge", f"transformers-vlm:{folder}", "--bench-dir", str(bench), "--task", "t2i", "--out-file", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "processor" in err and str(folder) in err and "\n" not in err
    assert not out.exists()
    rc = main(["mmrb2", "judge", "--judge", f"transformers-vlm:{tmp_path / 'nowhere'}", "--bench-dir", str(bench), "--task", "t2i", "--out-file", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "not found" in err and "\n" not in err


def test_bad_options_fail_at_construction(llava):
    from bon.errors import BonError

    with pytest.raises(BonError, match="mode must be"):
        TransformersVlmJudge(model=str(llava), mode="vibes")
    with pytest.raises(BonError, match="model' is required"):
        TransformersVlmJudge()


def test_study_config_entry_builds_the_judge_under_its_label(llava, tmp_path):
    from bon.config import parse_config

    cfg = parse_config({"out": str(tmp_path / "run"), "generators": ["synthetic"],
                        "judges": [{"name": f"transformers-vlm:{llava}", "label": "tiny-vlm", "options": {"mode": "logits", "batch_size": 4}}]},
                       where="study.yaml")
    judge = cfg.judges[0].create("judge")
    assert isinstance(judge, TransformersVlmJudge) and judge.name == "tiny-vlm" and judge.backend.batches.size == 4
    assert "name" not in judge.identity() and judge.identity()["model"] == str(llava)  # labels don't key the store


def test_an_unreadable_image_fails_its_comparison_only(llava, tmp_path):
    from bon.content import ImageItem

    judge = TransformersVlmJudge(model=str(llava), mode="logits", batch_size=8)
    comps = comparisons(3)
    comps[1].b = Content([ImageItem(path=tmp_path / "gone.png")])
    verdicts = judge.judge(comps)
    assert verdicts[0].better and verdicts[2].better and judge.backend.forward_batches == [2]
    assert verdicts[1].better is None and "gone.png: image file not found" in verdicts[1].missing
