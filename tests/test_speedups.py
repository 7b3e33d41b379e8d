"""The native kernel that zeroes null slots (``fncache._speedups.mask_into``): the same bytes as
its numpy definition for every width, bit offset, length and alignment; bad arguments are refused
before anything is written; and keys of nullable Arrow data are the same with it or without it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fncache
from fncache.values import arrow_streams as _values_arrow

from .helpers import require_native

pa = pytest.importorskip("pyarrow")


@pytest.fixture(autouse=True, scope="module")
def native():  # type: ignore[no-untyped-def]
    require_native()
    return _values_arrow.speedups


def _reference(values: bytes, bitmap: bytes, bit: int, width: int) -> bytes:
    """Rows of ``width`` bytes, those whose validity bit is 0 zeroed (the definition)."""
    n = len(values) // width
    rows = np.frombuffer(values, np.uint8).reshape(n, width).copy()
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")[bit:bit + n]
    rows[bits == 0] = 0
    return rows.tobytes()


@settings(max_examples=400, deadline=None)
@given(width=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 32]), n=st.integers(0, 90),
       bit=st.integers(0, 23), shift=st.integers(0, 7), seed=st.integers(0, 2**32 - 1))
def test_mask_into_matches_its_definition(native, width, n, bit, shift, seed):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    # ``shift`` bytes in front make the values and the output unaligned for wide units.
    values = memoryview(rng.integers(0, 256, shift + n * width, dtype=np.uint8).tobytes())[shift:]
    bitmap = rng.integers(0, 256, (bit + n + 7) // 8, dtype=np.uint8).tobytes()
    out = bytearray(shift + n * width + 5)
    out[-5:] = b"guard"
    native.mask_into(values, bitmap, bit, width, memoryview(out)[shift:])
    assert bytes(out[shift:shift + n * width]) == _reference(bytes(values), bitmap, bit, width)
    assert out[-5:] == b"guard"  # nothing written past the values' length


@pytest.mark.parametrize(("args", "message"), [
    ((b"\x01" * 16, b"\xff" * 2, 0, 0), "width 0"),
    ((b"\x01" * 16, b"\xff" * 2, 0, 3), "width 3 does not divide 16"),
    ((b"\x01" * 16, b"\xff", 2, 1), "bitmap of 1 bytes is too short for 16 slots from bit 2"),
    ((b"\x01" * 16, b"\xff" * 2, -1, 1), "bit_offset must be >= 0"),
    ((b"\x01" * 16, b"\xff" * 2, 2**63 - 9, 1), "too short"),  # bit + n would overflow
])
def test_bad_arguments_are_refused_before_anything_is_written(native, args, message):  # type: ignore[no-untyped-def]
    out = bytearray(b"u" * 16)
    with pytest.raises(ValueError, match=message):
        native.mask_into(*args, out)
    assert out == b"u" * 16


def test_an_output_too_small_is_refused(native):  # type: ignore[no-untyped-def]
    out = bytearray(15)
    with pytest.raises(ValueError, match="out holds 15 bytes, 16 needed"):
        native.mask_into(b"\x01" * 16, b"\xff" * 2, 0, 1, out)
    with pytest.raises(TypeError):
        native.mask_into(b"\x01" * 16, b"\xff" * 2, 0, 1, b"\x00" * 16)  # read-only output
    assert out == bytes(15)


@pytest.mark.parametrize("type_", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float64(),
                                   pa.timestamp("ns", "UTC"), pa.decimal128(20, 3),
                                   pa.binary(3), pa.float16()], ids=str)
def test_keys_are_the_same_with_the_kernel_and_without(native, monkeypatch, type_):  # type: ignore[no-untyped-def]
    """The known-keys table pins keys with the kernel (CI builds it); this pins the numpy path,
    which a package installed without a compiler uses, to the same keys, across blocks, bit
    offsets and chunks."""
    rng = np.random.default_rng(7)
    n = 3000
    width = type_.bit_width // 8
    data = pa.py_buffer(rng.integers(0, 256, n * width, dtype=np.uint8).tobytes())
    valid = rng.random(n) > 0.2
    arr = pa.Array.from_buffers(type_, n, [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                           data])
    values = [arr, arr.slice(5, 2001), pa.chunked_array([arr.slice(0, 13), arr.slice(13)]),
              pa.table({"c": arr.slice(3)})]
    monkeypatch.setattr(_values_arrow, "_MASK_BYTES", 256)
    with_kernel = [fncache.hash(v) for v in values]
    monkeypatch.setattr(_values_arrow, "speedups", None)
    assert [fncache.hash(v) for v in values] == with_kernel


def _views(*specs: tuple[int, bytes, int, int]) -> bytes:
    """Views of (length, inline bytes or prefix, buffer index, offset)."""
    out = b""
    for length, head, index, offset in specs:
        if length <= 12:
            out += length.to_bytes(4, "little", signed=True) + head.ljust(12, b"\0")
        else:
            out += (length.to_bytes(4, "little", signed=True) + head[:4].ljust(4, b"\0")
                    + index.to_bytes(4, "little", signed=True)
                    + offset.to_bytes(4, "little", signed=True))
    return out


def test_views_into_reads_values_and_ends_in_blocks(native):  # type: ignore[no-untyped-def]
    """Values inline and in buffers, a null slot (its view junk), blocks smaller than a value."""
    buffer = b"..0123456789abcdefXYZ"
    views = _views((3, b"abc", 0, 0), (16, b"0123", 0, 2), (7, b"\xff" * 12, 0, 0), (0, b"", 0, 0),
                   (13, b"6789", 0, 8))
    bitmap = bytes([0b11011])  # slot 2 is null
    got, ends, end, i = b"", [], 5, 0
    data, ends_out = bytearray(4), bytearray(16)
    while i < 5:
        stop, size, end = native.views_into(views, [buffer], bitmap, 0, i, end, ends_out, data)
        if stop == i:
            assert size > len(data)
            data = bytearray(size)
            continue
        got += bytes(data[:size])
        ends += np.frombuffer(bytes(ends_out[:8 * (stop - i)]), np.uint64).tolist()
        i = stop
    assert got == b"abc" + b"0123456789abcdef" + b"" + b"6789abcdefXYZ"
    assert ends == [8, 24, 24, 24, 37] and end == 37


@pytest.mark.parametrize("view", [(20, b"x", 0, 10), (20, b"x", 1, 0), (20, b"x", -1, 0),
                                  (20, b"x", 0, -4), (-1, b"", 0, 0)],
                         ids=["past the end", "no such buffer", "negative index",
                              "negative offset", "negative length"])
def test_a_view_outside_its_buffers_is_refused(native, view):  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="slot 1 points outside its buffers"):
        native.views_into(_views((1, b"a", 0, 0), view), [b"y" * 25], None, 0, 0, 0,
                          bytearray(16), bytearray(64))


def test_a_malformed_view_array_is_keyed_without_reading_outside_it(caplog):  # type: ignore[no-untyped-def]
    """Arrow does not check views it is handed: the kernel refuses to follow one that points
    outside its buffers, and the array is keyed through its pickle (its buffers as they are)."""
    good = pa.array(["x" * 20], pa.string_view())
    views = bytearray(good.buffers()[1])
    views[12:16] = (10**6).to_bytes(4, "little")
    bad = pa.Array.from_buffers(pa.string_view(), 1, [None, pa.py_buffer(bytes(views)),
                                                      *good.buffers()[2:]])
    with caplog.at_level("DEBUG", logger="fncache"):
        assert fncache.hash(bad) != fncache.hash(good)
    fallbacks = [r.getMessage() for r in caplog.records if "through its pickle" in r.getMessage()]
    assert len(fallbacks) == 1 and "slot 0 points outside its buffers" in fallbacks[0]


def test_polars_strings_key_the_same_with_the_kernel_and_without(monkeypatch):  # type: ignore[no-untyped-def]
    """With the kernel, polars strings are exported as views and read in place; without it, as
    plain strings: one key either way, also in a DataFrame with nulls and long values."""
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(5)
    words = ["", "a", "twelve bytes", "thirteen byte", "x" * 100, None]
    s = pl.Series("s", [words[i] for i in rng.integers(0, len(words), 5000)])
    b = pl.Series("b", [None if w is None else w.encode() for w in s.to_list()], pl.Binary)
    values = [s, b, pl.DataFrame([s, b]), s.slice(7, 3000)]
    monkeypatch.setattr(_values_arrow, "_MASK_BYTES", 256)
    with_kernel = [fncache.hash(v) for v in values]
    monkeypatch.setattr(_values_arrow, "speedups", None)
    assert [fncache.hash(v) for v in values] == with_kernel


def test_threads_hashing_at_once_get_the_keys_of_one_thread():
    """The kernels run without the GIL and each thread has blocks of its own: threads hashing
    different nullable columns and views at the same time get the keys a single thread gets."""
    import threading

    rng = np.random.default_rng(11)
    n = 300_000
    values = [pa.array(rng.integers(0, 9, n), mask=rng.random(n) < 0.3),
              pa.array(rng.random(n), mask=rng.random(n) < 0.01),
              pa.array(["v" * int(k) for k in rng.integers(0, 30, n)], pa.string_view()),
              pa.array(rng.integers(0, 9, n).astype(np.int16), mask=rng.random(n) < 0.5)]
    expected = [fncache.hash(v) for v in values]
    got: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def work(t: int) -> None:
        start.wait()
        for r in range(6):
            v = (t + r) % len(values)
            got[t].append((v, fncache.hash(values[v])))  # type: ignore[arg-type]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(len(g) == 6 for g in got)
    assert all(key == expected[v] for g in got for v, key in g)  # type: ignore[misc]


@settings(max_examples=300, deadline=None)
@given(itemsize=st.sampled_from([4, 8]), n=st.integers(0, 70), bit=st.integers(0, 19),
       seed=st.integers(0, 2**32 - 1), nonempty_null=st.booleans())
def test_nulls_empty_matches_its_definition(native, itemsize, n, bit, seed, nonempty_null):  # type: ignore[no-untyped-def]
    """True exactly when no null slot has a range of its own, wherever that slot is (among 8 or
    in the tail), for 32- and 64-bit offsets read from any bit offset."""
    rng = np.random.default_rng(seed)
    valid = rng.random(n) < 0.7
    lengths = rng.integers(0, 3, n) * valid  # null slots empty...
    if nonempty_null and (~valid).any():
        lengths[rng.choice(np.flatnonzero(~valid))] = rng.integers(1, 2**20)  # ...but one
    offsets = np.concatenate([[rng.integers(0, 2**31)], lengths]).cumsum()
    offsets = offsets.astype(np.uint32 if itemsize == 4 else np.uint64)
    bits = np.concatenate([rng.random(bit) < 0.5, valid, rng.random(7) < 0.5])
    bitmap = np.packbits(bits, bitorder="little").tobytes()
    expected = not (lengths[~valid] != 0).any()
    assert native.nulls_empty(offsets, bitmap, bit, itemsize) is expected


def test_nulls_empty_refuses_what_it_cannot_read(native):  # type: ignore[no-untyped-def]
    offsets = np.zeros(17, np.uint32)
    with pytest.raises(ValueError, match="not aligned"):
        native.nulls_empty(memoryview(offsets.view(np.uint8))[1:33], b"\0" * 2, 0, 4)
    with pytest.raises(ValueError, match="too short for 16 slots"):
        native.nulls_empty(offsets, b"\0", 0, 4)
    with pytest.raises(ValueError, match="not offsets of 3 bytes"):
        native.nulls_empty(offsets, b"\0" * 2, 0, 3)


def test_offsets_from_outside_arrow_that_are_not_aligned_still_key(monkeypatch):  # type: ignore[no-untyped-def]
    """A string array over an unaligned buffer is checked by the numpy code: the same key."""
    values = ["a", None, "ccc", "", None, "dd"] * 40
    plain = pa.array(values)
    raw = bytearray(1) + bytes(plain.buffers()[1])
    moved = pa.Array.from_buffers(pa.string(), len(values), [
        plain.buffers()[0], pa.py_buffer(raw).slice(1), plain.buffers()[2]])
    assert moved.to_pylist() == values
    assert fncache.hash(moved) == fncache.hash(plain)


def test_the_portable_kernels_agree_with_the_built_ones(native, tmp_path):  # type: ignore[no-untyped-def]
    """Where SSE2 is missing (ARM, say), ``nulls_empty`` is a portable loop: built here without
    SSE2's macro, it agrees with the built kernels and the definition on random offsets."""
    import glob
    import importlib.util
    import shutil
    import subprocess
    import sysconfig

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        if os.environ.get("FNCACHE_REQUIRE_NATIVE") == "1":
            pytest.fail("no C compiler to build the portable kernels, and FNCACHE_REQUIRE_NATIVE=1")
        pytest.skip("no C compiler to build the portable kernels")
    source = Path(__file__).resolve().parent.parent / "fncache" / "_speedups.c"
    target = tmp_path / ("_speedups" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([cc, "-O2", "-fPIC", "-shared", "-U__SSE2__",
                    "-I" + sysconfig.get_paths()["include"], str(source), "-o", str(target)],
                   check=True)
    spec = importlib.util.spec_from_file_location("fncache._speedups", glob.glob(str(target))[0])
    assert spec is not None and spec.loader is not None
    portable = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(portable)
    assert portable is not native
    for seed in range(2000):
        rng = np.random.default_rng(seed)
        n, bit, itemsize = int(rng.integers(0, 70)), int(rng.integers(0, 19)), (4, 8)[seed % 2]
        valid = rng.random(n) < 0.7
        lengths = rng.integers(0, 3, n) * valid
        if seed % 3 == 0 and (~valid).any():
            lengths[rng.choice(np.flatnonzero(~valid))] = 5
        offsets = np.concatenate([[7], lengths]).cumsum()
        offsets = offsets.astype(np.uint32 if itemsize == 4 else np.uint64)
        bits = np.concatenate([rng.random(bit) < 0.5, valid, rng.random(7) < 0.5])
        bitmap = np.packbits(bits, bitorder="little").tobytes()
        expected = not (lengths[~valid] != 0).any()
        assert portable.nulls_empty(offsets, bitmap, bit, itemsize) is expected, seed
        assert native.nulls_empty(offsets, bitmap, bit, itemsize) is expected, seed
