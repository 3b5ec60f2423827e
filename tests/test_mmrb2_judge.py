"""`bon mmrb2 judge`: both orders, official format, resumable after a crash, failures as missing."""

import json

from PIL import Image

from bon.cli import main
from bon.stages import judge_bench
from judges.synthetic.biased import RandomJudge


def _bench(tmp_path, n_pairs=10):
    bench = tmp_path / "bench"
    (bench / "images").mkdir(parents=True)
    (bench / "input_images").mkdir()
    pairs = []
    for i in range(n_pairs):
        for side, colour in (("a", (200, 30, 30)), ("b", (30, 30, 200 - i))):
            Image.new("RGB", (32, 32), colour).save(bench / "images" / f"{i}_{side}.png")
        pairs.append({
            "id": f"pair{i}", "prompt_source": "handmade", "prompt_content": [["text", f"a red square number {i}"]],
            "prompt_metadata": {"category": "colour"},
            "response_a": {"model_name": "m1", "response_content": [["image", f"{i}_a.png"]]},
            "response_b": {"model_name": "m2", "response_content": [["image", f"{i}_b.png"]]},
            "chosen": "A", "human_annotations": [6, 5, 6],
        })
    (bench / "t2i.json").write_text(json.dumps({"pairs": pairs}))
    return bench


def test_judge_writes_official_file_and_rerun_is_free(tmp_path, capsys):
    bench = _bench(tmp_path)
    out = tmp_path / "out" / "random_t2i.json"
    assert main(["mmrb2", "judge", "--judge", "random", "--bench-dir", str(bench), "--task", "image", "--out-file", str(out), "--samples", "2"]) == 0
    data = json.loads(out.read_text())
    assert list(data) == [f"pair{i}" for i in range(10)]
    assert all(len(e["forward"]) == 2 and len(e["reverse"]) == 2 for e in data.values())
    assert {e["forward"][0]["judgement"] for e in data.values()} <= {"A", "B"}
    assert "calls made 40" in capsys.readouterr().out
    assert main(["mmrb2", "judge", "--judge", "random", "--bench-dir", str(bench), "--task", "image", "--out-file", str(out), "--samples", "2"]) == 0
    assert "calls made 0" in capsys.readouterr().out
    assert json.loads(out.read_text()) == data


def test_killed_run_resumes_to_the_same_file(tmp_path, monkeypatch, capsys):
    bench = _bench(tmp_path)
    whole = tmp_path / "whole" / "j.json"
    assert main(["mmrb2", "judge", "--judge", "random", "--bench-dir", str(bench), "--task", "t2i", "--out-file", str(whole)]) == 0

    monkeypatch.setattr(judge_bench, "CHUNK", 4)  # two pairs per batch
    real = RandomJudge.judge
    calls = {"n": 0}

    def dies_midway(self, comps):
        calls["n"] += len(comps)
        if calls["n"] > 8:
            raise KeyboardInterrupt  # the process is killed while judging the third batch
        return real(self, comps)

    monkeypatch.setattr(RandomJudge, "judge", dies_midway)
    part = tmp_path / "part" / "j.json"
    assert main(["mmrb2", "judge", "--judge", "random", "--bench-dir", str(bench), "--task", "t2i", "--out-file", str(part)]) == 130
    assert len(json.loads(part.read_text())) == 4  # two batches were saved, atomically
    monkeypatch.setattr(RandomJudge, "judge", real)
    capsys.readouterr()
    assert main(["mmrb2", "judge", "--judge", "random", "--bench-dir", str(bench), "--task", "t2i", "--out-file", str(part)]) == 0
    assert "calls made 12" in capsys.readouterr().out  # only the 6 pairs not yet judged, both orders
    assert part.read_text() == whole.read_text()


