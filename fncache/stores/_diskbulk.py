"""Removal of many rows of the disk store: every row, or every row of a function, in rowid ranges
(:func:`clear_rows`), and listed keys (:func:`delete_keys`: ``prune``, a filtered ``clear``,
``Memory.reduce_size``). Each batch is one write transaction, its files removed after its commit,
and leaves the summary in one statement, not through the delete trigger once per row (which made a
removal of a million entries several times slower than the deletes themselves): in the batch's
transaction the trigger is dropped, the batch's groups subtracted (and marked stale), the rows
deleted and the trigger created again, so that other connections never see it missing.
"""

from __future__ import annotations

import json
from typing import Any

import fncache.stores._disksql as q
from fncache.stores._diskrows import readable, unnamed_rowid
from fncache.stores._disksummary import kept as summary_is_ours

__all__ = ["CLEAR_BATCH", "DELETE_BATCH", "clear_rows", "delete_key", "delete_keys", "row_of"]

#: Rows per transaction in :func:`clear_rows`: large enough that a million entries take a few
#: dozen transactions (diskcache's ``Cache.clear`` takes 100 rows per transaction: minutes for a
#: million), small enough that a concurrent writer waits for one batch at most.
CLEAR_BATCH = 20_000
#: Keys per transaction in :func:`delete_keys` (each looked up by the key index: a batch holds
#: the write lock for a few milliseconds to a few dozen).
DELETE_BATCH = 1_000


def delete_key(db: Any, key: str) -> bool:
    """Remove the row at ``key`` or named so by a listing (:func:`row_of`), its file after the
    commit; whether there was one."""
    with db.transact() as (sql, doom):
        found = row_of(sql, key)
        if found is None:
            return False
        sql(q.DELETE_ROWID, (found[0],))
        doom(found[1])
    return True


def clear_rows(db: Any, tag: str | None, progress: Any = None) -> int:
    """Remove every row (or every row tagged ``tag``), :data:`CLEAR_BATCH` per transaction, their
    files after each commit; the number of entries removed. ``progress(n)`` is called after each
    batch with the entries removed so far."""
    count, start = 0, q.FIRST_ROWID
    while True:
        with db.transact() as (sql, doom):
            if tag is None:
                rows = sql(q.SELECT_BATCH, (start, CLEAR_BATCH)).fetchall()
            else:
                rows = sql(q.SELECT_BATCH_TAG, (tag, start, CLEAR_BATCH)).fetchall()
            if not rows:
                return count
            first, last = rows[0][0], rows[-1][0]
            _delete_range(sql, tag, first, last)
            for _, filename, is_entry in rows:
                count += bool(is_entry)
                doom(filename)
        if progress is not None:
            progress(count)
        if last >= q.LAST_ROWID:
            return count
        start = last + 1


def _delete_range(sql: Any, tag: str | None, first: int, last: int) -> None:
    """Delete the rows ``first`` to ``last`` (of ``tag``, if given) inside a transaction."""
    params: tuple[Any, ...]
    if tag is None:
        subtract, delete, params = q.SUBTRACT_RANGE, q.DELETE_RANGE, (first, last)
    else:
        subtract, delete, params = q.SUBTRACT_RANGE_TAG, q.DELETE_RANGE_TAG, (tag, first, last)
    if summary_is_ours(sql):
        _summarised(sql, subtract, delete, params)
    else:  # through the delete trigger, if there is one
        sql(delete, params)


def row_of(sql: Any, key: str) -> tuple[int, Any] | None:
    """``(rowid, filename)`` of the row at ``key``, or None. A key a listing made for a row whose
    own key no lookup reads (``_diskrows.UNNAMED``) names that row while its key is still not one
    a lookup reads (its rowid may have gone to a new entry since: that one is not named)."""
    at = unnamed_rowid(key)
    if at is not None:
        found = sql(q.SELECT_UNNAMED_AT, (at,)).fetchall()
        if found and not readable(found[0][0], found[0][1]):
            return at, found[0][2]
    rows = sql(q.SELECT_KEY_FILE, (key,)).fetchall()
    return (rows[0][0], rows[0][1]) if rows else None


def delete_keys(db: Any, keys: list[str]) -> int:
    """Remove the rows at ``keys`` (as ``Diskcache.delete`` removes one), :data:`DELETE_BATCH`
    keys per transaction, their files after each commit; the number of rows there were."""
    count = 0
    for i in range(0, len(keys), DELETE_BATCH):
        with db.transact() as (sql, doom):
            rows = dict(filter(None, (row_of(sql, key) for key in keys[i : i + DELETE_BATCH])))
            if rows:
                _delete_rowids(sql, list(rows))
            for filename in rows.values():
                doom(filename)
        count += len(rows)
    return count


def _delete_rowids(sql: Any, rowids: list[int]) -> None:
    """Delete the rows ``rowids`` inside a transaction."""
    if summary_is_ours(sql):
        _summarised(sql, q.SUBTRACT_ROWIDS, q.DELETE_ROWIDS, (json.dumps(rowids),))
    else:  # one statement a row: perhaps an SQLite without JSON (too old for the summary)
        for rowid in rowids:
            sql(q.DELETE_ROWID, (rowid,))


def _summarised(sql: Any, subtract: str, delete: str, params: tuple[Any, ...]) -> None:
    """Run ``delete`` with the rows' groups taken out of the summary by ``subtract`` first, in one
    statement, the delete trigger dropped meanwhile (see the module docstring). Only a summary made
    by these statements is updated in place: a view planted in its place cannot be, and another
    version's is rebuilt when next read."""
    sql(q.DROP_DELETE_TRIGGER)
    sql(subtract, params)
    sql(q.DROP_EMPTY_GROUPS)
    sql(delete, params)
    sql(q.CREATE_DELETE_TRIGGER)
