"""What a function *is*, for caching: a digest of its code and of everything user-written it reaches.

A fingerprint is a set of named *components*, each with a digest:

* ``function NAME``: a function's code (bytecode, constants, names, argument spec, flags), defaults and
  keyword defaults; never its file name, line numbers, line table or docstring;
* ``global NAME`` / ``closure FN.VAR``: a value the code reads, by content; a user-written function or
  class read this way is a reference to its own component, so helpers of helpers are covered and
  cycles (recursion, a method that reads its own class) end by themselves;
* ``class NAME``: a user class's sorted attribute dict (methods as references), bases and metaclass;
* ``attr MODULE.NAME``: a module-level value of a user module read as ``module.NAME``.

"User code" is code outside the standard library and installed distributions (site-packages): scripts,
``__main__``, notebooks, ``exec``-made functions, local modules, editable installs. Library code enters
by reference (module and qualified name); :func:`track`/:func:`untrack` widen or narrow the set.
Names of the root function's own module are written without the module prefix, so a script run as
``__main__`` and the same file imported as a module share keys.

A fingerprint is computed once per function and then *revalidated* on each use: every global lookup,
``__code__``/``__defaults__``/closure cell and user class dict it depended on is checked by identity,
and mutable values read (dicts, lists, objects) are re-hashed. Any difference recomputes it, so a global
rebound or mutated between two calls gives a new key, while a hit costs a few identity checks.

State a function writes is keyed by the name it is read under, not by content, for that function only:
a global its code rebinds (``global n; n += 1``) and the values memoize saw it modify while it ran (see
:func:`mark_state`). ``Fingerprint.by_name`` lists those components.
"""

from __future__ import annotations

import builtins
import dis
import enum
import functools
import os
import site
import sys
import sysconfig
import threading
import types
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fncache import _hasher

__all__ = [
    "Fingerprint",
    "code_digest",
    "fingerprint",
    "is_user_module",
    "track",
    "untrack",
]

_MISSING = object()
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"})
_GLOBAL_WRITES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})
# Class attributes that describe where or how a class was written, not what it does.
_CLASS_SKIP = frozenset({
    "__dict__", "__weakref__", "__module__", "__doc__", "__qualname__", "__firstlineno__",
    "__static_attributes__", "__orig_bases__", "__parameters__",
})
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), range, type(Ellipsis))


# ---------------------------------------------------------------------------------------------
# Which code is the user's
# ---------------------------------------------------------------------------------------------

def _library_roots() -> tuple[str, ...]:
    roots: set[str] = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(name)
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
            raise TypeError(f"{what}: expected module names, got {m!r}")
    for m in modules:
        _overrides[m] = user
    _user_module_cache.clear()
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


