"""The ``fncache`` command: look into a store and clean it up.

``fncache info | ls | clear | explain | doctor``, each with ``--dir DIR`` or ``--store URL`` (default:
``$FNCACHE_STORE``, ``$FNCACHE_DIR`` or ``~/.cache/fncache``) and ``--json`` on the reading commands.
Exit status: 0 success, 1 the operation failed (store unreachable, nothing to explain), 2 bad usage.
Nothing is deleted except by ``clear``, and ``clear`` on a terminal asks first unless given ``--yes``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from fncache._errors import ConfigError, FncacheError
from fncache._units import parse_duration, parse_size
from fncache.stores import EntryInfo, Store, default_store_url, open_store, redact

__all__ = ["main", "parse_duration", "parse_size"]


def _human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit} ago"
    return f"{seconds:.0f}s ago"


# What ``ls`` shows for entries whose metadata is unreadable or of the wrong types.
_DAMAGED = "(damaged)"


class _Fail(Exception):
    """A failure the command reports in one line (exit status 1)."""


# The file diskcache keeps its index in: a directory without it holds no store.
_DISK_INDEX = "cache.db"


def _store_from(args: argparse.Namespace) -> Store:
    """The store the command works on. Only ``doctor`` may create one: reading commands and
    ``clear``/``prune`` on a directory without a store fail (exit 1) and leave it untouched; a
    malformed store URL is bad usage (exit 2)."""
    if args.dir and args.store:
        raise _Usage("--dir and --store: give one or the other")
    url = args.store or args.dir or default_store_url()
    path = url[len("file://"):] if url.startswith("file://") else url
    if "://" not in path and args.command != "doctor":
        if not os.path.isdir(path):
            raise _Fail(f"no cache at {redact(url)!r} (the directory does not exist)")
        if not os.path.exists(os.path.join(path, _DISK_INDEX)):
            raise _Fail(f"no cache at {redact(url)!r} (the directory holds no fncache store)")
    try:
        return open_store(url)
    except ConfigError as e:
        raise _Usage(f"--store: {e}") from None


class _Usage(Exception):
    """Bad usage: exit status 2."""


def _progress(items: Iterable[Any], label: str, total: int | None = None) -> Iterable[Any]:
    """Yield items; on a terminal, show a counter on stderr every few hundred (quiet when piped)."""
    if not sys.stderr.isatty():
        yield from items
        return
    n = 0
    last = 0.0
    for item in items:
        n += 1
        now = time.monotonic()
        if now - last > 0.2:
            last = now
            of = f"/{total}" if total else ""
            print(f"\r{label}: {n}{of}", end="", file=sys.stderr, flush=True)
        yield item
    print(f"\r{label}: {n} done" + " " * 10, file=sys.stderr)


def _select(store: Store, args: argparse.Namespace) -> list[EntryInfo]:
    from fncache._prune import select

    return select(
        store,
        function=getattr(args, "function", None),
        older_than=getattr(args, "older_than", None),
        larger_than=getattr(args, "larger_than", None),
        unused_for=getattr(args, "unused_for", None),
        entries=_progress(store.listing(), "scanning"),
    )


def _remove(store: Store, targets: list[EntryInfo]) -> int:
    # In batches: a shared store deletes a batch in a few requests, not one or two per entry.
    batches = [targets[i : i + _DELETE_BATCH] for i in range(0, len(targets), _DELETE_BATCH)]
    return sum(store.delete_many([t.key for t in batch])
               for batch in _progress(batches, "removing batches", len(batches)))


_DELETE_BATCH = 20_000


def _confirm(args: argparse.Namespace, what: str) -> bool:
    if args.yes or not sys.stdin.isatty():
        return True
    answer = input(f"remove {what}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(text)


# -- commands ------------------------------------------------------------------------------------

def cmd_info(args: argparse.Namespace) -> int:
    store = _store_from(args)
    entries = list(store.listing())
    functions = {e.function for e in entries if not e.damaged}
    data = {
        "store": store.url,
        "kind": store.kind,
        "entries": len(entries),
        "bytes": sum(e.size for e in entries),
        "functions": len(functions),
        "damaged": sum(e.damaged for e in entries),
    }
    # Value files no entry owns (writers killed mid-write; disk stores).
    data["orphans"], data["orphan_bytes"] = store.orphans()
    text = "\n".join([
        f"store:     {store.url} ({store.kind})",
        f"entries:   {data['entries']}",
        f"size:      {_human_size(float(str(data['bytes'])))} ({data['bytes']} bytes)",
        f"functions: {data['functions']}",
        f"orphans:   {data['orphans']} files, {_human_size(float(str(data['orphan_bytes'])))}"
        " (no entry owns them; removed by clear and prune)",
        *([f"damaged:   {data['damaged']} (unreadable metadata; `fncache clear` removes them)"]
          if data["damaged"] else []),
    ])
    _emit(args, data, text)
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    store = _store_from(args)
    groups: dict[str, dict[str, Any]] = {}
    for info in _select(store, args):
        name = _DAMAGED if info.damaged else info.function or "?"
        g = groups.setdefault(name, {"function": name, "entries": 0, "bytes": 0, "newest": 0.0,
                                     "oldest": None, "used": None, "uses": 0})
        g["entries"] += 1
        g["bytes"] += info.size
        g["newest"] = max(g["newest"], info.created)
        g["oldest"] = info.created if g["oldest"] is None else min(g["oldest"], info.created)
        if info.accessed is not None:  # the last use of any entry of the function
            g["used"] = max(g["used"] or 0.0, info.accessed)
        g["uses"] += info.uses or 0
    rows = sorted(groups.values(), key=lambda g: (_LS_ORDER[args.sort](g), g["function"]))
    now = time.time()
    lines = [f"{'FUNCTION':<50} {'ENTRIES':>8} {'SIZE':>11}  {'NEWEST':<12}  {'USES':>6}  LAST USED"]
    for g in rows:
        used = "-" if g["used"] is None else _human_age(max(now - g["used"], 0.0))
        lines.append(f"{g['function']:<50} {g['entries']:>8} {_human_size(g['bytes']):>11}  "
                     f"{_human_age(now - g['newest']):<12}  {g['uses']:>6}  {used}")
    if not rows:
        lines = ["(no entries)"]
    _emit(args, rows, "\n".join(lines))
    return 0


# ``ls --sort``: the order of the rows (ties by function name). ``used``: most recently used first,
# functions without usage records last.
_LS_ORDER: dict[str, Any] = {
    "size": lambda g: -g["bytes"],
    "age": lambda g: -g["newest"],
    "count": lambda g: -g["entries"],
    "used": lambda g: -(g["used"] if g["used"] is not None else -1.0),
}


def cmd_clear(args: argparse.Namespace) -> int:
    store = _store_from(args)
    filtered = args.function or args.older_than is not None or args.larger_than is not None \
        or args.unused_for is not None
    targets = _select(store, args) if filtered or args.dry_run else None
    count = len(targets) if targets is not None else len(store)
    what = f"{count} entr{'y' if count == 1 else 'ies'} from {store.url}"
    if args.dry_run:
        data = {"would_remove": count, "keys": [t.key for t in targets or []]}
        _emit(args, data, f"would remove {what}")
        return 0
    if count and not _confirm(args, what):
        print("nothing removed")
        return 1
    removed = store.clear() if targets is None else _remove(store, targets)
    swept, swept_bytes = store.sweep_orphans()
    _emit(args, {"removed": removed, "orphans_removed": swept},
          f"removed {removed} entr{'y' if removed == 1 else 'ies'}"
          + (f" and {swept} orphaned files ({_human_size(swept_bytes)})" if swept else ""))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from fncache._prune import plan_prune

    if args.max_size is None and args.older_than is None:
        raise _Usage("prune: give --max-size, --older-than or both")
    store = _store_from(args)
    targets = plan_prune(store, args.max_size, older_than=args.older_than,
                         entries=_progress(store.listing(), "scanning"))
    freed = sum(t.size for t in targets)
    what = f"{len(targets)} entries ({_human_size(freed)}) from {store.url}"
    if args.dry_run:
        _emit(args, {"would_remove": len(targets), "bytes": freed}, f"would remove {what}")
        return 0
    if targets and not _confirm(args, what):
        print("nothing removed")
        return 1
    removed = _remove(store, targets)
    swept, swept_bytes = store.sweep_orphans()
    _emit(args, {"removed": removed, "bytes": freed, "orphans_removed": swept},
          f"removed {removed} entr{'y' if removed == 1 else 'ies'} ({_human_size(freed)})"
          + (f" and {swept} orphaned files ({_human_size(swept_bytes)})" if swept else ""))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from fncache import _explain

    store = _store_from(args)
    result = _explain.explain_function(store, args.target)
    _emit(args, result.as_dict(), str(result))
    if result.error is not None and not result.entries:
        # Nothing stored and no code to look at: there is nothing to explain.
        print(f"fncache explain: cannot import {args.target}: {result.error}", file=sys.stderr)
        return 1
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from fncache import _doctor

    store = _store_from(args)
    report = _doctor.run(store, args.target, seeds=args.seeds)
    _emit(args, report.as_dict(), str(report))
    return 0 if report.ok else 1


# -- parser --------------------------------------------------------------------------------------

def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("store")
    where.add_argument("--dir", help="cache directory (a disk store)")
    where.add_argument("--store", help="store URL: a path, file://, memory://, redis://, s3://")

    reading = argparse.ArgumentParser(add_help=False)
    reading.add_argument("--json", action="store_true", help="machine-readable output")

    p = argparse.ArgumentParser(prog="fncache", description=__doc__.split("\n\n")[0])
    from fncache import __version__

    p.add_argument("--version", action="version", version=f"fncache {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser("info", parents=[common, reading], help="store location, entries, bytes")
    s.set_defaults(run=cmd_info)
    s = sub.add_parser("stats", parents=[common, reading], help="same as info")
    s.set_defaults(run=cmd_info)

    s = sub.add_parser("ls", parents=[common, reading], help="entries grouped by function")
    s.add_argument("--function", metavar="QUALNAME", help="only this function")
    s.add_argument("--sort", choices=tuple(_LS_ORDER), default="size",
                   help="size, age (newest first), count, used (most recently used first)")
    s.set_defaults(run=cmd_ls)

    s = sub.add_parser("clear", parents=[common, reading], help="remove entries")
    s.add_argument("--function", metavar="QUALNAME",
                   help="only entries of this function (QUALNAME or MODULE:QUALNAME)")
    s.add_argument("--older-than", type=_duration, metavar="AGE",
                   help="only entries created longer ago than AGE (45s, 30m, 12h, 7d, 2w)")
    s.add_argument("--larger-than", type=_size, metavar="SIZE",
                   help="only entries larger than SIZE (512, 10MB, 2GB)")
    s.add_argument("--unused-for", type=_duration, metavar="AGE",
                   help="only entries neither used nor created within AGE (usage records)")
    s.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    s.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    s.set_defaults(run=cmd_clear)

    s = sub.add_parser("prune", parents=[common, reading],
                       help="remove idle entries, then least recently used ones until the store "
                            "fits a size")
    s.add_argument("--max-size", type=_size, metavar="SIZE",
                   help="keep at most SIZE bytes of entries (512, 10MB, 2GB)")
    s.add_argument("--older-than", type=_duration, metavar="AGE",
                   help="remove entries neither created nor used within AGE (45s, 30m, 12h, 7d)")
    s.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    s.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    s.set_defaults(run=cmd_prune)

    s = sub.add_parser("explain", parents=[common, reading],
                       help="what differs between a function's current code and its stored entries")
    s.add_argument("target", metavar="MODULE:QUALNAME", help="e.g. pipeline:features or script.py:f")
    s.set_defaults(run=cmd_explain)

    s = sub.add_parser("doctor", parents=[common, reading],
                       help="check the environment, the store and the key stability of a function")
    s.add_argument("target", nargs="?", metavar="SCRIPT_OR_MODULE:FUNC")
    s.add_argument("--seeds", default="1,2,random", help="PYTHONHASHSEEDs to compare (default 1,2,random)")
    s.set_defaults(run=cmd_doctor)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except _Usage as e:
        parser.error(str(e))  # exits with status 2
    except (_Fail, FncacheError, OSError) as e:
        print(f"fncache {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
