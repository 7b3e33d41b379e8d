"""``%%fncache``: cache a notebook cell as a unit (``%load_ext fncache``).

A cell's key is made the way ``@memoize`` makes a function's, by :func:`fncache.code.fingerprint.fingerprint`
of a function whose code is the cell's code: its bytecode (so formatting and comments do not count),
the content of every variable it reads that was defined before it ran, and the code of every user
function and class it reaches, at any depth. The variables a cell *reads* are found in its syntax
(:mod:`fncache.notebook.cellcode`); what it prints and displays is recorded and replayed by
:mod:`fncache.notebook.cellio`.

What a cell leaves behind, stored as one entry: every top-level name it bound, rebound or deleted
(found by comparing the namespace before and after it ran, so names bound by functions it calls count
too), every input it modified in place, what it wrote to ``sys.stdout``/``sys.stderr``, the rich
outputs it displayed, and the value of its last expression. On a hit the entry is read and unpickled
whole, then the names are bound at once and the outputs replayed: nothing is half-restored.

Run uncached, with one line on stderr saying why: a cell that reads a value that cannot be keyed,
uses IPython magics or shell commands (what they read is not visible in the code), binds a name whose
value cannot be pickled, or modifies a value it reads that no top-level name holds (restoring the
names could not redo that). Not for: cells whose effect is outside the namespace (files written,
requests sent), which a hit does not redo; output written below Python's ``sys.stdout`` (a C library
or a subprocess writing to file descriptor 1) is shown but not recorded.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import re
import shlex
import time
import types
from dataclasses import dataclass
from typing import Any

from fncache._callkey import KEY_SCHEMA, PYTHON, CallKey
from fncache._entries import Counters, Entries
from fncache._errors import ConfigError, UnhashableArgument
from fncache._options import DISABLED, Options
from fncache.code.fingerprint import fingerprint
from fncache.code.targets import recorded_module
from fncache.notebook.cellcode import cell_inputs, cell_name, top_level_nodes, unseen_reads
from fncache.notebook.cellio import (
    Recording,
    describe_type,
    rebind_code,
    recorded,
    replay,
    say,
    storable,
)
from fncache.values import hasher as _hasher

__all__ = ["CellMagic", "CellOptions", "load_ipython_extension", "parse_options"]

log = logging.getLogger("fncache")

#: Version of the stored payload's layout; an entry of another layout is a miss.
PAYLOAD = 1
#: The ``__name__`` of the namespace the cell's inputs are keyed in: its globals are labelled
#: ``global NAME``, and those the user's functions read ``global __main__.NAME``.
CELL_MODULE = "<cell>"
_USAGE = "%%fncache [--store DIR_OR_URL] [-v|--verbose]"
# Names IPython itself binds around each execution (history and output caches): never outputs.
_IPYTHON_NAMES = re.compile(r"_+|_i+|_i\d+|_\d+|_ih|_oh|_dh|In|Out")
_MISSING = object()


def _usage_error(message: str) -> Exception:
    from IPython.core.error import UsageError

    return UsageError(f"%%fncache: {message} (usage: {_USAGE})")


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CellOptions:
    """What the magic line asked for."""

    store: str | None = None
    verbose: bool = False


def parse_options(line: str) -> CellOptions:
    """The options of a ``%%fncache`` line; a ``UsageError`` names an unknown or incomplete one."""
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise _usage_error(f"cannot parse the options {line!r}: {e}") from e
    store: str | None = None
    verbose = False
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("-v", "--verbose"):
            verbose = True
        elif word == "--store" or word.startswith("--store="):
            value = word.partition("=")[2] if "=" in word else (words[i + 1] if i + 1 < len(words) else "")
            if word == "--store":
                i += 1
            if not value:
                raise _usage_error("--store needs a directory or a URL")
            store = value
        else:
            raise _usage_error(f"unknown option {word!r}")
        i += 1
    return CellOptions(store, verbose)


# ---------------------------------------------------------------------------------------------
# The magic
# ---------------------------------------------------------------------------------------------

class _Uncached(Exception):
    """Why a cell runs without the cache (the message is the line shown)."""


@dataclass
class _Cell:
    """One cell, compiled and keyed."""

    source: str
    tree: ast.Module
    code: types.CodeType
    function: str
    inputs: dict[str, Any]


class CellMagic:
    """The ``%%fncache`` cell magic of one shell: options, key, lookup, run, store, replay."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self._stores: dict[str | None, Options] = {}
        self._entries: dict[tuple[str | None, str], tuple[Entries, Any]] = {}

    def entries(self, options: CellOptions, function: str) -> tuple[Entries, Any]:
        """The entries of one cell in one store, and its verbose lines (None without ``-v`` or
        ``$FNCACHE_VERBOSE``); each store is opened once per kernel."""
        opts = self._stores.get(options.store)
        if opts is None:
            try:
                opened = Entries("%%fncache", Options.make(store=options.store), Counters()).store
            except ConfigError as e:
                raise _usage_error(f"--store {options.store!r}: {e}") from e
            except Exception as e:  # an unreachable server, a directory that cannot be made
                raise _Uncached(f"the store cannot be opened: {type(e).__name__}: {e}") from e
            opts = self._stores[options.store] = Options.make(store=opened)
        found = self._entries.get((options.store, function))
        if found is None:
            from fncache._verbose import Verbose

            entries = Entries(function, opts, Counters())
            found = self._entries[(options.store, function)] = (
                entries, Verbose(function, lambda: entries.store))
        return found[0], (found[1] if options.verbose or opts.verbose else None)

    def __call__(self, line: str, cell: str) -> Any:
        options = parse_options(line)
        source, filename, tree = self._parse(cell)
        if DISABLED[0]:
            return self._run(tree, filename)
        try:
            c = self._key_parts(source, tree, filename)
            ck = self._key(c)
            entries, verbose = self.entries(options, c.function)
        except _Uncached as e:
            say(f"cell runs uncached: {e}")
            return self._run(tree, filename)
        found, payload = entries.lookup(ck.key)
        names = _names_of(payload, ck.key) if found and _valid_payload(payload) else None
        if names is not None:
            if verbose is not None:
                verbose.report("hit", ck.key)
            return self._restore(payload, names)
        return self._compute(ck, entries, verbose, tree, filename)

    def _parse(self, cell: str) -> tuple[str, str, ast.Module]:
        """The cell's source after IPython's transforms, its file name and its tree; top-level
        ``await`` is refused."""
        source = self.shell.transform_cell(cell)
        filename = self.shell.compile.cache(source)
        tree = self.shell.transform_ast(ast.parse(source, filename))
        for node in top_level_nodes(tree):
            if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
                raise _usage_error(f"top-level await is not supported (line {node.lineno}): "
                                   "run it with asyncio.run(...) or in another cell")
        return source, filename, tree

    def _compute(self, ck: CallKey, entries: Entries, verbose: Any, tree: ast.Module,
                 filename: str) -> Any:
        """A miss: run the cell, recording what it shows, and store what it left behind."""
        told = verbose.announce(ck, (), {}) if verbose is not None else None
        before = dict(self.shell.user_ns)
        start = time.perf_counter()
        with recorded(self.shell) as rec:
            value = self._run(tree, filename)
        duration = time.perf_counter() - start
        if told is not None:
            told(duration)
        try:
            payload = self._payload(ck, before, rec, value)
        except _Uncached as e:
            say(f"cell ran uncached: {e}")
            return value
        entries.save(ck, payload, duration)
        return value

    # -- key -----------------------------------------------------------------------------------
    def _key_parts(self, source: str, tree: ast.Module, filename: str) -> _Cell:
        ns = self.shell.user_ns
        unseen = unseen_reads(tree, ns)
        if unseen is not None:
            raise _Uncached(unseen)
        code = compile(tree, filename, "exec")
        inputs = {n: ns[n] for n in sorted(cell_inputs(tree)) if n in ns}
        function = f"{recorded_module('__main__', ns)}:{cell_name(code)}"
        return _Cell(source, tree, code, function, inputs)

    def _key(self, c: _Cell) -> CallKey:
        namespace = {"__name__": CELL_MODULE, **c.inputs}
        fn = types.FunctionType(c.code, namespace, c.function.rpartition(":")[2])
        fn.__qualname__ = fn.__name__
        try:
            fp = fingerprint(fn)
        except UnhashableArgument as e:
            raise _Uncached(str(e)) from e
        written = self._rebound_state(c, fp.by_name)
        if written:  # recorded by content, so that verbose lines and explain can name them
            fp = dataclasses.replace(fp, components={
                **fp.components, **{f"global {n}": d.hex() for n, d in written}})
        code = _hasher.digest(("fncache.cell", fp.digest, written))
        key = _hasher.digest((KEY_SCHEMA, PYTHON, code)).hex()
        return CallKey(c.function, None, fp, None, (), (), (), code, key)

    def _rebound_state(self, c: _Cell, by_name: dict[str, str]) -> tuple[tuple[str, bytes], ...]:
        """Digests of the notebook variables that code the cell reaches rebinds (``global n``).

        A function's fingerprint keys such a global by name, as state the function writes; a
        cell's key needs its content, since a hit restores the value the cell left *from* the
        one it found (``global n; n += 1`` in a helper: the stored ``n`` holds the old one).
        """
        ns = self.shell.user_ns
        prefix = f"{ns.get('__name__')}."
        out = []
        for label, why in sorted(by_name.items()):
            if why != "rebound by the function" or not label.startswith("global "):
                continue
            name = label[len("global "):]
            if name in c.inputs:  # read by the cell itself (its own functions rebind it)
                value = c.inputs[name]
            elif name.startswith(prefix) and name[len(prefix):] in ns:  # by the notebook's functions
                value = ns[name[len(prefix):]]
            else:
                continue
            try:
                out.append((name, _hasher.digest(value)))
            except UnhashableArgument as e:
                raise _Uncached(f"global {name} cannot be hashed: {e}") from e
        return tuple(out)

    # -- running -------------------------------------------------------------------------------
    def _run(self, tree: ast.Module, filename: str) -> Any:
        """Run the cell in the user's namespace; its last expression's value is returned (and shown
        by IPython as the cell's result). Exceptions propagate: IPython shows them as the cell's."""
        body = list(tree.body)
        last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
        assert last is None or isinstance(last, ast.Expr)
        g, ns = self.shell.user_global_ns, self.shell.user_ns
        if body:
            exec(compile(ast.Module(body=body, type_ignores=[]), filename, "exec"), g, ns)
        if last is None:
            return None
        return eval(compile(ast.Expression(body=last.value), filename, "eval"), g, ns)

    def _payload(self, ck: CallKey, before: dict[str, Any], rec: Recording, value: Any) -> dict[str, Any]:
        """What to store: the names the cell bound or modified, its outputs and its value; raises
        :class:`_Uncached` naming what cannot be stored."""
        ns = self.shell.user_ns
        names = {name: v for name, v in ns.items()
                 if before.get(name, _MISSING) is not v and not _IPYTHON_NAMES.fullmatch(name)}
        deleted = sorted(n for n in before if n not in ns and not _IPYTHON_NAMES.fullmatch(n))
        assert ck.fingerprint is not None
        names.update(_modified_names(ns, ck.fingerprint.changed_state()))
        main = ns.get("__name__", "__main__")
        by_value = _by_value(names, before, main)
        return {"fncache-cell": PAYLOAD, "names": names, "by_value": by_value, "deleted": deleted,
                "events": rec.events, "lost": rec.lost, "value": self._shown(value, before, main)}

    def _shown(self, value: Any, before: dict[str, Any], main: str) -> tuple[Any, ...]:
        """The cell's value as stored: itself, or (not storable) what it displayed."""
        if value is None:
            return ("none",)
        why, copy = storable(value, before, main)
        if why is None and not copy:
            return ("value", value)
        data, metadata = self.shell.display_formatter.format(value)
        return ("display", data, metadata)

    def _restore(self, payload: dict[str, Any], names: dict[str, Any]) -> Any:
        """Bind every name (all were read back already), then replay what the cell showed."""
        ns = self.shell.user_ns
        for name in payload["deleted"]:
            ns.pop(name, None)
        ns.update({n: rebind_code(v, ns) for n, v in names.items()})
        replay(self.shell, payload)
        shown = payload["value"]
        if shown[0] == "value":
            return shown[1]
        if shown[0] == "display":
            self.shell.display_pub.publish(data=shown[1], metadata=shown[2])
        return None


