"""Which code is the user's: fingerprinted by value, while library code enters by reference.

"User code" is code outside the standard library and installed distributions (site-packages): scripts,
``__main__``, notebooks, ``exec``-made functions, local modules, editable installs. :func:`track` and
:func:`untrack` widen or narrow the set; each call bumps a generation number, and every fingerprint made
under an older generation is stale wherever it is held.
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.util
import logging
import os
import site
import sys
import sysconfig
import types
import weakref
from typing import Any

from fncache._errors import ArgumentTypeError
from fncache.code.state import MISSING

__all__ = ["is_user_code", "is_user_module", "track", "untrack"]

log = logging.getLogger("fncache")


def _library_roots() -> tuple[str, ...]:
    roots: set[str] = set()
    paths = sysconfig.get_paths()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = paths.get(name)
        if p:
            roots.add(os.path.realpath(p))
    try:
        roots.update(os.path.realpath(p) for p in site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site.py
        pass
    user_site = getattr(site, "USER_SITE", None)
    if user_site:
        roots.add(os.path.realpath(user_site))
    for p in sys.path:
        if p and os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"):
            roots.add(os.path.realpath(p))
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))


_LIB_ROOTS = _library_roots()
_overrides: dict[str, bool] = {}
# Bumped by track()/untrack(): fingerprints made before then no longer apply, wherever they are kept.
_generation = [0]
_user_module_cache: dict[str, bool] = {}


def _override(what: str, modules: tuple[str, ...], user: bool) -> None:
    for m in modules:
        if not isinstance(m, str) or not m:
            raise ArgumentTypeError(f"{what}: expected module names, got {m!r}")
    for m in modules:
        _overrides[m] = user
    _user_module_cache.clear()
    _class_verdicts.clear()
    # Every fingerprint made before now is stale, wherever it is held (caches, memoized functions).
    _generation[0] += 1


def track(*modules: str) -> None:
    """Treat these modules (and their submodules) as user code: fingerprinted by value.

    For your own package installed into site-packages, e.g. ``fncache.track("mypkg")``.
    """
    _override("track", modules, True)


def untrack(*modules: str) -> None:
    """Treat these modules (and their submodules) as library code: taken by reference only."""
    _override("untrack", modules, False)


def is_user_module(name: str | None) -> bool:
    """Whether code of module ``name`` is fingerprinted by value (see the module docstring)."""
    if not name:
        return True
    found = _user_module_cache.get(name)
    if found is None:
        found = _user_module_cache[name] = _is_user_module(name)
    return found


def _decided(name: str) -> bool | None:
    """What ``track``/``untrack`` decided for module ``name`` or its nearest package (True: user
    code), or None."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        decided = _overrides.get(".".join(parts[:i]))
        if decided is not None:
            return decided
    return None


def _is_user_module(name: str) -> bool:
    parts = name.split(".")
    decided = _decided(name)
    if decided is not None:
        return decided
    if name == "__main__" or name == "__mp_main__":
        return True  # whatever runs as the main script is the user's, even from site-packages
    if parts[0] == "fncache":
        return False
    if name in sys.builtin_module_names:
        return False
    mod = sys.modules.get(name)
    if mod is None:
        # Not importable by that name (exec, a module built by hand): only by value is safe.
        return True
    spec = getattr(mod, "__spec__", None)
    if spec is not None and spec.origin in ("built-in", "frozen"):
        return False
    path = getattr(mod, "__file__", None)
    if not path:
        return True  # notebooks, exec'd namespaces
    real = os.path.realpath(path)
    return not real.startswith(_LIB_ROOTS)


# ---------------------------------------------------------------------------------------------
# Code objects
# ---------------------------------------------------------------------------------------------

