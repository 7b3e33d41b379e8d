"""One function's entries in its store, under one failure policy.

:class:`Entries` reads, writes and removes the entries of one memoized function: ``lookup(key)``
verifies and unpickles, ``save(callkey, value, duration)`` encodes and adds create-only, ``discard``
deletes. What it does with failures, in one place:

* whatever a store raises is a logged miss (warned once per kind, then at debug level), or raised as it
  is with ``on_store_error="raise"``;
* an entry that fails its checksum or signature is logged, deleted and recomputed; a verified entry
  that does not unpickle here (a module this process lacks) is recomputed and replaced, never deleted
  (other processes may still read it);
* an entry the ``accept`` predicate refuses (expired, or the joblib layer's validation callback) is
  deleted and recomputed;
* a result that cannot be pickled is returned by the caller and not stored (warned once).

Configured, not subclassed: the ``reader`` says how a frame is read (``"plain"`` or ``"mmap"``:
memory-mapped where the store can), ``accept(header)`` what may be used, ``report(what, key)`` how
hits and misses are reported.
"""

from __future__ import annotations

import functools
import logging
import mmap
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from fncache import _codec
from fncache._callkey import CallKey
from fncache._errors import ConfigError, IntegrityError, StoreError
from fncache._options import Options
from fncache._usage import UsageLog, log_for
from fncache.stores import Store, env_store_error, open_store
from fncache.stores._base import value_size

__all__ = ["Counters", "Entries", "Strategies"]

log = logging.getLogger("fncache")

# Functions already warned about running without their secret in this process.
_WARNED_UNSIGNED: set[str] = set()


class Counters:
    """Hits, misses, stores and errors of one memoized function in this process."""

    __slots__ = ("hits", "misses", "stores", "errors")

    def __init__(self) -> None:
        self.hits = self.misses = self.stores = self.errors = 0


class Strategies(NamedTuple):
    """How one function's entries are read, accepted and reported (defaults: memoize's own).

    ``reader``: ``"plain"`` (bytes), ``"mmap"`` (a memory map where the store can give one) or a
    function ``(store, key, check) -> frame | None`` (``check`` as :meth:`Store.get_checked`
    takes). ``accept(header)``: whether a verified, unexpired entry may be used (False removes it
    and recomputes). ``report(what, key)``: called with ``"hit"``, ``"miss"`` or ``"shared"``.
    ``announce(callkey, args, kwargs)``: called when a computation starts; what it returns (if not
    None) is called with the seconds it took, once the function returned. ``map_result``: a
    computed value is returned as read back from the store (mapped), so the first call and later
    ones give the same kind of array.
    """

    reader: str | Callable[[Store, str, Callable[[str, Any], bool]], Any] = "plain"
    accept: Callable[[_codec.Header], bool] | None = None
    report: Callable[[str, str], None] | None = None
    announce: Callable[[CallKey, tuple[Any, ...], dict[str, Any]], Any] | None = None
    map_result: bool = False


