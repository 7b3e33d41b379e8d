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
(its order, unused or repeated entries, a dictionary per chunk) counts, unless the type is
*ordered*: then the dictionary's order is the order its values compare and sort in (``to_pandas``
makes an ordered categorical of it), and the dictionary is keyed too, whole and in order
(``<path>/o/...``), with the row it takes effect from and its length (``<path>/o/k``), where it
differs from the previous chunk's. A column of string or
binary values (the common case: categoricals) with at most ``_COMPACT_MAX`` distinct values is
keyed in a compact form that never decodes it:

* ``<path>/n`` and ``<path>/v``: slots and decoded validity (a valid index to a null entry is null;
  ``<path>/z``, in both forms, names the rows where one is, which Arrow does not count as null);
* ``<path>/k/...``: the distinct values that some valid slot holds, sorted, as a plain array;
* ``<path>/c``: each slot's position in that array (null slots as 0), one byte each (two when
  there are more than 256 values).

Any other dictionary column (more distinct values, other value types, dictionaries nested in
lists or structs) is decoded and keyed as its plain values. Either way the result is a function
of the decoded values alone (and, for an ordered type, of its dictionaries), and the two forms
never share a stream name.

Run-end-encoded arrays are keyed decoded, views as plain large strings/binaries/lists, extension
arrays by their storage: the *type* (in the schema, keyed separately and in full) still tells
them apart. A union is keyed by which child each slot takes and, per child, the values of the
slots that take it, walked as any array (a dense union's child values no slot points to do not
count). Anything else this module does not know is keyed element by element through its Python
values. A ``Scalar`` is keyed as the one-row array it makes: its own pickle keeps ``as_py()``.

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
from typing import Any

from fncache.values import ahead
from fncache.values.arrow_streams import Streams, Valid, null_entries, numpy_module, walk
from fncache.values.registry import guarded, register_lazy, register_type

__all__ = ["array_token", "chunked_token", "chunks_content", "columns_content", "field_desc",
           "plain_type", "record_batch_token", "schema_desc", "table_token", "type_desc"]

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
    if isinstance(t, pa.BaseExtensionType):
        return _extension_desc(pa, kind, t)
    nested = _nested_desc(pa, kind, t)
    if nested is not None:
        return nested
    # Leaf types: their string names every parameter (unit, time zone, precision, width).
    return (kind, str(t))


def _extension_desc(pa: Any, kind: str, t: Any) -> tuple[Any, ...]:
    """An extension type: its name, its parameters and its storage type."""
    if isinstance(t, pa.ExtensionType):
        # A Python extension type is a user's class: it enters by its code (the hasher keys a
        # class by its fingerprint), so editing its methods (``__arrow_ext_class__``,
        # deserialisation) is a new key; its parameters are what it serialises.
        return (type(t), t.extension_name, t.__arrow_ext_serialize__(), type_desc(t.storage_type))
    # e.g. a registered C++ extension
    return (kind, t.extension_name, str(t), type_desc(t.storage_type))


def _nested_desc(pa: Any, kind: str, t: Any) -> tuple[Any, ...] | None:
    """A type made of other types (lists, maps, structs, unions, encodings) with their fields;
    None for a leaf type."""
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
    return _encoded_desc(pa, kind, t)


def _encoded_desc(pa: Any, kind: str, t: Any) -> tuple[Any, ...] | None:
    """A dictionary or run-end encoded type: its index (or run-end) type and value type; None
    for any other type."""
    if isinstance(t, pa.DictionaryType):
        return (kind, type_desc(t.index_type), type_desc(t.value_type), t.ordered)
    if isinstance(t, pa.RunEndEncodedType):
        return (kind, type_desc(t.run_end_type), type_desc(t.value_type))
    return None


def schema_desc(schema: Any) -> tuple[Any, ...]:
    """A schema as its fields (in order) and its sorted metadata."""
    return (tuple(field_desc(f) for f in schema), _metadata(schema.metadata))


# ---------------------------------------------------------------------------------------------
# Dictionary columns in compact form
# ---------------------------------------------------------------------------------------------

# The compact form is for columns of at most this many distinct values. Finding and sorting
# distinct strings costs 0.2-0.7 us each (measured on a million), decoding a row 10-70 ns: with
# many values, decoding costs no more, and a look at the first rows shows them cheaply.
_COMPACT_MAX = 1 << 12


