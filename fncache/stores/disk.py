"""The default store: a diskcache ``Cache`` in a local directory, read and written with fncache's SQL.

Layout: the value of key ``K`` is the diskcache row ``K``, tagged with the function id so that
clearing one function is one indexed delete; its metadata (JSON) sits in an extra column of the
same row, ``fncache_meta``, which diskcache's own statements (all with explicit column lists)
ignore. One row per entry means one index entry and one write per store, and value and metadata
appear and vanish together. Small values live in SQLite, values over 32 KiB in files beside it
(``xx/yy/<hex>.val``); the file is written first and the row published in one transaction, so a
crash leaves at most an orphan file, never a half-visible entry. A writer holds a lock
(``flock``) on its file until the row is published; orphans (unreferenced files nobody holds,
unwritten for 10 s, or any older than :data:`ORPHAN_GRACE`) are reported by ``fncache info`` and
swept by ``fncache clear`` and ``prune``.

Nothing in a row is trusted. diskcache's own reading (``Cache.get``) unpickles rows of its pickle
mode before fncache could check anything, so it is never used: rows are read with the statements
below, and only raw bytes (inline) or a regular value file inside the directory are accepted.
Any other row is damage: logged, removed without being read. Value file names are checked and
opened by :class:`~fncache.stores._diskfs.ValueFiles` (no file outside the store is ever read or
removed). The bytes returned go to the codec, which checks their checksum (and signature, with
a secret) before anything is unpickled. A plain ``diskcache.Cache`` on the directory still reads
the values. A damaged ``cache.db`` (garbage, truncated) is moved aside to
``cache.db.corrupt-<time>`` with a WARNING and a fresh one started.

diskcache is safe for many threads and processes on one machine. It is *not* safe on NFS or other
network file systems (SQLite locking): use a Redis or S3 store to share a cache between machines.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from fncache import _forks
from fncache._errors import IntegrityError, StoreError
from fncache.stores._base import (
    ORPHAN_GRACE,
    EntryInfo,
    FunctionSummary,
    Store,
    Use,
    join_parts,
    now,
    store_error,
    value_size,
)
from fncache.stores._diskcache import DEFAULT_TIMEOUT, Diskcache
from fncache.stores._diskdamage import DB_NAME, is_corrupt, quarantine, set_aside_odd_journals
from fncache.stores._diskfs import (
    UnsafeFile,
    make_private_dirs,
    map_file,
    read_file,
    unsafe_ancestors,
)
from fncache.stores._diskrows import entry, parse_row_meta
from fncache.stores._disksources import SourceFiles
from fncache.stores._disksql import COLUMNS, FIRST_ROWID, LAST_ROWID, MODE_BINARY, MODE_RAW
from fncache.stores._lock import LeaseLock
from fncache.stores._meta import encode_meta
from fncache.stores.gitignore import write_gitignore

__all__ = ["COLUMNS", "DB_NAME", "ORPHAN_GRACE", "DiskStore"]

log = logging.getLogger("fncache")

_LOCK = "l:"
_LIST_BATCH = 1_000


def _identity(db_path: str) -> tuple[int, int] | None:
    """(device, inode) of the database at ``db_path``, or None if it is gone.

    One ``lstat`` tells whether the directory or the database was deleted or replaced: while this
    process holds the database open, its inode cannot be given to another file, so the path names
    the same inode exactly when it still leads to the file this process writes (a new symlink to
    the same directory still does)."""
    try:
        st = os.lstat(db_path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


# The identity of each store directory at the last refresh() (see DiskStore.refresh).
_dir_ids: dict[str, tuple[int, int] | None] = {}


def check_size_limit(size_limit: Any) -> None:
    """The one check of a disk store's ``size_limit``: None, or a positive int of bytes (not a bool).

    Made where the store is opened and, through :func:`fncache.stores.check_store`, where a
    memoized function is configured.
    """
    if size_limit is not None and (type(size_limit) is not int or size_limit <= 0):
        from fncache._errors import ConfigError

        raise ConfigError(f"size_limit: expected a positive number of bytes, got {size_limit!r}")


class DiskStore(Store):
    """A diskcache-backed store in ``directory`` (created with mode 0700, parents too).

    Options: ``size_limit`` (bytes; least recently used entries are evicted past it, default
    unlimited), ``timeout`` (seconds a write waits for the database's write lock before it fails,
    default 10; reads and opening an existing store never wait for it),
    ``sqlite_wal_autocheckpoint`` (pages the write-ahead log may hold before a write checkpoints
    it itself, default 16,000; a thread does it before that), and any other keyword is passed to
    :class:`diskcache.Cache`. The writer's page cache is 4 MiB unless ``sqlite_cache_size`` is
    given or stored (diskcache's 32 MiB made each write of a large store slower; see
    docs/performance.md).
    """

    kind = "disk"
    lists_cheaply = True
    accepts_parts = True  # large frames are written part by part, straight from the result's buffers

    def __init__(self, url: str, size_limit: int | None = None, **options: Any) -> None:
        check_size_limit(size_limit)
        if size_limit is not None:
            options["size_limit"] = size_limit
        super().__init__(url, **options)
        self.directory = url
        # Frames checksummed as written (LateFrame) only for this class's own writes, not a subclass's
        self.writes_late = self.accepts_parts and all(getattr(type(self), n) is getattr(
            DiskStore, n) for n in ("add", "set", "_put", "_stored_value"))
        self._sources = SourceFiles(url)
        self._db: Diskcache | None = None
        self._ids: tuple[int, int] | None = None
        self._db_path = os.path.join(url, DB_NAME)
        self._open_lock = threading.Lock()
        _forks.track(self)
        self._size_limited = size_limit is not None
        self._writes = 0
        self._warned_exposed = False

    @property
    def db(self) -> Diskcache:
        """The opened database (once, whatever the threads)."""
        db = self._db
        if db is None:
            with self._open_lock:
                if self._db is None:
                    self._db = self._open()
                db = self._db
        return db

    @property
    def cache(self) -> Any:
        """The underlying :class:`diskcache.Cache`, for inspection only: its ``get`` unpickles."""
        return self.db.cache

    def _open(self) -> Diskcache:
        """Open the database (made if need be), moving a damaged or odd ``cache.db`` aside once and
        retrying while processes that open a new cache at once race on its schema."""
        opts = dict(self.options)
        limit = opts.pop("size_limit", None)
        moved = False
        # Opening waits at most the store's timeout in all (a paused writer must not hang us).
        deadline = time.monotonic() + float(opts.get("timeout", DEFAULT_TIMEOUT))
        for attempt in range(50):
            found = None
            try:
                found = self._db_file()
                if found is not None and not stat.S_ISREG(found.st_mode) and not moved:
                    # A symlink (SQLite would write wherever it points) or a FIFO, a directory.
                    quarantine(self.directory, "not a regular file", found.st_ino)
                    moved = True
                    continue
                db = self._connect(limit, opts)
                break
            except sqlite3.Error as e:
                if is_corrupt(e) and not moved:
                    quarantine(self.directory, str(e), None if found is None else found.st_ino)
                    moved = True
                    continue
                self._raise_unless_schema_race(e, attempt, deadline)
                time.sleep(0.01 * (attempt + 1))
            except OSError as e:
                raise StoreError(f"cannot open cache directory {self.directory!r}: {e}") from e
        self._warn_if_exposed()
        return db

    def _db_file(self) -> os.stat_result | None:
        """The ``lstat`` of ``cache.db`` (None if there is none yet), the directory made first."""
        if not os.path.isdir(self.directory):
            # 0700: loading a pickle runs code, so nobody else may plant entries here.
            make_private_dirs(self.directory)
            write_gitignore(self.directory)  # a new cache is not committed by accident
        try:
            return os.lstat(os.path.join(self.directory, DB_NAME))
        except FileNotFoundError:
            return None

    def _connect(self, limit: int | None, opts: dict[str, Any]) -> Diskcache:
        """Open the database itself, odd journal files set aside first; its identity recorded."""
        set_aside_odd_journals(os.path.join(self.directory, DB_NAME))
        db = Diskcache(self.directory, limit, opts)
        self._ids = _identity(self._db_path)
        return db

    def _raise_unless_schema_race(self, e: sqlite3.Error, attempt: int, deadline: float) -> None:
        """Raise the open's error unless it is a lock held by a process making the schema and
        attempts and time remain: diskcache does not retry that part, so we do."""
        if "locked" not in str(e) or attempt == 49 or time.monotonic() > deadline:
            raise StoreError(f"cannot open cache directory {self.directory!r}: {e}") from e

    def _warn_if_exposed(self) -> None:
        if self._warned_exposed or os.environ.get("FNCACHE_SECRET"):
            return
        exposed = unsafe_ancestors(self.directory)
        if exposed:
            self._warned_exposed = True
            log.warning(
                "cache directory %s can be replaced or written by other users (%s is writable by "
                "others or not yours): anyone there can plant entries that run code when loaded; "
                "make it private or set a secret (FNCACHE_SECRET)", self.directory, exposed[0])

    def _guard(self, what: str, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, its failures handled by :meth:`_failed`."""
        try:
            return fn(*args)
        except (OSError, sqlite3.Error) as e:
            return self._failed(what, e, fn, args)

    def _failed(self, what: str, e: OSError | sqlite3.Error, fn: Any, args: tuple[Any, ...]) -> Any:
        """After ``fn(*args)`` failed with ``e``: a database that broke under us is moved aside
        once and ``fn`` run again on a fresh one; any other failure (or a second) raises
        :class:`StoreError`, the store closed first where the directory vanished or the database
        failed (it is reopened on next use)."""
        if is_corrupt(e):
            ids = self._ids
            self.close()
            quarantine(self.directory, str(e), None if ids is None else ids[1])
            try:
                return fn(*args)
            except (OSError, sqlite3.Error) as again:
                e = again
        if isinstance(e, sqlite3.Error) or getattr(e, "errno", None) in (errno.ENOENT, errno.ESTALE):
            self.close()
        raise store_error(self, what, e) from e

    # -- reading ---------------------------------------------------------------------------------
    def get(self, key: str) -> Any:
        """The value at ``key`` or ``None``; a file-backed value comes as a writable buffer, or,
        from 1 MiB up, as a :class:`~fncache._codec.ReadFrame` if it is a frame whose checksum
        matched for ``key`` while it was read (``bytes(value)`` gives its bytes).

        A file deleted between the row lookup and the read is a miss. A row that is not raw bytes
        or a regular value file in the directory is removed unread (logged) and is a miss.
        """
        return self._guard("read", self._read, key, read_file)

    def get_mmap(self, key: str) -> bytes | mmap.mmap | None:
        """The value at ``key`` as a read-only memory map of its file, or ``None``.

        Values kept inline in SQLite (under ``disk_min_file_size``, 32 KiB) come back as ``bytes``.
        The map stays valid if the entry is deleted or replaced meanwhile (POSIX keeps an unlinked
        file's pages while they are mapped), and published files are never modified in place.
        """
        found: bytes | mmap.mmap | None = self._guard("read", self._read, key, map_file)
        return found

    def get_checked(self, key: str, check: Callable[[str, Any], bool],
                    mapped: bool = False) -> Any:
        """:meth:`get` (``mapped``: :meth:`get_mmap`) in one call: a disk store copies nothing
        from one place into another, so ``check`` is the caller's (see :meth:`Store.get_checked`).
        The hit path: :meth:`_guard` written out."""
        db = self._db
        found = None if db is None or mapped else db.inline_at(key)  # read here before: one step
        if found is not None:
            return found
        read = map_file if mapped else read_file
        try:
            return self._read(key, read)
        except (OSError, sqlite3.Error) as e:
            return self._failed("read", e, self._read, (key, read))

    def _read(self, key: str, read_file: Any) -> Any:
        """The unexpired value at ``key``: inline bytes, or ``read_file(fd)`` of its value file."""
        db = self._db
        if db is None:
            db = self.db
        if not db.records_reads:  # a small entry's value in one read (see inline_row)
            rows = db.inline_row(key)
            if not rows:
                return None
            if rows[0][0] is not None:
                return rows[0][0]
        now_, rows = db.value_row(key)
        if not rows:
            if db.records_reads:
                db.record_read(None, now_)
            return None
        rowid, mode, filename, value = rows[0]
        if filename is None and mode in (MODE_RAW, MODE_BINARY) and isinstance(value, bytes):
            found = value
        elif mode == MODE_BINARY and value is None:
            try:
                fd = db.files.open(filename)
            except FileNotFoundError:
                self._drop_if_file_lost(db, key, filename)
                return None
            except UnsafeFile as e:
                self._reject(db, key, rowid, mode, filename, str(e))
                return None
            try:
                found = read_file(fd, key)
            except (IntegrityError, MemoryError) as e:
                # Refused from its header (its size is not the one the header gives: a planted
                # sparse file), or too large to read here: damage, removed so no call pays again.
                reason = str(e) if isinstance(e, IntegrityError) else "too large to read"
                log.warning("entry %s in %s is damaged (%s); removed", key, self.directory, reason)
                db.remove_as_read(rowid, key, mode, filename)
                return None
        else:
            # diskcache's pickle or text modes, or anything else: never loaded, never trusted.
            self._reject(db, key, rowid, mode, filename, f"storage mode {mode!r}, not raw bytes")
            return None
        if db.records_reads:
            db.record_read(rowid, now_)
        return found

    def _reject(self, db: Diskcache, key: str, rowid: int, mode: object, filename: object,
                reason: str) -> None:
        """Remove a row fncache did not write, without reading it; its file goes only if its name
        is a value file's inside the store (see :meth:`ValueFiles.remove`)."""
        log.warning("entry %s in %s is not one fncache wrote (%s); removed without reading it",
                    key, self.directory, reason)
        db.remove_as_read(rowid, key, mode, filename)

    def _drop_if_file_lost(self, db: Diskcache, key: str, filename: str) -> None:
        """Remove the entry at ``key`` if its row names a value file that no longer exists.

        Such a row (its file deleted by hand, a cleaner or a crashed disk) would otherwise read as a
        miss forever while blocking every ``add`` of a fresh value. The row is deleted only if it
        still names the same missing file, so an entry replaced or removed meanwhile is left alone.
        """
        if db.files.exists(filename):
            return
        if db.drop_lost(key, filename):
            log.warning("entry %s in %s lost its value file %s; removed", key, self.directory,
                        filename)

    def contains(self, key: str) -> bool:
        return bool(self._guard("lookup", lambda: self.db.live(key)))

    def get_meta(self, key: str) -> dict[str, Any]:
        """The entry's metadata column, parsed as :meth:`entries` parses it (``{}`` if damaged)."""
        rows = self._guard("lookup", lambda: self.db.meta_row(key))
        if not rows:
            return {}
        meta, problem = parse_row_meta(rows[0][0], rows[0][1])
        return {} if problem is not None else dict(meta)

    def entries(self) -> Iterator[EntryInfo]:
        """Every entry; one whose metadata is damaged is listed with ``meta["damaged"]`` set."""
        start = FIRST_ROWID
        while True:
            # Batches by rowid: no read transaction stays open while the caller works.
            rows = self._guard("list", self._list_batch, start)
            if not rows:
                return
            tracks_reads = self.db.tracks_reads  # diskcache records reads only under LRU
            for row in rows:
                yield entry(row, tracks_reads)
            if rows[-1][0] >= LAST_ROWID:
                return
            start = rows[-1][0] + 1

    def _list_batch(self, start: int) -> list[Any]:
        return self.db.list_batch(start, _LIST_BATCH)

    def kept_summary(self) -> list[FunctionSummary] | None:
        """From the summary table that triggers keep with the rows (checked against the rows on
        every read, rebuilt if it disagrees: see :mod:`fncache.stores._disksummary`), without
        reading every entry; ``None`` while expired entries wait for removal (then
        :meth:`summary` lists)."""
        found = self._guard("summary", lambda: self.db.summary())
        return None if found is None else list(found)

    def volume(self) -> int:
        return int(self._guard("stat", lambda: self.db.cache.volume()))

    def record_use(self, uses: list[Use]) -> None:
        """Uses go to the rows' ``access_time``/``access_count`` in one transaction (see
        :meth:`Diskcache.record_uses`), unless the store is closed and its directory gone."""
        if self._db is not None or os.path.isdir(self.directory):  # (else not made again for them)
            self._guard("usage", self.db.record_uses, [(u.key, u.last, u.times) for u in uses])

    def __len__(self) -> int:
        return int(self._guard("stat", lambda: self.db.count()))

    # -- writing ---------------------------------------------------------------------------------
    def add(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> bool:
        """Store unless a live entry is there. Atomic (one transaction): the first writer wins."""
        return bool(self._guard("write", self._put, key, value, meta, expire, True))

    def set(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> None:
        """Store, replacing any entry; atomic: readers see the old entry or the new one."""
        self._guard("write", self._put, key, value, meta, expire, False)

    def _put(self, key: str, value: Any, meta: dict[str, Any], expire: float | None,
             create_only: bool) -> bool:
        """Write one entry: its value file first (if large), then its row in one transaction."""
        self._reopen_if_replaced()
        db = self.db
        tag = meta.get("function") or None
        size = value_size(value)
        fields = dict(meta, size=size, created=meta.get("created") or now())
        raw_meta = encode_meta(fields)
        now_ = time.time()
        expire_time = None if expire is None else now_ + expire
        mode, filename, db_value, fd, size = self._stored_value(db, value, size)
        try:
            # diskcache's transaction (BEGIN IMMEDIATE, retried while the database is busy) and its
            # cull of expired rows, as Cache.add does; files of replaced rows go after COMMIT.
            row = (now_, expire_time, tag, size, mode, filename, db_value, raw_meta)
            if not db.put(key, row, fields, create_only, self._cull_now(expire)):
                return False
        except BaseException:
            if filename is not None:
                db.files.remove(filename)  # never published
            raise
        finally:
            if fd is not None:
                os.close(fd)  # its write lock: held until published or removed (see _orphans)
        return True

    def _reopen_if_replaced(self) -> None:
        """Close the database if the directory (or its database) was deleted or replaced."""
        if self._db is not None and _identity(self._db_path) != self._ids:
            # SQLite would keep writing to the unlinked database without an error and every result
            # would silently be lost: start a fresh store at the path instead. (Reads are not
            # checked: a stat per hit would cost more than serving a still-valid entry from the
            # old file for a while.)
            log.warning("cache directory %s was removed or replaced; reopening it", self.directory)
            self.close()

    def _stored_value(self, db: Diskcache, value: Any, size: int
                      ) -> tuple[int, str | None, Any, int | None, int]:
        """(mode, filename, value column, open value file, size column) of a value: inline bytes
        under the file size, else a new value file, written and still locked."""
        if size < db.min_file_size:
            # size 0, as diskcache: its size column counts file-backed bytes only
            return MODE_RAW, None, sqlite3.Binary(join_parts(value)), None, 0
        filename, fd = db.files.write(value)
        return MODE_BINARY, filename, None, fd, size

    def _cull_now(self, expire: float | None) -> bool:
        """Whether this write removes expired rows too: housekeeping (readers never see them),
        done by every write that uses expiry or a size limit, by every fourth of the others."""
        self._writes += 1
        return self._size_limited or expire is not None or self._writes % 4 == 0

    def delete(self, key: str) -> bool:
        """Remove the entry at ``key`` (its value file after the commit); atomic, idempotent."""
        return bool(self._guard("delete", self._delete, key))

    def _delete(self, key: str) -> bool:
        return self.db.delete(key)

    def delete_many(self, keys: list[str]) -> int:
        """Remove the entries at ``keys`` (a listing's: ``prune``, a filtered ``clear``), a
        batch of them per transaction, each batch atomic; the number there were."""
        return int(self._guard("delete", self._delete_many, keys))

    def _delete_many(self, keys: list[str]) -> int:
        return self.db.delete_keys(list(keys))

    # -- kept sources (explain's diffs): files under ``sources/`` (see _disksources) -------------
    keeps_sources = True

    def put_source(self, address: str, text: bytes) -> None:
        self._guard("write", lambda _: self.db, None)  # the store's directory, made as for an entry
        self._sources.put(address, text)

    def get_source(self, address: str) -> bytes | None:
        from fncache.code.sources import MAX_SOURCE

        return self._sources.get(address, MAX_SOURCE)

    def source_sizes(self) -> dict[str, int]:
        return self._sources.sizes()

    def delete_sources(self, addresses: Any) -> int:
        return self._sources.delete(list(addresses))

    def clear(self) -> int:
        """Remove every entry (and lock); returns how many entries there were.

        Rows go in batches of 20,000 per transaction, their files after each commit, and
        :attr:`progress` is told after each batch. Concurrent readers see an entry or a miss,
        never part of one (a reader that found a row whose file is already gone reads a miss).
        Writers wait for one batch at most; entries added meanwhile may or may not be removed.
        """
        return int(self._guard("clear", self._clear_rows, None))

    def refresh(self) -> None:
        """Reopen on next use if the directory was deleted (or replaced) since the last look.

        SQLite keeps using an unlinked database file without an error, so without this check a
        deleted cache would go on serving and accepting entries nobody else can see. One ``stat``.
        """
        directory = self.directory
        try:
            st = os.stat(directory)
            now_: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            now_ = None
        before = _dir_ids.get(directory)
        if now_ is None or (before is not None and before != now_):
            self.close()  # reopened (and the directory recreated) on next use
        _dir_ids[directory] = now_

    def clear_function(self, function: str) -> int:
        """Remove every entry of ``function`` (``module:qualname``) through the tag index."""
        return int(self._guard("clear", self._clear_rows, function))

    def _clear_rows(self, tag: str | None) -> int:
        return self.db.clear_rows(tag, self.progress)

    # -- orphaned value files --------------------------------------------------------------------
    def orphans(self, grace: float = ORPHAN_GRACE) -> tuple[int, int]:
        """(count, bytes) of value files that no row references and no writer is writing: left
        by writers killed while writing a file or before publishing its row.

        A writer holds a lock on its file until the row is published (the kernel drops it if
        the writer dies); an unreferenced file is an orphan once nobody holds it and it was last
        written over 10 s ago, or, whoever holds it, over ``grace`` seconds ago (and for writers
        that take no lock: older versions, systems without ``flock``)."""
        return self._guard("scan", self._orphans, grace, False)  # type: ignore[no-any-return]

    def sweep_orphans(self, grace: float = ORPHAN_GRACE) -> tuple[int, int]:
        """Remove the files :meth:`orphans` counts; returns (count, bytes) removed.

        Safe while other processes write: a file being written (or written but not yet published)
        is younger than ``grace`` and is left alone.
        """
        return self._guard("sweep", self._orphans, grace, True)  # type: ignore[no-any-return]

    def _orphans(self, grace: float, remove: bool) -> tuple[int, int]:
        db = self.db
        return db.files.orphans(grace, remove, db.filenames, db.references)

    @property
    def local_directory(self) -> str:
        return self.directory

    def database_bytes(self) -> int:
        """The size of the SQLite database files (``cache.db``, ``-wal``, ``-shm``)."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += os.stat(os.path.join(self.directory, DB_NAME + suffix)).st_size
            except OSError:
                pass  # no log file right now
        return total

    def integrity(self) -> str:
        """SQLite's ``quick_check`` of the database: ``"ok"`` or the first problem (slow: reads it
        all; for ``fncache doctor``)."""
        return str(self._guard("check", lambda: self.db.quick_check()))

    # -- locks -----------------------------------------------------------------------------------
    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        """A lease in row ``l:<key>`` holding the owner's token as raw bytes, never unpickled.

        Taking it is one transaction (create-only, an expired or malformed lease is replaced);
        releasing it is one ``DELETE`` that matches our token, so it is atomic.
        """
        name = _LOCK + key
        return LeaseLock(
            lambda token, ttl: bool(self._guard("lock", lambda: self.db.lease_add(name, token, ttl))),
            lambda: self._guard("lock", lambda: self.db.lease_read(name)),
            lambda: None,  # not used: the release below compares and deletes at once
            ttl=timeout,
            release=lambda token: self._guard("lock", lambda: self.db.lease_release(name, token)),
        )

    def reset_after_fork(self) -> None:
        """A forked child starts with a free open lock (a parent thread may have held it)."""
        self._open_lock = threading.Lock()

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception:  # closing a broken handle must not mask the original error
                pass
