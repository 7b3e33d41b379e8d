"""Parts of the walk (split from :mod:`fncache.code.walk`): the visit of a user class (its dict's
items, an enum's members with the attributes they hold, its bases and metaclass), and the user code
a library object holds."""

from __future__ import annotations

import array
import collections
import dataclasses
import enum
import functools
import operator
import sys
import types
from typing import Any, NamedTuple

from fncache._errors import UnhashableArgument
from fncache.code.classify import (
    ENUM_MEMBER_BOOKKEEPING,
    class_bookkeeping,
    draws_from_state,
    is_immutable,
    is_user_object,
    made_at_run_time,
    of_data_library,
    pydantic_decorators,
    stands_for_user_code,
    user_code_run_by,
)
from fncache.code.digest import annotation_names, attribute_chains
from fncache.code.inplace import MUTATORS, Modified, names_modified
from fncache.code.state import MISSING
from fncache.code.usercode import is_user_code, wrapper_attributes, wrapper_namespace
from fncache.values import hasher as _hasher
from fncache.values import registry as _registry

__all__ = ["class_item", "enum_items", "member_attrs", "safe_token", "string_annotations",
           "hook_token", "type_params", "user_code_held", "visit_class", "with_attributes"]


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
        items.append((name, _item_token(walk, cls, name, value, f"class attribute {qual}.{name}")))
    bases = tuple(walk.reference(b) for b in cls.__bases__)
    meta = walk.reference(type(cls))
    walk.components[label] = _hasher.digest((cls.__qualname__, bases, meta, tuple(items))).hex()
    return label


_BOOKKEEPING = frozenset({"__annotations__", "__dataclass_fields__", "__dataclass_params__"})
_PARAMS = getattr(dataclasses, "_DataclassParams", None)
_SCALARS = (int, float, complex, str, bytes, bool, type(None))  # fncache.ref refuses these
_EMPTY_METADATA = getattr(dataclasses, "_EMPTY_METADATA", None)  # shared by fields without any


class _KeyOrder:
    """A mapping's keys in their order, as a value re-hashed on every call (a watch of its order)."""

    __slots__ = ("mapping",)

    def __init__(self, mapping: dict[str, Any]) -> None:
        self.mapping = mapping

    def __fncache_token__(self) -> tuple[str, ...]:
        return tuple(self.mapping)


def _bookkeeping_token(walk: Any, name: str, value: Any, where: str) -> Any:
    """A class's annotations or a dataclass's fields or parameters by value, as any mutable value a
    function reads, but watched by their parts instead of re-hashed whole on every call (90 us of
    each hit of a function using a dataclass with a default factory): the mapping's keys, order and
    items, each field, its class and each of its attributes by identity, and each part whose digest
    can change while it stays bound re-hashed (see :func:`_constant`). None for another shape (a
    ``Field`` subclass) or a value that cannot be hashed: then read whole, as before."""
    parts = _parts(name, value)
    if parts is None:
        return None
    try:
        d = _hasher.digest(value)
    except UnhashableArgument:
        return None
    if type(value) is dict:
        walk.len_watches.append((value, len(value)))
        walk.dict_watches.extend((value, k, v) for k, v in value.items())
        _rehashed(walk, _KeyOrder(value), f"{where} (order)")
    for a, v in value.items() if name == "__annotations__" else (
            item for part in parts for item in _slots(walk, part)):
        if not _constant(walk, v):
            _rehashed(walk, v, f"{where}.{a}")
    return ("value", d)


def _parts(name: str, value: Any) -> list[Any] | None:
    """What :func:`_bookkeeping_token` watches attribute by attribute (none for annotations, whose
    values it watches); None for a shape it does not know."""
    if name == "__dataclass_params__":
        return [value] if _PARAMS is not None and type(value) is _PARAMS else None
    if type(value) is not dict:
        return None
    if name == "__annotations__":
        return []
    fields = list(value.values())
    return fields if all(type(f) is dataclasses.Field for f in fields) else None


def _slots(walk: Any, part: Any) -> list[tuple[str, Any]]:
    """The slot attributes of a ``Field`` or dataclass parameters, each watched by identity."""
    found = [(a, getattr(part, a, MISSING)) for a in type(part).__slots__]
    walk.attr_watches.append((part, "__class__", type(part)))
    walk.attr_watches.extend((part, a, v) for a, v in found)
    return [(a, v) for a, v in found if v is not MISSING]


