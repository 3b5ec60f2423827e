"""The README is the tree and the commands: "Where things live" names every top-level folder and every
module and subpackage of ``bon/`` and nothing that is gone, its plugin table names real interfaces and
registration files, and every ``bon ...`` example in its bash blocks parses with the real commands."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r"^(?P<indent> *)(?P<names>\S.*?)(?: {2,}|$)")


def _section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "## Where things live" in readme, "README.md lost its 'Where things live' section"
    section = readme.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    return section


def _layout() -> dict[str, set[str]]:
    """The code block of the section as {top-level folder: names listed under it}; continuation lines
    (indented descriptions) name nothing."""
    block = _section().split("```", 2)[1]
    layout: dict[str, set[str]] = {}
    parent = None
    for line in block.splitlines()[1:]:
        m = ENTRY.match(line)
        if not m:
            continue
        names = [n.strip() for n in m.group("names").split(",")]
        if not all(re.fullmatch(r"[\w.-]+(/|\.py)", n) for n in names):
            continue  # a continuation of the description above
        if not m.group("indent"):
            for name in names:
                layout[name] = set()
            parent = names[-1]
        else:
            assert parent is not None, line
            layout[parent].update(names)
    return layout


def _tracked() -> list[str]:
    try:
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked tree is unknown")
    return [f for f in files if (ROOT / f).exists()]  # deleted but not yet committed files are gone


def test_every_top_level_folder_is_in_the_section():
    listed = set(_layout())
    folders = {f.split("/", 1)[0] + "/" for f in _tracked() if "/" in f and not f.startswith(".")}
    assert folders - listed == set(), f"README 'Where things live' does not mention {sorted(folders - listed)}"
    assert listed - folders == set(), f"README 'Where things live' names {sorted(listed - folders)}, which do not exist"


def test_every_core_module_and_subpackage_is_in_the_section():
    listed = _layout()["bon/"]
    core = set()
    for path in (ROOT / "bon").iterdir():
        if path.suffix == ".py" and path.name != "__init__.py":
            core.add(path.name)
        elif path.is_dir() and (path / "__init__.py").exists():
            core.add(path.name + "/")
    assert core - listed == set(), f"README 'Where things live' does not mention bon/{sorted(core - listed)}"
    assert listed - core == set(), f"README 'Where things live' names bon/{sorted(listed - core)}, which do not exist"


def test_every_listed_subfolder_exists():
    for parent, names in _layout().items():
        for name in names:
            assert (ROOT / parent / name).exists(), f"README 'Where things live' names {parent}{name}, which does not exist"


def test_the_plugin_table_names_real_interfaces_and_registration_files():
    import bon.plugins

    kinds = ("judge", "generator", "verifier", "strategy", "suite")
    rows = [line for line in _section().splitlines() if line.startswith("|") and line.split("|")[1].strip() in kinds]
    assert sorted(line.split("|")[1].strip() for line in rows) == sorted(kinds)
    for line in rows:
        _, kind, interface, file, registration, _ = (cell.strip() for cell in line.split("|"))
        for name in re.findall(r"`([A-Z]\w+)`", interface):
            assert hasattr(bon.plugins, name), (kind, name)
        folder = file.strip("`").rsplit("/", 1)[0]
        assert (ROOT / folder).is_dir(), (kind, folder)
        target = ROOT / registration.strip("`")
        assert target.exists() and "PLUGINS" in target.read_text(encoding="utf-8"), (kind, target)


def _readme_invocations() -> list[list[str]]:
    """Every ``bon ...`` command line in the README's bash blocks, as argv after ``bon`` (lines built
    with ``$(...)`` are skipped: their arguments exist only in a shell)."""
    import shlex

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0]
            for piece in line.split("&&"):
                if "$(" in piece:
                    continue
                words = shlex.split(piece)
                starts = [i for i, w in enumerate(words) if w == "bon" or w.endswith("/bon")]
                if starts:
                    found.append(words[starts[0] + 1:])
    return found


def test_readme_command_examples_parse_with_the_real_commands():
    """Each example's command exists and click accepts its options (names, values, required ones)."""
    import click

    from bon.cli import app

    examples = _readme_invocations()
    assert len(examples) >= 6, examples
    for argv in examples:
        group: click.Command = app
        words = list(argv)
        parent = click.Context(app, info_name="bon")
        while isinstance(group, click.Group):
            assert words, argv
            cmd = group.get_command(parent, words[0])
            assert cmd is not None, f"README example `bon {' '.join(argv)}`: no command {words[0]!r}"
            parent = click.Context(cmd, info_name=words[0], parent=parent)
            group, words = cmd, words[1:]
        try:
            group.make_context(parent.info_name, words, parent=parent.parent)
        except click.UsageError as exc:
            pytest.fail(f"README example `bon {' '.join(argv)}`: {exc.format_message()}")


def _gpu_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## The paper's study on GPUs", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("task", ["t2i", "edit", "interleaved", "reasoning"])
def test_the_gpu_section_quotes_what_the_dry_run_prints(task):
    """Each paper config's row (peak memory, GPU-hours, API dollars) is what `bon run CONFIG --dry-run` prints."""
    from bon.config import load_config
    from bon.plan import plan_study, render

    config = f"configs/paper_{task}.yaml"
    printed = "\n".join(render(plan_study(load_config(ROOT / config), config)))
    peak = re.search(r"^peak: (\S+ GB) of weights", printed, re.M).group(1)
    hours = re.search(r"^GPU time estimate: (~[\d,.]+) GPU-hours", printed, re.M).group(1)
    dollars = re.search(r"^API cost estimate: (~\$[\d,]+)", printed, re.M).group(1)
    row = next(line for line in _gpu_section().splitlines() if line.startswith(f"| `{config}` |"))
    assert row == f"| `{config}` | {peak} | {hours} | {dollars} |"


def test_the_custom_judge_example_runs(tmp_path, monkeypatch):
    """The README's judge of about 20 lines, registered as it says, judges a pair through the registry."""
    import sys

    from PIL import Image

    from bon import registry
    from bon.content import Content, Prompt
    from bon.protocol import Comparison

    code = next(block for block in re.findall(r"```python\n(.*?)```", _gpu_section(), flags=re.S) if "PairwiseJudge" in block)
    assert 15 <= len(code.strip().splitlines()) <= 30
    (tmp_path / "readme_brightness.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules["judges"].PLUGINS if "judges" in sys.modules else __import__("judges").PLUGINS,
                        "brightness", "readme_brightness:BrighterJudge")
    judge = registry.create("judge", "brightness", margin=2.0)
    prompt = Prompt("p", "t2i", Content.of("a bright sky"))
    dark, light = Content.of(Image.new("RGB", (8, 8), (20, 20, 20))), Content.of(Image.new("RGB", (8, 8), (230, 230, 230)))
    verdicts = judge.judge([Comparison(prompt, dark, light), Comparison(prompt, light, dark), Comparison(prompt, Content.of("no image"), light)])
    assert [v.better for v in verdicts] == ["B", "A", None] and verdicts[2].missing
    assert judge.identity() != registry.create("judge", "brightness").identity()  # the option is part of its identity
