"""The native kernel that zeroes null slots (``fncache._speedups.mask_into``): the same bytes as
its numpy definition for every width, bit offset, length and alignment; bad arguments are refused
before anything is written; and keys of nullable Arrow data are the same with it or without it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fncache
from fncache import _values_arrow

from .helpers import require_native

pa = pytest.importorskip("pyarrow")


@pytest.fixture(autouse=True, scope="module")
def native():  # type: ignore[no-untyped-def]
    require_native()
    return _values_arrow._speedups


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
    monkeypatch.setattr(_values_arrow, "_speedups", None)
    assert [fncache.hash(v) for v in values] == with_kernel
