"""The disk store's summary: per function and Python version, read from the ``fncache_summary`` table
(see :mod:`fncache.stores._disksql` for how triggers keep it), checked against the rows first.

Policy: the table is a cache of the rows, never trusted over them. Each read compares the number of
rows it counts with the number in ``Cache`` (one statement, one snapshot); a table that disagrees,
is missing or is not the one fncache creates is rebuilt from the rows in one write transaction
(logged). Groups whose newest, oldest or last-use time went with a deleted row are recomputed from
the function's rows through the tag index. Expired rows that are not yet removed are in the table
but not in a listing: while there are any, the caller summarises the listing instead.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

import fncache.stores._disksql as q
from fncache.stores._base import FunctionSummary

__all__ = ["ensure", "read"]

log = logging.getLogger("fncache")

# UPDATE ... FROM in the triggers (3.33) and the JSON functions built in (3.38).
_NEEDS = (3, 38)


def ensure(db: Any, rebuild: bool = False) -> None:
    """Create the summary table and its triggers if any is missing (filled from the rows), or
    rebuild them if ``rebuild``. One write transaction: concurrent writers wait for it. Nothing
    is created where SQLite is older than the triggers need (3.38: ``UPDATE ... FROM``, JSON):
    ``summary()`` then lists the entries."""
    if sqlite3.sqlite_version_info < _NEEDS:
        return
    names = {r[0] for r in db.rows(q.SELECT_SCHEMA_OBJECTS, q.SUMMARY_OBJECTS)}
    if not rebuild and names == set(q.SUMMARY_OBJECTS):
        return
    with db.transact() as (sql, _):
        names = {r[0] for r in sql(q.SELECT_SCHEMA_OBJECTS, q.SUMMARY_OBJECTS).fetchall()}
        if not rebuild and names == set(q.SUMMARY_OBJECTS):
            return  # another process made it meanwhile
        if names:
            log.warning("the summary of %s was damaged or incomplete; rebuilt it from the entries",
                        db.directory)
        # Dropped and made anew: a table of that name with other columns is not ours to trust.
        for statement in (*q.SUMMARY_DROP, *q.SUMMARY_SCHEMA, *q.SUMMARY_REBUILD):
            sql(statement)


def read(db: Any, tracks_reads: bool) -> list[FunctionSummary] | None:
    """The summary rows of the store, or None (the caller then summarises the listing) while
    expired rows wait for removal, or where the summary cannot be kept (an old SQLite, a store
    this process cannot write to whose summary needs a rebuild)."""
    if sqlite3.sqlite_version_info < _NEEDS or db.rows(q.ANY_EXPIRED, (time.time(),)):
        return None
    rows = _checked_rows(db)
    if rows is None:
        rows = _rebuilt_rows(db)
        if rows is None:
            return None
    if any(r[11] for r in rows):
        rows = _refresh_stale(db, rows)
    out = [_summary(r, tracks_reads) for r in rows]
    return sorted(out, key=lambda s: (s.function, s.python or "", s.damaged))


def _checked_rows(db: Any) -> list[Any] | None:
    """The summary rows if they count every entry, else None (as when there is no summary)."""
    try:
        counted, total = db.rows(q.SUMMARY_CHECK, ())[0]
        return db.rows(q.SELECT_SUMMARY, ()) if counted == total else None
    except sqlite3.OperationalError as e:
        if "no such" not in str(e):
            raise
        return None


def _rebuilt_rows(db: Any) -> list[Any] | None:
    """The summary rows after rebuilding it from the entries, or None if it cannot be rebuilt."""
    try:
        ensure(db, rebuild=True)
    except sqlite3.OperationalError as e:  # read-only, busy, or an SQLite without the features
        log.info("summary of %s not rebuilt (%s); listing the entries instead", db.directory, e)
        return None
    return db.rows(q.SELECT_SUMMARY, ())  # type: ignore[no-any-return]


def _summary(r: tuple[Any, ...], tracks_reads: bool) -> FunctionSummary:
    fn, py, py_known, damaged, entries, size, newest, oldest, used, access, uses, _ = r
    return FunctionSummary(
        function="" if damaged else fn, python=py if py_known and not damaged else None,
        entries=int(entries), size=int(size), newest=float(newest or 0.0),
        oldest=float(oldest or 0.0), used=access if tracks_reads else used, uses=int(uses),
        damaged=bool(damaged))


def _refresh_stale(db: Any, rows: list[Any]) -> list[Any]:
    """Recompute the times of stale groups from their rows, in one write transaction (so that no
    writer changes them meanwhile), and keep them; a busy database: recomputed, not kept."""
    try:
        with db.transact(wait=1.0) as (sql, _):
            return _bounds(lambda s, p: sql(s, p).fetchall(), rows, sql)
    except sqlite3.OperationalError as e:
        log.debug("summary times not kept (%s)", e)
        return _bounds(db.rows, rows, None)


def _bounds(read: Any, rows: list[Any], write: Any) -> list[Any]:
    everything: list[Any] | None = None
    out = []
    for r in rows:
        fn, py, py_known, damaged = r[:4]
        if not r[11]:
            out.append(r)
            continue
        if fn and not damaged:
            found = read(q.SUMMARY_BOUNDS_TAG, (fn,))
        else:  # rows without a name to look them up by
            everything = read(q.SUMMARY_BOUNDS_ALL, ()) if everything is None else everything
            found = everything
        mine = [g for g in found if tuple(g[:5]) == (fn, py, py_known, damaged, 1)]
        if not mine:
            out.append(r)
            continue
        newest, oldest, used, access = mine[0][7:11]
        if write is not None:
            write(q.SET_BOUNDS, (newest, oldest, used, access, fn, py, py_known, damaged, 1, r[4]))
        out.append((*r[:6], newest, oldest, used, access, r[10], 0))
    return out
