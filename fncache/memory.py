"""``fncache.Memory``: a drop-in replacement for ``joblib.Memory``, keyed by fncache's fingerprints.

Change ``from joblib import Memory`` to ``from fncache import Memory`` and keep the rest:
``@memory.cache``, ``ignore=``, ``mmap_mode=``, ``call_and_shelve``, ``check_call_in_cache``,
``reduce_size``, ``cache_validation_callback`` and ``expires_after`` behave as joblib 1.6 documents
them. What changes is the key: a call is keyed by the content of the function *and the user code it
reaches* (see :mod:`fncache._fingerprint`) and of its arguments, not by the function's source text
and name. So a helper edit invalidates, a comment or formatting edit does not, reverting an edit
hits the old entries again, and the cache survives a new interpreter, another ``PYTHONHASHSEED``
or a notebook restart.

Where this layer deliberately differs from joblib:

* entries of an edited function are kept (they hit again if the edit is reverted), not wiped;
  ``clear()`` and ``reduce_size()`` remove them;
* the on-disk layout is fncache's (a diskcache store in ``LOCATION/fncache``), not joblib's;
* ``mmap_mode="c"``, ``"r+"`` and ``"w+"`` give writable arrays read into memory: an entry is
  checksummed and immutable, so writes to an array never reach the cache (``"r"`` maps read-only);
* messages go to stderr (``verbose >= 1``: computations; ``>= 5``: hits too) and to the
  ``fncache`` logger.

Every class here *is* or *wraps* :class:`fncache.Memoized`; the caching itself lives there.

Not for: reading a cache directory that joblib wrote (entries are recomputed once), or joblib's
pluggable store backends (``register_store_backend``): pass an fncache store URL as ``location``.
"""

from __future__ import annotations

import datetime
import functools
import inspect
import logging
import mmap
import os
import sys
import time
import types
from collections.abc import Callable
from pprint import pformat
from typing import Any

from fncache import _codec
from fncache._errors import ConfigError, IntegrityError
from fncache._memoize import Memoized, _secret_from
from fncache.stores import Store, open_store, public_config, redact

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

#: Subdirectory of a path ``location`` that holds the store (joblib uses ``LOCATION/joblib``).
SUBDIR = "fncache"
_MMAP_MODES = (None, "r", "r+", "w+", "c")
# joblib's compressors; fncache stores with zstd instead (faster, and as small or smaller).
_JOBLIB_COMPRESSORS = ("zlib", "gzip", "bz2", "lzma", "xz")


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------


def _store_spec(location: Any) -> str | Store:
    """The store behind a joblib ``location``: a path gets the ``fncache`` subdirectory."""
    if isinstance(location, Store):
        return location
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not isinstance(location, str) or not location:
        raise ConfigError(
            f"location: expected a directory path, a store URL or None, got {location!r}"
        )
    if "://" in location:
        return location
    return os.path.join(os.path.abspath(os.path.expanduser(location)), SUBDIR)


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


def _check_mmap_mode(mmap_mode: Any) -> str | None:
    if mmap_mode not in _MMAP_MODES:
        raise ConfigError(f"mmap_mode: expected one of {_MMAP_MODES}, got {mmap_mode!r}")
    return mmap_mode  # type: ignore[no-any-return]


def _check_backend(backend: Any) -> None:
    if backend != "local":
        raise ConfigError(
            f"backend: only 'local' is supported, got {backend!r}; for a shared cache pass an "
            "fncache store URL (redis://..., s3://...) as location"
        )


def _store_options(backend_options: dict[str, Any] | None) -> dict[str, Any]:
    # joblib's local backend reads compress/mmap_mode/verbose from here too; fncache takes those
    # from the Memory arguments, and hands the rest (e.g. size_limit) to the store.
    opts = dict(backend_options or {})
    for name in ("compress", "mmap_mode", "verbose"):
        opts.pop(name, None)
    return opts


# ---------------------------------------------------------------------------------------------
# Reading entries: memory maps, and a disk store whose directory was deleted
# ---------------------------------------------------------------------------------------------

_dir_ids: dict[str, tuple[int, int] | None] = {}


