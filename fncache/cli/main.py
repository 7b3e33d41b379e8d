"""The ``fncache`` command: look into a store and clean it up (the parser, ``explain`` and ``doctor``;
the store commands are in :mod:`fncache.cli.commands`).

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
import os
import re
import sys
import types
from collections.abc import Sequence
from typing import Any

from fncache._errors import FncacheError
from fncache._units import parse_duration, parse_size
from fncache.cli.commands import LS_ORDER, cmd_clear, cmd_info, cmd_ls, cmd_prune
from fncache.cli.common import (
    EXIT_CLOSED_PIPE,
    ClosedPipe,
    Fail,
    Usage,
    emit,
    store_from,
    stored_names,
)
from fncache.cli.format import closest, did_you_mean, did_you_mean_function, printable
from fncache.stores import Store

__all__ = ["main", "parse_duration", "parse_size"]


# -- commands ------------------------------------------------------------------------------------


def cmd_explain(args: argparse.Namespace) -> int:
    from fncache import _explain
    from fncache._memoize import Memoized
    from fncache._options import disable
    from fncache.code.targets import load_target

    target = _check_target(args.target)
    store = store_from(args)
    if target.rpartition(":")[0].endswith(".ipynb"):
        # A notebook's function or %%fncache cell: its code cannot be loaded here, so its stored
        # versions are compared with the newest one.
        result = _explain.explain_function(store, target, import_code=False)
        result.error = "a notebook is not loaded from the command line"
        emit(args, result.as_dict(), str(result))
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
        raise Fail(f"{target} is not memoized (no @fncache.memoize on it): it has no entries "
                    "to explain")
    result = _explain.explain_function(store, obj)
    emit(args, result.as_dict(), str(result))
    return 0


def _check_target(target: str) -> str:
    """``target`` if it is MODULE:FUNC, SCRIPT.py:FUNC or a bare QUALNAME; bad usage otherwise."""
    where, sep, qualname = target.rpartition(":")
    if sep and (not where or not qualname):
        raise Usage(f"{target!r}: expected MODULE:FUNC, SCRIPT.py:FUNC or FUNC")
    if not sep and (target.endswith((".py", ".ipynb")) or os.sep in target):
        raise Usage(f"{target!r} names a file but no function: write {target}:FUNC")
    return target


def _stored_function(store: Store, name: str) -> str:
    """The ``module:qualname`` of the one function in ``store`` whose entries ``name`` matches
    (its qualname, or ``module.qualname``), as ``ls --function`` matches them."""
    names = stored_names(store)
    found = [n for n in names if n.rpartition(":")[2] == name or n.replace(":", ".") == name]
    if len(found) == 1:
        return found[0]
    if found:
        raise Fail(f"{name!r} matches several functions in {store.url}: {', '.join(found)}; "
                    "give one of them")
    raise Fail(f"no entries of a function named {name!r} in {store.url}"
                + (did_you_mean_function(name, names) or
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
            raise Usage(f"{args.target!r}: expected MODULE:FUNC or SCRIPT.py:FUNC")
        _code_from_cwd()
    store = store_from(args)
    report = _doctor.run(store, args.target, seeds=args.seeds)
    emit(args, report.as_dict(), str(report))
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


def _seeds(text: str) -> str:
    """``--seeds``: comma-separated PYTHONHASHSEEDs, each ``random`` or 0 to 4294967295."""
    seeds = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in seeds
           if s != "random" and not (s.isascii() and s.isdigit() and int(s) <= 4294967295)]
    if bad or not seeds:
        raise argparse.ArgumentTypeError(
            f"expected PYTHONHASHSEEDs, each 'random' or 0 to 4294967295, "
            f"separated by commas (1,2,random); got {text!r}")
    return ",".join(seeds)


class _Once(argparse.Action):
    """An option that may be given once: a second ``--function`` would silently replace the first
    (argparse keeps the last), and ``clear`` would then remove another function's entries."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            raise argparse.ArgumentError(self, "given twice: give it once (run the command once "
                                               "for each function)")
        setattr(namespace, self.dest, values)


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
            message += did_you_mean(m.group(1), choices)
        super().error(message)

    def unknown(self, arguments: list[str]) -> Any:
        """Refuse arguments the command does not take, suggesting the nearest option."""
        message = f"unrecognized arguments: {' '.join(arguments)}"
        options = [o for o in self._option_string_actions if o.startswith("--")]
        for a in arguments:
            if a.startswith("--"):
                close = closest(a.partition("=")[0], options)
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
    # What the two commands that delete share: a preview, and the confirmation (see check_can_confirm).
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
    s.add_argument("--function", metavar="NAME", action=_Once,
                   help="only this function: MODULE:QUALNAME, SCRIPT.py:QUALNAME or QUALNAME")
    s.add_argument("--sort", choices=tuple(LS_ORDER), default="size",
                   help="size, age (newest first), count, used (most recently used first)")

    s = command("clear", cmd_clear, "remove entries",
                "Remove entries: all of them, or those matching every filter given. Asks first on a "
                "terminal; elsewhere needs --yes.", deletes=True)
    s.add_argument("--function", metavar="NAME", action=_Once,
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
    s.add_argument("--seeds", default="1,2,random", type=_seeds,
                   help="PYTHONHASHSEEDs to compare, each 0 to 4294967295 or random "
                        "(default 1,2,random)")
    return p, commands


def main(argv: Sequence[str] | None = None) -> int:
    parser, commands = build_parser()
    args, unknown = parser.parse_known_args(argv)
    own = commands[args.command]
    if unknown:
        own.unknown(unknown)  # the command's usage; exit 2
    try:
        return int(args.run(args))
    except ClosedPipe:
        # Nothing more can be said to whoever stopped reading; the interpreter's own last flush
        # must not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_CLOSED_PIPE
    except Usage as e:
        own.error(str(e))  # exits with status 2
    except (Fail, FncacheError, OSError) as e:
        # Escaped: a message may quote a function name read from a store others can write.
        print(printable(f"fncache {args.command}: {e}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
