"""What a value read by user code is, for the fingerprint walk: data, code, or infrastructure.

The walk (:mod:`fncache.code.walk`) keys what a function reads by content or by name; these
predicates decide which, and say how ``explain`` shows a global's value (:func:`shown`). Class
attributes that are bookkeeping rather than behaviour (:data:`CLASS_SKIP`, :data:`ENUM_DERIVED`)
are listed here too. Pure functions of the value: nothing here hashes, walks or logs.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import enum
import functools
import io
import mmap
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from fncache.code.usercode import is_user_code

__all__ = ["CLASS_SKIP", "ENUM_DERIVED", "ENUM_MEMBER_BOOKKEEPING", "SHOWN_REPR", "class_bookkeeping",
           "code_builtin", "describe", "holds_user_code", "is_immutable", "is_infrastructure",
           "is_user_object", "made_at_run_time", "of_data_library", "shown", "stands_for_user_code",
           "user_code_run_by", "written_by_typing"]

# Class attributes that describe where or how a class was written, not what it does, and those that
# Python derives or caches at run time: the abc registry and caches (``_abc_impl``; an ``_abc_data``
# cannot even be pickled), ``__slotnames__`` (copyreg adds it at the first pickle or copy of an
# instance), typing's protocol bookkeeping, ``__abstractmethods__`` (derived from the methods). A class
# must have one digest before and after these appear, and after a round trip through cloudpickle.
# (``__orig_bases__``, the bases as written, with their type arguments, is keyed: ``Parser[int]``.)
CLASS_SKIP = frozenset({
    "__dict__", "__weakref__", "__module__", "__doc__", "__qualname__", "__firstlineno__",
    "__static_attributes__", "__parameters__", "__type_params__",
    "_abc_impl", "_abc_registry", "_abc_cache", "_abc_negative_cache", "_abc_negative_cache_version",
    "__abstractmethods__", "__slotnames__",
    "_is_protocol", "__protocol_attrs__", "__non_callable_proto_members__",
    "__callable_proto_members_only__",
})
# What the enum machinery keeps in a member's own ``__dict__`` (its value is keyed with the members).
ENUM_MEMBER_BOOKKEEPING = frozenset({"_value_", "_name_", "__objclass__", "_sort_order_"})
# What the enum machinery writes into an enum's class dict, all derived from the members and bases
# (which are hashed): everything else, ``__str__``, ``__init__``, ``_missing_``... is the user's own
# and counts. A user-written ``__new__`` is kept by enum as ``__new_member__``, which counts too.
ENUM_DERIVED = frozenset({
    "_member_names_", "_member_map_", "_value2member_map_", "_unhashable_values_",
    "_unhashable_values_map_", "_hashable_values_", "_member_type_", "_value_repr_", "_use_args_",
    "_new_member_", "_flag_mask_", "_singles_mask_", "_all_bits_", "_inverted_",
})
# What pydantic derives from a model's fields, validators and config (all keyed, in the class's
# dict), built when the class is made: the core schema names the class by ``id()`` (``'ref':
# 'mod.M:9387...'``), so keying it gave every process a new key; the validator and serializer are
# compiled from it; ``__signature__`` from the fields; ``__pydantic_setattr_handlers__`` is a cache
# filled as instances' attributes are set.
PYDANTIC_DERIVED = frozenset({
    "__pydantic_core_schema__", "__pydantic_validator__", "__pydantic_serializer__",
    "__pydantic_setattr_handlers__", "__signature__",
})
# Values whose content is data even when their type is a library's: one that cannot be pickled is
# an error to report, never a piece of infrastructure to key by name. An open file or a memory map
# is read for its content, so it is data too.
_DATA_TYPES: tuple[type, ...] = (list, dict, tuple, set, frozenset, bytearray, memoryview,
                                 types.SimpleNamespace, types.MappingProxyType, functools.partial,
                                 collections.deque, io.IOBase, mmap.mmap)
_DATA_LIBRARIES = frozenset({"numpy", "pandas", "polars", "pyarrow", "torch", "xarray", "scipy"})
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), range, type(Ellipsis),
              # dataclasses' stateless sentinels (a generated __init__'s defaults and closure)
              type(dataclasses.MISSING),
              type(getattr(dataclasses, "_HAS_DEFAULT_FACTORY", dataclasses.MISSING)),
              type(getattr(dataclasses, "_FIELD", dataclasses.MISSING)))


#: ``explain`` shows a global's value itself when its repr is at most this long (else its type).
SHOWN_REPR = 80


def describe(value: Any) -> str:
    """``numpy.ndarray (50.0 MB)``: a value's type, and its size where it says it.

    The size is asked only of a type that defines ``nbytes`` (an array's, a tensor's), never
    through a ``__getattr__`` (an ``AttrDict``'s raises ``KeyError``; a lazy loader's would load),
    and a size that fails to come is not shown: this text is for ``explain``, never worth a call.
    """
    t = type(value)
    what = f"{t.__module__}.{t.__qualname__}"
    try:
        size = getattr(value, "nbytes", None) if _defines(t, "nbytes") else None
    except Exception:  # a property that raises
        size = None
    if isinstance(size, int):
        what += f" ({size / 1e6:.1f} MB)"
    return what


def _defines(t: type, name: str) -> bool:
    """Whether class ``t`` or a base has ``name`` in its own namespace (no ``__getattr__`` run)."""
    return any(name in getattr(k, "__dict__", {}) for k in getattr(t, "__mro__", (t,)))


def _short_data(value: Any) -> bool:
    """Whether ``value`` is plain data whose repr is short and cheap: a number, a short string, or a
    tuple of at most a few of those (checked before any repr is made)."""
    if isinstance(value, (str, bytes)):
        return type(value) in (str, bytes) and len(value) <= SHOWN_REPR
    if type(value) is tuple:
        return len(value) <= 8 and all(_short_data(v) for v in value)
    return type(value) in _IMMUTABLE


def shown(value: Any, digest: str) -> str:
    """How ``explain`` shows a global's value: its repr when short and of plain data (numbers,
    strings, tuples of them), else its type, size and digest. Made when a fingerprint is computed
    (a miss), never on a hit; a long tuple or string is never turned into a repr to be measured."""
    if _short_data(value):
        text = repr(value)
        if len(text) <= SHOWN_REPR:
            return text
    return f"{describe(value)} [{digest[:12]}]"


def draws_from_state(v: Any) -> bool:
    """Whether ``v`` is a method of a random generator with state: ``random.randint`` (of
    ``random``'s hidden ``Random``), ``numpy.random.rand`` (of numpy's ``RandomState``). Such a
    method read through its module is keyed by the generator's state, as it is when bound to a
    name of the user's (``from random import randint``): a seed set at import counts."""
    if not isinstance(v, (types.MethodType, types.BuiltinMethodType)):
        return False
    owner = getattr(v, "__self__", None)
    rnd = sys.modules.get("random")  # not imported: no Random can exist
    if rnd is not None and isinstance(owner, rnd.Random):
        return not isinstance(owner, rnd.SystemRandom)  # the system's entropy: no state
    t = type(owner)
    return t.__module__.startswith("numpy.random") and t.__name__ in ("RandomState", "Generator")


