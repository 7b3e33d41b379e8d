"""How instances are keyed where their own pickle would say too little or too much: by
``object``'s reduce with attributes in sorted order, by their attributes where the pickle names a
global (a user's singleton), and the standard library's objects that cannot be pickled but hold
content (``functools.cmp_to_key``, ``struct.Struct``). Handlers take the canonical pickler ``h``
(:mod:`fncache.values.hasher`), whose ``digest_of`` digests a part in the same setting."""

from __future__ import annotations

import functools
import threading
import types
from typing import Any

import cloudpickle

from fncache._hasher import Token as _Token
from fncache.values import registry as _registry

__all__ = ["KEY_WRAPPER", "by_name_token", "by_reduce", "default_reduce", "instance_token",
           "key_wrapper_token", "namespace_token", "own_reduce", "sorted_state", "struct_token"]

_PROTOCOL = 5


def key_wrapper_token(h: Any, obj: Any) -> Any:
    """``functools.cmp_to_key(cmp)`` (which cannot be pickled): the ``cmp`` it holds, which counts
    by its code, and the value it wraps (``None`` for the key function itself)."""
    import gc

    held = [r for r in gc.get_referents(obj) if r is not type(obj)]
    if not held or not callable(held[0]):
        return NotImplemented
    return (_Token, ("cmp_to_key", held[0], obj.obj))


def struct_token(h: Any, obj: Any) -> Any:
    """A ``struct.Struct`` (which cannot be pickled): its format."""
    return (_Token, ("struct", obj.format))


_by_name = threading.local()  # ids of the objects whose by-name state is being hashed, per thread


def by_name_token(h: Any, obj: Any) -> Any:
    """An instance whose ``__reduce__`` names a global (``return "SETTINGS"``, or
    ``getattr(module, "SETTINGS")``): pickle writes the name alone. For an instance of a user class
    that dropped what the code reads from it (``SETTINGS = Settings(k=1)`` edited to ``k=5`` kept
    the key), so such an instance is keyed by the name and its attributes
    (``object.__getstate__``), or by the name and its class's code where its attributes cannot be
    hashed (a connection pool made picklable by name for that reason). Library objects keep their
    name."""
    rv = obj.__reduce_ex__(_PROTOCOL)
    name = global_named(rv)
    if name is None or not _registry.is_user_type(type(obj)):
        return rv
    busy: set[int] = _by_name.__dict__.setdefault("busy", set())
    if id(obj) in busy:  # met again inside its own attributes
        return rv
    busy.add(id(obj))
    try:
        content = _content(h, obj)
    finally:
        busy.discard(id(obj))
    return rv if content is None else (_Token, ("by-name", name, content))


def _content(h: Any, obj: Any) -> bytes | None:
    """The digest of an instance's class (by its code) and attributes; of its class alone where
    the attributes cannot be hashed (a lock); None where neither can (a compiled extension's)."""
    for part in (lambda: sorted_state(object.__getstate__(obj)), lambda: "attributes not hashable"):
        try:
            found: bytes = h.digest_of((type(obj), part()))
        except Exception:  # noqa: BLE001, S112 - what cannot be hashed is left to the name
            continue
        return found
    return None


def global_named(rv: Any) -> tuple[str | None, str] | None:
    """The (module, name) of the global a reduce value names: a name (``"SETTINGS"``) or
    ``getattr(module, "SETTINGS")``; None for a reduce value that makes an object."""
    if type(rv) is str:
        return (None, rv)
    if type(rv) is tuple and len(rv) == 2 and rv[0] is getattr and type(rv[1]) is tuple \
            and len(rv[1]) == 2 and isinstance(rv[1][0], types.ModuleType) and type(rv[1][1]) is str:
        return (rv[1][0].__name__, rv[1][1])
    return None


def by_reduce(t: type, found: _registry.Handler | None, *, wrapper: bool) -> _registry.Handler | None:
    """``found`` (the table's handler for ``t``), else the handler ``t``'s reduce calls for:
    :func:`by_name_token` where its own may name a global, :func:`instance_token` where it is
    ``object``'s (not under a ``wrapper``, whose other instances take their pickle), else None."""
    if found is not None:
        return found
    if own_reduce(t):
        return by_name_token
    return instance_token if not wrapper and default_reduce(t) else None


def own_reduce(t: type) -> bool:
    """Whether ``t`` is a class defined in Python with a ``__reduce__`` or ``__reduce_ex__`` of its
    own (that may name a global) and no reducer in the pickler's dispatch table."""
    return (bool(t.__flags__ & _HEAPTYPE) and t not in cloudpickle.Pickler.dispatch_table
            and not issubclass(t, type)
            and (getattr(t, "__reduce_ex__", None) is not object.__reduce_ex__
                 or getattr(t, "__reduce__", None) is not object.__reduce__))


def sorted_state(state: Any) -> Any:
    """An instance's ``__dict__`` (or ``(__dict__, slots)``) with its attributes in sorted order:
    the order attributes were set in is not content (as for a class's namespace)."""
    if isinstance(state, tuple) and len(state) == 2:
        first, second = sorted_state(state[0]), sorted_state(state[1])
        return state if first is state[0] and second is state[1] else (first, second)
    if type(state) is not dict or len(state) < 2:
        return state
    try:
        items = sorted(state.items(), key=lambda kv: kv[0])
    except TypeError:  # keys that do not sort (not strings): their order stays
        return state
    if [k for k, _ in items] == list(state):
        return state  # already in order: the object's own dict (as pickle would write it)
    return dict(items)


def instance_token(h: Any, obj: Any) -> Any:
    """An instance pickled by ``object``'s own reduce, its attributes in sorted order.

    A re-ordered state is made once per object and hash, and kept until the hash ends: the pickler
    finds a cycle (an instance holding its own memoized method) by meeting the same state object
    again, which a fresh copy on every visit would hide.
    """
    rv = obj.__reduce_ex__(_PROTOCOL)
    if type(rv) is not tuple or len(rv) < 3:
        return rv
    state = sorted_state(rv[2])
    if state is rv[2]:
        return rv
    kept = h.states.setdefault(id(obj), (obj, state))
    return (*rv[:2], kept[1], *rv[3:])


def namespace_token(h: Any, obj: Any) -> Any:
    """A ``SimpleNamespace``: its attributes in sorted order (``SimpleNamespace(**d)`` from two
    orders of one dict are one value, as their ``==`` says)."""
    return (type(obj), (), sorted_state(dict(vars(obj))))


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined by a class statement


def default_reduce(t: type) -> bool:
    """Whether ``t``'s instances pickle by ``object``'s own reduce (``__dict__`` and slots): a class
    defined in Python, without a reducer of its own or in the pickler's dispatch table."""
    return (bool(t.__flags__ & _HEAPTYPE) and t not in cloudpickle.Pickler.dispatch_table
            and getattr(t, "__reduce_ex__", None) is object.__reduce_ex__
            and getattr(t, "__reduce__", None) is object.__reduce__
            and getattr(t, "__getstate__", object.__getstate__) is object.__getstate__
            and not issubclass(t, type))


def _compare(a: Any, b: Any) -> int:  # what a cmp_to_key is made of, for its type
    return 0


#: The type ``functools.cmp_to_key`` returns (C's ``functools.KeyWrapper``).
KEY_WRAPPER = type(functools.cmp_to_key(_compare))
