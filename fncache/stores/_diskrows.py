"""A row of the disk store's ``Cache`` table as fncache lists it: an
:class:`~fncache.stores._base.EntryInfo` made by :func:`entry`, which never raises on planted or
damaged metadata (one bad row must not stop a listing, or the command that would clean it up).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import fncache.stores._disksql as q
from fncache.stores._base import EntryInfo


def number(x: object) -> float | None:
    """``x`` as a finite float if it is an int or float (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


#: How a listing names a row whose key no lookup reads (not text, or text that is not fncache's
#: key encoding, ``raw`` other than 1: a planted row): by its rowid, which
#: :meth:`~fncache.stores._diskcache.Diskcache.delete` takes back, so that ``prune`` and a filtered
#: ``clear`` remove it as they remove any damaged entry (they delete what they list by key).
UNNAMED = "<row {}: key not readable>"
_UNNAMED = re.compile(r"<row (-?[0-9]{1,19}): key not readable>")


def unnamed_rowid(key: str) -> int | None:
    """The rowid in a key :data:`UNNAMED` made, else None."""
    found = _UNNAMED.fullmatch(key) if key[:1] == "<" else None
    at = int(found.group(1)) if found else None
    return at if at is not None and q.FIRST_ROWID <= at <= q.LAST_ROWID else None


def readable(key: object, raw: object) -> bool:
    """Whether a row's key is one a lookup by key reads (fncache's: text, ``raw = 1``)."""
    return isinstance(key, str) and raw == 1 and type(raw) is int


def entry(row: tuple[Any, ...], tracks_reads: bool) -> EntryInfo:
    """One listed row as an :class:`EntryInfo`; a row whose metadata has the wrong shape or types
    is listed with ``meta == {"damaged": reason}`` (never an exception: one bad row must not stop
    a listing, or the command that would clean it up).

    The last use is ``access_time`` once a use was recorded (``access_count > 0``, see
    :meth:`fncache.stores._diskcache.Diskcache.record_uses`) or where diskcache's LRU policy
    records every read."""
    rowid, key, size, value, store_time, access_time, access_count, raw_meta, raw = row
    count = _use_count(access_count)
    meta, problem = parse_row_meta(raw_meta, store_time)
    if not readable(key, raw):
        key, problem = UNNAMED.format(rowid), problem or _unreadable(key)
    stored = _stored_bytes(size, value)
    accessed = number(access_time) if tracks_reads or count is not None else None
    if problem is not None:
        return _damaged(key, stored, store_time, accessed, problem, count)
    return EntryInfo(key=key, size=int(meta.get("size") or stored),
                     created=number(meta.get("created")) or number(store_time) or 0.0,
                     accessed=accessed or None, meta=meta, uses=count)


def _unreadable(key: object) -> str:
    """Why a row's key is not one a lookup reads."""
    return "key is not text" if not isinstance(key, str) else "key is not stored as text (raw is not 1)"


def _damaged(key: str, stored: int, store_time: Any, accessed: float | None, problem: str,
             count: int | None) -> EntryInfo:
    """A row whose metadata is damaged, listed with ``meta == {"damaged": problem}`` and the times
    and size the row itself holds."""
    return EntryInfo(key=key, size=stored, created=number(store_time) or 0.0,
                     accessed=accessed or None, meta={"damaged": problem}, damaged=True,
                     uses=count)


def _use_count(access_count: Any) -> int | None:
    """The uses recorded in a row's ``access_count``, or None if none was recorded."""
    return access_count if type(access_count) is int and access_count > 0 else None


def _stored_bytes(size: Any, value: Any) -> int:
    """The bytes a row stores: its size column (file-backed values), else its inline value's."""
    stored = number(size)
    if not stored and isinstance(value, bytes):
        stored = len(value)
    return int(stored or 0)


def parse_row_meta(raw: Any, store_time: Any) -> tuple[Any, str | None]:
    """(the metadata JSON object of a row, what is wrong with it or None)."""
    try:
        if not isinstance(raw, (bytes, str)) or len(raw) > q.META_MAX:
            raise ValueError("not a short JSON text")
        meta = json.loads(raw)
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (ValueError, RecursionError) as e:  # RecursionError: deeply nested JSON
        return {}, f"metadata: {e}"[:200]
    msize = meta.get("size", 0)
    if number(meta.get("created", store_time)) is None:
        return meta, "metadata: created is not a number"
    if isinstance(msize, bool) or not isinstance(msize, int) or not 0 <= msize < 2**63:
        return meta, "metadata: size is not a byte count"
    if not isinstance(meta.get("function", ""), str):
        return meta, "metadata: function is not text"
    return meta, None
