"""The walk's visit of a user class (split from :mod:`fncache.code.walk`): its dict's items, an
enum's members with the attributes they hold, its bases and metaclass."""

from __future__ import annotations

import enum
import functools
import sys
import types
from typing import Any

from fncache._errors import UnhashableArgument
from fncache.code.classify import ENUM_MEMBER_BOOKKEEPING, class_bookkeeping, pydantic_decorators
from fncache.code.digest import annotation_names
from fncache.values import hasher as _hasher

__all__ = ["class_item", "enum_items", "member_attrs", "safe_token", "string_annotations",
           "visit_class"]


def visit_class(walk: Any, cls: type) -> str:
    """Visit a user class: its dict's items but bookkeeping, an enum's members and what they hold,
    its bases (as classes and as written) and metaclass; returns its label."""
    label: str
    label, new = walk.label("class", cls)
    if not new:
        return label
    qual = label.split(" ", 1)[1]
    d = cls.__dict__
    walk.len_watches.append((d, len(d)))
    items = enum_items(cls) if isinstance(cls, enum.EnumMeta) else []
    walk.attr_watches.append((cls, "__bases__", cls.__bases__))
    skipped = class_bookkeeping(cls)
    for name in sorted(d):
        value = d[name]
        if skipped(name, value):
            continue
        walk.dict_watches.append((d, name, value))
        if name == "__pydantic_decorators__":
            value = pydantic_decorators(value)  # without the class's id()
        if name == "__orig_bases__":  # the bases as written (``Parser[int]``): a tuple, as it is
            items.append((name, safe_token(value)))
            continue
        if name == "__annotations__" and isinstance(value, dict):  # evaluated in its module
            string_annotations(walk, getattr(sys.modules.get(cls.__module__), "__dict__", None), value)
        items.append((name, class_item(walk, value, f"class attribute {qual}.{name}")))
    bases = tuple(walk.reference(b) for b in cls.__bases__)
    meta = walk.reference(type(cls))
    walk.components[label] = _hasher.digest((cls.__qualname__, bases, meta, tuple(items))).hex()
    return label


def string_annotations(walk: Any, g: dict[str, Any] | None, annotations: dict[str, Any]) -> None:
    """The globals of namespace ``g`` that string annotations name (forward references, all of
    them under ``from __future__ import annotations``: see :func:`annotation_names`), read as the
    code's globals are: code that evaluates the annotations (``typing.get_type_hints``, a
    dataclass's converters) reads them. The text alone was keyed: ``x: "Parser"`` kept the key
    when ``Parser`` was edited. One the key cannot hold (a lock) is keyed by its type."""
    if g is None:
        return
    names, used = annotation_names(annotations)
    seen: set[str] = set()
    while names:
        name = names.pop(0)
        if name in seen:
            continue
        seen.add(name)
        try:
            walk.visit_global(g, name, frozenset(), used)
        except UnhashableArgument:
            value = g.get(name)
            walk.components[walk.global_label(g, name)] = _hasher.digest(
                ("unkeyable annotation", type(value).__module__, type(value).__qualname__)).hex()
        value = g.get(name)
        if isinstance(value, (str, types.GenericAlias)) or type(value).__module__ == "typing":
            # An alias evaluated in its turn (``KAlias: TypeAlias = "K"``, ``Items = list["K"]``).
            more, also = annotation_names({name: value})
            names.extend(more)
            used |= also


def enum_items(cls: Any) -> list[tuple[str, Any]]:
    """An enum's members. Its bookkeeping maps (_member_map_ and friends) are derived from them, so
    the members stand for all of it, hashed once, with the attributes a member holds beside its
    value (``__new__`` or other code set them), which its pickle, by value, drops. Members are
    constants: what they hold is keyed as the walk finds it and not watched (a hit checks nothing
    per member; an attribute changed in the running process after the first key is not seen)."""
    by_name: Any = cls.__members__
    members = tuple((n, m._value_) for n, m in by_name.items())
    items: list[tuple[str, Any]] = [("__members__", ("value", _hasher.digest(members)))]
    extra = tuple((n, a, safe_token(v)) for n, m in by_name.items() for a, v in member_attrs(m))
    if extra:
        items.append(("__members__ attributes", extra))
    return items


def member_attrs(member: Any) -> list[tuple[str, Any]]:
    """An enum member's attributes but the enum machinery's own, by name."""
    md = getattr(member, "__dict__", None) or {}
    return sorted(((a, v) for a, v in md.items() if a not in ENUM_MEMBER_BOOKKEEPING),
                  key=lambda item: item[0])


def safe_token(value: Any) -> Any:
    """``value`` by content (code by its fingerprint), or by its type where nothing keys it (a
    member's rate limiter holding a lock, a base made by ``__mro_entries__``, an annotation, the
    first value of state a function modifies): what code holds beside its code must not make it
    unkeyable."""
    try:
        return ("value", _hasher.digest(value))
    except Exception:
        return ("unhashable", type(value).__module__, type(value).__qualname__)


def class_item(walk: Any, value: Any, where: str) -> Any:
    """The token of one item of a class's dict: descriptors by the functions they hold."""
    if isinstance(value, (classmethod, staticmethod)):
        return (type(value).__name__, walk.read(value.__func__, where))
    if isinstance(value, property):
        return ("property",) + tuple(
            walk.read(f, where) if f is not None else None for f in (value.fget, value.fset, value.fdel)
        )
    # Descriptors of functools hold the user's function: its code counts (a cached_property
    # also holds a lock on 3.11, which cannot be pickled).
    if isinstance(value, functools.singledispatchmethod):
        return ("singledispatchmethod", walk.read(value.dispatcher, where), walk.read(value.func, where))
    if isinstance(value, functools.cached_property):
        return ("cached_property", walk.read(value.func, where), value.attrname)
    if isinstance(value, functools.partialmethod):
        return ("partialmethod", walk.read(value.func, where),
                tuple(walk.read(a, where) for a in value.args),
                tuple((k, walk.read(v, where)) for k, v in sorted(value.keywords.items())))
    return walk.read(value, where)