def _rehashed(walk: Any, value: Any, where: str) -> None:
    walk.mutable.append((value, _hasher.digest(value)))
    walk.mutable_where.append(where)


def _constant(walk: Any, v: Any) -> bool:
    """Whether the digest of ``v`` cannot change while it stays bound (a rebinding is watched): an
    immutable value, a library class (keyed by name), the fields' shared empty metadata, a builtin
    generic alias of these (``list[str]``); but for a scalar, a ``fncache.ref`` given to it later
    would key it anew, which is watched."""
    if type(v) in _SCALARS:
        return True
    if type(v) is types.GenericAlias:
        return _constant(walk, v.__origin__) and all(_constant(walk, a) for a in v.__args__)
    if not (is_immutable(v) or v is _EMPTY_METADATA or (isinstance(v, type) and not is_user_code(v))):
        return False
    walk.dict_watches.append((_registry.refs, id(v), _registry.refs.get(id(v), MISSING)))
    return True


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


def type_params(walk: Any, fn: Any) -> tuple[Any, ...]:
    """The part of a function's component for its type parameters (``def f[T: Bound]``, 3.12+),
    by value (a type variable's bound, constraints and default: see
    :mod:`fncache.values.typing_tokens`), watched for a rebinding: code may read them
    (``f.__type_params__``) where the function's own code does not name them."""
    params = getattr(fn, "__type_params__", ())
    if not params:
        return ()
    walk.attr_watches.append((fn, "__type_params__", params))
    return (("__type_params__", safe_token(tuple(params))),)


def with_attributes(walk: Any, wrapper: Any, inner: Any, token: Any) -> Any:
    """``token`` of the code ``wrapper`` (a memoized function, an ``lru_cache``) stands for, with
    the attributes the user set on it (:func:`~fncache.code.usercode.wrapper_attributes`), each
    watched, as a function's own are; so is the wrapper's namespace, so one set later is seen."""
    namespace = wrapper_namespace(wrapper)
    if namespace is None:
        return token  # another library's wrapper (numba's): its namespace is its own state
    found, own = namespace
    walk.len_watches.append((found, len(found)))
    walk.dict_watches.extend((found, k, v) for k, v in found.items() if k not in own)
    attrs = wrapper_attributes(wrapper, inner)
    if not attrs:
        return token
    return token + (("attributes", tuple((k, walk.attribute(v, f"attribute {k} of a wrapper"))
                                         for k, v in sorted(attrs.items()))),)


def _item_token(walk: Any, cls: type, name: str, value: Any, where: str) -> Any:
    """The token of the item ``name`` of a user class's dict."""
    if name == "__pydantic_decorators__":
        value = pydantic_decorators(value)  # without the class's id()
    if name == "__orig_bases__":  # the bases as written (``Parser[int]``): a tuple, as it is
        return safe_token(value)
    if name == "__annotations__" and isinstance(value, dict):  # evaluated in its module
        string_annotations(walk, getattr(sys.modules.get(cls.__module__), "__dict__", None), value)
    token = _bookkeeping_token(walk, name, value, where) if name in _BOOKKEEPING else None
    return token if token is not None else class_item(walk, value, where)


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


def user_code_held(walk: Any, obj: Any) -> tuple[Any, ...]:
    """Tokens of the user code in a library object's ``__dict__``: ``__wrapped__``, a registry, a
    hook (a ``functools.partial`` of a user function, a method bound to a user object).

    ``functools.singledispatch`` of a library function with the user's implementations
    registered, a library wrapper that keeps the user function it wraps, a ``json.JSONDecoder``
    with the user's ``object_hook``: their code counts.
    """
    try:
        d = vars(obj)
    except TypeError:
        return ()
    held = ((name, _held(walk, d, name)) for name in sorted(d))
    return tuple((name, token) for name, token in held if token is not None)


def _held(walk: Any, d: dict[str, Any], name: str) -> Any:
    """The token of the user code ``d[name]`` holds (see user_code_held), watched; None if none."""
    value = d[name]
    if isinstance(value, (dict, types.MappingProxyType)):
        if any(is_user_object(k) or stands_for_user_code(v) for k, v in value.items()):
            walk.dict_watches.append((d, name, value))
            return walk.mapping(value)
        if name == "registry":
            # Only the library's own entries so far: a registration made later must be seen.
            walk.dict_watches.append((d, name, value))
            walk.len_watches.append((value, len(value)))
        return None
    if not stands_for_user_code(value):
        return None
    walk.dict_watches.append((d, name, value))
    return hook_token(walk, value)


