"""The store commands of ``fncache``: ``info``, ``ls``, ``clear`` and ``prune``.

``info``, ``ls`` and an unfiltered ``clear`` (or one by ``--function`` alone) answer from
:meth:`Store.summary` (the disk store keeps it in a table beside its entries: no scan), and remove
through :meth:`Store.clear` / :meth:`Store.clear_function` (the disk store deletes in batches of
rows, with a progress counter on a terminal). The other filters and ``prune`` read the listing and
decide on the entries themselves, never on a summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from typing import Any

from fncache.cli.common import (
    Usage,
    emit,
    hint_unknown_function,
    store_from,
)
from fncache.cli.format import (
    DAMAGED,
    entries_word,
    human_age,
    human_size,
    one_line,
    progress,
    pythons_text,
    version_order,
)
from fncache.stores import EntryInfo, Store
from fncache.stores._base import FunctionSummary
from fncache.stores.prune import DELETE_BATCH

__all__ = ["LS_ORDER", "cmd_clear", "cmd_info", "cmd_ls", "cmd_prune"]


def size_of(entries: Iterable[EntryInfo]) -> int:
    return sum(e.size for e in entries)


def select_entries(store: Store, args: argparse.Namespace) -> list[EntryInfo]:
    from fncache.code.targets import recorded_name
    from fncache.stores.prune import select

    function = getattr(args, "function", None)
    return select(
        store,
        # path/to/job.py:step names what `python job.py` records: job:step.
        function=None if function is None else recorded_name(function),
        older_than=getattr(args, "older_than", None),
        larger_than=getattr(args, "larger_than", None),
        unused_for=getattr(args, "unused_for", None),
        python=getattr(args, "python", None),
        entries=progress(store.listing(), "scanning"),
    )


def sweep_sources(store: Store) -> None:
    """Remove the kept sources (explain's diffs) no remaining entry refers to."""
    from fncache.code.sources import unused

    doomed = unused(store)
    if doomed:
        store.delete_sources(doomed)


def remove(store: Store, targets: list[EntryInfo]) -> tuple[int, int]:
    """(entries removed, their bytes), in batches: a shared store deletes a batch in a few
    requests, not one or two per entry. Entries another process removed first do not count (their
    bytes are then counted in proportion: a store's batch delete says how many, not which)."""
    removed = freed = 0
    batches = [targets[i : i + DELETE_BATCH] for i in range(0, len(targets), DELETE_BATCH)]
    for batch in progress(batches, "removing batches", len(batches)):
        n = store.delete_many([t.key for t in batch])
        size = size_of(batch)
        removed += n
        freed += size if n == len(batch) else size * n // max(len(batch), 1)
    return removed, freed


def check_can_confirm(args: argparse.Namespace) -> None:
    """Deleting needs a yes: ``--yes``, or an answer on a terminal. Without a terminal to ask on
    (a pipe, cron, CI) nothing is deleted: bad usage, as apt does."""
    if not args.yes and not args.dry_run and not sys.stdin.isatty():
        raise Usage("stdin is not a terminal, so there is no one to confirm: pass --yes to "
                     "remove entries (or --dry-run to see what would be removed)")


def confirm(args: argparse.Namespace, what: str) -> bool:
    if args.yes:
        return True
    answer = input(f"remove {what}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def by_function(entries: Iterable[EntryInfo]) -> list[dict[str, Any]]:
    """Entries grouped by function (``(damaged)`` for unreadable metadata), largest first."""
    groups: dict[str, dict[str, Any]] = {}
    for e in entries:
        name = DAMAGED if e.damaged else e.function or "?"
        g = groups.setdefault(name, {"function": name, "entries": 0, "bytes": 0})
        g["entries"] += 1
        g["bytes"] += e.size
    return sorted(groups.values(), key=lambda g: (-g["bytes"], g["function"]))


def show_dry_run(args: argparse.Namespace, store: Store, targets: list[EntryInfo]) -> int:
    """Say which functions, entries and bytes would be removed; remove nothing."""
    return _show_plan(args, store, by_function(targets), len(targets), size_of(targets),
                      [t.key for t in targets])


def _show_plan(args: argparse.Namespace, store: Store, groups: list[dict[str, Any]], count: int,
               total: int, keys: list[str] | None) -> int:
    """The dry run's report: per function (largest first), entries and bytes; the keys in JSON
    where the plan was made from the entries (not for a whole store or function, from the summary)."""
    rows = sorted(({"function": g["function"], "entries": g["entries"], "bytes": g["bytes"]}
                   for g in groups), key=lambda g: (-g["bytes"], g["function"]))
    lines = [f"would remove {entries_word(count)} ({human_size(total)}) from {store.url}"
             + (":" if rows else "")]
    lines += [f"  {one_line(g['function']):<50} {entries_word(g['entries']):>12} "
              f"{human_size(g['bytes']):>11}"
              for g in rows]
    data: dict[str, Any] = {"would_remove": count, "bytes": total, "functions": rows}
    if keys is not None:
        data["keys"] = keys
    emit(args, data, "\n".join(lines))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    store = store_from(args)
    summary = store.summary()
    sources = store.source_sizes()
    count = sum(s.entries for s in summary)
    values = sum(s.size for s in summary)
    # A disk store's SQLite database (with its write-ahead log) is space the store takes too.
    database = store.database_bytes()
    # Value files no entry owns (writers killed mid-write; disk stores).
    orphans, orphan_bytes = store.orphans()
    damaged = sum(s.entries for s in summary if s.damaged)
    pythons = pythons_of(summary)
    data = {
        "store": store.url,
        "kind": store.kind,
        "entries": count,
        "bytes": values,
        "database_bytes": database,
        "total_bytes": values + database,
        "functions": len({s.function for s in summary if not s.damaged}),
        "damaged": damaged,
        "orphans": orphans,
        "orphan_bytes": orphan_bytes,
        "pythons": pythons,
        "sources": len(sources),
        "source_bytes": sum(sources.values()),
    }
    text = "\n".join([
        f"store:     {store.url} ({store.kind})",
        f"entries:   {count}",
        f"size:      {human_size(values + database)} ({values + database} bytes: {values} of "
        f"values, {database} of database)",
        f"functions: {data['functions']}",
        f"pythons:   {pythons_text(pythons)}",
        f"sources:   {len(sources)} function versions, {human_size(sum(sources.values()))}"
        " (kept for explain's diffs; clear and prune remove those no entry needs)",
        f"orphans:   {orphans} files, {human_size(orphan_bytes)}"
        " (no entry owns them; removed by clear and prune)",
        *([f"damaged:   {damaged} (unreadable metadata; `fncache clear` removes them)"]
          if damaged else []),
    ])
    emit(args, data, text)
    return 0


def pythons_of(summary: Iterable[FunctionSummary]) -> dict[str, int]:
    """Entries per Python version that wrote them (``?``: the listing does not say), newest first."""
    counts: dict[str, int] = {}
    for s in summary:
        if not s.damaged:
            version = s.python or "?"
            counts[version] = counts.get(version, 0) + s.entries
    return dict(sorted(counts.items(), key=lambda kv: version_order(kv[0]), reverse=True))


def _wanted(args: argparse.Namespace) -> str | None:
    """The ``--function`` given, as entries record it (``path/to/job.py:step`` is ``job:step``)."""
    from fncache.code.targets import recorded_name

    function = getattr(args, "function", None)
    return None if function is None else recorded_name(function)


def _new_group(name: str) -> dict[str, Any]:
    """The row of a function before any of its summary rows is added."""
    return {"function": name, "entries": 0, "bytes": 0, "newest": 0.0,
            "oldest": None, "used": None, "uses": 0, "pythons": {}}


def _add_row(g: dict[str, Any], s: FunctionSummary) -> None:
    """Merge one summary row ``s`` into its function's row ``g``."""
    g["entries"] += s.entries
    version = s.python or "?"
    g["pythons"][version] = g["pythons"].get(version, 0) + s.entries
    g["bytes"] += s.size
    g["newest"] = max(g["newest"], s.newest)
    g["oldest"] = s.oldest if g["oldest"] is None else min(g["oldest"], s.oldest)
    if s.used is not None:  # the last use of any entry of the function
        g["used"] = max(g["used"] or 0.0, s.used)
    g["uses"] += s.uses


def by_function_summary(summary: Iterable[FunctionSummary],
                        function: str | None = None) -> list[dict[str, Any]]:
    """The rows of :meth:`Store.summary` merged per function (``(damaged)`` for unreadable
    metadata), each with its entries, bytes, newest and oldest, last use, uses and pythons; only
    ``function``'s (as ``ls --function`` matches names) if given."""
    from fncache.stores.prune import name_matches

    groups: dict[str, dict[str, Any]] = {}
    for s in summary:
        if function is not None and (s.damaged or not name_matches(s.function, function)):
            continue
        name = DAMAGED if s.damaged else s.function or "?"
        _add_row(groups.setdefault(name, _new_group(name)), s)
    for g in groups.values():
        g["pythons"] = dict(sorted(g["pythons"].items(), key=lambda kv: version_order(kv[0]),
                                   reverse=True))
    return list(groups.values())


def cmd_ls(args: argparse.Namespace) -> int:
    store = store_from(args)
    groups = by_function_summary(store.summary(), _wanted(args))
    hint_unknown_function(store, args, bool(groups))
    rows = sorted(groups, key=lambda g: (LS_ORDER[args.sort](g), g["function"]))
    now = time.time()
    lines = [f"{'FUNCTION':<50} {'ENTRIES':>8} {'SIZE':>11}  {'NEWEST':<12}  {'USES':>6}  "
             f"{'LAST USED':<12}  PYTHON"]
    for g in rows:
        used = "-" if g["used"] is None else human_age(max(now - g["used"], 0.0))
        versions = ",".join(g["pythons"])
        lines.append(f"{one_line(g['function']):<50} {g['entries']:>8} {human_size(g['bytes']):>11}  "
                     f"{human_age(now - g['newest']):<12}  {g['uses']:>6}  {used:<12}  {versions}")
    if not rows:
        lines = ["(no entries)"]
    emit(args, rows, "\n".join(lines))
    return 0


# ``ls --sort``: the order of the rows (ties by function name). ``used``: most recently used first,
# functions without usage records last.
LS_ORDER: dict[str, Any] = {
    "size": lambda g: -g["bytes"],
    "age": lambda g: -g["newest"],
    "count": lambda g: -g["entries"],
    "used": lambda g: -(g["used"] if g["used"] is not None else -1.0),
}


def _progress_counter(store: Store, label: str) -> None:
    """On a terminal, a counter on stderr of the entries a bulk removal has removed so far."""
    if not sys.stderr.isatty():
        return
    last = [0.0]

    def show(n: int) -> None:
        now = time.monotonic()
        if now - last[0] > 0.2:
            last[0] = now
            print(f"\r{label}: {n}", end="", file=sys.stderr, flush=True)

    store.progress = show


def cmd_clear(args: argparse.Namespace) -> int:
    check_can_confirm(args)
    store = store_from(args)
    if _selects_entries(args):
        return _clear_selected(args, store, select_entries(store, args))
    # Everything, or one function's entries: the summary says what goes, the store removes
    # them in batches (damaged entries and entries added meanwhile included).
    groups = by_function_summary(store.summary(), _wanted(args))
    hint_unknown_function(store, args, bool(groups))
    count, nbytes = sum(g["entries"] for g in groups), sum(g["bytes"] for g in groups)
    if args.dry_run:
        return _show_plan(args, store, groups, count, nbytes, None)
    what = f"{entries_word(count)} ({human_size(nbytes)}) from {store.url}"
    if count and not confirm(args, what):
        print("nothing removed")
        return 1
    _progress_counter(store, "removing")
    if args.function is None:
        removed = store.clear()
    else:
        removed = sum(store.clear_function(g["function"]) for g in groups)
    return _removed(args, store, removed, nbytes)


def _selects_entries(args: argparse.Namespace) -> bool:
    """Whether ``clear`` picks entries one by one (by age, size, last use or Python), so that
    the store is scanned rather than cleared per function."""
    return any(getattr(args, option) is not None
               for option in ("older_than", "larger_than", "unused_for", "python"))


def _clear_selected(args: argparse.Namespace, store: Store, targets: list[EntryInfo]) -> int:
    hint_unknown_function(store, args, bool(targets))
    return _remove_planned(args, store, targets)


def _remove_planned(args: argparse.Namespace, store: Store, targets: list[EntryInfo]) -> int:
    """Show (``--dry-run``) or, once confirmed, remove the entries a clear or prune picked."""
    if args.dry_run:
        return show_dry_run(args, store, targets)
    what = f"{entries_word(len(targets))} ({human_size(size_of(targets))}) from {store.url}"
    if targets and not confirm(args, what):
        print("nothing removed")
        return 1
    removed, freed = remove(store, targets)
    return _removed(args, store, removed, freed)


def _removed(args: argparse.Namespace, store: Store, removed: int, freed: int) -> int:
    """Sweep what the removed entries leave (kept sources, orphaned files) and say what went."""
    if removed and sys.stderr.isatty():
        print(f"\rremoved: {removed} done" + " " * 10, file=sys.stderr)
    sweep_sources(store)
    swept, swept_bytes = store.sweep_orphans()
    emit(args, {"removed": removed, "bytes": freed, "orphans_removed": swept,
                "orphan_bytes": swept_bytes},
         f"removed {entries_word(removed)} ({human_size(freed)})"
         + (f" and {swept} orphaned files ({human_size(swept_bytes)})" if swept else ""))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from fncache.stores.prune import plan_prune

    if args.max_size is None and args.older_than is None:
        raise Usage("prune: give --max-size, --older-than or both")
    check_can_confirm(args)
    store = store_from(args)
    targets = plan_prune(store, args.max_size, older_than=args.older_than,
                         entries=progress(store.listing(), "scanning"))
    return _remove_planned(args, store, targets)
