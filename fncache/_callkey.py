"""The key of one call: :class:`CallKey`, made by a function's :class:`KeyBuilder`.

A key is the xxh3-128 digest of these parts, in this order (the bytes are the key format: any change
to them must bump ``KEY_SCHEMA``)::

    digest((KEY_SCHEMA, python major.minor))
    code part: digest(("version", function id, version))              with version=
               fingerprint digest                                      otherwise, or
               digest((fingerprint digest, depends_on digest))         with depends_on
    one digest per bound argument (parameter order, ignored ones left out)
    digest(type(self)), for an instance of a subclass                 with ignore=["self"] on a method
    digest(("ignore", sorted ignored names))                           with ignore=

The same parts give the metadata stored beside each entry (:meth:`CallKey.meta`), which
``fncache explain`` compares with the current call: a new component of the key is one field here.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import xxhash

from fncache._binding import Binder
from fncache._errors import UnhashableArgument
from fncache._options import Options
from fncache.code.fingerprint import Fingerprint, fingerprint, still_valid
from fncache.code.usercode import is_user_code
from fncache.values import hasher as _hasher
from fncache.values.digests import RECORDS, Records

__all__ = ["KEY_SCHEMA", "PYTHON", "CallKey", "KeyBuilder", "function_id"]

#: Part of every key. Bump it whenever the bytes that enter a key change: it invalidates every cache.
KEY_SCHEMA = "fncache-key-2"
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
_KEY_PREFIX = _hasher.digest((KEY_SCHEMA, PYTHON))
_digest_of = xxhash.xxh3_128_digest  # the key: xxh3-128 of the joined parts


class CallKey(NamedTuple):
    """The named parts of one call's key, and the key itself (32 hex characters).

    Immutable; one per call. ``fingerprint`` is None with ``version=``; ``depends_on`` is the digest
    of the ``depends_on`` inputs (None without); ``args`` pairs with ``names``.
    """

    function: str
    version: str | None
    fingerprint: Fingerprint | None
    depends_on: bytes | None
    ignored: tuple[str, ...]
    names: tuple[str, ...]
    args: tuple[bytes, ...]
    code: bytes
    key: str

    @property
    def schema(self) -> str:
        """The key-schema version (part of every key)."""
        return KEY_SCHEMA

    @property
    def python(self) -> str:
        """The Python major.minor version (part of every key: bytecode and pickles differ)."""
        return PYTHON

    @property
    def components(self) -> dict[str, str] | None:
        """The fingerprint's components (label -> hex digest); None with ``version=``."""
        return None if self.fingerprint is None else self.fingerprint.components

    def meta(self, created: float | None = None, duration: float = 0.0) -> dict[str, Any]:
        """The metadata stored beside the entry, which ``explain`` reads back."""
        meta: dict[str, Any] = {
            "function": self.function,
            "created": created,
            "duration": round(duration, 6),
            "python": self.python,
            "args": {n: d.hex() for n, d in zip(self.names, self.args, strict=False)},
        }
        if self.version is not None:
            meta["version"] = self.version
        else:
            assert self.fingerprint is not None
            meta["components"] = self.fingerprint.components
            if self.fingerprint.shown:  # how each global read reads to a person (explain)
                meta["shown"] = dict(self.fingerprint.shown)
        if self.depends_on is not None:  # so that explain can name a changed data file
            meta["depends_on"] = self.depends_on.hex()
        return meta


