"""Which installed distribution owns a library module, and its version (the version enters the keys
of library functions: see :mod:`fncache.code.fingerprint`).

``importlib.metadata.packages_distributions()`` answers this for every module at once by reading
the metadata of every installed distribution (a second or more in a large environment, paid by the
first library function keyed in each process). Only the directory a module is imported from can
hold the distribution that installed it, so only that directory's metadata is read: its
``top_level.txt`` files, or ``RECORD`` where there is none (the same rule as the full scan). A
module found outside any directory holding distribution metadata (an editable install, a library
untracked from a source tree) falls back to the full scan.

What each distribution of a directory provides is remembered across processes, in a small JSON
file per directory under the user cache directory (``$XDG_CACHE_HOME/fncache-distributions``,
else ``~/.cache/fncache-distributions``), so that a new process reads one ``stat`` result per
distribution whose ``top_level.txt`` names its modules and two for the others (``RECORD`` too),
instead of every ``RECORD``. A remembered answer is used only while the files it was read from
are unchanged (size, modification and change times, inode), so an install, upgrade or
removal is seen at once; a file that cannot be read or has another shape is ignored and rewritten;
one that cannot be written (a read-only home) changes nothing but the time. The file is written
by this user only (mode 0600, in a 0700 directory): whoever can write it could equally change the
user's installed libraries. ``FNCACHE_DISTRIBUTIONS_CACHE=0`` turns it off. Past 64 such files, a
write also removes those whose directory no longer exists (a deleted virtual environment).

Versions are read from the owner's metadata on every computation (an upgrade in a running process
is seen: it replaces the metadata directory, whose name carries the version), never remembered.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from typing import Any

__all__ = ["distribution_versions"]

_PATHS = sysconfig.get_paths()
_STDLIB_DIRS = frozenset(
    os.path.realpath(os.path.join(p, sub))
    for name in ("stdlib", "platstdlib") if (p := _PATHS.get(name))
    for sub in ("", "lib-dynload"))
del _PATHS
_owners: dict[str, tuple[str, ...]] = {}  # top-level module -> metadata directories owning it
_listed: dict[str, dict[str, frozenset[str]]] = {}  # directory -> its metadata dirs -> their modules
#: The shape of the remembered file; a file of another version is ignored (and rewritten).
_MEMO_FORMAT = 2
_MEMO_MAX = 16 * 1024 * 1024  # a larger file is not ours: ignored
#: Remembered files kept before those of vanished directories are removed (see _forget_gone).
_MEMO_KEEP = 64


def distribution_versions(top_level: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``(name, version)`` of the installed distributions that own these top-level modules, sorted.

    A module of the standard library, a built-in one or one no distribution owns gives nothing.
    """
    out: set[tuple[str, str]] = set()
    for top in top_level:
        for _ in range(2):
            found = _versions_of(_owners_of(top))
            if found is not None:
                out.update(found)
                break
            # A metadata directory went away (an upgrade or an uninstall): look again, once.
            _owners.pop(top, None)
            _listed.clear()
    return tuple(sorted(out))


def _versions_of(owners: tuple[str, ...]) -> list[tuple[str, str]] | None:
    """The versions of these owners, read now; None if a metadata directory is gone."""
    import importlib.metadata as md
    import pathlib

    out = []
    for path in owners:
        if path.startswith("\0"):  # found by the full scan: by name
            try:
                out.append((path[1:], md.version(path[1:])))
            except md.PackageNotFoundError:  # pragma: no cover - removed meanwhile
                pass
            continue
        if not os.path.isdir(path):
            return None
        found = _name_and_version(path)
        name: str | None
        version: str | None
        if found is not None:
            name, version = found
        else:  # a header this reader leaves to the email parser importlib uses
            meta = md.PathDistribution(pathlib.Path(path)).metadata
            # A missing header is None here (meta[...] of one is to raise KeyError in a later Python)
            name = meta["Name"] if "Name" in meta else None
            version = meta["Version"] if "Version" in meta else None
        if not name or not version:
            return None
        out.append((name, version))
    return out


def _name_and_version(path: str) -> tuple[str, str] | None:
    """``Name`` and ``Version`` from the header of the metadata directory's ``METADATA`` (else
    ``PKG-INFO``), read as ``importlib.metadata`` reads them (the value after the colon, leading
    blanks dropped, the first of each header): a version per library module keyed in each new
    process, where the email parser took a millisecond for two. None where the header is not
    plain (``Name`` or ``Version`` folded, a line that is no ``field: value``, no such file): the
    caller then asks ``importlib.metadata``."""
    text = ""
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(path, name), encoding="utf-8") as f:
                text = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            continue  # the errors importlib.metadata takes for a missing file
        except (OSError, UnicodeDecodeError):
            return None  # importlib.metadata raises these: it is asked, and does
        if text:
            break
    head = text.partition("\n\n")[0].rstrip("\n")  # read as text: line ends are "\n"
    if not head:
        return None
    found: dict[str, str] = {}
    field = ""
    for line in head.split("\n"):
        if line[:1] in (" ", "\t"):  # continues the field above (a long License, say)
            if field in ("name", "version"):
                return None
            continue
        field, colon, value = line.partition(":")
        if not (colon and field.isascii() and field.isprintable()) or " " in field:
            return None  # not a field name to the email parser: where it ends the header
        field = field.lower()
        if field in ("name", "version") and field not in found:
            found[field] = value.lstrip(" \t")
    if len(found) != 2:
        return None
    return found["name"], found["version"]


