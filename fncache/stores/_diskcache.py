"""The SQL side of the disk store: diskcache's ``Cache`` table and the one adapter over its private API.

:class:`Diskcache` is the only code that touches diskcache's internals (checked against diskcache
5.4 to 5.6; ``tests/test_disk.py`` checks what it assumes against the installed version). The
statements it runs, and the schema, are in :mod:`fncache.stores._disksql`; a
listed row becomes an :class:`EntryInfo` through :func:`fncache.stores._diskrows.entry`.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
import time
from typing import Any

import fncache.stores._disksql as q
from fncache import _forks
from fncache.stores._base import FunctionSummary
from fncache.stores._checkpoint import Checkpointer
from fncache.stores._diskfs import ValueFiles
from fncache.stores._diskopen import (
    BoundedCache,
    Transaction,
    add_meta_column,
    check_wal_autocheckpoint,
    min_file_size,
    open_settings,
    partial_expire_index,
    read_only_keeper,
    read_policy,
    repair_settings,
    setting_ok,
    synchronous_level,
    text_of,
)
from fncache.stores._diskrows import number

log = logging.getLogger("fncache")

# diskcache's default is 1 GiB with silent eviction; a function cache must not drop results unasked.
_UNLIMITED = 2**62
# How a reader holds the pages it reads: in a page cache of its own (KiB), with no memory map.
# SQLite unmaps a reader's whole map at the first read after any write to the database, so with a
# map every miss (a write follows) paid for tearing it down and faulting its pages in again, more
# the larger the store: 110 µs a lookup at a million entries against 40 µs without (a map of the
# whole file, as earlier versions set). A cache is also dropped after a write, but holds only what
# was read since; 16 MiB keeps the index pages of a few thousand hot entries of a large store.
_READER_MMAP = 0
_READER_CACHE_KIB = 16384
# Keys whose rows this process found inline, and the rows' ids (see inline_row): at most this many
# (about 3 MB), emptied when full.
_ROWIDS = 16384
# A lease record is the holder's token, ``<pid>-<32 hex>``, as ASCII bytes: parsed by one bounded
# regular expression, never unpickled.
_TOKEN = re.compile(rb"[0-9]{1,10}-[0-9a-f]{32}")


# Seconds a disk operation waits for the database's write lock (and a read for a busy database)
# before it fails: a logged miss, or StoreError with on_store_error="raise". diskcache's own
# default, 60 s per statement and retried forever in its transactions, let one process paused
# inside a write (Ctrl-Z, a debugger, an ``sqlite3`` shell in ``BEGIN IMMEDIATE``) hang all others.
DEFAULT_TIMEOUT = 10.0

# Pages the write-ahead log may hold before a commit checkpoints it itself (SQLite's
# ``wal_autocheckpoint``, default 1,000). fncache leaves checkpoints to a thread
# (:mod:`fncache.stores._checkpoint`) woken every 1/32 of this many commits (about 3,000 log pages);
# this is the backstop, met when writes never pause long enough for the thread to copy the whole
# log: the log grows to about 64 MiB. ``sqlite_wal_autocheckpoint=N``: another (0: none at all).
WAL_AUTOCHECKPOINT = 16_000
# Commits per background checkpoint, as a fraction of the backstop.
_CHECKPOINT_SHARE = 32


def _autocheckpoint(opts: dict[str, Any]) -> int:
    """The store's ``sqlite_wal_autocheckpoint`` (checked), taken out of ``opts``: it is this
    process's, set on each of its connections, never stored in the Settings table (where a plain
    diskcache or an older fncache on the directory, which have no checkpoint thread, would take
    it for theirs)."""
    pages = opts.pop("sqlite_wal_autocheckpoint", None)
    if pages is None:
        return WAL_AUTOCHECKPOINT
    check_wal_autocheckpoint(pages)
    return int(pages)


class Diskcache:
    """The one place that uses diskcache's private API (checked against diskcache 5.4 to 5.6).

    It relies on: the ``Cache`` table's columns (:data:`COLUMNS`) and storage modes 1 (raw bytes
    inline) and 2 (bytes in a file), the ``Settings`` table's keys; ``Cache._sql`` (the
    connection's ``execute``); ``Cache._sql_retry`` (what ``Cache.__init__`` runs its writes
    through: bounded here, see :mod:`fncache.stores._diskopen`); ``Cache._con`` (its connection,
    opened again in a forked child) and ``Cache._txn_id`` (the thread whose transaction is open,
    which diskcache's own ``_transact`` joins instead of beginning another: see
    :class:`~fncache.stores._diskopen.Transaction`); ``Cache._cull(now, sql, cleanup)``;
    ``EVICTION_POLICY[...]["get"]``. The tests check these against the installed diskcache.
    Nothing of diskcache reads a value or deletes a file: rows are never given to ``Disk.fetch``
    (which unpickles) and the files of removed rows go to :meth:`ValueFiles.remove`, not to
    ``Disk.remove`` (which joins any name to the directory).

    Reads never wait for the write lock. They use connections of their own (one per thread), and
    an existing database is opened for them without diskcache's ``Cache.__init__``, which writes
    its settings on every open: the ``diskcache.Cache`` (for writes) is opened on the first write.
    Writes wait at most ``timeout`` seconds (:data:`DEFAULT_TIMEOUT`) for the write lock, then
    raise ``sqlite3.OperationalError`` (``database is locked``).
    """

    def __init__(self, directory: str, size_limit: int | None, options: dict[str, Any]) -> None:
        opts = dict(options)
        opts.setdefault("eviction_policy", "least-recently-used" if size_limit else "none")
        #: Set on every connection of this process that may commit (its readers, diskcache's).
        self._autocheckpoint = _autocheckpoint(opts)
        self.timeout = float(opts.pop("timeout", DEFAULT_TIMEOUT))
        self._options = opts
        self._size_limit = size_limit or _UNLIMITED
        self.directory = directory
        self.files = ValueFiles(directory)
        self._path = os.path.join(directory, "cache.db")
        self._readers = threading.local()
        self._rowids: dict[str, int] = {}
        self._keeper: sqlite3.Connection | None = None  # see _keep_wal
        #: Runs this process's checkpoints once it writes (see fncache.stores._checkpoint).
        self.checkpointer: Checkpointer | None = None
        self._wal = False  # until the settings are read (below)
        _forks.track(self)
        self._cache: Any = None
        self._cache_lock = threading.Lock()
        #: Whether this version's summary is kept (fncache's inserts then add to it: ``add_own``).
        self.summary_kept = False
        self.add_own: Any = None
        try:
            stored = self._settings_at_open()
        except BaseException:
            self.close()
            raise
        settings = open_settings(stored, opts)
        self.min_file_size = min_file_size(settings["disk_min_file_size"])
        self._synchronous = synchronous_level(settings["sqlite_synchronous"])
        # Readers are never locked out in WAL mode: only there may a read use the writer's
        # connection (whose busy timeout is the store's, where a reader's is 0; see value_row).
        self._wal = str(settings["sqlite_journal_mode"]).lower() == "wal"
        # What a read writes (an LRU policy records the time, LFU counts); None: nothing.
        self._on_read: str | None = read_policy(opts["eviction_policy"])
        self._statistics = bool(settings["statistics"])
        #: Whether a read records anything (:meth:`record_read`): not by default.
        self.records_reads = self._statistics or self._on_read is not None
        self.tracks_reads = opts["eviction_policy"] == "least-recently-used"
        if self._cache is not None:  # a new database: its writer is open already
            self._start_checkpoints()

    def _settings_at_open(self) -> dict[str, Any]:
        """The store's settings as stored; a new (or not fncache-ready) database gets its schema
        now, and Settings rows diskcache cannot open a connection with are put right first."""
        stored = self._stored_settings()
        if stored is not None and (not all(setting_ok(k, v) for k, v in stored.items())
                                   or self._would_leave_wal(stored)):
            repair_settings(self._path, self.timeout)  # diskcache could open no writer
            stored = self._stored_settings()
        if stored is None:
            self._open_cache()
            stored = self._stored_settings() or {}
        return stored

    def _would_leave_wal(self, stored: dict[str, Any]) -> bool:
        """Whether diskcache would switch this database out of WAL mode: SQLite cannot while any
        other connection is open (this process's readers among them), and diskcache retries the
        switch for 60 s on every connection it opens, so every write failed after a minute. A
        stored mode that disagrees with the database is put back to WAL (see repair_settings); one
        the caller asks for is refused."""
        asked = self._options.get("sqlite_journal_mode", stored.get("sqlite_journal_mode", "wal"))
        if str(asked).lower() == "wal":
            return False
        (mode,) = self._reader().execute("PRAGMA journal_mode").fetchone()
        if str(mode).lower() != "wal":
            return False
        if "sqlite_journal_mode" in self._options:
            from fncache._errors import ConfigError

            raise ConfigError(
                f"sqlite_journal_mode: {asked!r} for the store at {self.directory}, which is in WAL"
                " mode: SQLite cannot leave it while another connection is open (this process's"
                " own readers among them); open the store without sqlite_journal_mode, or change"
                " the mode with the sqlite3 shell while nothing uses the store")
        return True

    def _stored_settings(self) -> dict[str, Any] | None:
        """The settings of an existing database that fncache has opened before (it has the
        ``Cache`` table with fncache's column), read without any write; None for any other."""
        if not os.path.isfile(self._path):
            return None
        try:
            con = self._reader()
            columns = [row[1] for row in con.execute(q.TABLE_INFO).fetchall()]
            if q.META_COLUMN not in columns:
                return None
            return dict(con.execute(q.SETTINGS).fetchall())
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return None
            raise

    def _reader(self) -> sqlite3.Connection:
        """This thread's connection for reads (opened once per thread and process).

        Busy timeout 0: a read retries by itself (see :meth:`rows`) and the bookkeeping write of
        :meth:`record_read` is dropped at once when another process holds the write lock.
        """
        local = self._readers
        con: sqlite3.Connection | None = getattr(local, "con", None)
        if con is None:
            con = sqlite3.connect(self._path, timeout=0, isolation_level=None)
            con.text_factory = text_of
            con.execute(f"PRAGMA mmap_size = {_READER_MMAP}")
            con.execute(f"PRAGMA cache_size = -{_READER_CACHE_KIB}")
            # A reader commits usage records (a hit-only process's exit): it must not checkpoint
            # a log the writers let grow past SQLite's default.
            con.execute(f"PRAGMA wal_autocheckpoint = {self._autocheckpoint}")
            local.con, local.cursor = con, con.cursor()
        return con

    def _read_cursor(self) -> sqlite3.Cursor:
        """This thread's cursor on its reader (:meth:`_reader`): one for every read."""
        local = self._readers
        if getattr(local, "cursor", None) is None:
            self._reader()
        return local.cursor  # type: ignore[no-any-return]

    def reset_after_fork(self) -> None:
        """A forked child opens readers of its own (SQLite connections must not cross a fork; the
        parent's stay the parent's): the one way readers are told apart by process, so that the
        hit path (:meth:`value_row`) uses this thread's cursor without asking."""
        self._readers = threading.local()
        self._keeper = None
        if self._cache is not None:
            # A transaction the parent had open is not the child's: a child thread whose id
            # equals the parent thread's that held it would join it, committing statement by
            # statement (diskcache's connection itself is reopened in the child by Cache._con).
            self._cache._txn_id = None

    @property
    def cache(self) -> Any:
        """The ``diskcache.Cache`` (for writes), opened on first use; waits at most ``timeout``."""
        return self._writer(self.timeout)

    def _writer(self, wait: float) -> Any:
        cache = self._cache
        if cache is None:
            with self._cache_lock:
                if self._cache is None:
                    self._open_cache(wait)
                cache = self._cache
        return cache

    def _open_cache(self, wait: float | None = None) -> None:
        from fncache.stores import _disksummary  # with the writer: hits never load it

        wait = self.timeout if wait is None else wait
        cache = BoundedCache(self.directory, deadline=time.monotonic() + wait,
                             autocheckpoint=self._autocheckpoint,
                             size_limit=self._size_limit, tag_index=True,
                             timeout=self.timeout, **self._options)
        try:
            add_meta_column(cache)
            self._cache = cache
            partial_expire_index(self)
            self.summary_kept, self.add_own = _disksummary.ensure(self), _disksummary.add_own
            keeper, self._keeper = self._keeper, None
            if keeper is not None:  # a writing process's exit checkpoints (see _keep_wal)
                keeper.close()
            self._start_checkpoints()
        except BaseException:
            self._cache = None
            cache.close()
            raise

    def _start_checkpoints(self) -> None:
        """Leave this process's checkpoints to a thread (WAL mode, checkpoints on; once the
        settings are read: a new database's writer is opened before)."""
        if self._wal and self._autocheckpoint > 0 and self.checkpointer is None:
            self.checkpointer = Checkpointer(self._path, self._autocheckpoint // _CHECKPOINT_SHARE,
                                             self._synchronous)

    def rows(self, statement: str, params: tuple[Any, ...]) -> list[Any]:
        """All rows of one read-only statement."""
        # WAL readers are rarely refused, but a checkpoint or a recovery can still answer "database
        # is locked"; retried for up to ``timeout`` seconds.
        deadline = None
        cursor = self._read_cursor()
        while True:
            try:
                return cursor.execute(statement, params).fetchall()
            except sqlite3.OperationalError as e:
                if str(e) != "database is locked":
                    raise
                t = time.monotonic()
                if deadline is None:
                    deadline = t + self.timeout
                elif t > deadline:
                    raise
                time.sleep(0.001)

    def transact(self, wait: float | None = None) -> Transaction:
        """``(sql, doom)`` inside one write transaction; files passed to ``doom`` are removed
        (contained, see :class:`ValueFiles`) after the commit, none if the transaction fails.

        Waits at most ``wait`` seconds (default ``timeout``) for the write lock (SQLite's busy
        timeout, then retries until the deadline), then raises ``sqlite3.OperationalError``.
        Nested in this thread's open transaction, it joins it (no ``BEGIN`` or ``COMMIT`` of its
        own), as ``Cache._transact`` does.
        """
        return Transaction(self, self.timeout if wait is None else wait)

    def cull(self, now_: float, sql: Any, doom: Any) -> None:
        """Remove expired rows (and, past the size limit, rows by policy) inside a transaction."""
        self.cache._cull(now_, sql, doom)

    def record_read(self, rowid: int | None, now_: float) -> None:
        """What diskcache records on a read under an LRU/LFU policy or with statistics on.

        Bookkeeping only: a busy database loses this record rather than failing the read.
        """
        if not self._statistics and (self._on_read is None or rowid is None):
            return  # nothing to record (the default): no connection looked up
        try:
            con = self._reader()
            if self._statistics:
                con.execute(q.COUNT_STATISTIC, ("hits" if rowid is not None else "misses",))
            if self._on_read is not None and rowid is not None:
                update = self._on_read.format(now=repr(now_))
                con.execute(q.UPDATE_READ.format(update=update), (rowid,))
        except sqlite3.OperationalError as e:
            log.debug("read of row %s not recorded: %s", rowid, e)

    def record_uses(self, uses: list[tuple[str, float, int]]) -> None:
        """Add ``(key, last use, count)`` records to the rows in one transaction: ``access_time``
        becomes the later time, ``access_count`` grows (the columns diskcache's LRU and LFU
        policies use, so eviction ranks by the same uses); rows that are gone are skipped. Where
        the eviction policy already records every read in a column, that column is left to it."""
        sets = []
        if "access_time" not in (self._on_read or ""):
            sets.append(q.USE_TIME)
        if "access_count" not in (self._on_read or ""):
            sets.append(q.USE_COUNT)
        if not sets:
            return
        statement = q.UPDATE_USES.format(sets=", ".join(sets))
        params = [{"key": key, "last": last, "count": count} for key, last, count in uses]
        # Bookkeeping: not worth waiting for a busy database (these records are dropped instead).
        if self._cache is not None:
            with self.transact(wait=0.1) as (sql, _):
                for one in params:
                    sql(statement, one)
            return
        self._update_on_reader(statement, params)

    def _update_on_reader(self, statement: str, params: list[dict[str, Any]]) -> None:
        """One transaction of ``statement`` for each of ``params`` on this thread's reader: a
        process that only read (its calls all hit) has no writer open, and opening diskcache's
        writes its settings (4 ms, paid at exit), where an update of rows needs none of it."""
        con = self._reader()
        try:
            con.execute("PRAGMA busy_timeout = 100")
            con.execute(f"PRAGMA synchronous = {self._synchronous}")  # the store's, not FULL
            with _forks.Section():  # not split by a fork (see fncache._forks)
                con.execute("BEGIN IMMEDIATE")
                try:
                    con.executemany(statement, params)
                    con.execute("COMMIT")
                finally:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
        finally:
            # Never left open, whatever stopped it (an error, an interrupt): an open transaction
            # would hold the write lock and pin this reader's snapshot.
            try:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                con.execute("PRAGMA busy_timeout = 0")
            except sqlite3.Error:  # the connection is broken: this thread opens a fresh one
                con.close()
                self._readers.con = self._readers.cursor = None
        if self._wal and self._readers.con is con:
            self._keep_wal(con)

    def _keep_wal(self, con: sqlite3.Connection) -> None:
        """After a usage write with no writer open, close the reader that wrote while a read-only
        connection stays open (:func:`read_only_keeper`): no later close checkpoints and deletes the
        WAL (the last close of a process that only read synced the WAL and the database, and the
        next process re-created the WAL, syncing its header and directory). A writer opened later
        closes the keeper (:meth:`_open_cache`): a writing process's exit checkpoints as before."""
        if self._keeper is None:
            self._keeper = read_only_keeper(self._path)
        if self._keeper is not None:
            con.close()
            self._readers.con = self._readers.cursor = None

    # -- entries ---------------------------------------------------------------------------------
    def value_row(self, key: str, statement: str = q.SELECT_VALUE,
                  rowid: int | None = None) -> tuple[float, list[Any]]:
        """(now, the live row at ``key`` as ``[(rowid, mode, filename, value)]`` or ``[]``); with
        ``statement=q.SELECT_INLINE``, as ``[(value, rowid)]``, the value None unless the row holds
        raw bytes inline (``q.SELECT_INLINE_AT``: the same of the row at ``rowid``).

        The hit path: one statement on this thread's cursor, which a forked child never inherits
        (:meth:`reset_after_fork`); :meth:`rows` when there is none yet or the read was refused
        (it opens one, and retries while the database is locked; a read changes nothing). The
        first read after this thread's own commit goes to the connection that wrote it: a write
        empties every other connection's page cache, the writer's stays warm (a miss's lookup
        after the previous miss's write, 26-34 us on the reader, 12 us there, at 1M entries)."""
        now_ = time.time()
        params = (key, now_) if rowid is None else (rowid, key, now_)
        local = self._readers
        try:
            cursor = getattr(local, "after_write", None)
            if cursor is None:
                cursor = local.cursor
            else:
                local.after_write = None
                if self._cache._txn_id is not None:  # a transaction is open: not on its connection
                    cursor = local.cursor
            return now_, cursor.execute(statement, params).fetchall()
        except sqlite3.ProgrammingError:  # the writer's connection was closed since (diskcache's)
            local.own = None
        except (AttributeError, sqlite3.OperationalError):
            pass
        return now_, self.rows(statement, params)

    def inline_at(self, key: str) -> Any:
        """:meth:`inline_row`'s read by rowid in one step, on this thread's cursor; else None (a
        rowid whose row is gone, replaced or not inline is forgotten: the next read is by key)."""
        rowid = self._rowids.get(key)
        local = self._readers
        if rowid is None or self.records_reads or getattr(local, "after_write", None) is not None:
            return None
        try:
            rows = local.cursor.execute(q.SELECT_INLINE_AT, (rowid, key, time.time())).fetchall()
        except (AttributeError, sqlite3.Error):  # no cursor yet, or refused: inline_row's read
            return None
        if rows and rows[0][0] is not None:
            return rows[0][0]
        self._rowids.pop(key, None)
        return None

    def inline_row(self, key: str) -> list[Any]:
        """:meth:`value_row` of ``q.SELECT_INLINE``'s rows, ``[(value or None, rowid)]`` or
        ``[]``, found by the rowid the last such read of ``key`` gave where there was one
        (``q.SELECT_INLINE_AT``, which holds the key to it: a row there is the key's row)."""
        rowid = self._rowids.get(key)
        if rowid is not None:
            rows = self.value_row(key, q.SELECT_INLINE_AT, rowid)[1]
            if rows and rows[0][0] is not None:
                return rows
            self._rowids.pop(key, None)  # gone, replaced, not inline: the key's read, once
        rows = self.value_row(key, q.SELECT_INLINE)[1]
        if rows and rows[0][0] is not None:
            if len(self._rowids) >= _ROWIDS:
                self._rowids.clear()
            self._rowids[key] = rows[0][1]
        return rows

    def live(self, key: str) -> bool:
        return bool(self.rows(q.SELECT_LIVE, (key, time.time())))

    def meta_row(self, key: str) -> list[Any]:
        return self.rows(q.SELECT_META, (key, time.time()))

    def list_batch(self, start: int, limit: int) -> list[Any]:
        """Up to ``limit`` live entry rows from rowid ``start`` on, as ``_diskrows.entry`` reads
        them."""
        return self.rows(q.SELECT_ENTRIES, (start, time.time(), limit))

    def count(self) -> int:
        return int(self.rows(q.COUNT_ENTRIES, ())[0][0])

    def put(self, key: str, row: tuple[Any, ...], fields: dict[str, Any], create_only: bool,
            cull: bool) -> bool:
        """Publish ``row`` (store time, expiry, tag, size, mode, filename, value, metadata: the
        JSON of ``fields``) at ``key`` in one transaction: inserted, or replacing the row there
        unless ``create_only`` and it is live (then False). Files of replaced rows go after the
        commit; with ``cull``, expired rows (and rows past the size limit) go too, as
        ``Cache.add`` does."""
        now_, expire_time, tag, size, mode, filename, value, meta = row
        with self.transact() as (sql, doom):
            # Insert first: a new key (the common case, a miss being stored) costs one
            # statement; the unique index on (key, raw) tells us when the key is taken.
            try:
                rowid = sql(q.INSERT_ROW, (key, now_, expire_time, now_, tag, size, mode, filename,
                                           value, meta)).lastrowid
                if self.summary_kept:
                    self.add_own(sql, fields, meta, size or len(value), now_, rowid)
            except sqlite3.IntegrityError:
                rowid, old_filename, old_expire = sql(q.SELECT_ROW, (key,)).fetchall()[0]
                if create_only and (old_expire is None or old_expire > now_):
                    doom(filename)
                    return False
                doom(old_filename)
                sql(q.UPDATE_ROW, (now_, expire_time, now_, tag, size, mode, filename, value, meta,
                                   rowid))
            if cull:
                self.cull(now_, sql, doom)
        return True

    def delete(self, key: str) -> bool:
        """Remove the row at ``key``, or so named by a listing, and its file (``_diskbulk``)."""
        from fncache.stores import _diskbulk  # removals only: hits never load it

        return _diskbulk.delete_key(self, key)

    def remove_as_read(self, rowid: int, key: str, mode: object, filename: object) -> None:
        """Remove a row (and its file) only if it is still the row that was read."""
        with self.transact() as (sql, doom):
            if sql(q.DELETE_AS_READ, (rowid, key, mode, filename)).rowcount:
                doom(filename)

    def drop_lost(self, key: str, filename: str) -> bool:
        """Remove the row at ``key`` if it still names ``filename`` (a file found missing)."""
        with self.transact() as (sql, _):
            return bool(sql(q.DELETE_LOST_FILE, (key, filename)).rowcount)

    def clear_rows(self, tag: str | None, progress: Any = None) -> int:
        """Remove every row (or every row tagged ``tag``) in batches (see :mod:`._diskbulk`)."""
        from fncache.stores import _diskbulk

        return _diskbulk.clear_rows(self, tag, progress)

    def delete_keys(self, keys: list[str]) -> int:
        """Remove the rows at ``keys`` in batches (see :mod:`._diskbulk`); how many there were."""
        from fncache.stores import _diskbulk

        return _diskbulk.delete_keys(self, keys)

    def filenames(self) -> set[str]:
        """The value files the rows name."""
        return {r[0] for r in self.rows(q.SELECT_FILENAMES, ())}

    def references(self, filename: str) -> bool:
        return bool(self.rows(q.SELECT_FILENAME, (filename,)))

    def quick_check(self) -> str:
        rows = self.rows(q.QUICK_CHECK, ())
        return str(rows[0][0]) if rows else "no answer"

    def summary(self) -> list[FunctionSummary] | None:
        """Per (function, Python version), from the summary table (see
        :mod:`~fncache.stores._disksummary`); None while expired rows wait for removal."""
        from fncache.stores import _disksummary

        return _disksummary.read(self, self.tracks_reads)

    # -- leases ----------------------------------------------------------------------------------
    def lease_add(self, name: str, token: str, ttl: float) -> bool:
        """Take the lease row ``name`` for ``token`` unless a live, well-formed lease holds it."""
        now_ = time.time()
        with self.transact() as (sql, doom):
            rows = sql(q.SELECT_LEASE, (name,)).fetchall()
            if rows:
                rowid, mode, filename, value, expire_time = rows[0]
                live = number(expire_time)
                if (mode == q.MODE_RAW and filename is None and isinstance(value, bytes)
                        and _TOKEN.fullmatch(value) and live is not None and live > now_):
                    return False
                sql(q.DELETE_ROWID, (rowid,))
                doom(filename)
            sql(q.INSERT_LEASE, (name, now_, now_ + ttl, now_, q.MODE_RAW,
                                 sqlite3.Binary(token.encode())))
        return True

    def lease_read(self, name: str) -> str | None:
        """The token of the lease row ``name``, or None (absent or malformed)."""
        rows = self.rows(q.READ_LEASE, (name,))
        if not rows:
            return None
        mode, filename, value = rows[0]
        if mode != q.MODE_RAW or filename is not None or not isinstance(value, bytes) \
                or not _TOKEN.fullmatch(value):
            return None
        return value.decode("ascii")

    def lease_release(self, name: str, token: str) -> None:
        """Delete the lease row ``name`` if it still holds ``token`` (one statement: atomic)."""
        with self.transact() as (sql, _):
            sql(q.DELETE_LEASE, (name, q.MODE_RAW, sqlite3.Binary(token.encode())))

    def close(self) -> None:
        checkpointer, self.checkpointer = self.checkpointer, None
        if checkpointer is not None:  # first: the last connection to close checkpoints
            checkpointer.close()
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.close()
        con = getattr(self._readers, "con", None)
        if con is not None:  # this process's: a forked child starts without (reset_after_fork)
            con.close()
        self._readers = threading.local()
        cache, self._cache = self._cache, None
        if cache is not None:
            cache.close()
