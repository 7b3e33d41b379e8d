"""What the ``fncache`` commands share: their failures (exit 1, 2, 141), finding the store a command
works on, and printing a result as text or JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from fncache._errors import ConfigError
from fncache.cli.format import did_you_mean_function, printable
from fncache.stores import Store, default_store, open_store, redact, split_tiers

__all__ = [
    "DISK_INDEX", "EXIT_CLOSED_PIPE", "MEMORY_SUBDIR", "ClosedPipe", "Fail", "Usage", "emit",
    "hint_unknown_function", "store_from", "stored_names",
]


class Fail(Exception):
    """A failure the command reports in one line (exit status 1)."""


class ClosedPipe(Exception):
    """Whoever read the output stopped reading (``fncache ls | head -1``): end quietly."""


# The exit status of a command whose reader went away, as a shell shows one killed by SIGPIPE.
EXIT_CLOSED_PIPE = 141


# The file diskcache keeps its index in: a directory without it holds no store.
DISK_INDEX = "cache.db"


# Where fncache.Memory(LOCATION) keeps its store, inside LOCATION.
MEMORY_SUBDIR = "fncache"


def store_from(args: argparse.Namespace) -> Store:
    """The store the command works on. Only ``doctor`` may create one: reading commands and
    ``clear``/``prune`` on a directory without a store fail (exit 1) and leave it untouched; a
    malformed store URL is bad usage (exit 2). A ``fncache.Memory`` location holds its store in a
    subdirectory: given the location, the command works on that store."""
    if args.dir and args.store:
        raise Usage("--dir and --store: give one or the other")
    spec: Any = args.store or (Path(os.path.expanduser(args.dir)) if args.dir else default_store())
    # Tiers ("DIR,s3://...", never a directory's name) are checked one by one: each directory
    # must hold a store (a fncache.Memory location: the store in its subdirectory).
    tiers = split_tiers(spec)
    parts = [_tier_store(part, args.command) for part in tiers or [spec]]
    spec = parts if tiers else parts[0]
    try:
        return open_store(spec)
    except ConfigError as e:
        raise Usage(f"--store: {e}") from None


def _tier_store(part: Any, command: str) -> Any:
    """One tier of the store spec as ``open_store`` takes it: a directory given as a
    ``fncache.Memory`` location becomes its store's subdirectory; a directory that holds no store
    fails unless ``command`` is ``doctor``. URLs pass unchanged."""
    text = os.fspath(part)
    path = text[len("file://"):] if text.startswith("file://") else text
    if "://" in path:
        return part
    path = os.path.expanduser(path)
    inner = os.path.join(path, MEMORY_SUBDIR)
    if not os.path.exists(os.path.join(path, DISK_INDEX)) \
            and os.path.exists(os.path.join(inner, DISK_INDEX)):
        return Path(inner)
    if command != "doctor":
        if not os.path.isdir(path):
            why = "a file, not a directory" if os.path.exists(path) else "the directory does not exist"
            raise Fail(f"no cache at {redact(text)!r} ({why})")
        if not os.path.exists(os.path.join(path, DISK_INDEX)):
            raise Fail(f"no cache at {redact(text)!r} (the directory holds no fncache store)")
    return part


class Usage(Exception):
    """Bad usage: exit status 2."""


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    try:
        if getattr(args, "json", False):
            print(json.dumps(data, indent=2, sort_keys=True, default=str))
        else:
            print(printable(text))
        sys.stdout.flush()  # here, where a closed pipe can be told apart from a store's
    except BrokenPipeError:
        raise ClosedPipe from None


def hint_unknown_function(store: Store, args: argparse.Namespace, found: bool) -> None:
    """``--function NAME`` that matches no entry: say so on stderr, with the nearest stored name."""
    from fncache.code.targets import recorded_name

    function = getattr(args, "function", None)
    if function is None or found:
        return
    names = stored_names(store)
    wanted = recorded_name(function)
    if not names or any(wanted in (n, n.rpartition(":")[2], n.replace(":", ".")) for n in names):
        return  # the function has entries; other filters left none of them
    print(printable(f"fncache {args.command}: no entries of {function!r} in {store.url}"
                     + did_you_mean_function(function, names)), file=sys.stderr)


def stored_names(store: Store) -> list[str]:
    """The names entries in ``store`` are recorded under (``module:qualname``), sorted."""
    return sorted({s.function for s in store.summary() if not s.damaged and s.function})
