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
from collections.abc import Callable
from typing import Any, TypeVar

from fncache._errors import ConfigError
from fncache._options import unknown_options
from fncache._units import parse_size
from fncache._usage import flush_for as flush_usage
from fncache.joblib.functions import (
    AsyncMemorizedFunc,
    AsyncNotMemorizedFunc,
    MemorizedFunc,
    NotMemorizedFunc,
    check_joblib_compress,
    check_validation_callback,
    public_location,
    shown_location,
)
from fncache.joblib.results import (
    MemorizedResult,
    NotMemorizedResult,
    backend_store_options,
    check_backend,
    check_mmap_mode,
    location_store,
    revive,
)
from fncache.stores import Store, open_store

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
        check_backend(backend)
        if location is not None:
            _make_locations(location_store(location))  # fail here, not on first use
        self.location = location
        self.backend = backend
        self.mmap_mode = check_mmap_mode(mmap_mode)
        check_joblib_compress(compress)
        self.compress = compress
        self._verbose = verbose
        self.backend_options = dict(backend_options or {})
        self.timestamp = time.time()

    @property
    def store(self) -> Store | None:
        """The store behind ``location`` (``None`` when caching is off)."""
        if self.location is None:
            return None
        return open_store(location_store(self.location), **backend_store_options(self.backend_options))

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
        check_validation_callback(cache_validation_callback)
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
        revive(store)
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
        meanwhile by other processes may survive. The uses this process has noted in this store and
        not yet written (a hit's record waits for the next flush, up to a minute) are written first,
        so they rank: the entries this process just used are the last to go.
        """
        store = self.store
        if store is None or (bytes_limit is None and items_limit is None and age_limit is None):
            return 0
        from fncache.stores.prune import DELETE_BATCH, plan_prune

        max_bytes, max_age = _parse_bytes(bytes_limit), _reduce_limits(items_limit, age_limit)
        revive(store)
        flush_usage(store.url)
        doomed = plan_prune(store, max_bytes, older_than=max_age, max_items=items_limit)
        return sum(store.delete_many([e.key for e in doomed[i:i + DELETE_BATCH]])
                   for i in range(0, len(doomed), DELETE_BATCH))

    def __getstate__(self) -> dict[str, Any]:
        location, backend_options = public_location(self.location, self.backend_options)
        return dict(self.__dict__, timestamp=None, location=location,
                    backend_options=backend_options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(location={shown_location(self.location)})"


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
        from fncache.joblib.subclass import joblib_memory_class
    except Exception as e:  # a broken joblib install: stay a plain fncache.Memory
        log.debug("joblib cannot be imported (%s): fncache.Memory is not a joblib.Memory", e)
        return None
    return joblib_memory_class(Memory)


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
