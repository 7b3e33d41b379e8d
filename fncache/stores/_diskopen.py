"""A disk store's connections: diskcache's writer (a ``diskcache.Cache`` whose opening gives up at
a deadline, fncache's column added to its table and its expiry index made partial) and the write
transactions run on it, the read-only connection that keeps the WAL of a process that only read,
the store's ``synchronous`` level and the other settings a store opens with (:func:`open_settings`),
and how text is read (:func:`text_of`); Settings rows diskcache cannot open a connection with are
put right before it meets them (:func:`repair_settings`)."""

from __future__ import annotations

import logging
import pathlib
import re
import sqlite3
import threading
import time
from typing import Any

from fncache import _forks
from fncache.stores import _disksql as q
from fncache.stores._diskrows import number

log = logging.getLogger("fncache")

__all__ = ["READ_SETTINGS", "BoundedCache", "Transaction", "add_meta_column",
           "check_wal_autocheckpoint", "min_file_size", "open_settings", "partial_expire_index",
           "read_only_keeper", "read_policy", "repair_settings", "setting_ok", "synchronous_level",
           "text_of"]


def add_meta_column(cache: Any) -> None:
    columns = [row[1] for row in cache._sql(q.TABLE_INFO).fetchall()]
    if q.META_COLUMN in columns:
        return
    try:
        # O(1) in SQLite: existing rows read the new column as NULL without being rewritten.
        cache._sql(q.ADD_META_COLUMN)
    except sqlite3.OperationalError as e:
        if "duplicate column" not in str(e):  # another process added it first: fine
            raise


def partial_expire_index(db: Any) -> None:
    """Index only the rows that expire (see :data:`q.EXPIRE_INDEX`): diskcache's index of every
    row's expiry is replaced once per store, in one write transaction (a store of a million rows:
    one scan of the table). Plain diskcache and earlier versions of fncache use the partial index
    as they used the full one."""
    if _expire_index_is_partial(db.cache._sql):
        return
    with db.transact() as (sql, _):
        if _expire_index_is_partial(sql):
            return  # another process replaced it meanwhile
        sql(q.DROP_EXPIRE_INDEX)
        sql(q.EXPIRE_INDEX)


def _expire_index_is_partial(sql: Any) -> bool:
    found = sql(q.SELECT_EXPIRE_INDEX).fetchall()
    return bool(found) and found[0][0] == q.EXPIRE_INDEX


def text_of(data: bytes) -> str | bytes:
    """A TEXT value as ``str`` (the ``text_factory`` of every connection fncache reads through);
    one that is not UTF-8, which only a planted row holds, as its bytes, which every reader of a
    row takes for the wrong type: damage to remove, or list as such. sqlite3's own decoding failed
    the whole statement instead: every call of the key a miss and the row never removed, a listing
    or a write that met the row failed."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


# diskcache runs ``PRAGMA <name> = <value>`` for every ``sqlite_<name>`` row of its Settings table
# on each connection it opens: the values these pragmas take (any other such row: a plain name and
# a number or a word).
_SYNCHRONOUS = {"off": 0, "normal": 1, "full": 2, "extra": 3}
_PRAGMA_VALUES: dict[str, set[Any]] = {
    "sqlite_auto_vacuum": {0, 1, 2, "none", "full", "incremental"},
    "sqlite_journal_mode": {"wal", "delete", "truncate", "persist", "memory", "off"},
    "sqlite_synchronous": {*_SYNCHRONOUS, *_SYNCHRONOUS.values()},
}


def _pragma_word(value: object) -> object:
    """A pragma's value as diskcache would pass it: text lowered and stripped, digits a number."""
    if type(value) is not str:
        return value
    word = value.strip().lower()
    return int(word) if word.isascii() and word.isdigit() else word
# The pragmas a store's Settings may set: diskcache's own and the log size (the store options
# fncache takes). Any other ``sqlite_*`` row was planted (diskcache runs each as a PRAGMA on every
# writer it opens): ``locking_mode`` exclusive and a huge ``busy_timeout`` hung every write for
# good, ``temp_store_directory`` wrote outside the store.
_PRAGMAS_TAKEN = frozenset({"sqlite_auto_vacuum", "sqlite_cache_size", "sqlite_journal_mode",
                            "sqlite_mmap_size", "sqlite_synchronous", "sqlite_wal_autocheckpoint"})
