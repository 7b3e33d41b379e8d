"""The package's architecture measures, checked from the outside (docs/architecture.md).

Every module of ``fncache/`` (and ``benchmarks/``) is at most 600 lines and has no block above
radon complexity C; all of ``fncache/`` has at most 25 blocks at C; the import graph (imports inside
functions included) has no cycle but the documented one, the stores opened by URL
(:data:`ALLOWED_EDGES`); at most 10 imports of an underscore-prefixed name from another
module. Checks that a wing meets only once work in progress lands are marked ``xfail(strict=False)``
in :data:`PENDING`, each naming its offenders: once they pass, drop the entry and they are strict.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

from .helpers import REPO

PACKAGE = REPO / "fncache"
MAX_LINES = 600
MAX_C_BLOCKS = 25
MAX_UNDERSCORE_IMPORTS = 10

#: Import edges allowed to close a cycle, each with its reason. One circle is left, and it is inherent:
#: the stores are opened by URL and travel as their URL. ``fncache.stores`` (``open_store``) opens
#: every store; a store's ``__reduce__`` reopens it through ``open_store`` (``_base``), a tiered store
#: opens its tiers through it, and URLs are shown through the package's ``redact``. The fingerprint
#: <-> hasher recursion is no import cycle: the fingerprint registers its handlers in the value
#: registry, so the hasher never imports the code wing.
ALLOWED_EDGES: set[tuple[str, str]] = {
    ("fncache.stores._base", "fncache.stores"),
    ("fncache.stores.tiered", "fncache.stores"),
    ("fncache.stores._redis_config", "fncache.stores"),
}

#: (check, module or wing) -> why it is expected to fail for now. Remove an entry once it passes.
PENDING: dict[tuple[str, str], str] = {}


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root`` (a package)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules(PACKAGE)
ALL_MODULES = {**MODULES, **_modules(REPO / "benchmarks")}
# Compiled or stub-only modules (``_speedups``) are modules too, so importing them is no name import.
NATIVE = {f"fncache.{p.name.split('.')[0]}" for p in PACKAGE.glob("*.pyi")}


def _params(check: str, names: list[str]) -> list[object]:
    """One pytest param per name; those in PENDING for ``check`` are non-strict xfails."""
    out: list[object] = []
    for name in names:
        reason = PENDING.get((check, name))
        marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def _pending(check: str, name: str) -> None:
    reason = PENDING.get((check, name))
    if reason:
        pytest.xfail(reason)


# -- lines -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("module", _params("lines", sorted(ALL_MODULES)))
def test_no_module_over_600_lines(module):
    """A module is short enough to read in one sitting (split by role past 600 lines)."""
    lines = len(ALL_MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines"


# -- complexity ------------------------------------------------------------------------------------

def _blocks(module: str) -> list[tuple[str, int, str]]:
    """(name, complexity, rank) of every block radon measures in ``module`` (as ``radon cc``)."""
    complexity = pytest.importorskip("radon.complexity")
    source = ALL_MODULES[module].read_text()
    return [(getattr(b, "fullname", b.name), b.complexity, complexity.cc_rank(b.complexity))
            for b in complexity.cc_visit(source)]


@pytest.mark.parametrize("module", _params("complexity", sorted(MODULES)))
def test_no_block_above_radon_c(module):
    """No function, method or class of the module is ranked D or worse by radon."""
    worse = [f"{name} {rank}{cc}" for name, cc, rank in _blocks(module) if rank not in "ABC"]
    assert not worse, f"{module}: {', '.join(worse)}"


def test_at_most_25_blocks_at_radon_c():
    """The whole package has at most 25 blocks ranked C."""
    c_blocks = [f"{module}:{name} C{cc}" for module in MODULES
                for name, cc, rank in _blocks(module) if rank == "C"]
    _pending("total", "c_blocks")
    assert len(c_blocks) <= MAX_C_BLOCKS, f"{len(c_blocks)} blocks at C:\n" + "\n".join(c_blocks)


# -- imports ---------------------------------------------------------------------------------------

def _imports() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """The import graph of fncache (imports inside functions too) and every underscore-name import
    from another module: ``(importer, module, name)``."""
    known = set(MODULES) | NATIVE
    graph: dict[str, set[str]] = collections.defaultdict(set)
    underscored = []
    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    while target not in known and "." in target:
                        target = target.rpartition(".")[0]
                    if target in known:
                        graph[module].add(target)
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                if source not in known:
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    if full in known:  # a submodule: ``from fncache import _codec``
                        graph[module].add(full)
                        continue
                    graph[module].add(source)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        underscored.append((module, source, alias.name))
    return graph, underscored


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(set(graph) | {t for ts in graph.values() for t in ts}):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


#: Modules at the top that belong to a wing: the class whose name is in the key format stays where
#: it was (``fncache._files.File``, see that module).
WING_OF = {"fncache._files": "fncache.values"}


def _wing(module: str) -> str:
    """``fncache.stores`` for ``fncache.stores.disk``; ``fncache`` for the call path at the top."""
    if module in WING_OF:
        return WING_OF[module]
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "fncache"


WINGS = sorted({_wing(m) for m in MODULES})


def _cycles_without_the_allowed_edges() -> list[list[str]]:
    graph, _ = _imports()
    for source, target in ALLOWED_EDGES:
        assert target in graph[source], f"the documented cycle changed: {source} -> {target} is gone"
        graph[source].discard(target)
    return _cycles(graph)


@pytest.mark.parametrize("wing", _params("cycles", WINGS))
def test_no_import_cycle_but_the_documented_one(wing):
    """No module of the wing is on an import cycle (lazy imports count), but for the fingerprint's."""
    mine = [c for c in _cycles_without_the_allowed_edges() if any(_wing(m) == wing for m in c)]
    assert not mine, f"{wing}: cycles {mine}"


def test_the_cycle_checker_finds_a_lazy_cycle():
    """The checker sees a cycle through a function-level import (so a pass means something)."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph, _ = _imports()
    assert "fncache.code.depends" in graph["fncache._callkey"]  # an import inside a method, seen


def test_at_most_10_underscore_imports_across_modules():
    """An underscore name imported by another module is an interface that forgot to say so."""
    _, underscored = _imports()
    shown = "\n".join(f"{a} imports {b}.{name}" for a, b, name in sorted(underscored))
    _pending("total", "underscore_imports")
    assert len(underscored) <= MAX_UNDERSCORE_IMPORTS, f"{len(underscored)}:\n{shown}"


@pytest.mark.parametrize("wing", ["fncache.code", "fncache.joblib", "fncache.notebook", "fncache.cli"])
def test_no_underscore_imports_in_the_finished_wings(wing):
    """The code, joblib, notebook and command-line wings import no underscore name of another module."""
    _, underscored = _imports()
    assert [u for u in underscored if _wing(u[0]) == wing] == []


def test_package_init_only_reexports():
    """``fncache/__init__.py`` imports and lists names; it defines no function or class."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert defined == []


def test_the_module_map_names_every_module():
    """docs/architecture.md's module map lists every module of the tree (and no module that is gone)."""
    import re

    text = (REPO / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([\w/]+\.(?:py|c))`", text))
    files = {p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"} | {"_speedups.c"}
    assert files - named == set(), "not in the module map"
    modules = {n for n in named if "/" not in n and n != "__init__.py"}  # paths are other files
    assert modules - files == set(), "in the map, not in the tree"