def _is_user_module(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        decided = _overrides.get(".".join(parts[:i]))
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

_code_cache: weakref.WeakKeyDictionary[types.CodeType, bytes] | dict[Any, bytes]
try:
    _code_cache = weakref.WeakKeyDictionary()
    _code_cache_lock = threading.Lock()
except TypeError:  # pragma: no cover
    _code_cache = {}


# ``from __future__`` imports set compiler flags on every code object of a module; they change how the
# source is compiled (already visible in the bytecode), not what the code does at run time.
_FUTURE_FLAGS = 0
for _name in __import__("__future__").all_feature_names:
    _FUTURE_FLAGS |= getattr(__import__("__future__"), _name).compiler_flag


def _used_const_indices(code: types.CodeType) -> set[int]:
    used = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_CONST", "RETURN_CONST", "LOAD_SMALL_INT"):
            if ins.arg is not None:
                used.add(ins.arg)
    return used


def _canonical_const(c: Any) -> Any:
    if isinstance(c, types.CodeType):
        return ("code", code_digest(c))
    if type(c) is tuple:
        return ("tuple",) + tuple(_canonical_const(x) for x in c)
    return c  # frozensets are canonicalised by the hasher; numbers and strings are themselves


def code_digest(code: types.CodeType) -> bytes:
    """Digest of what a code object does, without where it was written.

    Covers bytecode, exception table, constants (recursively, nested code included), names, local and
    free variable names, argument counts, flags and the function's name. Leaves out ``co_filename``,
    ``co_firstlineno``, the line table and the docstring (an unreferenced string first constant).
    """
    try:
        cached = _code_cache.get(code)
    except TypeError:  # pragma: no cover
        cached = None
    if cached is not None:
        return cached
    consts = list(code.co_consts)
    if consts and isinstance(consts[0], str) and 0 not in _used_const_indices(code):
        consts[0] = None  # the docstring: never loaded by the code itself
    parts = (
        "code",
        code.co_name,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags & ~_FUTURE_FLAGS,
        code.co_code,
        getattr(code, "co_exceptiontable", b""),
        tuple(_canonical_const(c) for c in consts),
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
    )
    d = _hasher.digest(parts)
    try:
        _code_cache[code] = d
    except TypeError:  # pragma: no cover
        pass
    return d


def _code_names(code: types.CodeType) -> tuple[list[str], set[str]]:
    """(global names read, in first-use order; every name used, attributes included)."""
    globals_read: dict[str, None] = {}
    all_names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        all_names.update(c.co_names)
        for ins in dis.get_instructions(c):
            if ins.opname in _GLOBAL_OPS:
                globals_read[ins.argval] = None
        stack.extend(k for k in reversed(c.co_consts) if isinstance(k, types.CodeType))
    return list(globals_read), all_names


_written_cache: weakref.WeakKeyDictionary[types.CodeType, frozenset[str]] = \
    weakref.WeakKeyDictionary()


def _globals_written(code: types.CodeType) -> frozenset[str]:
    """Global names the code (nested code included) rebinds or deletes: ``global n; n += 1``."""
    found = _written_cache.get(code)
    if found is None:
        names: set[str] = set()
        stack = [code]
        while stack:
            c = stack.pop()
            names.update(i.argval for i in dis.get_instructions(c) if i.opname in _GLOBAL_WRITES)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        found = _written_cache[code] = frozenset(names)
    return found


# ---------------------------------------------------------------------------------------------
# Fingerprints
# ---------------------------------------------------------------------------------------------

# The tokens of values keyed by name; ``Fingerprint.by_name`` finds them among the components.
_STATE = ("state",)  # modified by the function while it ran (mark_state)
_REBOUND = ("state", "rebound")  # rebound by the function's own code (STORE_GLOBAL)
_BY_NAME = {
    _hasher.digest(_STATE).hex(): "modified by the function",
    _hasher.digest(_REBOUND).hex(): "rebound by the function",
}

@dataclass
class Fingerprint:
    """A function's or class's fingerprint: its digest and the components it was made of.

    ``components`` maps a readable label (``"function normalize"``, ``"global THRESHOLD"``) to a hex
    digest; :meth:`valid` tells whether everything it was computed from is still the same.
    """

    digest: bytes
    components: dict[str, str]
    _dict_watches: tuple[tuple[Any, str, Any], ...] = ()
    _attr_watches: tuple[tuple[Any, str, Any], ...] = ()
    _len_watches: tuple[tuple[Any, int], ...] = ()
    _mutable: tuple[tuple[Any, bytes], ...] = ()
    cacheable: bool = True
    generation: int = 0
    root: str | None = None  # the module classes are named relative to (see _hasher.digest)
    # ids of mutable values reached only through a closure or a default of a function it covers:
    # other code reaches them only through these functions (see changes()).
    _private: frozenset[int] = frozenset()

    @property
    def hexdigest(self) -> str:
        return self.digest.hex()

    @property
    def by_name(self) -> dict[str, str]:
        """Components keyed by name rather than content, with why: ``{"global n": "rebound by the
        function"}`` (its code rebinds it) or ``"modified by the function"`` (seen changing while it
        ran). Changes to these values do not change the key."""
        return {label: _BY_NAME[d] for label, d in self.components.items() if d in _BY_NAME}

    def changed_state(self) -> list[Any]:
        """The mutable values read whose content differs from when this fingerprint was made."""
        out = []
        for value, d in self._mutable:
            try:
                if _hasher.digest(value, self.root) != d:
                    out.append(value)
            except Exception:
                out.append(value)
        return out

    def changes(self) -> tuple[bool, list[Any], bool]:
        """What differs from when this fingerprint was made: (a name it read was rebound, the
        mutable values whose content changed, all of those are reached only privately).

        "Privately" means through a closure variable or a default of a function it covers, never a
        global, module attribute or class attribute: another thread can modify such a value only by
        calling those functions (or by holding it already). Identity checks and re-hashes only.
        """
        rebound = any(m.get(n, _MISSING) is not o for m, n, o in self._dict_watches) \
            or any(getattr(w, a, _MISSING) is not o for w, a, o in self._attr_watches) \
            or any(len(m) != n for m, n in self._len_watches)
        changed = self.changed_state() if self._mutable else []
        return rebound, changed, all(id(v) in self._private for v in changed)

    def valid(self) -> bool:
        """Cheap check that no global, code, default, closure or class it read has changed."""
        if self.generation != _generation[0]:
            return False  # track()/untrack() changed what counts as user code since
        for mapping, name, obj in self._dict_watches:
            if mapping.get(name, _MISSING) is not obj:
                return False
        for owner, attr, obj in self._attr_watches:
            if getattr(owner, attr, _MISSING) is not obj:
                return False
        for mapping, n in self._len_watches:
            if len(mapping) != n:
                return False
        for value, d in self._mutable:
            try:
                if _hasher.digest(value, self.root) != d:
                    return False
            except Exception:
                return False
        return True


_fp_cache: weakref.WeakKeyDictionary[Any, Fingerprint] = weakref.WeakKeyDictionary()
_fp_cache_versions: weakref.WeakKeyDictionary[Any, Fingerprint] = weakref.WeakKeyDictionary()
_fp_lock = threading.Lock()
_in_progress = threading.local()


# Objects that a memoized function was seen to modify while it ran (a log list, a counter, a memo
# dict): state it writes, not an input, *for that function only*; another function that reads them
# still keys them by content. id(function) -> (function, {id: object}); both kept alive so that no
# id can be reused meanwhile.
_state: dict[int, tuple[Any, dict[int, Any]]] = {}


def mark_state(fn: Any, objs: Iterable[Any]) -> None:
    """Key these objects by the name they are read under, not by content, in ``fn``'s fingerprint.

    Called by memoize when a run of ``fn`` changed a mutable global, closure value or default and the
    change is attributed to ``fn`` itself: otherwise every call would see a new value and miss
    (``log.append(x)`` in a cached function).
    """
    fn = _unwrap_memoized(fn)
    with _fp_lock:
        owned = _state.setdefault(id(fn), (fn, {}))[1]
        for obj in objs:
            owned[id(obj)] = obj
        for cache in (_fp_cache, _fp_cache_versions):
            try:
                cache.pop(fn, None)
            except TypeError:  # not weakly referenceable: never cached
                pass


def _is_immutable(v: Any) -> bool:
    t = type(v)
    if t in _IMMUTABLE:
        return True
    if t is tuple or t is frozenset:
        return all(_is_immutable(x) for x in v)
    return False


def _wrapped_user_code(value: Any) -> Any:
    """The user function or class a library wrapper object stands for (``__wrapped__``), or None."""
    if isinstance(value, (types.FunctionType, type)) or not callable(value):
        return None
    try:
        inner = vars(value).get("__wrapped__")
    except TypeError:  # no __dict__
        return None
    if isinstance(inner, (types.FunctionType, type)) and not is_user_code(type(value)) \
            and is_user_code(inner):
        return inner
    return None


def _unwrap_memoized(obj: Any) -> Any:
    # A memoized function read as a helper is fingerprinted as the function it wraps.
    inner = getattr(type(obj), "__fncache_wraps__", None)
    if inner is not None:
        return inner(obj)
    return obj


class _Walk:
    """One fingerprint computation, rooted at a function or class."""

    def __init__(self, root: Any, versions: bool = False) -> None:
        self.root_module = getattr(root, "__module__", None) or ""
        self.components: dict[str, str] = {}
        self.labels: dict[int, str] = {}
        self.keep: list[Any] = []  # objects whose id() is in labels must stay alive meanwhile
        self.taken: set[str] = set()
        self.dict_watches: list[tuple[Any, str, Any]] = []
        self.attr_watches: list[tuple[Any, str, Any]] = []
        self.len_watches: list[tuple[Any, int]] = []
        self.mutable: list[tuple[Any, bytes]] = []
        self.versions = versions
        self.distributions: set[str] = set()
        self.cacheable = True
        found = _state.get(id(root))
        self.state: dict[int, Any] = found[1] if found is not None and found[0] is root else {}
        self.private: list[int] = []  # ids of mutable values read through closures and defaults

    # -- labels --------------------------------------------------------------------------------
    def _name(self, module: str | None, qualname: str) -> str:
        if not module or module == self.root_module:
            return qualname
        return f"{module}.{qualname}"

    def label(self, kind: str, obj: Any) -> tuple[str, bool]:
        """(label, new) for obj; distinct objects with one name get #2, #3 in visiting order."""
        found = self.labels.get(id(obj))
        if found is not None:
            return found, False
        base = f"{kind} {self._name(getattr(obj, '__module__', None), getattr(obj, '__qualname__', '?'))}"
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}#{n}"
        self.taken.add(name)
        self.labels[id(obj)] = name
        self.keep.append(obj)
        return name, True

    # -- values --------------------------------------------------------------------------------
    def reference(self, value: Any, code_names: set[str] | None = None) -> Any:
        """The token that stands for ``value`` where it is read; visits user code it reaches."""
        if self.state and id(value) in self.state:
            return _STATE  # written by this function: keyed by where it is read, not content
        value = _unwrap_memoized(value)
        if isinstance(value, types.FunctionType):
            if is_user_code(value):
                return ("function", self.visit_function(value))
            return self.library_ref(value)
        if isinstance(value, type):
            if is_user_code(value):
                return ("class", self.visit_class(value))
            return self.library_ref(value)
        if isinstance(value, types.ModuleType):
            if is_user_module(value.__name__):
                if code_names:
                    self.visit_module_attrs(value, code_names)
            elif self.versions:
                self.distributions.add(value.__name__.split(".")[0])
            return ("module", value.__name__)
        if isinstance(value, types.BuiltinFunctionType) and (
            value.__self__ is None or isinstance(value.__self__, types.ModuleType)
        ):
            return ("builtin", getattr(value, "__module__", None), value.__qualname__)
        wrapped = _wrapped_user_code(value)
        if wrapped is not None:
            # functools.lru_cache, numba.njit and the like pickle by name: follow what they wrap.
            return ("wrapper", self.library_ref(type(value)), self.reference(wrapped, code_names))
        d = _hasher.digest(value)
        if not _is_immutable(value):
            self.mutable.append((value, d))
        return ("value", d)

    def private_reference(self, value: Any, code_names: set[str] | None = None) -> Any:
        """:meth:`reference` for a closure value or a default (see ``Fingerprint.changes``)."""
        n = len(self.mutable)
        token = self.reference(value, code_names)
        if len(self.mutable) > n and self.mutable[n][0] is value:
            self.private.append(id(value))
        return token

    def library_ref(self, obj: Any) -> Any:
        module = getattr(obj, "__module__", None)
        if self.versions and module:
            self.distributions.add(module.split(".")[0])
        return ("ref", module, getattr(obj, "__qualname__", None))

    def visit_module_attrs(self, mod: types.ModuleType, names: set[str]) -> None:
        md = vars(mod)
        for attr in sorted(names):
            v = md.get(attr, _MISSING)
            if v is _MISSING:
                continue
            self.dict_watches.append((md, attr, v))
            label = f"attr {mod.__name__}.{attr}"
            if label not in self.components:
                self.components[label] = ""  # placeholder: ends cycles through the module
                # The code's names reach through: ``pkg.sub.func`` follows ``sub`` to ``func``.
                self.components[label] = _hasher.digest(self.reference(v, names)).hex()

    # -- functions and classes -----------------------------------------------------------------
    def visit_function(self, fn: types.FunctionType) -> str:
        label, new = self.label("function", fn)
        if not new:
            return label
        code = fn.__code__
        self.attr_watches.append((fn, "__code__", code))
        self.attr_watches.append((fn, "__defaults__", fn.__defaults__))
        self.attr_watches.append((fn, "__kwdefaults__", fn.__kwdefaults__))
        # Element by element, so a mutable default the function writes to (a memo dict) can be told
        # apart from the others.
        defaults = tuple(self.private_reference(v) for v in fn.__defaults__ or ())
        kwdefaults = tuple((k, self.private_reference(v))
                           for k, v in (fn.__kwdefaults__ or {}).items())
        self.components[label] = _hasher.digest(
            (code_digest(code), fn.__qualname__, defaults, kwdefaults)
        ).hex()
        qual = label.split(" ", 1)[1]
        names_read, all_names = _code_names(code)
        for var, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell: a name assigned later in the enclosing scope
                value = _MISSING
            self.attr_watches.append((cell, "cell_contents", value))
            token = ("unbound",) if value is _MISSING else self.private_reference(value, all_names)
            self.components[f"closure {qual}.{var}"] = _hasher.digest(token).hex()
        g = fn.__globals__
        b = vars(builtins)
        written = _globals_written(code)
        for name in names_read:
            if name in written and not isinstance(
                    g.get(name), (types.FunctionType, type, types.ModuleType)):
                # Rebound by this function's own code (a call counter): state it writes, keyed by
                # name and not watched, or no call would hit again. A by-value read of the same
                # global elsewhere in the walk takes precedence (it keeps the value in the key), and
                # code (a function, class or module bound to it) is followed as usual.
                glabel = f"global {self._name(g.get('__name__'), name)}"
                self.components.setdefault(glabel, _hasher.digest(_REBOUND).hex())
                continue
            value = g.get(name, _MISSING)
            self.dict_watches.append((g, name, value))
            if value is _MISSING:
                if name in b:
                    continue  # a builtin; the Python version is part of every key
                token = ("missing",)
            else:
                token = self.reference(value, all_names)
            glabel = f"global {self._name(g.get('__name__'), name)}"
            self.components[glabel] = _hasher.digest(token).hex()
        return label

    def visit_class(self, cls: type) -> str:
        label, new = self.label("class", cls)
        if not new:
            return label
        d = cls.__dict__
        self.len_watches.append((d, len(d)))
        items = []
        is_enum = isinstance(cls, enum.EnumMeta)
        if is_enum:
            # An enum's members cannot change after creation; its bookkeeping maps (_member_map_ and
            # friends) are derived from them, so the members stand for all of it, hashed once.
            members = tuple((n, m._value_) for n, m in cls.__members__.items())  # type: ignore[attr-defined]
            items.append(("__members__", ("value", _hasher.digest(members))))
        for name in sorted(d):
            if name in _CLASS_SKIP:
                continue
            if is_enum and (name in cls.__members__  # type: ignore[attr-defined]
                            or (name[:1] == "_" == name[-1:])):
                continue
            value = d[name]
            self.dict_watches.append((d, name, value))
            items.append((name, self.class_item(value)))
        bases = tuple(self.reference(b) for b in cls.__bases__)
        meta = self.reference(type(cls))
        self.components[label] = _hasher.digest((cls.__qualname__, bases, meta, tuple(items))).hex()
        return label

    def class_item(self, value: Any) -> Any:
        if isinstance(value, (classmethod, staticmethod)):
            return (type(value).__name__, self.reference(value.__func__))
        if isinstance(value, property):
            return ("property",) + tuple(
                self.reference(f) if f is not None else None for f in (value.fget, value.fset, value.fdel)
            )
        if isinstance(value, (types.FunctionType, type)):
            return self.reference(value)
        return self.reference(value)

    def result(self) -> Fingerprint:
        if self.versions and self.distributions:
            # One component per distribution, so a miss can say which one moved.
            for dist, version in _versions(self.distributions):
                self.components[f"version {dist}"] = _hasher.digest(version).hex()
        comps = dict(sorted(self.components.items()))
        private: frozenset[int] = frozenset()
        if self.private:
            # A value also reached through a global or an attribute is not private.
            reads: dict[int, int] = {}
            for v, _ in self.mutable:
                reads[id(v)] = reads.get(id(v), 0) + 1
            private = frozenset(i for i in self.private if reads[i] == self.private.count(i))
        return Fingerprint(
            digest=_hasher.digest(("fncache.fingerprint", tuple(comps.items()))),
            components=comps,
            _dict_watches=tuple(self.dict_watches),
            _attr_watches=tuple(self.attr_watches),
            _len_watches=tuple(self.len_watches),
            _mutable=tuple(self.mutable),
            cacheable=self.cacheable,
            generation=_generation[0],
            root=self.root_module,
            _private=private,
        )


