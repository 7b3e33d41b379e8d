"""``@fncache.memoize``: the memoized function wrapper.

A call goes: bind the arguments -> revalidate the (cached) code fingerprint -> digest each argument ->
key (:mod:`fncache._callkey`) -> look it up (:mod:`fncache._entries`); on a hit, verify and unpickle;
on a miss, compute (once per key among this process's threads or tasks; across processes too with
``lock=True``), encode and add create-only, so the first writer wins and every reader sees one whole
value (:mod:`fncache._miss`, one path for plain and coroutine functions).

The failure policy lives in :mod:`fncache._entries`: the user's exceptions propagate and are not
stored; store and I/O errors become logged misses (``on_store_error="raise"`` raises them instead); a
damaged or untrusted entry is logged, deleted and recomputed; a result that cannot be pickled is
returned and not stored; so is a result whose inputs changed while it was computed, not provably by
the function (see :meth:`fncache._miss.MissPath._store_result`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import types
from collections.abc import Callable, Iterable
from typing import Any, Generic, ParamSpec, TypeVar, overload

from fncache._callkey import KEY_SCHEMA, CallKey, KeyBuilder, function_id
from fncache._digest_records import StoredDigests
from fncache._entries import Counters, Entries, Strategies
from fncache._errors import ConfigError, UnhashableArgument
from fncache._miss import MissPath
from fncache._options import DISABLED as _DISABLED
from fncache._options import NAMES, OptionAttribute, Options, options_doc, unknown_options
from fncache._threads import thread_mark
from fncache.code.fingerprint import Fingerprint
from fncache.code.usercode import wrapper_attributes
from fncache.stores import Store, redact

__all__ = ["KEY_SCHEMA", "CacheInfo", "Memoized", "key_for", "memoize"]

log = logging.getLogger("fncache")

P = ParamSpec("P")
R = TypeVar("R")


class CacheInfo(tuple):  # type: ignore[type-arg]
    """``(hits, misses, stores, errors)`` of one memoized function in this process."""

    __slots__ = ()

    def __new__(cls, hits: int, misses: int, stores: int, errors: int) -> CacheInfo:
        return tuple.__new__(cls, (hits, misses, stores, errors))

    hits = property(lambda self: self[0])
    misses = property(lambda self: self[1])
    stores = property(lambda self: self[2])
    errors = property(lambda self: self[3])

    def __repr__(self) -> str:
        return f"CacheInfo(hits={self[0]}, misses={self[1]}, stores={self[2]}, errors={self[3]})"


def _check_function(func: Any) -> None:
    if isinstance(func, (classmethod, staticmethod)):
        kind = type(func).__name__
        raise ConfigError(f"Memoized: got a {kind} object; use fncache.memoize, which keeps "
                          f"it a {kind}, or put @{kind} above @fncache.memoize")
    if not callable(func):
        raise ConfigError(f"memoize: expected a callable, got {type(func).__name__}")
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise ConfigError(
            f"memoize: {getattr(func, '__qualname__', func)} is a generator function; its "
            "result is consumed lazily and cannot be cached. Return a list instead."
        )


class Memoized(Generic[P, R]):
    """A function whose results are cached by the content of its code and arguments.

    Thread-safe; safe to share between processes through its store. See :func:`memoize` for the
    options, readable as attributes (``m.version``, ``m.expire``...) and together as ``m.options``.
    Other attributes: ``__wrapped__`` (the function), ``store`` (opened on first use),
    ``function_id`` (``module:qualname``, the name entries are listed and cleared by).

    ``Memoized(func, **options)``; ``Memoized(func, options, strategies)`` with an
    :class:`~fncache._options.Options` already validated and how entries are read, accepted and
    reported (the joblib layer's configuration).
    """

    def __init__(self, func: Callable[P, R], _options: Options | None = None,
                 _strategies: Strategies | None = None, /, **options: Any) -> None:
        _check_function(func)
        if not isinstance(_options, (Options, type(None))) or \
                not isinstance(_strategies, (Strategies, type(None))):
            raise ConfigError("Memoized: options are keyword arguments (Memoized(f, store=...))")
        opts = _options if _options is not None else Options.make(**options)
        self.function_id = function_id(func)
        strategies = _strategies or self._default_strategies(opts)
        self.__wrapped__ = func
        functools.update_wrapper(self, func)
        self.options = opts
        self._keys = KeyBuilder(func, opts, self.function_id)
        self._counters = Counters()
        self._entries = Entries(self.function_id, opts, self._counters, strategies)
        self._keys.records = StoredDigests(self._entries)  # file digests kept in the store
        self._miss = MissPath(func, self._keys, self._entries, lock=opts.lock,
                              lock_timeout=opts.lock_timeout, map_result=strategies.map_result,
                              announce=strategies.announce)
        self._is_async = inspect.iscoroutinefunction(func)
        if self._is_async:
            # Frameworks that dispatch on it (web routes, test runners) must see a coroutine
            # function: asyncio.iscoroutinefunction reads this marker, inspect's (3.12+) the next.
            import asyncio.coroutines

            self._is_coroutine = getattr(asyncio.coroutines, "_is_coroutine", None)
            if hasattr(inspect, "markcoroutinefunction"):
                inspect.markcoroutinefunction(self)
        # What this object holds of its own: any other attribute is the user's (``helper.scale = 2``
        # on the memoized helper), part of the key of code that reads it (see wrapper_attributes).
        self.__fncache_own__ = frozenset(vars(self)).difference(getattr(func, "__dict__", ())) | {
            "__fncache_own__"}

    def _default_strategies(self, opts: Options) -> Strategies:
        reader = "mmap" if opts.mmap_mode == "r" else "plain"
        if not opts.verbose:
            return Strategies(reader=reader)
        from fncache._verbose import Verbose

        verbose = Verbose(self.function_id, lambda: self._entries.store)
        return Strategies(reader=reader, report=verbose.report, announce=verbose.announce)

    # -- configuration -------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        """The store, opened (lazily, once) from the ``store=`` option or the default."""
        return self._entries.store

    # The options shown as attributes (one row each in fncache._options.OPTIONS; a test checks
    # that this list is the table's).
    ignore = OptionAttribute[list[str]]()
    ignore_globals = OptionAttribute[list[str]]()
    files = OptionAttribute[list[str]]()
    version = OptionAttribute[str | None]()
    expire = OptionAttribute[float | None]()
    lock = OptionAttribute[bool]()
    lock_timeout = OptionAttribute[float]()
    compress = OptionAttribute[str | None]()
    on_unhashable = OptionAttribute[str]()
    on_store_error = OptionAttribute[str]()
    depends_on = OptionAttribute[tuple[Any, ...]]()
    track_versions = OptionAttribute[bool]()
    verbose = OptionAttribute[bool]()
    mmap_mode = OptionAttribute[str | None]()

    def __reduce__(self) -> Any:
        from fncache.code.targets import importable

        if importable(self):
            return self.__qualname__  # type: ignore[attr-defined]  # importable: plain pickle by name
        import cloudpickle

        store = self.store if isinstance(self.options.store, Store) else None
        return (_rebuild, (cloudpickle.dumps(self.__wrapped__), self.options.pickled(store)))

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        # A bound method forwards attribute reads to this object: obj.f.cache_info() works.
        return types.MethodType(self, instance)

    def __repr__(self) -> str:
        spec = self.options.store
        if isinstance(spec, tuple):  # tiers
            where: Any = ",".join(redact(os.fspath(t)) if isinstance(t, (str, os.PathLike))
                                  else repr(t) for t in spec)
        else:
            where = redact(os.fspath(spec)) if isinstance(spec, (str, os.PathLike)) else spec
        return f"<memoized {self.function_id} in {where or 'default store'}>"

    def __fncache_token__(self) -> Any:
        # A bound method's instance counts as it does in the key (the memo of the hasher's cyclic
        # pass ends ``self.f = memoize(self.f)``, where the instance holds this very object).
        token = (self._keys.fingerprint().digest, *self._keys.binder.bound)
        attrs = wrapper_attributes(self, self.__wrapped__)
        return token + (("attributes", tuple(sorted(attrs.items()))),) if attrs else token

    __fncache_wraps__ = staticmethod(lambda m: m.__wrapped__)

    # -- keys ----------------------------------------------------------------------------------
    def _fingerprint(self) -> Fingerprint:
        return self._keys.fingerprint()

    def call_key(self, *args: P.args, **kwargs: P.kwargs) -> CallKey:
        """The named parts of this call's key (code, inputs, argument digests) and the key."""
        return self._built("call_key", args, kwargs)

    def _built(self, what: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallKey:
        """The call's key for the method ``what``; a method's missing instance is named."""
        try:
            return self._keys.build(args, kwargs)
        except TypeError as e:
            if isinstance(e, UnhashableArgument) or self._keys.binder.first not in ("self", "cls") \
                    or self._keys.binder.bound:
                raise
            # obj.f.key(x): a bound method hands attribute reads to this object, without obj.
            name = getattr(self._keys.code, "__qualname__", "Class.method")
            raise TypeError(f"{e}; for a method, call {what} through the class with the instance "
                            f"first: {name}.{what}(obj, ...)") from e

    def code_key(self) -> CallKey:
        """The parts of the key that do not depend on the arguments (no argument digests)."""
        return self._keys.rebuild(())

    def key(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """The key (32 hex characters) of this call, exactly as a call would compute it."""
        return self._built("key", args, kwargs).key

    # -- calling -------------------------------------------------------------------------------
    def _unhashable(self, e: UnhashableArgument) -> None:
        """An argument cannot be hashed: raise (``on_unhashable="raise"``) or warn once; the call
        then runs uncached."""
        if self.options.on_unhashable == "raise":
            raise e
        self._entries.warn_once("unhashable", "%s: called without caching: %s", self.function_id, e)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if _DISABLED[0]:
            return self.__wrapped__(*args, **kwargs)
        if self._is_async:
            return self._acall(args, kwargs)  # type: ignore[return-value]
        # The threads that run while the key is built: a miss need not hash its inputs again before
        # the call if none that could run user code did (see MissPath._before).
        solo = thread_mark()
        try:
            ck = self._keys.build(args, kwargs)
        except UnhashableArgument as e:
            self._unhashable(e)
            return self.__wrapped__(*args, **kwargs)
        finished = self._miss.finished
        entries = self._entries
        found, value = entries.lookup(ck.key)
        if found:
            self._counters.hits += 1
            if entries.reports:
                entries.report("hit", ck.key)
            elif log.isEnabledFor(logging.DEBUG):
                log.debug("hit %s %s", self.function_id, ck.key)
            return value  # type: ignore[no-any-return]
        self._counters.misses += 1
        return self._miss.call(ck, args, kwargs, finished, solo)  # type: ignore[no-any-return]

    async def _acall(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        solo = thread_mark()
        try:
            ck = self._keys.build(args, kwargs)
        except UnhashableArgument as e:
            self._unhashable(e)
            return await self.__wrapped__(*args, **kwargs)  # type: ignore[misc]
        finished = self._miss.finished
        found, value = self._entries.lookup(ck.key)
        if found:
            self._counters.hits += 1
            self._entries.report("hit", ck.key)
            return value
        self._counters.misses += 1
        return await self._miss.acall(ck, args, kwargs, finished, solo)

    # -- the rest of the public surface ---------------------------------------------------------
    def call(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Compute the call whether or not it is cached, store the result (replacing), return it.

        For a coroutine function, returns an awaitable.
        """
        ck = self._built("call", args, kwargs)
        self._counters.misses += 1
        if self._is_async:
            return self._miss.arecompute(ck, args, kwargs)  # type: ignore[return-value]
        return self._miss.recompute(ck, args, kwargs)  # type: ignore[no-any-return]

    def check_call_in_cache(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Whether this call would be a hit (an entry exists; it is not unpickled)."""
        return self._entries.contains(self._built("check_call_in_cache", args, kwargs).key)

    def clear(self) -> int:
        """Remove every stored entry of this function (all versions of its code); returns the count."""
        return self._entries.clear()

    def cache_info(self) -> CacheInfo:
        """Hits, misses, stores and errors of this function in this process."""
        c = self._counters
        return CacheInfo(c.hits, c.misses, c.stores, c.errors)

    def explain(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Why this call is (or is not) a hit: see :func:`fncache.explain`."""
        from fncache._explain import explain_call

        return explain_call(self, args, kwargs)


def _rebuild(func_bytes: bytes, options: dict[str, Any]) -> Memoized[Any, Any]:
    import cloudpickle

    return Memoized(cloudpickle.loads(func_bytes), **options)


def _memoized(f: Any, options: dict[str, Any]) -> Any:
    # Over @classmethod/@staticmethod: memoize the function inside and keep the method kind.
    if isinstance(f, (classmethod, staticmethod)):
        return type(f)(Memoized(f.__func__, **options))
    return Memoized(f, **options)


@overload
def memoize(func: Callable[P, R], /, **options: Any) -> Memoized[P, R]: ...


# The one copy of the options besides their table (fncache._options.OPTIONS), since type checkers
# need it written out: tests/test_options.py checks names, types and order against the table.
@overload
def memoize(
    func: None = None,
    /,
    *,
    store: str | os.PathLike[str] | Store | list[Any] | tuple[Any, ...] | None = ...,
    ignore: Iterable[str] = ...,
    ignore_globals: Iterable[str] = ...,
    files: Iterable[str] = ...,
    version: str | None = ...,
    expire: float | None = ...,
    lock: bool = ...,
    lock_timeout: float = ...,
    secret: str | bytes | list[str | bytes] | tuple[str | bytes, ...] | None = ...,
    compress: Any = ...,
    on_unhashable: str = ...,
    on_store_error: str = ...,
    depends_on: Iterable[Any] = ...,
    track_versions: bool = ...,
    store_options: dict[str, Any] | None = ...,
    verbose: bool | None = ...,
    mmap_mode: str | None = ...,
) -> Callable[[Callable[P, R]], Memoized[P, R]]: ...


def memoize(func: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Cache a function's results by the content of its code and arguments.

    Usable bare (``@memoize``) or with options (``@memoize(store="/tmp/c", ignore=["verbose"])``).
    Invalid options raise :class:`fncache.ConfigError` (a ``ValueError``) here, at decoration time.
    """
    # Validate option names now, so a typo fails at decoration time even before the function exists.
    unknown = unknown_options("memoize", options, NAMES)
    if unknown:
        raise ConfigError(unknown)
    if func is not None:
        return _memoized(func, options)  # memoize(f) and memoize(f, store=...) alike

    def decorate(f: Callable[..., Any]) -> Memoized[Any, Any]:
        return _memoized(f, options)  # type: ignore[no-any-return]

    return decorate


memoize.__doc__ = (memoize.__doc__ or "") + options_doc()


_DEFAULTS = Options.make()  # key_for of a plain function: memoize's default options


def key_for(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> str:
    """The key ``memoize`` uses for ``func(*args, **kwargs)`` (32 hex characters).

    ``func`` may be a memoized function (its options apply) or a plain one (default options).
    """
    m = func if isinstance(func, Memoized) else Memoized(func, _DEFAULTS)
    return m.key(*args, **kwargs)
