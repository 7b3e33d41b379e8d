"""``%%fncache``: cache a notebook cell as a unit (``%load_ext fncache``).

A cell's key is made the way ``@memoize`` makes a function's, by :func:`fncache._fingerprint.fingerprint`
of a function whose code is the cell's code: its bytecode (so formatting and comments do not count),
the content of every variable it reads that was defined before it ran, and the code of every user
function and class it reaches, at any depth. The variables a cell *reads* are found in its syntax
(:func:`cell_inputs`): a name the cell assigns before any statement reads it is not an input, so
running a cell twice in one kernel gives one key. Everything that decides which names are inputs errs
towards more of them: a needless input can cost a miss, a missing one would be a stale hit.

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
import pickle
import re
import shlex
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fncache import _hasher
from fncache._callkey import KEY_SCHEMA, PYTHON, CallKey
from fncache._entries import Counters, Entries
from fncache._errors import ConfigError, UnhashableArgument
from fncache._fingerprint import fingerprint
from fncache._options import _DISABLED, Options
from fncache._targets import recorded_module

__all__ = ["CellMagic", "cell_inputs", "load_ipython_extension", "parse_options"]

log = logging.getLogger("fncache")

#: Version of the stored payload's layout; an entry of another layout is a miss.
PAYLOAD = 1
#: The ``__name__`` of the namespace the cell's inputs are keyed in: its globals are labelled
#: ``global NAME``, and those the user's functions read ``global __main__.NAME``.
CELL_MODULE = "<cell>"
_USAGE = "%%fncache [--store DIR_OR_URL] [-v|--verbose]"
# Names IPython itself binds around each execution (history and output caches): never outputs.
_IPYTHON_NAMES = re.compile(r"_+|_i+|_i\d+|_\d+|_ih|_oh|_dh|In|Out")
# Display outputs that point at state living in the kernel (a widget's model): replaying the message
# after a restart would show "model not found".
_KERNEL_STATE_MIMES = ("application/vnd.jupyter.widget-view+json",)
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
# What a cell reads and binds
# ---------------------------------------------------------------------------------------------

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
        found: set[str] = set()
        bound: set[str] = set()
        for item in node.items:
            found |= _names_read(item.context_expr) - bound
            if item.optional_vars is not None:
                found |= _names_read(item.optional_vars) - bound  # ``as obj.attr`` reads obj
                bound |= _targets(item.optional_vars)
        return found | (_all_read(node.body) - bound)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        gens = node.generators
        local = set().union(*(_targets(g.target) for g in gens))
        inner = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        inner += [g.iter for g in gens[1:]] + [i for g in gens for i in g.ifs]
        return _names_read(gens[0].iter) | (_all_read(inner) - local)
    found = set()
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        found.add(node.target.id)
    for child in ast.iter_child_nodes(node):
        found |= _names_read(child)
    return found


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


def _top_level_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes of the cell's own scope (not inside the functions, lambdas and classes it defines)."""
    for child in ast.iter_child_nodes(tree):
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from _top_level_nodes(child)


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


def _unseen_reads(tree: ast.Module, namespace: dict[str, Any]) -> str | None:
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
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "vars" \
                and not n.args and "vars" not in namespace:
            return f"it calls vars() (line {n.lineno}), which reads variables its code does not name"
    return None


# ---------------------------------------------------------------------------------------------
# Recording what a cell prints and displays
# ---------------------------------------------------------------------------------------------

