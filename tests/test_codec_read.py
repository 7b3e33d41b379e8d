"""Frames checked while they are read (``_codec.read_frame``) agree with the full check of ``decode``.

A frame read chunk by chunk is trusted by ``decode`` without a second pass over its bytes, so the
chunked check must reject exactly what the full check rejects: any single changed byte (header,
buffer table, checksums, padding, pickle, each buffer) and any truncation, before anything is
unpickled.
"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fncache import _codec
from fncache._errors import IntegrityError
from fncache.stores.disk import DiskStore

KEY = "0123456789abcdef" * 2
SECRET = b"s3cret"
UNPICKLED: list[str] = []


def _note_unpickled(tag: str) -> str:
    UNPICKLED.append(tag)
    return tag


class Tripwire:
    """Records every time it is unpickled: a rejected frame must never get that far."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (_note_unpickled, ("tripwire",))


def _value() -> dict[str, object]:
    # Two out-of-band buffers of uneven length (so the padding between them is not empty) and
    # a tripwire in the pickle.
    return {"t": Tripwire(), "a": np.arange(9_001, dtype=np.float64),
            "b": np.arange(70_003, dtype=np.uint8), "s": "x" * 100}


def _frame(secret: bytes | None = None, compress: str | None = None) -> bytes:
    return _codec.encode(_value(), KEY, created=1.0, duration=2.0, secret=secret,
                         compress=compress)


FRAME = _frame()
SIGNED = _frame(SECRET)


class _RefusedUnread:
    """What :func:`_read` gives when read_frame refused a source from its header alone."""


REFUSED = _RefusedUnread()


def _read(data: bytes, key: str = KEY, chunk: int = 4096) -> object:
    try:
        return _codec.read_frame(io.BytesIO(data).readinto, len(data), key, chunk=chunk)
    except IntegrityError:
        return REFUSED


def _rejected(frame: object, key: str = KEY, secret: bytes | None = None) -> bool:
    before = len(UNPICKLED)
    if frame is REFUSED:
        return True
    try:
        _codec.decode(frame, key, secret=secret)
    except IntegrityError:
        assert len(UNPICKLED) == before, "a damaged frame was unpickled before being rejected"
        return True
    return False


def test_a_frame_read_in_chunks_is_checked_and_decodes():
    """A whole frame read in chunks smaller than its buffers is checked for its key and decodes
    to writable arrays, each in memory of its own; its header reads as the stored one's."""
    for chunk in (64, 4096, 1 << 20):
        frame = _read(FRAME, chunk=chunk)
        assert isinstance(frame, _codec.ReadFrame) and frame.checked_for == KEY
        assert bytes(frame) == FRAME
        assert _codec.read_header(frame) == _codec.read_header(FRAME)
        value, header = _codec.decode(frame, KEY)
        assert np.array_equal(value["b"], np.arange(70_003, dtype=np.uint8))
        assert np.array_equal(value["a"], np.arange(9_001, dtype=np.float64))
        assert value["a"].flags.writeable and header.duration == 2.0
        assert not np.shares_memory(value["a"], value["b"])


@pytest.mark.parametrize("kind", ["plain", "signed", "small", "zstd"])
def test_every_frame_kind_reads_and_decodes(kind):
    """Frames with buffers (signed or not) come back checked, in pieces; frames without buffers
    and compressed frames come back whole and unchecked; all decode to the stored value."""
    if kind == "small":
        data = _codec.encode([1, "x"], KEY, created=1.0, duration=0.0)
    elif kind == "signed":
        data = SIGNED
    elif kind == "zstd":
        pytest.importorskip("zstandard")
        data = _frame(compress="zstd")
    else:
        data = FRAME
    frame = _read(data, chunk=100)
    checked = kind in ("plain", "signed")
    assert isinstance(frame, _codec.ReadFrame) == checked
    assert getattr(frame, "checked_for", None) == (KEY if checked else None)
    assert bytes(frame) == data
    assert not _rejected(frame, secret=SECRET if kind == "signed" else None)


def test_a_frame_checked_for_one_key_is_verified_again_under_another():
    """A frame read for key A is not trusted when decoded as key B (an entry moved elsewhere)."""
    frame = _read(FRAME)
    assert _rejected(frame, key="f" * 32)


def test_a_signed_frame_read_in_chunks_still_needs_the_right_secret():
    """Checking the checksum while reading does not skip the MAC: another secret is refused."""
    frame = _read(SIGNED)
    assert _rejected(frame, secret=b"other")


