"""Setting aside a disk store's damaged database files: ``cache.db`` and its ``-wal``/``-shm``.

A damaged or odd file is moved aside to ``<name>.corrupt-<UTC time>[-N]``, never deleted (the user
decides), and a WARNING names it; SQLite starts a fresh file in its place.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import time

__all__ = ["DB_NAME", "aside_name", "is_corrupt", "quarantine", "set_aside_odd_journals"]

log = logging.getLogger("fncache")

DB_NAME = "cache.db"


def is_corrupt(e: BaseException) -> bool:
    """Whether an SQLite error says the database file itself is damaged (not busy, not locked)."""
    if not isinstance(e, sqlite3.DatabaseError) or isinstance(e, sqlite3.IntegrityError):
        return False
    text = str(e)
    return "not a database" in text or "malformed" in text


def aside_name(path: str) -> str:
    """A free name to move a damaged database file aside to: ``PATH.corrupt-<UTC time>[-N]``."""
    target = f"{path}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    n = 1
    while os.path.lexists(target + ("" if n == 1 else f"-{n}")):
        n += 1
    return target + ("" if n == 1 else f"-{n}")


def quarantine(directory: str, reason: str, inode: int | None) -> None:
    """Move a damaged ``cache.db`` (and its WAL files) aside; a fresh one is created next.

    Only if the file there is still the one found damaged (``inode``): another process may have
    moved it and started a fresh database already. Never deletes: the user decides.
    """
    path = os.path.join(directory, DB_NAME)
    try:
        if inode is not None and os.lstat(path).st_ino != inode:
            return
    except FileNotFoundError:
        return
    target = aside_name(path)
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return
    for suffix in ("-wal", "-shm"):
        try:
            os.rename(path + suffix, target + suffix)
        except OSError:
            pass
    log.warning("cache database %s is damaged (%s); moved it aside to %s and started a fresh "
                "one", path, reason, os.path.basename(target))


def set_aside_odd_journals(db_path: str) -> None:
    """Move a ``cache.db-wal``, ``-shm`` or ``-journal`` that is not a regular file (a symlink
    SQLite would write through, a directory on which every open fails, a FIFO whose open waits
    for ever: SQLite opens a ``-journal`` to see whether it is hot) aside, as ``cache.db`` is;
    the database itself is kept (such a file held none of its data) and SQLite makes a new one.
    """
    for suffix in ("-wal", "-shm", "-journal"):
        path = db_path + suffix
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                continue
        except FileNotFoundError:
            continue
        target = aside_name(path)
        try:
            os.rename(path, target)
        except FileNotFoundError:
            continue  # another process did it
        log.warning("cache database file %s is not a regular file; moved it aside to %s",
                    path, os.path.basename(target))
