"""The README's "Where things live" is the tree: every top-level folder and every module and subpackage
of ``bon/`` is named there, and everything named there exists (issue 11: a newcomer's map must not lie).
The plugin table beside it names interfaces that exist and registration files that exist."""

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