def test_a_source_that_runs_dry_is_no_frame():
    """If fewer bytes arrive than the file's size said (truncated meanwhile), nothing is returned."""
    short = io.BytesIO(FRAME[:-10])
    assert _codec.read_frame(short.readinto, len(FRAME), KEY, chunk=4096) is None


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_single_byte_change_is_rejected_before_unpickling(data):
    """Any byte changed anywhere (header to last buffer) fails the chunked check and is rejected
    unpickled, exactly as the full check of the same bytes."""
    signed = data.draw(st.booleans(), label="signed")
    original = SIGNED if signed else FRAME
    header = _codec.read_header(original)
    # Half the draws aim at the header and the start of the body, where fields are dense.
    offset = data.draw(st.one_of(st.integers(0, header.body_offset + 200),
                                 st.integers(0, len(original) - 1)), label="offset")
    flip = data.draw(st.integers(1, 255), label="xor")
    chunk = data.draw(st.sampled_from([64, 1000, 4096, 65536]), label="chunk")
    damaged = bytearray(original)
    damaged[offset] ^= flip
    secret = SECRET if signed else None
    frame = _read(bytes(damaged), chunk=chunk)
    assert frame is not None
    mac_at = 40 + 8 * len(header.buffer_lens) + 32  # fixed header, buffer table, two checksums
    if not (signed and mac_at <= offset < mac_at + 32):  # the MAC is decode's to check
        assert getattr(frame, "checked_for", None) is None
    assert _rejected(frame, secret=secret)
    assert _rejected(bytes(damaged), secret=secret), "the full check must agree"


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(FRAME) - 1), st.sampled_from([64, 4096]))
def test_every_truncation_is_rejected_before_unpickling(length, chunk):
    """A frame cut at any length fails the chunked check and is rejected unpickled."""
    frame = _read(FRAME[:length], chunk=chunk)
    assert getattr(frame, "checked_for", None) is None
    assert _rejected(frame)


def test_random_bytes_and_foreign_pickles_are_read_unchecked_and_rejected():
    """Bytes that are not a frame (a planted pickle, garbage) are never marked checked."""
    for data in (pickle.dumps(Tripwire()), os.urandom(100_000), b"FNC\x01" + bytes(60)):
        frame = _read(data)
        assert getattr(frame, "checked_for", None) is None
        assert _rejected(frame)


@pytest.mark.parametrize("threads", [1, 2])
def test_disk_store_reads_come_back_checked_and_damage_is_caught(tmp_path, monkeypatch, threads):
    """The disk store reads a large value file checked on the way in (on one thread, or from
    the two-thread size on two), a small one unchecked (the codec checks it); a byte flipped in
    either file on disk is rejected before unpickling."""
    from fncache import _preads

    fills = []
    fill = _preads.fill
    monkeypatch.setattr(_preads, "fill", lambda *a: fills.append(1) or fill(*a))
    if threads == 2:
        monkeypatch.setattr(_preads, "MIN_BYTES", 16 * 2**20)
    store = DiskStore(str(tmp_path / "s"))
    big = {"t": Tripwire(), "a": np.arange(5_000_000, dtype=np.float64)}  # 40 MB
    for key, value in (("a" * 32, big), ("b" * 32, _value())):
        store.set(key, _codec.encode_parts(value, key, created=1.0, duration=0.0), {})
        frame = store.get(key)
        assert isinstance(frame, _codec.ReadFrame) == (value is big)
        assert getattr(frame, "checked_for", key) == key
        assert not _rejected(frame, key=key)
    assert len(fills) == (threads == 2)
    for path in (tmp_path / "s").glob("*/*/*.val"):
        with open(path, "r+b") as f:
            f.seek(path.stat().st_size // 2)
            byte = f.read(1)[0]
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte ^ 0x40]))
    for key in ("a" * 32, "b" * 32):
        frame = store.get(key)
        assert getattr(frame, "checked_for", None) is None
        assert _rejected(frame, key=key)


