"""Canonical keys for arrays, tensors and tables: which handler takes which type, and numpy itself.

The value handlers are called by :mod:`fncache.values.hasher` (from ``reducer_override``) for one type,
and only once that library is already imported by the user: nothing here imports numpy, torch,
pandas, polars or pyarrow at module level. A handler returns a reduce value ``(_Token, (kind,
...))`` whose parts are small: the handlers digest large buffers themselves (xxh3-128, where the
bytes lie), so a buffer's read-only flag, its address and where it lives never reach the stream.

The contract every handler keeps: equal type, dtype or schema, shape, names, nulls and values give
one key; anything else gives another. Layout is not content: memory order, strides, offsets,
chunking, validity bitmaps without nulls, bytes under nulls or masks, padding. Where a canonical
path fails on a value the library can pickle (a new layout, an exotic dtype) the library's own
pickling decides instead (logged at DEBUG): at worst a needless miss, never an error.

One module per library: :mod:`fncache.values.arrow` (pyarrow, and the Arrow form of polars and
pandas columns), :mod:`fncache.values.pandas`, :mod:`fncache.values.polars`,
:mod:`fncache.values.torch`; values that point at files (polars scans, Arrow datasets, h5py,
zarr) in :mod:`fncache.values.lazy`. numpy arrays are handled here, as the others reuse them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import xxhash

from fncache._hasher import Token

__all__ = ["c_order_digest", "masked_array_token", "ndarray_token", "resolve", "token"]

_log = logging.getLogger("fncache")

# Bytes per block when a non-contiguous array is put in C order piece by piece (cache-sized).
_BLOCK_BYTES = 1 << 22


def token(*parts: Any) -> Any:
    """A reduce value standing for ``parts`` in the hash stream."""
    return (Token, parts)


# ---------------------------------------------------------------------------------------------
# numpy
# ---------------------------------------------------------------------------------------------


def _pieces(np: Any, a: Any) -> Any:
    """C-contiguous pieces whose concatenation is ``a`` in C order, without one big copy.

    Blocks of whole rows are gathered into cache-sized copies; only when a single row is larger
    than a block and not contiguous (e.g. the transpose of a tall matrix) is the array copied
    whole: streaming such a row would read the whole array once per row.
    """
    if a.flags.c_contiguous:
        yield a
        return
    if a.ndim <= 1 and a.nbytes > _BLOCK_BYTES:
        step = max(1, _BLOCK_BYTES // a.itemsize)
        for i in range(0, a.shape[0], step):
            yield np.ascontiguousarray(a[i:i + step])
        return
    if a.nbytes <= _BLOCK_BYTES or a.ndim <= 1:
        yield np.ascontiguousarray(a)
        return
    rows = _BLOCK_BYTES // max(1, a.nbytes // a.shape[0])
    if rows == 0:
        yield np.ascontiguousarray(a)
        return
    for i in range(0, a.shape[0], rows):
        yield np.ascontiguousarray(a[i:i + rows])


def c_order_digest(np: Any, a: Any) -> tuple[int, bytes]:
    """(byte count, xxh3-128) of ``a``'s elements in C order, whatever its memory layout."""
    if a.flags.c_contiguous:
        flat = a.reshape(-1).view(np.uint8) if a.size else b""
        return len(flat), xxhash.xxh3_128_digest(flat)
    h = xxhash.xxh3_128()
    n = 0
    for piece in _pieces(np, a):
        flat = piece.reshape(-1).view(np.uint8)
        h.update(flat)
        n += flat.size
    return n, h.digest()


_packed: dict[Any, Any] = {}


def _without_padding(np: Any, a: Any) -> Any:
    """A structured array with its fields packed: padding bytes are undefined, not content."""
    dt = a.dtype
    packed = _packed.get(dt)
    if packed is None:
        from numpy.lib import recfunctions

        packed = _packed[dt] = recfunctions.repack_fields(dt, align=False, recurse=True)
    return a if packed == dt and packed.itemsize == dt.itemsize else a.astype(packed)


