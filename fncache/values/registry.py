"""The one table of value handlers: which type is keyed how, and the rule every handler keeps.

A *handler* takes ``(pickler, obj)`` and returns a reduce value (usually ``token(kind, ...)``) that
stands for ``obj`` in the canonical stream, or ``NotImplemented`` to leave ``obj`` to its own pickle.
Three kinds of entry live in this one table, looked up along the value's MRO:

* built-in types (functions, classes, sets, paths...), registered by :mod:`fncache.values.hasher`;
* each library's handlers, in one module per library (``fncache.values.buffers`` for numpy,
  ``.pandas``, ``.arrow``, ``.polars``, ``.torch``, ``.scipy``, ``.geopandas``, ``.nibabel``,
  ``.xarray``, ``.lazy`` for file readers), registered *lazily*: a module declares
  ``@register_lazy("pandas")`` on a function that registers its types, and that function runs the
  first time a value whose class comes from the top-level module ``pandas`` is hashed (as dask's
  ``normalize_token.register_lazy``); the module itself is imported then too (:func:`handlers_in`,
  declared by the hasher). Nothing imports a library or its handler module before a value of it
  arrives;
* users' :func:`fncache.register` entries, which take precedence over the others.

Handler functions are named ``_<type>_token`` (``_frame_token``, ``_sparse_token``), so
``grep -rn "_token(" fncache/values`` finds every special case.

**The soundness rule.** A handler keys everything the object's own pickling keeps
(``__reduce_ex__``/``__getstate__``, slots, ``_metadata``, dtype and array parameters), except state
it declares *not content* with a reason (``not_content=`` at registration: a lazily computed cache,
a print setting, layout). An object whose state the handler does not fully know (an unknown
extension array, a subclass that adds attributes) is keyed through its canonical pickle, never by a
partial key. A value's class enters the key through the class's fingerprint (its code), never as a
name, except the library's own classes, whose code is the library's (its version is part of every
key). The state oracle (``tests/test_state_oracle.py``) checks every registered handler against this
rule, and fails for a handler that it has no corpus for.

This module is a leaf: it imports nothing of fncache but the stream's marker, so value modules
register here without importing the hasher. The hasher installs its digest function here
(:func:`value_digest`) for the value modules that key a part by digest.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from fncache import _forks
from fncache._hasher import Token

__all__ = ["Entry", "Handler", "add_rule", "entries", "entry_for", "guarded", "handlers_in", "has_ref",
           "install_cycle_note", "install_digest", "install_user_code", "is_resolved",
           "is_user_code", "lookup", "note_cycle", "refs", "register_lazy", "register_type",
           "register_user", "resolved", "token", "unregister_type", "unregister_user", "value_digest"]

_log = logging.getLogger("fncache")

Handler = Callable[[Any, Any], Any]


class Entry(NamedTuple):
    """One row of the table: ``handler`` keys values of ``type_`` (and, unless ``exact``, of its
    subclasses); ``not_content`` names the parts of the value's pickled state the handler leaves out
    on purpose, each with its reason (read by the state oracle and the values table)."""

    type_: type
    handler: Handler
    exact: bool = False
    not_content: tuple[tuple[str, str], ...] = ()
    library: str = ""
    final: bool = False  # no protocol rule (wrapped user code, ``__fncache_token__``) applies
    user: bool = False  # a ``fncache.register`` entry


def token(*parts: Any) -> Any:
    """A reduce value standing for ``parts`` in the hash stream."""
    return (Token, parts)


_table: dict[type, Entry] = {}
_users: dict[type, Entry] = {}  # fncache.register entries: looked up first
_lazy: dict[str, list[Callable[[], None]]] = {}
# Library module -> the fncache modules that hold its handlers (:func:`handlers_in`): imported,
# outside the lock, the first time a value of that library is looked up.
_modules: dict[str, list[str]] = {}
#: Resolved handler per concrete type (None: its pickle). Emptied (in place) whenever the table
#: changes; the hasher reads it directly on its hot path.
resolved: dict[type, Handler | None] = {}
_resolved = resolved
_lock = threading.RLock()


def _fresh_lock() -> None:
    global _lock
    _lock = threading.RLock()


_forks.on_fork(_fresh_lock)
# Objects keyed by a user's token (``fncache.ref``): id -> (kept-alive object or None, token).
refs: dict[int, tuple[Any, Any]] = {}
# Rules the hasher applies to types no entry names (wrappers, ``__fncache_token__``...), in order.
_rules: list[Callable[[type, Entry | None], Handler | None]] = []
_digest: list[Callable[[Any], bytes]] = []
_user_code: list[Callable[[Any], bool]] = []
_cycle_note: list[Callable[[], None]] = []


def register_type(types_: type | Iterable[type], handler: Handler, *, exact: bool = False,
                  not_content: Iterable[tuple[str, str]] = (), library: str = "",
                  final: bool = False) -> None:
    """Key values of ``types_`` by ``handler`` (see the module docstring). Takes effect at once.

    ``exact``: for that type only, not its subclasses; ``not_content``: (part, reason) pairs of the
    pickled state the handler leaves out; ``final``: no protocol rule of the hasher applies.
    """
    for t in (types_,) if isinstance(types_, type) else types_:
        entry = Entry(t, handler, exact, tuple(not_content),
                      library or t.__module__.split(".")[0], final)
        with _lock:
            _table[t] = entry
            _resolved.clear()


def register_user(type_: type, handler: Handler) -> None:
    """A ``fncache.register`` entry: for ``type_`` and its subclasses, before every other entry."""
    with _lock:
        _users[type_] = Entry(type_, handler, library="user", final=True, user=True)
        _resolved.clear()


def unregister_user(type_: type) -> None:
    """Remove a ``fncache.register`` entry; no error if there is none."""
    with _lock:
        _users.pop(type_, None)
        _resolved.clear()


def unregister_type(type_: type) -> None:
    """Remove ``type_``'s entry; no error if it has none."""
    with _lock:
        _table.pop(type_, None)
        _resolved.clear()