def _owners_of(top: str) -> tuple[str, ...]:
    found = _owners.get(top)
    if found is None:
        found = _owners[top] = _find_owners(top)
    return found


def _find_owners(top: str) -> tuple[str, ...]:
    """The metadata directories of the distributions owning ``top`` (``"\\0name"``: found by the
    full scan, by name)."""
    dirs = _module_dirs(top)
    if not dirs:
        return ()
    found: list[str] = []
    indexed = False
    for d in dirs:
        provided = _provided_in(d)
        indexed = indexed or bool(provided)
        found.extend(m for m, tops in provided.items() if top in tops)
    if found or indexed:
        return tuple(dict.fromkeys(found))
    return tuple("\0" + name for name in dict.fromkeys(_all_distributions().get(top, ())))


def _module_dirs(top: str) -> list[str]:
    """The directories ``top`` is imported from (several for a namespace package), without
    importing it; none for a built-in, frozen or standard-library module."""
    spec = _spec_of(top)
    if spec is None or spec.origin in ("built-in", "frozen"):
        return []
    if spec.submodule_search_locations:
        places = list(spec.submodule_search_locations)
    elif spec.origin:
        places = [spec.origin]
    else:
        return []
    dirs = [os.path.dirname(os.path.realpath(p)) for p in places]
    return [d for d in dict.fromkeys(dirs) if d not in _STDLIB_DIRS]


def _spec_of(top: str) -> Any:
    """The import spec of ``top``: the imported module's, else the one the finders give (without
    importing it); None if there is none."""
    mod = sys.modules.get(top)
    spec = getattr(mod, "__spec__", None) if mod is not None else None
    if spec is not None:
        return spec
    try:
        return importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None


def _provided_in(directory: str) -> dict[str, frozenset[str]]:
    """The distribution metadata directories in ``directory`` and the top-level modules each one
    provides (its ``top_level.txt``, else :func:`_record_tops`): read once per process, from the
    remembered file where the files it was made from are unchanged."""
    found = _listed.get(directory)
    if found is None:
        found = _listed[directory] = _read_directory(directory)
    return found


def _read_directory(directory: str) -> dict[str, frozenset[str]]:
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith((".dist-info", ".egg-info")))
    except OSError:
        return {}
    memo = _load_memo(directory)
    fresh: dict[str, list[Any]] = {}
    out: dict[str, frozenset[str]] = {}
    changed = len(memo) != len(names)
    for name in names:
        meta = f"{directory}{os.sep}{name}"
        kept = memo.get(name)
        if kept is not None and _unchanged(meta, kept[0]):
            out[meta] = frozenset(kept[1])
            fresh[name] = kept
            continue
        signature, tops = _read_provided(meta)
        out[meta] = tops
        fresh[name] = [signature, sorted(tops)]
        changed = True
    if changed:
        _save_memo(directory, fresh)
    return out


def _read_provided(meta: str) -> tuple[list[Any], frozenset[str]]:
    """The top-level modules ``meta``'s distribution provides (its ``top_level.txt``, else
    :func:`_record_tops`) and the signature of the files they were read from: size, times and
    inode of ``top_level.txt`` (``None`` if it is missing) and, where the modules came from
    ``RECORD``, of ``RECORD``, else ``"-"`` (``RECORD`` was not read: its changes change
    nothing). Each file is signed before it is read, so that one changed meanwhile is read again
    by the next process. One ``stat`` call per distribution with a ``top_level.txt`` in each new
    process (113 of 193 here), two for the others."""
    top = _stat_of(f"{meta}{os.sep}top_level.txt")
    declared = _declared_tops(meta)
    if declared:
        return [top, "-"], declared
    record = _stat_of(f"{meta}{os.sep}RECORD")
    return [top, record], _record_tops(meta)


def _unchanged(meta: str, signature: Any) -> bool:
    """Whether the files a remembered answer was read from are as :func:`_read_provided` found
    them."""
    if not (isinstance(signature, list) and len(signature) == 2):
        return False
    top, record = signature
    if top != _stat_of(f"{meta}{os.sep}top_level.txt"):
        return False
    if record == "-":  # the same top_level.txt names modules: RECORD was not read
        return top is not None
    return bool(record == _stat_of(f"{meta}{os.sep}RECORD"))