def library_location(name: str) -> bool | None:
    """Whether a module not imported yet would be library code (None: not found), without importing.

    Only the top-level package is looked up, so no package's ``__init__`` runs to find out.
    """
    parts = name.split(".")
    decided = _decided(name)
    if decided is not None:
        return not decided
    if parts[0] == "fncache" or parts[0] in sys.builtin_module_names:
        return True
    top = sys.modules.get(parts[0])
    if top is not None:
        return not is_user_module(parts[0])
    return _found_in_library(parts[0])


def _found_in_library(top: str) -> bool | None:
    """Whether the top-level package ``top``, found but not imported, is library code (None: not
    found)."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin in ("built-in", "frozen"):
        return True
    where = spec.origin or next(iter(spec.submodule_search_locations or ()), None)
    if not where:
        return False  # a namespace package without a location: treat as the user's
    return os.path.realpath(where).startswith(_LIB_ROOTS)


def submodule(package: str, name: str) -> None:
    """Import ``package.name`` if it is a user submodule that exists (a name only read otherwise)."""
    full = f"{package}.{name}"
    if full in sys.modules or not name.isidentifier():
        return
    try:
        spec = importlib.util.find_spec(full)
    except (ImportError, ValueError):
        return
    if spec is not None and spec.origin and not _library_file(spec.origin):
        imported(full)


def imported(name: str) -> types.ModuleType | None:
    """The module an import in a function body names, imported now if it is user code.

    The function imports it when it runs anyway (the key is made just before); importing it here is
    what lets its code count in the key of the very first call. Library modules are never imported
    here: they count by name.
    """
    mod = sys.modules.get(name)
    if mod is not None or library_location(name) is not False:
        return mod
    try:
        return importlib.import_module(name)
    except Exception as e:  # the function's own import would fail the same way, or is guarded
        log.debug("fingerprint: could not import %s: %s", name, e)
        return sys.modules.get(name)


def is_user_code(obj: Any) -> bool:
    """Whether a function or class is fingerprinted by value.

    A function whose globals are not its module's dict was rebuilt by value (cloudpickle, a worker
    process): it is the user's whatever its ``__module__`` says, or a worker whose ``__main__`` is a
    library's would key it by name alone.
    """
    module = getattr(obj, "__module__", None)
    if module is not None and not isinstance(module, str):
        return False  # a compiled metatype's class: its __module__ is a descriptor (Cython's)
    if is_user_module(module):
        return not _compiled_elsewhere(obj, module)
    if isinstance(obj, types.FunctionType):
        mod = sys.modules.get(module or "")
        if mod is not None and obj.__globals__ is getattr(mod, "__dict__", None):
            return False
        # ``collections.abc.MutableMapping.clear`` lives in ``_collections_abc``: code of a library
        # file under another module's name is still a library's.
        return not _library_file(obj.__code__.co_filename)
    return isinstance(obj, type) and _class_written_by_user(obj)


# What only a compiled class keeps in its own namespace: slots and methods written in C.
_COMPILED = (types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType)


def _compiled_elsewhere(obj: Any, module: str | None) -> bool:
    """Whether ``obj`` is a class written in C (an extension's type, not a class statement) under
    a name no module has (wrapt's proxies name ``_wrappers``): not code a user wrote."""
    if not isinstance(obj, type) or module in sys.modules:
        return False
    try:
        return any(isinstance(v, _COMPILED) for v in vars(obj).values())
    except TypeError:
        return False


def _class_written_by_user(cls: type) -> bool:
    """:func:`_written_by_user`, kept per class."""
    try:
        found = _class_verdicts.get(cls)
        if found is None:
            found = _class_verdicts[cls] = _written_by_user(cls)
    except TypeError:  # a metaclass that makes its classes unhashable: not kept
        found = _written_by_user(cls)
    return found


# Classes whose __module__ names a library module: whether their own body is a user's.
_class_verdicts: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def _written_by_user(cls: type, depth: int = 0) -> bool:
    """Whether a class whose ``__module__`` names a library module was written in a user's file: a
    function compiled in its own body (its code's ``co_qualname`` starts with the class's name:
    set by the compiler, which ``functools.wraps`` does not copy) is user code by the rule for
    functions and comes from a file that is not a library's. A class statement in a user's file
    that sets ``__module__ = "json"`` (to pickle by another name) was keyed by that name: an edit
    of its methods was a stale hit. Methods under ``property``, ``cached_property``, ``lru_cache``,
    ``partialmethod`` and the like count, as do nested classes. Functions made from strings
    (``namedtuple``'s ``__new__``, a dataclass's ``__init__``: file ``<string>``) do not: a library
    makes them in its own classes; nor does a function assigned to a library class later (a
    patch), whose code was compiled elsewhere. A class with no function of its own body (fields
    only) stays keyed by name."""
    prefix = f"{getattr(cls, '__qualname__', '')}."
    try:
        members = list(vars(cls).values())
    except TypeError:
        return False
    for member in members:
        if isinstance(member, type):
            if depth < 4 and getattr(member, "__qualname__", "").startswith(prefix) \
                    and _written_by_user(member, depth + 1):
                return True
        elif any(_compiled_in(fn, prefix) for fn in _functions_of(member)):
            return True
    return False


def _compiled_in(fn: types.FunctionType, prefix: str) -> bool:
    """Whether ``fn`` was compiled in the body of the class named ``prefix`` (with its dot), from
    a user's file."""
    code = fn.__code__
    return code.co_qualname.startswith(prefix) and os.path.isabs(code.co_filename) \
        and not _library_file(code.co_filename) and is_user_code(fn)


def _functions_of(member: Any) -> list[types.FunctionType]:
    """The plain functions a class attribute holds: itself (and what a ``functools.wraps`` wrapper
    wraps), a property's accessors, or the function of a ``staticmethod``, ``classmethod``,
    ``cached_property``, ``partialmethod``, ``singledispatchmethod`` or ``lru_cache``. Only these
    standard types are looked into: an attribute of another type is not asked for anything."""
    found: list[types.FunctionType] = []
    todo = [member]
    while todo and len(found) < 16:
        m = todo.pop()
        if isinstance(m, property):
            todo.extend(x for x in (m.fget, m.fset, m.fdel) if x is not None)
            continue
        if isinstance(m, types.FunctionType):
            found.append(m)
            inner = vars(m).get("__wrapped__")
        else:
            attr = _HOLDERS.get(type(m))
            inner = None if attr is None else getattr(m, attr, None)
        if inner is not None and inner is not m:
            todo.append(inner)
    return found


_LRU_WRAPPER = type(functools.lru_cache(lambda: None))
# Standard holders of a function, and the attribute that holds it.
_HOLDERS: dict[type, str] = {
    staticmethod: "__func__", classmethod: "__func__", functools.cached_property: "func",
    functools.partialmethod: "func", functools.singledispatchmethod: "func",
    _LRU_WRAPPER: "__wrapped__",
}


_library_files: dict[str, bool] = {}


def _library_file(filename: str) -> bool:
    found = _library_files.get(filename)
    if found is None:
        found = _library_files[filename] = filename.startswith("<frozen ") or (
            os.path.isabs(filename) and os.path.realpath(filename).startswith(_LIB_ROOTS))
    return found


def wrapped_user_code(value: Any) -> Any:
    """The user function or class a library's wrapper object stands for (``__wrapped__``), or None.

    ``functools.cache``/``lru_cache`` wrappers, numba dispatchers and the like pickle by name (or by a
    per-process id): wherever one is reached, in a global or inside a value, the code it wraps is
    what counts. Instances of user classes are left alone: they are hashed by content, which holds
    the function itself.
    """
    if isinstance(value, (types.FunctionType, type, types.MethodType)) or not callable(value):
        return None  # a bound method's attributes are its function's: its instance counts too
    try:
        inner = vars(value).get("__wrapped__")
    except TypeError:  # no __dict__
        return None
    if isinstance(inner, (types.FunctionType, type)) and not is_user_code(type(value)) \
            and is_user_code(inner):
        return inner
    return None


# What a wrapt proxy (``wrapt.decorator``, ``FunctionWrapper``, ``ObjectProxy``) holds of its
# own: what it wraps, the decorator's function, its switch and binding, the instance it is bound to.
_PROXY_ATTRS = ("__wrapped__", "_self_wrapper", "_self_enabled", "_self_binding", "_self_instance")


def proxy_parts(value: Any) -> tuple[tuple[str, Any], ...]:
    """What an object that passes for another is made of, or ``()`` for any other object.

    A wrapt ``FunctionWrapper`` says it is the function it wraps: ``isinstance`` and its
    ``__code__``, ``__closure__`` and globals answer for that function, so a walk that took it for
    one would never see the decorator's own code (``@wrapt.decorator``) or a factory's arguments.
    Such a proxy is told by its ``__class__``, which is not its type; its parts are read past its
    forwarding (they are attributes of the proxy itself, not of what it wraps)."""
    t = type(value)
    try:
        if value.__class__ is t:
            return ()
    except Exception:  # an object whose __class__ cannot be read: not a proxy this knows
        return ()
    parts = []
    for name in _PROXY_ATTRS:
        try:
            parts.append((name, object.__getattribute__(value, name)))
        except Exception:  # not there, or it cannot say (a context-local proxy with nothing bound)
            continue
    if not parts or parts[0][0] != "__wrapped__":
        return ()
    return (*parts, *_set_on_proxy(value, parts[0][1]))


def _set_on_proxy(value: Any, wrapped: Any) -> list[tuple[str, Any]]:
    """Attributes set on a proxy itself (wrapt keeps ``_self_*`` names there): from its instance
    dict, its own ``__dict__`` or, where its ``__dict__`` forwards (wrapt's compiled proxies), the
    dict found among its referents."""
    try:
        own = [object.__getattribute__(value, "__dict__")]
    except Exception:
        own = []
    for d in (*own, *gc.get_referents(value)):
        if type(d) is dict and d is not wrapped:
            found = sorted((k, v) for k, v in d.items()
                           if type(k) is str and k.startswith("_self_") and k not in _PROXY_ATTRS)
            if found:
                return found
    return []


def compile_options(value: Any) -> tuple[Any, ...] | None:
    """What a wrapper was made with besides the function it wraps; None for others.

    A numba dispatcher: the options (``fastmath``, ``parallel``, ``boundscheck``...), the
    ``locals=`` types and the signatures given up front (which fix the types the function is called
    with) change results; the signatures compiled lazily so far and the dispatcher's per-process id
    do not. A ``functools.lru_cache``: its ``maxsize`` and ``typed`` (``typed=False`` serves
    ``f(3, 0)``'s result for ``f(3.0, 0)``), which its pickle, by name, drops.
    """
    if isinstance(value, _LRU_WRAPPER):
        return (("cache", tuple(sorted(value.cache_parameters().items()))),)
    return _numba_options(value)


def _numba_options(value: Any) -> tuple[Any, ...] | None:
    """A numba dispatcher's options (see :func:`compile_options`); None for another object."""
    if not (getattr(type(value), "__module__", None) or "").startswith("numba.") \
            or not hasattr(value, "py_func"):
        return None
    options = getattr(value, "targetoptions", None) or {}
    given = () if getattr(value, "_can_compile", True) else tuple(
        str(s) for s in getattr(value, "signatures", ()))
    local_types = getattr(value, "locals", None) or {}
    return (tuple(sorted((str(k), repr(v)) for k, v in options.items())),
            tuple(sorted((str(k), repr(v)) for k, v in local_types.items())), given)


#: What ``functools.update_wrapper`` sets on a wrapper (the wrapped function's own attributes it
#: copies count only once rebound on the wrapper), and what ``lru_cache`` adds.
_WRAPPER_OWN = frozenset({"__module__", "__name__", "__qualname__", "__doc__", "__annotations__",
                          "__type_params__", "__wrapped__", "cache_parameters"})


def wrapper_namespace(wrapper: Any) -> tuple[dict[str, Any], frozenset[str]] | None:
    """The namespace of a memoized function or an ``lru_cache`` wrapper, with the names a memoized
    function holds itself (``__fncache_own__``; none for an ``lru_cache``); None for another
    library's wrapper (numba's keeps state of its own in its namespace)."""
    found = getattr(wrapper, "__dict__", None)
    if type(found) is not dict:
        return None
    own = found.get("__fncache_own__")
    if own is not None:
        return found, own
    return (found, frozenset()) if type(wrapper).__name__ == "_lru_cache_wrapper" else None


def wrapper_attributes(wrapper: Any, inner: Any) -> dict[str, Any]:
    """The attributes the user set on a wrapper of ``inner`` (see :func:`wrapper_namespace`):
    those it does not hold itself and that are not the ones it copied from ``inner`` unchanged.
    Code that reads ``helper.scale`` reads them: ``helper.scale = 3`` on a memoized helper was not
    in the key of its caller."""
    namespace = wrapper_namespace(wrapper)
    if namespace is None:
        return {}
    found, own = namespace
    copied = getattr(inner, "__dict__", {})
    return {k: v for k, v in found.items()
            if k not in own and k not in _WRAPPER_OWN and copied.get(k, MISSING) is not v}


def unwrap_memoized(obj: Any) -> Any:
    # A memoized function read as a helper is fingerprinted as the function it wraps.
    inner = getattr(type(obj), "__fncache_wraps__", None)
    if inner is not None:
        return inner(obj)
    return obj


def user_accessors(names: set[str]) -> list[tuple[dict[str, Any], str, type, str]]:
    """The pandas accessors of the user's among ``names`` (``register_dataframe_accessor("geo")``
    makes ``geo`` one on DataFrame): ``(class dict, name, accessor class, label)`` each. pandas' own
    accessors (``str``, ``dt``, ``plot``) are library code and left out; none without pandas."""
    pd = sys.modules.get("pandas")
    found: list[tuple[dict[str, Any], str, type, str]] = []
    if pd is None:
        return found
    for owner in (getattr(pd, "DataFrame", None), getattr(pd, "Series", None),
                  getattr(pd, "Index", None)):
        registered = getattr(owner, "_accessors", None)
        if owner is None or not isinstance(registered, (set, frozenset)):
            continue
        d = vars(owner)
        for name in sorted(names & registered):
            cls = getattr(d.get(name), "_accessor", None)
            if isinstance(cls, type) and is_user_code(cls):
                found.append((d, name, cls, f"accessor {owner.__name__}.{name}"))
    return found


#: What the import system sets on every module: where and how it was found, not code
#: (``__file__`` names the checkout); the docstring, as everywhere, does not count.
_MODULE_MADE = frozenset({"__name__", "__doc__", "__package__", "__loader__", "__spec__", "__file__",
                          "__cached__", "__builtins__", "__path__", "__annotations__",
                          "__warningregistry__"})


def whole_module(mod: types.ModuleType) -> set[str]:
    """Every name a user module defines but what the import system set (its own ``__getattr__``
    and ``__version__`` count)."""
    return {n for n in vars(mod) if n not in _MODULE_MADE}


def read_through(value: Any, name: str, passed: frozenset[str], names: set[str]) -> set[str] | None:
    """The names of a module bound to ``name`` that the code can read: those it names, unless it
    passes a user module on (then None: all of them, see ``Walk.code_reference``)."""
    if name in passed and isinstance(value, types.ModuleType) and is_user_module(value.__name__):
        return None
    return names
