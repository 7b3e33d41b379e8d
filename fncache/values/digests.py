"""The one table of file digests: (path, stat signature) -> xxh3-128 of the file's bytes.

Everything in fncache that keys a value by what a file holds asks here: ``fncache.file``,
``memoize(files=...)``, ``depends_on=`` and the lazy readers (:mod:`fncache.values.lazy`: polars
scans, Arrow datasets, memmaps, h5py, zarr). A digest is reused while the file's *stat signature*
is unchanged: size, ``mtime_ns``, ``ctime_ns``, inode and device. ``mtime`` alone is not enough:
it can be set back by hand (``touch -d``, ``os.utime``, an archive extractor) while ``ctime``
cannot, and a file replaced by another (an atomic rename) has another inode. So a warm call costs
one ``stat`` per file, and a changed file is read once, in 1 MiB chunks.

A file modified within the file system's timestamp granularity of now could be rewritten again
with the same size and timestamps ("racy git"): the digest of a file younger than two seconds is
not kept, and the next use reads it again.

Folders are listed in one ``os.scandir`` pass per directory, following symlinked directories
(each real directory once), as polars and zarr do and as a function reading "every file below"
would. An entry that is no regular file (a FIFO, a socket, a device, a broken or looping symlink)
is keyed by its kind (such a link by its target), never opened: reading a FIFO waits for a writer for ever.
Given by itself (``fncache.file(fifo)``), such a path is refused: it has no content to key. The
table lives in the process;
while a memoized function makes its key, a second tier is asked on a miss: the records kept in
that function's store (:data:`RECORDS`, :mod:`fncache._digest_records`), so the first use of an
unchanged file of 1 MiB or more (:data:`RECORD_MIN_BYTES`; a smaller one is read faster than a
record) in a new process costs a ``stat`` and one store read, not a read of the file.

Concurrency: the table is shared by threads; a record is written whole under a lock, and a reader
sees either no record or a complete one. Two threads missing on one file both read it.
"""

from __future__ import annotations

import contextvars
import fnmatch
import os
import stat as _stat
import threading
import time
from collections.abc import Sequence
from typing import Protocol

import xxhash

from fncache import _forks

__all__ = ["RECORDS", "RECORD_MIN_BYTES", "Records", "clear", "digests", "expand_glob", "file_digest",
           "has_magic", "path_digest", "signature", "tree_files"]

Signature = tuple[int, int, int, int, int]


class Records(Protocol):
    """A second tier of digest records (a store's, see :mod:`fncache._digest_records`)."""

    def get(self, path: str, sig: Signature) -> bytes | None: ...

    def put(self, path: str, sig: Signature, digest: bytes) -> None: ...


#: The second tier while a key is made, in this thread or task: set by the key builder of a
#: memoized function (``RECORDS.set(records)`` ... ``RECORDS.reset(token)``), ``None`` elsewhere.
RECORDS: contextvars.ContextVar[Records | None] = contextvars.ContextVar("fncache_records",
                                                                        default=None)

_table: dict[str, tuple[Signature, bytes]] = {}
_lock = threading.Lock()


def _fresh_lock() -> None:
    global _lock
    _lock = threading.Lock()


_forks.on_fork(_fresh_lock)
_CHUNK = 1 << 20
_RACY_NS = 2_000_000_000
# Files smaller than this are not looked up in (nor written to) the store's records: reading and
# digesting 1 MiB takes about as long as one store read, and a folder of many small files would
# cost as many store writes on its first use.
RECORD_MIN_BYTES = 1 << 20
_MAGIC = frozenset("*?[")


