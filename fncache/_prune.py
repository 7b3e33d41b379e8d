"""Removing entries by age and size, for ``fncache clear --older-than/--larger-than`` and ``prune``.

Each function takes any :class:`~fncache.stores.Store` and works from :meth:`Store.entries` (the
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

__all__ = ["matches", "plan_prune", "select"]


def _bound(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or value < 0:
        raise ConfigError(f"{name}: expected a non-negative number, got {value!r}")
    return float(value)


def matches(info: EntryInfo, function: str | None) -> bool:
    """Whether an entry belongs to ``function``: ``module:qualname``, ``module.qualname`` or ``qualname``."""
    if function is None:
        return True
    fid = info.function
    if fid == function:
        return True
    module, _, qualname = fid.partition(":")
    return function in (qualname, f"{module}.{qualname}")


def select(
    store: Store,
    *,
    function: str | None = None,
    older_than: float | None = None,
    larger_than: float | None = None,
    entries: Iterable[EntryInfo] | None = None,
) -> list[EntryInfo]:
    """The entries matching every filter given: one function, created more than ``older_than``
    seconds ago, larger than ``larger_than`` bytes. Entries whose creation time is unknown (metadata
    lost) count as oldest. ``entries`` replaces the store's listing (e.g. wrapped in a progress
    display)."""
    cutoff = None if older_than is None else time.time() - _bound("older_than", older_than)
    limit = None if larger_than is None else _bound("larger_than", larger_than)
    return [
        e for e in list(store.entries() if entries is None else entries)
        if matches(e, function)
        and (cutoff is None or e.created < cutoff)
        and (limit is None or e.size > limit)
    ]


def plan_prune(store: Store, max_bytes: int) -> list[EntryInfo]:
    """The entries :func:`prune_to_size` would remove, least recently used first."""
    limit = _bound("max_size", max_bytes)
    entries = sorted(store.entries(), key=lambda e: (e.accessed or e.created, e.created, e.key))
    total = sum(e.size for e in entries)
    out = []
    for e in entries:
        if total <= limit:
            break
        out.append(e)
        total -= e.size
    return out
