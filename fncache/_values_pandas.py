"""Canonical keys for pandas objects: columns in order, dtypes, index, names and values.

A frame's pickle follows its internal blocks (a frame built at once keeps one 2-D block per dtype,
one built column by column a block per column), masked arrays (``Int64``, ``boolean``) pickle the
undefined bytes under ``NA``, and pandas 3 string columns are Arrow arrays with offsets. So:

* **DataFrame**: the column labels, the index, ``attrs`` and the duplicate-labels flag, and for each
  column in order its dtype and values; **Series**: name, dtype, values, index, ``attrs``, flag;
  **Index**: class, names, dtype, values (a ``RangeIndex`` by start, stop and step; a
  ``MultiIndex`` by each level's values; a datetime index's ``freq``).
* Values: numpy-backed columns as numpy arrays (any strides, so a column of a 2-D block is hashed
  where it lies); masked arrays as their mask (only when something is missing) and their data with
  ``NA`` slots zeroed; Arrow-backed arrays (pandas 3 strings, ``ArrowDtype``) by their logical Arrow
  content; categoricals by codes, categories and order; datetimes, timedeltas and periods by their
  int64 data (unit, zone and frequency are in the dtype); any other extension array element by
  element.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["pandas_handler"]


def _qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _dtype(np: Any, d: Any) -> Any:
    return d if isinstance(d, np.dtype) else (_qualname(type(d)), repr(d))


def _values(pd: Any, np: Any, v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "_mask") and hasattr(v, "_data"):  # BaseMaskedArray: Int64, Float64, boolean
        mask, data = v._mask, v._data
        if mask.any():
            data = data.copy()
            data[mask] = 0  # the bytes under NA are whatever an operation left there
            return ("masked", mask, data)
        return ("masked", None, data)
    if isinstance(v, pd.Categorical):
        return ("categorical", v.codes, index_token(v.categories), bool(v.ordered))
    pa_array = getattr(v, "_pa_array", None)
    if pa_array is not None:
        from fncache._values_arrow import chunks_content, type_desc

        return ("arrow", type_desc(pa_array.type), chunks_content(pa_array.chunks))
    backing = getattr(v, "_ndarray", None)
    if isinstance(backing, np.ndarray):  # datetimes, timedeltas, periods, numpy-backed arrays
        return ("ndarray", backing)
    return ("objects", _qualname(type(v)), list(np.asarray(v, dtype=object)))


def index_token(idx: Any) -> tuple[Any, ...]:
    """An Index: class, names, dtype and values, as described in the module docstring."""
    pd = sys.modules["pandas"]
    np = sys.modules["numpy"]
    kind = _qualname(type(idx))
    names = tuple(idx.names)
    if isinstance(idx, pd.RangeIndex):
        return (kind, names, idx.start, idx.stop, idx.step)
    if isinstance(idx, pd.MultiIndex):
        return (kind, names, tuple(index_token(idx.get_level_values(i)) for i in range(idx.nlevels)))
    freq = getattr(idx, "freqstr", None) if hasattr(idx, "freq") else None
    return (kind, names, _dtype(np, idx.dtype), _values(pd, np, idx._values), freq)


def series_token(s: Any) -> tuple[Any, ...]:
    """A Series: name, dtype, values, index, attrs and flags."""
    pd = sys.modules["pandas"]
    np = sys.modules["numpy"]
    return (_qualname(type(s)), s.name, _dtype(np, s.dtype), _values(pd, np, s._values),
            index_token(s.index), s.attrs, s.flags.allows_duplicate_labels)


def frame_token(df: Any) -> tuple[Any, ...]:
    """A DataFrame: labels, index, attrs, flags and each column's dtype and values, in order."""
    pd = sys.modules["pandas"]
    np = sys.modules["numpy"]
    columns = []
    for i in range(df.shape[1]):
        col = df.iloc[:, i]
        columns.append((_dtype(np, col.dtype), _values(pd, np, col._values)))
    return (_qualname(type(df)), index_token(df.columns), index_token(df.index), tuple(columns),
            df.attrs, df.flags.allows_duplicate_labels)


def array_token(a: Any) -> tuple[Any, ...]:
    """A pandas extension array: class, dtype and values."""
    pd = sys.modules["pandas"]
    np = sys.modules["numpy"]
    return (_qualname(type(a)), _dtype(np, a.dtype), _values(pd, np, a))


def pandas_handler(pd: Any, t: type) -> Any:
    """The token function for a pandas type, or ``None``."""
    if issubclass(t, pd.DataFrame):
        return frame_token
    if issubclass(t, pd.Series):
        return series_token
    if issubclass(t, pd.Index):
        return index_token
    if issubclass(t, pd.api.extensions.ExtensionArray):
        return array_token
    return None