def register_lazy(top_level_module: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Decorator: run the function (which registers a library's types) the first time a value whose
    class (or a base of it) lives in ``top_level_module`` or a module below it is looked up. A
    dotted name (``"scipy.sparse"``) waits for that subpackage."""

    def decorate(fn: Callable[[], None]) -> Callable[[], None]:
        with _lock:
            _lazy.setdefault(top_level_module, []).append(fn)
            _resolved.clear()
        return fn

    return decorate


def handlers_in(module: str, *libraries: str) -> None:
    """Declare that the fncache module ``module`` registers (with :func:`register_lazy`) the
    handlers of each of ``libraries``: it is imported the first time a value whose class (or a
    base) lives in one of them is looked up, so ``import fncache`` loads no handler module."""
    with _lock:
        for library in libraries:
            _modules.setdefault(library, []).append(module)
        _resolved.clear()


def _import_handlers(t: type) -> None:
    """Import the handler modules declared for ``t``'s libraries. Outside :data:`_lock`: a module
    that registers takes the lock, and the import system serializes (and waits for) concurrent
    imports of one module, so a thread never looks ``t`` up before its handlers are registered."""
    import importlib

    for base in t.__mro__:
        parts = _module_parts(base)
        for i in range(1, len(parts) + 1):
            for name in _modules.get(".".join(parts[:i]), ()):
                importlib.import_module(name)


def add_rule(rule: Callable[[type, Entry | None], Handler | None]) -> None:
    """The rule for what the table does not settle: ``rule(t, entry)`` returns the handler to use
    (``entry`` is the table's, or None). Set once, by the hasher, for its protocols."""
    _rules.clear()
    _rules.append(rule)


def install_user_code(fn: Callable[[Any], bool]) -> None:
    """Whether a class or function is the user's code (:func:`is_user_code`; set once, by the code
    wing, which decides what is user code)."""
    _user_code[:] = [fn]


def install_cycle_note(fn: Callable[[], None]) -> None:
    """What :func:`note_cycle` calls (set once, by the code wing: it marks the fingerprints being
    computed in this thread as not to be cached)."""
    _cycle_note[:] = [fn]


def note_cycle() -> None:
    """A value met again inside its own content was keyed by a marker: what is being computed
    meanwhile depends on where the hash started."""
    if _cycle_note:
        _cycle_note[0]()


def is_user_code(obj: Any) -> bool:
    """Whether a class or function is the user's code (False until the code wing is imported)."""
    return bool(_user_code) and _user_code[0](obj)


def install_digest(fn: Callable[[Any], bytes]) -> None:
    """The hasher's canonical digest, for :func:`value_digest` (set once, at its import)."""
    _digest[:] = [fn]


def value_digest(obj: Any) -> bytes:
    """The canonical 16-byte digest of ``obj`` (the hasher's, without importing it)."""
    return _digest[0](obj)


def _module_parts(cls: type) -> list[str]:
    """The dotted parts of the module ``cls`` is defined in; none where ``__module__`` is not text
    (a compiled metatype's is a descriptor, Cython's)."""
    module = getattr(cls, "__module__", None)
    return module.split(".") if isinstance(module, str) else []


def _load_lazy(t: type) -> None:
    for base in t.__mro__:
        parts = _module_parts(base)
        for i in range(1, len(parts) + 1):
            pending = _lazy.pop(".".join(parts[:i]), None)
            for fn in pending or ():
                fn()


def _from_table(t: type) -> Entry | None:
    for base in t.__mro__:
        entry = _users.get(base)
        if entry is not None:
            return entry
    for base in t.__mro__:
        entry = _table.get(base)
        if entry is not None and (base is t or not entry.exact):
            return entry
    return None


def entry_for(t: type) -> Entry | None:
    """The table's entry for values of type ``t`` (along its MRO), or None."""
    if _modules:
        _import_handlers(t)
    with _lock:
        if _lazy:
            _load_lazy(t)
        return _from_table(t)


def lookup(t: type) -> Handler | None:
    """The handler for values of exact type ``t`` (None: its own pickle); resolved once per type."""
    try:
        return _resolved[t]
    except KeyError:
        pass
    if _modules:
        _import_handlers(t)
    with _lock:
        if _lazy:
            _load_lazy(t)
        entry = _from_table(t)
        found = None if entry is None else entry.handler
        for rule in _rules:
            found = rule(t, entry)
        _resolved[t] = found
    return found


def is_resolved(t: type) -> bool:
    """Whether ``t``'s handler is resolved and unchanged since (no registration since its lookup)."""
    return t in _resolved


def has_ref(obj: Any) -> bool:
    """Whether ``obj`` is keyed by a :func:`fncache.ref` token."""
    return id(obj) in refs


def entries() -> list[Entry]:
    """Every registered entry, after loading the registrations of every library imported now."""
    import importlib
    import sys

    for name in {name for top, names in list(_modules.items()) if top in sys.modules for name in names}:
        importlib.import_module(name)
    with _lock:
        for top in [m for m in _lazy if m in sys.modules]:
            for fn in _lazy.pop(top):
                fn()
        return [*_table.values(), *_users.values()]


def guarded(fn: Callable[..., Any], *, hasher: bool = False) -> Handler:
    """A handler from a token function ``fn(obj) -> parts`` (``fn(obj, h)`` with ``hasher``): a value
    it cannot take apart (a new layout, an exotic dtype: it raises) is left to the library's own
    pickling, logged at DEBUG. At worst a needless miss, never an error."""

    def handle(h: Any, obj: Any) -> Any:
        try:
            parts = fn(obj, h) if hasher else fn(obj)
        except Exception as e:  # a layout or dtype the canonical path does not know
            _log.debug("fncache: hashing a %s through its pickle (%s: %s)",
                       type(obj).__qualname__, type(e).__name__, e)
            return NotImplemented
        return NotImplemented if parts is NotImplemented else token(*parts)

    handle.__name__ = handle.__qualname__ = getattr(fn, "__name__", "handle")
    return handle
