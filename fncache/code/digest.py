"""Code digests: what a code object does, without where it was written, and the names it uses.

Digests are cached per code object (weakly) so a hit never walks bytecode; :func:`code_names` and
:func:`globals_written` scan bytecode for the global names read, the imports in a function body and the
globals a function rebinds.
"""

from __future__ import annotations

import ast
import dis
import importlib.util
import sys
import types
import weakref
from collections.abc import Iterator
from typing import Any, NamedTuple

from fncache.values import hasher as _hasher

__all__ = ["ATTR_READS", "Import", "absolute_import", "annotation_names", "attribute_chains",
           "code_digest", "code_names", "globals_written", "nested_code"]

# (LOAD_FROM_DICT_OR_GLOBALS, 3.12+: a class body's read of a global in a ``type`` alias or a
# type parameter's bound.)
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL",
                         "LOAD_FROM_DICT_OR_GLOBALS"})
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


# From 3.12 the compiler makes bytecode depend on line layout in two ways: a ``NOP`` holds a line
# that has no instruction of its own (``try:``, a line of a split expression), and 3.13 fuses two
# local loads or stores into one superinstruction only when both are on one line
# (``max(x, y)`` compiles to LOAD_FAST_LOAD_FAST, ``max(\n x,\n y)`` to two LOAD_FASTs). So
# there the bytecode is keyed as a list of instructions with superinstructions split, NOPs left
# out and jump targets (and the exception table's ranges) as indices into that list: reformatting
# keeps the key, any change of what runs still changes it. 3.11 keeps ``co_code`` as it was keyed.
_LINE_FREE_BYTECODE = sys.version_info >= (3, 12)
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
_SPLIT = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
          "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
          "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST")}


