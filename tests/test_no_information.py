"""A judge whose answers carry no information (every verdict missing, or every match a coin toss) is
never "best": not in the leaderboard, the console summary, the markdown or the HTML report; it is listed
with its reason instead (issue 28, case 5)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from analysis.bon_metrics import load_prompt_level, no_information, pick_informed, results_table
from analysis.leaderboard import format_leaderboard, run_leaderboard
from analysis_run import make_run
from bon.cli import main

SILENT, COIN = "judge-5", "judge-4"  # the two most accurate pickers of make_run: best but for this


def _run_with_silent_judges(tmp_path: Path) -> Path:
    run = make_run(tmp_path / "run", tasks=("t2i",), generators=("g1",), prompts=8)
    picks = [json.loads(line) for line in (run / "picks.jsonl").read_text().splitlines()]
    for pk in picks:
        if pk["judge"] == SILENT:  # its picks are the seeded coin's: every call came back missing
            pk["missing"] = pk["calls"]
            pk["matches"] = [[0, 1, 1, "no-verdict"], [1, 2, 1, "no-verdict"]]
        elif pk["judge"] == COIN:  # every match a tie the coin decided
            pk["matches"] = [[0, 1, 0, "coin"], [0, 2, 0, "coin"]]
    (run / "picks.jsonl").write_text("".join(json.dumps(p) + "\n" for p in picks))
    return run


def test_the_rule_for_having_information() -> None:
    assert not pick_informed({"calls": 6, "missing": 6, "matches": [[0, 1, 0, "agree"]]})
    assert not pick_informed({"calls": 6, "missing": 0, "matches": [[0, 1, 0, "coin"], [0, 2, 2, "no-verdict"]]})
    assert pick_informed({"calls": 6, "missing": 5, "matches": [[0, 1, 0, "coin"], [0, 2, 2, "majority"]]})
    rows = pd.DataFrame({"calls": [6, 6], "missing": [6, 6], "informed": [False, False]})
    assert no_information(rows) == "no information: every verdict missing (12 of 12 calls)"
    assert no_information(rows.assign(missing=[0, 0])) == "no information: every match a tie (decided by the seeded coin)"
    assert no_information(rows.assign(informed=[False, True], missing=[0, 0])) is None


def test_a_judge_with_no_information_is_never_best(tmp_path: Path, capsys) -> None:
    run = _run_with_silent_judges(tmp_path)
    prompts = load_prompt_level(run)
    bon = prompts.groupby("judge")["pick_score"].mean()
    assert bon.idxmax() in (SILENT, COIN)  # without the rule one of them would be named best

    table = run_leaderboard(run, "t2i", "g1", bootstrap=100)
    top = table.iloc[0]
    assert top.judge not in (SILENT, COIN) and top.no_information == "" and top.tied_with_best
    last = table[table.judge.isin([SILENT, COIN])]
    assert list(last["rank"]) == [len(table) - 1, len(table)] and not last.tied_with_best.any()
    assert set(last.no_information) == {"no information: every verdict missing (48 of 48 calls)",
                                       "no information: every match a tie (decided by the seeded coin)"}
    text = format_leaderboard(table)
    rows = [line.split() for line in text.splitlines()[2:]]
    assert [r[1] for r in rows if "best" in r] == [top.judge]

    # the console summary of `bon run`
    from bon.cli.study_commands import _summary, _uninformed

    results = results_table([json.loads(x) for x in (run / "picks.jsonl").read_text().splitlines()],
                            {(s["generator"], s["prompt_id"], s["index"]): s for s in
                             map(json.loads, (run / "scores.jsonl").read_text().splitlines())}, {}, 4)
    correlations = pd.DataFrame([{"task": "t2i", "generator": "g1", "n_judges": 6, "pearson_r": 0.5, "spearman_rho": 0.5}])
    _summary(correlations, results, run, _uninformed(SimpleNamespace(run=SimpleNamespace(root=run), results=results)))
    shown = capsys.readouterr().out
    best_line = next(line for line in shown.splitlines() if line.startswith("t2i"))
    assert SILENT not in best_line and COIN not in best_line and top.judge in best_line
    assert f"{SILENT} (knockout): no information: every verdict missing" in shown

    # the report, markdown and HTML
    assert main(["report", "--run", str(run), "--bootstrap", "200"]) == 0
    md = (run / "report.md").read_text()
    assert f"{SILENT} (Text-to-image / g1): no information: every verdict missing" in md
    html = (run / "report.html").read_text()
    assert f"best {top.judge}," in html and f"best {SILENT}" not in html and f"best {COIN}" not in html
    assert "no information: every match a tie" in html


def test_a_pointwise_judge_whose_scores_are_all_equal_picked_by_coin() -> None:
    """Equal reward-model scores leave the choice to the seeded coin: the pick says so (``coin``) and
    carries no information; one score apart, or a single candidate, it does."""
    from bon.selection.base import Pick

    def recorded(scores: list) -> dict:
        return Pick("p1", "g1", 0, scores=scores).as_dict()

    for scores in ([0.5, 0.5, 0.5], [0.5, None, 0.5]):
        assert recorded(scores)["coin"] is True and not pick_informed(recorded(scores))
    for scores in ([0.5, 0.7, 0.5], [0.5], [None, 0.4, None]):
        assert "coin" not in recorded(scores) and pick_informed(recorded(scores))
    assert "coin" not in Pick("p1", "g1", 2).as_dict()  # a bracket's pick: its matches say it