def _revive(store: Store) -> None:
    """Reopen a disk store whose directory was deleted (or replaced) since the last look.

    SQLite keeps using an unlinked database file without an error, so without this check a deleted
    cache would go on serving and accepting entries nobody else can see. Costs one ``stat``.
    """
    directory = getattr(store, "directory", None)
    if directory is None or store.kind != "disk":
        return
    try:
        st = os.stat(directory)
        now: tuple[int, int] | None = (st.st_dev, st.st_ino)
    except OSError:
        now = None
    before = _dir_ids.get(directory)
    if now is None or (before is not None and before != now):
        store.close()  # reopened (and the directory recreated) on next use
    _dir_ids[directory] = now


def _read(store: Store, key: str, mmap_mode: str | None) -> Any:
    """The frame at ``key`` (``None`` if absent); with ``mmap_mode="r"`` a memory map if possible.

    Only stores with ``get_mmap`` (disk: values in files, over 32 KiB) can map; smaller values and
    other stores' values are read into memory. ``"c"``, ``"r+"`` and ``"w+"`` read a private,
    writable copy: an entry is checksummed and immutable, so writes must never reach it.
    """
    _revive(store)
    get_mmap = getattr(store, "get_mmap", None)
    if mmap_mode == "r" and get_mmap is not None:
        return get_mmap(key)
    return store.get(key)


def _metadata(header: _codec.Header) -> dict[str, Any]:
    """joblib's metadata dict for an entry: when it was computed and how long that took."""
    return {"duration": header.duration, "time": header.created}


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


class MemorizedResult:
    """A small, picklable handle on one cached result; :meth:`get` loads it.

    Safe to send to other processes: it holds the store's configuration, not a connection.
    :meth:`get` raises ``KeyError`` once the entry is gone (cleared, evicted) or fails its checksum.
    """

    def __init__(
        self,
        location: Any,
        call_id: tuple[str, str],
        backend: str = "local",
        mmap_mode: str | None = None,
        verbose: int = 0,
        timestamp: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        _check_backend(backend)
        self.store = open_store(_store_spec(location))
        self.func_id, self.args_id = call_id
        self.mmap_mode = _check_mmap_mode(mmap_mode)
        self.verbose = verbose
        self.timestamp = timestamp
        self._metadata = metadata

    @property
    def location(self) -> str:
        return self.store.url

    @property
    def metadata(self) -> dict[str, Any]:
        """``{"duration": ..., "time": ...}`` of the entry, or ``{}`` if it is gone."""
        if self._metadata is None:
            frame = self.store.get(self.args_id)
            try:
                return _metadata(_codec.read_header(frame)) if frame is not None else {}
            except IntegrityError:
                return {}
        return self._metadata

    @property
    def duration(self) -> float | None:
        return self.metadata.get("duration")

    def get(self) -> Any:
        """The cached value. Raises ``KeyError`` if it is no longer in the cache."""
        frame = _read(self.store, self.args_id, self.mmap_mode)
        if frame is None:
            raise KeyError(f"{self.func_id}: result {self.args_id} is not in the cache")
        try:
            # As in Memoized._lookup: a mapped frame's array bytes are left unread.
            return _codec.decode(frame, self.args_id, secret=_secret_from(None),
                                 verify_buffers=type(frame) is not mmap.mmap)[0]
        except IntegrityError as e:
            raise KeyError(f"{self.func_id}: result {self.args_id} is damaged: {e}") from e

    def clear(self) -> None:
        """Remove the result from the cache; a later :meth:`get` raises ``KeyError``."""
        self.store.delete(self.args_id)

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, timestamp=None)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(location="{self.location}", func="{self.func_id}", '
                f'args_id="{self.args_id}")')


class NotMemorizedResult:
    """A result held in memory, for when caching is off (``Memory(None)``)."""

    __slots__ = ("value", "valid")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.valid = True

    def get(self) -> Any:
        if not self.valid:
            raise KeyError("No value stored.")
        return self.value

    def clear(self) -> None:
        self.valid, self.value = False, None

    def __getstate__(self) -> dict[str, Any]:
        return {"valid": self.valid, "value": self.value}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.valid, self.value = state["valid"], state["value"]

    def __repr__(self) -> str:
        if self.valid:
            return f"{type(self).__name__}({pformat(self.value)})"
        return f"{type(self).__name__} with no value"


# ---------------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------------