_PRAGMA_WORD = re.compile(r"[A-Za-z0-9_]+")


def setting_ok(key: object, value: object) -> bool:
    """Whether a row of diskcache's Settings table is one diskcache can open a connection with:
    a key of text, and for a pragma's row a value that pragma takes."""
    if type(key) is not str:
        return False
    if not key.startswith("sqlite_"):
        return True
    if key not in _PRAGMAS_TAKEN:
        return False
    if key in _PRAGMA_VALUES:
        word = _pragma_word(value)
        return type(word) in (int, str) and word in _PRAGMA_VALUES[key]
    if key in ("sqlite_cache_size", "sqlite_mmap_size"):
        return type(value) is int and (0 if key == "sqlite_mmap_size" else -2**63) <= value < 2**63
    return type(value) in (int, float) or (type(value) is str and
                                           _PRAGMA_WORD.fullmatch(value) is not None)


def _to_put_right(key: object, value: object, wal: bool) -> bool:
    """Whether :func:`repair_settings` resets or deletes this Settings row (``wal``: whether the
    database is in WAL mode)."""
    if not setting_ok(key, value):
        return True
    return wal and key == "sqlite_journal_mode" and str(value).lower() != "wal"


def repair_settings(path: str, timeout: float) -> None:
    """Put right, in one write transaction, the rows of diskcache's ``Settings`` table that it
    cannot open a connection with (see :func:`setting_ok`; only a planted row is one): a pragma's
    value goes back to diskcache's default, any other such row is deleted. diskcache reads them
    whenever it opens a connection, so one of them failed every write to the store (a key that is
    not text, a pragma's value it rejects). A journal mode other than WAL stored for a database in
    WAL mode goes back to WAL too: diskcache's switch waits for every other connection to close
    (see ``Diskcache._would_leave_wal``). A store this process cannot write to is left as it is
    (its reads do not need diskcache)."""
    try:
        _repair_settings(path, timeout)
    except sqlite3.OperationalError as e:  # read-only, or busy past the timeout
        log.warning("Settings of %s not put right (%s)", path, e)


def _repair_settings(path: str, timeout: float) -> None:
    from diskcache.core import DEFAULT_SETTINGS

    con = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        con.text_factory = text_of
        wal = con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        odd = [(rowid, key) for rowid, key, value in con.execute(q.SETTINGS_ROWS)
               if _to_put_right(key, value, wal)]
        if not odd:
            return
        con.execute("BEGIN IMMEDIATE")
        try:
            for rowid, key in odd:
                if type(key) is str and key in DEFAULT_SETTINGS:
                    con.execute(q.RESET_SETTING, (DEFAULT_SETTINGS[key], rowid))
                else:
                    con.execute(q.DELETE_SETTING, (rowid,))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        log.warning("%d rows of the Settings table of %s were not settings diskcache can use: "
                    "put back to its defaults or removed", len(odd), path)
    finally:
        con.close()


# The writer's page cache, in KiB, where the store's is diskcache's default (32 MiB; neither given
# as ``sqlite_cache_size`` when it is opened nor stored otherwise in its Settings). A write that
# splits a B-tree page renumbers pages through a placeholder page number (SQLite's pending-byte
# page, 1 GiB into the file), and the commit after it then walks the writer's whole page cache to
# drop pages past the end of a file smaller than that. With random keys splits are frequent, so
# the walk grew with the cache: a miss at a million entries spent 12 us in it with 32 MiB, and the
# few index pages a write needs fit in 4 MiB.
WRITER_CACHE_KIB = 4096


