"""`bon view`: both orders of every pair and match, safe text, images by relative path, and the page in a
real browser (headless Chromium; skipped where it is not installed)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from analysis.viewer import read_shards, write_viewer
from analysis_run import make_run
from bon.cli import main
from bon.content import load_candidates, load_prompts
from bon.protocol import Verdict
from bon.store import JudgmentStore

EVIL = '</script><img src=x onerror="alert(1)"> & <b>bold</b>'


@pytest.fixture(scope="module")
def viewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with one task, one generator and three judges; judge-0's knockout matches have stored verdicts
    (the reverse order names the same letter: the orders disagree) and one reason is hostile HTML."""
    run = make_run(tmp_path_factory.mktemp("view") / "run", qualities=(0.6, 0.8, 0.9), prompts=2, n=4,
                   tasks=("t2i",), generators=("g1",), pairs=4)
    identity = {"name": "judge-0", "version": 1}
    stats = json.loads((run / "stats.json").read_text())
    (run / "stats.json").write_text(json.dumps({**stats, "identities": {"judges": {"judge-0": identity}}}))
    prompts = {p.id: p for p in load_prompts(run / "prompts.jsonl")}
    cands = {(c.prompt_id, c.index): c.content for c in load_candidates(run / "candidates" / "g1" / "candidates.jsonl")}
    picks = [json.loads(line) for line in (run / "picks.jsonl").read_text().splitlines()]
    store = JudgmentStore(run / "judgments.sqlite")
    jid = store.register(identity)
    for pick in picks:
        if pick["judge"] == "judge-0":
            pick["matches"] = [[0, 1, 0, "coin"]]
            digest = prompts[pick["prompt_id"]].content.digest
            x, y = cands[(pick["prompt_id"], 0)], cands[(pick["prompt_id"], 1)]
            store.put_many(jid, [((digest, x.digest, y.digest, 0), Verdict("A", 5, {"answer": EVIL})),
                                 ((digest, y.digest, x.digest, 0), Verdict("A", 4, {"answer": "the first one"}))])
    store.close()
    (run / "picks.jsonl").write_text("".join(json.dumps(p) + "\n" for p in picks))
    judgment = run / "mmrb2" / "judgments" / "judge-1" / "t2i.json"
    data = json.loads(judgment.read_text())
    first = next(iter(data))
    data[first]["reverse"] = [{"judgement": "", "evaluator": "judge-1", "metadata": {"missing": EVIL}}]
    judgment.write_text(json.dumps(data))
    assert main(["view", "--run", str(run)]) == 0
    return run


def page_data(page: Path) -> dict:
    """Every shard of the page as one packed table (each shard's string and content numbers shifted)."""
    strings, contents, items = [], [], []
    for shard in read_shards(page)["shards"]:
        so, co = len(strings), len(contents)
        strings += shard["strings"]
        contents += shard["contents"]
        for it in shard["items"]:
            items.append([*it[:5], *(k + co for k in it[5:8]), *(k + so for k in it[8:11]), it[11],
                          [*it[12][:2], it[12][2] + so], [*it[13][:2], it[13][2] + so], it[14]])
    return {"strings": strings, "contents": contents, "items": items}


def test_every_pair_and_match_has_both_orders(viewed: Path) -> None:
    data = page_data(viewed / "view.html")
    s, items = data["strings"], data["items"]
    pairs = [i for i in items if i[0] == "pair"]
    matches = [i for i in items if i[0] == "match"]
    assert len(pairs) == 3 * 4 and len(matches) == 2 and {i[2] for i in matches} == {"judge-0"}
    for item in pairs:
        assert item[12][0] in ("A", "B") and (item[13][0] in ("A", "B") or s[item[13][2]] == EVIL)
    match = matches[0]
    assert match[12][:2] == ["A", 5] and s[match[12][2]] == EVIL and match[13][:2] == ["A", 4]
    assert match[14] == 1 and s[match[10]] == "winner: candidate 0 (coin)"
    assert s[match[8]].startswith("candidate 0 of g1 (verifier ") and s[match[9]].startswith("candidate 1 of g1")


def test_text_is_escaped_and_images_are_relative(viewed: Path, tmp_path: Path) -> None:
    html = (viewed / "view.html").read_text(encoding="utf-8")
    assert EVIL not in html and "<img src=x" not in html and "</script><img" not in html
    assert "https://" not in html and "http://" not in html
    elsewhere = tmp_path / "elsewhere"
    page, _ = write_viewer(viewed, elsewhere)
    images = [v for c in page_data(page)["contents"] for k, v in c if k == "image"]
    assert images and all(not re.match(r"^[a-z]+:", v) and not v.startswith("/") for v in images)
    assert all((elsewhere / unquote(v)).resolve().is_file() for v in images)


def test_the_page_opens_in_headless_chromium(viewed: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from view_check import check_page, find_chromium

    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    r = check_page(chromium, viewed / "view.html", "kind=match&disagree=1")
    assert r["returncode"] == 0 and r["console"] == []
    assert r["cards"] == 2 and r["disagree_cards"] == 2 and r["first_kind"] == "match"
    assert r["forward_row"] and r["reverse_row"] and r["count"] == "showing 2 of 2 (14 in all)"
    assert '<img src="x"' not in r["dom"] and "&lt;/script&gt;&lt;img src=x onerror" in r["dom"]  # shown as text


def test_a_missing_run_folder_is_one_line_and_creates_nothing(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing"
    assert main(["view", "--run", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"bon: error: {missing}: no such run folder" and not missing.exists()


def test_items_come_from_shards_a_filter_loads(viewed: Path, tmp_path: Path, monkeypatch) -> None:
    """Small shards (per kind, task and judge): view.html holds no item, every item is in one shard, a shard of an earlier, larger build
    is removed, and the browser shows cards gathered from several shards (with an id filter that loads them all)."""
    import analysis.viewer as viewer

    out = tmp_path / "small"
    (out / viewer.SHARDS).mkdir(parents=True)
    (out / viewer.SHARDS / "00099.js").write_text("bonViewShard('00099.js','old',{});\n")
    monkeypatch.setattr(viewer, "SHARD_ITEMS", 3)
    page, data = write_viewer(viewed, out)
    found = read_shards(page)
    assert [s[4] for s in found["index"]["shards"]] == [3, 1, 3, 1, 3, 1, 2] and found["index"]["total"] == 14
    assert sorted(p.name for p in (out / viewer.SHARDS).iterdir()) == [f"{i:05d}.js" for i in range(7)]
    assert EVIL not in page.read_text(encoding="utf-8") and "judge-1" in page.read_text(encoding="utf-8")
    assert len(page_data(page)["items"]) == 14
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from view_check import check_page, find_chromium

    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    pair_id = data["items"][0]["id"]
    r = check_page(chromium, page, f"kind=pair&id={pair_id}")
    assert r["returncode"] == 0 and r["console"] == [] and r["first_kind"] == "pair"
    want = sum(1 for it in data["items"] if it["kind"] == "pair" and pair_id.lower() in it["id"].lower())
    assert want == 3 and r["cards"] == want and r["count"] == f"showing {want} of {want} (14 in all)"
