"""``fncache.Memory``: a drop-in replacement for ``joblib.Memory``, keyed by fncache's fingerprints.

Change ``from joblib import Memory`` to ``from fncache import Memory`` and keep the rest:
``@memory.cache``, ``ignore=``, ``mmap_mode=``, ``call_and_shelve``, ``check_call_in_cache``,
``reduce_size``, ``cache_validation_callback`` and ``expires_after`` behave as joblib 1.6 documents
them. What changes is the key: a call is keyed by the content of the function *and the user code it
reaches* (see :mod:`fncache.code.fingerprint`) and of its arguments, not by the function's source text
and name. So a helper edit invalidates, a comment or formatting edit does not, reverting an edit
hits the old entries again, and the cache survives a new interpreter, another ``PYTHONHASHSEED``
or a notebook restart.

Where this layer deliberately differs from joblib:

* entries of an edited function are kept (they hit again if the edit is reverted), not wiped;
  ``clear()`` and ``reduce_size()`` remove them;
* the on-disk layout is fncache's (a diskcache store in ``LOCATION/fncache``), not joblib's;
* ``mmap_mode="c"``, ``"r+"`` and ``"w+"`` give writable arrays read into memory: an entry is
  checksummed and immutable, so writes to an array never reach the cache (``"r"`` maps read-only);
* messages go to stderr, not stdout (``verbose >= 1``: joblib's ``[Memory] Calling ...`` lines
  and durations for computations; ``>= 5``: hits too) and to the ``fncache`` logger.

Every class here *is* or *wraps* :class:`fncache.Memoized`; the caching itself lives there, configured
(how entries are read, which are accepted, how calls are reported) rather than overridden.

Not for: reading a cache directory that joblib wrote (entries are recomputed once), or joblib's
pluggable store backends (``register_store_backend``): pass an fncache store URL as ``location``.
"""

from __future__ import annotations

import datetime
import functools
import inspect
import logging
import os
import sys
import time
import types
from collections.abc import Callable
from typing import Any, TypeVar

from fncache import _codec
from fncache._entries import Strategies
from fncache._errors import ConfigError
from fncache._memoize import Memoized
from fncache._options import Options, unknown_options
from fncache._units import parse_size
from fncache.code.targets import importable
from fncache.joblib.results import (
    MemorizedResult,
    NotMemorizedResult,
    _check_backend,
    _check_mmap_mode,
    _metadata,
    _read,
    _revive,
    _store_options,
    _store_spec,
)
from fncache.stores import Store, open_store, public_config, redact
from fncache.stores.prune import DELETE_BATCH, plan_prune

__all__ = [
    "AsyncMemorizedFunc",
    "AsyncNotMemorizedFunc",
    "MemorizedFunc",
    "MemorizedResult",
    "Memory",
    "NotMemorizedFunc",
    "NotMemorizedResult",
    "expires_after",
]

log = logging.getLogger("fncache")

# joblib's compressors; fncache stores with zstd instead (faster, and as small or smaller).
_JOBLIB_COMPRESSORS = ("zlib", "gzip", "bz2", "lzma", "xz")


def _check_compress(compress: Any) -> str | None:
    """joblib's ``compress`` (bool, level 0-9, ``(method, level)``, a method name) -> fncache's."""
    if isinstance(compress, (tuple, list)):
        if len(compress) != 2:
            raise ConfigError(f"compress: expected (method, level), got {compress!r}")
        method, level = compress
        return None if not level else _check_compress(method)
    if isinstance(compress, str) and compress in _JOBLIB_COMPRESSORS:
        return _codec.check_compress(True)
    return _codec.check_compress(compress)


# ---------------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------------


