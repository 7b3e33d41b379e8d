"""How instances are keyed where their own pickle would say too little or too much: by
``object``'s reduce with attributes in sorted order, by their attributes where the pickle names a
global (a user's singleton), and the standard library's objects that cannot be pickled but hold
content (``functools.cmp_to_key``, ``struct.Struct``). Handlers take the canonical pickler ``h``
(:mod:`fncache.values.hasher`), whose ``digest_of`` digests a part in the same setting."""

from __future__ import annotations

import collections
import contextvars
import enum
import functools
import threading
import types
import weakref
from typing import Any

import cloudpickle

from fncache._errors import UnhashableArgument
from fncache._hasher import Token as _Token
from fncache.values import registry as _registry

__all__ = ["KEY_WRAPPER", "by_name_token", "by_reduce", "context_var_token", "default_reduce",
           "instance_token", "key_wrapper_token", "namespace_token", "own_reduce", "slot_names",
           "sorted_state", "struct_token", "WEAK_DICT_OWN", "weak_value_dict_token"]

_PROTOCOL = 5


def key_wrapper_token(h: Any, obj: Any) -> Any:
    """``functools.cmp_to_key(cmp)`` (which cannot be pickled): the ``cmp`` it holds, which counts
    by its code, and the value it wraps (``None`` for the key function itself)."""
    import gc

    held = [r for r in gc.get_referents(obj) if r is not type(obj)]
    if not held or not callable(held[0]):
        return NotImplemented
    if len(held) == 1:  # the key function itself
        return (_Token, ("cmp_to_key", held[0]))
    return (_Token, ("cmp_to_key", held[0], "of", obj.obj))


def struct_token(h: Any, obj: Any) -> Any:
    """A ``struct.Struct`` (which cannot be pickled): its format."""
    return (_Token, ("struct", obj.format))


def context_var_token(h: Any, obj: Any) -> Any:
    """A ``contextvars.ContextVar`` (which cannot be pickled): its name, the value it has in the
    current context (unset or not) and its default, if it has one. Read by code (``MODE.get()``),
    both are inputs: keyed as infrastructure, by its type alone, ``MODE.set("exact")`` kept the key;
    keyed without the default, ``ContextVar("mode", default="fast")`` and ``default="exact"`` were
    one key while unset. (A variable without a default keeps the key it had.)"""
    found = obj.get(_UNSET)
    parts: tuple[Any, ...] = ("context var", obj.name,
                              "unset" if found is _UNSET else ("value", found))
    try:  # the default is what ``get()`` gives in a context where nothing was set
        default = contextvars.Context().run(obj.get)
    except LookupError:
        return (_Token, parts)
    return (_Token, (*parts, "default", _digest_or_parts(default)))


def _digest_or_parts(obj: Any, depth: int = 0) -> Any:
    """``obj``'s digest; for one no key can hold (an object with a lock inside), its type and its
    attributes', each the same way (a lock, which has none, by its type alone)."""
    try:
        return _registry.value_digest(obj)
    except UnhashableArgument:
        try:
            items = sorted(vars(obj).items()) if depth < 4 else []
        except TypeError:  # no __dict__
            items = []
        t = type(obj)
        return ("parts", t.__module__, t.__qualname__,
                tuple((k, _digest_or_parts(v, depth + 1)) for k, v in items))


def weak_value_dict_token(h: Any, obj: Any) -> Any:
    """A ``weakref.WeakValueDictionary`` (which cannot be pickled): its live items, in order, and
    any attribute set on it beside its own bookkeeping."""
    extra = {k: v for k, v in sorted(vars(obj).items()) if k not in WEAK_DICT_OWN}
    return (_Token, ("weak value dict", list(obj.items()), *((extra,) if extra else ())))


#: A ``WeakValueDictionary``'s own attributes: its weak references (``data``, keyed by the items
#: they reach) and the bookkeeping of their removal.
WEAK_DICT_OWN = frozenset({"data", "_remove", "_pending_removals", "_iterating"})


_UNSET = object()
_by_name = threading.local()  # ids of the objects whose by-name state is being hashed, per thread

# Builtin bases whose content a subclass's ``__getstate__`` leaves out, and how to read it.
_BASE_CONTENT: tuple[tuple[type, Any], ...] = (
    (dict, dict), (list, list), (tuple, tuple), (set, frozenset),
    (frozenset, frozenset), (str, str.__str__), (bytes, bytes), (bytearray, bytes),
    (int, int.__index__), (float, float.__float__), (complex, complex.__complex__))