def test_checked_reads_work_without_numpy(tmp_path):
    """Without numpy imported, a frame's buffers (one above 2 MiB, one small) are read into plain
    memory, checked, and decode to the stored bytes, writable."""
    code = '''if True:
        import io, pickle, sys
        from fncache import _codec
        big, small = bytearray(range(256)) * 12_000, bytearray(b"s" * 70_000)
        value = [pickle.PickleBuffer(big), pickle.PickleBuffer(small), "x"]
        data = _codec.encode(value, "k" * 32, created=1.0, duration=0.0)
        frame = _codec.read_frame(io.BytesIO(data).readinto, len(data), "k" * 32, chunk=65536)
        assert isinstance(frame, _codec.ReadFrame), type(frame)
        out, _ = _codec.decode(frame, "k" * 32)
        assert bytes(out[0]) == big and bytes(out[1]) == small and out[2] == "x"
        assert not memoryview(out[0]).readonly
        assert "numpy" not in sys.modules
        print("ok")
    '''
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(tmp_path), env={**os.environ})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_verify_agrees_with_decode_and_unpickles_nothing(data):
    """``verify`` (the check a tiered store makes before copying a frame) accepts exactly the frames
    ``decode`` accepts (any byte changed, any truncation, another key or secret), whole or read in
    chunks, without unpickling anything."""
    signed = data.draw(st.booleans(), label="signed")
    original = SIGNED if signed else FRAME
    frame = bytearray(original)
    change = data.draw(st.sampled_from(["none", "flip", "cut", "key", "secret"]), label="change")
    if change == "flip":
        frame[data.draw(st.integers(0, len(frame) - 1), label="offset")] ^= 0x5A
    elif change == "cut":
        frame = frame[: data.draw(st.integers(0, len(frame) - 1), label="length")]
    key = "f" * 32 if change == "key" else KEY
    secret = b"other" if change == "secret" else SECRET if signed else None
    for form in (bytes(frame), _read(bytes(frame))):
        before = len(UNPICKLED)
        verdict = form is not REFUSED and _codec.verify(key, form, secret=secret)
        assert len(UNPICKLED) == before, "verify unpickled a frame"
        assert verdict == (not _rejected(form, key=key, secret=secret))
        assert verdict == (change == "none")


def test_a_small_frame_decodes_in_one_step_and_every_byte_change_is_rejected():
    """The commonest frame (a small result: no buffers, unsigned, uncompressed), which decode parses
    and checks in one step: the same value and header as the general path, and any byte changed or
    cut off, or the wrong key, is rejected before unpickling."""
    value = {"t": Tripwire(), "n": 12, "s": "small"}
    small = _codec.encode(value, KEY, created=1.0, duration=2.0)
    general_value, general_header = _codec.decode(memoryview(small), KEY)
    fast_value, fast_header = _codec.decode(small, KEY)
    assert fast_header == general_header == _codec.read_header(small)
    assert fast_value.keys() == general_value.keys() and fast_value["s"] == "small"
    for offset in range(len(small)):
        for flip in (0x01, 0x80):
            damaged = bytearray(small)
            damaged[offset] ^= flip
            assert _rejected(bytes(damaged)), offset
    for length in range(len(small)):
        assert _rejected(small[:length]), length
    assert _rejected(small + bytes(64))
    assert _rejected(small, key="k" * 32)


# -- large buffers read on two threads (fncache._preads) ---------------------------------------

def _large_value() -> dict[str, object]:
    # 20 MiB and some in three buffers of uneven length: pieces of 4 MiB cross buffer ends, the
    # paddings between buffers are not empty, and the halves meet inside the second buffer.
    return {"t": Tripwire(), "a": np.arange(1_300_001, dtype=np.float64),
            "b": np.arange(7_000_003, dtype=np.uint8) * 7, "c": np.arange(700_001, dtype=np.int32)}


@pytest.fixture
def two_threads(monkeypatch):
    """The two-thread read from 16 MiB of buffers on (its default threshold is 128 MiB), so that
    these tests read 20 MiB rather than hundreds."""
    from fncache import _preads

    monkeypatch.setattr(_preads, "MIN_BYTES", 16 * 2**20)


def _read_file(path: str, size: int | None = None, key: str = KEY) -> object:
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size if size is None else size
        try:
            frame = _codec.read_frame(f.readinto, size, key, fd=f.fileno())
        except IntegrityError:
            return REFUSED
        assert frame is None or f.tell() == size, "the file position is not after the frame"
        return frame


