"""``depends_on=``: inputs the code does not show, such as data files read by path.

A ``pathlib.Path`` (or a string naming an existing file or directory) contributes the digest of its
content (a directory: of every file below it, by relative path); anything else contributes its value.
File digests are reused while a file's size, modification and change times and inode stay the same,
and only once the file is more than two seconds old (a younger one could be rewritten unseen).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import Any

import xxhash

from fncache import _forks, _hasher

__all__ = ["depends_digest", "path_digest"]

_cache: dict[tuple[str, int, int, int, int], bytes] = {}
_lock = threading.Lock()


def _fresh_lock() -> None:
    global _lock
    _lock = threading.Lock()


_forks.on_fork(_fresh_lock)
_CHUNK = 1 << 20
_RACY_NS = 2_000_000_000


def _file_digest(path: str) -> bytes:
    st = os.stat(path)
    # ctime and inode are in the identity because mtime can be set back by hand (``touch -d``,
    # ``os.utime``, an archive extractor) while ctime cannot.
    ident = (path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    found = _cache.get(ident)
    if found is not None:
        return found
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    d: bytes = h.digest()
    # A file modified within the file system's timestamp granularity of now could be rewritten again
    # with the same size and timestamps ("racy git"): such a digest is not reused.
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS:
        with _lock:
            _cache[ident] = d
    return d


def path_digest(path: str | os.PathLike[str]) -> bytes:
    """Digest of a file's content, or of a directory's files (relative names and contents)."""
    p = os.path.abspath(os.fspath(path))
    if os.path.isdir(p):
        parts = []
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                parts.append((os.path.relpath(full, p).replace(os.sep, "/"), _file_digest(full)))
        return _hasher.digest(("dir", tuple(parts)))
    if os.path.exists(p):
        return _hasher.digest(("file", _file_digest(p)))
    return _hasher.digest(("missing-path",))


def depends_digest(items: Iterable[Any]) -> bytes:
    """One digest for everything in ``depends_on``, in order."""
    out = []
    for item in items:
        if isinstance(item, os.PathLike) or (isinstance(item, str) and os.path.exists(item)):
            out.append(path_digest(item))
        else:
            out.append(_hasher.digest(item))
    return _hasher.digest(tuple(out))


