"""Hashing handlers for array and table libraries whose own pickling is slow or not canonical.

Each handler is called by :mod:`fncache._hasher` (from ``reducer_override``) for one type, and only
once that library is already imported by the user: nothing here imports numpy, torch, polars or
pyarrow at module level. A handler returns a reduce value, a ``(_Token, (kind, ...))`` tuple whose
buffers go straight into the digest as protocol-5 out-of-band buffers (hashed where they lie, never
copied into the stream), or ``NotImplemented`` to let the library's own pickling decide.

What each covers, and why:

* **torch tensors**: ``Tensor.__reduce_ex__`` goes through ``torch.save``'s storage machinery
  (slow, and a view pickles its whole storage). A strided tensor is hashed as dtype, shape,
  ``requires_grad`` and its elements in C order, so a tensor and its non-contiguous copy agree.
  Tensors on another device are copied to the CPU first; sparse, quantized and other layouts take
  torch's own pickling.
* **polars frames and series**: polars pickles through its IPC writer (hundreds of milliseconds for
  a 10-column million-row frame). They are hashed as their Arrow form (zero-copy), one chunk per
  column, so the chunking left by earlier appends does not change the key, with string views as
  plain strings (a view's padding bytes are undefined), and nullable columns as a validity mask
  plus their non-null values (bytes under nulls and past a bitmap's end are undefined too).
* **pyarrow tables**: hashed with one chunk per column and nulls as a mask, for the same reasons;
  arrays and record batches pickle their buffers out of band already and are left to that.

pandas needs no handler: its frames pickle numeric blocks as out-of-band numpy buffers and object
columns element by element (through the hasher's ndarray handler): already fast and correct.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

__all__ = ["handle_arrow_table", "handle_polars", "handle_torch", "resolve"]


def _token() -> Any:
    from fncache._hasher import _Token

    return _Token


def handle_torch(h: Any, t: Any) -> Any:
    """A strided tensor as (dtype, shape, requires_grad, C-order element bytes)."""
    torch = sys.modules["torch"]
    if t.layout is not torch.strided or t.is_quantized:
        return NotImplemented
    data = t.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    # Lazy conjugate / negative views carry a flag, not different bytes: materialise them.
    data = data.resolve_conj().resolve_neg().contiguous()
    if data.numel():
        flat = data.reshape(-1).view(torch.uint8).numpy()
        payload: Any = pickle.PickleBuffer(flat)
    else:
        payload = b""
    kind = f"{type(t).__module__}.{type(t).__qualname__}"  # a Parameter is not a plain Tensor
    return (_token(), (kind, str(t.dtype), tuple(t.shape), bool(t.requires_grad), payload))


def _plain_strings(pa: Any, arrow: Any) -> Any:
    """Arrow data with string/binary *views* cast to plain large strings/binaries.

    A view array stores short strings inline and long ones as (buffer, offset) pointers whose
    padding bytes are not defined, so equal columns can differ byte for byte; offsets and data
    cannot.
    """
    views = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    if isinstance(arrow, pa.Table):
        fields = [f.with_type(views.get(f.type, f.type)) for f in arrow.schema]
        schema = pa.schema(fields, metadata=arrow.schema.metadata)
        return arrow if schema.equals(arrow.schema) else arrow.cast(schema)
    target = views.get(arrow.type)
    return arrow if target is None else arrow.cast(target)


def handle_polars(h: Any, obj: Any) -> Any:
    """A polars DataFrame or Series as its single-chunk Arrow form."""
    pl = sys.modules["polars"]
    import pyarrow as pa

    if isinstance(obj, pl.DataFrame):
        table = _plain_strings(pa, obj.rechunk().to_arrow()).combine_chunks()
        return (_token(), ("polars.DataFrame", table.schema, [_one(c) for c in table.columns]))
    if isinstance(obj, pl.Series):
        arrow = _plain_strings(pa, obj.rechunk().to_arrow())
        return (_token(), ("polars.Series", obj.name, arrow.type, _canonical_array(arrow)))
    return NotImplemented


def _one(column: Any) -> Any:
    chunks = column.chunks
    if len(chunks) != 1:
        return ("chunks", [_canonical_array(c) for c in chunks])
    return _canonical_array(chunks[0])


def _canonical_array(arr: Any) -> Any:
    """An Arrow array, or for one with a validity bitmap: (mask, the non-null values).

    Bits past the end of a bitmap and the bytes under null slots are undefined in Arrow, so equal
    arrays can differ there; a boolean mask and the array without its nulls cannot.
    """
    if arr.buffers()[0] is None:
        return arr
    mask = arr.is_valid().to_numpy(zero_copy_only=False)
    return ("masked", mask, arr.drop_null())


def handle_arrow_table(h: Any, table: Any) -> Any:
    """A pyarrow Table with one chunk per column (pickled as arrays, buffers out of band)."""
    combined = table.combine_chunks()
    return (_token(), ("pyarrow.Table", combined.schema, [_one(c) for c in combined.columns]))


def resolve(t: type) -> Any:
    """The handler for type ``t`` from an already imported library, or ``None``."""
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(t, torch.Tensor):
        return handle_torch
    pl = sys.modules.get("polars")
    if pl is not None and issubclass(t, (pl.DataFrame, pl.Series)):
        return handle_polars
    pa = sys.modules.get("pyarrow")
    if pa is not None and t is pa.Table:
        return handle_arrow_table
    return None
