"""Reading a frame's bytes into memory: buffers allocated to be overwritten whole
(:func:`allocate`), filled from a file chunk by chunk and hashed while each chunk is in the CPU
cache (:func:`read_into`), and the out-of-band buffers of a large frame read from its file on two
threads, hashed in file order on the caller's (:func:`fill`).

A warm load of a large result is a copy from the page cache into fresh memory (which the kernel
zeroes as each page is first touched) and the frame's checksum: on one thread, ``numpy.load``'s
time and the checksum's. :func:`fill` cuts the buffers into pieces of :data:`PIECE` bytes in file order;
the caller's thread reads the first half of them and one helper thread the second, each in order
with ``os.preadv`` (no shared file position; the copy runs without the GIL). The caller feeds every
piece to the checksum in file order as soon as it is read: its own :data:`CHUNK` bytes at a time,
while they are still in the CPU cache, then the helper's as they arrive. The bytes are read once,
into the memory the result then owns, and checked there: nothing is read again after its check,
and the checksum is the one a sequential read computes.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CHUNK", "MIN_BYTES", "PIECE", "allocate", "available", "fill", "read_into"]

#: Bytes read at a time when a read is hashed as it goes: small enough that the checksum reads
#: them from the core's own cache right after the read put them there, large enough that the
#: system calls cost little (300 for 75 MB). Measured (75 MB warm, into memory already faulted
#: in, read plus checksum): 64 KiB 15.4 ms, 128-256 KiB 12.2-13.0, 1 MiB 13.5-14.4, 2 MiB 15.8;
#: the checksum alone of those bytes out of memory is 4-5 ms.
CHUNK = 256 * 1024
#: Bytes per piece of a two-thread read: large enough that handing pieces over costs nothing
#: (the caller reads and hashes its own pieces :data:`CHUNK` bytes at a time).
PIECE = 4 * 1024 * 1024
#: Buffers of fewer bytes in all are read on the caller's thread alone. On a 2-vCPU VM a read of a
#: 4 MiB piece now and then stalled for 5-10 ms while both threads ran (neither the GIL nor steal
#: time): an 80 MB DataFrame took 12-85 ms on two threads against a steady 23-30 ms on one, while
#: a 256 MB array took 52-57 ms against 80 ms.
MIN_BYTES = 128 * 1024 * 1024
# From this size a buffer is an anonymous map of its own rather than a bytearray (numpy not in use).
_HUGE_PAGE = 2 * 1024 * 1024


def allocate(size: int) -> Any:
    """A writable buffer of ``size`` bytes that is about to be overwritten whole.

    numpy's allocator when numpy is in use (no zero-filling; huge pages for large arrays, as
    ``numpy.load`` gets); otherwise a ``bytearray`` (zero-filled first: cheap when small), or,
    for large sizes, a private anonymous map (zeroed by the kernel as the read reaches each page).
    """
    np = sys.modules.get("numpy")
    if np is not None:
        return np.empty(size, dtype=np.uint8)
    private = getattr(mmap, "MAP_PRIVATE", None)
    if size < _HUGE_PAGE or private is None:
        return bytearray(size)
    try:
        return mmap.mmap(-1, size, flags=private)
    except OSError as e:  # ENOMEM: as a bytearray of that size would fail
        raise MemoryError(f"cannot allocate {size} bytes: {e}") from None


def read_into(readinto: Callable[[memoryview], int | None], view: memoryview, hasher: Any,
              chunk: int) -> bool:
    """Read ``view`` whole, chunk by chunk, hashing each chunk (``hasher``, unless None) while it
    is still in the CPU cache; False if the source ran dry first."""
    pos, size = 0, view.nbytes
    while pos < size:
        end = min(size, pos + chunk)
        start = pos
        while pos < end:
            n = readinto(view[pos:end])
            if not n:
                return False
            pos += n
        if hasher is not None:
            hasher.update(view[start:pos])
    return True


def available() -> bool:
    """Whether this platform can read at an offset without moving the file position."""
    return hasattr(os, "preadv")


def _read_at(fd: int, view: memoryview, offset: int) -> bool:
    """Read ``view`` whole from ``fd`` at ``offset``; False if the file ends first."""
    pos, size = 0, view.nbytes
    while pos < size:
        n = os.preadv(fd, [view[pos:]], offset + pos)
        if not n:
            return False
        pos += n
    return True


class _Helper:
    """The helper thread's side: reads its pieces in order and says how many are done."""

    def __init__(self, fd: int, pieces: list[tuple[memoryview, int]]) -> None:
        self.fd = fd
        self.pieces = pieces
        self.done = 0  # pieces read whole, in order
        self.failed: BaseException | None = None  # why it stopped early (None: the file ended)
        self.ended = False
        self.stop = False
        self.cond = threading.Condition(threading.Lock())

    def run(self) -> None:
        try:
            for view, offset in self.pieces:
                if self.stop or not _read_at(self.fd, view, offset):
                    break
                with self.cond:
                    self.done += 1
                    self.cond.notify()
        except BaseException as e:  # handed to the caller's thread, which raises it
            self.failed = e
        finally:
            with self.cond:
                self.ended = True
                self.cond.notify()

    def wait_for(self, count: int) -> bool:
        """Wait until ``count`` pieces are read; False if the helper stopped before (it raises the
        helper's error, if there was one)."""
        with self.cond:
            while self.done < count and not self.ended:
                self.cond.wait()
            if self.done >= count:
                return True
        if self.failed is not None:
            raise self.failed
        return False


