"""The walk: one fingerprint computation, from a root function or class through what it reaches.

Each user function, class, global, closure variable, module attribute and body import it reaches becomes a
named component with a digest (see :mod:`fncache.code.fingerprint` for the labels). Along the way the walk
records what to watch (dict entries and attributes by identity, mutable values by content) so the
fingerprint can later be revalidated with identity checks alone.
"""

from __future__ import annotations

import builtins
import functools
import logging
import sys
import time
import types
from typing import Any

from fncache._errors import UnhashableArgument
from fncache.code import classes as _classes
from fncache.code.classify import code_builtin, is_immutable, is_infrastructure, is_user_object, shown
from fncache.code.digest import (
    Import,
    absolute_import,
    code_digest,
    code_names,
    globals_written,
    names_passed_on,
)
from fncache.code.state import BY_NAME, IGNORED, MISSING, REBOUND, SLOW_REHASH, STATE
from fncache.code.usercode import (
    compile_options,
    imported,
    is_user_code,
    is_user_module,
    library_location,
    proxy_parts,
    read_through,
    submodule,
    unwrap_memoized,
    user_accessors,
    whole_module,
    wrapped_user_code,
)
from fncache.values import hasher as _hasher

log = logging.getLogger("fncache")

_SUGGESTION = ("key it with fncache.ref(value, token) or fncache.register(type, fn), leave it out "
               "of the class's __getstate__, or pin the function's code with version=")


class _UnkeyableValue(UnhashableArgument):
    """A value the code reads cannot be keyed; the message names where it is read."""


_logged_by_name: set[str] = set()