def hook_token(walk: Any, value: Any, where: str | None = None) -> Any:
    """The token of a value that may run user code (a hook, a registry's entry, a builtin the user
    put there): its content; where that cannot be hashed (a callable object holding a lock), the
    user code it runs and what it holds part by part (see :func:`_held_parts`), so that an edit of
    that code and a change of its data are still seen; else the error stands."""
    try:
        return walk.reference(value) if where is None else walk.read(value, where)
    except UnhashableArgument:
        runs = user_code_run_by(value)
        if not runs:
            raise
    if id(value) in walk.hooks:  # reached again from its own parts (a hook holding its decoder)
        return ("hook again", type(value).__module__, type(value).__qualname__)
    walk.hooks.add(id(value))
    try:
        return ("runs", tuple(walk.reference(f) for f in runs), _held_parts(walk, value))
    finally:
        walk.hooks.discard(id(value))


def _held_parts(walk: Any, value: Any, depth: int = 0) -> Any:
    """What an object no key can hold keeps, part by part: a partial's function and arguments, a
    bound method's instance, an object's attributes (each watched, as a global is); each by its
    content, or, where that cannot be hashed either, by its own parts in turn (a lock, which has
    none, by its type alone)."""
    if isinstance(value, functools.partial):
        items = [("func", value.func), *enumerate(value.args), *sorted(value.keywords.items())]
    elif isinstance(value, types.MethodType):
        items = [("self", value.__self__), ("func", value.__func__)]
    else:
        try:
            items = sorted(vars(value).items())
        except TypeError:  # no __dict__ (a lock)
            items = []
        walk.attr_watches.extend((value, k, v) for k, v in items)
    out = []
    for k, v in items:
        try:
            out.append((k, walk.reference(v)))
        except UnhashableArgument:
            out.append((k, _held_parts(walk, v, depth + 1) if depth < 4 else ()))
    t = type(value)
    return ("parts", t.__module__, t.__qualname__, tuple(out))


def random_methods(walk: Any, g: dict[str, Any], code: types.CodeType) -> None:
    """Key each random generator's method the code reads through modules (``random.randint``,
    ``np.random.rand``: see :func:`~fncache.code.classify.draws_from_state`) by the generator's
    state, as a global bound to it is, unless the code seeds that module's generator itself
    (``np.random.seed(0)`` in the function: the state it starts from does not count).

    Watched as a global is: a seed set before a call gives another key (an attribute not there
    yet, numpy's lazy ``np.random``, is watched for). A cached call draws, changing it: that is
    the function's own change (read as a closure value is, so that another thread alive does not
    stop the store), and the state first seen is its key from then on (``mark_state``)."""
    found: list[tuple[types.ModuleType, str, Any]] = []
    seeded: set[int] = set()
    for chain in attribute_chains(code):
        value = g.get(chain[0])
        for attr in chain[1:]:
            if not isinstance(value, types.ModuleType):
                break
            md = vars(value)
            if attr not in md:
                walk.dict_watches.append((md, attr, MISSING))
                break
            if attr in _SEEDS:
                seeded.add(id(value))
            if draws_from_state(md[attr]):
                found.append((value, attr, md[attr]))
                break
            value = md[attr]
    for mod, attr, method in found:
        if id(mod) not in seeded:
            walk.dict_watches.append((vars(mod), attr, method))
            label = f"attr {mod.__name__}.{attr}"
            walk.components[label] = _hasher.digest(walk.private_reference(method, label)).hex()


#: What seeds a module's generator (``random.seed``, ``np.random.seed``, ``np.random.set_state``).
_SEEDS = frozenset({"seed", "setstate", "set_state"})


