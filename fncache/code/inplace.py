"""What a function's own code changes in place or rebinds, read from its bytecode
(:func:`names_modified`): a library function a factory made keeps plain data it was made with
(keyed by content) apart from state it fills (a memo dict, keyed by its type; see
``classes.made_with``).
"""

from __future__ import annotations

import dis
import types
import weakref
from typing import Any, NamedTuple

from fncache.code.digest import ATTR_READS, nested_code

__all__ = ["MUTATORS", "Modified", "names_modified"]

# Loads of one local or closure variable (3.13's two-variable superinstructions are split first).
_VAR_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_CLOSURE",
                        "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"})
_SPLIT = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
          "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
          "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST")}
_CELL_WRITES = frozenset({"STORE_DEREF", "DELETE_DEREF"})
# What changes an object in place, by how many values above it the object is on the stack.
_CHANGES_BELOW = {"STORE_SUBSCR": 1, "DELETE_SUBSCR": 1, "STORE_SLICE": 2, "STORE_ATTR": 0,
                  "DELETE_ATTR": 0}
# What a backward reading of an expression cannot follow: the stack reordered, or a branch.
_REORDERS = frozenset({"SWAP", "COPY", "ROT_TWO", "ROT_THREE", "ROT_FOUR", "DUP_TOP"})
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))
_LOOK_BACK = 64  # instructions an expression may take before an answer is "unknown"
# Functions that change what they are given (``operator.setitem(cache, k, v)``, ``heappush``): a
# line calling one counts every variable it loads as written.
_MUTATING_FUNCTIONS = frozenset({"setitem", "delitem", "iadd", "ior", "iconcat", "setattr",
                                 "delattr", "getattr", "heappush", "heappop", "heapify",
                                 "heapreplace", "heappushpop", "insort", "insort_left",
                                 "insort_right", "shuffle", "copyto", "place", "putmask",
                                 "put_along_axis", "fill_diagonal"})
_CALLEES = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR", "LOAD_METHOD", "LOAD_DEREF",
                      "LOAD_FAST"})
# Keyword arguments that make a call write into what it is given (``np.add(a, b, out=c)``,
# pandas' ``inplace=True``): a line passing one counts every variable it loads as written.
_IN_PLACE_KEYWORDS = frozenset({"out", "inplace"})
_KW_LOADS = frozenset({"KW_NAMES", "LOAD_CONST"})
# Methods that change a list, dict, set, deque or namespace in place.
MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
                      "update", "setdefault", "popitem", "add", "discard", "difference_update",
                      "intersection_update", "symmetric_difference_update", "appendleft",
                      "extendleft", "popleft", "rotate", "move_to_end", "__setitem__",
                      "__delitem__", "__iadd__", "__ior__", "fill", "put", "resize", "itemset",
                      "partition", "setflags", "__setattr__", "__delattr__", "subtract",
                      "fromlist", "frombytes", "fromfile", "fromunicode", "byteswap"})


class _Op(NamedTuple):
    name: str
    arg: Any
    effect: int  # on the stack's depth
    line: Any
    barrier: bool  # a jump or a reordering: a backward reading stops here
    target: bool  # a jump lands here


class Modified(NamedTuple):
    """What a function's own code changes (see :func:`names_modified`)."""
    written: frozenset[str]  # rebound, items or attributes written, changed by an operator
    called: dict[str, frozenset[str]]  # variable -> the mutating methods read from it


_modified_cache: weakref.WeakKeyDictionary[types.CodeType, Modified] = weakref.WeakKeyDictionary()


def names_modified(code: types.CodeType) -> Modified:
    """The local and closure variables of ``code`` whose value its code (nested code included)
    may change in place or rebind: a closure variable rebound (``nonlocal n; n += 1``), an item,
    slice or attribute written on it or on what is read from it (``cache[k] = v``,
    ``groups[i].append``, ``ns.calls += 1``), an in-place operator (``seen += [x]``), a mutating
    method read from it (``cache.setdefault``; by name: whether it changes the value depends on
    its type, so the methods are given). The instructions are read back from what changes the
    object to where it is loaded; where that cannot be followed (a branch, a reordered stack:
    ``cache[k] += 1``), every variable the line loads counts as written. So do the arguments of a
    call of a function that changes what it is given (``heapq.heappush(h, x)``,
    ``operator.setitem``), the variables of a line passing ``out=`` or ``inplace=``, and what an
    alias changes (``c = cache``). What the value is passed to and changed by otherwise (a helper
    of the library's) is not seen; a local rebound to another value leaves the first one (a
    default) unchanged."""
    found = _modified_cache.get(code)
    if found is None:
        written: set[str] = set()
        called: dict[str, set[str]] = {}
        for c in nested_code(code):
            outer = None if c is code else frozenset(c.co_freevars)  # nested: its free variables
            _modified_in(_ops(c), written, called, outer)
        found = _modified_cache[code] = Modified(
            frozenset(written), {k: frozenset(v) for k, v in called.items()})
    return found


