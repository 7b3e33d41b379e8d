"""The function wrappers of the ``fncache.Memory`` layer: what ``Memory.cache`` returns.

:class:`MemorizedFunc` (and :class:`AsyncMemorizedFunc` for coroutine functions) is joblib's
``MemorizedFunc``: a :class:`fncache.Memoized` configured by strategies (how entries are read, which
are accepted, how calls are reported), not overridden. :class:`NotMemorizedFunc` is what a
``Memory(location=None)`` gives: the function, called as it is. See :mod:`fncache.joblib.memory`
for where this layer deliberately differs from joblib.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
import types
from collections.abc import Callable
from typing import Any

from fncache import _codec
from fncache._entries import Strategies
from fncache._errors import ConfigError
from fncache._memoize import Memoized
from fncache._options import DISABLED, Options
from fncache._threads import thread_mark
from fncache.joblib.results import (
    MemorizedResult,
    NotMemorizedResult,
    backend_store_options,
    check_backend,
    check_mmap_mode,
    location_store,
    read_entry,
    result_metadata,
    revive,
)
from fncache.stores import public_config, redact

__all__ = ["AsyncMemorizedFunc", "AsyncNotMemorizedFunc", "MemorizedFunc", "NotMemorizedFunc",
           "check_validation_callback"]

log = logging.getLogger("fncache")

# joblib's compressors; fncache stores with zstd instead (faster, and as small or smaller).
_JOBLIB_COMPRESSORS = ("zlib", "gzip", "bz2", "lzma", "xz")


def check_joblib_compress(compress: Any) -> str | None:
    """joblib's ``compress`` (bool, level 0-9, ``(method, level)``, a method name) -> fncache's."""
    if isinstance(compress, (tuple, list)):
        if len(compress) != 2:
            raise ConfigError(f"compress: expected (method, level), got {compress!r}")
        method, level = compress
        return None if not level else check_joblib_compress(method)
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
    from fncache.code.targets import importable

    if isinstance(obj, types.FunctionType) and not importable(obj):
        import cloudpickle

        return _Packed(cloudpickle.dumps(obj))
    return obj


def check_validation_callback(callback: Any) -> None:
    """``cache_validation_callback``: None or a callable, else a ConfigError naming it."""
    if callback is not None and not callable(callback):
        raise ConfigError(f"cache_validation_callback needs to be callable, got {callback!r}")


def _joblib_lines(func: Callable[..., Any]) -> Any:
    """joblib's ``[Memory] Calling ...`` lines for ``func`` (verbose >= 1)."""
    from fncache._callkey import function_id
    from fncache._verbose import JoblibLines

    name = getattr(func, "__name__", None)
    fid = function_id(func)
    return JoblibLines(fid, name if isinstance(name, str) else fid.rpartition(":")[2])


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
        check_backend(backend)
        check_validation_callback(cache_validation_callback)
        compress = check_joblib_compress(compress)
        options = Options.make(
            store=location_store(location),
            ignore=list(ignore or ()),
            ignore_globals=() if ignore_globals is None else ignore_globals,
            compress=compress,
            store_options=backend_store_options(backend_options),
            verbose=False,  # joblib's levels are applied by _report
        )
        self._set_joblib_attributes(location, backend, verbose, timestamp, cache_validation_callback,
                                    backend_options, mmap_mode)
        # Only "r" maps (see read_entry); a compressed entry is decompressed into memory whatever we do.
        mapping = "r" if self._mmap_mode == "r" and compress is None else None
        if mapping is not None and options.secret is not None:
            from fncache._options import warn_mapped_and_signed

            warn_mapped_and_signed()
        super().__init__(func, options, self._joblib_strategies(func, mapping))
        if self._mmap_mode is not None and compress:
            # joblib warns here too; verbose=0 promises silence, so the logger only hears it then.
            log.log(logging.WARNING if self._verbose else logging.INFO,
                    "%s: compressed results cannot be memory-mapped; they are loaded in memory",
                    self.function_id)

    def _set_joblib_attributes(self, location: Any, backend: str, verbose: int,
                               timestamp: float | None, callback: Any,
                               backend_options: dict[str, Any] | None, mmap_mode: Any) -> None:
        self.location = location
        self.backend = backend
        self._verbose = int(verbose or 0)
        self.timestamp = timestamp if timestamp is not None else time.time()
        self.cache_validation_callback = callback
        self._backend_options = backend_options
        self._mmap_mode = check_mmap_mode(mmap_mode)

    def _joblib_strategies(self, func: Callable[..., Any], mapping: str | None) -> Strategies:
        """How entries are read (mapped or not), accepted (the callback) and calls reported."""
        lines = _joblib_lines(func) if self._verbose >= 1 else None
        return Strategies(
            reader=functools.partial(read_entry, mmap_mode=mapping),
            accept=None if self.cache_validation_callback is None else self._validate,
            report=self._report,
            announce=lines.announce if lines is not None else None,
            map_result=mapping is not None,
        )

    # joblib's modes, wider than memoize's mmap_mode option
    @property
    def mmap_mode(self) -> str | None:  # type: ignore[override]
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
        return callback is None or bool(callback(result_metadata(header)))

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
        revive(self.store)
        return self._in_cache(self.key(*args, **kwargs))

    def _in_cache(self, key: str) -> bool:
        """Whether an entry is at ``key``: one the callback accepts if there is a callback (its
        header read), else any (not read: a large result is not loaded to be shelved)."""
        if self.cache_validation_callback is None:
            return self._entries.contains(key)
        return self._entries.usable(key)

    def _shelving(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, bool, Any]:
        """The call key of a shelving call and whether it is a hit, counted as a call's are (a hit
        is also a use of its entry), with what a miss passes on to the miss path."""
        solo = thread_mark()  # as Memoized.__call__ takes it, before the key
        revive(self.store)
        ck = self._keys.build(args, kwargs)
        finished = self._miss.finished
        if self._in_cache(ck.key):
            self._counters.hits += 1
            self._entries.report("hit", ck.key)
            self._entries.note_use(ck.key)
            return ck, True, None
        self._counters.misses += 1
        return ck, False, (finished, solo)

    def _shelve(self, key: str) -> MemorizedResult:
        return MemorizedResult(self.store, (self.function_id, key), mmap_mode=self.mmap_mode,
                               verbose=max(self._verbose - 1, 0), timestamp=self.timestamp)

    def call_and_shelve(self, *args: Any, **kwargs: Any) -> MemorizedResult | NotMemorizedResult:
        """Compute (if needed) and cache the call; return a :class:`MemorizedResult` handle.

        One key for the whole call, and a hit or a miss in :meth:`cache_info` as a call makes.
        With caching disabled (``FNCACHE_DISABLE``), the result itself in a NotMemorizedResult."""
        if DISABLED[0]:
            return NotMemorizedResult(self.__wrapped__(*args, **kwargs))
        ck, hit, passed = self._shelving(args, kwargs)
        if hit:
            return self._shelve(ck.key)
        return self._shelved(ck.key, self._miss.call(ck, args, kwargs, *passed))

    def _shelved(self, key: str, value: Any) -> MemorizedResult | NotMemorizedResult:
        """The handle of a computed result, or the result itself in a :class:`NotMemorizedResult`
        where it was not stored (an input changed during the call, a result no pickle takes, a
        failed write: ``verbose`` and the log say why), whose ``.get()`` would only raise."""
        try:
            stored = self.store.contains(key)
        except Exception:  # the store failed: its handle could not read it either
            stored = False
        return self._shelve(key) if stored else NotMemorizedResult(value)

    def clear(self, warn: bool = True) -> int:
        """Remove every cached result of this function (all versions of its code)."""
        if warn and self._verbose > 0:
            print(f"[Memory] clearing {self.function_id}", file=sys.stderr)
        log.info("%s: clearing its cache", self.function_id)
        revive(self.store)
        return super().clear()

    def __reduce__(self) -> Any:
        from fncache.code.targets import importable

        if importable(self):
            return self.__qualname__  # type: ignore[attr-defined]  # set by update_wrapper
        # Credentials stay behind (a password in the URL or backend_options, an S3 secret):
        # workers take theirs from the environment, as fncache.stores documents.
        location, backend_options = public_location(self.location, self._backend_options)
        options = dict(
            backend=self.backend, ignore=self.ignore, mmap_mode=self.mmap_mode,
            compress=self.compress or False, verbose=self._verbose,
            cache_validation_callback=_portable(self.cache_validation_callback),
            backend_options=backend_options, ignore_globals=list(self.options.ignore_globals),
        )
        return (_rebuild, (type(self), _portable(self.__wrapped__), location, options))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(func={self.function_id}, location={shown_location(self.location)})"


def public_location(location: Any, backend_options: dict[str, Any] | None) -> tuple[Any, Any]:
    """``location`` and ``backend_options`` without credentials, for pickles."""
    clean, options = public_config(location, backend_options or {})
    return clean, (options if backend_options is not None else None)


def shown_location(location: Any) -> Any:
    """``location`` as ``repr`` shows it: a URL's password replaced by ``***``."""
    if isinstance(location, (list, tuple)):  # tiers
        return [shown_location(t) for t in location]
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

    async def call_and_shelve(self, *args: Any, **kwargs: Any  # type: ignore[override]
                              ) -> MemorizedResult | NotMemorizedResult:
        if DISABLED[0]:
            return NotMemorizedResult(await self.__wrapped__(*args, **kwargs))
        ck, hit, passed = self._shelving(args, kwargs)
        if hit:
            return self._shelve(ck.key)
        return self._shelved(ck.key, await self._miss.acall(ck, args, kwargs, *passed))


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
