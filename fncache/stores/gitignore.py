"""The ``.gitignore`` a new cache directory gets, so a cache inside a repository is not committed.

joblib 1.6 writes one into every ``Memory`` location (``# Created by joblib automatically.`` then
``*``); fncache writes the same two lines, naming itself, into a ``fncache.Memory`` location and into
a disk store's directory when fncache creates that directory. An existing ``.gitignore`` is never
replaced, and none is written into a directory the user made for a ``memoize`` store (it may be a
folder of theirs that git should see). ``*`` ignores the directory's content, the ``.gitignore``
included, so ``git status`` stays clean.

Written create-only without following a symlink (a planted link must not make fncache write
elsewhere); a failure to write it is logged and otherwise ignored: caching works without it.
"""

from __future__ import annotations

import logging
import os

__all__ = ["CONTENT", "write_gitignore"]

log = logging.getLogger("fncache")

NAME = ".gitignore"
CONTENT = "# Created by fncache automatically.\n*\n"

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)


def write_gitignore(directory: str) -> bool:
    """Create ``directory/.gitignore`` ignoring everything, unless a file of that name exists;
    whether it was written. Never raises for a file-system failure (it is logged)."""
    path = os.path.join(directory, NAME)
    try:
        fd = os.open(path, _FLAGS, 0o644)
    except FileExistsError:
        return False
    except OSError as e:
        log.warning("could not write %s: %s", path, e)
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(CONTENT)
    except OSError as e:  # pragma: no cover - a full disk
        log.warning("could not write %s: %s", path, e)
        return False
    return True