def _ops(code: types.CodeType) -> list[_Op]:
    """The instructions of ``code``, superinstructions split, with their stack effects."""
    ops: list[_Op] = []
    line = None
    for ins in dis.get_instructions(code):
        line = ins.positions.lineno if ins.positions is not None else line
        split = _SPLIT.get(ins.opname)
        if split is not None:
            for n, (name, arg) in enumerate(zip(split, ins.argval, strict=True)):
                ops.append(_Op(name, arg, 1 if name == "LOAD_FAST" else -1, line, False,
                               ins.is_jump_target and n == 0))
            continue
        effect, barrier = _measure(ins)
        arg = ins.argrepr if ins.opname == "BINARY_OP" else ins.argval  # ("+=": in place)
        ops.append(_Op(ins.opname, arg, effect, line, barrier, ins.is_jump_target))
    return ops


def _measure(ins: dis.Instruction) -> tuple[int, bool]:
    """An instruction's effect on the stack's depth, and whether a backward reading stops there."""
    try:
        effect = dis.stack_effect(ins.opcode, ins.arg if ins.opcode >= dis.HAVE_ARGUMENT else None,
                                  jump=False)
    except ValueError:  # (an instruction dis cannot measure: nothing is read through it)
        return 0, True
    return effect, ins.opcode in _JUMPS or ins.opname in _REORDERS


def _start(ops: list[_Op], end: int) -> int | None:
    """Where the expression whose value is on top of the stack before ``ops[end]`` begins; None
    where that cannot be read back."""
    if ops[end].target:  # (branches meet here: the value may be either's)
        return None
    depth = 0
    for j in range(end - 1, max(-1, end - 1 - _LOOK_BACK), -1):
        op = ops[j]
        if op.barrier:
            return None
        depth += op.effect
        if depth == 1:
            return j
        if depth > 1 or op.target:
            return None
    return None


def _root(ops: list[_Op], end: int, below: int) -> str | None | bool:
    """The variable the object ``below`` values under the top of the stack before ``ops[end]`` is
    read from (``cache`` for ``cache[k]``, ``groups[i]``, ``ns.memo``); None for none (a call's
    result); False where it cannot be read back."""
    at: int | None = end
    for _ in range(below + 1):
        at = _start(ops, at) if at is not None else None
    if at is None:
        return False
    # The object's own expression begins where it is loaded: follow items and attributes down.
    op = ops[at]  # (the start of ``cache[k]`` or ``ns.memo`` is the load of ``cache``, ``ns``)
    return op.arg if op.name in _VAR_LOADS else None


def _modified_in(ops: list[_Op], written: set[str], called: dict[str, set[str]],
                 outer: frozenset[str] | None) -> None:
    """:func:`names_modified` of one code object (its nested code aside), into ``written`` and
    ``called``; ``outer``: the variables that count (None: all)."""
    mine: set[str] = set()
    methods: dict[str, set[str]] = {}
    aliases: dict[str, set[str]] = {}  # ``c = cache``: c -> {cache}
    unknown_lines = {op.line for i, op in enumerate(ops) if not _step(ops, i, mine, methods, aliases)}
    mine.update(op.arg for op in ops if op.line in unknown_lines and op.name in _VAR_LOADS)
    _through_aliases(mine, methods, aliases)
    written.update(mine if outer is None else mine & outer)
    for name in methods.keys() if outer is None else methods.keys() & outer:
        called.setdefault(name, set()).update(methods[name])


def _through_aliases(mine: set[str], methods: dict[str, set[str]],
                     aliases: dict[str, set[str]]) -> None:
    """What an alias changes, the variable it aliases has changed."""
    for name in list(mine) + list(methods):
        for original in _aliased(name, aliases):
            if name in mine:
                mine.add(original)
            if name in methods:
                methods.setdefault(original, set()).update(methods[name])


