"""``depends_on=``: inputs the code does not show, such as data files read by path.

A ``pathlib.Path`` (or a string naming an existing file or directory) contributes the digest of its
content (a directory: of every file below it, by relative path); anything else contributes its value.
File digests come from the one table of :mod:`fncache.values.digests` (reused while the file's stat
signature is unchanged).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from fncache._errors import UnhashableArgument
from fncache.values import hasher as _hasher
from fncache.values.digests import path_digest

__all__ = ["depends_digest", "path_digest"]


def depends_digest(items: Iterable[Any]) -> bytes:
    """One digest for everything in ``depends_on``, in order."""
    out = []
    for item in items:
        if isinstance(item, os.PathLike) or (isinstance(item, str) and os.path.exists(item)):
            try:
                out.append(path_digest(item))
            except OSError as e:  # unreadable, or no regular file (a FIFO): no content to key
                raise UnhashableArgument(f"depends_on: cannot key {os.fspath(item)!r}: {e}",
                                         "depends_on", type(item).__qualname__) from e
        else:
            out.append(_hasher.digest(item))
    return _hasher.digest(tuple(out))


