"""`bon run --shard I/K` + `bon merge` writes what the unsharded run writes (K = 2 and K = 3)."""

import json
import shutil

import pytest
import yaml

from bon.cli import main
from scale_helpers import assert_same_run, tiny_demo_config


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    config = tiny_demo_config(root)  # 2 prompts per task x 4 tasks: 8 Best-of-N + 8 held-out prompts
    assert main(["run", str(config), "--out", str(root / "full")]) == 0
    return root, config


def _run_shards(root, config, k):
    dirs = []
    for i in range(k):
        dirs.append(root / f"k{k}_s{i}")
        assert main(["run", str(config), "--shard", f"{i}/{k}", "--out", str(dirs[-1])]) == 0
    return dirs


@pytest.mark.parametrize("k", [2, 3])  # 8 prompts: 3 does not divide them
def test_merged_shards_equal_the_unsharded_run(study, k):
    root, config = study
    dirs = _run_shards(root, config, k)
    picks = [len((d / "picks.jsonl").read_text().splitlines()) for d in dirs]
    assert all(picks) and len(set(picks)) == (1 if k == 2 else 2)  # every shard did a share, K=3 uneven
    merged = root / f"merged{k}"
    assert main(["merge", *[a for d in reversed(dirs) for a in ("--run", str(d))], "--out", str(merged)]) == 0  # any order of folders
    assert_same_run(merged, root / "full")
    assert (merged / "report.md").exists() and (merged / "stats.json").exists()
    full, ours = (json.loads((d / "stats.json").read_text()) for d in (root / "full", merged))
    assert ours["shared_grader"] == full["shared_grader"] != {}  # the leakage guard leaves the same twins out
    assert (merged / "correlations.csv").read_text() == (root / "full" / "correlations.csv").read_text()


def test_merge_refuses_other_studies_and_missing_shards(study, tmp_path, capsys):
    root, config = study
    dirs = sorted(root.glob("k2_s*")) or _run_shards(root, config, 2)
    other = tmp_path / "other"
    shutil.copytree(dirs[1], other)
    recorded = yaml.safe_load((other / "config.yaml").read_text())
    recorded["study"]["seed"] += 1
    (other / "config.yaml").write_text(yaml.safe_dump(recorded))
    assert main(["merge", "--run", str(dirs[0]), "--run", str(other), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "different study" in err and "seed" in err
    assert main(["merge", "--run", str(dirs[0]), "--out", str(tmp_path / "m")]) == 2
    assert "exactly once" in capsys.readouterr().err
    assert main(["run", str(config), "--shard", "2/2", "--out", str(tmp_path / "x")]) == 2
    assert "I/K" in capsys.readouterr().err


def test_shard_and_executor_settings_are_checked_in_one_line():
    from bon.config import parse_config
    from bon.demo import demo_raw
    from bon.errors import BonError
    from bon.shards import parse_shard

    assert parse_shard("2/3") == (2, 3) and parse_shard(None) is None
    for bad in ("3/3", "-1/2", "1", "a/b", "0/0"):
        with pytest.raises(BonError, match="I/K"):
            parse_shard(bad)
    cfg = parse_config({**demo_raw(), "executor": {"name": "ray", "options": {"workers": 4, "address": "auto"}}}, where="c.yaml")
    assert cfg.executor == {"name": "ray", "options": {"workers": 4, "address": "auto"}}
    with pytest.raises(BonError, match=r"c.yaml: executor: unknown option\(s\) gpus .*known: address"):
        parse_config({**demo_raw(), "executor": {"name": "ray", "options": {"gpus": 1}}}, where="c.yaml")
    with pytest.raises(BonError, match="c.yaml: executor: expected a mapping with name one of local, ray"):
        parse_config({**demo_raw(), "executor": {"name": "dask"}}, where="c.yaml")


def test_a_second_merge_into_a_folder_not_yet_there_is_refused(study, tmp_path, capsys):
    """Two merges aiming at one new --out: the second (here: the lock held by this test, as a first merge
    holds it) refuses at once in one line naming the folder, and builds nothing."""
    from bon.runlock import target_lock

    root, config = study
    dirs = sorted(root.glob("k2_s*")) or _run_shards(root, config, 2)
    out = tmp_path / "new" / "merged"
    with target_lock(out, "bon merge"):
        assert main(["merge", *[a for d in dirs for a in ("--run", str(d))], "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out) in err and "another bon process" in err
    assert not out.exists() and [p.name for p in out.parent.iterdir()] == []  # no lock file or half-built folder left
    assert main(["merge", *[a for d in dirs for a in ("--run", str(d))], "--out", str(out)]) == 0  # once it is free
    assert (out / "report.md").exists()