@dataclass
class Recording:
    """What one run of a cell showed, in order: ``("stream", name, text)``, ``("display", data,
    metadata, kwargs)``, ``("clear", wait)``; and how many displays cannot be replayed."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    lost: int = 0

    def stream(self, name: str, text: str) -> None:
        last = self.events[-1] if self.events else None
        if last is not None and last[0] == "stream" and last[1] == name:
            self.events[-1] = ("stream", name, last[2] + text)
        else:
            self.events.append(("stream", name, text))

    def display(self, data: Any, metadata: Any, kwargs: dict[str, Any]) -> None:
        if isinstance(data, dict) and any(m in data for m in _KERNEL_STATE_MIMES):
            self.lost += 1
            return
        event = ("display", data, metadata, kwargs)
        try:
            pickle.dumps(event, protocol=5)
        except Exception:
            self.lost += 1
            return
        self.events.append(event)


class _Tee:
    """A text stream that writes through to ``inner`` and records what was written."""

    def __init__(self, inner: Any, name: str, recording: Recording) -> None:
        self._inner = inner
        self._name = name
        self._recording = recording

    def write(self, text: str) -> int:
        n = self._inner.write(text)
        if isinstance(text, str):
            self._recording.stream(self._name, text)
        return n  # type: ignore[no-any-return]

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _DisplayTee:
    """The shell's display publisher, also recording each display (IPython.display.display)."""

    def __init__(self, inner: Any, recording: Recording) -> None:
        self._inner = inner
        self._recording = recording

    def publish(self, data: Any, metadata: Any = None, source: Any = None, **kwargs: Any) -> None:
        self._inner.publish(data=data, metadata=metadata, **kwargs)
        self._recording.display(data, metadata, kwargs)

    def clear_output(self, wait: bool = False) -> None:
        self._inner.clear_output(wait)
        self._recording.events.append(("clear", bool(wait)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def _recorded(shell: Any) -> Iterator[Recording]:
    rec = Recording()
    out, err, pub = sys.stdout, sys.stderr, shell.display_pub
    sys.stdout, sys.stderr = _Tee(out, "stdout", rec), _Tee(err, "stderr", rec)
    shell.display_pub = _DisplayTee(pub, rec)
    try:
        yield rec
    finally:
        sys.stdout, sys.stderr = out, err
        shell.display_pub = pub


def _replay(shell: Any, payload: dict[str, Any]) -> None:
    for event in payload["events"]:
        if event[0] == "stream":
            stream = sys.stderr if event[1] == "stderr" else sys.stdout
            stream.write(event[2])
            stream.flush()
        elif event[0] == "display":
            shell.display_pub.publish(data=event[1], metadata=event[2], **event[3])
        elif event[0] == "clear":
            shell.display_pub.clear_output(event[1])
    if payload["lost"]:
        _say(f"{payload['lost']} display output(s) of this cell could not be stored (widgets or "
             "unpicklable data) and are not shown again")


# ---------------------------------------------------------------------------------------------
# Storing outputs
# ---------------------------------------------------------------------------------------------

class _NullFile:
    def write(self, b: Any) -> int:
        return len(b)


class _DryRun(pickle.Pickler):
    """Pickles into nothing (large buffers are not copied), noting the code of the notebook that
    plain pickle would take by name although the notebook did not define it before the cell ran."""

    def __init__(self, before: dict[str, Any], main: str) -> None:
        super().__init__(_NullFile(), protocol=5, buffer_callback=lambda b: None)
        self.before = before
        self.main = main
        self.new_code = False

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == self.main \
                and self.before.get(getattr(obj, "__name__", ""), _MISSING) is not obj:
            self.new_code = True
        return NotImplemented


def _storable(value: Any, before: dict[str, Any], main: str) -> tuple[str | None, bool]:
    """(why ``value`` cannot be pickled or None, whether it must be pickled by value).

    Plain pickle takes a notebook's function or class by name, which is right for one an earlier
    cell defines (the restarted notebook defines it again before this cell) and wrong for one this
    cell defines (a hit would look it up before anything defines it): such values go through
    cloudpickle, which copies the code.
    """
    dry = _DryRun(before, main)
    try:
        dry.dump(value)
        if not dry.new_code:
            return None, False
    except Exception:
        pass
    try:
        import cloudpickle

        cloudpickle.CloudPickler(_NullFile(), protocol=5, buffer_callback=lambda b: None).dump(value)
        return None, True
    except Exception as e:
        return f"{type(e).__name__}: {e}", True


def _rebind_functions(value: Any, namespace: dict[str, Any]) -> Any:
    """A notebook function or class read back from the store, made to read the notebook's globals.

    cloudpickle gives code of ``__main__`` copied by value a globals dict of its own: without this,
    a function a cached cell defined (or a method of a class it defined) would keep reading the
    values the notebook's globals had when the cell was stored.
    """
    main = namespace.get("__name__")
    if isinstance(value, types.FunctionType):
        return _rebound(value, namespace) if value.__module__ == main else value
    if isinstance(value, type) and value.__module__ == main:
        for name, attr in list(vars(value).items()):
            if isinstance(attr, types.FunctionType):
                setattr(value, name, _rebound(attr, namespace))
            elif isinstance(attr, (staticmethod, classmethod)) and \
                    isinstance(attr.__func__, types.FunctionType):
                setattr(value, name, type(attr)(_rebound(attr.__func__, namespace)))
    return value


def _rebound(value: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    if value.__globals__ is namespace:
        return value  # taken by name: the notebook's own function
    fn = types.FunctionType(value.__code__, namespace, value.__name__, value.__defaults__,
                            value.__closure__)
    fn.__kwdefaults__ = value.__kwdefaults__
    fn.__qualname__ = value.__qualname__
    fn.__annotations__ = value.__annotations__
    fn.__doc__ = value.__doc__
    fn.__dict__.update(value.__dict__)
    return fn


def _say(line: str) -> None:
    print(f"[fncache] {line}", file=sys.stderr, flush=True)
    log.info("%%%%fncache: %s", line)


def _describe_type(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


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
        ns = self.shell.user_ns
        source = self.shell.transform_cell(cell)
        filename = self.shell.compile.cache(source)
        tree = self.shell.transform_ast(ast.parse(source, filename))
        for node in _top_level_nodes(tree):
            if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
                raise _usage_error(f"top-level await is not supported (line {node.lineno}): "
                                   "run it with asyncio.run(...) or in another cell")
        if _DISABLED[0]:
            return self._run(tree, filename)
        try:
            c = self._key_parts(source, tree, filename)
            ck = self._key(c)
            entries, verbose = self.entries(options, c.function)
        except _Uncached as e:
            _say(f"cell runs uncached: {e}")
            return self._run(tree, filename)
        found, payload = entries.lookup(ck.key)
        names = _names_of(payload, ck.key) if found and _valid_payload(payload) else None
        if names is not None:
            if verbose is not None:
                verbose.report("hit", ck.key)
            return self._restore(payload, names)
        told = verbose.announce(ck, (), {}) if verbose is not None else None
        before = dict(ns)
        start = time.perf_counter()
        with _recorded(self.shell) as rec:
            value = self._run(tree, filename)
        duration = time.perf_counter() - start
        if told is not None:
            told(duration)
        try:
            payload = self._payload(ck, before, rec, value)
        except _Uncached as e:
            _say(f"cell ran uncached: {e}")
            return value
        entries.save(ck, payload, duration)
        return value

    # -- key -----------------------------------------------------------------------------------
    def _key_parts(self, source: str, tree: ast.Module, filename: str) -> _Cell:
        ns = self.shell.user_ns
        unseen = _unseen_reads(tree, ns)
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
        names: dict[str, Any] = {}
        for name, v in ns.items():
            if before.get(name, _MISSING) is not v and not _IPYTHON_NAMES.fullmatch(name):
                names[name] = v
        deleted = sorted(n for n in before if n not in ns and not _IPYTHON_NAMES.fullmatch(n))
        assert ck.fingerprint is not None
        changed = ck.fingerprint.changed_state()
        if changed:
            held = {id(v): n for n, v in ns.items() if not _IPYTHON_NAMES.fullmatch(n)}
            for v in changed:
                n = held.get(id(v))
                if n is None:
                    raise _Uncached(f"it modified a {_describe_type(v)} that it reads through a "
                                    "function or an attribute, which restoring names cannot redo")
                names[n] = v  # modified in place: restored by binding the name to the new value
        main = ns.get("__name__", "__main__")
        by_value: dict[str, bytes] = {}
        for name in sorted(names):
            why, copy = _storable(names[name], before, main)
            if why is not None:
                raise _Uncached(f"variable {name!r} ({_describe_type(names[name])}) cannot be "
                                f"stored: {why}")
            if copy:
                import cloudpickle

                by_value[name] = cloudpickle.dumps(names.pop(name), protocol=5)
        shown: tuple[Any, ...] = ("none",)
        if value is not None:
            why, copy = _storable(value, before, main)
            if why is None and not copy:
                shown = ("value", value)
            else:  # kept as what it displayed
                data, metadata = self.shell.display_formatter.format(value)
                shown = ("display", data, metadata)
        return {"fncache-cell": PAYLOAD, "names": names, "by_value": by_value, "deleted": deleted,
                "events": rec.events, "lost": rec.lost, "value": shown}

    def _restore(self, payload: dict[str, Any], names: dict[str, Any]) -> Any:
        """Bind every name (all were read back already), then replay what the cell showed."""
        ns = self.shell.user_ns
        for name in payload["deleted"]:
            ns.pop(name, None)
        ns.update({n: _rebind_functions(v, ns) for n, v in names.items()})
        _replay(self.shell, payload)
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


def _valid_payload(payload: Any) -> bool:
    """Whether a verified entry has the shape of a cell's (anything else is a miss)."""
    return (isinstance(payload, dict) and payload.get("fncache-cell") == PAYLOAD
            and isinstance(payload.get("names"), dict)
            and all(isinstance(n, str) for n in payload["names"])
            and isinstance(payload.get("by_value"), dict)
            and all(isinstance(n, str) and isinstance(b, bytes) for n, b in payload["by_value"].items())
            and isinstance(payload.get("deleted"), list)
            and isinstance(payload.get("events"), list)
            and isinstance(payload.get("lost"), int)
            and isinstance(payload.get("value"), tuple) and bool(payload["value"]))


def load_ipython_extension(ipython: Any) -> None:
    """Register the ``%%fncache`` cell magic (``%load_ext fncache``)."""
    magic = CellMagic(ipython)

    def fncache(line: str, cell: str) -> Any:
        return magic(line, cell)

    fncache.__doc__ = __doc__
    ipython.register_magic_function(fncache, magic_kind="cell", magic_name="fncache")


