"""``@fncache.memoize``: the memoized function wrapper.

A call goes: bind the arguments -> revalidate the (cached) code fingerprint -> digest each argument ->
key -> ``store.get`` -> on a hit, verify and unpickle; on a miss, compute (once per key among this
process's threads; across processes too with ``lock=True``), encode and ``store.add`` (create-only, so
the first writer wins and every reader sees one whole value).

Failure policy, in one place: the user's exceptions propagate and are not stored; store and I/O errors
become logged misses (``on_store_error="raise"`` raises them instead); a damaged or untrusted entry is
logged, deleted and recomputed; a result that cannot be pickled is returned and not stored; so is a
result whose inputs changed while it was computed, not provably by the function (see _store_result).
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import mmap
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable
from typing import Any, Generic, NamedTuple, ParamSpec, TypeVar, overload

from fncache import _codec, _hasher
from fncache._binding import Binder
from fncache._errors import (
    ConfigError,
    IntegrityError,
    LockTimeout,
    StoreError,
    UnhashableArgument,
)
from fncache._fingerprint import Fingerprint, fingerprint, mark_state, still_valid
from fncache.stores import Store, check_store, open_store, public_config, redact
from fncache.stores._base import value_size

__all__ = ["CacheInfo", "Memoized", "memoize"]

log = logging.getLogger("fncache")

#: Part of every key. Bump it whenever the bytes that enter a key change: it invalidates every cache.
KEY_SCHEMA = "fncache-key-2"
_PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
_KEY_PREFIX = _hasher.digest((KEY_SCHEMA, _PY))

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


class _Flight:
    """One in-process computation of a key that other threads may wait on.

    The owner holds ``running`` (acquired at creation) until it is done; waiters acquire and release
    it. A bare lock, not an Event: one is made per miss, and an Event costs a Condition and two locks.
    """

    __slots__ = ("running", "value", "ok")

    def __init__(self) -> None:
        self.running = threading.Lock()
        self.running.acquire()
        self.value: Any = None
        self.ok = False

    def wait(self) -> None:
        with self.running:
            pass


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def _secret_from(secret: str | bytes | None) -> bytes | None:
    if secret is None:
        secret = os.environ.get("FNCACHE_SECRET") or None
    if secret is None:
        return None
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, bytes) or not secret:
        raise ConfigError("secret: expected a non-empty str or bytes")
    return secret


_ON_UNHASHABLE = ("raise", "call")
_ON_STORE_ERROR = ("log", "raise")
_SCHEMES = ("file://", "memory://", "redis://", "rediss://", "unix://", "s3://")


class Memoized(Generic[P, R]):
    """A function whose results are cached by the content of its code and arguments.

    Thread-safe; safe to share between processes through its store. See :func:`memoize` for the
    options. Attributes: ``__wrapped__`` (the function), ``store`` (opened on first use), ``function_id``
    (``module:qualname``, the name entries are listed and cleared by).
    """

    def __init__(
        self,
        func: Callable[P, R],
        *,
        store: str | os.PathLike[str] | Store | None = None,
        ignore: Iterable[str] = (),
        version: str | None = None,
        expire: float | None = None,
        lock: bool = False,
        lock_timeout: float = 600.0,
        secret: str | bytes | None = None,
        compress: Any = None,
        on_unhashable: str = "raise",
        on_store_error: str = "log",
        depends_on: Iterable[Any] = (),
        track_versions: bool = False,
        store_options: dict[str, Any] | None = None,
        verbose: bool | None = None,
        mmap_mode: str | None = None,
    ) -> None:
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
        if isinstance(ignore, str):
            raise ConfigError("ignore: expected a list of parameter names, not a single string")
        if version is not None and not isinstance(version, str):
            raise ConfigError(f"version: expected a str, got {type(version).__name__}")
        if expire is not None and not _positive_seconds(expire):
            raise ConfigError(f"expire: expected a positive number of seconds, got {expire!r}")
        if not _positive_seconds(lock_timeout):
            raise ConfigError(f"lock_timeout: expected a positive number of seconds, got {lock_timeout!r}")
        for name, flag in (("lock", lock), ("track_versions", track_versions)):
            if not isinstance(flag, bool):  # lock="no" would mean True
                raise ConfigError(f"{name}: expected True or False, got {flag!r}")
        if verbose is not None and not isinstance(verbose, bool):
            raise ConfigError(f"verbose: expected True, False or None, got {verbose!r}")
        depends_on = _check_depends_on(depends_on)
        if on_unhashable not in _ON_UNHASHABLE:
            raise ConfigError(f"on_unhashable: expected one of {_ON_UNHASHABLE}, got {on_unhashable!r}")
        if on_store_error not in _ON_STORE_ERROR:
            raise ConfigError(f"on_store_error: expected one of {_ON_STORE_ERROR}, got {on_store_error!r}")
        if store is not None and not isinstance(store, (str, os.PathLike, Store)):
            raise ConfigError(f"store: expected a path, a URL or a Store, got {type(store).__name__}")
        if store_options is not None and not isinstance(store_options, dict):
            raise ConfigError("store_options: expected a dict")
        limit = (store_options or {}).get("size_limit")
        if limit is not None and (type(limit) is not int or limit <= 0):
            raise ConfigError(f"size_limit: expected a positive number of bytes, got {limit!r}")
        if isinstance(store, str) and "://" in store and not store.startswith(_SCHEMES):
            raise ConfigError(f"store: unknown URL scheme in {redact(store)!r}; expected a directory "
                              "path, file://, memory://, redis://, rediss://, unix:// or s3://")
        # A bad Redis URL, chunk_size=0 or an unknown option fails here, not at the first call.
        check_store(store, dict(store_options or {}))
        self.__wrapped__ = func
        functools.update_wrapper(self, func)
        self._binder = Binder(func, ignore)
        # The code the fingerprint covers: a bound method's function (its instance is an argument).
        self._code = func.__func__ if isinstance(func, types.MethodType) else func
        self.ignore = sorted(self._binder.ignore)
        self.version = version
        self.expire = expire
        self.lock = lock
        self.lock_timeout = float(lock_timeout)
        self._secret = _secret_from(secret)
        self.compress = _codec.check_compress(compress)
        self.on_unhashable = on_unhashable
        self.on_store_error = on_store_error
        self.depends_on = depends_on
        self.track_versions = track_versions
        self._store_spec = store
        self._store_options = dict(store_options or {})
        self._store: Store | None = store if isinstance(store, Store) else None
        self.verbose = _env_flag("FNCACHE_VERBOSE") if verbose is None else verbose
        if mmap_mode not in (None, "r"):
            raise ConfigError(f"mmap_mode: expected None or 'r', got {mmap_mode!r}")
        self.mmap_mode = mmap_mode
        self.function_id = _function_id(func)
        # Classes of the function's own module enter argument digests without the module name, as
        # they do in its fingerprint (a script run as __main__ and imported share keys).
        self._root = getattr(func, "__module__", None) or ""
        self._fp: Fingerprint | None = None
        self._flights: dict[str, _Flight] = {}
        self._flights_lock = threading.Lock()
        self._finished = 0  # computations ended in this process (see _compute_once)
        self._stats = [0, 0, 0, 0]
        self._warned: set[str] = set()
        # Keys whose verified entry this process could not unpickle (a module it lacks): they are
        # misses here, and the entry is replaced (never deleted) once a recompute has succeeded.
        self._unloadable: set[str] = set()
        self._is_async = inspect.iscoroutinefunction(func)
        if self._is_async:
            # Frameworks that dispatch on it (web routes, test runners) must see a coroutine
            # function: asyncio.iscoroutinefunction reads this marker, inspect's (3.12+) the next.
            import asyncio.coroutines

            self._is_coroutine = getattr(asyncio.coroutines, "_is_coroutine", None)
            if hasattr(inspect, "markcoroutinefunction"):
                inspect.markcoroutinefunction(self)

    # -- configuration -------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        """The store, opened (lazily, once) from the ``store=`` option or the default."""
        if self._store is None:
            self._store = open_store(self._store_spec, **self._store_options)
        return self._store

    def _options(self) -> dict[str, Any]:
        # What travels when the function is pickled: configuration only. A secret given in code is
        # left out (it would travel in clear); workers take theirs from $FNCACHE_SECRET. So are
        # store credentials (a password in the URL or store_options, an S3 secret): workers take
        # them from their environment ($REDIS_PASSWORD, AWS_*), see fncache.stores.
        spec = self._store_spec if not isinstance(self._store_spec, Store) else self._store
        store, store_options = public_config(spec, self._store_options)
        return {
            "store": store,
            "ignore": self.ignore,
            "version": self.version,
            "expire": self.expire,
            "lock": self.lock,
            "lock_timeout": self.lock_timeout,
            "compress": self.compress,
            "on_unhashable": self.on_unhashable,
            "on_store_error": self.on_store_error,
            "depends_on": self.depends_on,
            "track_versions": self.track_versions,
            "store_options": store_options,
            "verbose": self.verbose,
            "mmap_mode": self.mmap_mode,
        }

    def __reduce__(self) -> Any:
        module = sys.modules.get(self.__module__)
        if module is not None and self.__module__ != "__main__":
            obj: Any = module
            for part in str(getattr(self, "__qualname__", "")).split("."):
                obj = getattr(obj, part, None)
            if obj is self:
                return self.__qualname__  # importable where it lands: plain pickle by name
        import cloudpickle

        return (_rebuild, (cloudpickle.dumps(self.__wrapped__), self._options()))

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return functools.partial(self, instance)

    def __repr__(self) -> str:
        spec = self._store_spec
        where = redact(os.fspath(spec)) if isinstance(spec, (str, os.PathLike)) else spec
        return f"<memoized {self.function_id} in {where or 'default store'}>"

    def __fncache_token__(self) -> Any:
        # A bound method's instance counts as it does in the key (the memo of the hasher's cyclic
        # pass ends ``self.f = memoize(self.f)``, where the instance holds this very object).
        return (self._fingerprint().digest, *self._binder.bound)

    __fncache_wraps__ = staticmethod(lambda m: m.__wrapped__)

    # -- keys ----------------------------------------------------------------------------------
    def _fingerprint(self) -> Fingerprint:
        fp = self._fp
        if fp is None or not still_valid(fp):
            fp = self._fp = fingerprint(self._code, versions=self.track_versions)
        return fp

    def _code_digest(self, fp: Fingerprint | None = None) -> bytes:
        if self.version is not None:
            return _hasher.digest(("version", self.function_id, self.version))
        if fp is None:
            fp = self._fingerprint()
        if not self.depends_on:
            return fp.digest
        from fncache._depends import depends_digest

        return _hasher.digest((fp.digest, depends_digest(self.depends_on)))

    def _arg_digests(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[bytes]:
        values = self._binder.bind(args, kwargs)
        digest = _hasher.digest
        root = self._root
        out = []
        for i, v in enumerate(values):
            try:
                out.append(digest(v, root))
            except UnhashableArgument as e:
                name = self._binder.names[i] if i < len(self._binder.names) else f"#{i}"
                raise UnhashableArgument(
                    f"{self.function_id}: argument {name!r} of type "
                    f"{type(v).__module__}.{type(v).__qualname__} cannot be hashed: {e}; key it with "
                    "fncache.ref(value, token) or fncache.register(type, fn), or leave it out with ignore=",
                    parameter=name,
                    type_name=type(v).__qualname__,
                ) from e
        return out

    def _key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, list[bytes]]:
        arg_digests = self._arg_digests(args, kwargs)
        return self._key_from(arg_digests), arg_digests

    def _key_from(self, arg_digests: list[bytes], fp: Fingerprint | None = None) -> str:
        parts = [_KEY_PREFIX, self._code_digest(fp), *arg_digests]
        if self.ignore:
            parts.append(_hasher.digest(("ignore", tuple(self.ignore))))
        return _hasher._digest_of(b"".join(parts)).hex()

    def key(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """The key (32 hex characters) of this call, exactly as a call would compute it."""
        return self._key(args, kwargs)[0]

    # -- store access with the failure policy --------------------------------------------------
    def _store_failed(self, what: str, e: Exception) -> None:
        """The failure policy for anything a store raised: a logged miss, or ``StoreError``.

        Not only :class:`StoreError`: whatever a store or the parsing of its data raises (a bug, a
        ``RecursionError`` on planted data) is a store failure, never an error of the call.
        """
        self._stats[3] += 1
        if self.on_store_error == "raise":
            if isinstance(e, (StoreError, OSError)):
                raise e
            raise StoreError(f"{self.function_id}: store {what} failed: {type(e).__name__}: {e}") from e
        kind = f"{what}:{type(e).__name__}"
        level = logging.WARNING if kind not in self._warned else logging.DEBUG
        self._warned.add(kind)
        log.log(level, "%s: store %s failed, treated as a miss: %s", self.function_id, what,
                e if isinstance(e, (StoreError, OSError)) else f"{type(e).__name__}: {e}")

    def _unloadable_entry(self, key: str, e: Exception) -> None:
        """A verified entry that this process cannot unpickle: a miss here, kept for the others.

        The entry passed its checksum (and signature), so the failure is the reader's: a module it
        lacks, an incompatible library version. Deleting it would wipe a result that every other
        process sharing the store can still read, so it stays; this process recomputes and replaces
        it only once that succeeded (see :meth:`_save`). Warned once per missing module.
        """
        self._stats[3] += 1
        if len(self._unloadable) > 10_000:  # bounded: a process that cannot load anything
            self._unloadable.clear()
        self._unloadable.add(key)
        missing = getattr(e, "name", None) if isinstance(e, ImportError) else None
        what = f"module {missing!r} is missing here" if missing else f"{type(e).__name__}: {e}"
        kind = f"unloadable:{missing or type(e).__name__}"
        level = logging.WARNING if kind not in self._warned else logging.DEBUG
        self._warned.add(kind)
        log.log(level, "%s: entry %s cannot be loaded in this process (%s); recomputing, and the "
                "entry is kept for processes that can load it", self.function_id, key, what)

    def _fetch(self, key: str) -> Any:
        """The stored frame at ``key`` or ``None``; a subclass may read it another way (mapped)."""
        if self.mmap_mode is not None:
            get_mmap = getattr(self.store, "get_mmap", None)
            if get_mmap is not None:
                return get_mmap(key)
        return self.store.get(key)

    def _accept(self, key: str, header: _codec.Header) -> bool:
        """Whether a verified entry may be used; ``False`` removes it and recomputes."""
        if self.expire is not None and header.created + self.expire < time.time():
            log.debug("%s: entry %s expired", self.function_id, key)
            return False
        return True

    def _lookup(self, key: str) -> tuple[bool, Any]:
        try:
            frame = self._fetch(key)
        except Exception as e:  # any store failure is a miss (see _store_failed)
            self._store_failed("read", e)
            return False, None
        if frame is None:
            return False, None
        try:
            # A mapped frame's buffers are left unread (header and pickle are still verified):
            # reading them to check them would cost what mapping saves.
            value, header = _codec.decode(frame, key, secret=self._secret,
                                          verify_buffers=type(frame) is not mmap.mmap)
        except IntegrityError as e:
            log.warning("%s: entry %s rejected and removed: %s", self.function_id, key, e)
            self._stats[3] += 1
            self._discard(key)
            return False, None
        except Exception as e:  # a verified pickle that does not load here (a module missing)
            self._unloadable_entry(key, e)
            return False, None
        if not self._accept(key, header):
            self._discard(key)
            return False, None
        return True, value

    def _discard(self, key: str) -> None:
        try:
            self.store.delete(key)
        except Exception as e:
            self._store_failed("delete", e)

    def _save(self, key: str, value: Any, duration: float, arg_digests: list[bytes],
              overwrite: bool = False) -> None:
        created = time.time()
        try:
            frame: Any = _codec.encode_parts(value, key, created=created, duration=duration,
                                             secret=self._secret, compress=self.compress)
            if not self.store.accepts_parts:
                frame = b"".join(frame)
        except _codec.UnpicklableResult as e:
            kind = "unpicklable"
            if kind not in self._warned:
                self._warned.add(kind)
                log.warning("%s: result not stored: %s", self.function_id, e)
            return
        meta = self._meta(created, duration, arg_digests)
        # An entry this process could not load is replaced now that a value was computed: a
        # create-only add would leave it in place, and this process missing on it forever.
        replace = overwrite or key in self._unloadable
        try:
            if replace:
                self.store.set(key, frame, meta, expire=self.expire)
                self._unloadable.discard(key)
            else:
                self.store.add(key, frame, meta, expire=self.expire)
            self._stats[2] += 1
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: stored %s (%d bytes)", self.function_id, key, value_size(frame))
        except Exception as e:
            self._store_failed("write", e)

    def _meta(self, created: float, duration: float, arg_digests: list[bytes]) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "function": self.function_id,
            "created": created,
            "duration": round(duration, 6),
            "python": _PY,
            "args": {n: d.hex() for n, d in zip(self._binder.names, arg_digests, strict=False)},
        }
        if self.version is not None:
            meta["version"] = self.version
        else:
            meta["components"] = self._fingerprint().components
        if self.depends_on:  # so that explain can name a changed data file
            from fncache._depends import depends_digest

            meta["depends_on"] = depends_digest(self.depends_on).hex()
        return meta

    # -- calling -------------------------------------------------------------------------------
    def _prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, list[bytes]] | None:
        try:
            return self._key(args, kwargs)
        except UnhashableArgument as e:
            if self.on_unhashable == "raise":
                raise
            if "unhashable" not in self._warned:
                self._warned.add("unhashable")
                log.warning("%s: called without caching: %s", self.function_id, e)
            return None

    def _say(self, what: str, key: str) -> None:
        if self.verbose:
            print(f"[fncache] {what} {self.function_id} {key[:12]}", file=sys.stderr)
        log.debug("%s %s %s", what, self.function_id, key)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if _env_flag("FNCACHE_DISABLE"):
            return self.__wrapped__(*args, **kwargs)
        if self._is_async:
            return self._acall(args, kwargs)  # type: ignore[return-value]
        prepared = self._prepare(args, kwargs)
        if prepared is None:
            return self.__wrapped__(*args, **kwargs)
        key, arg_digests = prepared
        finished = self._finished
        found, value = self._lookup(key)
        if found:
            self._stats[0] += 1
            self._say("hit", key)
            return value  # type: ignore[no-any-return]
        self._stats[1] += 1
        return self._compute_once(key, arg_digests, args, kwargs, finished)

    def _compute_once(self, key: str, arg_digests: list[bytes], args: tuple[Any, ...],
                      kwargs: dict[str, Any], finished: int | None = None) -> R:
        # Threads of this process that miss on one key wait for the first one's result.
        with self._flights_lock:
            flight = self._flights.get(key)
            owner = flight is None
            if owner:
                flight = self._flights[key] = _Flight()
        assert flight is not None
        if owner and finished is not None and finished != self._finished:
            # A computation of this function ended between our lookup and now, perhaps of this
            # very key (its flight already gone): look again before computing a second time. With
            # no computation in between, as in any single-threaded use, this costs nothing.
            found, value = self._lookup(key)
            if found:
                with self._flights_lock:
                    self._flights.pop(key, None)
                flight.value, flight.ok = value, True
                flight.running.release()
                return value  # type: ignore[no-any-return]
        if not owner:
            flight.wait()
            if flight.ok:
                self._say("shared", key)
                return flight.value  # type: ignore[no-any-return]
            # The owner raised (its exception is its caller's alone): the waiters elect a new owner
            # among themselves rather than all computing at once. A waiter that wakes after the new
            # owner already finished finds its result in the store.
            found, value = self._lookup(key)
            if found:
                return value  # type: ignore[no-any-return]
            return self._compute_once(key, arg_digests, args, kwargs)
        try:
            value = self._compute_and_store(key, arg_digests, args, kwargs)
            flight.value, flight.ok = value, True
            return value
        finally:
            with self._flights_lock:
                self._flights.pop(key, None)
                self._finished += 1
            flight.running.release()

    def _compute_and_store(self, key: str, arg_digests: list[bytes], args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> R:
        if not self.lock:
            return self._run(key, arg_digests, args, kwargs)
        try:
            guard = self.store.lock(key, self.lock_timeout)
            guard.__enter__()
        except LockTimeout:
            log.warning("%s: waited %.0fs for another process computing %s; computing too",
                        self.function_id, self.lock_timeout, key)
            return self._run(key, arg_digests, args, kwargs)
        except Exception as e:
            self._store_failed("lock", e)
            return self._run(key, arg_digests, args, kwargs)
        try:
            found, value = self._lookup(key)  # someone may have finished while we waited
            if found:
                self._say("hit", key)
                return value  # type: ignore[no-any-return]
            return self._run(key, arg_digests, args, kwargs)
        finally:
            try:
                guard.__exit__(None, None, None)
            except Exception as e:
                self._store_failed("unlock", e)

    def _run(self, key: str, arg_digests: list[bytes], args: tuple[Any, ...],
             kwargs: dict[str, Any], overwrite: bool = False) -> R:
        self._say("miss", key)
        before = self._before_run(key, arg_digests)
        start = time.perf_counter()
        value = self.__wrapped__(*args, **kwargs)
        self._store_result(before, key, value, time.perf_counter() - start, arg_digests, overwrite)
        return value

    def _before_run(self, key: str, arg_digests: list[bytes], loop: Any = None) -> _Before:
        """What ``key`` was made from, taken just before the function runs (see _store_result)."""
        fp = self._fingerprint() if self.version is None else None
        depends = _depends_digest(self.depends_on) if self.depends_on else None
        # The inputs may have moved since the lookup (another thread rebound a global): the key of
        # the inputs as they stand now is then another one, and this result must not go under key.
        same = fp is None or self._key_from(arg_digests, fp) == key
        return _Before(fp, depends, same, _alone(loop))

    def _store_result(self, before: _Before, key: str, value: Any, duration: float,
                      arg_digests: list[bytes], overwrite: bool = False, loop: Any = None) -> None:
        """Store a computed value under ``key``, unless what ``key`` was made from changed meanwhile
        in a way the function itself cannot be shown to have caused.

        The function was *alone* when no other thread (and, for a coroutine, no other task of its
        loop) existed when it began and when it ended: any change seen now was made by the call
        itself. Otherwise only the mutation of values reached privately (closures, defaults) is taken
        as the function's own; a global rebound or mutated meanwhile may be another thread's doing,
        and the function may have read the new value, so the result may not belong to ``key``. A
        ``depends_on`` input that changed is never the function's doing. Identity checks and
        re-hashes of the mutable values read, as on a hit.
        """
        fp = before.fp
        rebound, private = False, True
        changed: list[Any] = []
        if fp is not None and before.same:
            rebound, changed, private = fp.changes()
        alone = before.alone and _alone(loop)
        drifted = not before.same or (
            before.depends is not None and _depends_digest(self.depends_on) != before.depends)
        if drifted or ((rebound or changed) and not (alone or (not rebound and private))):
            log.info("%s: an input changed while the function ran, and not provably by the function "
                     "itself (another thread?): result returned, not stored", self.function_id)
            return
        if changed:
            # The function modified a value it reads (a log list, a counter, a memo dict): that is
            # state it writes, not an input, or no call would ever hit again. Key it by name (for
            # this function only) from now on.
            mark_state(self._code, changed)
            log.info("%s: %d global/closure value(s) modified by the function itself are keyed "
                     "by name from now on", self.function_id, len(changed))
        self._save(key, value, duration, arg_digests, overwrite)
        if changed and not rebound:
            # Also under the key the next call will compute. Not after a rebinding: the new key
            # holds the new value, which this result was not computed from.
            new_key = self._key_from(arg_digests)
            if new_key != key:
                self._save(new_key, value, duration, arg_digests, overwrite)

    async def _acall(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        prepared = self._prepare(args, kwargs)
        if prepared is None:
            return await self.__wrapped__(*args, **kwargs)  # type: ignore[misc]
        key, arg_digests = prepared
        found, value = self._lookup(key)
        if found:
            self._stats[0] += 1
            self._say("hit", key)
            return value
        self._stats[1] += 1
        import asyncio

        loop = asyncio.get_running_loop()
        flights: dict[Any, asyncio.Future[Any]] = self.__dict__.setdefault("_aflights", {})
        fut = flights.get((loop, key))
        if fut is not None:
            return await asyncio.shield(fut)
        fut = flights[(loop, key)] = loop.create_future()
        try:
            self._say("miss", key)
            before = self._before_run(key, arg_digests, loop)
            start = time.perf_counter()
            value = await self.__wrapped__(*args, **kwargs)  # type: ignore[misc]
            self._store_result(before, key, value, time.perf_counter() - start, arg_digests,
                               loop=loop)
            fut.set_result(value)
            return value
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # waiters re-raise it; mark it retrieved for the owner
            raise
        finally:
            flights.pop((loop, key), None)

    # -- the rest of the public surface ---------------------------------------------------------
    def call(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Compute the call whether or not it is cached, store the result (replacing), return it."""
        key, arg_digests = self._key(args, kwargs)
        self._stats[1] += 1
        return self._run(key, arg_digests, args, kwargs, overwrite=True)

    def check_call_in_cache(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Whether this call would be a hit (an entry exists; it is not unpickled)."""
        key = self._key(args, kwargs)[0]
        try:
            return self.store.contains(key)
        except Exception as e:
            self._store_failed("lookup", e)
            return False

    def clear(self) -> int:
        """Remove every stored entry of this function (all versions of its code); returns the count."""
        store = self.store
        clear_function = getattr(store, "clear_function", None)
        if clear_function is not None:
            return int(clear_function(self.function_id))
        n = 0
        for info in list(store.entries()):
            if info.function == self.function_id:
                n += store.delete(info.key)
        return n

    def cache_info(self) -> CacheInfo:
        """Hits, misses, stores and errors of this function in this process."""
        return CacheInfo(*self._stats)

    def explain(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Why this call is (or is not) a hit: see :func:`fncache.explain`."""
        from fncache._explain import explain_call

        return explain_call(self, args, kwargs)


class _Before(NamedTuple):
    """What a computation's key was made from, as it stood when the function started."""

    fp: Fingerprint | None  # the code fingerprint (None with version=)
    depends: bytes | None  # the depends_on digest
    same: bool  # the inputs still gave the key looked up
    alone: bool  # no other thread or task existed


def _depends_digest(items: Any) -> bytes:
    from fncache._depends import depends_digest

    return depends_digest(items)


# Threads that libraries start for their own I/O and never hand user code to: a Jupyter kernel's
# IOPub, heartbeat, control and history threads, fsspec's (and so the S3 store's) event loop. A notebook
# always has them, so counting them would keep every function that writes state from ever storing.
_SERVICE_THREAD_MODULES = ("ipykernel.", "IPython.", "zmq.", "jupyter_client.", "tornado.", "debugpy.")
_SERVICE_THREAD_NAMES = frozenset({"fsspecIO"})


def _fsspec_threads() -> set[threading.Thread]:
    """fsspec's I/O thread's helpers: the default executor of its event loop (DNS look-ups)."""
    asyn = sys.modules.get("fsspec.asyn")
    loop = (getattr(asyn, "loop", None) or [None])[0]
    executor = getattr(loop, "_default_executor", None)
    return set(getattr(executor, "_threads", ()))


def _is_service_thread(t: threading.Thread) -> bool:
    if "fsspec" in sys.modules and (t.name in _SERVICE_THREAD_NAMES or t in _fsspec_threads()):
        return True
    target = getattr(t, "_target", None)  # private, but stable since Python 2; None for subclasses
    owner = getattr(target, "__self__", None)
    where = type(owner) if owner is not None and not isinstance(owner, type) else target
    if where is None:
        where = type(t)
    module = getattr(where, "__module__", None) or ""
    return (module + ".").startswith(_SERVICE_THREAD_MODULES)


def _alone(loop: Any = None) -> bool:
    """Whether no other thread that can run user code exists (and, given an event loop, the current
    task is the loop's only one): then no other code can change what the function reads meanwhile.

    Library service threads (:data:`_SERVICE_THREAD_MODULES`) do not count: a guess, documented in
    the README, that they never run the user's code.
    """
    if threading.active_count() != 1:
        me = threading.current_thread()
        if any(t is not me and not _is_service_thread(t) for t in threading.enumerate()):
            return False
    if loop is None:
        return True
    import asyncio

    return len(asyncio.all_tasks(loop)) <= 1
def _positive_seconds(value: Any) -> bool:
    """Whether ``value`` is a finite positive number (not a bool, not NaN, not infinity)."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value > 0)


def _check_depends_on(depends_on: Any) -> tuple[Any, ...]:
    """``depends_on`` as a tuple; a bare string or path is refused rather than guessed at.

    A string is iterable, so ``depends_on="data.csv"`` would depend on the files ``d``, ``a``, ...
    (and ``"."`` on the whole working directory): refused, with the list spelling as the hint.
    """
    if isinstance(depends_on, (str, bytes, os.PathLike)):
        raise ConfigError(
            f"depends_on: expected a list of paths or objects, got the single {type(depends_on).__name__} "
            f"{depends_on!r}; write depends_on=[{depends_on!r}]"
        )
    try:
        return tuple(depends_on)
    except TypeError:
        raise ConfigError(
            f"depends_on: expected a list of paths or objects, got {type(depends_on).__name__}"
        ) from None


def _function_id(func: Any) -> str:
    """``module:qualname``, stable across processes: never a repr with a memory address."""
    if isinstance(func, functools.partial):
        inner = _function_id(func.func)
        module, _, inner_name = inner.partition(":")
        return f"{module}:partial({inner_name})"
    name: Any = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    if not isinstance(name, str):  # a callable object: named by its class
        func = type(func)
        name = func.__qualname__
    return f"{getattr(func, '__module__', None) or '?'}:{name}"


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


@overload
def memoize(
    func: None = None,
    /,
    *,
    store: str | os.PathLike[str] | Store | None = ...,
    ignore: Iterable[str] = ...,
    version: str | None = ...,
    expire: float | None = ...,
    lock: bool = ...,
    lock_timeout: float = ...,
    secret: str | bytes | None = ...,
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

    Options:
        store: a directory, a URL (``file://``, ``memory://``, ``redis://``, ``s3://``) or a
            :class:`~fncache.stores.Store`; default ``$FNCACHE_STORE``, ``$FNCACHE_DIR`` or
            ``~/.cache/fncache``.
        ignore: parameter names left out of the key (e.g. ``verbose``, ``n_jobs``).
        version: a string that replaces the code fingerprint: entries stay valid across code edits
            until you change it.
        expire: seconds after which an entry is a miss (and is removed).
        lock: also compute each key once across *processes* (a store lock, expiring after
            ``lock_timeout``); threads of one process always compute a key once.
        secret: sign entries (HMAC-SHA256) and refuse unsigned or mis-signed ones; default
            ``$FNCACHE_SECRET``. Never pickled with the function.
        compress: ``"zstd"``, ``"lz4"`` or ``True`` (zstd).
        on_unhashable: ``"raise"`` (:class:`~fncache.UnhashableArgument`) or ``"call"`` (run
            uncached, warn once).
        on_store_error: ``"log"`` (a store failure is a logged miss) or ``"raise"``.
        depends_on: a list of extra inputs the code does not show: objects, or paths whose content
            counts. A bare string or path is refused (``depends_on=["data.csv"]``, not
            ``depends_on="data.csv"``, which would otherwise be read one character at a time).
        track_versions: add the versions of the distributions the code reaches to the key.
        store_options: keyword options for opening ``store`` (e.g. ``size_limit``); unknown
            ones, a malformed store URL and invalid values are refused here. Credentials given
            here or in the URL are used but never pickled with the function nor shown in its
            ``repr``: workers take them from their environment (see :mod:`fncache.stores`).
        verbose: one line per call on stderr; default ``$FNCACHE_VERBOSE``.
        mmap_mode: ``"r"`` returns arrays of large results (stored in files, over 32 KiB) as
            read-only memory maps of the entry's file, as ``numpy.load(mmap_mode="r")`` does:
            loading takes about a millisecond whatever the size, and pages are read when used.
            The header and pickle are verified; the array bytes are not (without a secret), since
            checking them would read them all. Stores without files (memory, Redis, S3) ignore it.
    """
    # Validate option names now, so a typo fails at decoration time even before the function exists.
    unknown = set(options) - set(inspect.signature(Memoized.__init__).parameters) - {"self", "func"}
    if unknown:
        raise ConfigError(f"memoize: unknown option(s): {', '.join(sorted(unknown))}")
    if func is not None:
        return _memoized(func, options)  # memoize(f) and memoize(f, store=...) alike

    def decorate(f: Callable[..., Any]) -> Memoized[Any, Any]:
        return _memoized(f, options)  # type: ignore[no-any-return]

    return decorate