def fill(fd: int, views: list[memoryview], hasher: Any) -> bool:
    """Read ``views`` whole, one after the other, from ``fd``'s file position on, feeding each to
    ``hasher`` in order; leaves the position after them. False if the file ended first (a file
    truncated meanwhile: not a whole frame)."""
    base = os.lseek(fd, 0, os.SEEK_CUR)
    pieces, end = _pieces(views, base)
    middle = base + (end - base) // 2
    split = next((i for i, (_, at) in enumerate(pieces) if at >= middle), len(pieces))
    own = _own_description(fd)
    helper = _Helper(fd if own is None else own, pieces[split:])
    thread: threading.Thread | None = None
    try:
        try:
            thread = threading.Thread(target=helper.run, name="fncache-read", daemon=True)
            thread.start()
        except RuntimeError:  # no thread to be had (interpreter shutdown): this one reads all
            thread, split = None, len(pieces)
        if not _read_in_order(fd, pieces, split, helper, hasher):
            return False
    finally:
        helper.stop = True
        try:
            if thread is not None and thread.ident is not None:
                thread.join()
        finally:
            if own is not None:
                os.close(own)
    os.lseek(fd, end, os.SEEK_SET)
    return True


def _pieces(views: list[memoryview], base: int) -> tuple[list[tuple[memoryview, int]], int]:
    """``views`` cut into pieces of at most :data:`PIECE` bytes with their file offsets, in file
    order from ``base``; and the offset where the last one ends."""
    pieces: list[tuple[memoryview, int]] = []
    offset = base
    for view in views:
        for start in range(0, view.nbytes, PIECE):
            pieces.append((view[start:start + PIECE], offset + start))
        offset += view.nbytes
    return pieces, offset


def _read_in_order(fd: int, pieces: list[tuple[memoryview, int]], split: int, helper: _Helper,
                   hasher: Any) -> bool:
    """Read the pieces before ``split`` here and wait for the helper's, hashing each in order;
    False if the file ended first."""
    for i, (view, at) in enumerate(pieces):
        if i < split:
            for start in range(0, view.nbytes, CHUNK):  # each hashed while it is in cache
                part = view[start:start + CHUNK]
                if not _read_at(fd, part, at + start):
                    return False
                hasher.update(part)
            continue
        if not helper.wait_for(i - split + 1):
            return False
        hasher.update(view)
    return True


def _own_description(fd: int) -> int | None:
    """A second open file description of ``fd``'s file, for the helper (Linux: the same inode,
    whatever its name is now), so that each thread's sequential reads keep the kernel's
    read-ahead of their own (two threads taking turns on one description read cold files
    slower than one thread); None where there is none to be had."""
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
