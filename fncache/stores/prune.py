"""The one policy for removing entries by age, use, size and count: ``fncache prune``, ``fncache
clear --older-than/--unused-for/--larger-than/--python`` and ``fncache.Memory.reduce_size`` all
plan here (:func:`plan_prune`, :func:`select`).

Each function takes any :class:`~fncache.stores.Store` and works from :meth:`Store.listing` (what the
store knows of each entry without reading it: size, creation time, last use, function), so it never
reads or unpickles a value, and on Redis and S3 reads no record per entry. Safe to run while
other processes use the store: an entry added meanwhile may or may not be considered, and an entry
that another process deletes first simply does not count. Sizes are the stored sizes of the values
as listed, not the disk space a backend uses around them (SQLite pages, directory entries).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from fncache._errors import ConfigError
from fncache.stores._base import EntryInfo, Store

__all__ = ["DELETE_BATCH", "last_active", "matches", "name_matches", "plan_prune", "python_of", "select"]

#: Keys per :meth:`Store.delete_many` call when a plan is carried out (a shared store deletes a
#: batch in a few requests, not one or two per entry).
DELETE_BATCH = 20_000


def _bound(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or value < 0:
        raise ConfigError(f"{name}: expected a non-negative number, got {value!r}")
    return float(value)


def last_active(info: EntryInfo) -> float:
    """When an entry was last created or used (usage records, or the store's read tracking)."""
    return max(info.created, info.accessed or 0.0)


def matches(info: EntryInfo, function: str | None) -> bool:
    """Whether an entry belongs to ``function``: ``module:qualname``, ``module.qualname`` or ``qualname``."""
    return function is None or name_matches(info.function, function)


def name_matches(fid: str, function: str) -> bool:
    """Whether the recorded name ``fid`` (``module:qualname``) is ``function``, given as
    ``module:qualname``, ``module.qualname`` or ``qualname``."""
    if fid == function:
        return True
    module, _, qualname = fid.partition(":")
    return function in (qualname, f"{module}.{qualname}")


def python_of(store: Store, info: EntryInfo) -> str | None:
    """The Python version that wrote an entry: from its listing, else from its metadata (one small
    read per entry on stores whose listing names the function only). ``None``: unknown."""
    if info.python is not None or info.damaged:
        return info.python
    return EntryInfo(info.key, 0, 0.0, None, store.get_meta(info.key)).python


def _given(name: str, value: float | None) -> float | None:
    """``value`` checked as option ``name`` (a non-negative number), or None if not given."""
    return None if value is None else _bound(name, value)


def _ago(name: str, seconds: float | None, t: float) -> float | None:
    """The time ``seconds`` (option ``name``) before ``t``, or None if not given."""
    given = _given(name, seconds)
    return None if given is None else t - given


def _tests(store: Store, function: str | None, python: str | None, cutoff: float | None,
           idle: float | None, limit: float | None) -> list[Callable[[EntryInfo], bool]]:
    """One test per filter given, in order: the Python version last (it may read metadata)."""
    tests: list[Callable[[EntryInfo], bool]] = [lambda e: matches(e, function)]
    if cutoff is not None:
        tests.append(lambda e: e.created < cutoff)
    if idle is not None:
        tests.append(lambda e: last_active(e) < idle)
    if limit is not None:
        tests.append(lambda e: e.size > limit)
    if python is not None:
        tests.append(lambda e: python_of(store, e) == python)
    return tests


def select(
    store: Store,
    *,
    function: str | None = None,
    python: str | None = None,
    older_than: float | None = None,
    larger_than: float | None = None,
    unused_for: float | None = None,
    entries: Iterable[EntryInfo] | None = None,
) -> list[EntryInfo]:
    """The entries matching every filter given: one function, created more than ``older_than``
    seconds ago, neither created nor used within the last ``unused_for`` seconds, larger than
    ``larger_than`` bytes, written by Python ``python`` (``"3.11"``). Entries whose creation time
    is unknown (metadata lost) count as oldest.
    ``entries`` replaces the store's listing (e.g. wrapped in a progress display)."""
    t = time.time()
    cutoff = _ago("older_than", older_than, t)
    idle = _ago("unused_for", unused_for, t)
    limit = _given("larger_than", larger_than)
    tests = _tests(store, function, python, cutoff, idle, limit)
    listed = store.listing() if entries is None else entries
    metas: dict[Any, dict[str, Any]] = {}
    # Kept slim, as prune keeps what it picks: a clear with filters may select a million entries.
    return [_picked(r, metas) for r in _rank(e for e in listed if all(test(e) for test in tests))]


def plan_prune(store: Store, max_bytes: float | None = None, *, older_than: float | None = None,
               max_items: int | None = None,
               entries: Iterable[EntryInfo] | None = None) -> list[EntryInfo]:
    """The entries to remove, the one pruning policy of ``fncache prune``, ``clear``'s age limits'
    companion and ``Memory.reduce_size``: those neither created nor used within ``older_than``
    seconds, then, least recently active first (damaged entries and those of unknown age first of
    all), as many as it takes to bring the stored bytes down to ``max_bytes`` and the number of
    entries down to ``max_items``. Entries in use are kept longest: the last use counts where the
    store has usage records. Decided on the entries as listed, never on a summary."""
    limit = _given("max_size", max_bytes)
    items = None if max_items is None else int(_bound("max_items", max_items))
    idle = _ago("older_than", older_than, time.time())
    if limit is None and items is None and idle is None:
        return []
    if _nothing_to_prune(store, limit, items, idle):  # then so is any part of the store
        return []
    # Ranked as compact tuples, not as the listed entries: a million listed entries held with
    # their metadata took 1.3 GB; an entry is made again (with its function and Python version
    # only) for the entries picked.
    ranked = sorted(_rank(store.listing() if entries is None else entries))
    out = [r for r in ranked if idle is not None and r[1] < idle]
    if limit is not None or items is not None:
        out = _add_to_limits(ranked, out, limit, items)
    del ranked
    metas: dict[Any, dict[str, Any]] = {}  # one metadata dict per function, version and damage
    return [_picked(r, metas) for r in out]


#: A listed entry as prune ranks it: (not damaged, last active, created, key, n) first, the order
#: (``n``, the listing's order, makes every rank distinct); then size, last use, uses, function,
#: Python version and, for a damaged entry, what is wrong (its ``meta["damaged"]``).
_Ranked = tuple[bool, float, float, str, int, int, "float | None", "int | None", str, "str | None",
                Any]


def _rank(entries: Iterable[EntryInfo]) -> Iterable[_Ranked]:
    names: dict[Any, Any] = {}  # one string object per function name and version
    for n, e in enumerate(entries):
        fn, py = e.function, e.python
        fn, py = names.setdefault(fn, fn), names.setdefault(py, py)
        yield (not e.damaged, last_active(e), e.created, e.key, n, e.size, e.accessed, e.uses, fn,
               py, str(e.meta.get("damaged")) if e.damaged else None)


def _picked(r: _Ranked, metas: dict[Any, dict[str, Any]]) -> EntryInfo:
    """The entry ranked as ``r``, with the metadata prune and its callers read (function, Python
    version; for a damaged entry what is wrong), one dict shared by the entries that have the
    same (``metas``: entries are frozen, and nothing changes their metadata)."""
    damaged = not r[0]
    group = (r[10],) if damaged else (r[8], r[9])
    meta = metas.get(group)
    if meta is None:
        meta = metas[group] = {"damaged": r[10]} if damaged else {"function": r[8], "python": r[9]}
    return EntryInfo(key=r[3], size=r[5], created=r[2], accessed=r[6], meta=meta, damaged=damaged,
                     uses=r[7])


def _nothing_to_prune(store: Store, limit: float | None, items: int | None,
                      idle: float | None) -> bool:
    """Whether the store's own summary (where it keeps one: see :meth:`Store.kept_summary`) shows
    that no entry is past the limits: within ``limit`` bytes and ``items`` entries, none created
    before ``idle``. Then nothing is listed. The summary can only ever spare entries this way:
    what a prune removes is always chosen from the entries as listed."""
    groups = store.kept_summary()
    if groups is None:
        return False  # only a listing can tell
    return ((limit is None or sum(g.size for g in groups) <= limit)
            and (items is None or sum(g.entries for g in groups) <= items)
            and (idle is None or all(g.oldest >= idle for g in groups)))


def _add_to_limits(ranked: list[_Ranked], out: list[_Ranked], limit: float | None,
                   items: int | None) -> list[_Ranked]:
    """``out`` and, in ``ranked``'s order, the entries it takes to bring the bytes kept down to
    ``limit`` and the entries kept down to ``items``."""
    total = sum(r[5] for r in ranked) - sum(r[5] for r in out)
    count = len(ranked) - len(out)
    doomed = {r[4] for r in out}
    for r in ranked:
        if (limit is None or total <= limit) and (items is None or count <= items):
            break
        if r[4] not in doomed:
            out.append(r)
            total -= r[5]
            count -= 1
    return out
