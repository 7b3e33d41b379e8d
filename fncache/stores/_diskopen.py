"""Opening a disk store's connections: diskcache's writer (a ``diskcache.Cache`` whose opening gives
up at a deadline, and fncache's column added to its table), the read-only connection that keeps the
WAL of a process that only read, and the store's ``synchronous`` level."""

from __future__ import annotations

import pathlib
import sqlite3
import time
from typing import Any

from fncache.stores import _disksql as q

__all__ = ["BoundedCache", "add_meta_column", "read_only_keeper", "read_policy",
           "synchronous_level"]


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


def _bounded_cache_class() -> type:
    import diskcache

    class BoundedCache(diskcache.Cache):  # type: ignore[misc]
        """``diskcache.Cache`` whose opening gives up at a deadline instead of retrying each
        statement for 60 s (``Cache.__init__`` writes its settings on every open)."""

        def __init__(self, directory: str, *, deadline: float, **kwargs: Any) -> None:
            self._fncache_deadline = deadline
            super().__init__(directory, **kwargs)

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
    names = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}
    text = str(value).strip().upper()
    return int(text) if text in {"0", "1", "2", "3"} else names.get(text, 1)


def read_policy(policy: str) -> str | None:
    """The statement part diskcache runs on a read for ``policy`` (None: none), or ValueError."""
    from diskcache.core import EVICTION_POLICY

    if policy not in EVICTION_POLICY:
        raise ValueError(f"eviction_policy: expected one of {sorted(EVICTION_POLICY)}, got {policy!r}")
    return EVICTION_POLICY[policy]["get"]  # type: ignore[no-any-return]
