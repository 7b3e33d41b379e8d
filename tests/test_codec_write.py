"""Frames checksummed while they are written (``_framedigests.LateFrame``).

A large frame bound for a disk store's value file is written body first while a second thread
takes its checksums, and its head last. What is written must be, byte for byte, the frame that
``encode`` checksums first: on two threads, on one core, when no thread can be started, and
joined for a store that keeps it inline. A write that fails leaves no file, no entry and no thread.
"""

from __future__ import annotations

import errno
import io
import threading

import numpy as np
import pytest

from fncache import _codec, _framedigests
from fncache.stores import _diskfs, join_parts
from fncache.stores.disk import DiskStore

KEY = "0123456789abcdef" * 2


def _value() -> dict[str, object]:
    # Buffers of uneven lengths (the padding after each is not empty), 4.6 MiB in all.
    return {"a": np.arange(500_003, dtype=np.float64), "b": np.arange(700_001, dtype=np.uint8),
            "s": "text", "n": list(range(50))}


def _encoded(value, late: bool, **kw):
    return _codec.encode_parts(value, KEY, created=1.0, duration=2.0, late=late, **kw)


def _written(frame) -> bytes:
    """The bytes a value file holds after ``frame`` is written to it as a disk store does."""
    out = io.BytesIO()
    frame.write_late(out, _diskfs._write_parts)
    return out.getvalue()


def _checksum_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "fncache-checksum")


def test_a_large_frame_is_late_and_written_byte_for_byte_as_the_frame_checksummed_first():
    expected = _codec.encode(_value(), KEY, created=1.0, duration=2.0)
    frame = _encoded(_value(), late=True)
    assert isinstance(frame, _framedigests.LateFrame)
    assert not any(frame[0])  # the head is not known before the body is hashed
    assert _written(frame) == expected
    assert frame.done and b"".join(frame) == expected
    assert _checksum_threads() == 0
    value, _ = _codec.decode(expected, KEY)
    assert np.array_equal(value["a"], _value()["a"])


@pytest.mark.parametrize("how", ["one core", "no thread"])
def test_without_a_second_thread_the_frame_is_checksummed_first_and_the_same(monkeypatch, how):
    started = []
    if how == "one core":
        monkeypatch.setattr(_framedigests, "_cores", lambda: 1)
        monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self))
    else:  # as at interpreter shutdown
        def refuse(self):
            started.append(self)
            raise RuntimeError("can't create new thread at interpreter shutdown")
        monkeypatch.setattr(threading.Thread, "start", refuse)
    expected = _codec.encode(_value(), KEY, created=1.0, duration=2.0)
    assert _written(_encoded(_value(), late=True)) == expected
    assert len(started) == (how == "no thread")


@pytest.mark.parametrize("kw", [{}, {"secret": b"s"}, {"compress": "zstd"}], ids=["small", "signed",
                                                                                "compressed"])
def test_only_a_large_unsigned_uncompressed_frame_is_late(kw):
    value = _value() if kw else {"a": np.arange(1000)}
    frame = _encoded(value, late=True, **kw)
    assert type(frame) is list
    assert b"".join(frame) == b"".join(_encoded(value, late=False, **kw))


def test_a_late_frame_joined_for_a_store_that_keeps_it_whole_is_checksummed_then():
    expected = _codec.encode(_value(), KEY, created=1.0, duration=2.0)
    assert bytes(join_parts(_encoded(_value(), late=True))) == expected


@pytest.mark.parametrize("min_file_size", [None, 2**30], ids=["value file", "inline"])
def test_the_disk_store_loads_a_large_result_it_wrote_late_and_rejects_it_changed(tmp_path,
                                                                                  min_file_size):
    """Stored through ``memoize`` (written late into a value file, or joined into the row), a
    large result hits in a new memoized function and loads checked; a byte flipped in the value
    file's head or body makes it a miss that computes again, never a wrong value."""
    import fncache

    opts = {} if min_file_size is None else {"disk_min_file_size": min_file_size}
    store = DiskStore(str(tmp_path / "s"), **opts)
    calls = []

    def make(n):
        calls.append(n)
        return np.full(1_000_000, n, dtype=np.float64)  # 8 MB

    f = fncache.memoize(store=store)(make)
    assert f(3)[0] == 3 and calls == [3]
    g = fncache.memoize(store=store)(make)
    assert np.array_equal(g(3), np.full(1_000_000, 3.0)) and calls == [3]
    # (Two entries: ``calls`` is state the function writes, so it is stored under the key of
    # its state before the call and after it.)
    def files():
        return [p for p in (tmp_path / "s").glob("*/*/*.val") if p.stat().st_size > 2**20]

    assert bool(files()) == (min_file_size is None)
    # The head's checksum, a byte of the array (a rejected entry is removed, and stored again).
    for at in (70, -1000):
        for path in files():
            data = bytearray(path.read_bytes())
            data[at] ^= 0x10
            path.write_bytes(bytes(data))
        h = fncache.memoize(store=store)(make)
        n = len(calls)
        assert h(3)[0] == 3
        assert (h.cache_info().hits, len(calls)) == ((0, n + 1) if min_file_size is None
                                                        else (1, n))


def test_a_write_that_fails_leaves_no_file_no_entry_and_no_thread(tmp_path, monkeypatch):
    """A full disk in the middle of a late write: the result is returned, nothing is stored,
    no value file is left and the checksum thread is gone; the next write stores."""
    import fncache

    def full_disk(f, parts):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_diskfs, "_write_parts", full_disk)
    store = DiskStore(str(tmp_path / "s"))
    f = fncache.memoize(store=store)(lambda n: np.full(1_000_000, n, dtype=np.float64))
    assert f(2)[0] == 2
    assert len(store) == 0
    assert not [p for p in (tmp_path / "s").glob("*/*/*.val") if p.stat().st_size > 2**20]
    assert _checksum_threads() == 0
    monkeypatch.undo()
    assert f(2)[0] == 2 and len(store) == 1
    assert f(2)[0] == 2 and f.cache_info().hits == 1


def test_an_error_in_the_checksum_thread_reaches_the_writer(monkeypatch):
    """The checksum thread failing makes the write fail (the file is then removed by the store):
    a head is never filled in from a checksum that was not taken."""
    real = _framedigests.xxhash.xxh3_128

    class Failing:
        def __init__(self, *a):
            self.h, self.n = real(*a), 0

        def update(self, data):
            self.n += 1
            if self.n > 3 and threading.current_thread().name == "fncache-checksum":
                raise MemoryError("hash failed")
            self.h.update(data)

        def digest(self):
            return self.h.digest()

    monkeypatch.setattr(_framedigests.xxhash, "xxh3_128", Failing)
    frame = _encoded(_value(), late=True)
    with pytest.raises(MemoryError, match="hash failed"):
        _written(frame)
    assert not frame.done and not any(frame[0]) and _checksum_threads() == 0
