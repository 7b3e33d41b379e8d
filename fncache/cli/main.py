"""The ``fncache`` command: look into a store and clean it up.

``fncache info | ls | clear | prune | explain | doctor``, each with ``--dir DIR`` or ``--store URL``
(default: ``$FNCACHE_STORE``, ``$FNCACHE_DIR`` or ``~/.cache/fncache``) and ``--json`` on the reading
commands. Exit status: 0 success, 1 the operation failed (no store there, a function that cannot be
found), 2 bad usage (a mistyped command, option or name gets the nearest valid one suggested), 141
when the reader of the output went away (``fncache ls | head -1``), quietly. Sizes and ages need a
unit (``10MB``, ``5d``): a bare number is refused. Only ``doctor`` creates a store, and only
``clear`` and ``prune`` delete: on a terminal they ask first, elsewhere they need ``--yes``.
``explain`` and ``doctor`` run the code of the function they are given (a script without its
``__main__`` block, or a module import, from the working directory as ``python -m`` has it), with
caching off: they never store entries. ``explain`` also takes a name as ``ls`` shows it, or its bare
qualname, and finds the function among the store's.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import time
import types
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fncache._errors import ConfigError, FncacheError
from fncache._units import parse_duration, parse_size
from fncache.stores import EntryInfo, Store, default_store, open_store, redact
from fncache.stores.tiered import split_tiers

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


class _ClosedPipe(Exception):
    """Whoever read the output stopped reading (``fncache ls | head -1``): end quietly."""


# The exit status of a command whose reader went away, as a shell shows one killed by SIGPIPE.
_EXIT_CLOSED_PIPE = 141


def _closest(word: str, choices: Iterable[str]) -> str | None:
    """The valid name nearest to a mistyped one, if any is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the nearest valid name, or ``""``."""
    close = _closest(word, choices)
    return f"; did you mean {close!r}?" if close else ""


# The file diskcache keeps its index in: a directory without it holds no store.
_DISK_INDEX = "cache.db"
# Where fncache.Memory(LOCATION) keeps its store, inside LOCATION.
_MEMORY_SUBDIR = "fncache"


def _store_from(args: argparse.Namespace) -> Store:
    """The store the command works on. Only ``doctor`` may create one: reading commands and
    ``clear``/``prune`` on a directory without a store fail (exit 1) and leave it untouched; a
    malformed store URL is bad usage (exit 2). A ``fncache.Memory`` location holds its store in a
    subdirectory: given the location, the command works on that store."""
    if args.dir and args.store:
        raise _Usage("--dir and --store: give one or the other")
    spec: Any = args.store or (Path(os.path.expanduser(args.dir)) if args.dir else default_store())
    # Tiers ("DIR,s3://...", never a directory's name) are checked one by one: each directory
    # must hold a store (a fncache.Memory location: the store in its subdirectory).
    tiers = split_tiers(spec)
    parts: list[Any] = []
    for part in tiers or [spec]:
        text = os.fspath(part)
        path = text[len("file://"):] if text.startswith("file://") else text
        if "://" not in path:
            path = os.path.expanduser(path)
            inner = os.path.join(path, _MEMORY_SUBDIR)
            if not os.path.exists(os.path.join(path, _DISK_INDEX)) \
                    and os.path.exists(os.path.join(inner, _DISK_INDEX)):
                part = Path(inner)
            elif args.command != "doctor":
                if not os.path.isdir(path):
                    raise _Fail(f"no cache at {redact(text)!r} (the directory does not exist)")
                if not os.path.exists(os.path.join(path, _DISK_INDEX)):
                    raise _Fail(f"no cache at {redact(text)!r} (the directory holds no fncache store)")
        parts.append(part)
    spec = parts if tiers else parts[0]
    try:
        return open_store(spec)
    except ConfigError as e:
        raise _Usage(f"--store: {e}") from None


class _Usage(Exception):
    """Bad usage: exit status 2."""


def _size_of(entries: Iterable[EntryInfo]) -> int:
    return sum(e.size for e in entries)


def _entries_word(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


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
    from fncache.cli.prune import select
    from fncache.code.targets import recorded_name

    function = getattr(args, "function", None)
    return select(
        store,
        # path/to/job.py:step names what `python job.py` records: job:step.
        function=None if function is None else recorded_name(function),
        older_than=getattr(args, "older_than", None),
        larger_than=getattr(args, "larger_than", None),
        unused_for=getattr(args, "unused_for", None),
        python=getattr(args, "python", None),
        entries=_progress(store.listing(), "scanning"),
    )


def _sweep_sources(store: Store) -> None:
    """Remove the kept sources (explain's diffs) no remaining entry refers to."""
    from fncache.code.sources import unused

    doomed = unused(store)
    if doomed:
        store.delete_sources(doomed)


def _remove(store: Store, targets: list[EntryInfo]) -> tuple[int, int]:
    """(entries removed, their bytes), in batches: a shared store deletes a batch in a few
    requests, not one or two per entry. Entries another process removed first do not count (their
    bytes are then counted in proportion: a store's batch delete says how many, not which)."""
    removed = freed = 0
    batches = [targets[i : i + _DELETE_BATCH] for i in range(0, len(targets), _DELETE_BATCH)]
    for batch in _progress(batches, "removing batches", len(batches)):
        n = store.delete_many([t.key for t in batch])
        size = _size_of(batch)
        removed += n
        freed += size if n == len(batch) else size * n // max(len(batch), 1)
    return removed, freed


_DELETE_BATCH = 20_000


def _check_can_confirm(args: argparse.Namespace) -> None:
    """Deleting needs a yes: ``--yes``, or an answer on a terminal. Without a terminal to ask on
    (a pipe, cron, CI) nothing is deleted: bad usage, as apt does."""
    if not args.yes and not args.dry_run and not sys.stdin.isatty():
        raise _Usage("stdin is not a terminal, so there is no one to confirm: pass --yes to "
                     "remove entries (or --dry-run to see what would be removed)")


def _confirm(args: argparse.Namespace, what: str) -> bool:
    if args.yes:
        return True
    answer = input(f"remove {what}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _by_function(entries: Iterable[EntryInfo]) -> list[dict[str, Any]]:
    """Entries grouped by function (``(damaged)`` for unreadable metadata), largest first."""
    groups: dict[str, dict[str, Any]] = {}
    for e in entries:
        name = _DAMAGED if e.damaged else e.function or "?"
        g = groups.setdefault(name, {"function": name, "entries": 0, "bytes": 0})
        g["entries"] += 1
        g["bytes"] += e.size
    return sorted(groups.values(), key=lambda g: (-g["bytes"], g["function"]))


def _dry_run(args: argparse.Namespace, store: Store, targets: list[EntryInfo]) -> int:
    """Say which functions, entries and bytes would be removed; remove nothing."""
    rows = _by_function(targets)
    total = _size_of(targets)
    lines = [f"would remove {_entries_word(len(targets))} ({_human_size(total)}) from {store.url}"
             + (":" if rows else "")]
    lines += [f"  {_one_line(g['function']):<50} {_entries_word(g['entries']):>12} "
              f"{_human_size(g['bytes']):>11}"
              for g in rows]
    _emit(args, {"would_remove": len(targets), "bytes": total, "functions": rows,
                 "keys": [t.key for t in targets]}, "\n".join(lines))
    return 0


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    try:
        if getattr(args, "json", False):
            print(json.dumps(data, indent=2, sort_keys=True, default=str))
        else:
            print(_printable(text))
        sys.stdout.flush()  # here, where a closed pipe can be told apart from a store's
    except BrokenPipeError:
        raise _ClosedPipe from None


def _hint_unknown_function(store: Store, args: argparse.Namespace, found: bool) -> None:
    """``--function NAME`` that matches no entry: say so on stderr, with the nearest stored name."""
    from fncache.code.targets import recorded_name

    function = getattr(args, "function", None)
    if function is None or found:
        return
    names = _stored_names(store)
    wanted = recorded_name(function)
    if not names or any(wanted in (n, n.rpartition(":")[2], n.replace(":", ".")) for n in names):
        return  # the function has entries; other filters left none of them
    print(_printable(f"fncache {args.command}: no entries of {function!r} in {store.url}"
                     + _did_you_mean_function(function, names)), file=sys.stderr)


def _stored_names(store: Store) -> list[str]:
    """The names entries in ``store`` are recorded under (``module:qualname``), sorted."""
    return sorted({e.function for e in store.listing() if not e.damaged and e.function})


def _did_you_mean_function(name: str, names: list[str]) -> str:
    """The nearest of ``names`` to ``name``, compared whole and by qualname alone."""
    close = _closest(name, names)
    if close is None:
        by_qualname = {n.rpartition(":")[2]: n for n in names}
        near = _closest(name.rpartition(":")[2], by_qualname)
        close = by_qualname[near] if near is not None else None
    return f"; did you mean {close!r}?" if close else ""


# Control characters but newline: function names come from a store that others may write, and a
# planted name must not move the cursor, retitle or clear the terminal of whoever lists the store.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c != 0x0A}


_CONTROL_AND_NEWLINE = {**_CONTROL, 0x0A: "\\x0a"}


def _one_line(text: str) -> str:
    """A field read from the store (a function name) on one line: every control character,
    newline included, as ``\\xNN``, so that a planted name cannot forge lines of a listing."""
    return text.translate(_CONTROL_AND_NEWLINE)


def _printable(text: str) -> str:
    """``text`` with control characters (escape sequences among them) shown as ``\\xNN``."""
    return text.translate(_CONTROL)


# -- commands ------------------------------------------------------------------------------------

def cmd_info(args: argparse.Namespace) -> int:
    store = _store_from(args)
    entries = list(store.listing())
    sources = store.source_sizes()
    values = _size_of(entries)
    # A disk store's SQLite database (with its write-ahead log) is space the store takes too.
    database = store.database_bytes()
    # Value files no entry owns (writers killed mid-write; disk stores).
    orphans, orphan_bytes = store.orphans()
    damaged = sum(e.damaged for e in entries)
    pythons = _pythons(entries)
    data = {
        "store": store.url,
        "kind": store.kind,
        "entries": len(entries),
        "bytes": values,
        "database_bytes": database,
        "total_bytes": values + database,
        "functions": len({e.function for e in entries if not e.damaged}),
        "damaged": damaged,
        "orphans": orphans,
        "orphan_bytes": orphan_bytes,
        "pythons": pythons,
        "sources": len(sources),
        "source_bytes": sum(sources.values()),
    }
    text = "\n".join([
        f"store:     {store.url} ({store.kind})",
        f"entries:   {len(entries)}",
        f"size:      {_human_size(values + database)} ({values + database} bytes: {values} of "
        f"values, {database} of database)",
        f"functions: {data['functions']}",
        f"pythons:   {_pythons_text(pythons)}",
        f"sources:   {len(sources)} function versions, {_human_size(sum(sources.values()))}"
        " (kept for explain's diffs; clear and prune remove those no entry needs)",
        f"orphans:   {orphans} files, {_human_size(orphan_bytes)}"
        " (no entry owns them; removed by clear and prune)",
        *([f"damaged:   {damaged} (unreadable metadata; `fncache clear` removes them)"]
          if damaged else []),
    ])
    _emit(args, data, text)
    return 0


def _pythons(entries: Iterable[EntryInfo]) -> dict[str, int]:
    """Entries per Python version that wrote them (``?``: the listing does not say), newest first."""
    counts: dict[str, int] = {}
    for e in entries:
        if not e.damaged:
            version = e.python or "?"
            counts[version] = counts.get(version, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: _version_order(kv[0]), reverse=True))


def _version_order(version: str) -> tuple[int, ...]:
    parts = version.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else (-1,)


def _pythons_text(pythons: dict[str, int]) -> str:
    if not pythons:
        return "-"
    text = ", ".join(f"{v} ({_entries_word(n)})" for v, n in pythons.items())
    if len(pythons) > 1 and "?" not in pythons:
        text += f"; remove an old version's with `fncache clear --python {next(reversed(pythons))}`"
    return text


def cmd_ls(args: argparse.Namespace) -> int:
    store = _store_from(args)
    groups: dict[str, dict[str, Any]] = {}
    selected = _select(store, args)
    _hint_unknown_function(store, args, bool(selected))
    for info in selected:
        name = _DAMAGED if info.damaged else info.function or "?"
        g = groups.setdefault(name, {"function": name, "entries": 0, "bytes": 0, "newest": 0.0,
                                     "oldest": None, "used": None, "uses": 0, "pythons": {}})
        g["entries"] += 1
        version = info.python or "?"
        g["pythons"][version] = g["pythons"].get(version, 0) + 1
        g["bytes"] += info.size
        g["newest"] = max(g["newest"], info.created)
        g["oldest"] = info.created if g["oldest"] is None else min(g["oldest"], info.created)
        if info.accessed is not None:  # the last use of any entry of the function
            g["used"] = max(g["used"] or 0.0, info.accessed)
        g["uses"] += info.uses or 0
    rows = sorted(groups.values(), key=lambda g: (_LS_ORDER[args.sort](g), g["function"]))
    now = time.time()
    lines = [f"{'FUNCTION':<50} {'ENTRIES':>8} {'SIZE':>11}  {'NEWEST':<12}  {'USES':>6}  "
             f"{'LAST USED':<12}  PYTHON"]
    for g in rows:
        g["pythons"] = dict(sorted(g["pythons"].items(), key=lambda kv: _version_order(kv[0]),
                                   reverse=True))
        used = "-" if g["used"] is None else _human_age(max(now - g["used"], 0.0))
        versions = ",".join(g["pythons"])
        lines.append(f"{_one_line(g['function']):<50} {g['entries']:>8} {_human_size(g['bytes']):>11}  "
                     f"{_human_age(now - g['newest']):<12}  {g['uses']:>6}  {used:<12}  {versions}")
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
    _check_can_confirm(args)
    store = _store_from(args)
    filtered = args.function or args.older_than is not None or args.larger_than is not None \
        or args.unused_for is not None or args.python is not None
    targets = _select(store, args)
    _hint_unknown_function(store, args, bool(targets))
    if args.dry_run:
        return _dry_run(args, store, targets)
    what = f"{_entries_word(len(targets))} ({_human_size(_size_of(targets))}) from {store.url}"
    if targets and not _confirm(args, what):
        print("nothing removed")
        return 1
    if filtered:
        removed, freed = _remove(store, targets)
        _sweep_sources(store)
    else:  # everything, damaged entries and entries added meanwhile included
        removed, freed = store.clear(), _size_of(targets)
        _sweep_sources(store)
    swept, swept_bytes = store.sweep_orphans()
    _emit(args, {"removed": removed, "bytes": freed, "orphans_removed": swept,
                 "orphan_bytes": swept_bytes},
          f"removed {_entries_word(removed)} ({_human_size(freed)})"
          + (f" and {swept} orphaned files ({_human_size(swept_bytes)})" if swept else ""))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from fncache.cli.prune import plan_prune

    if args.max_size is None and args.older_than is None:
        raise _Usage("prune: give --max-size, --older-than or both")
    _check_can_confirm(args)
    store = _store_from(args)
    targets = plan_prune(store, args.max_size, older_than=args.older_than,
                         entries=_progress(store.listing(), "scanning"))
    if args.dry_run:
        return _dry_run(args, store, targets)
    what = f"{_entries_word(len(targets))} ({_human_size(_size_of(targets))}) from {store.url}"
    if targets and not _confirm(args, what):
        print("nothing removed")
        return 1
    removed, freed = _remove(store, targets)
    _sweep_sources(store)
    swept, swept_bytes = store.sweep_orphans()
    _emit(args, {"removed": removed, "bytes": freed, "orphans_removed": swept,
                 "orphan_bytes": swept_bytes},
          f"removed {_entries_word(removed)} ({_human_size(freed)})"
          + (f" and {swept} orphaned files ({_human_size(swept_bytes)})" if swept else ""))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from fncache import _explain
    from fncache._memoize import Memoized
    from fncache._options import disable
    from fncache.code.targets import load_target

    target = _check_target(args.target)
    store = _store_from(args)
    if target.rpartition(":")[0].endswith(".ipynb"):
        # A notebook's function or %%fncache cell: its code cannot be loaded here, so its stored
        # versions are compared with the newest one.
        result = _explain.explain_function(store, target, import_code=False)
        result.error = "a notebook is not loaded from the command line"
        _emit(args, result.as_dict(), str(result))
        return 0
    if ":" not in target:  # a bare QUALNAME (or MODULE.QUALNAME), as ls and clear take it
        target = _stored_function(store, target)
    # The target's code runs (a script's top level, a module import): whatever it calls must not
    # write to any store.
    disable()
    _code_from_cwd()
    obj, _ = load_target(target)  # a TargetError says what is missing (exit 1)
    if isinstance(obj, types.MethodType) and isinstance(obj.__func__, Memoized):
        obj = obj.__func__  # a memoized classmethod
    if not isinstance(obj, Memoized):
        raise _Fail(f"{target} is not memoized (no @fncache.memoize on it): it has no entries "
                    "to explain")
    result = _explain.explain_function(store, obj)
    _emit(args, result.as_dict(), str(result))
    return 0


def _check_target(target: str) -> str:
    """``target`` if it is MODULE:FUNC, SCRIPT.py:FUNC or a bare QUALNAME; bad usage otherwise."""
    where, sep, qualname = target.rpartition(":")
    if sep and (not where or not qualname):
        raise _Usage(f"{target!r}: expected MODULE:FUNC, SCRIPT.py:FUNC or FUNC")
    if not sep and (target.endswith((".py", ".ipynb")) or os.sep in target):
        raise _Usage(f"{target!r} names a file but no function: write {target}:FUNC")
    return target


def _stored_function(store: Store, name: str) -> str:
    """The ``module:qualname`` of the one function in ``store`` whose entries ``name`` matches
    (its qualname, or ``module.qualname``), as ``ls --function`` matches them."""
    names = _stored_names(store)
    found = [n for n in names if n.rpartition(":")[2] == name or n.replace(":", ".") == name]
    if len(found) == 1:
        return found[0]
    if found:
        raise _Fail(f"{name!r} matches several functions in {store.url}: {', '.join(found)}; "
                    "give one of them")
    raise _Fail(f"no entries of a function named {name!r} in {store.url}"
                + (_did_you_mean_function(name, names) or
                   " (give MODULE:FUNC or SCRIPT.py:FUNC to explain a function without entries)"))


def _code_from_cwd() -> None:
    """Put the working directory first on ``sys.path``, as ``python -m fncache`` has it, so that
    the ``fncache`` console script finds ``job:step`` in the folder holding ``job.py`` too."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def cmd_doctor(args: argparse.Namespace) -> int:
    from fncache.cli import doctor as _doctor

    if args.target is not None:
        _check_target(args.target)
        if ":" not in args.target:
            raise _Usage(f"{args.target!r}: expected MODULE:FUNC or SCRIPT.py:FUNC")
        _code_from_cwd()
    store = _store_from(args)
    report = _doctor.run(store, args.target, seeds=args.seeds)
    _emit(args, report.as_dict(), str(report))
    return 0 if report.ok else 1


# -- parser --------------------------------------------------------------------------------------

def _python_version(text: str) -> str:
    parts = text.strip().split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected a Python version as MAJOR.MINOR (3.11), got {text!r}")
    return f"{int(parts[0])}.{int(parts[1])}"


def _duration(text: str) -> float:
    if text.strip().replace(".", "", 1).isdigit():
        # "5" is as easily meant as 5 days as 5 seconds: ask for the unit rather than delete
        # almost everything.
        n = text.strip()
        raise argparse.ArgumentTypeError(
            f"{text!r} has no unit: write {n}d, {n}h, {n}m or {n}s (also w for weeks)")
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _size(text: str) -> int:
    try:
        size = parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if size and text.strip().isdigit():
        # "5" is too easily meant as 5 GB: ask for the unit rather than prune a store to 5 bytes.
        raise argparse.ArgumentTypeError(
            f"{text!r} has no unit: write {text}MB, {text}GB, or {text}B for bytes")
    return size


_DESCRIPTION = "Look into a store of fncache and clean it up."
_EPILOG = ("Exit status: 0 success, 1 failure (no store there, a function that cannot be found), "
           "2 bad usage, 141 the output's reader went away. Only doctor creates a store; only clear "
           "and prune delete, and without a terminal to confirm on they need --yes.")
_RUNS_CODE = ("The target's code runs: a script runs without its if __name__ == \"__main__\" "
              "block, a module is imported. Caching is off while it runs: nothing is stored.")
_SIZES = "with a unit: 512B, 64KB, 10MB, 2GB"
_AGES = "with a unit: 45s, 30m, 12h, 7d, 2w"

# argparse's message for a value outside an option's choices (or an unknown command).
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors also suggest the nearest valid command or choice."""

    def error(self, message: str) -> Any:  # exits with status 2
        m = _INVALID_CHOICE.search(message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2))
            message += _did_you_mean(m.group(1), choices)
        super().error(message)

    def unknown(self, arguments: list[str]) -> Any:
        """Refuse arguments the command does not take, suggesting the nearest option."""
        message = f"unrecognized arguments: {' '.join(arguments)}"
        options = [o for o in self._option_string_actions if o.startswith("--")]
        for a in arguments:
            if a.startswith("--"):
                close = _closest(a.partition("=")[0], options)
                if close:
                    message += f"; did you mean {close!r} (for {a!r})?"
        super().error(message)