def _step(ops: list[_Op], i: int, mine: set[str], methods: dict[str, set[str]],
          aliases: dict[str, set[str]]) -> bool:
    """Read ``ops[i]`` into ``mine`` (written), ``methods`` (mutating methods read) and
    ``aliases``; False where what it changes cannot be read back (its line then counts whole)."""
    op = ops[i]
    if op.name in ATTR_READS and op.arg in MUTATORS:
        root = _root(ops, i, 0)
        if isinstance(root, str):
            methods.setdefault(root, set()).add(op.arg)
        elif root is None:  # read from what a call gave (``vars(ns).update``): not followed
            root = False
    else:
        root = _written_root(ops, i)
        if isinstance(root, str):
            mine.add(root)
    if op.name in _CALLEES and op.arg in _MUTATING_FUNCTIONS:
        mine.update(_call_arguments(ops, i))
    for alias, original in _aliases_at(ops, i):
        aliases.setdefault(alias, set()).add(original)
    return root is not False and not _in_place_keywords(op)


def _in_place_keywords(op: _Op) -> bool:
    """Keyword names passed to a call that writes into what it is given (``out=``)."""
    return op.name in _KW_LOADS and isinstance(op.arg, tuple) and \
        bool(_IN_PLACE_KEYWORDS.intersection(op.arg))


def _call_arguments(ops: list[_Op], i: int) -> list[str]:
    """The variables loaded for the call of the function ``ops[i]`` loads (its arguments, on any
    line), up to the call."""
    found = []
    depth = ops[i].effect
    for op in ops[i + 1:i + 1 + _LOOK_BACK]:
        depth += op.effect
        if op.name in _VAR_LOADS:
            found.append(str(op.arg))
        elif op.name.startswith("CALL") and depth <= 1:
            break
    return found


def _written_root(ops: list[_Op], i: int) -> str | None | bool:
    """The variable ``ops[i]`` rebinds (a closure variable), changes with an in-place operator or
    writes an item, slice or attribute of (see :func:`_root`); None for none."""
    op = ops[i]
    if op.name in _CELL_WRITES or (op.name == "STORE_FAST" and i and ops[i - 1].name ==
                                   "BINARY_OP" and str(ops[i - 1].arg).endswith("=")):
        return str(op.arg)
    if op.name in _CHANGES_BELOW:
        return _root(ops, i, _CHANGES_BELOW[op.name])
    return None


_BINDS = frozenset({"STORE_FAST", "STORE_DEREF"})


def _aliases_at(ops: list[_Op], i: int) -> list[tuple[str, str]]:
    """``(alias, variable)`` where ``ops[i]`` binds a variable to another one: ``c = cache``,
    ``(c := cache)``, ``a = b = cache``, ``c, h = cache, hits`` (loads, then stores in the reverse
    order); where branches meet at the store (``c = cache or {}``, ``c = a if p else b``), to
    every variable its line loads."""
    op = ops[i]
    if op.name not in _BINDS:
        return []
    if op.target:
        return [(str(op.arg), str(o.arg)) for o in ops if o.line == op.line and o.name in _VAR_LOADS]
    j = _bound_from(ops, i)
    return [(str(op.arg), str(ops[j].arg))] if j >= 0 and ops[j].name in _VAR_LOADS else []


def _bound_from(ops: list[_Op], i: int) -> int:
    """Where the value the store ``ops[i]`` takes was loaded, if a run of plain loads gave it
    (else -1)."""
    first = i
    while first > 0 and ops[first - 1].name in _BINDS:
        first -= 1
    if first >= 2 and ops[first - 1].name == "COPY":  # (a walrus, ``a = b = cache``: copies)
        return first - 2
    j = first - 1 - (i - first)  # the stores take the loads in the reverse order
    return j if j >= 0 and all(ops[k].name in _VAR_LOADS for k in range(j, first)) else -1


def _aliased(name: str, aliases: dict[str, set[str]]) -> set[str]:
    """The variables ``name`` is an alias of, through aliases of aliases."""
    found: set[str] = set()
    todo = [name]
    while todo:
        for original in aliases.get(todo.pop(), ()):
            if original not in found and original != name:
                found.add(original)
                todo.append(original)
    return found