def _importable(func: Any) -> bool:
    module = sys.modules.get(getattr(func, "__module__", None) or "")
    if module is None or module.__name__ == "__main__":
        return False
    obj: Any = module
    for part in getattr(func, "__qualname__", "<>").split("."):
        obj = getattr(obj, part, None)
    return obj is func


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
    if isinstance(obj, types.FunctionType) and not _importable(obj):
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
    ) -> None:
        _check_backend(backend)
        if cache_validation_callback is not None and not callable(cache_validation_callback):
            raise ConfigError(
                f"cache_validation_callback needs to be callable, got {cache_validation_callback!r}"
            )
        compress = _check_compress(compress)
        super().__init__(
            func,
            store=_store_spec(location),
            ignore=list(ignore or ()),
            compress=compress,
            store_options=_store_options(backend_options),
            verbose=False,  # joblib's levels are applied by _say
        )
        self.location = location
        self.backend = backend
        self.mmap_mode = _check_mmap_mode(mmap_mode)
        self._verbose = int(verbose or 0)
        self.timestamp = timestamp if timestamp is not None else time.time()
        self.cache_validation_callback = cache_validation_callback
        self._backend_options = backend_options
        if self.mmap_mode is not None and compress:
            # joblib warns here too; verbose=0 promises silence, so the logger only hears it then.
            log.log(logging.WARNING if self._verbose else logging.INFO,
                    "%s: compressed results cannot be memory-mapped; they are loaded in memory",
                    self.function_id)

    @property
    def func(self) -> Callable[..., Any]:
        """The original, undecorated function."""
        return self.__wrapped__

    @property
    def func_id(self) -> str:
        return self.function_id

    # -- hooks into Memoized -------------------------------------------------------------------
    def _mapping(self) -> str | None:
        # Only "r" maps (see _read); a compressed entry is decompressed into memory whatever we do.
        return "r" if self.mmap_mode == "r" and self.compress is None else None

    def _fetch(self, key: str) -> Any:
        return _read(self.store, key, self._mapping())

    def _accept(self, key: str, header: _codec.Header) -> bool:
        if not super()._accept(key, header):
            return False
        callback = self.cache_validation_callback
        return callback is None or bool(callback(_metadata(header)))

    def _run(self, key: str, arg_digests: list[bytes], args: tuple[Any, ...],
             kwargs: dict[str, Any], overwrite: bool = False) -> Any:
        value = super()._run(key, arg_digests, args, kwargs, overwrite)
        if self._mapping() is not None:
            # Map the first result too: the first call and later ones return the same kind of array.
            found, mapped = self._lookup(key)
            if found:
                return mapped
        return value

    def _say(self, what: str, key: str) -> None:
        if self._verbose >= (1 if what == "miss" else 5):
            verb = "computing" if what == "miss" else "loading"
            print(f"[Memory] {verb} {self.function_id} {key[:12]}", file=sys.stderr)
        log.debug("%s %s %s", what, self.function_id, key)

    # -- joblib's surface ----------------------------------------------------------------------
    def call(self, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Run the function whatever the cache holds, store the result; ``(result, metadata)``."""
        key, arg_digests = self._key(args, kwargs)
        self._stats[1] += 1
        start = time.time()
        value = self._run(key, arg_digests, args, kwargs, overwrite=True)
        return value, {"duration": time.time() - start, "time": time.time()}

    def check_call_in_cache(self, *args: Any, **kwargs: Any) -> bool:
        """Whether this call would be a hit now, validation callback included; nothing is run."""
        if self.cache_validation_callback is None:
            _revive(self.store)
            return super().check_call_in_cache(*args, **kwargs)
        key = self.key(*args, **kwargs)
        try:
            frame = _read(self.store, key, None)
        except Exception as e:  # any store failure is a miss (see Memoized._store_failed)
            self._store_failed("lookup", e)
            return False
        if frame is None:
            return False
        try:
            header = _codec.read_header(frame)
        except IntegrityError:
            return False
        if self._accept(key, header):
            return True
        self._discard(key)
        return False

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
        if _importable(self):
            return self.__qualname__  # type: ignore[attr-defined]  # set by update_wrapper
        # Credentials stay behind (a password in the URL or backend_options, an S3 secret):
        # workers take theirs from the environment, as fncache.stores documents.
        location, backend_options = _public(self.location, self._backend_options)
        options = dict(
            backend=self.backend, ignore=self.ignore, mmap_mode=self.mmap_mode,
            compress=self.compress or False, verbose=self._verbose,
            cache_validation_callback=_portable(self.cache_validation_callback),
            backend_options=backend_options,
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
    return redact(location) if isinstance(location, str) else location


def _rebuild(cls: type[MemorizedFunc], func: Any, location: Any, options: dict[str, Any]) -> Any:
    return cls(func, location, **options)


class AsyncMemorizedFunc(MemorizedFunc):
    """:class:`MemorizedFunc` of a coroutine function: calling it returns an awaitable.

    The first call of a key returns the computed value (not a memory map) even with ``mmap_mode``.
    """

    async def call(self, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:  # type: ignore[override]
        key, arg_digests = self._key(args, kwargs)
        self._stats[1] += 1
        self._say("miss", key)
        start = time.perf_counter()
        value = await self.__wrapped__(*args, **kwargs)
        duration = time.perf_counter() - start
        self._save(key, value, duration, arg_digests, overwrite=True)
        return value, {"duration": duration, "time": time.time()}

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


def _parse_bytes(limit: int | str | None) -> int | None:
    if limit is None or isinstance(limit, int):
        return limit
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    try:
        return int(float(limit[:-1]) * units[limit[-1].upper()])
    except (KeyError, ValueError, TypeError, IndexError):
        raise ConfigError(
            f"bytes_limit: expected bytes or a string like '10M', got {limit!r}"
        ) from None


class Memory:
    """joblib's ``Memory``: a cache location and the defaults for the functions cached in it.

    ``location=None`` turns caching off: :meth:`cache` returns a :class:`NotMemorizedFunc` and
    nothing is written. A path location holds a disk store in ``LOCATION/fncache``; it may be
    deleted under a live ``Memory`` (it is recreated on next use). A store URL (``redis://``, ``s3://``,
    ``memory://``) shares the cache between machines. Picklable (as its configuration).
    """

    def __init__(
        self,
        location: Any = None,
        backend: str = "local",
        mmap_mode: str | None = None,
        compress: Any = False,
        verbose: int = 1,
        backend_options: dict[str, Any] | None = None,
    ) -> None:
        _check_backend(backend)
        if location is not None:
            _store_spec(location)  # fail here, not on first use
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

    def cache(
        self,
        func: Callable[..., Any] | None = None,
        ignore: list[str] | None = None,
        verbose: int | None = None,
        mmap_mode: str | None | bool = False,
        cache_validation_callback: Callable[[dict[str, Any]], bool] | None = None,
    ) -> Any:
        """Cache ``func``: ``@memory.cache`` or ``@memory.cache(ignore=[...], ...)``.

        ``verbose`` and ``mmap_mode`` default to the Memory's.
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
                cache_validation_callback=cache_validation_callback,
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

        Entries are ranked by their last access where the store records one (Redis, S3) and
        otherwise by when they were computed (disk and memory stores do not record reads): the most
        recent are kept, the rest go from the first one that does not fit ``bytes_limit`` or
        ``items_limit``.
        ``age_limit`` (a ``timedelta``) removes every entry older than that. Entries written
        meanwhile by other processes may survive. ``bytes_limit`` accepts ``"10M"``-style strings.
        """
        store = self.store
        if store is None or (bytes_limit is None and items_limit is None and age_limit is None):
            return 0
        max_bytes = _parse_bytes(bytes_limit)
        max_age = None
        if age_limit is not None:
            max_age = (age_limit.total_seconds() if isinstance(age_limit, datetime.timedelta)
                       else age_limit)
            if max_age < 0:
                raise ConfigError(f"age_limit: expected a non-negative duration, got {age_limit!r}")
        _revive(store)
        entries = sorted(store.entries(), key=lambda e: e.accessed or e.created, reverse=True)
        now, kept, size, full = time.time(), 0, 0, False
        removed = 0
        for e in entries:
            too_old = max_age is not None and now - (e.accessed or e.created) > max_age
            full = full or (items_limit is not None and kept >= items_limit) or (
                max_bytes is not None and size + e.size > max_bytes)
            if too_old or full:
                removed += store.delete(e.key)
            else:
                kept, size = kept + 1, size + e.size
        return removed

    def __getstate__(self) -> dict[str, Any]:
        location, backend_options = _public(self.location, self.backend_options)
        return dict(self.__dict__, timestamp=None, location=location,
                    backend_options=backend_options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(location={_shown(self.location)})"


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