def _unique(base: str, taken: set[str]) -> str:
    """``base``, or ``base#2``, ``base#3``... in visiting order: the first not taken (now taken)."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}#{n}"
    taken.add(name)
    return name


class Walk:
    """One fingerprint computation, rooted at a function or class."""

    def __init__(self, root: Any, versions: bool = False, state: dict[int, Any] | None = None,
                 ignore_globals: frozenset[str] = frozenset()) -> None:
        self.root_module = getattr(root, "__module__", None) or ""
        self.root_id, self.root_again = id(root), False  # reached again? (see fingerprint._result)
        self.components: dict[str, str] = {}
        self.labels: dict[int, str] = {}
        self.keep: list[Any] = []  # objects whose id() is in labels must stay alive meanwhile
        self.taken: set[str] = set()
        self.namespaces: dict[int, str] = {}
        self.module_names: dict[int, set[str]] = {}  # per user module: the names visited,
        self.module_absent: dict[int, set[str]] = {}  # those it did not define then,
        self.growth_watch_at: dict[int, int] = {}  # and its length watch (watch_growth)
        self.namespace_names: set[str] = set()
        self.dict_watches: list[tuple[Any, str, Any]] = []
        self.attr_watches: list[tuple[Any, str, Any]] = []
        self.len_watches: list[tuple[Any, int]] = []
        self.mutable: list[tuple[Any, bytes]] = []
        self.mutable_where: list[str] = []  # where each of ``mutable`` was read ("global CALLS")
        self.ignore_globals = ignore_globals  # globals left out by name (memoize's option)
        self.slow: list[tuple[str, Any]] = []  # (where, value) of mutable values slow to hash
        self.versions = versions
        self.distributions: set[str] = set()
        self.cacheable = True
        self.state: dict[int, Any] = state or {}  # what mark_state() recorded for this root
        self.private: list[int] = []  # ids of mutable values read through closures and defaults
        self.by_name: dict[str, None] = {}
        self.named: dict[str, tuple[str, str]] = {}  # label -> (why keyed by name, its digest)
        # For explain: the user functions visited by label (their source is kept with each entry),
        # how each global read reads to a person (a short repr, else its type, size and digest).
        self.functions: dict[str, types.FunctionType] = {}
        self.shown: dict[str, str] = {}
        self.unpicklable_values: list[Any] = []
        self.hooks: set[int] = set()  # ids of the hooks being keyed (see classes.hook_token)
        self.where = "the function"
        # A root function's namespace is named first: the one written without a prefix. A class's
        # is whichever its methods read first (after cloudpickle they hold a copy of their module's
        # globals, not the module the class claims).
        self.root_namespace = self.root_module
        if isinstance(root, types.FunctionType):
            self.root_namespace = self.namespace(root.__globals__)

    # -- labels --------------------------------------------------------------------------------
    def _name(self, module: str | None, qualname: str) -> str:
        if not module or module == self.root_module:
            return qualname
        return f"{module}.{qualname}"

    def label(self, kind: str, obj: Any) -> tuple[str, bool]:
        """(label, new) for obj; distinct objects with one name get #2, #3 in visiting order."""
        found = self.labels.get(id(obj))
        if found is not None:
            self.root_again = self.root_again or id(obj) == self.root_id
            return found, False
        base = f"{kind} {self._name(getattr(obj, '__module__', None), getattr(obj, '__qualname__', '?'))}"
        name = _unique(base, self.taken)
        self.labels[id(obj)] = name
        self.keep.append(obj)
        return name, True

    def namespace(self, mapping: dict[str, Any]) -> str:
        """A module namespace's name in labels: its ``__name__``, made unique per namespace object.

        Two ``runpy.run_path`` namespaces are both ``<run_path>``: the second one seen is
        ``<run_path>#2``, so neither's globals overwrite the other's in the key. Visiting order is
        deterministic, so the names are the same in every process.
        """
        found = self.namespaces.get(id(mapping))
        if found is not None:
            return found
        base = mapping.get("__name__")
        name = _unique(base if isinstance(base, str) else "?", self.namespace_names)
        self.namespaces[id(mapping)] = name
        self.keep.append(mapping)
        return name

    def global_label(self, g: dict[str, Any], name: str) -> str:
        ns = self.namespace(g)
        return f"global {name}" if ns == self.root_namespace else f"global {ns}.{name}"

    # -- values --------------------------------------------------------------------------------
    def read(self, value: Any, where: str, code_names: set[str] | None = None) -> Any:
        """:meth:`reference` of a value read at ``where`` (named in errors and by-name reports)."""
        outer, self.where = self.where, where
        try:
            return self.reference(value, code_names)
        finally:
            self.where = outer

    def reference(self, value: Any, code_names: set[str] | None = None) -> Any:
        """The token that stands for ``value`` where it is read; visits user code it reaches."""
        if self.state and id(value) in self.state:
            # Written by this function: keyed by where it is read and its first value, not content.
            state = STATE + (self.state[id(value)][1],)
            self.named[self.where] = (BY_NAME[STATE], _hasher.digest(state).hex())
            return state
        token = self.wrapping(value, code_names)
        if token is not None:
            return token
        if isinstance(value, (types.FunctionType, type, types.ModuleType)):
            return self.code_reference(value, code_names)
        if isinstance(value, types.BuiltinFunctionType) and \
                (value.__self__ is None or isinstance(value.__self__, types.ModuleType)):
            return ("builtin", getattr(value, "__module__", None), value.__qualname__)
        wrapped = wrapped_user_code(value)
        if wrapped is not None:
            # functools.lru_cache, numba.njit and the like pickle by name: follow what they wrap.
            token = ("wrapper", self.library_ref(type(value)), self.reference(wrapped, code_names))
            token += () if (options := compile_options(value)) is None else (options,)
            return _classes.with_attributes(self, value, wrapped, token)
        return self.value_reference(value)

    def wrapping(self, value: Any, code_names: set[str] | None) -> Any:
        """The token of a memoized function (the one it wraps, and what is set on it) or of a proxy
        that passes for what it wraps (``isinstance``, ``__code__``: see ``proxy_parts``), with what
        it was made with; None for anything else."""
        inner = unwrap_memoized(value)
        if inner is not value:
            return _classes.with_attributes(self, value, inner, self.reference(inner, code_names))
        parts = proxy_parts(value)
        if parts:  # its type by its code where it is the user's (a subclass overriding __call__)
            return ("proxy", self.reference(type(value)),
                    tuple((name, self.reference(part)) for name, part in parts))
        return None

    def name_keyed(self, label: str, kind: tuple[str, ...], token: Any) -> None:
        """Key what is read at ``label`` by name (``token``), and say so (``Fingerprint.by_name``:
        unless a read by value of the same name replaces the component)."""
        d = _hasher.digest(token).hex()
        self.components[label] = d
        self.named[label] = (BY_NAME[kind], d)

    def code_reference(self, value: types.FunctionType | type | types.ModuleType,
                       code_names: set[str] | None) -> Any:
        """The token of a function, class or module: user code visited, library code by name."""
        if isinstance(value, types.FunctionType):
            if is_user_code(value):
                return ("function", self.visit_function(value))
            return self.library_function(value)
        if isinstance(value, type):
            if is_user_code(value):
                return ("class", self.visit_class(value))
            return self.library_ref(value)
        if is_user_module(value.__name__):
            # Read through its attributes by the code (``util.helper``): the names the code reads.
            # Reached as a value (a default, an argument, an entry of a container, an attribute) or
            # passed on: whatever reads it may read any name, so every one counts.
            if code_names:
                self.visit_module_attrs(value, code_names)
            else:
                self.visit_module_attrs(value, whole_module(value), whole=True)
        else:
            if code_names:
                self.visit_library_attrs(value, code_names)
            if self.versions:
                self.distributions.add(value.__name__.split(".")[0])
        return ("module", value.__name__)

    def value_reference(self, value: Any) -> Any:
        """The token of a value by its content; a mutable one is watched (re-hashed each call)."""
        try:
            start = time.perf_counter()
            d = _hasher.digest(value)
            spent = time.perf_counter() - start
        except UnhashableArgument as e:
            return self.unpicklable(value, e)
        if not is_immutable(value):
            self.mutable.append((value, d))
            self.mutable_where.append(self.where)
            if spent > SLOW_REHASH:  # re-hashed on every call: the fingerprint reports it
                self.slow.append((self.where, value))
        return ("value", d)

    def private_reference(self, value: Any, where: str, code_names: set[str] | None = None) -> Any:
        """:meth:`read` for a closure value or a default (see ``Fingerprint.changes``)."""
        n = len(self.mutable)
        token = self.read(value, where, code_names)
        if len(self.mutable) > n and self.mutable[n][0] is value:
            self.private.append(id(value))
        return token

    def unpicklable(self, value: Any, error: UnhashableArgument) -> Any:
        """Infrastructure that cannot be pickled is keyed by type and name; anything else raises."""
        if isinstance(error, _UnkeyableValue):
            raise error  # already names the place it was read
        t = type(value)
        tname = f"{t.__module__}.{t.__qualname__}"
        if not is_infrastructure(value):
            raise _UnkeyableValue(f"{self.where} cannot be hashed: {error}; {_SUGGESTION}",
                                  type_name=t.__qualname__) from error
        report = f"{self.where} ({tname})"
        self.by_name[report] = None
        self.unpicklable_values.append(value)
        if report not in _logged_by_name:
            _logged_by_name.add(report)
            log.info("%s cannot be pickled: keyed by its type and name, not its content", report)
        return ("by-name", self.library_ref(t), _classes.user_code_held(self, value))

    def library_ref(self, obj: Any) -> Any:
        module = getattr(obj, "__module__", None)
        if self.versions and module:
            self.distributions.add(module.split(".")[0])
        return ("ref", module, getattr(obj, "__qualname__", None))

    def library_function(self, fn: types.FunctionType) -> Any:
        """A library function by name, plus the user code it holds (a singledispatch registry) and
        what a factory made it with (see ``classes.made_with``)."""
        ref = self.library_ref(fn)
        held = _classes.user_code_held(self, fn) + _classes.made_with(self, fn)
        return ("wrapper", ref, held) if held else ref

    def mapping(self, m: Any) -> Any:
        """A dict of functions or classes (a dispatch registry), item by item, watched by identity."""
        self.len_watches.append((m, len(m)))
        items = []
        for k, v in m.items():
            self.dict_watches.append((m, k, v))
            items.append((self.reference(k), _classes.hook_token(self, v)))
        return ("mapping", tuple(items))

    def attribute(self, value: Any, where: str) -> Any:
        """A function attribute: a registry of user code item by item, anything else as a value.

        A method bound to a library object (singledispatch's ``_clear_cache``, a cache's ``clear``)
        is a capability, not data: by name, or the content of the cache behind it would count.
        """
        if isinstance(value, (types.MethodType, types.BuiltinMethodType)):
            owner = value.__self__
            if is_infrastructure(owner) and not isinstance(owner, (type, types.ModuleType)) \
                    and not is_user_object(getattr(value, "__func__", None)):
                return ("bound", self.library_ref(type(owner)), value.__name__)
        if isinstance(value, (dict, types.MappingProxyType)) and any(
            is_user_object(k) or is_user_object(v) for k, v in value.items()
        ):
            outer, self.where = self.where, where
            try:
                return self.mapping(value)
            finally:
                self.where = outer
        return self.read(value, where)

    def visit_module_attrs(self, mod: types.ModuleType, names: set[str], whole: bool = False) -> None:
        """The attributes ``names`` of user module ``mod``, each a component, watched. ``whole``:
        ``names`` are all it defines (see :func:`whole_module`): a name defined later counts
        too (see :meth:`visit_whole_attr` for its submodules, imports and unpicklable values)."""
        md = vars(mod)
        if whole:
            self.len_watches.append((md, len(md)))
        ns = self.namespace(md)
        if "__getattr__" in md and "__path__" in md:
            # A package whose ``__getattr__`` imports submodules lazily: ``pkg.sub.func`` must count
            # on the first call too, before anything has imported ``sub``.
            for attr in sorted(names - md.keys()):
                submodule(mod.__name__, attr)
        # One module is reached from several pieces of code, each reading other names through it
        # (``from .sub import h`` here, ``from pkg import sub; sub.m()`` there): every name set is
        # visited, and a set already covered ends the visit (which also ends cycles of imports),
        # unless a name missing then is defined now (a submodule a body import loaded meanwhile).
        seen = self.module_names.setdefault(id(mod), set())
        absent = self.module_absent.setdefault(id(mod), set())
        if names <= seen and absent.isdisjoint(names & md.keys()):
            return
        seen |= names
        self.keep.append(mod)
        size = len(md)  # before the visit, which may import a submodule into it
        visit = functools.partial(self.visit_whole_attr, mod) if whole else self.visit_attr
        missing = [attr for attr in sorted(names) if not visit(md, ns, attr, names)]
        absent.difference_update(names)
        if missing:
            absent.update(missing)
            self.watch_growth(md, size)
        if type(mod) is not types.ModuleType and is_user_object(type(mod)):
            # ``sys.modules[__name__].__class__ = Settings``: its class's properties serve attributes.
            self.attr_watches.append((mod, "__class__", type(mod)))
            self.read_once(f"attr {ns}.__class__", type(mod))
        if missing:
            self.visit_module_getattr(md, ns, missing, names)

    def watch_growth(self, md: dict[str, Any], size: int) -> None:
        """A name a module did not define may be defined later (a submodule imported later in the
        walk, or after it): its length as first seen is watched, once per module (a walk that
        made it grow is made again: ``fingerprint._compute``)."""
        at = self.growth_watch_at.setdefault(id(md), len(self.len_watches))  # (only appended to)
        if at == len(self.len_watches) or size < self.len_watches[at][1]:
            self.len_watches[at:at + 1] = [(md, size)]

    def visit_module_getattr(self, md: dict[str, Any], ns: str, missing: list[str],
                             names: set[str]) -> None:
        """Names a module does not define may be served by its ``__getattr__`` (PEP 562): its code
        (and what it reads) counts, and defining the name later changes the answer."""
        hook = md.get("__getattr__", MISSING)
        self.dict_watches.append((md, "__getattr__", hook))
        if hook is not MISSING:
            self.dict_watches.extend((md, attr, MISSING) for attr in missing)
            self.read_once(f"attr {ns}.__getattr__", hook, names)

    def visit_attr(self, md: dict[str, Any], ns: str, attr: str, names: set[str] | None) -> bool:
        """The component of ``module.attr`` read by the code, watched; False if it is not defined."""
        v = md.get(attr, MISSING)
        if v is MISSING:
            return False
        self.dict_watches.append((md, attr, v))
        label = f"attr {ns}.{attr}"
        # The code's names reach through: ``pkg.sub.func`` follows ``sub`` to ``func``.
        if not self.read_once(label, v, names) and isinstance(v, types.ModuleType):
            self.read(v, label, names)  # a submodule seen before: these names read on through it
        return True

    def visit_whole_attr(self, mod: types.ModuleType, md: dict[str, Any], ns: str, attr: str,
                         names: set[str]) -> bool:
        """:meth:`visit_attr` for a module counted whole (reached as a value). A module it imported
        (``import settings``) is keyed by name, not walked whole in turn as its own submodules are
        (``pkg.tools``); a value that cannot be keyed is keyed by type and name (``doctor``)."""
        v = md[attr]
        if isinstance(v, types.ModuleType) and not v.__name__.startswith(mod.__name__ + "."):
            self.dict_watches.append((md, attr, v))
            self.components.setdefault(f"attr {ns}.{attr}", _hasher.digest(("module", v.__name__)).hex())
            return True
        try:
            return self.visit_attr(md, ns, attr, None)
        except UnhashableArgument:
            label = f"attr {ns}.{attr}"
            report = f"{label} ({type(v).__module__}.{type(v).__qualname__})"
            self.by_name[report] = None
            self.components[label] = _hasher.digest(("by-name", self.library_ref(type(v)))).hex()
            return True

    def read_once(self, label: str, value: Any, names: set[str] | None = None) -> bool:
        """Make component ``label``, the digest of ``value`` read there, unless it exists; whether
        it was made. A placeholder is set first: it ends cycles through a module."""
        if label in self.components:
            return False
        self.components[label] = ""
        self.components[label] = _hasher.digest(self.read(value, label, names)).hex()
        return True

    def visit_library_attrs(self, mod: types.ModuleType, names: set[str]) -> None:
        """Library functions read as ``lib.func`` that hold user code (a dispatch registry)."""
        md = vars(mod)
        for attr in sorted(names):
            v = md.get(attr)
            if not isinstance(v, types.FunctionType) or not v.__dict__:
                continue
            self.dict_watches.append((md, attr, v))
            token = self.library_function(v)
            if token[0] == "wrapper":
                self.components[f"attr {mod.__name__}.{attr}"] = _hasher.digest(token).hex()

    def visit_import(self, imp: Import, g: dict[str, Any], names: set[str]) -> None:
        """An import in a function body, followed as a module-level import would be."""
        name = absolute_import(imp, g)
        if name is None:
            return  # a relative import outside a package fails when the function runs
        label = f"import {name}"
        if label in self.components:
            self.import_again(imp, name, names)
            return
        self.components[label] = ""
        if self.library_import(label, name):
            return
        mod = imported(name)
        self.dict_watches.append((sys.modules, name, MISSING if mod is None else mod))
        if mod is None:
            self.components[label] = _hasher.digest(("missing-module", name)).hex()
            return
        self.components[label] = _hasher.digest(self.follow_import(imp, name, mod, names)).hex()

    def follow_import(self, imp: Import, name: str, mod: Any, names: set[str]) -> tuple[Any, ...]:
        """The submodules the import loads, and the names the code reads through the module."""
        if hasattr(mod, "__path__"):
            self.watch_submodules(mod, name, imp.fromlist)
        token = [self.reference(mod, names)]
        if not imp.fromlist and "." in name:
            # ``import a.b.c`` binds ``a``: the code reads on through it.
            token.append(self.reference(sys.modules.get(name.partition(".")[0]), names))
        return tuple(token)

    def import_again(self, imp: Import, name: str, names: set[str]) -> None:
        """A user module imported again by other code (``from pkg import b`` here, ``from pkg import
        a`` there): what this import loads and the names its code reads through it count too."""
        mod = sys.modules.get(name)
        if isinstance(mod, types.ModuleType) and is_user_module(name):
            self.follow_import(imp, name, mod, names)

    def library_import(self, label: str, name: str) -> bool:
        """Key an import of library module ``name`` by name, imported or not (the same token before
        and after the function first runs); whether it is one."""
        mod = sys.modules.get(name)
        library = (not is_user_module(name)) if mod is not None else library_location(name)
        if not library:
            return False
        if self.versions:
            self.distributions.add(name.split(".")[0])
        self.components[label] = _hasher.digest(("module", name)).hex()
        return True

    def watch_submodules(self, mod: types.ModuleType, name: str, fromlist: Any) -> None:
        """``from . import sub``: the submodules of package ``mod`` the import itself loads."""
        for item in fromlist:
            if item != "*" and item not in vars(mod):
                sub = imported(f"{name}.{item}")
                self.dict_watches.append((sys.modules, f"{name}.{item}", MISSING if sub is None else sub))

    # -- functions and classes -----------------------------------------------------------------
    def visit_function(self, fn: types.FunctionType) -> str:
        label, new = self.label("function", fn)
        if not new:
            return label
        code = fn.__code__
        qual = label.split(" ", 1)[1]
        self.functions[label] = fn
        self.attr_watches.extend(((fn, "__code__", code), (fn, "__defaults__", fn.__defaults__),
                                  (fn, "__kwdefaults__", fn.__kwdefaults__)))
        kw = fn.__kwdefaults__ or {}  # each item watched too: ``f.__kwdefaults__["k"] = 2`` in place
        self.dict_watches.extend(zip([fn.__kwdefaults__] * len(kw), kw, kw.values(), strict=True))
        # Element by element: a mutable default the function writes to (a memo dict) stands apart.
        defaults = tuple(self.private_reference(v, f"a default of {qual}") for v in fn.__defaults__ or ())
        kwdefaults = tuple((k, self.private_reference(v, f"default {qual}.{k}")) for k, v in kw.items())
        attrs = self.function_attrs(fn, qual)
        self.components[label] = _hasher.digest(
            (code_digest(code), fn.__qualname__, defaults, kwdefaults)
            + ((tuple(attrs),) if attrs else ()) + self.annotations(fn)
        ).hex()
        names_read, all_names, imports, texts = code_names(code)
        passed = names_passed_on(code)
        self.visit_closure(fn, qual, all_names, passed)
        g = fn.__globals__
        _classes.string_annotations(self, g, dict(zip(texts, texts, strict=True)))  # nested annotations
        written = globals_written(code)
        for name in names_read:
            self.visit_global(g, name, written, read_through(g.get(name), name, passed, all_names))
        for imp in imports:
            self.visit_import(imp, g, all_names)
        _classes.random_methods(self, g, code)  # random.randint(...): the generator's state
        for d, attr, cls, where in user_accessors(all_names):  # df.geo.area(): pandas' registry
            self.dict_watches.append((d, attr, d[attr]))
            self.read_once(where, cls)
        return label

    def function_attrs(self, fn: types.FunctionType, qual: str) -> list[tuple[str, Any]]:
        """The tokens of a function's attributes (``helper.scale = 2``, a dispatch registry,
        ``__wrapped__``): part of what it is; setting one later changes its dict's size or items."""
        fd = fn.__dict__
        self.len_watches.append((fd, len(fd)))
        attrs = []
        for name in sorted(fd):
            value = fd[name]
            self.dict_watches.append((fd, name, value))
            attrs.append((name, self.attribute(value, f"attribute {qual}.{name}")))
        return attrs

    def annotations(self, fn: types.FunctionType) -> tuple[Any, ...]:
        """The part of a function's component for its annotations (code may act on them:
        ``get_type_hints``, ``__annotations__``) and type parameters, by value; none for none.
        Watched for a rebinding only (an identity check per hit), not for entries changed in place."""
        params = _classes.type_params(self, fn)  # (``def f[T: Bound]``: read by reflection)
        try:
            found = fn.__annotations__
        except Exception as e:  # annotations that cannot be evaluated (deferred ones, 3.14)
            return (("__annotations__", ("unevaluated", type(e).__name__)),) + params
        self.attr_watches.append((fn, "__annotations__", found))
        if not found or not isinstance(found, dict):
            return params
        _classes.string_annotations(self, fn.__globals__, found)
        token = _classes.safe_token(dict(found))
        if token[0] != "value":  # an annotation no pickle takes (a lock): the others by value
            token = tuple((k, _classes.safe_token(v)) for k, v in found.items())
        return (("__annotations__", token),) + params

    def visit_closure(self, fn: types.FunctionType, qual: str, all_names: set[str],
                      passed: frozenset[str] = frozenset()) -> None:
        """One component per closure variable of ``fn``, each watched (``passed``: see
        :func:`_read_through`)."""
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell: a name assigned later in the enclosing scope
                value = MISSING
            self.attr_watches.append((cell, "cell_contents", value))
            clabel = f"closure {qual}.{var}"
            token = ("unbound",) if value is MISSING else self.private_reference(
                value, clabel, read_through(value, var, passed, all_names))
            self.components[clabel] = _hasher.digest(token).hex()

    def visit_global(self, g: dict[str, Any], name: str, written: set[str] | frozenset[str],
                     all_names: set[str] | None) -> None:
        """The component of global ``name`` read by a function of namespace ``g``."""
        if name in self.ignore_globals:
            # The user's word that it is state the code writes, not an input: by name, not watched.
            self.name_keyed(self.global_label(g, name), IGNORED, IGNORED)
            return
        if name in written and not isinstance(
                g.get(name), (types.FunctionType, type, types.ModuleType)):
            # Rebound by this function's own code (a call counter): state it writes, keyed by name,
            # not watched, or no call would hit again; a by-value read of it elsewhere in the walk
            # (which keeps the value in the key) wins, and code bound to it is followed as usual.
            glabel = f"global {self._name(g.get('__name__'), name)}"
            if glabel not in self.components:
                self.name_keyed(glabel, REBOUND, REBOUND)
            return
        value = g.get(name, MISSING)
        self.dict_watches.append((g, name, value))
        glabel = self.global_label(g, name)
        if value is MISSING and code_builtin(name):  # (a gettext-style ``_``): read as a global
            value, blabel = vars(builtins)[name], f"builtin {name}"
            self.dict_watches.append((vars(builtins), name, value))
            self.components[blabel] = _hasher.digest(_classes.hook_token(self, value, blabel)).hex()
            return
        if value is MISSING:  # missing, or Python's builtin (the Python version is in every key)
            if name not in vars(builtins):
                self.components[glabel] = _hasher.digest(("missing",)).hex()
            return
        token = self.read(value, glabel, all_names)
        self.components[glabel] = _hasher.digest(token).hex()
        if token[:1] == ("value",):
            self.shown[glabel] = shown(value, self.components[glabel])

    def visit_class(self, cls: type) -> str:
        """See :func:`fncache.code.classes.visit_class`."""
        return _classes.visit_class(self, cls)
