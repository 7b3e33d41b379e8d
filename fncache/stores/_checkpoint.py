"""A disk store's checkpoints, run on a thread of their own instead of inside a write.

SQLite writes a WAL database's changes to its write-ahead log and copies them into the database
file at a *checkpoint*, which a commit runs once the log holds ``wal_autocheckpoint`` pages: that
commit then syncs the log, writes back every page the log holds and syncs the database. On these
machines that was 10-25 ms every few hundred writes, a third of a small miss's time: 118 us
against 87 us for writes that checkpoint nothing, and at a million entries (where each write
dirties an index page of its own) 165 us against 110 us.

So the process that writes runs the checkpoints on one thread per store (:class:`Checkpointer`):
every ``every`` commits it is woken for one ``PRAGMA wal_checkpoint(PASSIVE)`` on a connection of
its own, which neither waits for writers nor holds them up; the write that woke it only sets a
flag. SQLite's own checkpoint stays as the backstop at ``wal_autocheckpoint`` pages (the log
restarts from its beginning only once all of it is in the database, which a writer that never
pauses would otherwise never let the thread reach). The thread ends after :data:`IDLE` seconds
without work (started again by the next commit that needs it), when its store is closed, at
interpreter exit, and before a fork. It runs only this module's code and SQLite's (and whatever
trace hooks or ``fncache`` log handlers the program installs), never a memoized function's, so
it does not count as a thread that could change what one reads (:data:`live`,
:func:`fncache._threads.threads_besides_main`).

A checkpoint the thread runs while the writer goes on rarely copies the whole log (the writer
appends as it copies), and SQLite syncs the database file only after one that did: the pages the
thread wrote stayed unsynced until the backstop's checkpoint, whose sync then flushed all of them
inside a commit. At a million entries, where each write dirties an index page of its own, that was
30 ms every 2,700 writes, 16 us a write against 2 us in a small store. So after each checkpoint
with pages in the log the thread syncs the database itself (:func:`_database_fd`; where SQLite
just did, nothing is left to write): the backstop's sync then has only its own pages left. Never
where the store's ``synchronous`` is OFF, whose connections sync nothing; the thread's connection
takes the store's level (it had SQLite's default, FULL).

Before a fork every checkpoint thread is stopped and waited for (after the checkpoint it is in),
and none starts until the fork is done: SQLite keeps a process's locks (its mutexes, the log's
file locks) in memory, and a child forked while the thread was inside SQLite would wait for
ever on a lock held by a thread it does not have. So a child never inherits one, and Python's
warning about forking a process with threads is not given for it. The parent starts a new
thread at the next commit that needs one, the child when it writes.
"""

from __future__ import annotations

import atexit
import logging
import os
import pathlib
import threading
import weakref
from typing import TYPE_CHECKING, Any

from fncache import _forks

if TYPE_CHECKING:
    import sqlite3

__all__ = ["IDLE", "Checkpointer", "live", "live_lock"]

log = logging.getLogger("fncache")

#: Seconds a checkpoint thread waits for work before it ends.
IDLE = 30.0

#: Checkpoint threads of this process between the first and last line of their run, changed
#: under :data:`live_lock` only: a thread is counted by ``_thread._count()`` and
#: ``threading.active_count()`` all the while it is counted here. So, read with ``live_lock`` held
#: together with the count it is subtracted from (:func:`fncache._threads.threads_besides_main`), the
#: difference never leaves out a thread that could run user code.
live = [0]
live_lock = threading.Lock()
_all: weakref.WeakSet[Checkpointer] = weakref.WeakSet()
# [exiting, forking]: no thread is started at interpreter exit, nor while a fork is made.
_no_start: list[Any] = [False, 0]
_forking_lock = threading.Lock()  # held only to count a fork in or out