def by_name_token(h: Any, obj: Any) -> Any:
    """An instance whose ``__reduce__`` names a global (``return "SETTINGS"``,
    ``getattr(module_or_class, "SETTINGS")``, or a call of an accessor with no state to set):
    pickle writes the name alone, which for an instance of a user class dropped what the code
    reads from it (``SETTINGS = Settings(k=1)`` edited to ``k=5`` kept the key). Such an instance
    is keyed by the name, its class's code and its state: what its ``__getstate__`` gives (its
    attributes, unless it says otherwise), each attribute that cannot be hashed (a lock) by its
    type, and the items of a builtin base (a dict subclass). Library objects, and instances of
    classes that keep state in C, keep their name.

    Met again inside its own state (it holds a function that reads it), it is a fixed marker, and
    the fingerprints computed meanwhile are not cached (:func:`fncache.values.registry.note_cycle`):
    they depend on where the hash started."""
    rv = obj.__reduce_ex__(_PROTOCOL)
    name = global_named(rv)
    if name is None:  # a reduce value that makes the object (an enum member): as pickle writes it
        return _with_attributes(h, obj, rv)
    t = type(obj)
    base = _base_of(t)
    if base is _C_STATE or not _registry.is_user_code(t):
        return rv
    busy: set[int] = _by_name.__dict__.setdefault("busy", set())
    if id(obj) in busy:
        _registry.note_cycle()
        return (_Token, ("by-name", name, "recursive"))
    kept = h.states.get(id(obj))
    if kept is None:  # made once per hash: met again (a dict subclass holding itself), the same
        busy.add(id(obj))  # state object is a cycle the pickler finds, as for an instance
        try:
            items = None if base is None else base(obj)
            kept = h.states[id(obj)] = (obj, (t, _state_parts(h, obj), items))
        finally:
            busy.discard(id(obj))
    return (_Token, ("by-name", name), kept[1])


def _with_attributes(h: Any, obj: Any, rv: Any) -> Any:
    """``rv``, the reduce of an instance of a user's subclass of a library class that makes it
    from its value alone and sets no state (``class Stamp(datetime)``, ``class Money(Decimal)``
    with a slot, a ``Counter`` subclass), with the attributes the instance holds beside that value
    (its ``__dict__`` but the library's cached properties, and the slots the user's classes
    declare): its pickle drops them, code reads them (``stamp.label``), and two stamps labelled
    apart were one key, as numpy's reduce of an ndarray subclass's were (see
    :mod:`fncache.values.buffers`). A reduce the user's class defines is taken as written (it says
    what the object is), and so is an enum member's."""
    t = type(obj)
    if not _library_reduce_without_state(rv, obj, t):
        return rv
    found = getattr(obj, "__dict__", None)
    cached = _library_cached(t)  # the library's own cache (``IPv4Network.broadcast_address``)
    attrs = {k: v for k, v in sorted(found.items()) if k not in cached} if type(found) is dict else {}
    slots = _user_slots(obj, t)
    if not attrs and not slots:
        return rv
    return (_Token, ("attributes", rv, _by_attribute(h, (attrs, slots))))


def _library_reduce_without_state(rv: Any, obj: Any, t: type) -> bool:
    """Whether ``rv`` makes an instance of the user's class ``t`` with a library's reduce and sets
    no state (an enum member's is its class's constant)."""
    return (type(rv) is tuple and (len(rv) < 3 or rv[2] is None) and not isinstance(obj, enum.Enum)
            and _registry.is_user_code(t) and not _registry.is_user_code(_reduce_owner(t)))


def _reduce_owner(t: type) -> type:
    """The class along ``t``'s MRO whose reduce an instance of ``t`` runs."""
    return next((c for c in t.__mro__ if "__reduce_ex__" in vars(c) or "__reduce__" in vars(c)),
                object)


def _library_cached(t: type) -> frozenset[str]:
    """The names of the ``functools.cached_property`` attributes of the library classes along
    ``t``'s MRO: values they store in the instance's ``__dict__`` once read are derived, not content
    (reading one must not change the key)."""
    return frozenset(n for c in t.__mro__ if not _registry.is_user_code(c)
                     for n, v in vars(c).items() if isinstance(v, functools.cached_property))


def _user_slots(obj: Any, t: type) -> dict[str, Any]:
    """The slots the user's classes along ``t``'s MRO declare that are set on ``obj``, sorted."""
    names = {s for c in t.__mro__ if _registry.is_user_code(c) for s in slot_names(c) if s in vars(c)}
    return {s: getattr(obj, s) for s in sorted(names) if hasattr(obj, s)}


_C_STATE: Any = object()  # _base_of: the class may keep state in C
_UNKNOWN: Any = object()
_bases: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()  # per class (bases do not change)