def _stat_of(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _memo_path(directory: str) -> str | None:
    """The remembered file of ``directory``; None when turned off."""
    if os.environ.get("FNCACHE_DISTRIBUTIONS_CACHE", "").strip() == "0":
        return None
    import xxhash

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    name = xxhash.xxh3_128_hexdigest(os.fsencode(directory))
    return os.path.join(base, "fncache-distributions", f"{name}.json")


def _load_memo(directory: str) -> dict[str, list[Any]]:
    """The remembered ``{metadata dir name: [signature, [modules]]}`` of ``directory``; ``{}`` if
    there is none or it is not one this version wrote for this directory."""
    path = _memo_path(directory)
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            raw = f.read(_MEMO_MAX + 1)
        data = json.loads(raw) if len(raw) <= _MEMO_MAX else None
    except (OSError, ValueError, RecursionError):
        return {}
    if not (isinstance(data, dict) and data.get("format") == _MEMO_FORMAT
            and data.get("directory") == directory and isinstance(data.get("entries"), dict)):
        return {}
    return {name: kept for name, kept in data["entries"].items() if _well_formed(kept)}


def _well_formed(kept: Any) -> bool:
    return (isinstance(kept, list) and len(kept) == 2 and isinstance(kept[1], list)
            and all(isinstance(t, str) for t in kept[1]))


def _save_memo(directory: str, entries: dict[str, list[Any]]) -> None:
    """Write ``directory``'s remembered file whole (a new file renamed over the old one: a reader
    never sees part of it); a failure to write changes nothing else."""
    path = _memo_path(directory)
    if path is None:
        return
    text = json.dumps({"format": _MEMO_FORMAT, "directory": directory, "entries": entries},
                      sort_keys=True, separators=(",", ":"))
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return
    _forget_gone(parent, keep=path)


def _forget_gone(parent: str, keep: str) -> None:
    """Past :data:`_MEMO_KEEP` remembered files, remove those of directories that no longer exist
    (a deleted virtual environment or temporary install) and unreadable ones, so that the
    directory does not grow with every environment ever used. It runs after a write only, which
    the first key after an install, upgrade or removal makes (a read of each file, once); the
    keys between never run it. Failures are ignored."""
    try:
        names = [n for n in os.listdir(parent) if n.endswith(".json")]
    except OSError:
        return
    if len(names) <= _MEMO_KEEP:
        return
    for name in names:
        path = os.path.join(parent, name)
        if path != keep and _of_a_vanished_directory(path):
            with contextlib.suppress(OSError):
                os.unlink(path)


def _of_a_vanished_directory(path: str) -> bool:
    """Whether the remembered file at ``path`` is of a directory that no longer exists, or is not
    one this module can read."""
    try:
        with open(path, "rb") as f:
            raw = f.read(_MEMO_MAX + 1)
        data = json.loads(raw) if len(raw) <= _MEMO_MAX else None
    except (OSError, ValueError, RecursionError):
        return True
    directory = data.get("directory") if isinstance(data, dict) else None
    return not (isinstance(directory, str) and os.path.isdir(directory))


def _record_tops(meta: str) -> frozenset[str]:
    """The top-level modules a distribution without a ``top_level.txt`` (or one naming none)
    provides: the first part of each path its ``RECORD`` lists, as ``importlib.metadata`` infers
    them (string operations on the lines; the CSV parser only for the rare quoted ones: a large
    library lists thousands); none if it has no readable ``RECORD``."""
    firsts = _record_firsts(meta)
    return frozenset() if firsts is None else _top_names(firsts)


def _declared_tops(meta: str) -> frozenset[str]:
    """The names in the distribution's ``top_level.txt``; none if it has no readable one."""
    try:
        with open(os.path.join(meta, "top_level.txt"), encoding="utf-8") as f:
            return frozenset(f.read().split())
    except OSError:
        return frozenset()


def _record_firsts(meta: str) -> set[str] | None:
    """The first part of each path the distribution's ``RECORD`` lists (a file at the top keeps
    its ``,sha256=...`` tail); None if it has no readable ``RECORD``."""
    try:
        with open(os.path.join(meta, "RECORD"), encoding="utf-8", newline="") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    firsts = {line.partition("/")[0] for line in lines if line and line[0] != '"'}
    _add_quoted_firsts(firsts, [line for line in lines if line.startswith('"')])
    return firsts


def _add_quoted_firsts(firsts: set[str], quoted: list[str]) -> None:
    """Add to ``firsts`` the first parts of the quoted ``RECORD`` lines, read as CSV (those of a
    malformed one and after are left out)."""
    import csv

    try:
        firsts.update(row[0].replace("\\", "/").partition("/")[0] + ("" if "/" in row[0] else ",")
                      for row in csv.reader(quoted) if row)
    except csv.Error:
        pass


def _top_names(firsts: set[str]) -> frozenset[str]:
    """The module names among the first parts of ``RECORD`` paths (``name.py,...`` is ``name``;
    ``x.dist-info`` and other dotted names are none)."""
    import inspect

    out = set()
    for first in firsts:
        if "," in first:  # a file at the top: "name.py,sha256=...,size"
            path = first.partition(",")[0]
            first = inspect.getmodulename(path) or path
        if "." not in first:
            out.add(first)
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def _all_distributions() -> Any:
    import importlib.metadata as md

    return md.packages_distributions()