def _bounded_cache_class() -> type:
    import diskcache
    from diskcache.core import DEFAULT_SETTINGS

    connection = diskcache.Cache._con.fget

    class BoundedCache(diskcache.Cache):  # type: ignore[misc]
        """``diskcache.Cache`` whose opening gives up at a deadline instead of retrying each
        statement for 60 s (``Cache.__init__`` writes its settings on every open)."""

        def __init__(self, directory: str, *, deadline: float, autocheckpoint: int,
                     **kwargs: Any) -> None:
            self._fncache_deadline = deadline
            self._fncache_autocheckpoint = autocheckpoint
            self._fncache_cache: str | None = None  # decided once diskcache's settings are read
            super().__init__(directory, **kwargs)
            if ("sqlite_cache_size" not in kwargs
                    and self.sqlite_cache_size == DEFAULT_SETTINGS["sqlite_cache_size"]):
                self._fncache_cache = f"PRAGMA cache_size = -{WRITER_CACHE_KIB}"
                self._fncache_set_cache(self._con)

        def _fncache_set_cache(self, con: Any) -> None:
            """The writer's own page cache on ``con``: a speed-up only, given up (diskcache's
            stays) where the pragma, which reads the schema, finds the database locked (a
            rollback-journal store another process holds past the busy timeout)."""
            if self._fncache_cache is None:
                return
            try:
                con.execute(self._fncache_cache)
            except sqlite3.OperationalError as e:
                if str(e) != "database is locked":
                    raise
                log.debug("%s: the writer keeps diskcache's page cache: %s", self.directory, e)

        @property
        def _con(self) -> Any:  # diskcache's connection of this thread (a new one after a fork)
            before = getattr(self._local, "con", None)
            con = connection(self)
            con.text_factory = text_of
            if con is not before:  # new: after diskcache's pragmas from Settings, the store's own
                con.execute(f"PRAGMA wal_autocheckpoint = {self._fncache_autocheckpoint}")
                self._fncache_set_cache(con)
            return con

        @property
        def _sql_retry(self) -> Any:
            sql = self._sql
            deadline = self._fncache_deadline

            def execute(statement: str, *args: Any, **kwargs: Any) -> Any:
                while True:
                    try:
                        return sql(statement, *args, **kwargs)
                    except sqlite3.OperationalError as exc:
                        if str(exc) != "database is locked" or time.monotonic() > deadline:
                            raise
                        time.sleep(0.001)

            return execute

    return BoundedCache


def BoundedCache(directory: str, **kwargs: Any) -> Any:  # noqa: N802 (a class, made lazily)
    global _BOUNDED
    if _BOUNDED is None:
        _BOUNDED = _bounded_cache_class()
    return _BOUNDED(directory, **kwargs)


_BOUNDED: Any = None