class Checkpointer:
    """Runs the checkpoints of the database at ``path`` on a thread, one every ``every`` commits
    reported with :meth:`committed` (by the writer of this process)."""

    def __init__(self, path: str, every: int, synchronous: int = 1) -> None:
        self.path = path
        self.every = max(int(every), 1)
        #: The store's ``PRAGMA synchronous`` level, for the thread's connection (0: OFF).
        self.synchronous = synchronous
        #: Checkpoints this object's threads completed (SQLite did not refuse them as busy).
        self.done = 0
        #: Of those, the ones after which the thread synced the database itself.
        self.synced = 0
        self._commits = 0
        self._fresh()
        _all.add(self)
        _forks.track(self)

    def _fresh(self) -> None:
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._wanted = False
        self._closed = False

    def committed(self) -> None:
        """One commit of this process's writer: wakes (or starts) the thread every ``every``."""
        self._commits += 1
        if self._commits >= self.every:
            self._commits = 0
            self._request()

    def _request(self) -> None:
        with self._lock:
            if self._closed or any(_no_start):
                return
            self._wanted = True
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="fncache-checkpoint", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # no new thread at interpreter shutdown: the backstop
                    self._wanted = False
                    return
                self._thread = thread
            else:
                self._work.notify()

    def _run(self) -> None:
        import sqlite3  # imported by the store that made this object (not by fncache._miss's import)

        with live_lock:
            live[0] += 1
        try:
            before = _database_fds(self.path) if self.synchronous else None
            try:
                # Never made (mode=rw): a database moved aside or deleted since is not created again.
                con = sqlite3.connect(pathlib.Path(self.path).absolute().as_uri() + "?mode=rw",
                                      uri=True, timeout=0, isolation_level=None)
            except sqlite3.Error as e:
                log.debug("checkpoints of %s: cannot open it: %s", self.path, e)
                return
            try:
                try:
                    con.execute(f"PRAGMA synchronous = {int(self.synchronous)}")
                except sqlite3.Error as e:
                    log.debug("checkpoints of %s: cannot set its sync level: %s", self.path, e)
                    return
                fd = _database_fd(before, self.path) if self.synchronous else None
                while self._next():
                    if not self._checkpoint(con, fd):
                        fd = None
            finally:
                con.close()
        finally:
            with self._lock:  # ended early (no connection): the next request starts another
                if self._thread is threading.current_thread():
                    self._thread = None
            with live_lock:
                live[0] -= 1

    def _next(self) -> bool:
        """Wait for a request; False when the thread is to end (it is then no longer this object's)."""
        me = threading.current_thread()
        with self._lock:
            if self._thread is me and not (self._wanted or self._closed):
                self._work.wait(IDLE)
            if self._thread is not me or self._closed or not self._wanted:
                if self._thread is me:
                    self._thread = None
                return False
            self._wanted = False
            return True

    def _checkpoint(self, con: sqlite3.Connection, fd: tuple[int, tuple[int, int]] | None) -> bool:
        """One passive checkpoint, then the database's sync if the log had pages in it (``fd``: see
        :func:`_database_fd`; the counts SQLite returns do not tell whether it synced: a writer may
        have appended as it copied). False once ``fd`` is no longer the database's."""
        try:
            busy, _, copied = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except Exception as e:  # sqlite3.Error: the file is gone, the database damaged
            log.debug("checkpoint of %s failed: %s", self.path, e)
            return True
        if busy:  # another connection (another process) is checkpointing
            log.debug("checkpoint of %s skipped: another one runs", self.path)
            return True
        self.done += 1
        if fd is None or copied <= 0:
            return True
        if not _sync(fd):
            log.debug("checkpoint of %s: its database file is no longer at fd %d", self.path, fd[0])
            return False
        self.synced += 1
        return True

    def stop(self, wait: float | None = 10.0) -> None:
        """End the thread after the checkpoint it may be in; waits at most ``wait`` seconds (None:
        as long as it takes). A later request starts another, unless the object is closed."""
        with self._lock:
            thread = self._thread
            self._thread = None  # the thread sees it is no longer this object's, and ends
            self._work.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait)

    def close(self, wait: float = 10.0) -> None:
        """Stop the thread for good (the store is closed)."""
        with self._lock:
            self._closed = True
        self.stop(wait)

    def reset_after_fork(self) -> None:
        """A forked child has none of its parent's threads: it starts its own when needed."""
        closed = self._closed
        self._fresh()
        self._closed = closed
        self._commits = 0


# Where this process's open file descriptors are listed (Linux; elsewhere, /dev/fd).
_FD_DIR = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"


def _database_fds(path: str) -> tuple[set[int], tuple[int, int]] | None:
    """The process's descriptors open on the file at ``path``, and its (device, inode); None where
    they cannot be listed."""
    try:
        st = os.stat(path)
        names = os.listdir(_FD_DIR)
    except OSError:
        return None
    identity = (st.st_dev, st.st_ino)
    found = set()
    for name in names:
        try:
            other = os.fstat(int(name))
        except (OSError, ValueError):  # closed since (the listing's own, among others)
            continue
        if (other.st_dev, other.st_ino) == identity:
            found.add(int(name))
    return found, identity


def _database_fd(before: tuple[set[int], tuple[int, int]] | None, path: str
                 ) -> tuple[int, tuple[int, int]] | None:
    """The descriptor SQLite opened on ``path`` for the connection just made (``before``: what
    :func:`_database_fds` found before it), with the file's (device, inode); None if there is no
    single one.

    The thread syncs the database through SQLite's own descriptor, never one of its own: closing any
    descriptor of a file drops every POSIX lock the process holds on it, and SQLite's connections
    hold theirs on the database (another process could then take the database for unused and
    remove its log). Checked again before each sync (:func:`_sync`): a descriptor closed meanwhile
    and reused for another file is never synced in its place.
    """
    after = _database_fds(path)
    if before is None or after is None or after[1] != before[1]:
        return None
    mine = after[0] - before[0]
    return (mine.pop(), after[1]) if len(mine) == 1 else None


def _sync(fd: tuple[int, tuple[int, int]]) -> bool:
    """Sync the database file at ``fd`` (its data, as SQLite's own sync of it); False if the
    descriptor is no longer that file's."""
    number, identity = fd
    try:
        st = os.fstat(number)
        if (st.st_dev, st.st_ino) != identity:
            return False
        getattr(os, "fdatasync", os.fsync)(number)
    except OSError:
        return False
    return True


def _close_all() -> None:
    _no_start[0] = True
    for checkpointer in list(_all):
        checkpointer.close()


def _before_fork() -> None:
    # No thread starts from here on (a request checks under the object's lock, which stop takes
    # after this), and every running one ends before the fork.
    with _forking_lock:
        _no_start[1] += 1  # a count: two threads may fork at once
    for checkpointer in list(_all):
        checkpointer.stop(60.0)  # a checkpoint stalled past this is left running: the fork goes on


def _after_fork_in_parent() -> None:
    with _forking_lock:
        _no_start[1] -= 1


def _after_fork_in_child() -> None:
    global live_lock, _forking_lock
    live_lock = threading.Lock()
    _forking_lock = threading.Lock()
    live[0] = 0
    _no_start[1] = 0


atexit.register(_close_all)
_forks.on_fork(_after_fork_in_child)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent)
