"""The default store: a diskcache ``Cache`` in a local directory.

Layout: the value of key ``K`` is the diskcache entry ``K``, tagged with the function id so that
clearing one function is one indexed delete; its metadata (JSON) sits in an extra column of the
same row, ``fncache_meta``, which diskcache's own statements (all with explicit column lists)
ignore. One row per entry means one index entry and one write per store, and value and metadata
appear and vanish together. Small values live in SQLite, values over 32 KiB in files beside it;
the file is written first and the row published in one transaction, so a crash leaves at most an
orphan file, never a half-visible entry.

Fast paths: with the settings this store uses by default (no statistics, an eviction policy that
does not write on reads), a read is one SELECT on diskcache's own connection instead of
``Cache.get`` (the same statement with more Python around it), and a write is diskcache's own
transaction and cull around one INSERT or UPDATE. The SQL mirrors diskcache's (expire-time check,
mode and file columns; its triggers keep count and size), so a plain ``diskcache.Cache`` on the
directory still reads the values. An LRU size limit or statistics make reads write, so those reads
go through ``Cache.get``.

diskcache is safe for many threads and processes on one machine. It is *not* safe on NFS or other
network file systems (SQLite locking): use a Redis or S3 store to share a cache between machines.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from fncache._errors import StoreError
from fncache.stores._base import (
    EntryInfo,
    Store,
    decode_meta,
    encode_meta,
    join_parts,
    now,
    value_size,
)
from fncache.stores._lock import LeaseLock

__all__ = ["DiskStore"]

log = logging.getLogger("fncache")

_LOCK = "l:"
# diskcache's default is 1 GiB with silent eviction; a function cache must not drop results unasked.
_UNLIMITED = 2**62
# diskcache's storage modes (diskcache.core.MODE_RAW / MODE_BINARY): inline blob, or a file.
_MODE_RAW, _MODE_BINARY = 1, 2
_COLUMN = "fncache_meta"
_SELECT_VALUE = (
    "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1"
    " AND (expire_time IS NULL OR expire_time > ?)"
)
_SELECT_ROW = "SELECT rowid, filename, expire_time FROM Cache WHERE key = ? AND raw = 1"
_INSERT_ROW = (
    "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag, size,"
    f" mode, filename, value, {_COLUMN}) VALUES (?, 1, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_ROW = (
    "UPDATE Cache SET store_time = ?, expire_time = ?, access_time = ?, access_count = 0, tag = ?,"
    f" size = ?, mode = ?, filename = ?, value = ?, {_COLUMN} = ? WHERE rowid = ?"
)
_SELECT_ENTRIES = (
    f"SELECT rowid, key, size, value, store_time, access_time, {_COLUMN} FROM Cache"
    f" WHERE rowid > ? AND {_COLUMN} IS NOT NULL AND (expire_time IS NULL OR expire_time > ?)"
    " ORDER BY rowid LIMIT ?"
)
# Rows per transaction in clear(): large enough that a million entries take a few dozen
# transactions (diskcache's Cache.clear takes 100 rows per transaction: minutes for a million),
# small enough that a concurrent writer waits for one batch at most, not for the whole clear.
_CLEAR_BATCH = 20_000
_LIST_BATCH = 1_000


def _reraise(e: BaseException) -> None:
    raise e


def _identity(directory: str) -> tuple[int, int] | None:
    """(device, inode) of a directory, or None if it is gone."""
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _map_file(path: str) -> bytes | mmap.mmap | None:
    """A read-only map of a value file; ``None`` if it was deleted since its row was read."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        return None


def _uninitialized(size: int) -> Any:
    """A writable buffer of ``size`` bytes that is about to be overwritten whole.

    ``bytearray(size)`` zero-fills first: a third of the time of reading 256 MB from the page cache.
    numpy's allocator (when numpy is in use anyway) reuses freed pages; an anonymous map is the
    fallback (zeroed lazily by the kernel, page by page, as the read fills it).
    """
    np = sys.modules.get("numpy")
    if np is not None:
        return np.empty(size, dtype=np.uint8)
    if size == 0:
        return bytearray()
    return mmap.mmap(-1, size)