def _names_of(payload: dict[str, Any], key: str) -> dict[str, Any] | None:
    """Every name a stored cell binds, read back whole (None if one cannot be: a miss).

    The copies of code are part of the entry, which passed its checksum (and signature) before
    anything in it was unpickled.
    """
    names = dict(payload["names"])
    if payload["by_value"]:
        import cloudpickle

        try:
            for name, blob in payload["by_value"].items():
                names[name] = cloudpickle.loads(blob)
        except Exception as e:  # as a function's entry that does not load here: recomputed
            log.warning("%%%%fncache: entry %s cannot be loaded in this process (%s: %s); "
                        "recomputing", key, type(e).__name__, e)
            return None
    return names


def _modified_names(ns: dict[str, Any], changed: list[Any]) -> dict[str, Any]:
    """The names holding values the cell modified in place (restored by binding the name to the
    new value); :class:`_Uncached` for one no name holds."""
    if not changed:
        return {}
    held = {id(v): n for n, v in ns.items() if not _IPYTHON_NAMES.fullmatch(n)}
    names = {}
    for v in changed:
        n = held.get(id(v))
        if n is None:
            raise _Uncached(f"it modified a {describe_type(v)} that it reads through a "
                            "function or an attribute, which restoring names cannot redo")
        names[n] = v
    return names


