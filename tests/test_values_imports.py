"""The value wing's import graph: no value module imports the hasher back, no cycle with the code wing.

Counted from the source (every ``import``, at module level or inside a function), so an import that a
function makes late still counts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fncache

PACKAGE = Path(fncache.__file__).parent


def _imports(path: Path) -> set[str]:
    """The fncache modules a file imports (``from fncache.values import x`` names the module ``x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("fncache"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fncache"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists()
                          else node.module)
    return found


def _value_graph(wings: tuple[str, ...] = ("values",)) -> dict[str, set[str]]:
    mods = {f"fncache.{wing}.{p.stem}": p for wing in wings for p in (PACKAGE / wing).glob("*.py")
            if p.stem != "__init__"}
    return {m: _imports(p) & set(mods) for m, p in mods.items()}


def test_value_modules_never_import_the_hasher():
    """Library handlers register with the registry (a leaf); none of them imports the hasher."""
    graph = _value_graph()
    offenders = sorted(m for m, deps in graph.items()
                       if "fncache.values.hasher" in deps and m != "fncache.values.hasher")
    assert not offenders
    assert not graph["fncache.values.registry"], "the registry must stay a leaf"


def test_no_import_cycle_among_value_and_code_modules():
    """Depth-first search over the value and code wings' imports finds no cycle (the code wing
    registers how functions and classes are keyed; the hasher never imports it)."""
    graph = _value_graph(("values", "code"))
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            assert state.get(d) != 1, " -> ".join([*path, m, d])
            if d not in state:
                visit(d, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
