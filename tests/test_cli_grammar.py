"""One CLI grammar (issue 11.5) and the CLI items of issue 12: one-line errors, validate before writing,
picks files that never overwrite each other, cumulative accounting, progress on non-terminals."""

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from bon.cli import main

SMALL = ["--prompts", "2", "--n", "4", "--seed", "5"]
ROOT = Path(__file__).resolve().parents[1]


def _strict(path: Path):
    def refuse(constant):
        raise ValueError(f"{path}: non-standard JSON constant {constant}")
    return json.loads(path.read_text(), parse_constant=refuse)


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line_error(capsys, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "Usage:" not in err, err
    assert err.startswith("bon: error:"), err
    for w in words:
        assert w in err, (w, err)
    return err


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("grammar") / "run"
    assert main(["demo", "--out", str(out), *SMALL]) == 0
    return out


# --- the README's command table is the commands' own --help -------------------------------------


def test_readme_command_table_matches_help():
    from bon.cli.usage import BEGIN, END, table

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert BEGIN in readme and END in readme, "README.md lost its generated command table markers"
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block == table(), "README command table is stale: paste the output of `python -m bon.cli.usage`"


def test_every_option_in_the_table_is_in_help(capsys):
    """The generator reads click's objects; check it against the rendered --help text too."""
    from bon.cli import app
    from bon.cli.usage import commands, synopsis

    for path, cmd, ctx in commands(app):
        assert main([*path.split()[1:], "--help"]) == 0
        shown = capsys.readouterr().out
        for flag in re.findall(r"--[a-z][a-z0-9-]*", synopsis(path, cmd, ctx)):
            assert flag in shown, (path, flag)


def _all_commands():
    from bon.cli import app
    from bon.cli.usage import commands

    return [(path, cmd) for path, cmd, _ in commands(app)]


@pytest.mark.parametrize("path, cmd", [pytest.param(path, cmd, id=path) for path, cmd in _all_commands()])
def test_every_command_follows_the_grammar(path, cmd):
    """Options go to a named plugin kind (no bare --option); --run names a folder; --json names a file."""
    import click

    options = {o: p for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
    assert "--option" not in options, f"{path}: use --judge-option/--strategy-option/--generator-option/--verifier-option"
    if isinstance(options.get("--run"), click.Option) and isinstance(options["--run"].type, click.Path):
        assert options["--run"].type.dir_okay, f"{path}: --run names a folder"
    if isinstance(options.get("--json"), click.Option) and isinstance(options["--json"].type, click.Path):
        assert options["--json"].type.file_okay, f"{path}: --json names a file"
    for flag in options:
        if flag.endswith("-option"):
            assert flag[2:-len("-option")] in ("judge", "strategy", "generator", "verifier"), f"{path}: {flag}"


@pytest.mark.parametrize("path, cmd", [pytest.param(path, cmd, id=path) for path, cmd in _all_commands()])
def test_every_option_says_what_it_takes(path, cmd):
    """Metavars name the thing (DIR, FILE, SPEC, TASK, N...), never click's type names; --run/--out/--bench-dir
    are DIR, --json/--out-file/--predictions FILE, --judge SPEC."""
    import click

    from bon.cli.usage import synopsis

    line = synopsis(path, cmd, click.Context(cmd, info_name=path.split()[-1]))
    assert not re.search(r"\b(TEXT|PATH|INTEGER|FLOAT|RANGE|BOOLEAN)\b", line), line
    expected = {"--run": "DIR", "--out": "DIR", "--bench-dir": "DIR", "--json": "FILE", "--out-file": "FILE",
                "--predictions": "FILE", "--judge": "SPEC"}
    for flag, word in re.findall(r"(--[a-z-]+) ([A-Z][A-Z_=/]*)", line):
        if flag in expected:  # a value may be qualified, as report's --predictions JUDGE=FILE
            assert word.rpartition("=")[2] == expected[flag], (path, flag, word)


def test_study_commands_follow_the_grammar():
    from bon.cli import app

    def flags(name):
        return {o for p in app.commands[name].params for o in p.opts}

    for name in ("verify", "select", "curve"):
        assert "--run" in flags(name) and "--json" in flags(name), name
    for name in ("select", "curve"):
        assert {"--judge", "--label", "--judge-option", "--strategy-option"} <= flags(name)
        assert "--option" not in flags(name)
    assert {"--generator-option", "--label", "--out", "--json"} <= flags("generate")
    assert {"--verifier-option", "--label"} <= flags("verify")
    assert {"--limit", "--strategy-option", "--json"} <= flags("run")


# --- one line for bad input, and nothing written ------------------------------------------------


@pytest.mark.parametrize("argv, words", [
    (["demo", "--prompts", "0"], ["--prompts"]),
    (["demo", "--n", "0"], ["--n", "0 is not in the range x>=2"]),  # one minimum for 0 and 1
    (["demo", "--n", "1"], ["--n", "1 is not in the range x>=2"]),
    (["demo", "--strategy", "no-such-strategy"], ["no-such-strategy"]),
    (["demo", "--strategy-option", "seeding=sideways"], ["seeding"]),
    (["demo", "--strategy-option", "oops"], ["--strategy-option", "KEY=VALUE"]),
    (["demo", "--no-such-flag"], ["--no-such-flag"]),
])
def test_bad_demo_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, words):
    out = tmp_path / "never"
    assert main([argv[0], "--out", str(out), *argv[1:]]) == 2
    _one_line_error(capsys, *words)
    assert not out.exists()


def test_select_on_a_missing_folder_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nonexist"
    for cmd in (["select", "--judge", "random"], ["curve", "--judge", "random"], ["verify", "--verifier", "synthetic"]):
        assert main([cmd[0], "--run", str(missing), *cmd[1:]]) == 2
        _one_line_error(capsys, "nonexist")
        assert not missing.exists(), cmd


def test_bad_arguments_leave_a_finished_study_byte_identical(study, tmp_path, capsys):
    before = _snapshot(study)
    bad = [
        ["select", "--run", str(study), "--judge", "no-such-judge"],
        ["select", "--run", str(study), "--judge", "random", "--n", "9"],
        ["select", "--run", str(study), "--judge", "random", "--n", "1"],
        ["select", "--run", str(study), "--judge", "random", "--strategy", "round-robin", "--strategy-option", "aggregate=nope"],
        ["select", "--run", str(study), "--judge", "random", "--json", str(tmp_path)],
        ["curve", "--run", str(study), "--judge", "no-such-judge"],
        ["curve", "--run", str(study), "--judge", "random", "--strategy", "nope"],
        ["verify", "--run", str(study), "--verifier", "no-such-verifier"],
        ["demo", "--out", str(study), "--prompts", "2", "--n", "1", "--seed", "5"],
        ["demo", "--out", str(study), "--prompts", "2", "--n", "4", "--seed", "5", "--strategy", "nope"],
    ]
    for argv in bad:
        assert main(argv) == 2, argv
        _one_line_error(capsys)
    assert _snapshot(study) == before


def test_select_n_beyond_the_study_is_refused(study, capsys):
    assert main(["select", "--run", str(study), "--judge", "random", "--n", "9"]) == 2
    _one_line_error(capsys, "--n 9", "N = 4")
    assert not list((study / "picks").glob("*__n9.jsonl")) if (study / "picks").exists() else True


# --- picks files: one per judge, strategy setting and n ------------------------------------------


def test_picks_files_name_the_aggregate_and_never_overwrite(study, tmp_path):
    from bon.runfolder import RunFolder

    run = RunFolder(study, existing=True)
    for aggregate in ("copeland", "borda"):
        j = tmp_path / f"{aggregate}.json"
        assert main(["select", "--run", str(study), "--judge", "scene-full", "--strategy", "round-robin",
                     "--strategy-option", f"aggregate={aggregate}", "--json", str(j)]) == 0
        _strict(j)
    copeland, borda = run.picks_file("scene-full", "round-robin"), run.picks_file("scene-full", "round-robin-borda")
    assert copeland.exists() and borda.exists()
    assert {json.loads(line)["strategy"] for line in borda.read_text().splitlines()} == {"round-robin-borda"}
    assert {json.loads(line)["strategy"] for line in copeland.read_text().splitlines()} == {"round-robin"}
    assert main(["select", "--run", str(study), "--judge", "scene-full", "--n", "2"]) == 0
    assert run.picks_file("scene-full", "knockout", 2).exists()
    assert {copeland, borda} <= set(run.picks_files())


def test_leaderboard_finds_select_picks(study, capsys):
    assert main(["select", "--run", str(study), "--judge", "scene-full", "--strategy", "round-robin"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--run", str(study), "--task", "t2i", "--generator", "strong", "--strategy", "round-robin"]) == 0
    shown = capsys.readouterr().out
    assert "(round-robin)" in shown and "scene-full" in shown
    assert main(["leaderboard", "--run", str(study), "--task", "t2i", "--generator", "strong"]) == 0  # the study's own
    assert "(round-robin)" not in capsys.readouterr().out


def test_judge_options_and_labels_reach_select_and_curve(study, tmp_path):
    j = tmp_path / "s.json"
    assert main(["select", "--run", str(study), "--judge", "random", "--judge-option", "seed=11", "--json", str(j)]) == 0
    data = _strict(j)
    assert data["judge"] == "random[seed=11]" and data["calls_made"] > 0  # another setting is another judge
    assert main(["select", "--run", str(study), "--judge", "random", "--label", "dice", "--json", str(j)]) == 0
    assert _strict(j)["judge"] == "dice"
    assert main(["curve", "--run", str(study), "--judge", "random", "--judge-option", "seed=11", "--subsets", "2",
                 "--json", str(j)]) == 0
    assert _strict(j)["judge"] == "random[seed=11]"


def test_json_outputs_are_strict(study, tmp_path):
    j = tmp_path / "d.json"
    copy = tmp_path / "copy"
    shutil.copytree(study, copy)
    assert main(["demo", "--out", str(copy), *SMALL, "--json", str(j)]) == 0
    data = _strict(j)
    assert data["results"] and data["correlations"]
    assert main(["plugins", "--json", str(j)]) == 0
    assert "knockout" in _strict(j)["strategies"]
    for f in (copy / "stats.json", copy / "invocations.json"):
        _strict(f)


# --- resume message, cumulative accounting, progress lines -------------------------------------


def test_resume_says_what_it_found(study, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BON_QUIET", raising=False)
    copy = tmp_path / "copy"
    shutil.copytree(study, copy)
    capsys.readouterr()
    assert main(["demo", "--out", str(copy), *SMALL]) == 0
    err = capsys.readouterr().err
    m = re.search(r"resuming: ([\d,]+) candidates, ([\d,]+) verifier scores, ([\d,]+) judgments found", err)
    assert m, err
    assert int(m.group(1).replace(",", "")) == 2 * 4 * 2 * 4 * 2  # generators x tasks x (BoN + held-out) prompts x N
    assert int(m.group(3).replace(",", "")) > 0
    stats = json.loads((copy / "stats.json").read_text())
    assert stats["invocations"] == 2
    first = json.loads((study / "stats.json").read_text())
    for name, s in stats["judges"].items():
        assert s["last_invocation"]["calls_made"] == 0
        assert s["total"]["calls_made"] == first["judges"][name]["total"]["calls_made"] > 0
        assert s["total"]["judge_seconds"] == pytest.approx(first["judges"][name]["total"]["judge_seconds"], abs=1e-3)
        assert s["total"]["wall_seconds"] >= first["judges"][name]["total"]["wall_seconds"]
    ledger = _strict(copy / "invocations.json")["invocations"]
    assert [e["command"] for e in ledger] == ["demo", "demo"]
    assert stats["timings_s"]["generate"] >= stats["timings_last_invocation_s"]["generate"]


def test_progress_prints_lines_when_not_a_terminal(monkeypatch, capsys):
    from bon import progress

    monkeypatch.delenv("BON_QUIET", raising=False)
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    with progress.bar("verify (x)", 3) as b:
        for _ in range(3):
            b.advance()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "verify (x): 1/3 (0 s)" and lines[-1].startswith("verify (x): 3/3 done in")
    monkeypatch.setenv("BON_QUIET", "1")
    with progress.bar("quiet", 2) as b:
        b.advance(2)
    assert capsys.readouterr().err == ""


def test_run_limit_takes_the_first_prompts_per_task(tmp_path):
    out = tmp_path / "quick"
    j = tmp_path / "quick.json"
    rc = main(["run", str(ROOT / "configs" / "demo.yaml"), "--out", str(out), "--limit", "1", "--json", str(j)])
    assert rc == 0
    prompts = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]
    tasks = [p["task"] for p in prompts]
    assert len(prompts) == 8 and all(tasks.count(t) == 2 for t in set(tasks))  # 1 Best-of-N + 1 held out per task
    assert _strict(j)["results"]


def test_install_hints_name_the_checkout():
    """`pip install '.[x]'` cannot work (bon is installed from the checkout): hints say '.[x]'."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        if re.search(r"pip install ['\"]?bon\[", path.read_text(encoding="utf-8", errors="ignore")):
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders


def test_readme_mentions_the_mmrb2_folder_variable():
    assert "BON_MMRB2_DIR" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_config_errors_write_nothing_and_the_fixed_config_runs(tmp_path, capsys):
    """Validate, then act: a suite option typo or a bad strategy value leaves no folder behind, so the
    corrected config is not refused as 'another study'."""
    import yaml

    out = tmp_path / "study"
    good = {"out": str(out), "seed": 1, "n": 2, "tasks": ["t2i"], "suite": {"name": "synthetic", "per_task": 1},
            "preference": {"prompts_per_task": 1}, "verifier": "synthetic", "generators": [{"name": "synthetic", "label": "g"}],
            "judges": ["random", "scene-full", "colour-hist"]}
    bad_suite = {**good, "suite": {"name": "synthetic", "per_tsk": 1}}
    bad_strategy = {**good, "strategy": {"name": "knockout", "options": {"seeding": "sideways"}}}
    for i, raw in enumerate((bad_suite, bad_strategy, {**good, "n": 1})):
        cfg = tmp_path / f"bad{i}.yaml"
        cfg.write_text(yaml.safe_dump(raw))
        assert main(["run", str(cfg)]) == 2
        _one_line_error(capsys)
        assert not out.exists(), raw
    cfg = tmp_path / "good.yaml"
    cfg.write_text(yaml.safe_dump(good))
    assert main(["run", str(cfg)]) == 0


def test_verify_with_a_label_writes_its_own_scores_and_json(study, tmp_path):
    j = tmp_path / "v.json"
    assert main(["verify", "--run", str(study), "--verifier", "synthetic", "--label", "again", "--json", str(j)]) == 0
    data = _strict(j)
    assert data["label"] == "again" and Path(data["scores_file"]).name == "scores_again.jsonl"
    assert (study / "scores_again.jsonl").exists()


def test_version_unknown_command_and_a_folder_that_is_no_run(capsys):
    assert main(["--version"]) == 0 and capsys.readouterr().out.strip().startswith("bon ")
    assert main(["frobnicate"]) == 2
    assert _one_line_error(capsys, "No such command 'frobnicate'").count("bon:") == 1
    from pathlib import Path

    assert main(["view", "--run", str(Path(__file__).resolve().parents[1] / "configs")]) == 2
    _one_line_error(capsys, "configs: not a run folder")


def test_option_values_are_yaml_but_a_hash_is_text():
    """``K=V`` values are YAML (numbers, lists), except that a ``#`` at the start or after a space is part of
    the value (a path such as ``replay:runs/try #2.jsonl``, a colour), never a comment cutting it short."""
    from bon.cli.common import parse_options
    from bon.errors import BonError

    got = parse_options(("n=3", "xs=[a, b]", "grader=replay:runs/try #2.jsonl", "colour=#ff0000", "tag=a#b", "empty="))
    assert got == {"n": 3, "xs": ["a", "b"], "grader": "replay:runs/try #2.jsonl", "colour": "#ff0000", "tag": "a#b",
                   "empty": None}
    with pytest.raises(BonError, match="not valid YAML"):
        parse_options(("xs=[a, b",))


def test_progress_lines_give_the_rate_and_the_time_left():
    from bon.progress import progress_line

    assert progress_line("judge", 40_000, 100_000, 12.0) == "judge: 40,000/100,000 (12 s, 3,333/s, about 18 s left)"
    assert progress_line("judge", 3, 1_000, 2.0) == "judge: 3/1,000 (2 s, 1.5/s, about 11 min left)"
    assert progress_line("judge", 5, 5, 2.0) == "judge: 5/5 (2 s, 2.5/s)"
    assert progress_line("judge", 1, 3, 0.2) == "judge: 1/3 (0 s)"  # no rate before a second has passed
