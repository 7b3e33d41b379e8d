"""Canonical keys for polars frames and series.

polars pickles through its IPC writer (hundreds of milliseconds for a 10-column million-row frame),
so a Series is keyed as its name, its polars dtype (``repr``: every parameter, including a
Categorical's named category set, which the Arrow export drops) and the logical content of its
zero-copy Arrow export (see :mod:`fncache._values_arrow`: slices, chunking, views and validity
bitmaps do not count). A DataFrame is its columns in order.

Two dtypes do not go through Arrow: ``Object`` columns export object *pointers*, so they are keyed
by their elements' content; and a dtype the Arrow export refuses (``Int128``) is keyed by its
Python values.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["polars_token"]


def _has_object(pl: Any, dtype: Any) -> bool:
    if dtype == pl.Object:
        return True
    inner = getattr(dtype, "inner", None)
    if inner is not None and _has_object(pl, inner):
        return True
    return any(_has_object(pl, f.dtype) for f in getattr(dtype, "fields", None) or ())


def _series(pl: Any, s: Any) -> tuple[Any, ...]:
    head = (s.name, repr(s.dtype), len(s))
    if _has_object(pl, s.dtype):
        return (*head, "objects", s.to_list())
    try:
        arrow = s.to_arrow()
    except Exception:  # a dtype without an Arrow form (Int128, UInt128)
        return (*head, "values", s.to_list())
    from fncache._values_arrow import chunks_content

    chunks = arrow.chunks if hasattr(arrow, "num_chunks") else [arrow]
    return (*head, "arrow", chunks_content(chunks))


def polars_token(obj: Any) -> Any:
    """A polars DataFrame or Series by names, dtypes and logical values."""
    pl = sys.modules["polars"]
    if isinstance(obj, pl.DataFrame):
        return ("polars.DataFrame", obj.height, tuple(_series(pl, s) for s in obj.get_columns()))
    if isinstance(obj, pl.Series):
        return ("polars.Series", *_series(pl, obj))
    return NotImplemented
