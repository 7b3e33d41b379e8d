"""Removing entries by age and size, for ``fncache clear --older-than/--larger-than`` and ``prune``.

Each helper takes any :class:`~fncache.stores.Store` and works from :meth:`Store.entries` (the
metadata written beside each value), so it never reads or unpickles a value. Safe to run while
other processes use the store: an entry added meanwhile may or may not be considered, and an entry
that another process deletes first simply does not count. Sizes are the stored sizes of the values
as listed, not the disk space a backend uses around them (SQLite pages, directory entries).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

from fncache._errors import ConfigError
from fncache.stores._base import EntryInfo, Store

__all__ = ["clear_larger_than", "clear_older_than", "prune_to_size"]


def _bound(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or value < 0:
        raise ConfigError(f"{name}: expected a non-negative number, got {value!r}")
    return float(value)


def _delete(store: Store, entries: Iterable[EntryInfo]) -> int:
    return sum(1 for e in entries if store.delete(e.key))


def _matches(info: EntryInfo, function: str | None) -> bool:
    return function is None or info.function == function


def clear_older_than(store: Store, seconds: float, *, function: str | None = None) -> int:
    """Remove the entries created more than ``seconds`` ago; returns how many were removed.

    ``function`` (``module:qualname``) limits it to one function's entries. Entries whose creation
    time is unknown (metadata lost) count as oldest. Raises :class:`~fncache.ConfigError` for a
    negative or non-numeric age, and :class:`~fncache.StoreError` if the store fails.
    """
    cutoff = time.time() - _bound("older_than", seconds)
    return _delete(store, [e for e in list(store.entries())
                           if _matches(e, function) and e.created < cutoff])


def clear_larger_than(store: Store, nbytes: int, *, function: str | None = None) -> int:
    """Remove the entries whose stored value is larger than ``nbytes``; returns how many."""
    limit = _bound("larger_than", nbytes)
    return _delete(store, [e for e in list(store.entries())
                           if _matches(e, function) and e.size > limit])


def prune_to_size(store: Store, max_bytes: int) -> int:
    """Remove entries, least recently used first, until their total size is at most ``max_bytes``.

    "Used" is the last read where the store records reads (``EntryInfo.accessed``), else the
    creation time: stores that do not track reads lose their oldest entries first. Returns how many
    entries were removed. One pass over one listing: entries written meanwhile are not counted.
    """
    limit = _bound("max_size", max_bytes)
    entries = sorted(store.entries(), key=lambda e: (e.accessed or e.created, e.created, e.key))
    total = sum(e.size for e in entries)
    removed = 0
    for e in entries:
        if total <= limit:
            break
        if store.delete(e.key):
            removed += 1
        total -= e.size
    return removed