@functools.lru_cache(maxsize=1)
def _packages_distributions() -> Any:
    # Scans every installed distribution's metadata (slow): once per process. Versions themselves
    # are read on each computation, so an upgrade in a running notebook is still seen.
    import importlib.metadata as md

    return md.packages_distributions()


def _versions(top_level: Iterable[str]) -> tuple[tuple[str, str], ...]:
    import importlib.metadata as md

    mapping = _packages_distributions()
    out = set()
    for name in top_level:
        for dist in mapping.get(name, ()):
            try:
                out.add((dist, md.version(dist)))
            except md.PackageNotFoundError:  # pragma: no cover
                pass
    return tuple(sorted(out))


def is_user_code(obj: Any) -> bool:
    """Whether a function or class is fingerprinted by value.

    A function whose globals are not its module's dict was rebuilt by value (cloudpickle, a worker
    process): it is the user's whatever its ``__module__`` says, or a worker whose ``__main__`` is a
    library's would key it by name alone.
    """
    module = getattr(obj, "__module__", None)
    if is_user_module(module):
        return True
    if isinstance(obj, types.FunctionType):
        mod = sys.modules.get(module or "")
        return mod is None or obj.__globals__ is not getattr(mod, "__dict__", None)
    return False


def _library_fingerprint(obj: Any) -> Fingerprint:
    token = ("ref", getattr(obj, "__module__", None), getattr(obj, "__qualname__", None))
    return Fingerprint(digest=_hasher.digest(token), components={}, generation=_generation[0])


