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
import math
import sqlite3
import time
from typing import Any

import fncache.stores._disksql as q
from fncache.stores._base import FunctionSummary
from fncache.stores._meta import LONG_TEXT

__all__ = ["add_own", "ensure", "kept", "read"]

log = logging.getLogger("fncache")

# UPDATE ... FROM in the triggers (3.33) and the JSON functions built in (3.38).
_NEEDS = (3, 38)


def ensure(db: Any, rebuild: bool = False) -> bool:
    """Create the summary table and its triggers if any is missing or made by other statements
    than these (filled from the rows), or rebuild them if ``rebuild``; True if the summary is
    kept. One write transaction: concurrent writers wait for it. Nothing is created where SQLite
    is older than the triggers need (3.38: ``UPDATE ... FROM``, JSON): ``summary()`` then lists
    the entries."""
    if sqlite3.sqlite_version_info < _NEEDS:
        return False
    if not rebuild and _ours(db.rows(q.SELECT_SCHEMA_OBJECTS, q.SUMMARY_OBJECTS)):
        return True
    with db.transact() as (sql, _):
        found = sql(q.SELECT_SCHEMA_OBJECTS, q.SUMMARY_OBJECTS).fetchall()
        if not rebuild and _ours(found):
            return True  # another process made it meanwhile
        if found:
            log.warning("the summary of %s was damaged, incomplete or made by another version;"
                        " rebuilt it from the entries", db.directory)
        # Dropped and made anew: a table of that name with other columns is not ours to trust.
        _drop(sql)
        for statement in (*q.SUMMARY_SCHEMA, *q.SUMMARY_REBUILD):
            sql(statement)
    return True


def kept(sql: Any) -> bool:
    """Whether the summary's objects are the ones this version makes (``sql``: a transaction's)."""
    return _ours(sql(q.SELECT_SCHEMA_OBJECTS, q.SUMMARY_OBJECTS).fetchall())


def _ours(found: list[Any]) -> bool:
    """Whether the schema objects found are exactly the ones :data:`q.SUMMARY_SCHEMA` makes."""
    return dict((name, sql) for name, sql in found) == q.SUMMARY_DEFINITIONS


#: The statement that drops each kind of object SQLite names in ``sqlite_master``.
_DROP = {"table": "DROP TABLE", "view": "DROP VIEW", "index": "DROP INDEX",
         "trigger": "DROP TRIGGER"}


def _drop(sql: Any) -> None:
    """Drop whatever holds the summary's names, each as what it is: ``DROP TABLE`` of a view
    planted in the table's place failed, and with it every rebuild and ``clear``."""
    for kind, name in sql(q.SELECT_SCHEMA_TYPES, q.SUMMARY_OBJECTS).fetchall():
        # ``name`` is one of the summary's names (any case); quoted all the same.
        quoted = '"' + name.replace('"', '""') + '"'
        sql(f"{_DROP[kind]} IF EXISTS {quoted}")


def add_own(sql: Any, fields: dict[str, Any], raw_meta: bytes, stored: int, now_: float,
            rowid: int) -> None:
    """Add an entry fncache has just inserted (row ``rowid``, metadata ``fields`` encoded as
    ``raw_meta``, ``stored`` bytes in the row, stored and last accessed at ``now_``) to the
    summary, in the inserting transaction.

    The group and times are the ones :func:`q._group` gives the row (which the delete and update
    triggers subtract again), computed here from ``fields`` where the metadata is JSON that SQLite
    reads exactly as Python wrote it; any other row is added by SQL, as the insert trigger adds
    other writers' rows (:data:`q.ADD_ROWID`). Either way the count check of :func:`read`
    rebuilds a summary that disagrees with the rows."""
    group = _own_group(fields, raw_meta, stored, now_)
    if group is None:
        sql(q.ADD_ROWID, (rowid,))
    else:
        sql(q.ADD_OWN, group)


def _own_group(fields: dict[str, Any], raw: bytes, stored: int, now_: float
               ) -> tuple[Any, ...] | None:
    """The summary group of fncache's own row, or None where SQLite might read it otherwise:
    texts that are not plain ASCII, numbers outside what both read alike, JSON that SQLite would
    not take as valid (``NaN``, deep nesting, over the limit) or metadata that was shortened."""
    fn, py = fields.get("function", ""), fields.get("python")
    size, created = fields.get("size"), fields.get("created")
    # Texts up to LONG_TEXT are never shortened by ``encode_meta``: what it wrote is ``fn``.
    if not (_plain_json(raw) and _ascii(fn) and len(fn) <= LONG_TEXT
            and (py is None or _ascii(py))
            and type(size) is int and 0 <= size < 2**63 and _plain_number(created)):
        return None
    known = py is not None and len(py) <= 16
    # (fn, py, py_known, size, created, access): the parameters of q.ADD_OWN
    return (fn or "", py if known else "", int(known), size or stored, created or now_, now_)


def _plain_json(raw: bytes) -> bool:
    """Whether SQLite surely takes ``raw`` (written by ``json.dumps``) as valid JSON."""
    return len(raw) <= q.META_MAX and raw.count(b"{") + raw.count(b"[") < 64 \
        and b"NaN" not in raw and b"Infinity" not in raw


def _ascii(x: object) -> bool:
    return type(x) is str and x.isascii()


def _plain_number(x: object) -> bool:
    """Whether SQLite reads the JSON of ``x`` as the number Python wrote."""
    return type(x) in (int, float) and math.isfinite(x) and abs(x) < 2**53  # type: ignore[arg-type]


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
        if not _well_typed(rows):
            return None
    out = [_summary(r, tracks_reads) for r in rows]
    return sorted(out, key=lambda s: (s.function, s.python or "", s.damaged))


def _well_typed(rows: list[Any]) -> bool:
    """Whether every summary row has the types its columns are declared with (SQLite keeps what a
    planted row gives, text in a count or not UTF-8, see ``_diskopen.text_of``; or the metadata
    a rebuild reads): the summary is damaged otherwise, rebuilt, or the listing read instead."""
    for r in rows:
        fn, py, py_known, damaged, entries, size, newest, oldest, used, access, uses, stale = r
        if type(fn) is not str or type(py) is not str:
            return False
        if any(type(x) is not int for x in (py_known, damaged, entries, size, uses, stale)):
            return False
        # The bounds of a group with entries are never NULL (the times of its rows); a use may be.
        if not all(type(x) in _TIME for x in (newest, oldest, _use(used), _use(access))):
            return False
    return True


_TIME = (int, float)


def _use(x: object) -> object:
    return 0 if x is None else x


def _checked_rows(db: Any) -> list[Any] | None:
    """The summary rows if they count every entry and have their columns' types, else None (as
    when there is no summary)."""
    try:
        counted, total = db.rows(q.SUMMARY_CHECK, ())[0]
        rows = db.rows(q.SELECT_SUMMARY, ()) if counted == total else None
    except sqlite3.OperationalError as e:
        if "no such" not in str(e):
            raise
        return None
    return rows if rows is not None and _well_typed(rows) else None


def _rebuilt_rows(db: Any) -> list[Any] | None:
    """The summary rows after rebuilding it from the entries, or None if it cannot be rebuilt
    (or the entries give it names that are not text: their listing is summarised instead)."""
    try:
        ensure(db, rebuild=True)
    except sqlite3.OperationalError as e:  # read-only, busy, or an SQLite without the features
        log.info("summary of %s not rebuilt (%s); listing the entries instead", db.directory, e)
        return None
    rows = db.rows(q.SELECT_SUMMARY, ())
    return rows if _well_typed(rows) else None


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
