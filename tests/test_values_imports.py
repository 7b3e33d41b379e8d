"""The value wing's import graph: no value module imports the hasher back, no cycle with the code wing.

Counted from the source (every ``import``, at module level or inside a function), so an import that a
function makes late still counts.
"""

from __future__ import annotations

import ast
from pathlib import Path
from textwrap import dedent

import pytest

import fncache
from tests.helpers import last_json, run_py, write

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


# -- handler modules load with their library's first value ------------------------------------

_HANDLER_MODULES = sorted(f"fncache.values.{p.stem}" for p in (PACKAGE / "values").glob("*.py")
                          if "register_lazy" in p.read_text() and p.stem != "registry")


def test_the_table_of_handler_modules_matches_what_each_module_registers(tmp_path):
    """The hasher's table (library -> handler module) names exactly the libraries each module
    registers handlers for: a library left out of the table would be keyed through its pickle."""
    script = write(tmp_path / "table.py", """
        import importlib, json, sys
        from fncache.values import registry
        declared = sorted([lib, m] for lib, ms in registry._modules.items() for m in ms)
        loaded_early = sorted(m for m in sys.modules if m in HANDLERS)
        for m in HANDLERS:
            importlib.import_module(m)
        registered = sorted({(lib, fn.__module__) for lib, fns in registry._lazy.items() for fn in fns})
        print(json.dumps([declared, [list(p) for p in registered], loaded_early]))
    """.replace("HANDLERS", repr(_HANDLER_MODULES)))
    declared, registered, loaded_early = last_json(run_py(script))
    assert declared == registered
    assert {m for _, m in declared} == set(_HANDLER_MODULES)
    assert loaded_early == []  # import fncache loads none of them


_VALUES = """
    import json, sys, threading
    import numpy as np, pandas as pd, pyarrow as pa, scipy.sparse as sp
    import fncache
    values = {
        "ndarray": lambda: np.arange(12.0).reshape(3, 4),
        "masked": lambda: np.ma.masked_array([1, 2, 3], mask=[0, 1, 0]),
        "frame": lambda: pd.DataFrame({"a": [1, 2], "s": pd.array(["x", None], dtype="string[pyarrow]")}),
        "table": lambda: pa.table({"a": [1, None, 3]}),
        "sparse": lambda: sp.csr_matrix(np.eye(3)),
    }
"""


@pytest.mark.slow
def test_values_key_the_same_whether_their_handlers_load_late_or_early(tmp_path):
    """Digests in a process whose handler modules load with the first value (in threads, all at
    once) equal those of a process that imported every handler module first."""
    late = write(tmp_path / "late.py", dedent(_VALUES) + dedent("""
        before = sorted(m for m in sys.modules if m.startswith("fncache.values."))
        out, start = {}, threading.Barrier(len(values))
        def run(name):
            start.wait()
            out[name] = fncache.hash(values[name]())
        threads = [threading.Thread(target=run, args=(n,)) for n in values]
        for t in threads: t.start()
        for t in threads: t.join(60)
        assert not any(t.is_alive() for t in threads), "a thread is stuck"
        print(json.dumps([out, before]))
    """))
    early = write(tmp_path / "early.py", dedent("""
        import importlib
        for m in HANDLERS:
            importlib.import_module(m)
    """.replace("HANDLERS", repr(_HANDLER_MODULES))) + dedent(_VALUES)
                  + "print(json.dumps({n: fncache.hash(v()) for n, v in values.items()}))\n")
    out, before = last_json(run_py(late, timeout=120))
    assert not set(before) & set(_HANDLER_MODULES)
    assert out == last_json(run_py(early))
    assert len(set(out.values())) == len(out)


def test_a_value_loads_only_its_own_library_s_handlers(tmp_path):
    script = write(tmp_path / "one.py", """
        import json, sys
        import numpy as np
        import fncache
        fncache.hash(np.arange(3))
        print(json.dumps(sorted(m for m in sys.modules if m in HANDLERS)))
    """.replace("HANDLERS", repr(_HANDLER_MODULES)))
    assert last_json(run_py(script)) == ["fncache.values.buffers"]
