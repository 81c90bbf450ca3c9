"""The package's shape, checked: one name per class, no vague module names twice, no cycle between parts.

A part is a subpackage (``advisor.bench``) or a top-level module (``advisor.store``); an import from one
part to another is an edge, at any depth of the importing module (function-level imports too).
"""

from __future__ import annotations

import ast
from collections import Counter, defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "advisor"
VAGUE = {"model.py", "models.py", "utils.py", "helpers.py", "common.py", "misc.py"}


def _modules() -> dict[str, ast.Module]:
    return {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts): ast.parse(path.read_text("utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "advisor"


def _imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("advisor.")}


def _graph(modules: dict[str, ast.Module]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for name, tree in modules.items():
        source = _part(name.removesuffix(".__init__"))
        edges[source].update(_part(target) for target in _imports(tree) if _part(target) != source)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by depth-first search, each as the path that closes it."""
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for after in sorted(edges.get(node, ())):
            if state.get(after) == "open":
                found.append([*path[path.index(after) :], after])
            elif after not in state:
                visit(after, [*path, after])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found


def test_the_cycle_finder_finds_a_cycle_of_three() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": {"c"}}) == []


def test_no_part_of_the_package_imports_its_way_back_to_itself() -> None:
    assert cycles(_graph(_modules())) == []


def test_no_class_name_is_defined_twice() -> None:
    names = Counter(
        node.name for tree in _modules().values() for node in tree.body if isinstance(node, ast.ClassDef)
    )
    assert [name for name, count in names.items() if count > 1] == []


def test_no_vague_module_name_is_used_twice() -> None:
    names = Counter(path.name for path in PACKAGE.rglob("*.py") if path.name in VAGUE)
    assert [name for name, count in names.items() if count > 1] == []
