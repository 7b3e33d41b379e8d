"""Canonical keys for scipy.sparse matrices and arrays: the logical matrix, not its bookkeeping.

A sparse matrix's pickle is its ``__dict__``: the format's arrays as they happen to be laid out plus
lazily computed flags (``_has_sorted_indices``, ``_has_canonical_format``, set by the first query or
operation that needs them) and a print setting (``maxprint``). So ``A`` and ``A.copy()``, a matrix
before and after ``A.has_sorted_indices`` is read, one with unsorted and one with sorted indices, or a
COO with duplicate entries and the same one summed, had different keys. A sparse value is keyed as:

* its class (format-aware: a CSR and a CSC of one matrix are two keys, since code may read ``indptr``
  or ``indices``, which differ between formats; a ``*_matrix`` and a ``*_array`` are two as well, since
  ``*`` means matrix product for one and elementwise product for the other), shape and dtype;
* its stored entries in canonical order: coordinates sorted row-major with duplicates summed, and
  their values. An explicitly stored zero counts (it is an entry ``.nnz`` and ``.data`` show).
  A DIA matrix is keyed by its diagonals as stored (``offsets`` and ``data``) instead: its entries
  (``tocoo``) leave out a diagonal's zeros and the values past the matrix's edge, which ``.nnz``
  and ``.data`` show.

Not content, by declaration: the two flags above (a cache of a fact about the layout, recomputed when
needed) and ``maxprint``. Only scipy's own classes take this path: a subclass (which may keep state of
its own) is keyed through its pickle.
"""

from __future__ import annotations

import sys
from typing import Any

from fncache.values.buffers import ndarray_token
from fncache.values.registry import guarded, register_lazy, register_type

__all__ = ["is_sparse_type", "sparse_token"]


def is_sparse_type(t: type) -> bool:
    """Whether ``t`` is one of scipy.sparse's own matrix or array classes (not a subclass of one)."""
    sp = sys.modules.get("scipy.sparse")
    if sp is None or not (getattr(t, "__module__", "") or "").startswith("scipy.sparse"):
        return False
    bases = tuple(b for b in (getattr(sp, "sparray", None), getattr(sp, "spmatrix", None)) if b)
    return bool(bases) and issubclass(t, bases)


def sparse_token(m: Any) -> tuple[Any, ...]:
    """A sparse matrix or array as described in the module docstring."""
    np = sys.modules["numpy"]
    t = type(m)
    if getattr(m, "format", None) == "dia":
        return (f"{t.__module__}.{t.__qualname__}", tuple(m.shape), m.dtype,
                ("dia", ndarray_token(np.ascontiguousarray(m.offsets, dtype=np.int64)),
                 ndarray_token(np.ascontiguousarray(m.data))), _layout(np, m))
    coo = m.tocoo(copy=True)
    coo.sum_duplicates()  # sorts the coordinates row-major and sums repeated ones
    coords = getattr(coo, "coords", None)
    if coords is None:  # pragma: no cover - scipy < 1.13
        coords = (coo.row, coo.col)
    return (f"{t.__module__}.{t.__qualname__}", tuple(m.shape), m.dtype,
            tuple(ndarray_token(np.ascontiguousarray(c, dtype=np.int64)) for c in coords),
            ndarray_token(np.ascontiguousarray(coo.data)), _layout(np, m))


def _layout(np: Any, m: Any) -> tuple[Any, ...]:
    """What the instance's pickle keeps of its layout that the entries leave out and code can
    read: the dtype of its index arrays (``m.indices.dtype``, int32 or int64) and a BSR's block
    shape (``m.blocksize``, which shapes ``m.data``)."""
    out: list[Any] = []
    for name in ("indices", "indptr", "offsets", "row", "col"):
        index = vars(m).get(name)
        if isinstance(index, np.ndarray):
            out.append((name, index.dtype.str))
    coords = vars(m).get("coords")
    if isinstance(coords, tuple):
        out.append(("coords", tuple(getattr(c, "dtype", np.dtype(object)).str for c in coords)))
    if "blocksize" in vars(m) or hasattr(type(m), "blocksize"):
        out.append(("blocksize", tuple(m.blocksize)))
    return tuple(out)


# Every attribute scipy's formats keep on an instance (keyed above or declared not content). An
# instance with any other attribute (set by a user) has state this handler does not know: its
# pickle keys it.
_KNOWN_STATE = frozenset({"_dict", "_has_canonical_format", "_has_sorted_indices", "_shape", "coords",
                          "data", "dtype", "has_canonical_format", "indices", "indptr", "maxprint",
                          "offsets", "rows", "blocksize", "row", "col"})


def _sparse_handler(h: Any, m: Any) -> Any:
    # scipy's own classes only: a subclass may keep state of its own (its pickle path keys it).
    if not is_sparse_type(type(m)) or not _KNOWN_STATE.issuperset(vars(m)):
        return NotImplemented
    return _guarded_sparse(h, m)


_guarded_sparse = guarded(sparse_token)


@register_lazy("scipy.sparse")
def _register() -> None:
    import scipy.sparse as sp  # type: ignore[import-untyped]

    bases = tuple(b for b in (getattr(sp, "sparray", None), getattr(sp, "spmatrix", None)) if b)
    register_type(bases, _sparse_handler, not_content=(
        ("_has_sorted_indices, _has_canonical_format, has_canonical_format",
         "lazily computed facts about the layout"),
        ("maxprint", "a print setting"),
        ("entry order and duplicate coordinates", "keyed canonical: sorted, duplicates summed"),
    ))