class KeyBuilder:
    """Makes the :class:`CallKey` of each call of one function.

    Owns argument binding (``ignore=`` included), the function's fingerprint (cached, revalidated by
    identity checks on each call), the ``version=`` pin and the ``depends_on`` inputs. Thread-safe:
    two threads may both recompute a stale fingerprint; either result is the same.
    """

    def __init__(self, func: Callable[..., Any], options: Options, function: str) -> None:
        self.func = func
        # The code the fingerprint covers: a bound method's function (its instance is an argument).
        self.code = func.__func__ if isinstance(func, types.MethodType) else func
        self.function = function
        self._options = options
        self.binder = Binder(func, options.ignore, options.files)
        #: Binders made since this one's first (the function's signature changed: see _refresh).
        self.binds = 0
        self.ignored = tuple(sorted(self.binder.ignore))
        self.version = options.version
        self.depends = options.depends_on
        # A memoized function of an installed library (a joblib.Memory drop-in caching a library's
        # own functions) is keyed by name: its distribution's version stands for its code, so an
        # upgrade gives new keys.
        # (The same test as the fingerprint's library branch: a partial or callable object is
        # walked by content, and keeps the option as given.)
        library = isinstance(self.code, (types.FunctionType, type)) and not is_user_code(self.code)
        self.track_versions = options.track_versions or library
        # Classes of the function's own module enter argument digests without the module name, as
        # they do in its fingerprint (a script run as __main__ and imported share keys).
        self.root = getattr(func, "__module__", None) or ""
        self._fp: Fingerprint | None = None
        # Globals the user declared state, not inputs: left out of the fingerprint by name.
        self.ignore_globals = frozenset(options.ignore_globals)
        # ``ignore=["self"]`` on a method drops the instance's state, not its class's code: the
        # class defining the method enters the fingerprint (found by name once it exists, or from
        # the first call's instance), and an instance of a subclass adds its own class per call.
        self._self_class = _ignores_self(self.code, self.binder)
        self._owner: type | None = None
        self._pinned = None if self.version is None else \
            _hasher.digest(("version", function, self.version))
        self._tail = (_hasher.digest(("ignore", self.ignored)),) if self.ignored else ()
        # Keys made by build in one step: nothing but the fingerprint and the arguments counts.
        self._direct = self._pinned is None and not self.depends and not self._self_class
        self._prefix: tuple[Fingerprint | None, bytes] = (None, b"")  # (fingerprint, key prefix)
        # Where file digests the process has not taken yet are looked up and kept (the store's
        # records, set by the memoized function; see fncache._digest_records).
        self.records: Records | None = None

    def fingerprint(self) -> Fingerprint:
        """The function's fingerprint, recomputed if anything it was made from changed."""
        fp = self._fp
        if fp is None or not still_valid(fp):
            fp = self._refresh()
        return fp

    def _refresh(self) -> Fingerprint:
        if self._self_class and self._owner is None:
            self._owner = _owner_by_name(self.code)
        fp = fingerprint(self.code, versions=self.track_versions, owner=self._owner,
                         ignore_globals=self.ignore_globals)
        if not self.binder.current():
            # Made before the fingerprint is kept: a signature ignore= no longer fits raises on
            # every call, not once.
            self._rebind()
        self._fp = fp
        return fp

    def _rebind(self) -> None:
        """New defaults, code or a partial's keywords: calls are bound by the signature as it
        stands, or f(0) (now the new default) and f(0, <old default>) would share a key. A caller
        that bound its arguments before sees ``binds`` move and binds them again."""
        self.binder = Binder(self.func, self._options.ignore, self._options.files)
        self.binds += 1

    def _class_of_self(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bytes, ...]:
        """With ``self`` ignored: the digest of the instance's class when it is not the class that
        defines the method (a subclass may override what the method calls), else nothing."""
        first = self.binder.bound[0] if self.binder.bound else args[0] if args else \
            kwargs.get(self.binder.first or "", _NONE)
        if first is _NONE:
            return ()
        cls = first if isinstance(first, type) else type(first)
        if self._owner is None:
            found = _defining_class(cls, self.code)
            if found is None:
                return (_hasher.digest(cls, self.root),)
            self._owner, self._fp = found, None
        if cls is self._owner:
            return ()
        return (_hasher.digest(cls, self.root),)

    def arg_digests(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bytes, ...]:
        """One digest per bound argument; raises :class:`UnhashableArgument` naming the argument."""
        values = self.binder.bind(args, kwargs)
        digest = _hasher.digest
        root = self.root
        out = []
        try:
            for v in values:
                out.append(digest(v, root))
        except UnhashableArgument as e:
            raise self._unhashable(values, e) from e
        if self._self_class:
            out.extend(self._class_of_self(args, kwargs))
        return tuple(out)

    def _unhashable(self, values: tuple[Any, ...], error: UnhashableArgument) -> UnhashableArgument:
        """The error naming the first argument that cannot be hashed (``error``'s, found again)."""
        i, v = 0, None
        for i, v in enumerate(values):  # noqa: B007 - the one that fails is wanted after the loop
            try:
                _hasher.digest(v, self.root)
            except UnhashableArgument as e:
                error = e
                break
        name = self.binder.names[i] if i < len(self.binder.names) else f"#{i}"
        return UnhashableArgument(
            f"{self.function}: argument {name!r} of type "
            f"{type(v).__module__}.{type(v).__qualname__} cannot be hashed: {error}; key it with "
            "fncache.ref(value, token) or fncache.register(type, fn), or leave it out with ignore=",
            parameter=name,
            type_name=type(v).__qualname__,
        )

    def build(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallKey:
        """The key of ``func(*args, **kwargs)`` as the inputs stand now."""
        binds = self.binds
        token = RECORDS.set(self.records)  # file digests kept in the store (fncache._digest_records)
        try:
            digests = self.arg_digests(args, kwargs)
        finally:
            RECORDS.reset(token)
        if not self._direct:
            made = self.rebuild(digests)
            return made if self.binds == binds else self.build(args, kwargs)
        # The common case in one step (no depends_on, no version=, no class of self): the same
        # parts rebuild takes, with the key's prefix and code part joined once per fingerprint.
        fp = self._fp
        if fp is None or not still_valid(fp):
            fp = self._refresh()
        if self.binds != binds:  # the signature changed (here or in another thread): bound again
            return self.build(args, kwargs)
        fp_of, prefix = self._prefix
        if fp_of is not fp:
            fp_of, prefix = self._prefix = (fp, _KEY_PREFIX + fp.digest)
        key = _digest_of(b"".join((prefix, *digests, *self._tail))).hex()
        return _new_key((self.function, None, fp, None, self.ignored, self.binder.names, digests,
                         fp.digest, key))

    def rebuild(self, arg_digests: tuple[bytes, ...]) -> CallKey:
        """The key of a call with these argument digests, code and inputs taken afresh."""
        fp = None
        depends = None
        if self.depends:
            from fncache.code.depends import depends_digest

            token = RECORDS.set(self.records)
            try:
                depends = depends_digest(self.depends)
            finally:
                RECORDS.reset(token)
        if self._pinned is not None:
            code = self._pinned
            if not self.binder.current():  # no fingerprint to watch the signature: asked here
                self._rebind()
        else:
            fp = self.fingerprint()
            code = fp.digest if depends is None else _hasher.digest((fp.digest, depends))
        key = _digest_of(b"".join((_KEY_PREFIX, code, *arg_digests, *self._tail))).hex()
        names = self.binder.names
        if len(arg_digests) > len(names) and self._self_class:
            names += ("type(self)",)
        return CallKey(self.function, self.version, fp, depends, self.ignored, names,
                       arg_digests, code, key)


_NONE = object()
# CallKey(...) without the named tuple's Python-level __new__ (one call less per hit).
_new_key: Callable[[tuple[Any, ...]], CallKey] = functools.partial(tuple.__new__, CallKey)


def _ignores_self(code: Any, binder: Binder) -> bool:
    """Whether ``code`` is a method (defined in a class body) whose ignored first parameter is its
    instance or class (``self``/``cls``)."""
    if not isinstance(code, types.FunctionType) or binder.first not in ("self", "cls") \
            or binder.first not in binder.ignore:
        return False
    parts = code.__qualname__.split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


def _defining_class(cls: type, code: Any) -> type | None:
    """The class along ``cls``'s MRO whose body defines ``code`` (memoized or not), or None."""
    from fncache.code.usercode import unwrap_memoized as _unwrap_memoized

    name = code.__name__
    for c in cls.__mro__:
        v = vars(c).get(name)
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if v is not None and _unwrap_memoized(v) is code:
            found: type = c
            return found
    return None


def _owner_by_name(code: Any) -> type | None:
    """The class that defines method ``code``, looked up by its qualified name in its module."""
    parts = code.__qualname__.split(".")
    if "<locals>" in parts:
        return None  # a class made in a function: found from the first call's instance
    obj = code.__globals__.get(parts[0])
    for p in parts[1:-1]:
        if not isinstance(obj, type):
            return None
        obj = vars(obj).get(p)  # the class body's own names: no descriptor runs
    return _defining_class(obj, code) if isinstance(obj, type) else None


def function_id(func: Any) -> str:
    """``module:qualname``, stable across processes: never a repr with a memory address. A script's
    or notebook's function is named by its file (``job:step``, ``analysis.ipynb:step``), not
    ``__main__``: see :func:`fncache.code.targets.recorded_module`."""
    if isinstance(func, functools.partial):
        inner = function_id(func.func)
        module, _, inner_name = inner.partition(":")
        return f"{module}:partial({inner_name})"
    name: Any = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    if not isinstance(name, str):  # a callable object: named by its class
        func = type(func)
        name = func.__qualname__
    module = getattr(func, "__module__", None) or "?"
    if module in ("__main__", "__mp_main__"):
        code = func.__func__ if isinstance(func, types.MethodType) else func
        namespace = getattr(code, "__globals__", None)
        if not isinstance(namespace, dict):  # a class: its module's namespace
            namespace = getattr(sys.modules.get(module), "__dict__", None)
        from fncache.code.targets import recorded_module

        module = recorded_module(module, namespace)
    return f"{module}:{name}"