def is_immutable(v: Any) -> bool:
    t = type(v)
    if t in _IMMUTABLE:
        return True
    if t is tuple or t is frozenset:
        return all(is_immutable(x) for x in v)
    return False


def is_user_object(obj: Any) -> bool:
    return isinstance(obj, (types.FunctionType, type)) and is_user_code(obj)


def stands_for_user_code(obj: Any) -> bool:
    """Whether ``obj`` is a user function or class, or a callable that runs one: a
    ``functools.partial`` of one, a wrapper keeping one as ``__wrapped__`` (``lru_cache``), a
    method bound to one or to an instance of a user class, an instance of a user class. Such an
    entry of a library's dispatch registry is the user's code as much as a plain function."""
    return bool(user_code_run_by(obj))


def user_code_run_by(obj: Any, depth: int = 0) -> list[Any]:
    """The user functions and classes ``obj`` is or runs (see :func:`stands_for_user_code`). An
    object whose attributes run code when read (a context-local proxy) runs none known here."""
    try:
        if is_user_object(obj):
            return [obj]
        if depth > 8 or not callable(obj):
            return []
        return [f for inner in _what_it_runs(obj) for f in user_code_run_by(inner, depth + 1)]
    except Exception:  # (``werkzeug.LocalProxy`` raises when nothing is bound)
        return []


def _what_it_runs(obj: Any) -> list[Any]:
    """The functions or classes a callable hands its calls to (see stands_for_user_code)."""
    if isinstance(obj, functools.partial):
        return [obj.func]
    if isinstance(obj, types.MethodType):
        return [obj.__func__, type(obj.__self__)]
    try:
        inner = vars(obj).get("__wrapped__")
    except TypeError:  # no __dict__
        inner = None
    found = [] if inner is None else [inner]
    return found if isinstance(obj, (types.FunctionType, type)) else [*found, type(obj)]


def code_builtin(name: str) -> bool:
    """Whether ``name`` is a builtin that holds the user's code (a gettext-style ``_`` put there, a
    ``round`` replaced by the user's): read as a global is. Python's own builtins are not (the
    Python version in every key stands for them), nor a library's (IPython's ``get_ipython``)."""
    return stands_for_user_code(vars(builtins).get(name))


