"""Code digests: what a code object does, without where it was written, and the names it uses.

Digests are cached per code object (weakly) so a hit never walks bytecode; :func:`code_names` and
:func:`globals_written` scan bytecode for the global names read, the imports in a function body and the
globals a function rebinds.
"""

from __future__ import annotations

import dis
import importlib.util
import types
import weakref
from dataclasses import dataclass
from typing import Any

from fncache import _hasher

__all__ = ["Import", "absolute_import", "code_digest", "code_names", "globals_written"]

_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"})
_GLOBAL_WRITES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})

_code_cache: weakref.WeakKeyDictionary[types.CodeType, bytes] | dict[Any, bytes]
try:
    _code_cache = weakref.WeakKeyDictionary()
except TypeError:  # pragma: no cover
    _code_cache = {}


# ``from __future__`` imports set compiler flags on every code object of a module; they change how the
# source is compiled (already visible in the bytecode), not what the code does at run time.
_FUTURE_FLAGS = 0
for _name in __import__("__future__").all_feature_names:
    _FUTURE_FLAGS |= getattr(__import__("__future__"), _name).compiler_flag


def _used_const_indices(code: types.CodeType) -> set[int]:
    used = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_CONST", "RETURN_CONST", "LOAD_SMALL_INT"):
            if ins.arg is not None:
                used.add(ins.arg)
    return used


def _canonical_const(c: Any) -> Any:
    if isinstance(c, types.CodeType):
        return ("code", code_digest(c))
    if type(c) is tuple:
        return ("tuple",) + tuple(_canonical_const(x) for x in c)
    return c  # frozensets are canonicalised by the hasher; numbers and strings are themselves


def code_digest(code: types.CodeType) -> bytes:
    """Digest of what a code object does, without where it was written.

    Covers bytecode, exception table, constants (recursively, nested code included), names, local and
    free variable names, argument counts, flags and the function's name. Leaves out ``co_filename``,
    ``co_firstlineno``, the line table and the docstring (an unreferenced string first constant).
    """
    try:
        cached = _code_cache.get(code)
    except TypeError:  # pragma: no cover
        cached = None
    if cached is not None:
        return cached
    consts = list(code.co_consts)
    if consts and isinstance(consts[0], str) and 0 not in _used_const_indices(code):
        consts[0] = None  # the docstring: never loaded by the code itself
    parts = (
        "code",
        code.co_name,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags & ~_FUTURE_FLAGS,
        code.co_code,
        getattr(code, "co_exceptiontable", b""),
        tuple(_canonical_const(c) for c in consts),
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
    )
    d = _hasher.digest(parts)
    try:
        _code_cache[code] = d
    except TypeError:  # pragma: no cover
        pass
    return d


@dataclass(frozen=True)
class Import:
    """An import statement in a function body: ``IMPORT_NAME`` with its level and from-list."""

    name: str
    level: int
    fromlist: tuple[str, ...]


def code_names(code: types.CodeType) -> tuple[list[str], set[str], list[Import]]:
    """(global names read, in first-use order; every name used, attributes included; imports).

    Nested code (inner functions, lambdas, comprehensions) counts as the function's own.
    """
    globals_read: dict[str, None] = {}
    all_names: set[str] = set()
    imports: dict[Import, None] = {}
    stack = [code]
    while stack:
        c = stack.pop()
        all_names.update(c.co_names)
        # The two instructions before IMPORT_NAME load its level and from-list.
        last: list[Any] = [None, None]
        for ins in dis.get_instructions(c):
            if ins.opname in _GLOBAL_OPS:
                globals_read[ins.argval] = None
            elif ins.opname == "IMPORT_NAME":
                level, fromlist = last
                imports[Import(ins.argval, level if isinstance(level, int) else 0,
                                tuple(fromlist) if isinstance(fromlist, tuple) else ())] = None
            last = [last[1], ins.argval if ins.opname in ("LOAD_CONST", "LOAD_SMALL_INT") else None]
        stack.extend(k for k in reversed(c.co_consts) if isinstance(k, types.CodeType))
    return list(globals_read), all_names, list(imports)


def absolute_import(imp: Import, g: dict[str, Any]) -> str | None:
    """The absolute module name an import in code with globals ``g`` names (None: cannot resolve)."""
    if not imp.level:
        return imp.name
    package = g.get("__package__")
    if not package:
        name = g.get("__name__") or ""
        package = name if "__path__" in g else name.rpartition(".")[0]
    try:
        return importlib.util.resolve_name("." * imp.level + imp.name, package)
    except (ImportError, ValueError):
        return None


_written_cache: weakref.WeakKeyDictionary[types.CodeType, frozenset[str]] = \
    weakref.WeakKeyDictionary()


def globals_written(code: types.CodeType) -> frozenset[str]:
    """Global names the code (nested code included) rebinds or deletes: ``global n; n += 1``."""
    found = _written_cache.get(code)
    if found is None:
        names: set[str] = set()
        stack = [code]
        while stack:
            c = stack.pop()
            names.update(i.argval for i in dis.get_instructions(c) if i.opname in _GLOBAL_WRITES)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        found = _written_cache[code] = frozenset(names)
    return found


