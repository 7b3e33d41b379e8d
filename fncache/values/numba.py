"""Keys for numba's typed containers (``numba.typed.List``, ``numba.typed.Dict``).

They cannot be pickled (their items live in numba's own memory), so they were keyed as
infrastructure, by their type and the name they are read under: a global lookup table
``TABLE = numba.typed.List([2, 4])`` kept its key when its items changed, and so did an edit of
the items in the running process. They are keyed now as what a reader of them sees: their numba
type (``ListType[int64]``: the item types, which decide what numba code computes with them) and
their items, in order, as the Python values they read as (a list's, or a dict's keys and values),
and any attribute code set on them.
Read again on every call, as any mutable value the code reads is.

Loaded the first time a value of numba is looked up (see the hasher's table).
"""

from __future__ import annotations

from typing import Any

from fncache._hasher import Token
from fncache.values.registry import register_lazy, register_type

__all__ = ["typed_dict_token", "typed_list_token"]


def _numba_type(obj: Any) -> str:
    """The container's numba type as text; an empty list not typed yet has none."""
    try:
        return str(obj._numba_type_)
    except TypeError:  # ``invalid operation on untyped list``
        return "untyped"


# Attributes numba keeps on the container: its type (keyed as text) and its items' memory.
_OWN = frozenset({"_list_type", "_dict_type", "_opaque"})


def _set_on(obj: Any) -> list[tuple[str, Any]]:
    """Attributes code set on the container (none of numba's own)."""
    return sorted((k, v) for k, v in vars(obj).items() if k not in _OWN)


def typed_list_token(h: Any, obj: Any) -> Any:
    return (Token, ("numba typed list", _numba_type(obj), list(obj), _set_on(obj)))


def typed_dict_token(h: Any, obj: Any) -> Any:
    # Insertion order kept: it is the order a reader iterates in.
    return (Token, ("numba typed dict", _numba_type(obj), list(obj.items()), _set_on(obj)))


@register_lazy("numba.typed")
def _register() -> None:
    from numba.typed import typeddict, typedlist

    register_type(typedlist.List, typed_list_token, library="numba")
    register_type(typeddict.Dict, typed_dict_token, library="numba")