def signature(st: os.stat_result) -> Signature:
    """What says a file is unchanged: size, mtime and ctime in ns, inode, device."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def file_digest(path: str, st: os.stat_result | None = None) -> bytes:
    """xxh3-128 of the bytes of the file at absolute ``path`` (``st``: its ``os.stat``, if known).

    Raises ``OSError`` if the file cannot be stat'ed or read.
    """
    if st is None:
        st = os.stat(path)
    if not _stat.S_ISREG(st.st_mode):
        return _kind_digest(path, st)
    sig = signature(st)
    found = _table.get(path)
    if found is not None and found[0] == sig:
        return found[1]
    return _digest_afresh(path, st, sig)


def _digest_afresh(path: str, st: os.stat_result, sig: Signature) -> bytes:
    """The digest of a file this process has no digest of for its signature ``sig``: from the
    store's records for a large settled file, else read; kept for next time once settled (a file
    modified in the last two seconds may change again within its timestamps' resolution)."""
    settled = time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS
    records = RECORDS.get() if settled and st.st_size >= RECORD_MIN_BYTES else None
    if records is not None and (d := records.get(path, sig)) is not None:
        with _lock:
            _table[path] = (sig, d)
        return d
    d = _read_digest(path)
    if settled:
        with _lock:
            _table[path] = (sig, d)
        if records is not None:
            records.put(path, sig, d)
    return d


def _kind_digest(path: str, st: os.stat_result) -> bytes:
    """An entry that is no regular file, by its kind (a symlink's: by its target too): never
    read."""
    target = ""
    if _stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
    return xxhash.xxh3_128_digest(f"special {_stat.S_IFMT(st.st_mode)} {target}".encode(
        "utf-8", "surrogateescape"))


def _read_digest(path: str) -> bytes:
    """xxh3-128 of the file's bytes, read in chunks."""
    h = xxhash.xxh3_128()
    # Opened without waiting (a FIFO put in the file's place since its stat would wait for a
    # writer), then refused unless it is a regular file.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as f:
        if not _stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is no longer a regular file")
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.digest()


def tree_files(root: str, follow: bool = True, empty_dirs: bool = False
               ) -> list[tuple[str, str, os.stat_result | None]]:
    """Every file below directory ``root``: (relative name with ``/``, absolute path, stat).

    In ``os.walk`` order with sorted names: a directory's files, then each subdirectory's.
    Symlinked directories are followed (as polars and zarr do when they list a folder), each real
    directory walked once: a second link to one already listed lists its files again under the
    link's name (a reader of the folder reads them twice), and a link to a directory being walked
    (a loop) is listed as the link it is, as a broken symlink is (with its own ``lstat``).
    ``follow=False`` skips symlinked directories, as ``os.walk`` does. ``empty_dirs``: a directory
    below ``root`` with nothing in it is listed too, as its name and ``/`` with no stat (with the
    files, they give every directory there is: code listing the folder sees a new empty one).
    """
    out: list[tuple[str, str, os.stat_result | None]] = []
    seen: dict[tuple[int, int], tuple[str, int, int] | None] | None = None
    if follow:
        st = os.stat(root)
        seen = {(st.st_dev, st.st_ino): None}  # (None: being walked)
    _walk(root, "", out, seen, empty_dirs)
    return out


def _walk(path: str, rel: str, out: list[tuple[str, str, os.stat_result | None]],
          seen: dict[tuple[int, int], tuple[str, int, int] | None] | None, empty_dirs: bool) -> None:
    entries = _listed(path, rel, out, empty_dirs)
    subdirs = []
    for e in entries:
        if _is_dir(e):
            if not e.is_symlink() or seen is not None:
                subdirs.append(e)
            continue
        try:
            st = e.stat()
        except OSError:  # a broken or looping symlink: keyed as the link it is (its target)
            st = e.stat(follow_symlinks=False)
        out.append((rel + e.name, e.path, st))
    for e in subdirs:
        prefix = rel + e.name + "/"
        if seen is None or not e.is_symlink():
            _walk(e.path, prefix, out, seen, empty_dirs)
            continue
        st = e.stat()
        key = (st.st_dev, st.st_ino)
        if key in seen:
            _listed_again(e, prefix, out, seen[key])
            continue
        seen[key] = None
        start = len(out)
        _walk(e.path, prefix, out, seen, empty_dirs)
        seen[key] = (prefix, start, len(out))