def _base_of(t: type) -> Any:
    """How to read the items of ``t``'s builtin base (a dict subclass's), None for a class whose
    first base not defined in Python is ``object``, or :data:`_C_STATE` where it is another C type,
    whose state neither ``__getstate__`` nor items show (``decimal.Context``'s precision)."""
    found = _bases.get(t, _UNKNOWN)
    if found is not _UNKNOWN:
        return found
    found = None
    for base in t.__mro__:
        # The C containers first: Python 3.13 makes them heap types, as a Python class is.
        found = next((read for b, read in _C_CONTAINERS if b is base), None)
        if found is not None:
            break
        if not base.__flags__ & _HEAPTYPE:
            found = None if base is object else _builtin_read(base)
            break
    _bases[t] = found
    return found


def _builtin_read(base: type) -> Any:
    """How to read the items of a C base: a builtin base's reader, that of the builtin base a C
    subclass derives from (an OrderedDict's dict: at least its items), else :data:`_C_STATE`."""
    found = next((read for b, read in _BASE_CONTENT if b is base), None)
    if found is None:
        found = next((read for b, read in _BASE_CONTENT if issubclass(base, b)), _C_STATE)
    return found


# C containers of the standard library that are no builtin base, read with the state they keep in C
# (pickled by their own reduce, which a subclass's __reduce__ returning a name replaces).
_C_CONTAINERS: tuple[tuple[type, Any], ...] = (
    (collections.defaultdict, lambda d: (dict(d), d.default_factory)),
    (collections.deque, lambda d: (list(d), d.maxlen)),
)


# Exact types whose values the pickler always writes (no reducer of theirs can fail).
_PLAIN = frozenset({int, float, str, bytes, bool, type(None), complex})


def _state_parts(h: Any, obj: Any) -> Any:
    """The instance's ``__getstate__()`` in sorted order: as it is where nothing in it can fail to
    pickle, else its digest, or where that cannot be hashed :func:`_by_attribute`."""
    try:
        state = sorted_state(obj.__getstate__())
    except Exception:  # noqa: BLE001 - a __getstate__ that fails: its class's code alone
        return "state not readable"
    if type(state) is dict and all(type(v) in _PLAIN for v in state.values()):
        return state  # the pickler writes it as it is (no second pass)
    whole = _part(h, state)
    return whole if type(whole) is bytes else _by_attribute(h, state)


def _by_attribute(h: Any, state: Any) -> Any:
    """Each attribute of a ``__dict__`` (or ``(__dict__, slots)``) state as its digest, or as its
    type where it cannot be hashed (a lock: the other attributes still count)."""
    dicts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
    if not all(d is None or type(d) is dict for d in dicts):
        return _part(h, state)
    return tuple(None if d is None else tuple((k, _part(h, v)) for k, v in d.items())
                 for d in dicts)


def _part(h: Any, value: Any) -> Any:
    try:
        return h.digest_of(value)
    except RecursionError:
        raise
    except Exception:  # noqa: BLE001 - keyed by its type, as infrastructure is
        return ("not hashable", type(value).__module__, type(value).__qualname__)


def global_named(rv: Any) -> Any:
    """What global a reduce value names, or None for a reduce value that makes an object: a name
    (``"SETTINGS"``), ``getattr(holder, "SETTINGS")`` of a module (by the attribute's name: the
    instance's class already says where it lives) or of a class (the class and the name), or a
    call of a user function with no state to set (``(get_settings, ())``, a singleton's accessor:
    by the function's name and arguments, not its code, which reads the instance back)."""
    if type(rv) is str:
        return rv
    if not (type(rv) is tuple and len(rv) >= 2 and type(rv[1]) is tuple):
        return None
    if rv[0] is getattr:
        return _attribute_named(rv[1]) if len(rv) == 2 else None
    return _accessor_named(rv)


def _accessor_named(rv: tuple[Any, ...]) -> Any:
    """A call of a user function with nothing to set on what it returns: the function's name and
    arguments."""
    fn = rv[0]
    if not isinstance(fn, types.FunctionType) or any(x is not None for x in rv[2:]):
        return None
    return ("call", fn.__module__, fn.__qualname__, rv[1]) if _registry.is_user_code(fn) else None


def _attribute_named(args: tuple[Any, ...]) -> Any:
    """What ``getattr(*args)`` names: a module's attribute by its name, a class's with the class."""
    if len(args) != 2 or type(args[1]) is not str:
        return None
    holder, attribute = args
    if isinstance(holder, types.ModuleType):
        return attribute
    return (holder, attribute) if isinstance(holder, type) else None


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


def slot_names(t: type) -> tuple[str, ...]:
    """Attribute names of every ``__slots__`` entry along ``t``'s MRO (private names mangled)."""
    names: list[str] = []
    for c in t.__mro__:
        slots = vars(c).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{c.__name__.lstrip('_')}{name}"
            names.append(name)
    return tuple(sorted(set(names)))


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