def _instructions(code: types.CodeType) -> tuple[tuple[Any, ...], tuple[tuple[int, ...], ...]]:
    """(instructions, exception table) of ``code`` in the line-free form described above."""
    raw = [i for i in dis.get_instructions(code) if i.opname not in ("NOP", "EXTENDED_ARG", "CACHE")]
    index: dict[int, int] = {}  # original offset -> position of its first canonical instruction
    n = 0
    for ins in raw:
        index[ins.offset] = n
        n += 2 if ins.opname in _SPLIT else 1
    offsets = sorted(index)

    def at(offset: int) -> int:
        # The first kept instruction at or after ``offset`` (a jump to a NOP lands on what follows).
        from bisect import bisect_left

        i = bisect_left(offsets, offset)
        return index[offsets[i]] if i < len(offsets) else n

    out: list[Any] = []
    for ins in raw:
        split = _SPLIT.get(ins.opname)
        if split is not None:
            assert ins.arg is not None
            out.append((split[0], ins.arg >> 4))
            out.append((split[1], ins.arg & 15))
        elif ins.opcode in _JUMPS and isinstance(ins.argval, int):
            out.append((ins.opname, "to", at(ins.argval)))
        else:
            out.append((ins.opname, ins.arg))
    table = tuple((at(e.start), at(e.end), at(e.target), e.depth, int(e.lasti))
                  for e in dis._parse_exception_table(code))  # type: ignore[attr-defined]
    return tuple(out), table


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
    parts = (
        "code",
        code.co_name,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags & ~_FUTURE_FLAGS,
        *(_instructions(code) if _LINE_FREE_BYTECODE
          else (code.co_code, getattr(code, "co_exceptiontable", b""))),
        _keyed_consts(code),
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


def _keyed_consts(code: types.CodeType) -> tuple[Any, ...]:
    """The constants of ``code`` as keyed: the docstring (an unreferenced string first constant)
    left out, a number that changes with the hash seed as a marker (see :func:`_seeded_hashes`)."""
    consts = list(code.co_consts)
    if consts and isinstance(consts[0], str) and 0 not in _used_const_indices(code):
        consts[0] = None  # the docstring: never loaded by the code itself
    seeded = _seeded_hashes(code)
    return tuple(_SEEDED if seeded and type(c) is int and c in seeded else _canonical_const(c)
                 for c in consts)


_SEEDED = ("str hash",)
_ATTRS = "<attrs generated "


def _seeded_hashes(code: types.CodeType) -> tuple[int, ...]:
    """The constants of generated code that are ``hash()`` of a text, which changes with
    ``PYTHONHASHSEED``: the ``__hash__`` attrs writes for a class holds ``hash("<attrs generated
    hash mod.Class>")``, a number of its own in every process. Keyed as it stood, a function reading
    an attrs class that makes its ``__hash__`` (``frozen=True``) would never hit in another
    process; it stands for the class's name, keyed with the class."""
    name = code.co_filename
    if not name.startswith(_ATTRS):
        return ()
    what = name[len(_ATTRS):].partition(" ")[2]  # "mod.Class>" (of "<attrs generated hash mod.Class>")
    return (hash(name), hash(f"{_ATTRS}hash {what}"))


class Import(NamedTuple):
    """An import statement in a function body: ``IMPORT_NAME`` with its level and from-list."""

    name: str
    level: int
    fromlist: tuple[str, ...]


def code_names(code: types.CodeType) -> tuple[list[str], set[str], list[Import], list[str]]:
    """(global names read, in first-use order; every name used, attributes included; imports;
    the strings of the annotations nested code makes).

    Nested code (inner functions, lambdas, comprehensions) counts as the function's own. The
    annotations of a class or function defined in it are made by its code: as strings under
    ``from __future__ import annotations`` (or written as strings), which code that evaluates
    them (``get_type_hints``, a pydantic model defined in the function) reads as names (see
    :func:`annotation_names`).
    """
    globals_read: dict[str, None] = {}
    all_names: set[str] = set()
    imports: dict[Import, None] = {}
    texts: dict[str, None] = {}
    chains: set[tuple[str, ...]] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        all_names.update(c.co_names)
        instructions = list(dis.get_instructions(c))
        _scan(instructions, globals_read, imports)
        _chains(instructions, chains)
        texts.update(dict.fromkeys(_annotation_strings(instructions)))
        stack.extend(k for k in reversed(c.co_consts) if isinstance(k, types.CodeType))
    _chains_cache[code] = frozenset(chains)  # (the walk asks for them next: one pass for both)
    return list(globals_read), all_names, list(imports), list(texts)


def _scan(instructions: list[dis.Instruction], globals_read: dict[str, None],
          imports: dict[Import, None]) -> None:
    """Add the globals one code object reads and its imports."""
    last: list[Any] = [None, None]  # the two instructions before IMPORT_NAME: level, from-list
    for ins in instructions:
        if ins.opname in _GLOBAL_OPS:
            globals_read[ins.argval] = None
        elif ins.opname == "IMPORT_NAME":
            imports[_import(ins.argval, *last)] = None
        last = [last[1], ins.argval if ins.opname in ("LOAD_CONST", "LOAD_SMALL_INT") else None]


def _import(name: str, level: Any, fromlist: Any) -> Import:
    return Import(name, level if isinstance(level, int) else 0,
                  tuple(fromlist) if isinstance(fromlist, tuple) else ())


_ANNOTATIONS, _CLOSURE = 4, 8  # flags of MAKE_FUNCTION (SET_FUNCTION_ATTRIBUTE from 3.13)


def _annotation_strings(instructions: list[dis.Instruction]) -> list[str]:
    """The string constants of the annotations a code object makes: each value a class body
    stores into ``__annotations__`` (pushed just before ``LOAD_NAME __annotations__``), and the
    annotations a function is made with (pushed before the function's code and closure). Only
    those: another string of the code names nothing (a dict key spelled like a global)."""
    out: list[str] = []
    try:
        for i, ins in enumerate(instructions):
            if ins.opname in ("LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS") and ins.argval == "__annotations__":
                _strings_in(instructions[_item_start(instructions, i):i], out)
            elif ins.opname == "MAKE_FUNCTION" and i:
                flags = ins.arg if ins.arg is not None else _attributes_set(instructions, i)
                if flags & _ANNOTATIONS:
                    end = i - 1  # (the code object)
                    if flags & _CLOSURE:
                        end = _item_start(instructions, end)
                    _function_annotations(instructions, end, out)
    except _Unknown:
        # An annotation that branches (``a: "A" if flag else "B"``, a comprehension on 3.13), or
        # instructions not known: where its items begin is not told by stack effects alone. Every
        # string of the code counts then (a string naming a global the code does not use keys it
        # needlessly).
        out = []
        _strings_in(instructions, out)
    return out


class _Unknown(Exception):
    """Where the instructions that push a stack item begin cannot be told (they jump, or are
    jumped to, or their stack effect is not known)."""


_JUMPS = frozenset(getattr(dis, "hasjump", dis.hasjrel + dis.hasjabs))


def _function_annotations(instructions: list[dis.Instruction], end: int, out: list[str]) -> None:
    """The strings of a function's annotations, pushed as one tuple just before ``end`` of names
    and values in turn (``('y', 'K', 'return', 'R')``): of the values only."""
    last = instructions[end - 1]
    if last.opname == "LOAD_CONST" and isinstance(last.argval, tuple):
        _strings(last.argval[1::2], out)
        return
    if last.opname != "BUILD_TUPLE":
        raise _Unknown
    items = []
    stop = end - 1
    for _ in range(last.arg or 0):
        start = _item_start(instructions, stop)
        items.append(instructions[start:stop])
        stop = start
    for item in items[-2::-2]:  # (in reverse: the values are the items at odd positions)
        _strings_in(item, out)


def _strings_in(instructions: list[dis.Instruction], out: list[str]) -> None:
    for k in instructions:
        if k.opname == "LOAD_CONST":
            _strings(k.argval, out)


def _attributes_set(instructions: list[dis.Instruction], i: int) -> int:
    """The flags of the ``SET_FUNCTION_ATTRIBUTE`` instructions after ``MAKE_FUNCTION`` (3.13)."""
    flags = 0
    for ins in instructions[i + 1:]:
        if ins.opname != "SET_FUNCTION_ATTRIBUTE":
            break
        flags |= ins.arg or 0
    return flags


def _item_start(instructions: list[dis.Instruction], end: int) -> int:
    """Where the instructions that push the stack item below ``end`` begin (:class:`_Unknown`
    when that cannot be told)."""
    if end < len(instructions) and instructions[end].is_jump_target:
        raise _Unknown  # (branches of the item meet where it ends)
    depth = 0
    for i in range(end - 1, -1, -1):
        ins = instructions[i]
        if ins.opcode in _JUMPS:
            raise _Unknown
        try:
            depth += dis.stack_effect(ins.opcode, ins.arg if ins.opcode >= dis.HAVE_ARGUMENT else None,
                                      jump=False)
        except ValueError:
            raise _Unknown from None
        if depth >= 1:
            return i  # (it may be jumped to: where the statement begins after an ``if``)
        if ins.is_jump_target:
            raise _Unknown
    raise _Unknown


def _strings(const: Any, out: list[str]) -> None:
    if isinstance(const, str):
        out.append(const)
    elif isinstance(const, tuple):  # a function's constant annotations: ('y', 'K', 'return', ...)
        for k in const:
            _strings(k, out)


def annotation_names(annotations: Any) -> tuple[list[str], set[str]]:
    """(the global names string annotations start from, in order; every name they use, attributes
    included) of an annotations dict: what code that evaluates them reads (``get_type_hints``, a
    dataclass or ``inspect.signature(eval_str=True)`` under ``from __future__ import annotations``,
    where every annotation is a string). Strings are found as annotations, as forward references
    and as arguments of generic types (``list["K"]``), and inside the strings themselves
    (``"Optional['K']"``). A string that is no expression (prose) names nothing."""
    texts: list[str] = []
    _annotation_texts(list(annotations.values()), texts, 0)
    names: dict[str, None] = {}
    used: set[str] = set()
    for text in texts:  # grows with the strings found inside strings (each shorter: it ends)
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # (too deeply nested)
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names[node.id] = None
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
    return list(names), used


def _annotation_texts(values: Any, out: list[str], depth: int) -> None:
    for v in values:
        if isinstance(v, str):
            out.append(v)
            continue
        try:
            arg = getattr(v, "__forward_arg__", None)
            args = getattr(v, "__args__", None) if depth < 8 else None
        except Exception:  # an annotation object with odd attributes: nothing named by text
            continue
        if isinstance(arg, str):
            out.append(arg)
        elif isinstance(args, tuple):
            _annotation_texts(args, out, depth + 1)


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
_passed_cache: weakref.WeakKeyDictionary[types.CodeType, frozenset[str]] = \
    weakref.WeakKeyDictionary()
# Loads of a global or a closure variable, and what reads an attribute of what was loaded.
_NAME_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF",
                         "LOAD_FROM_DICT_OR_DEREF", "LOAD_FROM_DICT_OR_GLOBALS"})