def test_large_buffers_are_read_on_two_threads_and_checked(tmp_path, monkeypatch):
    """A frame whose buffers reach the two-thread size is read by the caller and a helper
    thread and still comes back checked for its key, byte for byte the stored frame, decoding to
    the stored arrays in memory of their own; below that size it is read on one thread."""
    from fncache import _preads

    data = _codec.encode(_large_value(), KEY, created=1.0, duration=2.0)
    path = tmp_path / "frame"
    path.write_bytes(data)
    calls = []
    fill = _preads.fill
    monkeypatch.setattr(_preads, "fill", lambda *a: calls.append(1) or fill(*a))
    assert bytes(_read_file(str(path))) == data and calls == []  # 20 MiB: one thread
    monkeypatch.setattr(_preads, "MIN_BYTES", 16 * 2**20)
    frame = _read_file(str(path))
    assert calls == [1]
    assert isinstance(frame, _codec.ReadFrame) and frame.checked_for == KEY
    assert bytes(frame) == data
    value, _ = _codec.decode(frame, KEY)
    expected = _large_value()
    for name in "abc":
        assert np.array_equal(value[name], expected[name]) and value[name].flags.writeable
    assert not np.shares_memory(value["a"], value["b"])


@pytest.mark.parametrize("where", [0.0, 0.3, 0.55, 0.8, 1.0])
def test_a_changed_byte_in_a_large_buffer_is_caught_by_the_two_thread_read(tmp_path, where,
                                                                          two_threads):
    """One changed byte anywhere in the buffers (the caller's half, the helper's, the last
    byte) makes the read frame unchecked, and decode rejects it before unpickling."""
    data = bytearray(_codec.encode(_large_value(), KEY, created=1.0, duration=2.0))
    h = _codec.read_header(bytes(data))
    start = h.body_offset + h.pickle_len + _codec._pad(h.pickle_len)
    at = min(len(data) - 1, start + int((len(data) - start) * where))
    data[at] ^= 0x01
    path = tmp_path / "frame"
    path.write_bytes(data)
    frame = _read_file(str(path))
    assert not isinstance(frame, _codec.ReadFrame)
    assert _rejected(frame)


def _read_threads() -> int:
    """The read's helper threads alive (other tests' stores may run checkpoint threads, which
    end when idle: counting all threads would count those)."""
    import threading

    return sum(1 for t in threading.enumerate() if t.name == "fncache-read")


def _files_open(path) -> int:
    """This process's file descriptors open on ``path``."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed meanwhile (the listing's own descriptor)
            pass
    return sum(1 for target in fds if target == str(path))


def test_a_large_file_shorter_than_its_size_reads_as_no_frame(tmp_path, two_threads):
    """A file truncated after its size was taken is no frame, whichever thread meets its end,
    and the helper thread is gone when the read returns."""
    data = _codec.encode(_large_value(), KEY, created=1.0, duration=2.0)
    for cut in (len(data) // 3, len(data) - 5 * 2**20, len(data) - 1):
        path = tmp_path / f"frame{cut}"
        path.write_bytes(data[:cut])
        assert _read_file(str(path), size=len(data)) is None
        assert _read_threads() == 0


def test_an_error_in_the_helper_thread_reaches_the_caller_and_leaks_nothing(tmp_path,
                                                                           monkeypatch,
                                                                           two_threads):
    """A read error in the helper thread (EIO) is raised to the caller, never taken for a whole
    frame; the helper is gone and its file descriptor closed when the read returns."""
    import errno
    import threading

    from fncache import _preads

    data = _codec.encode(_large_value(), KEY, created=1.0, duration=2.0)
    path = tmp_path / "frame"
    path.write_bytes(data)
    read_at = _preads._read_at

    def failing(fd, view, offset):
        if threading.current_thread().name == "fncache-read":
            raise OSError(errno.EIO, "input/output error")
        return read_at(fd, view, offset)

    monkeypatch.setattr(_preads, "_read_at", failing)
    fds = _files_open(path)
    with pytest.raises(OSError, match="input/output"):
        _read_file(str(path))
    assert _read_threads() == 0 and _files_open(path) == fds == 0


@pytest.mark.parametrize("value", [1, "x", None, b"y" * 100, list(range(2000)), {"a": (1.5, "b")},
                                   b"z" * (64 * 1024 - 40), b"z" * (64 * 1024 + 1)])
def test_a_small_result_is_framed_in_one_step_byte_for_byte_as_the_general_path(value, monkeypatch):
    """The one-step frame of a small result (no buffers, compression or secret) is the frame the
    general path writes, so entries and their checks are unchanged; both decode to the value."""
    key = "ab" * 16
    fast = b"".join(_codec.encode_parts(value, key, created=1.5, duration=0.25))
    monkeypatch.setattr(_codec, "_SMALL", -1)
    general = b"".join(_codec.encode_parts(value, key, created=1.5, duration=0.25))
    assert fast == general
    assert _codec.decode(fast, key)[0] == value