def _listed(path: str, rel: str, out: list[tuple[str, str, os.stat_result | None]],
            empty_dirs: bool) -> list[os.DirEntry[str]]:
    """The entries of directory ``path`` by name; with ``empty_dirs``, an empty one below the root
    is listed in ``out`` (see :func:`tree_files`)."""
    with os.scandir(path) as it:
        entries = sorted(it, key=lambda e: e.name)
    if not entries and empty_dirs and rel:
        out.append((rel, path, None))
    return entries


def _listed_again(e: os.DirEntry[str], prefix: str, out: list[tuple[str, str, os.stat_result | None]],
                  listed: tuple[str, int, int] | None) -> None:
    """A symlinked directory whose real directory was met before: its files as listed then,
    under this link's name; the link itself when that directory is still being walked."""
    if listed is None:
        out.append((prefix[:-1], e.path, e.stat(follow_symlinks=False)))
        return
    first, start, end = listed
    for rel, _, st in out[start:end]:
        rest = rel[len(first):]
        out.append((prefix + rest, os.path.join(e.path, *rest.split("/")), st))


def _is_dir(e: os.DirEntry[str]) -> bool:
    """Whether the entry is a folder (through a symlink too); a symlink that loops is not."""
    try:
        return e.is_dir()
    except OSError:
        return False


def path_digest(path: str | os.PathLike[str]) -> bytes:
    """Digest of a file's content, or of a directory's files (relative names and contents), or of
    a missing path as missing."""
    from fncache.values.registry import value_digest

    p = os.path.abspath(os.fspath(path))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return value_digest(("missing-path",))
    if _stat.S_ISDIR(st.st_mode):
        return value_digest(("dir", digests(tree_files(p, empty_dirs=True))))
    if not _stat.S_ISREG(st.st_mode):
        raise OSError(f"{p} is not a regular file (a FIFO, socket or device): it has no content "
                      "to key")
    return value_digest(("file", file_digest(p, st)))


def has_magic(pattern: str) -> bool:
    """Whether ``pattern`` has glob characters (``*``, ``?``, ``[``)."""
    return not _MAGIC.isdisjoint(pattern)


def expand_glob(pattern: str) -> tuple[str, list[tuple[str, str, os.stat_result]]]:
    """The files a glob pattern can match now: (literal base directory, [(name relative to it,
    absolute path, stat)]).

    A superset on purpose: the part of the pattern from its first glob character on is matched
    with ``fnmatch``, whose ``*`` also crosses ``/`` and matches names starting with a dot, against
    every file below the pattern's literal prefix (symlinked folders followed). A reader's own glob
    (polars', Arrow's) matches no more than that, so no file it reads is left out of a key; a file
    it would skip costs at worst a needless miss. Glob characters in the working directory are
    literal, as they are to the reader (only the pattern as written is a pattern).
    """
    base, rest = glob_base(pattern)
    if not os.path.isdir(base):
        return base, []
    found = [(rel, full, st) for rel, full, st in tree_files(base)
             if st is not None and fnmatch.fnmatchcase(rel, rest)]
    return base, found


def glob_base(pattern: str) -> tuple[str, str]:
    """A path or glob pattern as (the absolute folder or path before its first glob part, the
    rest of the pattern: ``""`` for a path without one)."""
    parts = pattern.replace(os.sep, "/").split("/")
    i = next((k for k, part in enumerate(parts) if has_magic(part)), len(parts))
    base = os.path.abspath("/".join(parts[:i]) or ("/" if pattern.startswith("/") else "."))
    return base, "/".join(parts[i:])


def digests(files: Sequence[tuple[str, str, os.stat_result | None]]) -> tuple[tuple[str, bytes], ...]:
    """(relative name, content digest) of each listed file; an empty directory (no stat, see
    :func:`tree_files`) as ``b"dir"``."""
    return tuple((rel, file_digest(full, st) if st is not None else b"dir") for rel, full, st in files)


def clear() -> None:
    """Forget every record (tests; a record is otherwise replaced when its file changes)."""
    with _lock:
        _table.clear()