def read_only_keeper(path: str) -> sqlite3.Connection | None:
    """A read-only connection to the database at ``path`` that has read once, or None if it cannot
    be opened. In WAL mode it holds the file's shared lock until it is closed, so no other
    connection of this process is the database's last to close: closing one does not checkpoint
    the WAL (syncing it and the database) and delete it. Being read-only, its own close never does.
    """
    try:
        con = sqlite3.connect(pathlib.Path(path).absolute().as_uri() + "?mode=ro", uri=True,
                              timeout=0, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        con.execute(q.KEEPER_READ).fetchall()
    except sqlite3.Error:
        con.close()
        return None
    return con


def synchronous_level(value: Any) -> int:
    """SQLite's ``synchronous`` level from a stored setting (a number, or a name as diskcache
    accepts); diskcache's default, NORMAL, for anything else (a planted or odd setting)."""
    word = _pragma_word(value)
    if type(word) is int:
        return word if word in _SYNCHRONOUS.values() else 1
    return _SYNCHRONOUS.get(word, 1) if type(word) is str else 1


def min_file_size(value: object) -> int:
    """diskcache's ``disk_min_file_size`` as stored, or its default where the row is not a byte
    count (planted): the size from which a value goes to a file of its own."""
    size = number(value)
    if size is not None and 0 <= size < 2**63:
        return int(size)
    from diskcache.core import DEFAULT_SETTINGS

    return int(DEFAULT_SETTINGS["disk_min_file_size"])


#: The settings a store object reads when it is opened (see open_settings).
READ_SETTINGS = ("disk_min_file_size", "sqlite_synchronous", "sqlite_journal_mode", "statistics")


def open_settings(stored: dict[Any, Any], opts: dict[str, Any]) -> dict[str, Any]:
    """The values of :data:`READ_SETTINGS` a store opens with: the one given in ``opts``, else the
    stored one, else diskcache's default. A planted Settings row (a key that is not text, a value
    of any type) is not a setting. diskcache is imported only where one is neither given nor
    stored (diskcache writes all of its settings into a store it creates): a process that only
    reads an existing store does not import it (2.5-3.7 ms)."""
    out: dict[str, Any] = {}
    for name in READ_SETTINGS:
        if name in opts:
            out[name] = opts[name]
        elif name in stored:
            out[name] = stored[name]
        else:
            from diskcache.core import DEFAULT_SETTINGS

            out[name] = DEFAULT_SETTINGS[name]
    return out


def read_policy(policy: str) -> str | None:
    """The statement part diskcache runs on a read for ``policy`` (None: none), or ValueError."""
    if policy == "none":  # evicts nothing, so records nothing on a read (diskcache not imported)
        return None
    from diskcache.core import EVICTION_POLICY

    if policy not in EVICTION_POLICY:
        raise ValueError(f"eviction_policy: expected one of {sorted(EVICTION_POLICY)}, got {policy!r}")
    return EVICTION_POLICY[policy]["get"]  # type: ignore[no-any-return]


def check_wal_autocheckpoint(pages: Any) -> None:
    """The one check of a disk store's ``sqlite_wal_autocheckpoint``: an int of pages, 0 to
    2**31 - 1 (SQLite takes a larger one as 0, which turns checkpoints off)."""
    if pages is not None and (type(pages) is not int or not 0 <= pages < 2**31):
        from fncache._errors import ConfigError

        raise ConfigError(f"sqlite_wal_autocheckpoint: expected a number of pages (an int from 0"
                          f" to 2**31 - 1), got {pages!r}")


class Transaction:
    """One write transaction of :meth:`~fncache.stores._diskcache.Diskcache.transact` on
    diskcache's connection: what ``Cache._transact`` does (``BEGIN IMMEDIATE`` ... ``COMMIT``, the
    thread's id in ``_txn_id`` while it is open, joined when nested), with fncache's deadline and
    file removal, as one object rather than two nested generators in an ``ExitStack``."""

    __slots__ = ("_db", "_wait", "_cache", "_con", "_begun", "_timeout_set", "_doomed", "_section")

    def __init__(self, db: Any, wait: float) -> None:
        self._db = db
        self._wait = wait
        self._doomed: list[Any] = []

    def __enter__(self) -> tuple[Any, Any]:
        db, wait = self._db, self._wait
        deadline = time.monotonic() + wait
        cache = self._cache = db._writer(wait)
        con = self._con = cache._con
        self._begun = self._timeout_set = False
        tid = threading.get_ident()
        if cache._txn_id == tid:  # nested in this thread's open transaction: joined
            return con.execute, self._doomed.append
        if wait != db.timeout:  # this connection's busy timeout for this transaction only
            con.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            self._timeout_set = True
        # A fork waits until the transaction ends (see fncache._forks): a child forked inside it
        # would inherit its write lock, held for good by a thread the child does not have.
        section = self._section = _forks.Section()
        section.__enter__()
        try:
            while True:
                try:
                    con.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError:
                    if time.monotonic() >= deadline:
                        raise sqlite3.OperationalError(
                            "database is locked (another process holds its write lock for over "
                            f"{db.timeout:g}s)") from None
                    time.sleep(0.001)
            cache._txn_id = tid
            self._begun = True
        except BaseException:
            # Ctrl-C while BEGIN waited for the lock is raised once it returns, having taken it:
            # never left holding the write lock with no body to end it.
            if con.in_transaction:
                cache._txn_id = None
                con.execute("ROLLBACK")
            section.__exit__(None, None, None)
            self._restore_timeout()
            raise
        return con.execute, self._doomed.append

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        con = self._con
        try:
            if self._begun:
                self._cache._txn_id = None
                try:
                    con.execute("ROLLBACK" if kind is not None else "COMMIT")
                except BaseException:
                    if con.in_transaction:  # a failed COMMIT (SQLite keeps some open): undone
                        con.execute("ROLLBACK")
                    if kind is None:
                        raise
        finally:
            if self._begun:
                self._section.__exit__(None, None, None)
            self._restore_timeout()
        if kind is None:
            self._after_commit()

    def _after_commit(self) -> None:
        """What a body that ended well leaves to do: count the commit for the checkpoint thread,
        send the thread's next read to the writer, remove the files of replaced entries."""
        db = self._db
        checkpointer = db.checkpointer  # once: another thread may close the store meanwhile
        if self._begun and checkpointer is not None:
            checkpointer.committed()
        if db._wal:  # the next read of this thread goes to the connection that wrote
            local = db._readers
            local.after_write = getattr(local, "own", None) or self._con.cursor()
            local.own = local.after_write
        for name in self._doomed:
            if name is not None:
                db.files.remove(name)

    def _restore_timeout(self) -> None:
        if self._timeout_set:
            self._timeout_set = False
            self._con.execute(f"PRAGMA busy_timeout = {int(self._db.timeout * 1000)}")