ATTR_READS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})


_chains_cache: weakref.WeakKeyDictionary[types.CodeType, frozenset[tuple[str, ...]]] = \
    weakref.WeakKeyDictionary()
_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})


def attribute_chains(code: types.CodeType) -> frozenset[tuple[str, ...]]:
    """``(global, attribute, attribute, ...)`` for each global the code (nested code included)
    reads attributes of, one off the other: ``np.random.rand()`` gives ``("np", "random",
    "rand")``. What a module attribute the code reads is, precisely, rather than every name.
    Made by :func:`code_names`'s pass over the instructions where it ran."""
    found = _chains_cache.get(code)
    if found is None:
        chains: set[tuple[str, ...]] = set()
        for c in nested_code(code):
            _chains(list(dis.get_instructions(c)), chains)
        found = _chains_cache[code] = frozenset(chains)
    return found


def _chains(instructions: list[dis.Instruction], chains: set[tuple[str, ...]]) -> None:
    chain: list[str] = []
    for ins in instructions:
        if ins.opname == "EXTENDED_ARG":
            continue
        if chain and ins.opname in ATTR_READS:
            chain.append(ins.argval)
            continue
        if len(chain) > 1:
            chains.add(tuple(chain))
        chain = [ins.argval] if ins.opname in _GLOBAL_LOADS else []
    if len(chain) > 1:
        chains.add(tuple(chain))


def names_passed_on(code: types.CodeType) -> frozenset[str]:
    """Globals and closure variables the code (nested code included) loads for anything but
    reading one of their attributes: passed to other code, returned, stored. Of a module bound to
    such a name, other code may read any attribute (``helper(util)``), not only those this code
    names."""
    found = _passed_cache.get(code)
    if found is None:
        names: set[str] = set()
        for c in nested_code(code):
            instructions = list(dis.get_instructions(c))
            for ins, after in zip(instructions, instructions[1:] + [None], strict=True):
                if ins.opname in _NAME_LOADS and (after is None or after.opname not in ATTR_READS):
                    names.add(ins.argval)
        found = _passed_cache[code] = frozenset(names)
    return found


def nested_code(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code nested in it (inner functions, lambdas, comprehensions)."""
    stack = [code]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


def globals_written(code: types.CodeType) -> frozenset[str]:
    """Global names the code (nested code included) rebinds or deletes: ``global n; n += 1``."""
    found = _written_cache.get(code)
    if found is None:
        found = _written_cache[code] = frozenset(
            i.argval for c in nested_code(code) for i in dis.get_instructions(c)
            if i.opname in _GLOBAL_WRITES)
    return found


