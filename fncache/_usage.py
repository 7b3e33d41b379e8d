"""Usage records: when each entry was last used and how often, kept in its store for ``fncache ls
--sort used``, ``clear --unused-for`` and ``prune``.

A hit must stay cheap, so it never writes: :meth:`UsageLog.note` adds the use to an in-process batch
(a dict update and a clock read). The batch goes to the store (:meth:`Store.record_use`, one call
for all the entries used) at the first hit or write after :data:`INTERVAL` seconds since the last
flush, and at interpreter exit. So each process writes an entry's record at most once per interval
(one minute), however often it is hit. No thread is started: a background flusher would count as
another thread that could change what a function reads (see :func:`fncache._threads.alone`).

Usage records are bookkeeping and untrusted: a flush that fails is logged at debug level and
dropped, concurrent flushes may lose one another's counts, and what a store reads back is checked
(:func:`fncache.stores._base.parse_use`). A record ranks entries for cleanup; it never decides a
value.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from typing import Any

from fncache import _forks
from fncache.stores._base import Store, Use

__all__ = ["INTERVAL", "UsageLog", "flush_all", "flush_for", "log_for"]

log = logging.getLogger("fncache")


def _interval() -> float:
    raw = os.environ.get("FNCACHE_USAGE_INTERVAL", "")
    try:
        value = float(raw) if raw else 60.0
    except ValueError:
        return 60.0
    return value if value >= 0 else 60.0


#: Seconds between two flushes of one store's batch (``$FNCACHE_USAGE_INTERVAL``, default 60),
#: read once at import: nothing on the hit path reads the environment.
INTERVAL = _interval()
# Past this many pending entries a batch is flushed early: memory stays bounded in a process that
# hits millions of distinct entries within one interval.
_MAX_PENDING = 100_000
_clock = time.time


class UsageLog:
    """The uses of one store's entries noted in this process and not yet written.

    ``note`` is called from many threads without a lock: a use noted while another thread swaps the
    batch out may be lost, which only makes a ranking slightly less exact.
    """

    __slots__ = ("store", "_pending", "_next", "_flushing")

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pending: dict[str, list[Any]] = {}
        self._next = _clock() + INTERVAL
        self._flushing = threading.Lock()

    def note(self, function: str, key: str) -> None:
        """One use of ``key`` now; flushes the batch if the interval is over."""
        # One clock read for the record's time and the interval: a wall-clock jump only moves one
        # flush, and a hit pays for one call.
        t = _clock()
        record = self._pending.get(key)
        if record is None:
            self._pending[key] = [function, t, 1]
            if len(self._pending) > _MAX_PENDING:
                self.flush()
        else:
            record[1] = t
            record[2] += 1
        if t >= self._next:
            self.flush()

    def due(self) -> None:
        """Flush if the interval is over (called after a write: the store is being written anyway)."""
        if self._pending and _clock() >= self._next:
            self.flush()

    def flush(self, wait: bool = False) -> None:
        """Write the batch to the store now (one :meth:`Store.record_use` call); never raises.
        ``wait``: if another thread is flushing, wait for it and flush after (else return)."""
        if not self._flushing.acquire(blocking=wait):
            return  # another thread is flushing this store right now
        try:
            self._next = _clock() + INTERVAL
            batch, self._pending = self._pending, {}
            if not batch:
                return
            uses = [Use(key, function, last, count) for key, (function, last, count) in batch.items()]
            try:
                self.store.record_use(uses)
            except Exception as e:  # bookkeeping: never a failure of the call that triggered it
                log.debug("usage records of %d entries not written to %s: %s", len(uses),
                          self.store, e)
        finally:
            self._flushing.release()


_logs: dict[int, UsageLog] = {}
_logs_lock = threading.Lock()


def _flush_before_executors_stop() -> None:
    """Also flush from :mod:`threading`'s exit hooks, not only from :mod:`atexit`.

    ``atexit`` runs after threading's hooks have shut down every ``concurrent.futures`` executor,
    and an S3 client resolves host names in its event loop's executor: by then it cannot connect
    ("cannot schedule new futures after shutdown"). threading's hooks run in reverse order of
    registration, so one registered when the first log is made (the store has been used, its
    executors exist) runs before they stop. ``threading._register_atexit`` is private (CPython 3.9+):
    without it the ``atexit`` flush remains, and S3 uses noted in a process's last interval are lost.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(flush_all)
        except RuntimeError:  # the interpreter is already shutting down
            pass


def log_for(store: Store) -> UsageLog:
    """The usage log of ``store`` in this process (one per store object)."""
    found = _logs.get(id(store))
    if found is None or found.store is not store:
        with _logs_lock:
            found = _logs.get(id(store))
            if found is None or found.store is not store:
                if not _logs:
                    _flush_before_executors_stop()
                found = _logs[id(store)] = UsageLog(store)
    return found


def flush_all() -> None:
    """Write every pending batch now (at exit, and for tests and scripts that want it written)."""
    for usage in list(_logs.values()):
        usage.flush()


def flush_for(url: str) -> None:
    """Write the pending batches of the stores at ``url`` now, waiting for a flush another thread
    is making (before a ranking by last use: ``Memory.reduce_size``)."""
    for usage in list(_logs.values()):
        if getattr(usage.store, "url", None) == url:
            usage.flush(wait=True)


def _forget_in_child() -> None:
    # A forked child inherits its parent's batches: writing them too would count those uses twice.
    # A lock held by a parent thread at the fork stays held in the child: start with a fresh one.
    global _logs_lock
    _logs_lock = threading.Lock()
    for usage in _logs.values():
        usage._pending = {}
        usage._flushing = threading.Lock()


atexit.register(flush_all)
_forks.on_fork(_forget_in_child)
