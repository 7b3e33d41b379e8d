"""Frames checksummed while they are written (``_framedigests.LateFrame``).

A large frame bound for a disk store's value file is written body first, each piece hashed just
before it is written, and its head last. What is written must be, byte for byte, the frame that
``encode`` checksums first, also when it is joined for a store that keeps it inline; a store
subclass that writes otherwise gets plain parts; a write that fails leaves no file and no entry.
"""

from __future__ import annotations

import errno
import io

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


def test_a_large_frame_is_late_and_written_byte_for_byte_as_the_frame_checksummed_first():
    expected = _codec.encode(_value(), KEY, created=1.0, duration=2.0)
    frame = _encoded(_value(), late=True)
    assert isinstance(frame, _framedigests.LateFrame)
    assert not any(frame[0])  # the head is not known before the body is hashed
    assert _written(frame) == expected
    assert frame.done and b"".join(frame) == expected
    value, _ = _codec.decode(expected, KEY)
    assert np.array_equal(value["a"], _value()["a"])


class _ShortWrites(io.BytesIO):
    """A file whose writes take at most 4,000 bytes each (as a write interrupted by a signal may)."""

    def write(self, data):
        return super().write(memoryview(data)[:4000])


def test_short_writes_are_completed_and_each_byte_is_hashed_once():
    expected = _codec.encode(_value(), KEY, created=1.0, duration=2.0)
    out = _ShortWrites()
    _encoded(_value(), late=True).write_late(out, _diskfs._write_parts)
    assert out.getvalue() == expected


@pytest.mark.parametrize("kw", [{}, {"secret": b"s"}, {"compress": "zstd"}], ids=["small", "signed",
                                                                                "compressed"])
def test_only_a_large_unsigned_uncompressed_frame_is_late(kw):
    # "small": buffers out of the pickle, 8 bytes under the size from which frames are late.
    value = _value() if kw else {"a": np.zeros(_framedigests.LATE_MIN // 8 - 1)}
    frame = _encoded(value, late=True, **kw)
    assert type(frame) is list
    assert b"".join(frame) == b"".join(_encoded(value, late=False, **kw))
    if not kw:  # one element more, and it is late
        assert isinstance(_encoded({"a": np.zeros(_framedigests.LATE_MIN // 8)}, late=True),
                          _framedigests.LateFrame)


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


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   KeyboardInterrupt()], ids=["disk full", "interrupt"])
def test_a_write_that_fails_midway_leaves_no_file_and_no_entry(tmp_path, monkeypatch, error):
    """A full disk (or Ctrl-C) in the middle of a late write: nothing is stored and no value file
    is left; the disk-full result is still returned; the next write stores."""
    import fncache

    write_parts = _diskfs._write_parts
    pieces = []

    def full_disk(f, parts, hasher=None):
        if pieces:  # the pickle went through; the buffers do not
            raise error
        pieces.append(1)
        write_parts(f, parts, hasher)

    monkeypatch.setattr(_diskfs, "_write_parts", full_disk)
    store = DiskStore(str(tmp_path / "s"))
    f = fncache.memoize(store=store)(lambda n: np.full(1_000_000, n, dtype=np.float64))
    if isinstance(error, KeyboardInterrupt):
        with pytest.raises(KeyboardInterrupt):
            f(2)
    else:
        assert f(2)[0] == 2
    assert pieces and len(store) == 0
    assert not [p for p in (tmp_path / "s").glob("*/*/*.val") if p.stat().st_size > 2**20]
    monkeypatch.undo()
    assert f(2)[0] == 2 and len(store) == 1
    assert f(2)[0] == 2 and f.cache_info().hits == 1


def test_a_store_subclass_that_writes_otherwise_gets_plain_parts(tmp_path):
    """A DiskStore subclass that joins what it is given (``accepts_parts = False``) or keeps a
    copy of the parts gets a whole frame: its entries load, its copies decode."""
    import fncache

    class Joined(DiskStore):
        accepts_parts = False

    class Mirrored(DiskStore):
        copies: dict[str, bytes] = {}

        def add(self, key, value, meta, expire=None):
            self.copies[key] = b"".join(value)
            return super().add(key, value, meta, expire)

    assert DiskStore(str(tmp_path / "plain")).writes_late
    for cls in (Joined, Mirrored):
        store = cls(str(tmp_path / cls.__name__))
        assert not store.writes_late
        f = fncache.memoize(store=store)(lambda n: np.full(1_000_000, n, dtype=np.float64))
        f(1)
        g = fncache.memoize(store=store)(lambda n: np.full(1_000_000, n, dtype=np.float64))
        assert g(1)[0] == 1 and g.cache_info().hits == 1
    for key, frame in Mirrored.copies.items():
        value, _ = _codec.decode(frame, key)
        assert value[0] == 1