def _by_value(names: dict[str, Any], before: dict[str, Any], main: str) -> dict[str, bytes]:
    """Take out of ``names`` the values stored by value (code made in the notebook), pickled;
    :class:`_Uncached` naming a value that cannot be stored."""
    by_value: dict[str, bytes] = {}
    for name in sorted(names):
        why, copy = storable(names[name], before, main)
        if why is not None:
            raise _Uncached(f"variable {name!r} ({describe_type(names[name])}) cannot be "
                            f"stored: {why}")
        if copy:
            import cloudpickle

            by_value[name] = cloudpickle.dumps(names.pop(name), protocol=5)
    return by_value


# The fields of a stored cell and their types.
_PAYLOAD_FIELDS = {"names": dict, "by_value": dict, "deleted": list, "events": list, "lost": int,
                   "value": tuple}


def _valid_payload(payload: Any) -> bool:
    """Whether a verified entry has the shape of a cell's (anything else is a miss)."""
    if not isinstance(payload, dict) or payload.get("fncache-cell") != PAYLOAD:
        return False
    if not all(isinstance(payload.get(k), t) for k, t in _PAYLOAD_FIELDS.items()):
        return False
    return (all(isinstance(n, str) for n in payload["names"])
            and all(isinstance(n, str) and isinstance(b, bytes) for n, b in payload["by_value"].items())
            and bool(payload["value"]))


def load_ipython_extension(ipython: Any) -> None:
    """Register the ``%%fncache`` cell magic (``%load_ext fncache``)."""
    magic = CellMagic(ipython)

    def fncache(line: str, cell: str) -> Any:
        return magic(line, cell)

    fncache.__doc__ = __doc__
    ipython.register_magic_function(fncache, magic_kind="cell", magic_name="fncache")
