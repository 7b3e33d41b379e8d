"""Tokens of typing's own objects, which their pickles key by name or not at all: type aliases by
what they stand for, type variables by what they are, forward references by their text.

Handlers of :mod:`fncache.values.hasher` (chosen by :func:`handler_for`); the parts they digest go
through the hasher that meets them (``h.digest_of``), so classes are named as that hash names them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fncache._hasher import Token as _Token

__all__ = ["handler_for"]


def handler_for(t: type) -> Callable[[Any, Any], Any] | None:
    """The handler of a type alias, type variable, forward reference or ``NewType`` type; None
    for another."""
    if t.__module__ in ("typing", "typing_extensions"):
        if t.__name__ == "TypeAliasType":
            return _type_alias_token
        if t.__name__ in _TYPE_VARIABLES:
            return _type_variable_token
        if t.__name__ == "ForwardRef":
            return _forward_ref_token
        if t.__name__ == "NewType":
            return _new_type_token
    return None


def _new_type_token(h: Any, obj: Any) -> Any:
    """A ``NewType`` by its name and its supertype, which its pickle (by name) drops:
    ``UserId = NewType("UserId", int)`` edited to ``str`` kept the key, where a validator
    (pydantic's) converts by the supertype."""
    return (_Token, ("NewType", getattr(obj, "__module__", None), getattr(obj, "__qualname__", None),
                     h.digest_of(getattr(obj, "__supertype__", None))))


_aliases = threading.local()  # ids of the type aliases being hashed in this thread


def _type_alias_token(h: Any, obj: Any) -> Any:
    """A type alias (``type Small = Annotated[int, Field(le=5)]``, typing_extensions' on 3.11) by
    what it stands for, which its pickle (by name) drops: a pydantic constraint may live only there."""
    name = (getattr(obj, "__module__", None), getattr(obj, "__name__", None))
    busy: set[int] = _aliases.__dict__.setdefault("busy", set())
    if id(obj) in busy:  # a recursive alias met again inside its own value
        return (_Token, ("type alias", name))
    busy.add(id(obj))
    try:
        try:
            value = obj.__value__
        except Exception:  # a name its value uses is not defined yet: it cannot be used as it is
            return (_Token, ("type alias", name, "unevaluated"))
        return (_Token, ("type alias", name, h.digest_of(value),
                         h.digest_of(tuple(getattr(obj, "__type_params__", ())))))
    finally:
        busy.discard(id(obj))


def _type_variable_token(h: Any, obj: Any) -> Any:
    """A ``TypeVar``, ``ParamSpec`` or ``TypeVarTuple`` by what it is: its name, bound,
    constraints, variance and default. cloudpickle pickles one it cannot find by name (a PEP 695
    ``def f[T]``'s, one made in a function) by value with a tracker id new in every process, and
    one it finds by its name alone (a bound edited in place kept the key)."""
    parts: list[Any] = [type(obj).__name__, getattr(obj, "__name__", None)]
    for attr in _TYPE_VARIABLE_ATTRS:
        try:
            value = getattr(obj, attr, None)
        except Exception:  # a PEP 695 bound naming what is not defined yet
            value = (_Token, ("unevaluated", attr))
        parts.append(h.digest_of(value))
    has_default = getattr(obj, "has_default", None)
    if has_default is not None and has_default():
        parts.append(h.digest_of(obj.__default__))
    return (_Token, ("type variable", tuple(parts)))


_TYPE_VARIABLE_ATTRS = ("__bound__", "__constraints__", "__covariant__", "__contravariant__",
                        "__infer_variance__")
_TYPE_VARIABLES = frozenset({"TypeVar", "ParamSpec", "TypeVarTuple"})


def _forward_ref_token(h: Any, obj: Any) -> Any:
    """A ``typing.ForwardRef`` (``List["User"]``) by its text and where it is resolved, not by the
    cache of its evaluation that ``get_type_hints`` fills in place (typing shares one object among
    every annotation spelled alike)."""
    return (_Token, ("forward ref", getattr(obj, "__forward_arg__", None),
                     getattr(obj, "__forward_module__", None),
                     getattr(obj, "__forward_is_argument__", None),
                     getattr(obj, "__forward_is_class__", None)))