def made_with(walk: Any, fn: types.FunctionType) -> tuple[Any, ...]:
    """What a library function a factory made at run time was made with, as ``user_code_held``
    gives tokens; ``()`` for any other function (see :func:`made_at_run_time`).

    ``attrs.converters.optional(conv)``, ``pipe(conv, str)``, ``default_if_none(2)``: each gives a
    function named ``optional.<locals>.optional_converter`` whatever it was made with, so its name
    keys none of it. The values of its closure cells (watched, as a global is), defaults and keyword
    defaults are keyed where they are code, cannot change or are the user's (see :func:`_settled`),
    the user's code visited, and where they are plain data (:func:`_plain`: ``weighted([1, 2])``,
    ``default_if_none([0, 0])``, an array) that the function's own code does not change
    (:func:`~fncache.code.inplace.names_modified`): by content, watched as the user's own closure
    values are (one a cached call is seen changing, through other code, is keyed by its first
    content from then on: ``fingerprint.mark_state``). Anything else (a memo dict it fills, a
    library object, a lock) is its state, not what it was made with: by its type."""
    if not made_at_run_time(fn) or id(fn) in walk.hooks:
        return ()
    walk.hooks.add(id(fn))
    code = fn.__code__
    qual = fn.__qualname__
    modified = _Made(names_modified(code), _changed_by_methods(fn))
    try:
        cells = _cell_tokens(walk, fn, modified)
        n = len(fn.__defaults__ or ())
        params = code.co_varnames[code.co_argcount - n:code.co_argcount]
        defaults = tuple(_made_token(walk, v, f"default {qual}.{k}", k, modified)
                         for k, v in zip(params, fn.__defaults__ or (), strict=True))
        kw = tuple((k, _made_token(walk, v, f"default {qual}.{k}", k, modified))
                   for k, v in sorted((fn.__kwdefaults__ or {}).items()))
        return (("<made with>", (tuple(cells), defaults, kw)),)
    finally:
        walk.hooks.discard(id(fn))


def _cell_tokens(walk: Any, fn: types.FunctionType, modified: _Made) -> list[Any]:
    cells: list[Any] = []
    for var, cell, value in _cells(fn):
        if value is MISSING:
            cells.append(("empty",))
            continue
        walk.attr_watches.append((cell, "cell_contents", value))
        cells.append(_made_token(walk, value, f"closure {fn.__qualname__}.{var}", var, modified))
    return cells


class _Made(NamedTuple):
    code: Modified  # what the function's code changes
    through_methods: frozenset[int]  # ids of values it holds a mutating method of


# Methods of those names that leave an array or frame as it is (they return a new one).
_NEW_ON_DATA = frozenset({"add", "append", "extend", "remove", "discard", "reverse", "rotate"})
_BOUND = (types.BuiltinMethodType, types.MethodWrapperType, types.MethodType)


def _changed_by_methods(fn: types.FunctionType) -> frozenset[int]:
    """The values a function holds a mutating method of (``put = cache.__setitem__`` in its
    closure, ``_put=cache.__setitem__`` as a default): its code changes them through it."""
    values = [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values(),
              *(v for _, _, v in _cells(fn) if v is not MISSING)]
    held = [_bound_to(v) for v in values
            if isinstance(v, _BOUND) and getattr(v, "__name__", None) in MUTATORS]
    return frozenset(id(h) for h in held if h is not None)


def _cells(fn: types.FunctionType) -> list[tuple[str, Any, Any]]:
    """``(variable, cell, value)`` of each closure cell of ``fn`` (MISSING for an empty one)."""
    out = []
    for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
        try:
            out.append((var, cell, cell.cell_contents))
        except ValueError:  # an empty cell
            out.append((var, cell, MISSING))
    return out


def _bound_to(method: Any) -> Any:
    """The object a bound method is bound to (None for one that will not say: a proxy)."""
    try:
        return method.__self__
    except Exception:
        return None


def _changed(made: _Made, var: str, value: Any) -> bool:
    """Whether the function's own code may change ``value``, read as ``var`` (see
    :func:`~fncache.code.inplace.names_modified`)."""
    if var in made.code.written or id(value) in made.through_methods:
        return True
    methods = made.code.called.get(var, frozenset())
    return bool(methods - _NEW_ON_DATA if of_data_library(type(value)) else methods)


def _made_token(walk: Any, value: Any, where: str, var: str, made: _Made) -> Any:
    if isinstance(value, _BOUND) and id(_bound_to(value)) in made.through_methods:
        # A method of what the function changes (``cache.__setitem__``, ``cache.get``): by what
        # it is, not by the content of the object it is bound to.
        t = type(_bound_to(value))
        return ("method", t.__module__, t.__qualname__, getattr(value, "__name__", None))
    if (walk.state and id(value) in walk.state) or _settled(value) or (
            not _changed(made, var, value) and _plain(value)):
        try:  # (a mutable value: watched; marked state, by its first content)
            return walk.private_reference(value, where)
        except UnhashableArgument:
            pass
    return ("type", type(value).__module__, type(value).__qualname__)


