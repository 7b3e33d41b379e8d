"""What a ``%%fncache`` cell reads and binds, from its syntax and bytecode.

The variables a cell *reads* (:func:`cell_inputs`) decide which of the notebook's values its key may
see: a name the cell certainly binds before any statement reads it is not an input, so running a
cell twice in one kernel gives one key. Every rule here errs towards more inputs: a needless input
can cost a miss, a missing one would be a stale hit. Which of these names the key then covers is the
fingerprint's business (only those the compiled code reads as globals).

:func:`unseen_reads` names what makes a cell read variables its code does not name (magics, shell
commands, ``eval``...): such a cell cannot be keyed.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["cell_inputs", "cell_name", "top_level_nodes", "unseen_reads"]


def _names_read(node: ast.AST) -> set[str]:
    """Every name ``node`` may read (load or delete) before binding it itself, nested scopes
    included (``x += 1`` reads x). A ``for`` or ``with`` body does not read its own target, nor a
    comprehension its variables: those are bound before the code that reads them runs."""
    if isinstance(node, ast.Name):
        return set() if isinstance(node.ctx, ast.Store) else {node.id}
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return _names_read(node.iter) | (_all_read(node.body) - _targets(node.target)) \
            | _all_read(node.orelse)
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return _with_read(node)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        return _comprehension_read(node)
    found = set()
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        found.add(node.target.id)
    for child in ast.iter_child_nodes(node):
        found |= _names_read(child)
    return found


def _with_read(node: ast.With | ast.AsyncWith) -> set[str]:
    """What a ``with`` reads: each context expression, then its body less what ``as`` bound."""
    found: set[str] = set()
    bound: set[str] = set()
    for item in node.items:
        found |= _names_read(item.context_expr) - bound
        if item.optional_vars is not None:
            found |= _names_read(item.optional_vars) - bound  # ``as obj.attr`` reads obj
            bound |= _targets(item.optional_vars)
    return found | (_all_read(node.body) - bound)


def _comprehension_read(node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> set[str]:
    """What a comprehension reads: its first iterable, then the rest less its own variables."""
    gens = node.generators
    local = set().union(*(_targets(g.target) for g in gens))
    inner = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    inner += [g.iter for g in gens[1:]] + [i for g in gens for i in g.ifs]
    return _names_read(gens[0].iter) | (_all_read(inner) - local)


def _all_read(nodes: list[Any]) -> set[str]:
    return set().union(*(_names_read(n) for n in nodes))


def _targets(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_targets(e) for e in node.elts))
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return set()  # an attribute or a subscript binds no name


def _bound_for_sure(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement certainly binds once it completes (compound statements: none,
    since a branch or a loop body may not run)."""
    if isinstance(stmt, ast.Assign):
        return set().union(*(_targets(t) for t in stmt.targets))
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and getattr(stmt, "value", None) is not None:
        return _targets(stmt.target)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name.partition(".")[0]) for a in stmt.names if a.name != "*"}
    return set()


def cell_inputs(tree: ast.Module) -> set[str]:
    """The names a cell may read before it binds them itself: the variables its key must cover.

    Statements are taken in order; a name counts unless an earlier top-level simple statement
    certainly bound it. Reads inside functions, lambdas and classes the cell defines count where the
    definition is, whenever they run (a superset: never fewer inputs than the code can read).
    """
    inputs: set[str] = set()
    bound: set[str] = set()
    for stmt in tree.body:
        inputs |= _names_read(stmt) - bound
        bound |= _bound_for_sure(stmt)
        if isinstance(stmt, ast.Delete):
            bound -= set().union(*(_targets(t) for t in stmt.targets))
    return inputs


def top_level_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes of the cell's own scope (not inside the functions, lambdas and classes it defines)."""
    for child in ast.iter_child_nodes(tree):
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from top_level_nodes(child)


def _top_level_stores(code: types.CodeType) -> list[str]:
    """Names the cell's own top-level code binds, in order (the cell's name is made of them)."""
    import dis

    seen: dict[str, None] = {}
    for ins in dis.get_instructions(code):
        if ins.opname == "STORE_NAME" and not ins.argval.startswith("_"):
            seen[ins.argval] = None
    return list(seen)


def cell_name(code: types.CodeType) -> str:
    """``cell(shares,model)``: the qualified name a cell is recorded under, from the names it binds
    (stable across edits of its body), ``cell`` when it binds none."""
    names = _top_level_stores(code)
    shown = ",".join(names[:4]) + (",..." if len(names) > 4 else "")
    return f"cell({shown})" if names else "cell"


_NAMESPACE_READERS = frozenset({"eval", "exec", "globals", "locals"})


def unseen_reads(tree: ast.Module, namespace: dict[str, Any]) -> str | None:
    """Why the code may read names its syntax does not show, or None: a magic or shell command
    (``get_ipython()`` after IPython's transforms), ``eval``/``exec``/``globals()``/``locals()``, or
    ``vars()`` without an argument, each unless the notebook rebound that name."""
    for n in ast.walk(tree):
        if not isinstance(n, ast.Name) or n.id in namespace and n.id != "get_ipython":
            continue
        line = getattr(n, "lineno", 0)
        if n.id == "get_ipython":
            return f"it uses IPython magics or shell commands (line {line}), whose inputs cannot " \
                   "be keyed; move them to another cell"
        if n.id in _NAMESPACE_READERS:
            return f"it calls {n.id}() (line {line}), which reads variables its code does not name"
    return _bare_vars(tree, namespace)


def _bare_vars(tree: ast.Module, namespace: dict[str, Any]) -> str | None:
    """Why a call of ``vars()`` without an argument reads names the code does not show, or None."""
    if "vars" in namespace:
        return None  # the notebook rebound it
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "vars" and not n.args:
            return f"it calls vars() (line {n.lineno}), which reads variables its code does not name"
    return None
