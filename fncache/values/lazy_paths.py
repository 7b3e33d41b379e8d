"""What the lazy readers share: the refusal with its remedies, and what the files at a path hold.

:mod:`fncache.values.lazy` (polars, Arrow, h5py, zarr), :mod:`fncache.values.lazy_xarray` and
:mod:`fncache.values.lazy_dask` key a value that points at files by the content of those files,
taken from the digest table of :mod:`fncache.values.digests`, and refuse what they cannot see
with one message that names the remedies. A remote object (``s3://``, ``gs://``, ``http(s)://``
...) is refused, never keyed by its name: its name says nothing of whether it changed.
"""

from __future__ import annotations

import os
import re
from typing import Any

from fncache._errors import UnhashableArgument
from fncache._hasher import Token
from fncache.values import digests as _digests

__all__ = ["REMEDY", "is_remote", "local_path", "path_content", "refuse", "token"]

REMEDY = ("pass the path as fncache.file(path) and open it inside the function, materialize it "
          "first (.collect(), .load(), .compute(), .to_table(), [()]), or name its version with "
          "fncache.ref(value, token)")
_REMOTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def token(*parts: Any) -> Any:
    """A reduce value standing for ``parts`` in the hash stream (as ``buffers.token``)."""
    return (Token, parts)


def refuse(obj: Any, why: str) -> UnhashableArgument:
    """The error for a lazy value that is not keyed: its type, ``why``, and the remedies."""
    t = type(obj)
    return UnhashableArgument(f"a {t.__module__}.{t.__qualname__} is not keyed: {why}; {REMEDY}",
                              type_name=t.__qualname__)


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URL other than ``file://``."""
    return not path.startswith("file://") and _REMOTE.match(path) is not None


def local_path(obj: Any, path: str) -> str:
    """``path`` as an absolute local path; a remote URL is refused (its name is not its content)."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif _REMOTE.match(path):
        raise refuse(obj, f"it reads the remote object {path!r}, and fncache cannot tell "
                          "whether it changed")
    return os.path.abspath(path)


def path_content(obj: Any, path: str, glob: bool) -> tuple[Any, ...]:
    """What the files a reader finds at ``path`` hold now: a glob's matches (with ``glob``), a
    folder's files (by name relative to it), a file, or nothing."""
    p = local_path(obj, path)
    if glob and _digests.has_magic(path):
        _, found = _digests.expand_glob(path[len("file://"):] if path.startswith("file://")
                                        else path)
        return ("glob", _digests.digests(found))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return ("missing",)
    if os.path.isdir(p):
        return ("dir", _digests.digests(_digests.tree_files(p)))
    return ("file", _digests.file_digest(p, st))