def class_token(t: type, library: str) -> Any:
    """How a value's class enters its key: one of ``library``'s own classes by name (its code is the
    library's, as for every library object), any other class, a user's subclass, as the class itself,
    which the hasher keys by its fingerprint (its code): editing a subclass's method is a new key."""
    module = getattr(t, "__module__", None) or ""
    if module.split(".")[0] == library:
        return f"{module}.{t.__qualname__}"
    return t


def ndarray_token(a: Any) -> tuple[Any, ...]:
    """A numpy array (or memmap: where the bytes live is not content) as dtype, shape, elements."""
    np = sys.modules["numpy"]
    dt = a.dtype
    if dt.hasobject:
        # Pointers are not content: hash the elements themselves.
        return ("ndarray-object", dt, a.shape, a.reshape(-1).tolist())
    body = a
    if dt.names is not None:
        body = _without_padding(np, a)
    elif dt == np.bool_ and a.size and a.view(np.uint8).max() > 1:
        body = a.view(np.uint8) != 0  # a bool byte other than 0/1 is True, as numpy reads it
    return ("ndarray", dt, a.shape, *c_order_digest(np, body))


def masked_array_token(a: Any) -> tuple[Any, ...]:
    """A numpy masked array: data with masked slots zeroed, the mask only if something is masked."""
    np = sys.modules["numpy"]
    mask = np.ma.getmaskarray(a)
    masked = bool(np.ascontiguousarray(mask).view(np.uint8).any()) if mask.size else False
    data = np.ma.getdata(a)
    if masked:
        data = a.filled(np.zeros(1, dtype=a.dtype)[0])
    return (class_token(type(a), "numpy"), ndarray_token(data),
            ndarray_token(mask) if masked else None, a.fill_value, bool(a.hardmask))


# ---------------------------------------------------------------------------------------------
# Dispatch
# ---------------------------------------------------------------------------------------------


def _guarded(fn: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    """A handler that leaves a value it cannot take apart to the library's own pickling."""

    def handle(h: Any, obj: Any) -> Any:
        try:
            parts = fn(obj)
        except Exception as e:  # a layout or dtype the canonical path does not know
            _log.debug("fncache: hashing a %s through its pickle (%s: %s)",
                       type(obj).__qualname__, type(e).__name__, e)
            return NotImplemented
        return NotImplemented if parts is NotImplemented else token(*parts)

    return handle


def resolve(t: type) -> Any:
    """The handler for type ``t`` from an already imported library, or ``None``."""
    if t.__module__.startswith("nibabel."):
        from fncache.values.nibabel import is_proxy, proxy_handler

        if is_proxy(t):
            return proxy_handler
    from fncache.values.lazy import resolve as lazy_reader  # polars scans, datasets, h5py, zarr

    if (found := lazy_reader(t)) is not None:
        return found
    np = sys.modules.get("numpy")
    if np is not None and "numpy.ma" in sys.modules and issubclass(t, np.ma.MaskedArray):
        return _guarded(masked_array_token)
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(t, torch.Tensor):
        from fncache.values.torch import tensor_token

        return _guarded(tensor_token)
    pl = sys.modules.get("polars")
    if pl is not None and issubclass(t, (pl.DataFrame, pl.Series)):
        from fncache.values.polars import polars_token

        return _guarded(polars_token)
    if "scipy.sparse" in sys.modules:
        from fncache.values.scipy import is_sparse_type, sparse_token

        if is_sparse_type(t):
            return _guarded(sparse_token)
    pd = sys.modules.get("pandas")
    if pd is not None:
        from fncache.values.pandas import pandas_handler

        found = pandas_handler(pd, t)
        if found is not None:
            return _guarded(found)
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        from fncache.values import arrow

        for base, fn in ((pa.Table, arrow.table_token), (pa.RecordBatch, arrow.record_batch_token),
                         (pa.ChunkedArray, arrow.chunked_token), (pa.Array, arrow.array_token)):
            if issubclass(t, base):
                return _guarded(fn)
        if t is pa.Schema:
            return _guarded(lambda s: ("pyarrow.Schema", arrow.schema_desc(s)))
        if issubclass(t, pa.DataType):
            return _guarded(lambda d: ("pyarrow.DataType", arrow.type_desc(d)))
        if t is pa.Field:
            return _guarded(lambda f: ("pyarrow.Field", arrow.field_desc(f)))
    return None
