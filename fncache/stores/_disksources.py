"""The function sources a disk store keeps for ``explain`` (see :mod:`fncache.code.sources`).

Layout: ``<store>/sources/<32 hex>.src``, one file per content address, written to a temporary
name and renamed into place (a reader sees a whole file or none). Like the value files, nothing
outside the store is touched: the ``sources`` folder must be a directory of its own (a symlink in
its place is refused), a file is opened without following links and read only when it is a regular
file no larger than the caller's limit. What is read is text that the caller checks against its
address; it is never unpickled or run.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile

__all__ = ["SourceFiles"]

_ADDRESS = re.compile(r"[0-9a-f]{32}")
_FOLDER = "sources"
_SUFFIX = ".src"


class SourceFiles:
    """The kept sources under one store directory. Safe for concurrent use by threads and
    processes: writes are atomic renames of identical content."""

    def __init__(self, directory: str) -> None:
        self.folder = os.path.join(directory, _FOLDER)

    def _folder_ok(self, create: bool) -> bool:
        try:
            st = os.lstat(self.folder)
        except FileNotFoundError:
            if not create:
                return False
            try:
                os.mkdir(self.folder, 0o700)
            except FileExistsError:
                pass
            st = os.lstat(self.folder)
        return stat.S_ISDIR(st.st_mode)

    def _path(self, address: str) -> str:
        if not _ADDRESS.fullmatch(address):
            raise ValueError(f"not a source address: {address!r}")
        return os.path.join(self.folder, address + _SUFFIX)

    def put(self, address: str, text: bytes) -> None:
        path = self._path(address)
        if not self._folder_ok(create=True) or os.path.lexists(path):
            return
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def get(self, address: str, limit: int) -> bytes | None:
        if not _ADDRESS.fullmatch(address) or not self._folder_ok(create=False):
            return None
        try:
            # Without waiting: a FIFO planted in the file's place is refused below, not read.
            fd = os.open(self._path(address), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                return None
            data = f.read(limit + 1)
        return data if len(data) <= limit else None

    def sizes(self) -> dict[str, int]:
        if not self._folder_ok(create=False):
            return {}
        out = {}
        with os.scandir(self.folder) as it:
            for e in it:
                address = e.name[: -len(_SUFFIX)]
                if e.name.endswith(_SUFFIX) and _ADDRESS.fullmatch(address) and \
                        e.is_file(follow_symlinks=False):
                    out[address] = e.stat(follow_symlinks=False).st_size
        return out

    def delete(self, addresses: list[str]) -> int:
        if not self._folder_ok(create=False):
            return 0
        removed = 0
        for address in addresses:
            try:
                os.unlink(self._path(address))
                removed += 1
            except (OSError, ValueError):
                pass
        return removed