class DiskStore(Store):
    """A diskcache-backed store in ``directory`` (created with mode 0700).

    Options: ``size_limit`` (bytes; least recently used entries are evicted past it, default
    unlimited), and any other keyword is passed to :class:`diskcache.Cache`.
    """

    kind = "disk"
    accepts_parts = True  # large frames are written part by part, straight from the result's buffers

    def __init__(self, url: str, size_limit: int | None = None, **options: Any) -> None:
        if size_limit is not None and (not isinstance(size_limit, int) or size_limit <= 0):
            from fncache._errors import ConfigError

            raise ConfigError(
                f"size_limit: expected a positive number of bytes, got {size_limit!r}"
            )
        if size_limit is not None:
            options["size_limit"] = size_limit
        super().__init__(url, **options)
        self.directory = url
        self._cache: Any = None
        self._fast_read = False
        self._dir_id: tuple[int, int] | None = None
        self._open_lock = threading.Lock()
        self._size_limited = size_limit is not None
        self._writes = 0

    @property
    def cache(self) -> Any:
        """The underlying :class:`diskcache.Cache`, opened on first use (once, whatever the threads)."""
        cache = self._cache
        if cache is None:
            with self._open_lock:
                if self._cache is None:
                    self._cache = self._open()
                cache = self._cache
        return cache

    def _open(self) -> Any:
        import diskcache
        from diskcache.core import EVICTION_POLICY

        opts = dict(self.options)
        limit = opts.pop("size_limit", None)
        opts.setdefault("eviction_policy", "least-recently-used" if limit else "none")
        for attempt in range(50):
            try:
                if not os.path.isdir(self.directory):
                    # 0700: loading a pickle runs code, so nobody else may plant entries here.
                    os.makedirs(self.directory, mode=0o700, exist_ok=True)
                cache = diskcache.Cache(
                    self.directory, size_limit=limit or _UNLIMITED, tag_index=True, **opts
                )
                self._add_meta_column(cache)
                self._dir_id = _identity(self.directory)
                break
            except sqlite3.OperationalError as e:
                # Processes opening a new cache at once race on its schema; diskcache does not
                # retry that part, so we do.
                if "locked" not in str(e) or attempt == 49:
                    raise StoreError(f"cannot open cache directory {self.directory!r}: {e}") from e
                time.sleep(0.01 * (attempt + 1))
            except (OSError, sqlite3.Error) as e:
                raise StoreError(f"cannot open cache directory {self.directory!r}: {e}") from e
        # The read fast path reproduces Cache.get for these settings only: an LRU policy or
        # statistics write on every read, which needs diskcache's transaction.
        self._fast_read = (
            not cache.statistics and EVICTION_POLICY[cache.eviction_policy]["get"] is None
        )
        return cache

    @staticmethod
    def _add_meta_column(cache: Any) -> None:
        columns = [row[1] for row in cache._sql("PRAGMA table_info(Cache)").fetchall()]
        if _COLUMN in columns:
            return
        try:
            # O(1) in SQLite: existing rows read the new column as NULL without being rewritten.
            cache._sql(f"ALTER TABLE Cache ADD COLUMN {_COLUMN} BLOB")
        except sqlite3.OperationalError as e:
            if "duplicate column" not in str(e):  # another process added it first: fine
                raise

    def _guard(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (OSError, sqlite3.Error) as e:
            if isinstance(e, sqlite3.Error) or getattr(e, "errno", None) in (
                errno.ENOENT,
                errno.ESTALE,
            ):
                # The directory vanished or its database broke under us: reopen next time.
                self.close()
            raise StoreError(f"{what} failed on {self.directory!r}: {e}") from e

    # -- reading ---------------------------------------------------------------------------------
    def get(self, key: str) -> Any:
        """The value at ``key`` or ``None``; a file-backed value comes as a writable buffer.

        A file-backed value is read straight into a writable buffer (one copy, from the page
        cache), so the codec can hand out the arrays in it without copying them again. A file
        deleted between the row lookup and the read is a miss.
        """
        cache = self.cache
        if not self._fast_read:
            value = self._guard("read", cache.get, key, default=None, retry=True)
            if value is None:
                self._guard("read", self._drop_if_file_lost, cache, key, None)
            return value if isinstance(value, (bytes, bytearray)) else None
        return self._read(cache, key, self._read_file)

    def _read(self, cache: Any, key: str, read_file: Any) -> Any:
        """The unexpired value at ``key``: inline bytes, ``read_file(path)`` for a file-backed one
        (``None`` if the file is gone: the row is dropped, a miss), or diskcache's own reading for
        a value it wrote itself in another mode."""
        try:
            row = self._live_row(cache, key)
            if row is None:
                return None
            mode, filename, value = row
            if mode == _MODE_RAW:
                return value if isinstance(value, bytes) else None
            if mode == _MODE_BINARY and filename:
                found = read_file(os.path.join(cache.directory, filename))
                if found is None:
                    self._drop_if_file_lost(cache, key, filename)
                return found
        except (OSError, sqlite3.Error) as e:
            self._guard("read", _reraise, e)
        value = self._guard("read", cache.get, key, default=None, retry=True)
        return value if isinstance(value, (bytes, bytearray)) else None

    def _live_row(self, cache: Any, key: str) -> tuple[int, str | None, Any] | None:
        """(mode, filename, inline value) of the unexpired entry at ``key``, or None."""
        rows = self._select(cache, _SELECT_VALUE, (key, time.time()))
        return tuple(rows[0]) if rows else None

    def get_mmap(self, key: str) -> bytes | mmap.mmap | None:
        """The value at ``key`` as a read-only memory map of its file, or ``None``.

        Values kept inline in SQLite (under ``disk_min_file_size``, 32 KiB) come back as ``bytes``.
        The map stays valid if the entry is deleted or replaced meanwhile (POSIX keeps an unlinked
        file's pages while they are mapped), and published files are never modified in place.
        """
        found: bytes | mmap.mmap | None = self._read(self.cache, key, _map_file)
        return found

    @staticmethod
    def _select(cache: Any, statement: str, params: tuple[Any, ...]) -> list[Any]:
        # WAL readers are rarely refused, but a checkpoint or a recovery can still answer "database
        # is locked" past SQLite's busy timeout; diskcache retries its writers, so readers do too.
        deadline = None
        while True:
            try:
                return cache._sql(statement, params).fetchall()  # type: ignore[no-any-return]
            except sqlite3.OperationalError as e:
                if str(e) != "database is locked":
                    raise
                t = time.monotonic()
                if deadline is None:
                    deadline = t + float(cache.timeout)
                elif t > deadline:
                    raise
                time.sleep(0.001)

    def _drop_if_file_lost(self, cache: Any, key: str, filename: str | None) -> None:
        """Remove the entry at ``key`` if its row names a value file that no longer exists.

        Such a row (its file deleted by hand, a cleaner or a crashed disk) would otherwise read as a
        miss forever while blocking every ``add`` of a fresh value. The row is deleted only if it
        still names the same missing file, so an entry replaced or removed meanwhile is left alone.
        """
        rows = self._select(cache, "SELECT mode, filename FROM Cache WHERE key = ? AND raw = 1",
                            (key,))
        if not rows or rows[0][0] != _MODE_BINARY or not rows[0][1]:
            return
        lost = rows[0][1]
        if filename is not None and lost != filename:
            return  # replaced since we read it
        if os.path.exists(os.path.join(cache.directory, lost)):
            return
        with cache._transact(True) as (sql, _):
            gone = sql("DELETE FROM Cache WHERE key = ? AND raw = 1 AND filename = ?",
                       (key, lost)).rowcount
        if gone:
            log.warning("entry %s in %s lost its value file %s; removed", key, self.directory, lost)

    @staticmethod
    def _read_file(path: str) -> Any:
        try:
            f = open(path, "rb", buffering=0)
        except FileNotFoundError:
            return None  # deleted between the SELECT and the open: a miss, as in diskcache
        with f:
            size = os.fstat(f.fileno()).st_size
            buf = _uninitialized(size)
            view = memoryview(buf).cast("B")
            pos = 0
            while pos < size:
                n = f.readinto(view[pos:])
                if not n:
                    return None  # truncated under us: not a whole value
                pos += n
            return buf

    def contains(self, key: str) -> bool:
        return bool(self._guard("lookup", self.cache.__contains__, key))

    def entries(self) -> Iterator[EntryInfo]:
        cache = self.cache
        last = 0
        while True:
            # Batches by rowid: no read transaction stays open while the caller works.
            rows = self._guard(
                "list", self._select, cache, _SELECT_ENTRIES, (last, time.time(), _LIST_BATCH)
            )
            if not rows:
                return
            # diskcache records reads only under its LRU policy (used when size_limit is set).
            tracks_reads = cache.eviction_policy == "least-recently-used"
            for rowid, key, size, value, store_time, access_time, raw in rows:
                last = rowid
                meta = decode_meta(raw)
                created = float(meta.get("created") or store_time or 0.0)
                accessed = access_time if tracks_reads else None
                if not size and value is not None:
                    size = len(value)
                yield EntryInfo(
                    key=key,
                    size=int(meta.get("size") or size or 0),
                    created=created,
                    accessed=float(accessed) if accessed else None,
                    meta=meta,
                )

    def volume(self) -> int:
        return int(self._guard("stat", self.cache.volume))

    def __len__(self) -> int:
        rows = self._guard(
            "stat", self._select, self.cache,
            f"SELECT COUNT(*) FROM Cache WHERE {_COLUMN} IS NOT NULL", (),
        )
        return int(rows[0][0])

    # -- writing ---------------------------------------------------------------------------------
    def add(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> bool:
        """Store unless a live entry is there. Atomic (one transaction): the first writer wins."""
        return bool(self._guard("write", self._put, key, value, meta, expire, True))

    def set(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> None:
        """Store, replacing any entry; atomic: readers see the old entry or the new one."""
        self._guard("write", self._put, key, value, meta, expire, False)

    def _put(self, key: str, value: Any, meta: dict[str, Any], expire: float | None,
             create_only: bool) -> bool:
        if self._cache is not None and _identity(self.directory) != self._dir_id:
            # The directory was deleted (or replaced) under us. SQLite would keep writing to the
            # unlinked database without an error and every result would silently be lost: start
            # a fresh store at the path instead. (Reads are not checked: a stat per hit would cost
            # more than serving a still-valid entry from the old file for a while.)
            log.warning("cache directory %s was removed or replaced; reopening it", self.directory)
            self.close()
        cache = self.cache
        tag = meta.get("function") or None
        size = value_size(value)
        raw_meta = sqlite3.Binary(
            encode_meta(dict(meta, size=size, created=meta.get("created") or now()))
        )
        now_ = time.time()
        expire_time = None if expire is None else now_ + expire
        if size < cache.disk_min_file_size:
            mode, filename, db_value = _MODE_RAW, None, sqlite3.Binary(join_parts(value))
            size = 0  # as diskcache: its size column counts file-backed bytes only
        else:
            mode, filename, db_value = _MODE_BINARY, self._write_file(cache, value), None
        # diskcache's own transaction (BEGIN IMMEDIATE, retried while the database is busy; files
        # of replaced rows removed after COMMIT) and its cull of expired rows, as Cache.add does.
        with cache._transact(True, filename) as (sql, cleanup):
            # Insert first: a new key (the common case, a miss being stored) costs one statement;
            # the unique index on (key, raw) tells us when the key is taken.
            try:
                sql(_INSERT_ROW, (key, now_, expire_time, now_, tag, size, mode, filename,
                                  db_value, raw_meta))
            except sqlite3.IntegrityError:
                rowid, old_filename, old_expire = sql(_SELECT_ROW, (key,)).fetchall()[0]
                if create_only and (old_expire is None or old_expire > now_):
                    cleanup(filename)
                    return False
                cleanup(old_filename)
                sql(_UPDATE_ROW, (now_, expire_time, now_, tag, size, mode, filename, db_value,
                                  raw_meta, rowid))
            # Removing expired rows is housekeeping (readers never see them): writes that use expiry
            # or a size limit do it every time, others every fourth time.
            self._writes += 1
            if self._size_limited or expire is not None or self._writes % 4 == 0:
                cache._cull(now_, sql, cleanup)
        return True

    @staticmethod
    def _write_file(cache: Any, value: Any) -> str:
        """Write a large value to a new file named as diskcache names them; its relative name."""
        filename, full_path = cache.disk.filename()
        parts = value if isinstance(value, (list, tuple)) else [value]
        # Whole-buffer writes, part by part (a frame's large buffers are written from where the
        # result holds them): diskcache's own writer iterates a BytesIO by *lines*, which for
        # binary data means one write call every few hundred bytes.
        for attempt in range(10):
            os.makedirs(os.path.dirname(full_path), exist_ok=True)
            try:
                f = open(full_path, "xb", buffering=0)
                break
            except FileNotFoundError:
                # Another process removed the (then empty) directory between the two calls:
                # diskcache prunes empty directories when it deletes files. Try again, as it does.
                if attempt == 9:
                    raise
        with f:
            for part in parts:
                view = memoryview(part).cast("B")
                pos = 0
                while pos < view.nbytes:
                    pos += f.write(view[pos:])
        return filename  # type: ignore[no-any-return]

    def delete(self, key: str) -> bool:
        return bool(self._guard("delete", self.cache.delete, key, retry=True))

    def clear(self) -> int:
        """Remove every entry (and lock); returns how many entries there were.

        Rows go in batches of 20,000 per transaction, their files after each commit. Concurrent
        readers see an entry or a miss, never part of one (a reader that found a row whose file is
        already gone reads a miss). Writers wait for one batch at most; entries added meanwhile may
        or may not be removed.
        """
        return int(self._guard("clear", self._clear_rows, None))

    def clear_function(self, function: str) -> int:
        """Remove every entry of ``function`` (``module:qualname``) through the tag index."""
        return int(self._guard("clear", self._clear_rows, function))

    def _clear_rows(self, tag: str | None) -> int:
        cache = self.cache
        where = "rowid > ?" + (" AND tag = ?" if tag is not None else "")
        select = f"SELECT rowid, filename, {_COLUMN} IS NOT NULL FROM Cache WHERE {where}"
        select += " ORDER BY rowid LIMIT ?"
        count, last = 0, 0
        while True:
            with cache._transact(True) as (sql, cleanup):
                params = (last, tag, _CLEAR_BATCH) if tag is not None else (last, _CLEAR_BATCH)
                rows = sql(select, params).fetchall()
                if not rows:
                    return count
                first, last = rows[0][0], rows[-1][0]
                # A range, not an IN list: one statement per batch, whatever its size.
                if tag is None:
                    sql("DELETE FROM Cache WHERE rowid BETWEEN ? AND ?", (first, last))
                else:
                    sql("DELETE FROM Cache WHERE rowid BETWEEN ? AND ? AND tag = ?",
                        (first, last, tag))
                for _, filename, is_entry in rows:
                    count += is_entry
                    if filename is not None:
                        cleanup(filename)

    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        cache = self.cache
        name = _LOCK + key

        def try_add(token: str, ttl: float) -> bool:
            return bool(self._guard("lock", cache.add, name, token, expire=ttl, retry=True))

        return LeaseLock(
            try_add,
            lambda: self._guard("lock", cache.get, name, default=None, retry=True),
            lambda: self._guard("lock", cache.delete, name, retry=True),
            ttl=timeout,
        )

    def close(self) -> None:
        cache, self._cache = self._cache, None
        if cache is not None:
            try:
                cache.close()
            except Exception:  # closing a broken handle must not mask the original error
                pass