def fingerprint(obj: Callable[..., Any] | type, *, versions: bool = False) -> Fingerprint:
    """The fingerprint of a function or class (user code by value, library code by reference).

    Cached per object and revalidated on each use (see the module docstring). ``versions=True`` adds
    the versions of the installed distributions whose code the function reaches.
    """
    obj = _unwrap_memoized(obj)
    cache = _fp_cache_versions if versions else _fp_cache
    try:
        hit = cache.get(obj)
    except TypeError:  # unhashable or not weakly referenceable: compute every time
        hit = None
    if hit is not None:
        validating: set[int] = _validating()
        if id(obj) in validating:
            # Asked again while checking this very fingerprint (a mutable value it read refers back
            # to it): the answer under check is the one to use, or the check would never end.
            return hit
        validating.add(id(obj))
        try:
            ok = hit.valid()
        finally:
            validating.discard(id(obj))
        if ok:
            return hit
    if isinstance(obj, (types.FunctionType, type)) and not is_user_code(obj):
        fp = _library_fingerprint(obj)
    else:
        fp = _compute(obj, versions)
        if not fp.cacheable:
            return fp
    try:
        with _fp_lock:
            cache[obj] = fp
    except TypeError:
        pass
    return fp


def _validating() -> set[int]:
    try:
        return _in_progress.validating  # type: ignore[no-any-return]
    except AttributeError:
        _in_progress.validating = set()
        return _in_progress.validating  # type: ignore[no-any-return]