def test_missing_image_in_bench_is_a_one_line_error(tmp_path, capsys):
    bench = _bench(tmp_path, n_pairs=2)
    (bench / "images" / "1_b.png").unlink()
    rc = main(["mmrb2", "judge", "--judge", "random", "--bench-dir", str(bench), "--task", "t2i", "--out-file", str(tmp_path / "o.json")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "1_b.png: image file not found" in err and "\n" not in err


def test_transient_failures_are_asked_again_on_rerun(tmp_path, monkeypatch, capsys):
    from bon.protocol import Verdict

    bench = _bench(tmp_path, n_pairs=4)
    out = tmp_path / "o" / "j.json"
    real = RandomJudge.judge

    def rate_limited(self, comps):
        return [Verdict.failed("HTTP 429", transient=True) if "number 2" in c.prompt.content.text else v
                for c, v in zip(comps, real(self, comps))]

    monkeypatch.setattr(RandomJudge, "judge", rate_limited)
    args = ["mmrb2", "judge", "--judge", "random", "--bench-dir", str(bench), "--task", "t2i", "--out-file", str(out)]
    assert main(args) == 3  # transient failures end the command with exit 3, never 0
    assert capsys.readouterr().err.strip() == "bon: 2 calls pending after transient failures; rerun the same command to continue"
    first = json.loads(out.read_text())
    assert "pair2" not in first and len(first) == 3  # pending, not written as if it were final
    # accuracy says which pairs it could not score and why, instead of a silently smaller denominator
    assert main(["mmrb2", "accuracy", "--bench-dir", str(bench), str(out), "--json", str(tmp_path / "acc.json")]) == 0
    assert "not scored: 1 pairs: pair2 (not in the judgment file)" in capsys.readouterr().out
    assert json.loads((tmp_path / "acc.json").read_text())["tasks"]["image"]["unscored"] == {"pair2": "not in the judgment file"}
    older = {**first, "pair2": {d: [{"judgement": "", "evaluator": "random", "metadata": {"missing": "HTTP 429", "transient": True}}]
                                for d in ("forward", "reverse")}}  # a file an older bon wrote
    (tmp_path / "older.json").write_text(json.dumps(older))
    assert main(["mmrb2", "accuracy", "--bench-dir", str(bench), str(tmp_path / "older.json")]) == 0
    assert "pair2 (forward: HTTP 429 (transient: rerun bon mmrb2 judge); reverse: HTTP 429" in capsys.readouterr().out
    monkeypatch.setattr(RandomJudge, "judge", real)
    assert main(args) == 0
    assert "calls made 2," in capsys.readouterr().out  # only pair2, both orders
    assert json.loads(out.read_text())["pair2"]["forward"][0]["judgement"] in ("A", "B")


def test_kept_images_are_shared_and_a_broken_one_is_left_to_the_judge(tmp_path):
    bench = _bench(tmp_path, n_pairs=3)
    (bench / "images" / "2_b.png").unlink()  # the judge reports it, keep_decoded does not raise
    try:
        judge_bench.keep_decoded(bench, ["t2i"])
        pairs = judge_bench.load_pairs(bench / "t2i.json")
        first = judge_bench.pair_comparisons(pairs[0], "t2i", bench, 1)[0]
        again = judge_bench.pair_comparisons(pairs[0], "t2i", bench, 1)[0]
        assert first.a.items[0] is again.a.items[0] and first.a.items[0]._digest is not None  # hashed once, shared
        assert first.a.items[0]._image is None  # the pixels live in the bounded image cache, not on the item
        broken = judge_bench.pair_comparisons(pairs[2], "t2i", bench, 1)[0].b.items[0]
        assert broken._digest is None  # not kept: loading it fails in the judge, as before
    finally:
        judge_bench.forget_decoded()
    assert not judge_bench._KEPT


def test_kept_images_are_all_hashed_and_their_pixels_stop_at_the_cache_bound(tmp_path, monkeypatch):
    from bon.image_cache import IMAGES

    bench = _bench(tmp_path, n_pairs=3)
    monkeypatch.setattr(IMAGES, "_limit", 3 * 32 * 32 * 4)  # three 32x32 RGB images (PIL: 4 bytes a pixel)
    IMAGES.clear()
    try:
        judge_bench.keep_decoded(bench, ["t2i"])
        assert len(judge_bench._KEPT) > 3 and all(item._digest for item in judge_bench._KEPT.values())
        assert IMAGES.bytes == 3 * 32 * 32 * 4  # warming pushes nothing out: the first three stay
    finally:
        judge_bench.forget_decoded()
        IMAGES.clear()
