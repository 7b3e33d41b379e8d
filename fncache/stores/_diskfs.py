"""The files of a disk store: value-file names, contained opening and removal, private directories.

Threat model: someone who can write the store can put anything in a row's ``filename`` column
(an absolute path, ``../``), replace a value file or a sub-directory by a symlink, or plant a FIFO.
Nothing here ever touches a file outside the store because of that:

* a value file's name must have the exact shape fncache (and diskcache) gives it,
  ``xx/yy/<28 hex>.val``; anything else is refused before any system call;
* its directory must resolve (``realpath``) to ``<store>/xx/yy`` itself: no symlinked sub-directory;
* it is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a symlink fails, a FIFO does not block) and must
  be a regular file (``fstat``). Several hard links are accepted: ``cp -al``, rsnapshot and
  ``rsync --link-dest`` backups make them, and what is read is verified by its checksum (and
  signature) anyway; a link to a file elsewhere gives its bytes to the codec, which rejects them,
  and fncache never writes into an existing file (new files are created ``O_EXCL``) nor removes
  more than the name in the store;
* removal unlinks only that name: never a directory, never what a symlink points to.

Not for: protecting against someone who can replace the store directory itself (its parents must
not be writable by others; :func:`unsafe_ancestors` reports those) or who races a check between
``lstat`` and ``unlink`` inside the store (they could only make fncache remove a name in the store).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from typing import Any

from fncache._codec import read_frame

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: partial files wait for the grace period
    fcntl = None  # type: ignore[assignment]

__all__ = ["UnsafeFile", "ValueFiles", "make_private_dirs", "unsafe_ancestors"]

log = logging.getLogger("fncache")

_WRITE_CHUNK = 1024 * 1024  # bytes per write() of a value file
_HEX2 = re.compile(r"[0-9a-f]{2}")
_LEAF = re.compile(r"[0-9a-f]{28}\.val")
_NAME = re.compile(r"([0-9a-f]{2})/([0-9a-f]{2})/([0-9a-f]{28}\.val)")
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
    | getattr(os, "O_CLOEXEC", 0)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)


# A value file nobody writes to is an orphan (once unreferenced) only when it was last written this
# long ago: covers the instant between creating a file and taking its lock.
_SETTLED = 10.0


class UnsafeFile(ValueError):
    """A row names a file fncache would not have written: wrong shape, outside the store, not a
    regular file. The row is damage; the file is left alone."""


def make_private_dirs(path: str) -> None:
    """Create ``path`` and every missing parent with mode 0700, whatever the umask.

    ``os.makedirs(mode=...)`` applies the mode to the leaf only (since Python 3.7): under umask 000
    the parents it creates are world-writable, and whoever can write a parent can swap the cache
    directory for one of their own. Existing directories are left as they are.
    """
    missing = []
    p = os.path.abspath(path)
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            if not os.path.isdir(d):
                raise


def unsafe_ancestors(path: str) -> list[str]:
    """The directories among ``path`` and its parents that someone else could swap or write.

    A directory is unsafe if it is writable by group or others without the sticky bit (``/tmp``
    has it: others cannot rename what we own there), or owned by another user than us or root.
    """
    out = []
    uid = os.getuid() if hasattr(os, "getuid") else None
    p = os.path.realpath(path)
    while True:
        try:
            st = os.stat(p)
        except OSError:
            st = None
        if st is not None:
            writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            sticky = st.st_mode & stat.S_ISVTX
            foreign = uid is not None and st.st_uid not in (uid, 0)
            if (writable and not sticky) or foreign:
                out.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            return out
        p = parent


def _write_parts(f: Any, parts: list[Any] | tuple[Any, ...], hasher: Any = None) -> None:
    """Write ``parts`` one after another to the unbuffered file ``f``, feeding each piece to
    ``hasher`` (unless None) just before it is written (see ``LateFrame.write_late``).

    Part by part (a frame's large buffers are written from where the result holds them), in writes
    of 1 MiB: diskcache's own writer iterates a BytesIO by *lines*, which for binary data means
    one write call every few hundred bytes; one write of a whole 256 MB buffer was measured here
    at twice the time of 1 MiB writes (median 308 ms against 126 ms).
    """
    for part in parts:
        view = memoryview(part).cast("B")
        for start in range(0, view.nbytes, _WRITE_CHUNK):
            piece = view[start : start + _WRITE_CHUNK]
            if hasher is not None:
                hasher.update(piece)
            done = 0
            while done < piece.nbytes:
                done += f.write(piece[done:])


class ValueFiles:
    """The value files under one store directory, by their relative names (``xx/yy/<hex>.val``)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._real = os.path.realpath(directory)

    # -- names -----------------------------------------------------------------------------------
    def path(self, name: object) -> str:
        """The full path of a value file named ``name``; :class:`UnsafeFile` if it is not one."""
        if not isinstance(name, str):
            raise UnsafeFile(f"value file name is not text: {type(name).__name__}")
        m = _NAME.fullmatch(name.replace(os.sep, "/"))
        if m is None:
            raise UnsafeFile(f"not a value file name: {name[:100]!r}")
        sub = os.path.join(self.directory, m.group(1), m.group(2))
        # A symlinked sub-directory would lead outside: its real path must be the plain one.
        if os.path.realpath(sub) != os.path.join(self._real, m.group(1), m.group(2)):
            raise UnsafeFile(f"value file directory of {name!r} leads outside the store")
        return os.path.join(sub, m.group(3))

    def write(self, value: Any) -> tuple[str, int]:
        """Write ``value`` (bytes, or a list of parts) to a new value file: its name, and its
        descriptor, still open and holding the file's write lock (the caller closes it once the
        row naming the file is published). The file is removed if the write fails."""
        filename, fd = self.new()
        parts = value if isinstance(value, (list, tuple)) else [value]
        late = getattr(parts, "write_late", None)  # a LateFrame: checksummed while written
        try:
            with open(fd, "wb", buffering=0, closefd=False) as f:
                if late is not None:
                    late(f, _write_parts)
                else:
                    _write_parts(f, parts)
        except BaseException:
            self.remove(filename)
            os.close(fd)
            raise
        return filename, fd

    def new(self) -> tuple[str, int]:
        """(name, descriptor open for writing) of a new, empty value file (mode 0600).

        Names are random (16 bytes, as diskcache's). A sub-directory someone replaced by a symlink
        is never written through: another name is drawn.
        """
        refused = None
        for attempt in range(20):
            hex_name = os.urandom(16).hex()
            name = f"{hex_name[:2]}/{hex_name[2:4]}/{hex_name[4:]}.val"
            refused = self._make_subdirs(hex_name)
            if refused is not None:
                continue
            try:
                return name, self._create(name)
            except UnsafeFile as e:
                refused = str(e)
            except FileNotFoundError:
                # Another process removed the (then empty) directory between the calls:
                # empty directories are pruned when their last file goes. Try again.
                if attempt == 19:
                    raise
        msg = f"no safe place for a value file in {self.directory}: {refused}"
        log.warning("%s", msg)
        raise OSError(errno.EPERM, msg)

    def _make_subdirs(self, hex_name: str) -> str | None:
        """Make the two directory levels of a value file named ``hex_name``; why not, if a level
        is not a real directory (then nothing is made in it)."""
        top = os.path.join(self.directory, hex_name[:2])
        sub = os.path.join(top, hex_name[2:4])
        # Each level is created, then checked to be a real directory before anything is made
        # in it: mkdir through a planted symlink would create directories elsewhere.
        for d in (top, sub):
            try:
                os.mkdir(d, 0o700)
            except (FileExistsError, FileNotFoundError):
                pass  # exists (checked next), or a cleanup raced us (retried by the caller)
            if os.path.lexists(d) and not _plain_dir(d):
                return f"{d} is not a directory"
        return None

    def _create(self, name: str) -> int:
        """A descriptor of the new file ``name`` (mode 0600, never an existing one), locked."""
        fd = os.open(self.path(name), _CREATE_FLAGS, 0o600)
        if fcntl is not None:
            # Held until the file is published or given up (see abandoned()): the kernel drops
            # it when the writer dies, even by SIGKILL.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd

    # -- reading ---------------------------------------------------------------------------------
    def open(self, name: object) -> int:
        """A read-only descriptor of the regular file ``name``.

        Raises :class:`UnsafeFile` for a name of the wrong shape, a symlink, a FIFO or anything
        else that is not a regular file in the store, ``FileNotFoundError`` if it is gone.
        """
        path = self.path(name)
        try:
            fd = os.open(path, _READ_FLAGS)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafeFile(f"value file {name!r} is a symlink") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeFile(f"value file {name!r} is not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def abandoned(self, name: str) -> int | None:
        """A descriptor of value file ``name`` holding its write lock, if no writer holds it (the
        one that created it died, or is done); None if a writer still does, or it is gone.

        The caller closes it (releasing the lock) once it has removed or kept the file. Without
        ``fcntl`` (not POSIX) every file reads as held.
        """
        if fcntl is None:
            return None
        try:
            fd = os.open(self.path(name), _READ_FLAGS)
        except (OSError, UnsafeFile):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd

    def exists(self, name: object) -> bool:
        """Whether ``name`` is a value file name whose entry is there (of any type)."""
        try:
            return os.path.lexists(self.path(name))
        except UnsafeFile:
            return False

    # -- removing --------------------------------------------------------------------------------
    def remove(self, name: object) -> bool:
        """Remove the value file ``name`` and its directories once empty; ``True`` if removed.

        Only a name of the right shape inside the store is removed, and only if it is not a
        directory: a planted symlink or FIFO goes as a name (``unlink`` never follows a link), and
        anything else is logged and left alone. Never fails (a concurrent removal is fine).
        """
        if name is None:
            return False
        try:
            path = self.path(name)
            if stat.S_ISDIR(os.lstat(path).st_mode):
                raise UnsafeFile(f"value file {name!r} is a directory")
            os.unlink(path)
        except UnsafeFile as e:
            log.warning("not removing %s: %s", self.directory, e)
            return False
        except OSError:
            return False
        sub = os.path.dirname(path)
        for d in (sub, os.path.dirname(sub)):
            try:
                os.rmdir(d)  # only if empty; never follows a link (``path`` checked it is none)
            except OSError:
                break
        return True

    def walk(self) -> Iterator[tuple[str, os.stat_result]]:
        """(name, lstat) of every regular file of value-file shape under the directory."""
        try:
            tops = os.listdir(self.directory)
        except OSError:
            return
        for a in tops:
            if not _HEX2.fullmatch(a):
                continue
            top = os.path.join(self.directory, a)
            for b in _listdir_plain(top):
                if not _HEX2.fullmatch(b):
                    continue
                sub = os.path.join(top, b)
                for leaf in _listdir_plain(sub):
                    if not _LEAF.fullmatch(leaf):
                        continue
                    try:
                        st = os.lstat(os.path.join(sub, leaf))
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        yield f"{a}/{b}/{leaf}", st

    def orphans(self, grace: float, remove: bool, referenced: Callable[[], set[str]],
                references: Callable[[str], bool]) -> tuple[int, int]:
        """(count, bytes) of value files no row names and no writer holds (see
        :meth:`fncache.stores.disk.DiskStore.orphans`), removed if ``remove``. ``referenced()``
        gives the names the rows hold, read after the walk (a row published meanwhile names a file
        younger than ``grace``); ``references(name)`` checks one name again once its lock is ours.
        """
        t = time.time()
        cutoff, settled = t - grace, t - _SETTLED
        found = [(name, st.st_size, st.st_mtime < cutoff) for name, st in self.walk()
                 if st.st_mtime < settled]
        if not found:
            return 0, 0
        named = referenced()
        count = nbytes = 0
        for name, size, old in found:
            if name not in named and self._take_orphan(name, old, remove, references):
                count += 1
                nbytes += size
        return count, nbytes

    def _take_orphan(self, name: str, old: bool, remove: bool,
                     references: Callable[[str], bool]) -> bool:
        """Whether the unreferenced file ``name`` is an orphan (removed if ``remove``): if ``old``,
        whoever holds it; else only once its lock is ours and still no row names it."""
        fd = None if old else self.abandoned(name)
        if not old and fd is None:
            return False  # a live writer holds it: being written, or about to be published
        try:
            # Its lock is ours now: a writer that published it since the caller's read did so
            # before letting go, so the row is seen here.
            if fd is not None and references(name):
                return False
            return not remove or self.remove(name)
        finally:
            if fd is not None:
                os.close(fd)


def _plain_dir(path: str) -> bool:
    """Whether ``path`` is a directory itself, not a symlink to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _listdir_plain(path: str) -> list[str]:
    """Names in ``path`` if it is a real directory (not a symlink to one), else nothing."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return []
        return os.listdir(path)
    except OSError:
        return []


# From this size on, value files are read by _codec.read_frame (see read_file): below it, one
# read and a hash pass over bytes still in the CPU cache cost less than reading in pieces.
_CHECKED_READ_MIN = 1024 * 1024


def map_file(fd: int, key: str) -> bytes | mmap.mmap:
    """A read-only map of an open value file (the descriptor is closed); nothing is read here."""
    with open(fd, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def read_file(fd: int, key: str) -> Any:
    """An open value file read whole into writable memory, or None if it shrank meanwhile.

    A large value is read by the codec chunk by chunk, each chunk's checksum taken while it is in
    the CPU cache (instead of a second pass over the whole value from memory), each array buffer
    into memory of its own that the result then uses without another copy. A small one is read
    in one go and checked by the codec afterwards, from the cache.
    """
    with open(fd, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        # From 1 MiB up the codec reads the header first and refuses (IntegrityError) a file whose
        # size is not what the header gives, before reading or hashing the rest.
        if size >= _CHECKED_READ_MIN:
            return read_frame(f.readinto, size, key, fd=f.fileno())
        buf = bytearray(size)
        view = memoryview(buf)
        pos = 0
        while pos < size:
            n = f.readinto(view[pos:])
            if not n:
                return None  # truncated under us: not a whole value
            pos += n
        return buf