def _compact_values(pa: Any, t: Any) -> bool:
    """Whether a dictionary's value type allows the compact form: values equal exactly when
    their bytes are, so Arrow's sort and comparison agree with the plain form. Not for an ordered
    dictionary, whose order is content (see :func:`fncache.values.arrow_streams.walk`)."""
    return isinstance(t, pa.DictionaryType) and not t.ordered and (
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
            self.valid = Valid(ind.buffers()[0], ind.offset, n).all(np)
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


def _compact(s: Streams, path: str, chunks: list[Any]) -> bool:
    """Feed a dictionary column in compact form (see the module docstring); False, with nothing
    fed, when it has more than ``_COMPACT_MAX`` distinct values (or an index out of range)."""
    pa = sys.modules["pyarrow"]
    np = numpy_module()
    import pyarrow.compute as pc

    dicts, parts, total = _dictionaries(np, chunks)
    if _many_values(pa, pc, chunks[0], parts[0]):
        return False
    values = dicts[0] if len(dicts) == 1 else pa.concat_arrays(dicts)
    used = _used(np, parts, total)
    if used is None:
        return False
    entry_valid = np.asarray(values.is_valid()) if values.null_count else None
    if entry_valid is not None:
        used &= entry_valid  # a null entry decodes to null: it is no value
    entries = np.flatnonzero(used)
    sorted_values = _distinct(pa, pc, values, entries)
    if sorted_values is None:
        return False
    found, distinct = sorted_values
    lookup = np.zeros(total, dtype=np.uint8 if len(distinct) <= 256 else np.uint16)
    lookup[entries] = np.asarray(pc.index_in(found, value_set=distinct))  # entry -> position
    for chunk, part in zip(chunks, parts, strict=True):
        null_entries(s, path, np, chunk)
        _compact_chunk(s, path, np, part, lookup[part.base:part.base + part.k], entry_valid)
    walk(s, path + "/k", distinct)
    return True


def _distinct(pa: Any, pc: Any, values: Any, entries: Any) -> tuple[Any, Any] | None:
    """The dictionary ``values`` at the used ``entries``, and their distinct values sorted; None
    when there are more than ``_COMPACT_MAX`` of those."""
    if len(entries) > 2 * _COMPACT_MAX and len(pc.unique(
            values.take(pa.array(entries[:2 * _COMPACT_MAX])))) > _COMPACT_MAX:
        return None  # a cheap proof that there are too many values
    # The distinct values, sorted (hashing, then sorting only the distinct ones: a dictionary
    # may repeat a few values many times).
    found = values.take(pa.array(entries))
    distinct = pc.unique(found)
    if len(distinct) > _COMPACT_MAX:
        return None
    return found, distinct.take(pc.sort_indices(distinct))


def _dictionaries(np: Any, chunks: list[Any]) -> tuple[list[Any], list[_Chunk], int]:
    """All chunks' dictionaries end to end (a dictionary shared by neighbours once), each chunk's
    indices with where its dictionary begins among them, and the number of entries."""
    dicts: list[Any] = []
    parts: list[_Chunk] = []
    total = 0
    for chunk in chunks:
        d = chunk.dictionary
        if not dicts or not (_same_buffers(d, dicts[-1]) or d.equals(dicts[-1])):
            dicts.append(d)
            total += len(d)
        parts.append(_Chunk(np, chunk, total - len(d)))
    return dicts, parts, total


def _used(np: Any, parts: list[_Chunk], total: int) -> Any:
    """Which of the ``total`` dictionary entries some valid slot of a chunk refers to; None if an
    index is out of range."""
    used = np.zeros(total, dtype=np.bool_)
    for part in parts:
        u = part.used(np)
        if u is None:
            return None
        used[part.base:part.base + part.k] |= u
    return used


def _compact_chunk(s: Streams, path: str, np: Any, part: _Chunk, lookup: Any,
                   entry_valid: Any) -> None:
    """One chunk's slots: decoded validity, then each slot's position among the values."""
    z = part.index
    n = len(z)
    s.count(path + "/n", n)
    if not n:
        return
    valid = _chunk_validity(s.bitstream(path + "/v"), np, part, entry_valid)
    if valid is None and np.array_equal(lookup, np.arange(part.k)):
        # Already the positions (a sorted dictionary of used values): only narrowed, if at all.
        s.update(path + "/c", z if z.itemsize == lookup.itemsize else z.astype(lookup.dtype))
        return
    # (An empty dictionary: every slot is null.)
    ids = np.take(lookup, z) if part.k else np.zeros(n, dtype=lookup.dtype)
    if valid is not None:
        np.multiply(ids, valid, out=ids, casting="unsafe")  # null slots as 0
    s.update(path + "/c", ids)


def _chunk_validity(vstream: Any, np: Any, part: _Chunk, entry_valid: Any) -> Any:
    """Feed the chunk's decoded validity to ``vstream`` (a slot is valid when its index is and
    the entry it refers to is not null); the slots' validity (as the indices give it when no
    entry is null), or None when every slot is valid."""
    z = part.index
    n = len(z)
    valid = part.valid
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
    return valid


def _content(chunks: Any) -> tuple[Any, ...]:
    s = Streams()
    s.count("/n", 0)  # no chunks at all is an empty column, like one empty chunk
    chunks = list(chunks)
    if chunks and _compact_values(sys.modules["pyarrow"], chunks[0].type) \
            and _compact(s, "", chunks):
        return s.result()
    for chunk in chunks:
        walk(s, "", chunk)
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


def plain_type(t: Any) -> bool:
    """Whether an Arrow type and every type inside it is pyarrow's own: no extension type, whose
    Python methods a key calls (user code)."""
    pa = sys.modules["pyarrow"]
    if isinstance(t, pa.BaseExtensionType):
        return False
    value_type = getattr(t, "value_type", None)  # a dictionary's values
    return ((value_type is None or plain_type(value_type))
            and all(plain_type(t.field(i).type) for i in range(t.num_fields)))


def columns_content(columns: list[list[Any]]) -> tuple[Any, ...]:
    """Each column's logical content (a column: its chunks), the columns of a large table on two
    threads where their types are pyarrow's own (:func:`fncache.values.ahead.map_ahead`)."""
    sizes = [sum(chunk.nbytes for chunk in chunks) for chunks in columns]
    if sum(sizes) >= ahead.MIN_BYTES and all(chunks and plain_type(chunks[0].type)
                                             for chunks in columns):
        return tuple(ahead.map_ahead(_content, columns, sizes))
    return tuple(_content(chunks) for chunks in columns)


def table_token(table: Any) -> tuple[Any, ...]:
    """A Table: schema in full, row count, and each column's logical content."""
    return ("pyarrow.Table", schema_desc(table.schema), table.num_rows,
            columns_content([c.chunks for c in table.columns]))


def record_batch_token(batch: Any) -> tuple[Any, ...]:
    """A RecordBatch: schema in full, row count, and each column's logical content."""
    return ("pyarrow.RecordBatch", schema_desc(batch.schema), batch.num_rows,
            columns_content([[c] for c in batch.columns]))


def scalar_token(sc: Any) -> tuple[Any, ...]:
    """A Scalar: its type and the content of the one-row array it makes. Its own pickle keeps
    ``as_py()``, which drops what a Python value cannot hold (the nanoseconds of a ``time64[ns]``,
    a ``date64``'s part below a day, a float32 NaN's payload)."""
    return ("pyarrow.Scalar", type_desc(sc.type), _content([sys.modules["pyarrow"].repeat(sc, 1)]))


def _schema_token(s: Any) -> tuple[Any, ...]:
    return ("pyarrow.Schema", schema_desc(s))


def _datatype_token(d: Any) -> tuple[Any, ...]:
    return ("pyarrow.DataType", type_desc(d))


def _field_token(f: Any) -> tuple[Any, ...]:
    return ("pyarrow.Field", field_desc(f))


_LAYOUT = (("buffers, offsets, chunking, bytes under nulls, dictionary order",
            "layout: the logical values are keyed"),
           ("null_count", "a count cached from the validity bitmap, which is keyed"))


@register_lazy("pyarrow")
def _register() -> None:
    import pyarrow as pa

    for base, fn in ((pa.Table, table_token), (pa.RecordBatch, record_batch_token),
                     (pa.ChunkedArray, chunked_token), (pa.Array, array_token)):
        register_type(base, guarded(fn), not_content=_LAYOUT)
    register_type(pa.Scalar, guarded(scalar_token))
    register_type(pa.Schema, guarded(_schema_token), exact=True)
    register_type(pa.DataType, guarded(_datatype_token))
    register_type(pa.Field, guarded(_field_token), exact=True)