def _compute(obj: Any, versions: bool) -> Fingerprint:
    stack: list[Any] = getattr(_in_progress, "stack", None) or []
    _in_progress.stack = stack
    for depth, o in enumerate(stack):
        if o is obj:
            # Reached again while its own fingerprint is being computed (a class whose instances
            # are among its attributes, a function that reads a dict holding itself): a reference
            # by name ends the cycle. A result containing such a token is deterministic only if the
            # token points back at its own root; otherwise it depends on where the walk started and
            # is not cached.
            _in_progress.cycles.add(depth)
            return Fingerprint(
                digest=_hasher.digest(("cycle", getattr(obj, "__module__", None),
                                       getattr(obj, "__qualname__", None))),
                components={},
                cacheable=False,
                generation=_generation[0],
            )
    depth = len(stack)
    stack.append(obj)
    outer = getattr(_in_progress, "cycles", None)
    _in_progress.cycles = set()
    # Values hashed during the walk name classes the way its labels do (relative to its root).
    outer_root = _hasher.relative_to(getattr(obj, "__module__", None) or "")
    try:
        walk = _Walk(obj, versions=versions)
        if isinstance(obj, type):
            walk.visit_class(obj)
        elif isinstance(obj, types.FunctionType):
            walk.visit_function(obj)
        elif callable(obj):
            # A callable object (functools.partial, an lru_cache wrapper, an instance with
            # __call__): by content, following the user code it holds.
            label = f"callable {getattr(obj, '__qualname__', type(obj).__qualname__)}"
            walk.components[label] = _hasher.digest(walk.reference(obj)).hex()
        else:
            raise TypeError(f"fingerprint: expected a function or class, got {type(obj).__name__}")
        fp = walk.result()
    finally:
        _hasher.relative_to(outer_root)
        stack.pop()
        cycles = _in_progress.cycles
        cycles.discard(depth)
        _in_progress.cycles = (outer or set()) | cycles
    fp.cacheable = not cycles
    return fp