def made_at_run_time(fn: types.FunctionType) -> bool:
    """Whether a function was made by a factory (``<locals>`` in its name) with a closure or
    defaults: what it was made with is not in its name (see ``classes.made_with``)."""
    return "<locals>" in fn.__qualname__ and bool(fn.__closure__ or fn.__defaults__ or fn.__kwdefaults__)


def holds_user_code(fn: types.FunctionType) -> bool:
    """Whether a library function keeps user code in its ``__dict__`` (``__wrapped__`` of a library
    decorator, a singledispatch registry), or was made at run time (:func:`made_at_run_time`): then
    it is more than its name (see ``classes.user_code_held`` and ``classes.made_with``)."""
    if made_at_run_time(fn):
        return True
    for value in fn.__dict__.values():
        if is_user_object(value) or (isinstance(value, (dict, types.MappingProxyType)) and any(
                is_user_object(k) or stands_for_user_code(v) for k, v in value.items())):
            return True
    return False


def is_infrastructure(value: Any) -> bool:
    """Whether a value that cannot be pickled is infrastructure (a lock, a connection, a handler).

    Such a value is keyed by its type and the name it is read under, as library code is. A value
    whose content is the user's data (a container, an instance of a user class, an array) is not:
    keying it by name could return a result computed from other content.
    """
    t = type(value)
    if isinstance(value, _DATA_TYPES) or is_user_code(t):
        return False
    if isinstance(value, types.MethodType) and not is_infrastructure(value.__self__):
        return False  # a method bound to the user's data (``obj.predict``) carries that data
    return not of_data_library(t)


def of_data_library(t: type) -> bool:
    """Whether ``t`` is a type of a data library (numpy, pandas, ...): its instances are data."""
    return (getattr(t, "__module__", None) or "").split(".")[0] in _DATA_LIBRARIES


def pydantic_decorators(value: Any) -> Any:
    """A pydantic model's ``__pydantic_decorators__`` as what it says: per kind of decorator, each
    validator's or serializer's name, where it was declared, its shim and its arguments (fields,
    mode, ...); the function itself is the class attribute of that name, keyed there. The class's
    ``id()`` in each ``cls_ref`` (``'mod.M:9387...'``) is left out: a new one in every process."""
    if not dataclasses.is_dataclass(value):
        return value
    kinds = []
    for field in dataclasses.fields(value):
        group = getattr(value, field.name, None)
        if not isinstance(group, dict):
            return value
        kinds.append((field.name, tuple(sorted(
            (name, (str(getattr(d, "cls_ref", "")).rpartition(":")[0], getattr(d, "cls_var_name", None),
                    getattr(d, "shim", None), getattr(d, "info", None)))
            for name, d in group.items()))))
    return ("pydantic decorators", tuple(kinds))


def written_by_typing(name: str, value: Any) -> bool:
    """Whether a protocol class's ``__init__``/``__subclasshook__`` is typing's, not the user's.

    typing writes them at class creation and replaces ``__init__`` by ``object.__init__`` at the
    first instance; cloudpickle copies its ``_proto_hook`` closure by value into another process.
    """
    if name == "__init__":
        return value is object.__init__ or (getattr(value, "__module__", None) == "typing"
                                            and not is_user_object(value))
    if name == "__subclasshook__":
        return getattr(value, "__module__", None) == "typing" and \
            getattr(value, "__qualname__", "").endswith("_proto_hook")
    return False


def class_bookkeeping(cls: type) -> Callable[[str, Any], bool]:
    """The test of whether an item of ``cls.__dict__`` is bookkeeping, not behaviour: where or how
    the class was written (:data:`CLASS_SKIP`), an enum's members (hashed together) and what the
    enum machinery derives, the empty ``__annotations__`` a first read creates (3.10+), what
    typing writes into a protocol class, and what pydantic derives (:data:`PYDANTIC_DERIVED`)."""
    members: Any = cls.__members__ if isinstance(cls, enum.EnumMeta) else None
    is_protocol = typing.Protocol in cls.__mro__
    # A pydantic model or dataclass: its class dict holds the core schema pydantic built.
    is_pydantic = "__pydantic_core_schema__" in cls.__dict__

    def skipped(name: str, value: Any) -> bool:
        if name in CLASS_SKIP:
            return True
        if members is not None and (name in members
                                    or (name in ENUM_DERIVED and not is_user_object(value))):
            return True
        if name == "__annotations__" and value == {}:
            return True
        if is_pydantic and name in PYDANTIC_DERIVED:
            return True
        return is_protocol and written_by_typing(name, value)

    return skipped