class Entries:
    """Store access for one function: lookup, save, discard, each under the failure policy above.

    Thread-safe as far as the store is (every store is); the counters are best-effort under threads.
    """

    def __init__(self, function: str, options: Options, counters: Counters,
                 strategies: Strategies = Strategies()) -> None:
        self.function = function
        self.options = options
        self.counters = counters
        self.reader = strategies.reader
        self.validate = strategies.accept
        self.report = strategies.report or self._report
        #: Whether hits are reported to a strategy (else only logged at DEBUG, see _report).
        self.reports = strategies.report is not None
        #: Whether every verified entry is usable (no expiry, no accept strategy): not asked per hit.
        self.accepts_all = options.expire is None and strategies.accept is None
        self._store: Store | None = options.store if isinstance(options.store, Store) else None
        #: ``check(key, frame)``: whether a frame passes decode's checks (see Store.get_checked)
        self._secrets = options.accepted or None
        self.check = functools.partial(_codec.verify, secret=self._secrets)
        # Made with a secret elsewhere (a worker it was pickled to), but none here: computed
        # every time, nothing read or written, rather than trusting unsigned entries.
        self.off = options.signed and options.secret is None
        if self.off and function not in _WARNED_UNSIGNED:
            _WARNED_UNSIGNED.add(function)
            log.warning("%s was memoized with a secret, but no secret is set in this process "
                        "(FNCACHE_SECRET): its results are computed here and neither read from "
                        "nor written to the store", function)
        self._warned: set[str] = set()
        self._sources_kept: set[str] = set()  # source keys this process stored (see _sources)
        self._sources_last: tuple[Any, dict[str, str]] | None = None  # (fingerprint, its sources)
        # Keys whose verified entry this process could not unpickle (a module it lacks): they are
        # misses here, and the entry is replaced (never deleted) once a recompute has succeeded.
        self._unloadable: set[str] = set()
        self._usage: UsageLog | None = None

    @property
    def store(self) -> Store:
        """The store, opened (lazily, once) from the options or the default."""
        if self._store is None:
            try:
                self._store = open_store(self.options.store, **self.options.store_options)
            except ConfigError as e:
                if self.options.store is not None:
                    raise
                raise env_store_error(e) from e  # the environment's store: name its variable
        return self._store

    # -- the failure policy --------------------------------------------------------------------
    def failed(self, what: str, e: Exception) -> None:
        """The failure policy for anything a store raised: a logged miss, or ``StoreError``.

        Not only :class:`StoreError`: whatever a store or the parsing of its data raises (a bug, a
        ``RecursionError`` on planted data) is a store failure, never an error of the call.
        """
        self.counters.errors += 1
        if self.options.on_store_error == "raise":
            if isinstance(e, (StoreError, OSError)):
                raise e
            raise StoreError(f"{self.function}: store {what} failed: {type(e).__name__}: {e}") from e
        kind = f"{what}:{type(e).__name__}"
        level = logging.WARNING if kind not in self._warned else logging.DEBUG
        self._warned.add(kind)
        log.log(level, "%s: store %s failed, treated as a miss: %s", self.function, what,
                e if isinstance(e, (StoreError, OSError)) else f"{type(e).__name__}: {e}")

    def unloadable(self, key: str, e: Exception) -> None:
        """A verified entry that this process cannot unpickle: a miss here, kept for the others.

        The entry passed its checksum (and signature), so the failure is the reader's: a module it
        lacks, an incompatible library version. Deleting it would wipe a result that every other
        process sharing the store can still read, so it stays; this process recomputes and replaces
        it only once that succeeded (see :meth:`save`). Warned once per missing module.
        """
        self.counters.errors += 1
        if len(self._unloadable) > 10_000:  # bounded: a process that cannot load anything
            self._unloadable.clear()
        self._unloadable.add(key)
        missing = getattr(e, "name", None) if isinstance(e, ImportError) else None
        what = f"module {missing!r} is missing here" if missing else f"{type(e).__name__}: {e}"
        kind = f"unloadable:{missing or type(e).__name__}"
        level = logging.WARNING if kind not in self._warned else logging.DEBUG
        self._warned.add(kind)
        log.log(level, "%s: entry %s cannot be loaded in this process (%s); recomputing, and the "
                "entry is kept for processes that can load it", self.function, key, what)

    def warn_once(self, kind: str, message: str, *args: Any, later: int | None = None) -> None:
        """Log a warning the first time ``kind`` happens for this function (then at level
        ``later``, if given)."""
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning(message, *args)
        elif later is not None:
            log.log(later, message, *args)

    def _report(self, what: str, key: str) -> None:
        # verbose=True prints through the Verbose strategies (fncache._verbose), not here.
        log.debug("%s %s %s", what, self.function, key)

    # -- reading -------------------------------------------------------------------------------
    def read(self, key: str) -> Any:
        """The stored frame at ``key`` or None: bytes, or a memory map with the ``"mmap"`` reader."""
        store = self.store
        reader = self.reader
        # The codec's check travels with the read: a tiered store copies a value found in a far
        # tier into the near one only if it passes what decode will check (never a forged one).
        if reader == "plain":
            return store.get_checked(key, self.check)
        if reader == "mmap":
            return store.get_checked(key, self.check, True)
        return reader(store, key, self.check)  # type: ignore[operator]

    def accept(self, key: str, header: _codec.Header) -> bool:
        """Whether a verified entry may be used; False removes it and recomputes."""
        expire = self.options.expire
        if expire is not None and header.created + expire < time.time():
            log.debug("%s: entry %s expired", self.function, key)
            return False
        return self.validate is None or bool(self.validate(header))

    def lookup(self, key: str, again: bool = True) -> tuple[bool, Any]:
        """(True, value) for a usable entry, else (False, None); never raises but for the policy.

        The hit path: the plain reader and an entry with nothing to accept are taken inline.
        """
        if self.off:
            return False, None
        try:
            store = self._store if self._store is not None else self.store  # opened lazily
            # The codec's check travels with the read: a tiered store copies a value found in a
            # far tier into the near one only if it passes what decode will check (never a forged one).
            frame = store.get_checked(key, self.check) if self.reader == "plain" else self.read(key)
        except Exception as e:  # any store failure is a miss (see failed)
            self.failed("read", e)
            return False, None
        if frame is None:
            return False, None
        try:
            # The commonest frame (a small result, unsigned) in one step; any other, or one that
            # fails a check there, through decode (which names what failed). A mapped frame's
            # buffers are left unread (header and pickle are still verified): reading them to
            # check them would cost what mapping saves.
            small = _codec.decode_small(frame, key, not self.accepts_all) \
                if type(frame) is bytes and self._secrets is None else None
            value, header = small if small is not None else _codec.decode(
                frame, key, secret=self._secrets, verify_buffers=type(frame) is not mmap.mmap)
        except IntegrityError as e:
            log.warning("%s: entry %s rejected and removed: %s", self.function, key, e)
            self.counters.errors += 1
            try:
                rejected = store.reject(key)  # where it was read from
            except Exception as e2:
                self.failed("delete", e2)
                return False, None
            # A damaged copy was removed from one tier: another may hold a sound one.
            return self.lookup(key, False) if rejected and again else (False, None)
        except Exception as e:  # a verified pickle that does not load here (a module missing)
            self.unloadable(key, e)
            return False, None
        # (decode_small makes the header only where it is asked here)
        if not self.accepts_all and not self.accept(key, header):  # type: ignore[arg-type]
            self.discard(key)
            return False, None
        self.note_use(key)
        return True, value

    def note_use(self, key: str) -> None:
        """A use of the entry at ``key`` (a hit, a shelved result), batched in-process: no write
        here (see fncache._usage)."""
        usage = self._usage
        if usage is None:
            usage = self._usage = log_for(self.store)
        usage.note(self.function, key)

    def usable(self, key: str) -> bool:
        """Whether a verified, accepted entry is at ``key``, reading its header only (nothing is
        unpickled); an entry :meth:`accept` refuses is removed."""
        try:
            frame = self.store.get(key)
        except Exception as e:  # any store failure is a miss (see failed)
            self.failed("lookup", e)
            return False
        if frame is None or self.off:
            return False
        try:
            header = _codec.read_header(frame)
        except IntegrityError:
            return False
        if self.accept(key, header):
            return True
        self.discard(key)
        return False

    def contains(self, key: str) -> bool:
        """Whether an entry exists at ``key`` (not read, not verified)."""
        try:
            return self.store.contains(key)
        except Exception as e:
            self.failed("lookup", e)
            return False

    # -- writing -------------------------------------------------------------------------------
    def discard(self, key: str) -> None:
        """Delete the entry at ``key`` if there is one."""
        try:
            self.store.delete(key)
        except Exception as e:
            self.failed("delete", e)

    def save(self, ck: CallKey, value: Any, duration: float, overwrite: bool = False,
             meta_from: CallKey | None = None) -> None:
        """Store ``value`` under ``ck.key``: create-only (the first writer wins) unless ``overwrite``.

        The metadata comes from ``meta_from`` (default ``ck``): the parts of the key as they stand.
        """
        if self.off:
            return
        try:
            self.store  # noqa: B018 - opened here, where its failure is a write failure
        except Exception as e:
            self.failed("write", e)
            return
        created = time.time()
        frame = self._frame(ck, value, created, duration)
        if frame is None:
            return
        source = meta_from or ck
        meta = source.meta(created, duration)
        fp = source.fingerprint
        if fp is not None:
            self._add_sources(meta, fp)
        self._write(ck, frame, meta, overwrite)

    def _frame(self, ck: CallKey, value: Any, created: float, duration: float) -> Any:
        """The stored form of ``value`` (its parts if the store takes parts); None, warned once,
        for a result that cannot be pickled."""
        opts = self.options
        try:
            store = self.store
            frame: Any = _codec.encode_parts(value, ck.key, created=created, duration=duration,
                                             secret=opts.secret, compress=opts.compress,
                                             late=store.accepts_parts and store.writes_late)
            if not store.accepts_parts:
                frame = b"".join(frame)
        except _codec.UnpicklableResult as e:
            self.warn_once("unpicklable", "%s: result not stored: %s", self.function, e)
            return None
        return frame

    def _write(self, ck: CallKey, frame: Any, meta: dict[str, Any], overwrite: bool) -> None:
        """Put ``frame`` under ``ck.key``: create-only unless ``overwrite`` or the entry there could
        not be loaded; a store failure is a write failure (see :meth:`failed`)."""
        # An entry this process could not load is replaced now that a value was computed: a
        # create-only add would leave it in place, and this process missing on it forever.
        replace = overwrite or ck.key in self._unloadable
        expire = self.options.expire
        try:
            if replace:
                self.store.set(ck.key, frame, meta, expire=expire)
                self._unloadable.discard(ck.key)
            else:
                self.store.add(ck.key, frame, meta, expire=expire)
            self.counters.stores += 1
            if self._usage is not None:
                self._usage.due()  # the store is being written anyway: flush uses if due
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: stored %s (%d bytes)", self.function, ck.key, value_size(frame))
        except Exception as e:
            self.failed("write", e)

    def _add_sources(self, meta: dict[str, Any], fp: Any) -> None:
        """Keep the sources of the functions ``fp`` covers, for ``explain``'s diffs (see
        :mod:`fncache.code.sources`); their addresses go into ``meta``."""
        from fncache.code import sources as _sources

        last = self._sources_last
        if last is not None and last[0] is fp:  # the same code as the last store: nothing to read
            sources = last[1]
        else:
            sources = _sources.keep(self.store, fp.functions,
                                    _sources.signing_key(self.options.secret), self._sources_kept)
            self._sources_last = (fp, sources)
        if sources:
            meta["sources"] = sources

    def clear(self) -> int:
        """Remove every stored entry of this function (all versions of its code); the count."""
        return self.store.clear_function(self.function)
