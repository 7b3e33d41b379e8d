"""Canonical keys for Arrow data: the logical values, never the buffers they happen to live in.

Two Arrow arrays with equal type and equal values can differ byte for byte in many ways: a slice
keeps its parent's buffers plus an offset (booleans and validity bits at any *bit* offset), strings
and lists carry offsets that need not start at 0, a column without nulls may or may not have a
validity bitmap, the bytes under a null slot (and the bits past a bitmap's end) are undefined,
string views point into shared buffers with undefined padding, dictionaries may differ between
chunks, and chunk boundaries are arbitrary. So an array is keyed as a set of *streams*, each one
xxh3-128 digest fed chunk by chunk (so chunk boundaries never show):

* ``<path>/n``: the number of slots;
* ``<path>/v``: validity as packed bits, only when some slot is null;
* ``<path>/d``: fixed-width values (null slots as zero bytes) or booleans as packed bits (null
  slots as 0); for strings and binaries the bytes of the non-null values;
* ``<path>/e``: for strings, binaries and lists, where every slot ends: the offsets as if the
  column began at 0 and null slots were empty (modulo 2**32, or 2**64 for large types);
* ``<path>/<i>``: the children of lists (the elements of non-null lists), maps and structs
  (struct nulls merged into the children), recursively.

Dictionary-encoded arrays are keyed by their decoded values: nothing about the dictionary itself
(its order, unused or repeated entries, a dictionary per chunk) counts. A column of string or
binary values (the common case: categoricals) with at most ``_COMPACT_MAX`` distinct values is
keyed in a compact form that never decodes it:

* ``<path>/n`` and ``<path>/v``: slots and decoded validity (a valid index to a null entry is null);
* ``<path>/k/...``: the distinct values that some valid slot holds, sorted, as a plain array;
* ``<path>/c``: each slot's position in that array (null slots as 0), one byte each (two when
  there are more than 256 values).

Any other dictionary column (more distinct values, other value types, dictionaries nested in
lists or structs) is decoded and keyed as its plain values. Either way the result is a function
of the decoded values alone, and the two forms never share a stream name.

Run-end-encoded arrays are keyed decoded, views as plain large strings/binaries/lists, extension
arrays by their storage: the *type* (in the schema, keyed separately and in full) still tells
them apart. Unions, and anything else this module does not know, are keyed element by element
through their Python values.

The type is described recursively with every parameter (``str(type)`` drops a map's
``keys_sorted`` flag in some versions, list item field names and nullability, and nested field
metadata; pyarrow's own pickling of types goes through such strings).

Native kernels in :mod:`fncache._speedups`, when it was built, compute parts of this faster:
fixed-width values with null slots zeroed, whether the null slots of offsets are empty, and
string and binary views read as the plain arrays they stand for. The code here gives the same
bytes without them (the Arrow tests run both ways).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import xxhash

_speedups: Any
try:
    from fncache import _speedups
except ImportError:  # not built (no compiler at install): the numpy twins give the same bytes
    _speedups = None

__all__ = ["array_token", "chunked_token", "record_batch_token", "schema_desc", "table_token",
           "type_desc"]

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


def _np() -> Any:
    return sys.modules["numpy"] if "numpy" in sys.modules else __import__("numpy")


# ---------------------------------------------------------------------------------------------
# Types and schemas
# ---------------------------------------------------------------------------------------------


def _metadata(md: Any) -> Any:
    return None if not md else tuple(sorted(md.items()))


def field_desc(f: Any) -> tuple[Any, ...]:
    """A field as (name, type, nullable, sorted metadata)."""
    return (f.name, type_desc(f.type), f.nullable, _metadata(f.metadata))


def type_desc(t: Any) -> tuple[Any, ...]:
    """An Arrow type as a nested tuple with all of its parameters."""
    pa = sys.modules["pyarrow"]
    kind = type(t).__name__
    if isinstance(t, pa.ExtensionType):
        return (kind, t.extension_name, t.__arrow_ext_serialize__(), type_desc(t.storage_type))
    if isinstance(t, pa.BaseExtensionType):  # e.g. a registered C++ extension
        return (kind, t.extension_name, str(t), type_desc(t.storage_type))
    if isinstance(t, pa.MapType):
        return (kind, field_desc(t.key_field), field_desc(t.item_field), t.keys_sorted)
    if isinstance(t, pa.FixedSizeListType):
        return (kind, field_desc(t.value_field), t.list_size)
    if hasattr(t, "value_field"):  # list, large list, list view, large list view
        return (kind, field_desc(t.value_field))
    if isinstance(t, pa.StructType):
        return (kind, tuple(field_desc(t.field(i)) for i in range(t.num_fields)))
    if isinstance(t, pa.UnionType):
        return (kind, t.mode, tuple(t.type_codes),
                tuple(field_desc(t.field(i)) for i in range(t.num_fields)))
    if isinstance(t, pa.DictionaryType):
        return (kind, type_desc(t.index_type), type_desc(t.value_type), t.ordered)
    if isinstance(t, pa.RunEndEncodedType):
        return (kind, type_desc(t.run_end_type), type_desc(t.value_type))
    # Leaf types: their string names every parameter (unit, time zone, precision, width).
    return (kind, str(t))


def schema_desc(schema: Any) -> tuple[Any, ...]:
    """A schema as its fields (in order) and its sorted metadata."""
    return (tuple(field_desc(f) for f in schema), _metadata(schema.metadata))


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
        self.add_bools(_np().ones(count, dtype=_np().uint8))

    def _flush_ones(self) -> None:
        if self.ones:
            ones, self.ones = self.ones, 0
            self.add_bools(_np().ones(ones, dtype=_np().uint8))

    def add_bitmap(self, buf: Any, bit_offset: int, count: int, zeros: int) -> None:
        """``count`` bits of an Arrow bitmap from ``bit_offset``; ``zeros`` of them are 0."""
        np = _np()
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
        np = _np()
        self._flush_ones()
        self.zeros += int(bools.size - np.count_nonzero(bools))
        self._push(bools.view(np.uint8))

    def _push(self, bits: Any) -> None:
        np = _np()
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
            h.update(_np().packbits(self.carry, bitorder="little"))
            n += self.carry.size
        return n, h.digest()


class _Streams:
    """Named digests fed in chunk order; the result does not depend on where chunks begin."""

    __slots__ = ("bits", "bytes_", "ends")

    def __init__(self) -> None:
        self.bytes_: dict[str, list[Any]] = {}
        self.bits: dict[str, _Bits] = {}
        self.ends: dict[str, int] = {}  # offset streams: where the column so far ends

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


def _normalise(pa: Any, arr: Any) -> Any:
    """The array in a layout with the same logical values that this module knows how to walk."""
    while True:
        t = arr.type
        if isinstance(t, pa.BaseExtensionType):
            arr = arr.storage
        elif isinstance(t, pa.DictionaryType):
            arr = arr.dictionary_decode()
        elif isinstance(t, pa.RunEndEncodedType):
            import pyarrow.compute as pc

            arr = pc.run_end_decode(arr)
        elif t == pa.string_view() and _speedups is None:
            arr = arr.cast(pa.large_string())
        elif t == pa.binary_view() and _speedups is None:
            arr = arr.cast(pa.large_binary())
        elif isinstance(t, pa.LargeListViewType):
            arr = arr.cast(pa.large_list(t.value_field))
        elif isinstance(t, pa.ListViewType):
            arr = arr.cast(pa.list_(t.value_field))
        else:
            return arr


def _unpack(np: Any, buf: Any, off: int, n: int) -> Any:
    """``n`` bits of an Arrow bitmap from bit ``off``, as a uint8 0/1 array."""
    start, shift = divmod(off, 8)
    raw = np.frombuffer(buf, dtype=np.uint8, count=(shift + n + 7) // 8, offset=start)
    bits = np.unpackbits(raw, bitorder="little", count=shift + n)
    return bits[shift:] if shift else bits


class _Valid:
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


def _fixed(s: _Streams, name: str, np: Any, arr: Any, width: int, valid: _Valid | None) -> None:
    n, off = len(arr), arr.offset
    data = arr.buffers()[1]
    if valid is None:
        s.update(name, memoryview(data)[off * width:(off + n) * width])
        return
    # Null slots hold undefined bytes: hash a copy with them zeroed, one block at a time (in
    # cache).
    if _speedups is not None:
        raw = memoryview(data)[off * width:(off + n) * width]
        rows = max(1, _MASK_BYTES // width)
        scratch = _take("mask", min(n, rows) * width)
        for i in range(0, n, rows):
            k = min(rows, n - i)
            _speedups.mask_into(raw[i * width:(i + k) * width], valid.buf, valid.off + i, width,
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


def _block_nulls_empty(np: Any, offsets: Any, i: int, k: int, valid: _Valid,
                       scratch: Any) -> bool:
    """Whether every null slot from ``i`` to ``i + k`` is empty (``offsets``: the column's)."""
    if _speedups is not None:
        try:
            return bool(_speedups.nulls_empty(offsets[i:i + k + 1], valid.buf, valid.off + i,
                                              offsets.itemsize))
        except ValueError:  # not aligned (a buffer from outside Arrow), or not what it says:
            pass            # numpy reads it, or raises as it would have without the kernel
    return valid.full(np, i, k) or _nulls_empty(np, offsets[i:i + k], offsets[i + 1:i + 1 + k],
                                                valid.packed(np, i, k), scratch[:k])


def _ends(s: _Streams, name: str, np: Any, arr: Any, valid: _Valid | None) -> bool:
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


def _binary(s: _Streams, path: str, pa: Any, np: Any, arr: Any, valid: _Valid | None) -> None:
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


def _views(s: _Streams, path: str, arr: Any, nulls: int) -> None:
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
        stop, size, end = _speedups.views_into(views, data_buffers, bitmap, off, i, end, ends,
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


def _bools(s: _Streams, path: str, np: Any, arr: Any, valid: _Valid | None) -> None:
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


def _validity(s: _Streams, path: str, np: Any, arr: Any, nulls: int) -> _Valid | None:
    """Hash which slots are null; the validity to read (None when nothing is null)."""
    n = len(arr)
    vstream = s.bitstream(path + "/v")
    if not nulls:
        vstream.add_ones(n, lazy=True)
        return None
    bitmap = arr.buffers()[0]
    vstream.add_bitmap(bitmap, arr.offset, n, nulls)
    return _Valid(bitmap, arr.offset, n)


def _nested(s: _Streams, path: str, pa: Any, np: Any, arr: Any, nulls: int,
            valid: _Valid | None) -> None:
    """A struct, list or map array: list lengths, then the children's content."""
    t = arr.type
    if isinstance(t, pa.StructType):
        for i, child in enumerate(arr.flatten()):  # parent nulls merged into the children
            _walk(s, f"{path}/{i}", child)
        return
    if not isinstance(t, pa.FixedSizeListType):
        _ends(s, path + "/e", np, arr, valid)
    if isinstance(t, pa.MapType):
        entries = pa.struct([t.key_field, t.item_field])
        arr = arr.view(pa.list_(pa.field("entries", entries, nullable=False)))
    _walk(s, path + "/0", (arr.drop_null() if nulls else arr).flatten())


def _walk(s: _Streams, path: str, arr: Any) -> None:
    pa = sys.modules["pyarrow"]
    np = _np()
    if not _LARGE_IDS:
        _LARGE_IDS.update({pa.large_string().id, pa.large_binary().id,
                           pa.large_list(pa.int8()).id})
    arr = _normalise(pa, arr)
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
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) \
            or pa.types.is_large_binary(t):
        _binary(s, path, pa, np, arr, valid)
        return
    if t == pa.string_view() or t == pa.binary_view():  # (cast by _normalise without the kernel)
        _views(s, path, arr, nulls)
        return
    if t == pa.bool_():
        _bools(s, path, np, arr, valid)
        return
    try:
        width = t.bit_width
    except ValueError:
        width = 0
    if width and width % 8 == 0:
        _fixed(s, path + "/d", np, arr, width // 8, valid)
        return
    # Unions and anything unknown: element by element, through their Python values (and, for a
    # union, which child each value comes from: 1 as int8 and 1 as int64 are different values).
    from fncache.values.hasher import digest

    if isinstance(t, pa.UnionType):
        # (``UnionArray.type_codes`` ignores a slice's offset: read the buffer.)
        s.update(path + "/t", np.frombuffer(arr.buffers()[1], np.int8, count=n, offset=arr.offset))

    for value in arr.to_pylist():
        s.update(path + "/py", digest(value))


# ---------------------------------------------------------------------------------------------
# Dictionary columns in compact form
# ---------------------------------------------------------------------------------------------

# The compact form is for columns of at most this many distinct values. Finding and sorting
# distinct strings costs 0.2-0.7 us each (measured on a million), decoding a row 10-70 ns: with
# many values, decoding costs no more, and a look at the first rows shows them cheaply.
_COMPACT_MAX = 1 << 12


def _compact_values(pa: Any, t: Any) -> bool:
    """Whether a dictionary's value type allows the compact form: values equal exactly when
    their bytes are, so Arrow's sort and comparison agree with the plain form."""
    return isinstance(t, pa.DictionaryType) and (
        pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
        or pa.types.is_binary(t.value_type) or pa.types.is_large_binary(t.value_type))


class _Chunk:
    """A dictionary chunk's indices (unsigned, null slots as 0) and where its dictionary's
    entries begin among all the column's entries."""

    __slots__ = ("base", "bitmap", "index", "k", "nulls", "valid")

    def __init__(self, np: Any, chunk: Any, base: int) -> None:
        ind = chunk.indices
        width = ind.type.bit_width // 8
        n = len(ind)
        self.base, self.k, self.nulls = base, len(chunk.dictionary), ind.null_count
        self.index = np.frombuffer(ind.buffers()[1], dtype=np.dtype(f"u{width}"), count=n,
                                   offset=ind.offset * width)
        self.valid: Any = None
        self.bitmap: Any = None  # (buffer, bit offset) of the indices' validity
        if self.nulls:
            # The index under a null slot is undefined, perhaps out of range: zeroed.
            self.bitmap = (ind.buffers()[0], ind.offset)
            self.valid = _Valid(ind.buffers()[0], ind.offset, n).all(np)
            self.index = self.index * self.valid

    def used(self, np: Any) -> Any:
        """Which entries of the chunk's dictionary some valid slot refers to; None if an index
        is out of range (an invalid array: the plain form reports it)."""
        z, k = self.index, self.k
        if not len(z) or self.nulls == len(z):
            return np.zeros(k, dtype=np.bool_)
        if int(z.max()) >= k:
            return None
        if k <= 8:  # a comparison per entry is cheaper than counting into an array
            counts = np.array([np.count_nonzero(z == e) for e in range(k)])
        else:
            counts = np.bincount(z if z.itemsize < 8 else z.astype(np.intp), minlength=k)
        counts[0] -= self.nulls  # the zeroed null slots
        return counts > 0


def _same_buffers(a: Any, b: Any) -> bool:
    """Whether two arrays are views of the same memory (chunks of one column often share their
    dictionary; comparing it value by value for every chunk would cost a pass over it each)."""
    if a.type != b.type or a.offset != b.offset or len(a) != len(b):
        return False
    return all((x is None and y is None) or (x is not None and y is not None
                                             and x.address == y.address and x.size == y.size)
               for x, y in zip(a.buffers(), b.buffers(), strict=True))


def _many_values(pa: Any, pc: Any, chunk: Any, part: _Chunk) -> bool:
    """A cheap proof that a column has more than ``_COMPACT_MAX`` distinct values: its first
    rows alone have that many (a column of many values usually shows it at once)."""
    z = part.index[:4 * _COMPACT_MAX]
    if part.valid is not None:
        z = z[part.valid[:len(z)].view(bool)]
    if len(z) <= _COMPACT_MAX or int(z.max()) >= part.k:
        return False
    found = pc.unique(chunk.dictionary.take(pa.array(z)))
    return bool(len(found) - found.null_count > _COMPACT_MAX)  # (a null entry is no value)


def _compact(s: _Streams, path: str, chunks: list[Any]) -> bool:
    """Feed a dictionary column in compact form (see the module docstring); False, with nothing
    fed, when it has more than ``_COMPACT_MAX`` distinct values (or an index out of range)."""
    pa = sys.modules["pyarrow"]
    np = _np()
    import pyarrow.compute as pc

    # All chunks' dictionaries end to end (a dictionary shared by neighbours once).
    dicts: list[Any] = []
    parts: list[_Chunk] = []
    total = 0
    for chunk in chunks:
        d = chunk.dictionary
        if not dicts or not (_same_buffers(d, dicts[-1]) or d.equals(dicts[-1])):
            dicts.append(d)
            total += len(d)
        parts.append(_Chunk(np, chunk, total - len(d)))
    if _many_values(pa, pc, chunks[0], parts[0]):
        return False
    values = dicts[0] if len(dicts) == 1 else pa.concat_arrays(dicts)
    used = np.zeros(total, dtype=np.bool_)
    for part in parts:
        u = part.used(np)
        if u is None:
            return False
        used[part.base:part.base + part.k] |= u
    entry_valid = np.asarray(values.is_valid()) if values.null_count else None
    if entry_valid is not None:
        used &= entry_valid  # a null entry decodes to null: it is no value
    entries = np.flatnonzero(used)
    if len(entries) > 2 * _COMPACT_MAX and len(pc.unique(
            values.take(pa.array(entries[:2 * _COMPACT_MAX])))) > _COMPACT_MAX:
        return False  # a cheap proof that there are too many values
    # The distinct values, sorted (hashing, then sorting only the distinct ones: a dictionary
    # may repeat a few values many times).
    found = values.take(pa.array(entries))
    distinct = pc.unique(found)
    if len(distinct) > _COMPACT_MAX:
        return False
    distinct = distinct.take(pc.sort_indices(distinct))
    lookup = np.zeros(total, dtype=np.uint8 if len(distinct) <= 256 else np.uint16)
    lookup[entries] = np.asarray(pc.index_in(found, value_set=distinct))  # entry -> position
    for part in parts:
        _compact_chunk(s, path, np, part, lookup[part.base:part.base + part.k], entry_valid)
    _walk(s, path + "/k", distinct)
    return True


def _compact_chunk(s: _Streams, path: str, np: Any, part: _Chunk, lookup: Any,
                   entry_valid: Any) -> None:
    """One chunk's slots: decoded validity, then each slot's position among the values."""
    z = part.index
    n = len(z)
    s.count(path + "/n", n)
    if not n:
        return
    valid = part.valid
    vstream = s.bitstream(path + "/v")
    if entry_valid is not None:
        refers = entry_valid[part.base:part.base + part.k][z]
        valid = refers if valid is None else refers & valid.view(np.bool_)
        if valid.all():
            valid = None
        else:
            vstream.add_bools(valid)
    elif valid is not None:
        vstream.add_bitmap(part.bitmap[0], part.bitmap[1], n, part.nulls)
    if valid is None:
        vstream.add_ones(n, lazy=True)
    if valid is None and np.array_equal(lookup, np.arange(part.k)):
        # Already the positions (a sorted dictionary of used values): only narrowed, if at all.
        s.update(path + "/c", z if z.itemsize == lookup.itemsize else z.astype(lookup.dtype))
        return
    # (An empty dictionary: every slot is null.)
    ids = np.take(lookup, z) if part.k else np.zeros(n, dtype=lookup.dtype)
    if valid is not None:
        np.multiply(ids, valid, out=ids, casting="unsafe")  # null slots as 0
    s.update(path + "/c", ids)


def _content(chunks: Any) -> tuple[Any, ...]:
    s = _Streams()
    s.count("/n", 0)  # no chunks at all is an empty column, like one empty chunk
    chunks = list(chunks)
    if chunks and _compact_values(sys.modules["pyarrow"], chunks[0].type) \
            and _compact(s, "", chunks):
        return s.result()
    for chunk in chunks:
        _walk(s, "", chunk)
    return s.result()


def array_token(arr: Any) -> tuple[Any, ...]:
    """Any pyarrow Array: its type and logical content."""
    return ("pyarrow.Array", type_desc(arr.type), _content([arr]))


def chunked_token(arr: Any) -> tuple[Any, ...]:
    """A ChunkedArray: its type and logical content, whatever the chunk boundaries."""
    return ("pyarrow.ChunkedArray", type_desc(arr.type), _content(arr.chunks))


def chunks_content(chunks: Any) -> tuple[Any, ...]:
    """The logical content of a sequence of arrays of one type, as if concatenated."""
    return _content(chunks)


def table_token(table: Any) -> tuple[Any, ...]:
    """A Table: schema in full, row count, and each column's logical content."""
    return ("pyarrow.Table", schema_desc(table.schema), table.num_rows,
            tuple(_content(c.chunks) for c in table.columns))


def record_batch_token(batch: Any) -> tuple[Any, ...]:
    """A RecordBatch: schema in full, row count, and each column's logical content."""
    return ("pyarrow.RecordBatch", schema_desc(batch.schema), batch.num_rows,
            tuple(_content([c]) for c in batch.columns))