class _Packed:
    """A function that plain pickle cannot take by name, carried as cloudpickle bytes."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce__(self) -> Any:
        import cloudpickle

        return (cloudpickle.loads, (self.data,))


def _portable(obj: Any) -> Any:
    # Anything else (bound methods, partials, builtins) goes to the enclosing pickler as it is, so
    # that an instance holding its own cached method (self.f = memory.cache(self.f)) pickles as the
    # cycle it is instead of recursing.
    if isinstance(obj, types.FunctionType) and not importable(obj):
        import cloudpickle

        return _Packed(cloudpickle.dumps(obj))
    return obj


class MemorizedFunc(Memoized):  # type: ignore[type-arg]
    """joblib's ``MemorizedFunc``: a cached function bound to a cache ``location``.

    A :class:`fncache.Memoized` underneath: thread-safe, and safe for concurrent processes writing
    to one location (the first writer of a key wins, every reader sees a whole entry). The user's
    exceptions propagate and are not cached; store failures are logged misses.

    Arguments as joblib's; ``location`` is a directory (the store goes in its ``fncache``
    subdirectory), an fncache store URL or a :class:`~fncache.Store`. ``timestamp`` is accepted and
    unused. ``backend_options`` (not in joblib's signature) are options for opening the store.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        location: Any,
        backend: str = "local",
        ignore: list[str] | None = None,
        mmap_mode: str | None = None,
        compress: Any = False,
        verbose: int = 1,
        timestamp: float | None = None,
        cache_validation_callback: Callable[[dict[str, Any]], bool] | None = None,
        backend_options: dict[str, Any] | None = None,
        ignore_globals: list[str] | None = None,
    ) -> None:
        _check_backend(backend)
        if cache_validation_callback is not None and not callable(cache_validation_callback):
            raise ConfigError(
                f"cache_validation_callback needs to be callable, got {cache_validation_callback!r}"
            )
        compress = _check_compress(compress)
        options = Options.make(
            store=_store_spec(location),
            ignore=list(ignore or ()),
            ignore_globals=() if ignore_globals is None else ignore_globals,
            compress=compress,
            store_options=_store_options(backend_options),
            verbose=False,  # joblib's levels are applied by _report
        )
        self.location = location
        self.backend = backend
        self._verbose = int(verbose or 0)
        self.timestamp = timestamp if timestamp is not None else time.time()
        self.cache_validation_callback = cache_validation_callback
        self._backend_options = backend_options
        self._mmap_mode = _check_mmap_mode(mmap_mode)
        # Only "r" maps (see _read); a compressed entry is decompressed into memory whatever we do.
        mapping = "r" if self._mmap_mode == "r" and compress is None else None
        if mapping is not None and options.secret is not None:
            from fncache._options import warn_mapped_and_signed

            warn_mapped_and_signed()
        lines = None
        if self._verbose >= 1:
            from fncache._callkey import function_id
            from fncache._verbose import JoblibLines

            name = getattr(func, "__name__", None)
            fid = function_id(func)
            lines = JoblibLines(fid, name if isinstance(name, str) else fid.rpartition(":")[2])
        super().__init__(func, options, Strategies(
            reader=functools.partial(_read, mmap_mode=mapping),
            accept=None if cache_validation_callback is None else self._validate,
            report=self._report,
            announce=lines.announce if lines is not None else None,
            map_result=mapping is not None,
        ))
        if self._mmap_mode is not None and compress:
            # joblib warns here too; verbose=0 promises silence, so the logger only hears it then.
            log.log(logging.WARNING if self._verbose else logging.INFO,
                    "%s: compressed results cannot be memory-mapped; they are loaded in memory",
                    self.function_id)

    @property
    def mmap_mode(self) -> str | None:
        return self._mmap_mode

    @property
    def func(self) -> Callable[..., Any]:
        """The original, undecorated function."""
        return self.__wrapped__

    @property
    def func_id(self) -> str:
        return self.function_id

    # -- how entries are accepted and calls reported (see Strategies) ---------------------------
    def _validate(self, header: _codec.Header) -> bool:
        callback = self.cache_validation_callback
        return callback is None or bool(callback(_metadata(header)))

    def _report(self, what: str, key: str) -> None:
        # A computation is announced (joblib's "Calling ..." and duration lines: fncache._verbose).
        if what != "miss" and self._verbose >= 5:
            name = getattr(self, "__name__", self.function_id)
            print(f"[Memory] {name} loaded from cache ({key[:12]})", file=sys.stderr)
        log.debug("%s %s %s", what, self.function_id, key)

    # -- joblib's surface ----------------------------------------------------------------------
    def call(self, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Run the function whatever the cache holds, store the result; ``(result, metadata)``."""
        start = time.time()
        value = super().call(*args, **kwargs)
        return value, {"duration": time.time() - start, "time": time.time()}

    def check_call_in_cache(self, *args: Any, **kwargs: Any) -> bool:
        """Whether this call would be a hit now, validation callback included; nothing is run."""
        if self.cache_validation_callback is None:
            _revive(self.store)
            return super().check_call_in_cache(*args, **kwargs)
        _revive(self.store)
        return self._entries.usable(self.key(*args, **kwargs))

    def _shelve(self, key: str) -> MemorizedResult:
        return MemorizedResult(self.store, (self.function_id, key), mmap_mode=self.mmap_mode,
                               verbose=max(self._verbose - 1, 0), timestamp=self.timestamp)

    def call_and_shelve(self, *args: Any, **kwargs: Any) -> MemorizedResult:
        """Compute (if needed) and cache the call; return a :class:`MemorizedResult` handle."""
        if not self.check_call_in_cache(*args, **kwargs):
            self(*args, **kwargs)
        return self._shelve(self.key(*args, **kwargs))

    def clear(self, warn: bool = True) -> int:
        """Remove every cached result of this function (all versions of its code)."""
        if warn and self._verbose > 0:
            print(f"[Memory] clearing {self.function_id}", file=sys.stderr)
        log.info("%s: clearing its cache", self.function_id)
        _revive(self.store)
        return super().clear()

    def __reduce__(self) -> Any:
        if importable(self):
            return self.__qualname__  # type: ignore[attr-defined]  # set by update_wrapper
        # Credentials stay behind (a password in the URL or backend_options, an S3 secret):
        # workers take theirs from the environment, as fncache.stores documents.
        location, backend_options = _public(self.location, self._backend_options)
        options = dict(
            backend=self.backend, ignore=self.ignore, mmap_mode=self.mmap_mode,
            compress=self.compress or False, verbose=self._verbose,
            cache_validation_callback=_portable(self.cache_validation_callback),
            backend_options=backend_options, ignore_globals=list(self.options.ignore_globals),
        )
        return (_rebuild, (type(self), _portable(self.__wrapped__), location, options))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(func={self.function_id}, location={_shown(self.location)})"


def _public(location: Any, backend_options: dict[str, Any] | None) -> tuple[Any, Any]:
    """``location`` and ``backend_options`` without credentials, for pickles."""
    clean, options = public_config(location, backend_options or {})
    return clean, (options if backend_options is not None else None)


def _shown(location: Any) -> Any:
    """``location`` as ``repr`` shows it: a URL's password replaced by ``***``."""
    if isinstance(location, (list, tuple)):  # tiers
        return [_shown(t) for t in location]
    return redact(location) if isinstance(location, str) else location


def _rebuild(cls: type[MemorizedFunc], func: Any, location: Any, options: dict[str, Any]) -> Any:
    return cls(func, location, **options)


class AsyncMemorizedFunc(MemorizedFunc):
    """:class:`MemorizedFunc` of a coroutine function: calling it returns an awaitable.

    With ``mmap_mode="r"`` the first call of a key returns a memory map too, as for a plain function.
    """

    async def call(self, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:  # type: ignore[override]
        start = time.time()
        value = await Memoized.call(self, *args, **kwargs)
        return value, {"duration": time.time() - start, "time": time.time()}

    async def call_and_shelve(self, *args: Any, **kwargs: Any) -> MemorizedResult:  # type: ignore[override]
        if not self.check_call_in_cache(*args, **kwargs):
            await self(*args, **kwargs)
        return self._shelve(self.key(*args, **kwargs))


class NotMemorizedFunc:
    """What :meth:`Memory.cache` returns when caching is off: the same surface, no cache."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def call_and_shelve(self, *args: Any, **kwargs: Any) -> Any:
        return NotMemorizedResult(self.func(*args, **kwargs))

    def call(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs), {}

    def check_call_in_cache(self, *args: Any, **kwargs: Any) -> bool:
        return False

    def clear(self, warn: bool = True) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(func={self.func})"


class AsyncNotMemorizedFunc(NotMemorizedFunc):
    """:class:`NotMemorizedFunc` of a coroutine function."""

    async def call_and_shelve(self, *args: Any, **kwargs: Any) -> Any:
        return NotMemorizedResult(await self.func(*args, **kwargs))

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        return await self.func(*args, **kwargs), {}


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


_F = TypeVar("_F", bound=Callable[..., Any])


def _checked_names(where: str) -> Callable[[_F], _F]:
    """Refuse a misspelt keyword of the method with the nearest valid one (a ``TypeError``, as
    Python's own: ``Memory: unknown option 'verbos' (did you mean 'verbose'?)``)."""

    def decorate(method: _F) -> _F:
        names = [p.name for p in inspect.signature(method).parameters.values()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)][1:]  # not self

        @functools.wraps(method)
        def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs:
                message = unknown_options(where, kwargs, names)
                if message:
                    raise TypeError(message)
            return method(self, *args, **kwargs)

        return checked  # type: ignore[return-value]

    return decorate


def _reduce_limits(items_limit: Any, age_limit: Any) -> float | None:
    """``reduce_size``'s ``items_limit`` checked, and its ``age_limit`` in seconds."""
    if items_limit is not None and (type(items_limit) is not int or items_limit < 0):
        raise ConfigError(f"items_limit: expected a non-negative int, got {items_limit!r}")
    if age_limit is None:
        return None
    age = age_limit.total_seconds() if isinstance(age_limit, datetime.timedelta) else age_limit
    if age < 0:
        raise ConfigError(f"age_limit: expected a non-negative duration, got {age_limit!r}")
    return float(age)


def _parse_bytes(limit: int | str | None) -> int | None:
    if limit is None or isinstance(limit, int):
        return limit
    try:
        return parse_size(limit)
    except (ValueError, TypeError):
        raise ConfigError(
            f"bytes_limit: expected bytes or a string like '10M', got {limit!r}"
        ) from None


class Memory:
    """joblib's ``Memory``: a cache location and the defaults for the functions cached in it.

    ``location=None`` turns caching off: :meth:`cache` returns a :class:`NotMemorizedFunc` and
    nothing is written. A path location holds a disk store in ``LOCATION/fncache``; it may be
    deleted under a live ``Memory`` (it is recreated on next use). A store URL (``redis://``, ``s3://``,
    ``memory://``) shares the cache between machines. Picklable (as its configuration).

    As joblib's, a path location exists once the ``Memory`` is made, with a ``.gitignore`` that
    keeps it out of git (written only if the location has none).

    When joblib is installed, ``Memory(...)`` is also an instance of ``joblib.Memory`` (a subclass
    of both, :mod:`fncache.joblib.subclass`), for libraries that check the type; it caches the
    fncache way all the same, and creates no joblib store.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Memory:
        if cls is Memory:
            cls = _joblib_memory() or cls
        return object.__new__(cls)

    def __reduce__(self) -> Any:
        # As fncache.Memory, whichever class this is: unpickling picks the class again, so a
        # process without joblib loads it too.
        return (_new_memory, (), self.__getstate__())

    @_checked_names("Memory")
    def __init__(
        self,
        location: Any = None,
        backend: str = "local",
        mmap_mode: str | None = None,
        compress: Any = False,
        verbose: int = 1,
        backend_options: dict[str, Any] | None = None,
        ignore_globals: list[str] | None = None,
    ) -> None:
        _check_backend(backend)
        if location is not None:
            _make_locations(_store_spec(location))  # fail here, not on first use
        self.location = location
        self.backend = backend
        self.mmap_mode = _check_mmap_mode(mmap_mode)
        _check_compress(compress)
        self.compress = compress
        self._verbose = verbose
        self.backend_options = dict(backend_options or {})
        self.timestamp = time.time()

    @property
    def store(self) -> Store | None:
        """The store behind ``location`` (``None`` when caching is off)."""
        if self.location is None:
            return None
        return open_store(_store_spec(self.location), **_store_options(self.backend_options))

    @_checked_names("Memory.cache")
    def cache(
        self,
        func: Callable[..., Any] | None = None,
        ignore: list[str] | None = None,
        verbose: int | None = None,
        mmap_mode: str | None | bool = False,
        cache_validation_callback: Callable[[dict[str, Any]], bool] | None = None,
        ignore_globals: list[str] | None = None,
    ) -> Any:
        """Cache ``func``: ``@memory.cache`` or ``@memory.cache(ignore=[...], ...)``.

        ``verbose`` and ``mmap_mode`` default to the Memory's. ``ignore_globals`` (not joblib's):
        globals that are state the function writes, left out of the key (see ``fncache.memoize``).
        ``cache_validation_callback(metadata)`` is asked on each hit; ``False`` discards the entry
        and recomputes. Invalid options raise :class:`fncache.ConfigError` (a ``ValueError``) here.
        """
        if cache_validation_callback is not None and not callable(cache_validation_callback):
            raise ConfigError(
                f"cache_validation_callback needs to be callable, got {cache_validation_callback!r}"
            )
        if func is None:
            return functools.partial(
                self.cache, ignore=ignore, verbose=verbose, mmap_mode=mmap_mode,
                cache_validation_callback=cache_validation_callback, ignore_globals=ignore_globals,
            )
        if isinstance(func, (MemorizedFunc, NotMemorizedFunc)):
            func = func.func
        is_async = inspect.iscoroutinefunction(func)
        if self.location is None:
            return (AsyncNotMemorizedFunc if is_async else NotMemorizedFunc)(func)
        return (AsyncMemorizedFunc if is_async else MemorizedFunc)(
            func,
            self.location,
            backend=self.backend,
            ignore=ignore,
            mmap_mode=self.mmap_mode if mmap_mode is False else mmap_mode,  # type: ignore[arg-type]
            compress=self.compress,
            verbose=self._verbose if verbose is None else verbose,
            timestamp=self.timestamp,
            cache_validation_callback=cache_validation_callback,
            backend_options=self.backend_options or None,
            ignore_globals=ignore_globals,
        )

    def eval(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``func(*args, **kwargs)``, computed only if the cache does not hold it."""
        if self.location is None:
            return func(*args, **kwargs)
        return self.cache(func)(*args, **kwargs)

    def clear(self, warn: bool = True) -> int:
        """Remove every entry in the location; returns the count. A no-op with ``location=None``."""
        store = self.store
        if store is None:
            return 0
        if warn and self._verbose > 0:
            print(f"[Memory] flushing the cache in {self.location}", file=sys.stderr)
        _revive(store)
        return store.clear()

    def reduce_size(
        self,
        bytes_limit: int | str | None = None,
        items_limit: int | None = None,
        age_limit: datetime.timedelta | None = None,
    ) -> int:
        """Remove entries until the cache fits the limits; returns how many were removed.

        The policy is ``fncache prune``'s (:func:`fncache.stores.prune.plan_prune`): entries are
        ranked by their last use where the store records uses and otherwise by when they were
        computed, damaged entries first; the most recent are kept, the rest go from the first one
        that does not fit ``bytes_limit`` (``"10M"``-style strings too) or ``items_limit``;
        ``age_limit`` (a ``timedelta``) removes every entry older than that. Entries written
        meanwhile by other processes may survive.
        """
        store = self.store
        if store is None or (bytes_limit is None and items_limit is None and age_limit is None):
            return 0
        max_bytes, max_age = _parse_bytes(bytes_limit), _reduce_limits(items_limit, age_limit)
        _revive(store)
        doomed = plan_prune(store, max_bytes, older_than=max_age, max_items=items_limit)
        return sum(store.delete_many([e.key for e in doomed[i:i + DELETE_BATCH]])
                   for i in range(0, len(doomed), DELETE_BATCH))

    def __getstate__(self) -> dict[str, Any]:
        location, backend_options = _public(self.location, self.backend_options)
        return dict(self.__dict__, timestamp=None, location=location,
                    backend_options=backend_options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(location={_shown(self.location)})"


def _make_locations(spec: Any) -> None:
    """Create each directory location (``LOCATION`` and the store's ``LOCATION/fncache``, mode
    0700) with the ``.gitignore`` joblib writes there (:mod:`fncache.stores.gitignore`), as
    ``joblib.Memory(location)`` does at construction: libraries rely on the folder existing. URLs
    and stores are left alone; a directory that cannot be made is logged, and caching then fails
    as a store error does (a logged miss)."""
    if isinstance(spec, tuple):  # tiers
        for tier in spec:
            _make_locations(tier)
        return
    if not isinstance(spec, str) or "://" in spec:
        return
    from fncache.stores._diskfs import make_private_dirs
    from fncache.stores.gitignore import write_gitignore

    try:
        make_private_dirs(spec)
    except OSError as e:
        log.warning("cannot create the cache location %s: %s", os.path.dirname(spec), e)
        return
    write_gitignore(os.path.dirname(spec))


def _new_memory() -> Memory:
    """An empty :class:`Memory` of the class this process makes (unpickling fills it in)."""
    return Memory.__new__(Memory)


@functools.lru_cache(maxsize=1)
def _joblib_memory() -> type[Memory] | None:
    """The ``Memory`` subclass that is also a ``joblib.Memory``, or None without joblib."""
    import importlib.util

    if importlib.util.find_spec("joblib") is None:
        return None
    try:
        from fncache.joblib.subclass import Memory as JoblibMemory
    except Exception as e:  # a broken joblib install: stay a plain fncache.Memory
        log.debug("joblib cannot be imported (%s): fncache.Memory is not a joblib.Memory", e)
        return None
    return JoblibMemory


def expires_after(
    days: float = 0, seconds: float = 0, microseconds: float = 0, milliseconds: float = 0,
    minutes: float = 0, hours: float = 0, weeks: float = 0,
) -> Callable[[dict[str, Any]], bool]:
    """A ``cache_validation_callback`` that makes results older than the given duration misses."""
    limit = datetime.timedelta(days=days, seconds=seconds, microseconds=microseconds,
                               milliseconds=milliseconds, minutes=minutes, hours=hours,
                               weeks=weeks).total_seconds()

    def cache_validation_callback(metadata: dict[str, Any]) -> bool:
        return bool(time.time() - metadata["time"] < limit)

    return cache_validation_callback