def build_parser() -> tuple[_Parser, dict[str, _Parser]]:
    """The ``fncache`` parser and each command's own (whose usage an error of that command shows)."""
    common = _Parser(add_help=False)
    where = common.add_argument_group("store")
    where.add_argument("--dir", help="cache directory (a disk store, or a fncache.Memory location)")
    where.add_argument("--store", help="store URL: a path, file://, memory://, redis://, s3://; "
                       "tiers joined by commas, nearest first (DIR,s3://bucket/prefix)")

    reading = _Parser(add_help=False)
    reading.add_argument("--json", action="store_true", help="machine-readable output")
    # What the two commands that delete share: a preview, and the confirmation (see _check_can_confirm).
    deleting = _Parser(add_help=False)
    deleting.add_argument("--dry-run", action="store_true",
                          help="list the functions, entries and bytes that would be removed; "
                               "remove nothing")
    deleting.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")

    p = _Parser(prog="fncache", description=_DESCRIPTION, epilog=_EPILOG)
    from fncache import __version__

    p.add_argument("--version", action="version", version=f"fncache {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands: dict[str, _Parser] = {}

    def command(name: str, run: Any, help: str, description: str | None = None,
                deletes: bool = False) -> _Parser:
        s: _Parser = sub.add_parser(name, parents=[common, reading, *([deleting] if deletes else [])],
                           help=help,
                           description=description or help[:1].upper() + help[1:] + ".")
        s.set_defaults(run=run)
        commands[name] = s
        return s

    command("info", cmd_info, "store location, entries, bytes (values and database)")
    command("stats", cmd_info, "same as info")

    s = command("ls", cmd_ls, "entries grouped by function")
    s.add_argument("--function", metavar="NAME",
                   help="only this function: MODULE:QUALNAME, SCRIPT.py:QUALNAME or QUALNAME")
    s.add_argument("--sort", choices=tuple(_LS_ORDER), default="size",
                   help="size, age (newest first), count, used (most recently used first)")

    s = command("clear", cmd_clear, "remove entries",
                "Remove entries: all of them, or those matching every filter given. Asks first on a "
                "terminal; elsewhere needs --yes.", deletes=True)
    s.add_argument("--function", metavar="NAME",
                   help="only entries of this function: MODULE:QUALNAME, SCRIPT.py:QUALNAME or "
                        "QUALNAME")
    s.add_argument("--older-than", type=_duration, metavar="AGE",
                   help=f"only entries created longer ago than AGE, {_AGES}")
    s.add_argument("--larger-than", type=_size, metavar="SIZE",
                   help=f"only entries larger than SIZE, {_SIZES}")
    s.add_argument("--unused-for", type=_duration, metavar="AGE",
                   help=f"only entries neither used nor created within AGE (usage records), {_AGES}")
    s.add_argument("--python", type=_python_version, metavar="X.Y",
                   help="only entries written by this Python version (after an upgrade: the old "
                        "version's entries, which the new one never reads)")

    s = command("prune", cmd_prune,
                "remove idle entries, then least recently used ones until the store fits a size",
                "Remove entries idle longer than --older-than, then least recently used ones until "
                "the store fits --max-size. Asks first on a terminal; elsewhere needs --yes.",
                deletes=True)
    s.add_argument("--max-size", type=_size, metavar="SIZE",
                   help=f"keep at most SIZE of entries, {_SIZES}")
    s.add_argument("--older-than", type=_duration, metavar="AGE",
                   help=f"remove entries neither created nor used within AGE, {_AGES}")

    s = command("explain", cmd_explain,
                "what differs between a function's current code and its stored entries",
                "Compare a memoized function's current code with its stored entries and say what "
                "differs. " + _RUNS_CODE)
    s.add_argument("target", metavar="MODULE:FUNC",
                   help="a memoized function: e.g. pipeline:features, path/to/job.py:step, or "
                        "a name as ls shows it or only its qualname (step), found in the store; "
                        "modules are imported from the working directory")

    s = command("doctor", cmd_doctor,
                "check the environment, the store and the key stability of a function",
                "Check the environment, the store (a probe entry is written and removed) and, given "
                "a function, that its key is the same under several hash seeds. " + _RUNS_CODE
                + " It runs in fresh interpreters.")
    s.add_argument("target", nargs="?", metavar="SCRIPT_OR_MODULE:FUNC")
    s.add_argument("--seeds", default="1,2,random", help="PYTHONHASHSEEDs to compare (default 1,2,random)")
    return p, commands


def main(argv: Sequence[str] | None = None) -> int:
    parser, commands = build_parser()
    args, unknown = parser.parse_known_args(argv)
    own = commands[args.command]
    if unknown:
        own.unknown(unknown)  # the command's usage; exit 2
    try:
        return int(args.run(args))
    except _ClosedPipe:
        # Nothing more can be said to whoever stopped reading; the interpreter's own last flush
        # must not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return _EXIT_CLOSED_PIPE
    except _Usage as e:
        own.error(str(e))  # exits with status 2
    except (_Fail, FncacheError, OSError) as e:
        # Escaped: a message may quote a function name read from a store others can write.
        print(_printable(f"fncache {args.command}: {e}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
