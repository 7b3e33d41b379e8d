"""The content streams of Arrow arrays: an array's logical values digested whatever its buffers.

The stream layout (``<path>/n``, ``/v``, ``/d``, ``/e``, children) is described in
:mod:`fncache.values.arrow`, which keys types, schemas, tables and dictionary columns on top of
this module. Here: the bit streams, the per-layout walkers (fixed width, strings and binaries, views,
booleans, nested types, unknown types through their Python values) and the scratch blocks of the
native kernels in :mod:`fncache._speedups` (when built; the numpy twins give the same bytes).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import xxhash

speedups: Any
try:
    from fncache import _speedups as speedups
except ImportError:  # not built (no compiler at install): the numpy twins give the same bytes
    speedups = None

__all__ = ["Streams", "Valid", "null_entries", "numpy_module", "speedups", "walk"]

# Rows per block when null slots are zeroed in a scratch copy or offsets are checked: few
# enough to stay in cache, many enough that numpy's per-call cost does not show.
_BLOCK = 1 << 17
# Bytes per block when the native kernel zeroes null slots: the block is hashed while it is
# still in the core's own cache (measured: 512 KiB, as good as 1 MiB, better than 64-256 KiB).
_MASK_BYTES = 1 << 19

# Per thread, the native kernels' blocks, by use: a fresh 512 KiB block per column costs more
# than its work at this size (zero-filled, and its pages faulted in again on every call).
_scratch_blocks = threading.local()


def _take(use: str, nbytes: int) -> bytearray:
    """A block of at least ``nbytes`` for ``use`` (what it holds is garbage), this thread's
    own until :func:`_give_back`: a hash started meanwhile in this thread (from a finaliser,
    say) gets another."""
    blocks: dict[str, bytearray] | None = getattr(_scratch_blocks, "blocks", None)
    if blocks is None:
        blocks = _scratch_blocks.blocks = {}
    block = blocks.pop(use, None)
    return block if block is not None and len(block) >= nbytes else bytearray(nbytes)


def _give_back(use: str, block: bytearray) -> None:
    if len(block) <= 4 * _MASK_BYTES:  # (one huge value's block is not kept)
        _scratch_blocks.blocks[use] = block


def numpy_module() -> Any:
    return sys.modules["numpy"] if "numpy" in sys.modules else __import__("numpy")


# ---------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------


class _Bits:
    """A stream of bits, packed little-endian 8 to a byte whatever the chunk boundaries."""

    __slots__ = ("carry", "h", "n", "ones", "zeros")

    def __init__(self) -> None:
        self.h = xxhash.xxh3_128()
        self.carry: Any = None  # the last n % 8 bits, unpacked (uint8 0/1)
        self.n = 0
        self.ones = 0  # leading all-one bits not yet written (validity before the first null)
        self.zeros = 0  # zero bits seen (for validity: the null count)

    def add_ones(self, count: int, lazy: bool) -> None:
        if lazy and self.n == 0 and self.carry is None:
            self.ones += count
            return
        self._flush_ones()
        self.add_bools(numpy_module().ones(count, dtype=numpy_module().uint8))

    def _flush_ones(self) -> None:
        if self.ones:
            ones, self.ones = self.ones, 0
            self.add_bools(numpy_module().ones(ones, dtype=numpy_module().uint8))

    def add_bitmap(self, buf: Any, bit_offset: int, count: int, zeros: int) -> None:
        """``count`` bits of an Arrow bitmap from ``bit_offset``; ``zeros`` of them are 0."""
        np = numpy_module()
        self._flush_ones()
        self.zeros += zeros
        if not count:
            return
        start, shift = divmod(bit_offset, 8)
        nbytes = (shift + count + 7) // 8
        raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=start)
        if self.carry is None and shift == 0:
            full = count // 8
            self.h.update(raw[:full])
            self.n += full * 8
            rest = count - full * 8
            if rest:
                self.carry = np.unpackbits(raw[full:full + 1], bitorder="little")[:rest]
            return
        bits = np.unpackbits(raw, bitorder="little")[shift:shift + count]
        self._push(bits)

    def add_bools(self, bools: Any) -> None:
        """Bits given as a uint8 (or bool) array of 0/1."""
        np = numpy_module()
        self._flush_ones()
        self.zeros += int(bools.size - np.count_nonzero(bools))
        self._push(bools.view(np.uint8))

    def _push(self, bits: Any) -> None:
        np = numpy_module()
        if self.carry is not None:
            bits = np.concatenate([self.carry, bits])
            self.carry = None
        full = bits.size - bits.size % 8
        if full:
            self.h.update(np.packbits(bits[:full], bitorder="little"))
            self.n += full
        if bits.size > full:
            self.carry = np.ascontiguousarray(bits[full:])

    def result(self) -> tuple[int, bytes]:
        self._flush_ones()
        h = self.h.copy()
        n = self.n
        if self.carry is not None:
            h.update(numpy_module().packbits(self.carry, bitorder="little"))
            n += self.carry.size
        return n, h.digest()


class Streams:
    """Named digests fed in chunk order; the result does not depend on where chunks begin."""

    __slots__ = ("bits", "bytes_", "dictionaries", "ends")

    def __init__(self) -> None:
        self.bytes_: dict[str, list[Any]] = {}
        self.bits: dict[str, _Bits] = {}
        self.ends: dict[str, int] = {}  # offset streams: where the column so far ends
        self.dictionaries: dict[str, Any] = {}  # ordered dictionary columns: the last dictionary

    def update(self, name: str, data: Any) -> None:
        entry = self.bytes_.get(name)
        if entry is None:
            entry = self.bytes_[name] = [xxhash.xxh3_128(), 0]
        entry[0].update(data)
        entry[1] += memoryview(data).nbytes

    def count(self, name: str, n: int) -> None:
        entry = self.bytes_.get(name)
        if entry is None:
            entry = self.bytes_[name] = [None, 0]
        entry[1] += n

    def bitstream(self, name: str) -> _Bits:
        b = self.bits.get(name)
        if b is None:
            b = self.bits[name] = _Bits()
        return b

    def result(self) -> tuple[Any, ...]:
        out: list[Any] = []
        for name, (h, n) in self.bytes_.items():
            out.append((name, n, h.digest() if h is not None else b""))
        for name, b in self.bits.items():
            if name.endswith("/v"):
                if not b.zeros:
                    continue  # no nulls: a column with an all-valid bitmap is one without
            out.append((name, *b.result()))
        return tuple(sorted(out))


# ---------------------------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------------------------


def _normalise(pa: Any, arr: Any, dictionary: Callable[[Any], None]) -> Any:
    """The array in a layout with the same logical values that this module knows how to walk;
    ``dictionary`` is given each array of a dictionary type met on the way, before it is decoded
    (also one inside an extension type's storage or a run-end encoding's values)."""
    while True:
        t = arr.type
        if isinstance(t, pa.BaseExtensionType):
            arr = arr.storage
        elif isinstance(t, pa.DictionaryType):
            dictionary(arr)
            arr = arr.dictionary_decode()
        elif isinstance(t, pa.RunEndEncodedType):
            import pyarrow.compute as pc

            arr = pc.run_end_decode(arr)
        else:
            cast = _without_views(pa, t, arr)
            if cast is None:
                return arr
            arr = cast


def _without_views(pa: Any, t: Any, arr: Any) -> Any:
    """A view-layout array cast to the plain layout of its values (string and binary views only
    without the speedups kernel, which walks them); None for any other array."""
    if t == pa.string_view() and speedups is None:
        return arr.cast(pa.large_string())
    if t == pa.binary_view() and speedups is None:
        return arr.cast(pa.large_binary())
    if isinstance(t, pa.LargeListViewType):
        return arr.cast(pa.large_list(t.value_field))
    if isinstance(t, pa.ListViewType):
        return arr.cast(pa.list_(t.value_field))
    return None


def _unpack(np: Any, buf: Any, off: int, n: int) -> Any:
    """``n`` bits of an Arrow bitmap from bit ``off``, as a uint8 0/1 array."""
    start, shift = divmod(off, 8)
    raw = np.frombuffer(buf, dtype=np.uint8, count=(shift + n + 7) // 8, offset=start)
    bits = np.unpackbits(raw, bitorder="little", count=shift + n)
    return bits[shift:] if shift else bits


class Valid:
    """The validity bitmap of an array with nulls, unpacked one block at a time (a whole
    column unpacked is a byte per slot: more memory traffic than the block's work)."""

    __slots__ = ("buf", "n", "off")

    def __init__(self, buf: Any, off: int, n: int) -> None:
        self.buf, self.off, self.n = buf, off, n

    def block(self, np: Any, i: int, k: int) -> Any:
        """Slots ``i`` to ``i + k`` as a uint8 0/1 array."""
        return _unpack(np, self.buf, self.off + i, k)

    def packed(self, np: Any, i: int, k: int) -> Any:
        """Slots ``i`` to ``i + k`` as bits packed from bit 0 (the bits past slot ``i + k - 1``
        in the last byte are undefined)."""
        start, shift = divmod(self.off + i, 8)
        if shift:
            return np.packbits(self.block(np, i, k), bitorder="little")
        return np.frombuffer(self.buf, dtype=np.uint8, count=(k + 7) // 8, offset=start)

    def full(self, np: Any, i: int, k: int) -> bool:
        """Whether slots ``i`` to ``i + k`` are all valid (a look at the bitmap's bytes)."""
        start, shift = divmod(self.off + i, 8)
        if shift or k % 8:  # a partial byte: its other bits are another block's or undefined
            return bool(np.count_nonzero(self.block(np, i, k)) == k)
        return bool(np.frombuffer(self.buf, np.uint8, count=k // 8, offset=start).min() == 255)

    def all(self, np: Any) -> Any:
        return _unpack(np, self.buf, self.off, self.n)


def _fixed(s: Streams, name: str, np: Any, arr: Any, width: int, valid: Valid | None) -> None:
    n, off = len(arr), arr.offset
    data = arr.buffers()[1]
    if valid is None:
        s.update(name, memoryview(data)[off * width:(off + n) * width])
        return
    # Null slots hold undefined bytes: hash a copy with them zeroed, one block at a time (in
    # cache).
    if speedups is not None:
        raw = memoryview(data)[off * width:(off + n) * width]
        rows = max(1, _MASK_BYTES // width)
        scratch = _take("mask", min(n, rows) * width)
        for i in range(0, n, rows):
            k = min(rows, n - i)
            speedups.mask_into(raw[i * width:(i + k) * width], valid.buf, valid.off + i, width,
                                scratch)
            s.update(name, memoryview(scratch)[:k * width])
        _give_back("mask", scratch)
        return
    # The numpy twin: the block times its validity, unpacked per block only. Nulls often come
    # in runs: a block without any is hashed where it lies (a look at the bitmap costs less
    # than the multiplication it saves).
    # The widest unsigned integer that divides the width holds the values.
    unit = next(u for u in (8, 4, 2, 1) if width % u == 0)
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[unit]
    values = np.frombuffer(data, dtype=uint, count=n * (width // unit), offset=off * width)
    if width != unit:
        values = values.reshape(n, width // unit)
    scratch = np.empty((min(n, _BLOCK),) + values.shape[1:], dtype=uint)
    for i in range(0, n, _BLOCK):
        block = values[i:i + _BLOCK]
        k = len(block)
        if valid.full(np, i, k):
            s.update(name, block)
            continue
        keep = valid.block(np, i, k)
        out = scratch[:k]
        np.multiply(block, keep if width == unit else keep[:, None], out=out, casting="unsafe")
        s.update(name, out)


def _offsets(np: Any, arr: Any) -> Any:
    """The ``len(arr) + 1`` offsets of a string, binary or list array, where they lie, unsigned."""
    dtype = np.dtype(np.uint64 if arr.type.id in _LARGE_IDS else np.uint32)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr) + 1,
                         offset=arr.offset * dtype.itemsize)


def _nulls_empty(np: Any, lo: Any, hi: Any, valid_bits: Any, scratch: Any) -> bool:
    """Whether every null slot ends where it begins (``lo``, ``hi``: where slots begin and end;
    ``valid_bits``: their validity, packed). Compared as packed bits: a bool per slot is more
    memory traffic. (Packing fills the last byte with 0 bits, so the bitmap's undefined bits
    past its end meet 0.)
    """
    nonempty = np.packbits(np.not_equal(hi, lo, out=scratch), bitorder="little")
    return not np.bitwise_and(nonempty, np.invert(valid_bits), out=nonempty).any()


def _block_nulls_empty(np: Any, offsets: Any, i: int, k: int, valid: Valid,
                       scratch: Any) -> bool:
    """Whether every null slot from ``i`` to ``i + k`` is empty (``offsets``: the column's)."""
    if speedups is not None:
        try:
            return bool(speedups.nulls_empty(offsets[i:i + k + 1], valid.buf, valid.off + i,
                                              offsets.itemsize))
        except ValueError:  # not aligned (a buffer from outside Arrow), or not what it says:
            pass            # numpy reads it, or raises as it would have without the kernel
    return valid.full(np, i, k) or _nulls_empty(np, offsets[i:i + k], offsets[i + 1:i + 1 + k],
                                                valid.packed(np, i, k), scratch[:k])


def _ends(s: Streams, name: str, np: Any, arr: Any, valid: Valid | None) -> bool:
    """Feed where each slot of a string, binary or list array ends to ``name``: the offsets of
    the column as if its first slot began at 0 and its null slots were empty.

    The offsets of the column so far carry over from chunk to chunk, so chunk boundaries do not
    show. They are kept modulo 2**32 (2**64 for large types), which still tells every slot's
    length apart: one slot holds less than 2**31 (2**63) items. Builders, IPC and Parquet leave
    null slots empty, and a chunk usually starts at offset 0: then each block of offsets is
    hashed where it lies, once a look at it shows no null slot with a range. In a block with
    one, lengths are taken, those of null slots zeroed, and summed up again: the result is the
    same. Returns whether all null slots were empty (if not, the values under them must not be
    read either).
    """
    n = len(arr)
    offsets = _offsets(np, arr)
    dtype = offsets.dtype.type
    wrap = (1 << (8 * offsets.itemsize)) - 1
    base = s.ends.get(name, 0)
    shift = dtype((int(offsets[0]) - base) & wrap)
    clean = True
    scratch = np.empty(min(n, _BLOCK), dtype=dtype)
    nonempty = np.empty(min(n, _BLOCK), dtype=np.bool_)
    for i in range(0, n, _BLOCK):
        k = min(_BLOCK, n - i)
        lo, hi, out = offsets[i:i + k], offsets[i + 1:i + 1 + k], scratch[:k]
        if valid is not None and not _block_nulls_empty(np, offsets, i, k, valid, nonempty):
            clean = False
            np.subtract(hi, lo, out=out)
            np.multiply(out, valid.block(np, i, k), out=out, casting="unsafe")
            out[0] = (int(out[0]) + int(lo[0]) - int(shift)) & wrap  # where the block begins
            np.cumsum(out, dtype=dtype, out=out)
            shift = dtype((int(hi[-1]) - int(out[-1])) & wrap)
            s.update(name, out)
            continue
        if shift:
            hi = np.subtract(hi, shift, out=out)  # wraps around, like the sums above
        s.update(name, hi)
    s.ends[name] = (int(offsets[-1]) - int(shift)) & wrap
    return clean


_LARGE_IDS: set[int] = set()


def _binary(s: Streams, path: str, pa: Any, np: Any, arr: Any, valid: Valid | None) -> None:
    """A string or binary array: where its slots end, then the bytes of its values (never of
    null slots)."""
    t = arr.type
    if not _ends(s, path + "/e", np, arr, valid):
        # A null slot with a non-empty range (allowed): its bytes are not content. The
        # filled array has the same values with null slots empty: only its bytes are read.
        empty = "" if pa.types.is_string(t) or pa.types.is_large_string(t) else b""
        arr = arr.fill_null(pa.scalar(empty, t))
    offsets = _offsets(np, arr)
    first, last = int(offsets[0]), int(offsets[-1])
    s.update(path + "/d", memoryview(arr.buffers()[2] or b"")[first:last])


def _views(s: Streams, path: str, arr: Any, nulls: int) -> None:
    """A string or binary view array, read by the native kernel as the large string or binary
    array it stands for: the same streams as :func:`_binary` gives that array (which is how it
    is keyed without the kernel, after a cast that copies every value), so keys do not depend on
    which values are inline, which buffers hold the others, or the kernel."""
    n, off = len(arr), arr.offset
    buffers = arr.buffers()
    views = memoryview(buffers[1])[off * 16:(off + n) * 16]
    data_buffers = [b if b is not None else b"" for b in buffers[2:]]
    bitmap = buffers[0] if nulls else None
    ends_name, data_name = path + "/e", path + "/d"
    end = s.ends.get(ends_name, 0)
    ends = _take("ends", 8 * min(n, max(1, _MASK_BYTES // 16)))
    data = _take("data", _MASK_BYTES)
    i = 0
    while i < n:
        stop, size, end = speedups.views_into(views, data_buffers, bitmap, off, i, end, ends,
                                               data)
        if stop == i:  # one value larger than the block: a block of its size
            if size <= len(data):
                raise AssertionError("views_into made no progress")  # (cannot happen)
            data = bytearray(size)
            continue
        s.update(ends_name, memoryview(ends)[:8 * (stop - i)])
        s.update(data_name, memoryview(data)[:size])
        i = stop
    s.ends[ends_name] = end
    _give_back("ends", ends)
    _give_back("data", data)


def _bools(s: Streams, path: str, np: Any, arr: Any, valid: Valid | None) -> None:
    """A boolean array: its value bits, null slots read as 0."""
    n = len(arr)
    bits = s.bitstream(path + "/d")
    if valid is None:
        bits.add_bitmap(arr.buffers()[1], arr.offset, n, 0)
    elif arr.offset % 8 == 0:
        # Value bits AND validity bits, a byte at a time: null slots read as 0.
        start, nbytes = arr.offset // 8, (n + 7) // 8
        data, bitmap = arr.buffers()[1], arr.buffers()[0]
        anded = np.bitwise_and(np.frombuffer(data, np.uint8, count=nbytes, offset=start),
                               np.frombuffer(bitmap, np.uint8, count=nbytes, offset=start))
        bits.add_bitmap(anded, 0, n, 0)
    else:
        bits.add_bools(_unpack(np, arr.buffers()[1], arr.offset, n) & valid.all(np))


def _validity(s: Streams, path: str, np: Any, arr: Any, nulls: int) -> Valid | None:
    """Hash which slots are null; the validity to read (None when nothing is null)."""
    n = len(arr)
    vstream = s.bitstream(path + "/v")
    if not nulls:
        vstream.add_ones(n, lazy=True)
        return None
    bitmap = arr.buffers()[0]
    vstream.add_bitmap(bitmap, arr.offset, n, nulls)
    return Valid(bitmap, arr.offset, n)


def _nested(s: Streams, path: str, pa: Any, np: Any, arr: Any, nulls: int,
            valid: Valid | None) -> None:
    """A struct, list or map array: list lengths, then the children's content."""
    t = arr.type
    if isinstance(t, pa.StructType):
        for i, child in enumerate(arr.flatten()):  # parent nulls merged into the children
            walk(s, f"{path}/{i}", child)
        return
    if not isinstance(t, pa.FixedSizeListType):
        _ends(s, path + "/e", np, arr, valid)
    if isinstance(t, pa.MapType):
        entries = pa.struct([t.key_field, t.item_field])
        arr = arr.view(pa.list_(pa.field("entries", entries, nullable=False)))
    walk(s, path + "/0", (arr.drop_null() if nulls else arr).flatten())


def walk(s: Streams, path: str, arr: Any) -> None:
    pa = sys.modules["pyarrow"]
    np = numpy_module()
    if not _LARGE_IDS:
        _LARGE_IDS.update({pa.large_string().id, pa.large_binary().id,
                           pa.large_list(pa.int8()).id})
    arr = _normalise(pa, arr, lambda dictionary_array: _dictionary(s, path, np, dictionary_array))
    t = arr.type
    n = len(arr)
    s.count(path + "/n", n)
    if t == pa.null() or n == 0:
        return
    nulls = arr.null_count
    valid = _validity(s, path, np, arr, nulls)
    if isinstance(t, (pa.StructType, pa.FixedSizeListType, pa.ListType, pa.LargeListType, pa.MapType)):
        _nested(s, path, pa, np, arr, nulls, valid)
        return
    if _is_binary(pa, t):
        _binary(s, path, pa, np, arr, valid)
        return
    if t == pa.string_view() or t == pa.binary_view():  # (cast by _normalise without the kernel)
        _views(s, path, arr, nulls)
        return
    if t == pa.bool_():
        _bools(s, path, np, arr, valid)
        return
    width = _byte_width(t)
    if width:
        _fixed(s, path + "/d", np, arr, width, valid)
        return
    _other(s, path, pa, np, arr)


def _other(s: Streams, path: str, pa: Any, np: Any, arr: Any) -> None:
    if isinstance(arr.type, pa.UnionType):
        _union(s, path, pa, np, arr)
    else:
        _python_values(s, path, pa, np, arr)


def _union(s: Streams, path: str, pa: Any, np: Any, arr: Any) -> None:
    """A union array: which child each slot takes (1 as int8 and 1 as int64 are different values),
    then, per child, the values of the slots that take it, in order, walked as any array: read
    through Python values, a ``time64[ns]``, a ``date64`` below a day or a float32 NaN's payload
    lost what told them apart. A dense union's child values no slot points to do not count, nor
    do a sparse union's slots of the children a slot does not take."""
    n, off = len(arr), arr.offset
    # (``UnionArray.type_codes`` and ``offsets`` ignore a slice's offset: read the buffers.)
    codes = np.frombuffer(arr.buffers()[1], np.int8, count=n, offset=off)
    s.update(path + "/t", codes)
    # A dense union's slots point into its children; a sparse union's field() is sliced with it.
    where = np.frombuffer(arr.buffers()[2], np.int32, count=n, offset=off * 4) \
        if arr.type.mode == "dense" else np.arange(n)
    for i, code in enumerate(arr.type.type_codes):
        rows = np.flatnonzero(codes == code)
        if rows.size:
            walk(s, f"{path}/u{i}", arr.field(i).take(pa.array(where[rows])))


def _dictionary(s: Streams, path: str, np: Any, arr: Any) -> None:
    """A chunk of a dictionary type, before it is decoded: what decoding drops."""
    null_entries(s, path, np, arr)
    if arr.type.ordered:
        _ordered(s, path, np, arr)


def null_entries(s: Streams, path: str, np: Any, arr: Any) -> None:
    """Feed ``<path>/z`` the rows (counted from the column's first) of a dictionary chunk whose
    index is valid and whose dictionary entry is null. Both decode to null, but Arrow tells them
    apart: such a slot is not null to ``null_count``, ``is_null``, ``fill_null`` or
    ``drop_null``. No stream when there is none (the key of a column without one is as before)."""
    d = arr.dictionary
    if not d.null_count or arr.null_count == len(arr):
        return
    pa = sys.modules["pyarrow"]
    indices = arr.indices
    try:
        entries = d.take(indices)  # (a null index takes null)
    except (pa.ArrowIndexError, IndexError):
        return  # an index out of range: decoding reports it
    rows = np.flatnonzero(np.asarray(indices.is_valid()) & np.asarray(entries.is_null()))
    if rows.size:
        before = s.bytes_.get(path + "/n", (None, 0))[1]  # the rows of the chunks before
        s.update(path + "/z", (rows + before).astype("<u8"))


def _ordered(s: Streams, path: str, np: Any, arr: Any) -> None:
    """A chunk of an ordered dictionary type: its dictionary's order is the order the values
    compare and sort in, so the dictionary is keyed whole, in order, with the row it takes effect
    from, where it differs from the previous chunk's (chunk boundaries do not show otherwise)."""
    if not len(arr):
        return
    last = s.dictionaries.get(path)
    dictionary = arr.dictionary
    if last is not None and (last is dictionary or last.equals(dictionary)):
        return
    s.dictionaries[path] = dictionary
    before = s.bytes_.get(path + "/n", (None, 0))[1]  # the rows of the chunks before this one
    s.update(path + "/o/k", np.array([before, len(dictionary)], dtype=np.uint64))
    walk(s, path + "/o", dictionary)


def _is_binary(pa: Any, t: Any) -> bool:
    """Whether ``t`` is a string or binary type with offsets (not a view)."""
    return bool(pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)
                or pa.types.is_large_binary(t))


def _byte_width(t: Any) -> int:
    """The bytes per value of a fixed-width type of whole bytes; 0 for any other type."""
    try:
        width = t.bit_width
    except ValueError:
        return 0
    return width // 8 if width and width % 8 == 0 else 0


def _python_values(s: Streams, path: str, pa: Any, np: Any, arr: Any) -> None:
    """Anything unknown: element by element, through their Python values."""
    from fncache.values.registry import value_digest as digest

    for value in arr.to_pylist():
        s.update(path + "/py", digest(value))