def _settled(value: Any, depth: int = 0) -> bool:
    """Code, a value that cannot change, or the user's own (a list or dict counts when it holds
    the user's code, ``chain([conv])``, as a tuple does): keyed by content, whatever the code
    does with it."""
    if _one_settled(value):
        return True
    if depth >= 4 or type(value) not in (tuple, frozenset, list, dict):
        return False
    items = [*value.keys(), *value.values()] if type(value) is dict else list(value)
    return _settled_items(items, type(value) in (tuple, frozenset), depth)


def _settled_items(items: list[Any], frozen: bool, depth: int) -> bool:
    if all(type(x) in _SCALARS for x in items):  # (numbers and strings: no code, at C speed)
        return frozen
    return all(_settled(x, depth + 1) for x in items) and (
        frozen or any(stands_for_user_code(x) for x in items))


def _one_settled(value: Any) -> bool:
    return is_immutable(value) or isinstance(value, _CODE) or stands_for_user_code(value) \
        or is_user_code(type(value)) or _named(value)


# Containers whose items decide whether they are plain data (``collections``' own included).
_CONTAINERS = frozenset({tuple, frozenset, list, dict, set, collections.OrderedDict,
                         collections.defaultdict, collections.Counter, collections.deque})
# Value types of the standard library that cannot change (by a class in their MRO).
_VALUE_TYPES = frozenset({"decimal.Decimal", "fractions.Fraction", "datetime.date", "datetime.time",
                          "datetime.timedelta", "datetime.tzinfo", "pathlib.PurePath",
                          "pathlib._local.PurePath", "re.Pattern", "uuid.UUID", "enum.Enum"})


def _plain(value: Any, depth: int = 0) -> bool:
    """Plain data: a settled value, a value of the standard library that cannot change (a
    ``Decimal``, a ``date``, a ``Path``, a compiled pattern, an enum member), bytes and numbers
    (``bytearray``, ``array.array``), an array or frame of a data library (anything with
    ``__array__``: not a random generator), a ``functools.partial`` of such, or a container of
    such (a list, dict, set, ``collections``' own, a ``SimpleNamespace``; nested up to 4 deep)."""
    t = type(value)
    if t in _SCALARS:
        return True
    try:
        items = _items(value, t)  # (a container by its items alone: long ones are common)
    except RuntimeError:  # (changed by another thread meanwhile: state, not plain data)
        return False
    if items is not None:
        return depth < 4 and all(type(x) in _SCALARS or _plain(x, depth + 1) for x in items)
    if _plain_value(value, t):
        return True
    return of_data_library(t) and hasattr(t, "__array__") and not callable(value)


def _plain_value(value: Any, t: type) -> bool:
    if t in (bytearray, array.array) or _one_settled(value):
        return True
    try:
        return any(f"{c.__module__}.{c.__qualname__}" in _VALUE_TYPES for c in t.__mro__)
    except Exception:  # (a metaclass whose __mro__ raises: not a value of the standard library)
        return False


def _items(value: Any, t: type) -> list[Any] | None:
    """What decides whether a container (or a partial) is plain data; None for anything else."""
    if t is functools.partial:
        return [value.func, *value.args, *value.keywords.values()]
    if t in _CONTAINERS:
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
        return items + [value.default_factory] if t is collections.defaultdict else items
    if t in (types.SimpleNamespace, types.MappingProxyType):
        mapping = vars(value) if t is types.SimpleNamespace else value
        return [*mapping.keys(), *mapping.values()]
    return None


_CODE = (types.FunctionType, type, types.BuiltinFunctionType, operator.itemgetter,
         operator.attrgetter, operator.methodcaller)


def _named(value: Any) -> bool:
    """A library callable pickled as its name (a numpy ufunc, an array-function dispatcher)."""
    if not callable(value):
        return False
    if type(value).__name__ == "ufunc":
        return True
    try:
        return isinstance(value.__reduce__(), str)
    except Exception:  # (refused to pickle: not one)
        return False
