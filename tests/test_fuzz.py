"""Every reader fuzzed with hypothesis through the real CLI, and one regression test per bug the fuzzing
found. The cases and their oracles live in ``fuzz_cases.py`` (``benchmarks/fuzz.py`` plays thousands of
them); here each reader gets a small example budget (the ``ci`` settings profile), so CI stays fast.

Oracle for every case: exit 0 with the answer the case computed itself, or exit 2 with one stderr line
naming the file or option at fault, or exit 3 where a transient failure stops a run; never a traceback,
a hang, or a change to a file the command must leave alone.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import fuzz_cases  # noqa: E402
from fuzz_cases import Case, make_fixtures, run_case  # noqa: E402

settings.register_profile("ci", max_examples=6, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("long", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
PROFILE = settings.get_profile(os.environ.get("BON_FUZZ_PROFILE", "ci"))  # `long` for a deeper local run


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """A finished tiny study (3 cheap judges, N = 3, two tasks; about 4 s), made once for this module, in a
    warm process (forked children then start in milliseconds)."""
    fuzz_cases.warm_up()
    return make_fixtures(tmp_path_factory.mktemp("fuzz") / "fixture")


class Folders:
    """A fresh, empty folder per hypothesis example (pytest's tmp_path is one per test)."""

    def __init__(self, root: Path):
        self.root, self.n = root, 0

    def __call__(self) -> Path:
        self.n += 1
        folder = self.root / f"case-{self.n}"
        folder.mkdir()
        return folder


def assert_ok(case: Case) -> None:
    kind, detail, outcome = run_case(case)
    assert kind == "ok", f"[{case.reader}] {case.mutation}: {kind}: {detail}\n  bon {' '.join(case.argv)}\n{outcome.stderr[-1500:]}"


@pytest.mark.parametrize("reader", ["config", "mmrb2", "run-folder", "cli-options", "merge", "view", "tradeoff", "concurrency", "score"])
def test_reader_never_tracebacks_lies_hangs_or_damages(reader, fixtures, tmp_path):
    folders = Folders(tmp_path)

    @PROFILE
    @given(st.randoms(use_true_random=False))
    def check(rng):
        assert_ok(fuzz_cases.READERS[reader](rng, folders(), fixtures))

    check()


def test_fetch_reader_never_tracebacks_lies_hangs_or_damages(tmp_path):
    """`bon mmrb2 fetch --from` on damaged local copies of the hub layout: exit 0 with the official
    content and every pair's own image files, or one line naming the pair, field or file (no study needed)."""
    folders = Folders(tmp_path)

    @PROFILE
    @given(st.randoms(use_true_random=False))
    def check(rng):
        assert_ok(fuzz_cases.make_fetch_case(rng, folders()))

    check()


def test_fork_server_and_fresh_process_agree(fixtures, tmp_path):
    """--spawn of benchmarks/fuzz.py: the same case in a fresh `python -m bon.cli` comes out the same."""
    import random

    for i, reader in enumerate(["mmrb2", "config"]):
        forked = fuzz_cases.READERS[reader](random.Random(i), tmp_path / f"f{i}", fixtures)
        spawned = fuzz_cases.READERS[reader](random.Random(i), tmp_path / f"s{i}", fixtures)
        kind_f, _, out_f = run_case(forked)
        kind_s, _, out_s = run_case(spawned, spawn=True)
        assert (kind_f, out_f.rc) == (kind_s, out_s.rc) and kind_f == "ok"


def test_official_accuracy_oracle_matches_the_published_sample(tmp_path):
    """The fuzz oracle is an independent reading of the official rules: on hand-made pairs it gives the
    counts the rules say (forward vs chosen, reverse flipped, empty and absent not counted)."""
    pairs = [{"id": "p1", "chosen": "A"}, {"id": "p2", "chosen": "B"}, {"id": "p3", "chosen": "A"}]
    judged = {"p1": {"forward": [{"judgement": "A"}, {"judgement": "B"}], "reverse": [{"judgement": "B"}]},
              "p2": {"forward": [{"judgement": ""}], "reverse": [{"judgement": "B"}]},
              "p3": {"forward": [{"judgement": "tie"}]}, "nope": {"forward": [{"judgement": "A"}]}}
    assert fuzz_cases.official_accuracy(pairs, judged) == (2, 4)  # p1 twice right; p2 reverse wrong; p3 tie wrong


# --- regressions: each bug the fuzzing found, as the smallest case that showed it -----------------


def _cli(argv, cwd: Path, capfd) -> tuple[int, str]:
    from bon.cli import main

    here = os.getcwd()
    os.chdir(cwd)
    try:
        rc = main(argv)
    finally:
        os.chdir(here)
    err = capfd.readouterr().err
    return rc, err


def _one_error(err: str, *names: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("bon: error: "), err
    assert all(name in lines[0] for name in names), lines[0]
    return lines[0]


def _config(tmp_path: Path, text: str = "", **replace) -> Path:
    """The tiny study as a config file, some keys replaced, some text appended."""
    import yaml

    base = yaml.safe_dump({"out": "never", **fuzz_cases.TINY_STUDY, **replace}, sort_keys=False)
    (tmp_path / "c.yaml").write_text(base + text, encoding="utf-8")
    return tmp_path / "c.yaml"


BOMB = ("x: [&a [l, l], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b], "
        "&d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c], &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d], "
        "&f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]]\n")


@pytest.mark.parametrize("text, replace, named", [
    ("n: 5\n", {}, "'n' appears twice"),                               # PyYAML kept the last value silently
    ("devices: {memory_gb: .nan}\n", {}, "memory_gb"),                 # NaN passed the `<= 0` check
    ("", {"tasks": 5}, "tasks must be a non-empty list"),               # list(5): a TypeError traceback
    ("", {"tasks": {"t2i": 1}}, "tasks must be a non-empty list"),      # a mapping read as its keys
    ("", {"out": ["a"]}, "out must be"),                                # Path(["a"]): a TypeError traceback
    (BOMB, {}, "alias bomb"),                                           # 10**5 items from a 300-byte file
    ("", {"preference": {"margin": float("nan")}}, "margin"),
])
def test_config_values_that_were_accepted_or_crashed(tmp_path, capfd, text, replace, named):
    _config(tmp_path, text, **replace)
    rc, err = _cli(["run", "c.yaml", "--dry-run"], tmp_path, capfd)
    assert rc == 2
    _one_error(err, "c.yaml", named)


def test_config_not_utf8_and_huge_integer(tmp_path, capfd):
    cfg = _config(tmp_path)
    cfg.write_bytes(cfg.read_bytes() + b"# \xff\n")
    rc, err = _cli(["run", "c.yaml", "--dry-run"], tmp_path, capfd)
    assert rc == 2 and "not UTF-8" in _one_error(err, "c.yaml")
    _config(tmp_path, seed=0)
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("seed: 0", "seed: " + "9" * 5000), encoding="utf-8")
    rc, err = _cli(["run", "c.yaml", "--dry-run"], tmp_path, capfd)
    assert rc == 2
    _one_error(err, "c.yaml")


def test_dry_run_counts_a_huge_synthetic_suite_without_building_it(tmp_path, capfd):
    """per_task 10**9 built a billion prompts (a hang); -1 planned nothing without a word."""
    _config(tmp_path, suite={"name": "synthetic", "per_task": 10 ** 9})
    rc, _ = _cli(["run", "c.yaml", "--dry-run"], tmp_path, capfd)
    assert rc == 0
    _config(tmp_path, suite={"name": "synthetic", "per_task": -1})
    rc, err = _cli(["run", "c.yaml", "--dry-run"], tmp_path, capfd)
    assert rc == 2 and "per_task" in _one_error(err, "c.yaml")


def test_dry_run_checks_strategy_options(tmp_path, capfd):
    """--strategy-option aggregate=borda on a knockout passed --dry-run (only the real run refused it)."""
    _config(tmp_path)
    rc, err = _cli(["run", "c.yaml", "--dry-run", "--strategy-option", "aggregate=borda"], tmp_path, capfd)
    assert rc == 2 and "aggregate" in _one_error(err, "--strategy")


@pytest.mark.parametrize("option, named", [("seed=1=2", "seed"), ("seed=" + "9" * 5000, "--judge-option")])
def test_judge_option_values_the_plugin_cannot_take(fixtures, tmp_path, capfd, option, named):
    """int("1=2") in a judge's constructor, and a 5000-digit YAML integer, were tracebacks."""
    import shutil

    shutil.copytree(fixtures.run, tmp_path / "run")
    before = fuzz_cases.snapshot(tmp_path / "run")
    rc, err = _cli(["select", "--run", "run", "--judge", "random", "--judge-option", option], tmp_path, capfd)
    assert rc == 2
    _one_error(err, named)
    assert fuzz_cases.snapshot(tmp_path / "run") == before


def test_torn_prompts_file_is_refused_not_shortened(fixtures, tmp_path, capfd):
    """prompts.jsonl is written whole: a torn last line used to drop that prompt from the study silently."""
    import shutil

    shutil.copytree(fixtures.run, tmp_path / "run")
    prompts = tmp_path / "run/prompts.jsonl"
    prompts.write_bytes(prompts.read_bytes()[:-20])
    rc, err = _cli(["select", "--run", "run", "--judge", "random"], tmp_path, capfd)
    assert rc == 2
    _one_error(err, "prompts.jsonl")


@pytest.mark.parametrize("damage", [b"not a database\n", b"\0" * 4096])
def test_corrupt_store_is_named_and_left_alone(fixtures, tmp_path, capfd, damage):
    """The error line said only "judgment store: file is not a database"; a resume also rewrote
    config.yaml and invocations.json before it failed."""
    import shutil

    shutil.copytree(fixtures.run, tmp_path / "run")
    (tmp_path / "run/judgments.sqlite").write_bytes(damage)
    before = fuzz_cases.snapshot(tmp_path / "run")
    for argv in (["select", "--run", "run", "--judge", "random"], ["run", "run/config.yaml", "--out", "run"]):
        rc, err = _cli(argv, tmp_path, capfd)
        assert rc == 2
        _one_error(err, "judgments.sqlite")
        assert fuzz_cases.snapshot(tmp_path / "run") == before


def test_locked_store_is_transient(monkeypatch, tmp_path, capfd):
    """A store another writer holds past SQLite's wait is exit 3 (rerun), not exit 2 (bad input)."""
    from bon import store

    def locked(self):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(store.JudgmentStore, "_open", locked)
    (tmp_path / "t2i.json").write_text(json.dumps({"pairs": []}), encoding="utf-8")
    rc, err = _cli(["mmrb2", "judge", "--judge", "random", "--bench-dir", ".", "--task", "t2i", "--out-file", "o.json"],
                   tmp_path, capfd)
    assert rc == 3 and "rerun" in _one_error(err, "locked")


def _bench(tmp_path: Path, pairs: list[dict], judged_text: str) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench/t2i.json").write_text(json.dumps({"pairs": pairs}), encoding="utf-8")
    (tmp_path / "j.json").write_text(judged_text, encoding="utf-8")


PAIR = {"response_a": [["text", "a"]], "response_b": [["text", "b"]], "chosen": "A"}


@pytest.mark.parametrize("judged, named", [
    ('{"p1": {"forward": [{"judgement": "A"}]}, "p1": {"forward": [{"judgement": "B"}]}}', "appears twice"),
    ('{"p1": {"forward": [{"judgement": "A"}], "meta": ' + "[" * 100000 + "]" * 100000 + "}}", "j.json"),
    ('{"p1": {"forward": [{"judgement": "A", "metadata": {"n": ' + "9" * 5000 + "}}]}}", "j.json"),
])
def test_judgment_files_with_duplicate_keys_deep_nesting_or_huge_numbers(tmp_path, capfd, judged, named):
    """Python's json kept the last of two equal pair ids silently; 100,000 nested lists and a 5000-digit
    integer raised RecursionError and ValueError (tracebacks)."""
    _bench(tmp_path, [{"id": "p1", **PAIR}], judged)
    rc, err = _cli(["mmrb2", "accuracy", "--bench-dir", "bench", "t2i=j.json"], tmp_path, capfd)
    assert rc == 2
    _one_error(err, "j.json", named)


@pytest.mark.parametrize("pid", [True, 1.5, ["x"]])
def test_pair_ids_must_be_strings(tmp_path, capfd, pid):
    """An id of true, 1.5 or ["x"] was read as the text "True", "1.5", "['x']"."""
    _bench(tmp_path, [{"id": pid, **PAIR}], json.dumps({str(pid): {"forward": [{"judgement": "A"}]}}))
    rc, err = _cli(["mmrb2", "accuracy", "--bench-dir", "bench", "t2i=j.json"], tmp_path, capfd)
    assert rc == 2
    _one_error(err, "t2i.json", "id")


def test_report_names_a_broken_preference_set_file(fixtures, tmp_path, capfd):
    """A torn judgment file of the run's preference set read as "no preference set in this run"."""
    import shutil

    shutil.copytree(fixtures.run, tmp_path / "run")
    broken = sorted((tmp_path / "run/mmrb2/judgments").rglob("*.json"))[0]
    broken.write_text(broken.read_text(encoding="utf-8")[:40], encoding="utf-8")
    rc, err = _cli(["report", "--run", "run", "--out", "rep", "--bootstrap", "100", "--no-power"], tmp_path, capfd)
    assert rc == 2
    _one_error(err, broken.name)


def test_curve_refuses_unscored_candidates_before_judging(fixtures, tmp_path, capfd):
    """A deleted scores.jsonl made `bon curve` judge, then fail with a KeyError traceback."""
    import shutil

    shutil.copytree(fixtures.run, tmp_path / "run")
    (tmp_path / "run/scores.jsonl").unlink()
    before = fuzz_cases.snapshot(tmp_path / "run")
    rc, err = _cli(["curve", "--run", "run", "--judge", "random", "--subsets", "2"], tmp_path, capfd)
    assert rc == 2
    _one_error(err, "scores.jsonl", "no verifier score")
    assert fuzz_cases.snapshot(tmp_path / "run") == before



# --- issue 27: merge, one writer per run folder, readers that check what they read ------------------


@pytest.fixture(scope="module")
def extras(fixtures):
    """The tiny study as two shards, and what `bon view` and `bon tradeoff` find on it (made once)."""
    return fuzz_cases.study_extras(fixtures)


def _shards(extras, tmp_path: Path) -> list[Path]:
    import shutil

    return [Path(shutil.copytree(src, tmp_path / f"s{i}")) for i, src in enumerate(extras.shards)]


def _relabelled_copy(dirs: list[Path]) -> None:
    import shutil

    shutil.rmtree(dirs[1])
    shutil.copytree(dirs[0], dirs[1])
    cfg = dirs[1] / "config.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("shard: 0/2", "shard: 1/2"), encoding="utf-8")
    stats = dirs[1] / "stats.json"
    stats.write_text(stats.read_text(encoding="utf-8").replace('"shard": "0/2"', '"shard": "1/2"'), encoding="utf-8")


def _other_judge_version(dirs: list[Path]) -> None:
    stats = json.loads((dirs[1] / "stats.json").read_text(encoding="utf-8"))
    stats["identities"]["judges"]["random"]["version"] = 2
    (dirs[1] / "stats.json").write_text(json.dumps(stats), encoding="utf-8")


def _cut_last_pick(dirs: list[Path]) -> None:
    lines = (dirs[1] / "picks.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (dirs[1] / "picks.jsonl").write_text("".join(lines[:-1]) + lines[-1][:30], encoding="utf-8")


def _unknown_prompt(dirs: list[Path]) -> None:
    lines = (dirs[1] / "picks.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[0])
    rec["prompt_id"] = "no-such-prompt"
    (dirs[1] / "picks.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n", encoding="utf-8")


def _remove(*globs: str):
    def damage(dirs: list[Path]) -> None:
        for pattern in globs:
            for path in sorted(dirs[1].glob(pattern)):
                if path.is_dir():
                    import shutil

                    shutil.rmtree(path)
                else:
                    path.unlink()
    return damage


def _write(rel: str, data: bytes):
    return lambda dirs: (dirs[1] / rel).write_bytes(data)


@pytest.mark.parametrize("damage, named", [
    (_remove("picks.jsonl"), "picks.jsonl"),                        # merged 32 of 64 picks, exit 0
    (_cut_last_pick, "picks.jsonl"),                                # its last line cut: the same
    (lambda dirs: (dirs[1] / "picks.jsonl").write_text(
        "".join((dirs[1] / "picks.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), encoding="utf-8"),
     "no pick of"),                                                 # a whole line gone
    (_remove("mmrb2/judgments/random"), "judgments"),                # accuracy from half the pairs
    (_remove("scores.jsonl"), "scores.jsonl"),
    (_remove("judgments.sqlite"), "judgments.sqlite"),              # the merged store held half the answers
    (_write("judgments.sqlite", b""), "judgments.sqlite"),          # an empty store: none of the answers paid for
    (_remove("candidates/strong/images/*.png"), "candidate image"),  # merged, then the merged folder failed
    (_relabelled_copy, "another shard"),                            # every pick twice
    (_other_judge_version, "judge random differs"),                 # one version claimed, both in the store
    (_write("judgments.sqlite", b"not a database\n" * 300), "judgments.sqlite"),  # named no shard
    (_write("stats.json", b"[1, 2]"), "JSON object"),               # traceback
    (_write("stats.json", b"{oops"), "stats.json"),                 # traceback
    (_unknown_prompt, "no-such-prompt"),                            # traceback
])
def test_merge_refuses_a_damaged_shard_before_writing(extras, tmp_path, capfd, damage, named):
    """Each case of issue 27 that merged into wrong numbers or a traceback: one line naming the damaged shard's
    folder, exit 2, no output folder (not even half of one) and both shards unchanged."""
    dirs = _shards(extras, tmp_path)
    damage(dirs)
    before = [fuzz_cases.snapshot(d) for d in dirs]
    rc, err = _cli(["merge", "--run", "s0", "--run", "s1", "--out", "merged"], tmp_path, capfd)
    assert rc == 2
    _one_error(err, "s1", named)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s0", "s1"]  # no merged folder, no temporary one
    assert [fuzz_cases.snapshot(d) for d in dirs] == before


def test_merge_of_read_only_shards_is_the_unsharded_study(fixtures, extras, tmp_path, capfd):
    """Shards are only read (their stores opened read-only: no WAL files appear beside them); the merged folder
    holds the unsharded study's results."""
    import stat

    dirs = _shards(extras, tmp_path)
    before = [fuzz_cases.snapshot(d) for d in dirs]
    for d in dirs:
        for path in [d, *d.rglob("*")]:
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        rc, err = _cli(["merge", "--run", "s1", "--run", "s0", "--out", "merged"], tmp_path, capfd)
        assert rc == 0, err
        assert [fuzz_cases.snapshot(d) for d in dirs] == before
        assert not [p for d in dirs for p in d.rglob("*.sqlite-*")]
    finally:
        for d in dirs:
            for path in [d, *d.rglob("*")]:
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
    assert fuzz_cases._same_results(fixtures, "merged/results.csv")(fuzz_cases.Case("merge", "", [], tmp_path, frozenset()), "") is None


def test_a_second_writer_refuses_at_once_and_readers_never_wait(fixtures, tmp_path, capfd):
    """While a process holds a run folder's writer lock, `bon select` (a writer) exits 2 naming its pid and
    command and changes nothing; `bon view --out elsewhere` and `bon leaderboard` (readers) run as usual."""
    import shutil

    from bon.runlock import writer_lock

    shutil.copytree(fixtures.run, tmp_path / "run")
    with writer_lock(tmp_path / "run", "bon demo"):
        before = fuzz_cases.snapshot(tmp_path / "run")
        rc, err = _cli(["select", "--run", "run", "--judge", "random"], tmp_path, capfd)
        assert rc == 2
        _one_error(err, "another bon process", f"pid {os.getpid()}", "bon demo")
        assert fuzz_cases.snapshot(tmp_path / "run") == before
        assert _cli(["view", "--run", "run", "--out", "v"], tmp_path, capfd)[0] == 0
        assert _cli(["leaderboard", "--run", "run", "--task", "t2i", "--generator", "strong"], tmp_path, capfd)[0] == 0
    assert not (tmp_path / "run/.bon-writer.lock").exists()


def test_a_lock_left_by_a_killed_process_is_taken_over(fixtures, tmp_path, capfd):
    import shutil
    import subprocess
    import sys

    shutil.copytree(fixtures.run, tmp_path / "run")
    holder = subprocess.Popen([sys.executable, "-c", fuzz_cases.WRITER_HOLDER, str(tmp_path / "run/.bon-writer.lock"), "60"],
                              stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    rc, err = _cli(["select", "--run", "run", "--judge", "random"], tmp_path, capfd)
    assert rc == 2 and f"pid {holder.pid}" in _one_error(err, "another bon process")
    holder.kill()  # killed: its lock file stays, its lock does not
    holder.wait()
    holder.stdout.close()
    assert (tmp_path / "run/.bon-writer.lock").exists()
    rc, err = _cli(["select", "--run", "run", "--judge", "random"], tmp_path, capfd)
    assert rc == 0, err
    assert not (tmp_path / "run/.bon-writer.lock").exists()


def test_two_demos_into_one_folder(tmp_path):
    """Two `bon demo --out SAME` at once: the second exits 2 at once naming the first; the finished folder
    equals an uninterrupted run's (no judge paid twice, no duplicate candidate lines)."""
    import subprocess
    import sys
    import time

    from scale_helpers import assert_same_run

    argv = [sys.executable, "-m", "bon.cli", "demo", "--prompts", "1", "--n", "2"]
    env = {**os.environ, "BON_QUIET": "1", "MPLBACKEND": "Agg", "PYTHONPATH": os.pathsep.join([str(fuzz_cases.ROOT), os.environ.get("PYTHONPATH", "")])}
    first = subprocess.Popen([*argv, "--out", "same"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / "same/.bon-writer.lock"
    deadline = time.monotonic() + 120
    while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lock.exists(), "the first demo never took the lock"
    started = time.monotonic()
    second = subprocess.run([*argv, "--out", "same"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    refused_in = time.monotonic() - started
    assert first.wait(timeout=300) == 0, first.stderr.read()
    first.stderr.close()
    assert second.returncode == 2
    line = second.stderr.strip()
    assert "\n" not in line and f"pid {first.pid}" in line and "bon demo" in line, line
    assert first.poll() == 0 and refused_in < 60
    alone = subprocess.run([*argv, "--out", "alone"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert alone.returncode == 0, alone.stderr
    assert_same_run(tmp_path / "same", tmp_path / "alone")
    stats = [json.loads((tmp_path / d / "stats.json").read_text(encoding="utf-8")) for d in ("same", "alone")]
    assert [s["judges"][j]["calls_made"] for s in stats for j in sorted(s["judges"])][:9] == \
        [s["judges"][j]["calls_made"] for s in stats for j in sorted(s["judges"])][9:]


def _edit_n(run: Path, n: int) -> None:
    cfg = run / "config.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("  n: 3\n", f"  n: {n}\n", 1), encoding="utf-8")


@pytest.mark.parametrize("argv, damage, named", [
    (["tradeoff", "--run", "run", "--judge", "random", "--bootstrap", "100"], lambda r: _edit_n(r, 2), "config.yaml"),  # exit 0, other numbers
    (["tradeoff", "--run", "run", "--judge", "random", "--bootstrap", "100"], lambda r: (r / "scores.jsonl").unlink(), "scores.jsonl"),  # TypeError
    (["leaderboard", "--run", "run", "--task", "t2i", "--generator", "strong"], lambda r: _edit_n(r, 2), "config.yaml"),
    (["report", "--run", "run", "--out", "rep", "--bootstrap", "100", "--no-power"], lambda r: _edit_n(r, 4), "config.yaml"),
    (["view", "--run", "run", "--out", "v"], lambda r: (r / "picks.jsonl").write_text(
        (r / "picks.jsonl").read_text(encoding="utf-8").replace("[[0, 1, ", "[[0, 7, ", 1), encoding="utf-8"), "picks.jsonl"),
    (["view", "--run", "run", "--out", "v"], lambda r: (r / "picks.jsonl").write_text(
        (r / "picks.jsonl").read_text(encoding="utf-8") * 2, encoding="utf-8"), "a second pick"),  # shown twice
    (["view", "--run", "run", "--out", "v"], lambda r: (r / "stats.json").write_text("[]"), None),  # exit 0: see below
])
def test_readers_check_what_they_read(fixtures, tmp_path, capfd, argv, damage, named):
    import shutil

    shutil.copytree(fixtures.run, tmp_path / "run")
    damage(tmp_path / "run")
    before = fuzz_cases.snapshot(tmp_path / "run")
    rc, err = _cli(argv, tmp_path, capfd)
    if named is None:
        assert rc == 0, err
    else:
        assert rc == 2
        _one_error(err, named)
        assert fuzz_cases.snapshot(tmp_path / "run") == before


@pytest.mark.parametrize("stats", [None, '{"identities": {"judges": {"random": {"edited": 1}}}}'])
def test_view_finds_the_verdicts_without_or_with_an_edited_stats_json(fixtures, extras, tmp_path, capfd, stats):
    """Every match verdict used to show as "not in the judgment store"; the run folder (store included) is
    only read: no WAL files appear, no file changes."""
    import shutil

    shutil.copytree(fixtures.run, tmp_path / "run")
    if stats is None:
        (tmp_path / "run/stats.json").unlink()
    else:
        (tmp_path / "run/stats.json").write_text(stats, encoding="utf-8")
    before = fuzz_cases.snapshot(tmp_path / "run")
    from bon.cli import main

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["view", "--run", "run", "--out", "v"]) == 0
    finally:
        os.chdir(here)
    printed = capfd.readouterr().out
    assert fuzz_cases._view_summary(printed) == extras.view_summary
    assert "not in the judgment store" not in fuzz_cases.view_text(tmp_path / "v")
    assert fuzz_cases.snapshot(tmp_path / "run") == before and not list((tmp_path / "run").glob("*.sqlite-*"))


def test_tradeoff_without_stats_json_keeps_every_setting(fixtures, extras, tmp_path, capfd):
    """The cascade settings silently went missing without stats.json (their cheap judge is chosen by cost);
    now the costs are rebuilt from the store and the records are the finished study's."""
    import shutil

    shutil.copytree(fixtures.run, tmp_path / "run")
    (tmp_path / "run/stats.json").unlink()
    from bon.runfolder import RunFolder
    from bon.recorded import read_study_config, recorded_or_rebuilt_stats

    run = RunFolder(tmp_path / "run", existing=True)
    rebuilt = recorded_or_rebuilt_stats(run, read_study_config(run))
    recorded = json.loads((fixtures.run / "stats.json").read_text(encoding="utf-8"))
    assert {j: s["calls_made"] for j, s in rebuilt["judges"].items()} == {j: s["calls_made"] for j, s in recorded["judges"].items()}
    rc, err = _cli(["tradeoff", "--run", "run", *fuzz_cases.TRADEOFF_ARGS, "--out", "t", "--json", "t.json"], tmp_path, capfd)
    assert rc == 0, err
    assert fuzz_cases._tradeoff_answer(tmp_path / "t.json") == extras.tradeoff


def test_report_md_escapes_html_and_markdown_in_labels(fixtures, tmp_path, capfd):
    """A judge label holding HTML or a Markdown link was copied into report.md as markup."""
    import shutil

    from bon.content import slug

    run = Path(shutil.copytree(fixtures.run, tmp_path / "run"))
    evil = "<img src=x onerror=alert(1)>[x](http://evil)"
    for rel in ("picks.jsonl", "config.yaml", "stats.json", "results.csv"):
        text = (run / rel).read_text(encoding="utf-8")
        quoted = json.dumps(evil)[1:-1] if rel.endswith(("json", "jsonl")) else f"'{evil}'" if rel == "config.yaml" else f'"{evil}"'
        text = text.replace('"random"' if rel.endswith(("json", "jsonl")) else "random", f'"{quoted}"' if rel.endswith(("json", "jsonl")) else quoted)
        (run / rel).write_text(text, encoding="utf-8")
    (run / "mmrb2/judgments/random").rename(run / "mmrb2/judgments" / slug(evil))
    rc, err = _cli(["report", "--run", "run", "--out", "rep", "--bootstrap", "100", "--no-power"], tmp_path, capfd)
    assert rc == 0, err
    text = (tmp_path / "rep/report.md").read_text(encoding="utf-8")
    assert "onerror" in text and "<img" not in text and "[x](http://evil)" not in text, [ln for ln in text.splitlines() if "<img" in ln]
