"""Opening diskcache's writer for a disk store: a ``diskcache.Cache`` whose opening gives up at a
deadline, and fncache's column added to its table."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from fncache.stores import _disksql as q

__all__ = ["BoundedCache", "add_meta_column"]


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
