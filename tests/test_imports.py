"""Imports run one way: no circle among the project's modules, and the core (``bon/``) imports ``analysis``
only from its orchestration/CLI layer.

What counts as an import (read with stdlib ``ast``, nothing is imported): every ``import X`` and ``from X
import Y`` anywhere in a module, at its top or inside a function (a lazy import still runs, so a circle
through one is still a circle), except under ``if TYPE_CHECKING:`` (never runs). ``from P import Y`` is an
edge to the module ``P.Y`` when that is a module of the project, else to ``P``; relative imports are resolved
against the importing module. Importing ``a.b.c`` is an edge to ``a.b.c`` only (the parent packages'
``__init__`` run too, but they import their children, so counting them would make every package a circle).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bon", "analysis", "generators", "judges", "verifiers")
# bon's modules that may import analysis: the commands and the steps that end a study with its report
ORCHESTRATION = ("bon.cli", "bon.study")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST) -> list[ast.AST]:
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        if _type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        out |= {t for t in targets if t in modules and t != name}
    return out


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imported(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_circle_through_a_lazy_import(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    source = "def f():\n    import bon.x\nif TYPE_CHECKING:\n    import bon.y\n"
    (tmp_path / "m.py").write_text(source)
    nodes = _imports(ast.parse(source))
    assert [n.names[0].name for n in nodes] == ["bon.x"]


def test_no_import_circle_among_the_project_modules():
    graph = import_graph()
    assert len(graph) > 100 and "bon.cli" in graph
    assert circles(graph) == []


def test_the_core_imports_analysis_only_from_its_orchestration_layer():
    graph = import_graph()
    wrong = {name: sorted(t for t in targets if t.split(".")[0] == "analysis")
             for name, targets in graph.items()
             if name.split(".")[0] == "bon" and not any(name == o or name.startswith(o + ".") for o in ORCHESTRATION)}
    assert {k: v for k, v in wrong.items() if v} == {}
