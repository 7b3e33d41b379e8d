"""Canonical keys for pandas objects: columns in order, dtypes, index, names and values.

A frame's pickle follows its internal blocks (a frame built at once keeps one 2-D block per dtype,
one built column by column a block per column), masked arrays (``Int64``, ``boolean``) pickle the
undefined bytes under ``NA``, and pandas 3 string columns are Arrow arrays with offsets. So:

* **DataFrame**: the column labels, the index, ``attrs`` and the duplicate-labels flag, and for each
  column in order its dtype and values; **Series**: name, dtype, values, index, ``attrs``, flag;
  **Index**: class, names, dtype, values (a ``RangeIndex`` by start, stop and step; a
  ``MultiIndex`` by its levels in order, its codes and its sort depth; a datetime index's ``freq``
  as an object).
* Values: numpy-backed columns as numpy arrays (any strides, so a column of a 2-D block is hashed
  where it lies); masked arrays as their mask (only when something is missing) and their data with
  ``NA`` slots zeroed; Arrow-backed arrays (pandas 3 strings, ``ArrowDtype``) by their logical Arrow
  content; categoricals by codes, categories and order; datetimes, timedeltas and periods by their
  int64 data (unit, zone and frequency are in the dtype; a zone is keyed as an object, not by its
  name); any other extension array element by
  element.
"""

from __future__ import annotations

import sys
from typing import Any

from fncache.values.buffers import AHEAD_EACH, DigestsAhead, class_token
from fncache.values.registry import guarded, register_lazy, register_type

__all__ = ["array_token", "frame_token", "index_token", "series_token"]


def _qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _kind(obj: Any) -> Any:
    """The class part of a token: pandas' own classes by name; any other (a user's subclass, a
    GeoDataFrame) as the class, which the hasher keys by its code (see ``class_token``)."""
    return class_token(type(obj), "pandas")


def _extra_state(obj: Any, kind: Any) -> tuple[Any, ...]:
    """What a subclass's pickle keeps beyond pandas' own: the attributes its ``_metadata`` names
    (``df.unit`` of a subclass with ``_metadata = ["unit"]``). Nothing for pandas' own classes, whose
    tokens stay as they were (their ``_metadata`` holds only what the token has already: a name)."""
    if isinstance(kind, str):
        return ()
    names = tuple(getattr(obj, "_metadata", ()) or ())  # the instance's: its pickle keeps that
    return (("_metadata", tuple((n, getattr(obj, n, None)) for n in names)),)


def _dtype(np: Any, d: Any) -> Any:
    if isinstance(d, np.dtype):
        return d
    kind = class_token(type(d), "pandas")
    if isinstance(kind, str):
        # pandas' dtypes print all their parameters, but a time zone by its name alone (two zones
        # named alike at other offsets, a custom tzinfo): the zone itself is keyed, as its pickle
        # keeps it, for a zoned dtype and an interval dtype over one.
        tz = getattr(d, "tz", None)
        if tz is not None:
            zone = _zone(tz)  # (its repr is the zone's: dateutil's UTC prints as ``tzutc()``)
            return (kind, f"datetime64[{d.unit}]" if zone == "UTC" else repr(d), ("tz", zone))
        subtype = getattr(d, "subtype", None)
        if getattr(subtype, "tz", None) is not None:
            return (kind, "interval", d.closed, ("subtype", _dtype(np, subtype)))
        return (kind, repr(d))
    # Another library's dtype may print as ``<... object at 0x...>`` (a new key in every process) or
    # leave parameters out: its own pickle says what it is.
    return ("reduce", d.__reduce_ex__(5))


def _zone(tz: Any) -> Any:
    """A time zone as its pickle keeps it; any of the UTC zones pandas takes for one (datetime's,
    zoneinfo's, pytz's, dateutil's: a Parquet read of datetime's gives zoneinfo's) as one."""
    try:
        from pandas._libs.tslibs.timezones import is_utc  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - another pandas layout: each zone as itself
        return tz
    return "UTC" if is_utc(tz) else tz


def _offset(np: Any, freq: Any) -> Any:
    """A frequency by what it does: its reduction (class, arguments, and state with its keys
    sorted: ``DateOffset(months=1, days=2)`` and ``DateOffset(days=2, months=1)`` are equal and
    act alike), and a custom business day's calendar, whose weekmask and holidays pandas' own
    pickle drops when they were given as ``calendar=``."""
    if freq is None:
        return None
    rv = freq.__reduce_ex__(5)
    if not isinstance(rv, tuple):  # a global's name
        return ("offset", rv)
    parts = list(rv)
    if len(parts) > 2 and isinstance(parts[2], dict):
        parts[2] = sorted(parts[2].items(), key=lambda kv: str(kv[0]))
    calendar = getattr(freq, "calendar", None)
    if calendar is not None:
        parts.append(("calendar", np.asarray(calendar.weekmask), np.asarray(calendar.holidays)))
    return ("offset", tuple(parts))


# Rows below which no array of a frame is digested ahead: a pandas column's items take at most 16
# bytes (complex numbers; strings are objects or Arrow), so its array is under AHEAD_EACH.
_AHEAD_ROWS = AHEAD_EACH // 16

#: What :func:`_values` gives, with ``arrow=False``, for an Arrow-backed array: hashed later (a
#: tuple of a string: plain data, see fncache.values.buffers._gather).
_ARROW = ("arrow, hashed later",)


def _values(pd: Any, np: Any, v: Any, arrow: bool = True) -> Any:
    if isinstance(v, np.ndarray):
        return v
    if not isinstance(class_token(type(v), "pandas"), str):
        # An extension array of another library (geopandas' GeometryArray keeps its CRS on the
        # array) or a user's subclass: its state is not known here. The array itself goes into
        # the stream, where its own handler (see fncache.values.geopandas) or, for an array no
        # entry names, what its own pickle keeps keys it (array_token), never its elements alone.
        return ("array", v)
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
        if not arrow:
            return _ARROW
        from fncache.values.arrow import chunks_content, type_desc

        return ("arrow", type_desc(pa_array.type), chunks_content(pa_array.chunks))
    backing = getattr(v, "_ndarray", None)
    if isinstance(backing, np.ndarray):  # datetimes, timedeltas, periods, numpy-backed arrays
        return ("ndarray", backing)
    return _by_parts(pd, np, v)


def _by_parts(pd: Any, np: Any, v: Any) -> Any:
    """An extension array :func:`_values` leaves: interval bounds, else element by element."""
    if isinstance(v, pd.arrays.IntervalArray):
        # What its pickle keeps: the two bound arrays (NaN or NaT in both for a missing interval)
        # and the dtype (subtype, zone, closed side): not one pickle per Interval, seconds a column.
        return ("intervals", str(v.dtype), _values(pd, np, v._left), _values(pd, np, v._right))
    objects = ("objects", _qualname(type(v)), list(np.asarray(v, dtype=object)))
    if isinstance(v, pd.arrays.SparseArray):
        # Its pickle keeps its index: its kind (v.kind) and which slots are stored, a fill value
        # among them (``npoints``, ``sp_values`` and ``density`` show it).
        return (*objects, ("kind", v.kind), ("stored", v.sp_index.indices))
    return objects


def index_token(idx: Any) -> tuple[Any, ...]:
    """An Index: class, names, dtype and values, as described in the module docstring."""
    pd = sys.modules["pandas"]
    np = sys.modules["numpy"]
    kind = class_token(type(idx), "pandas")
    names = tuple(idx.names)
    if isinstance(idx, pd.RangeIndex):
        return (kind, names, idx.start, idx.stop, idx.step)
    if isinstance(idx, pd.MultiIndex):
        # What its pickle keeps: each level in its order (``unstack`` and ``levels`` show it, and
        # levels no row uses, which groupby shows), the codes into them, and the sort depth.
        levels = tuple(index_token(level) for level in idx.levels)
        codes = tuple(np.asarray(c) for c in idx.codes)
        return (kind, names, ("levels", levels), ("codes", codes), ("sortorder", idx.sortorder))
    # A datetime, timedelta or period index's frequency as an object: its short name leaves out a
    # custom business day's holidays and weekmask and a business hour's opening times.
    freq = _offset(np, idx.freq) if hasattr(idx, "freq") else None
    return (kind, names, _dtype(np, idx.dtype), _values(pd, np, idx._values), freq)


def series_token(s: Any) -> tuple[Any, ...]:
    """A Series: name, dtype, values, index, attrs and flags."""
    pd = sys.modules["pandas"]
    np = sys.modules["numpy"]
    kind = _kind(s)
    return (kind, s.name, _dtype(np, s.dtype), _values(pd, np, s._values),
            index_token(s.index), s.attrs, s.flags.allows_duplicate_labels, *_extra_state(s, kind))


def frame_token(df: Any, h: Any = None) -> tuple[Any, ...]:
    """A DataFrame: labels, index, attrs, flags and each column's dtype and values, in order.

    Numpy-backed columns are given as arrays, which the hasher's walk digests; Arrow-backed ones
    are digested here. Given the hasher ``h`` (as its handler), a large frame's arrays are
    digested on a helper thread meanwhile (:class:`~fncache.values.buffers.DigestsAhead`): the
    same key, sooner. Only where nothing the walk meets before them, and nothing hashed here
    meanwhile, can run user code (a label's or an object column's element's reducer, a
    subclass's ``_metadata``, an Arrow extension type): such code could change an array after
    its digest and before the walk meets it."""
    pd = sys.modules["pandas"]
    np = sys.modules["numpy"]
    held = _column_values(df)
    kind = _kind(df)
    labels, index = index_token(df.columns), index_token(df.index)
    dtypes = tuple(_dtype(np, v.dtype) for v in held)
    values = [_values(pd, np, v, arrow=False) for v in held]
    ahead = h if _may_digest_ahead(df, held, values) else None
    with DigestsAhead(ahead, np, (kind, labels, index, dtypes, tuple(values))):
        values = [_values(pd, np, v) if p is _ARROW else p for p, v in zip(values, held, strict=True)]
    columns = tuple(zip(dtypes, values, strict=True))
    return (kind, labels, index, columns, df.attrs, df.flags.allows_duplicate_labels,
            *_extra_state(df, kind))


def _may_digest_ahead(df: Any, held: list[Any], values: list[Any]) -> bool:
    """Whether a frame has arrays large enough to be digested ahead, and its Arrow-backed columns
    (digested meanwhile) run no user code (an extension type's methods)."""
    if len(df) < _AHEAD_ROWS:
        return False
    later = [v._pa_array.type for v, p in zip(held, values, strict=True) if p is _ARROW]
    if not later:
        return True
    from fncache.values.arrow import plain_type

    return all(plain_type(t) for t in later)


def _column_values(df: Any) -> list[Any]:
    """Each column's array as the frame holds it, in order (what its pickle keeps; for pandas' own
    frames what ``df.iloc[:, i]._values`` is, and its ``dtype`` the column's), taken from the
    frame's blocks without making a Series per column, which cost 20-35 us a column (a
    2,000-column frame of 15 MB hashed in 74 ms, 36 of them in ``iloc``). A subclass's
    ``_constructor_sliced`` does not run: a column it would cast is keyed as held. Through ``iloc``
    where pandas' block manager has no ``iget_values`` or it fails (another pandas)."""
    iget = getattr(getattr(df, "_mgr", None), "iget_values", None)
    if iget is not None:
        try:
            return [iget(i) for i in range(df.shape[1])]
        except Exception:  # a manager of another shape: the public way below
            pass
    return [df.iloc[:, i]._values for i in range(df.shape[1])]


def array_token(a: Any) -> tuple[Any, ...]:
    """A pandas extension array: class, dtype and values; any other library's (or a user's) by
    its class and what its own pickle keeps."""
    pd = sys.modules["pandas"]
    np = sys.modules["numpy"]
    kind = _kind(a)
    if not isinstance(kind, str):
        return (kind, _dtype(np, a.dtype), ("reduce", a.__reduce_ex__(5)))
    return (kind, _dtype(np, a.dtype), _values(pd, np, a), *_added_attributes(a))


# Attribute names pandas itself keeps on an instance of each of its array classes (what a new empty
# array of the class has: made from the class, never from the value at hand, whose own attributes a
# slice might carry), plus its caches and the read-only flag of views: keyed through the values, or
# not content. Filled per class on first use.
_OWN_ATTRIBUTES: dict[type, frozenset[str]] = {}


def _added_attributes(a: Any) -> tuple[Any, ...]:
    """Attributes set on an instance of a pandas array (``arr.unit = "m"``), which its pickle keeps
    and the values do not show; nothing (the token as before) when there are none."""
    state = getattr(a, "__dict__", None)
    if not state:
        return ()
    own = _OWN_ATTRIBUTES.get(type(a))
    if own is None:
        try:
            own = frozenset(vars(type(a)._from_sequence([], dtype=a.dtype)))
        except Exception:  # a class that cannot make an empty array: all but the caches is keyed
            own = frozenset()
        own = _OWN_ATTRIBUTES.setdefault(type(a), own | {"_cache", "_readonly"})
    added = sorted(name for name in state if name not in own)
    return (("attributes", tuple((name, state[name]) for name in added)),) if added else ()


_NOT_CONTENT = (
    ("block layout (one 2-D block per dtype or a block per column), strides",
     "layout: each column is keyed by its values"),
    ("the bytes under NA of masked arrays", "undefined: whatever an operation left there"),
    ("a MultiIndex's level order and codes when every level value is used",
     "the rows' values are keyed level by level"),
    ("the item cache, _flags' weak references", "caches of the frame"),
    ("_typ", "the class's own tag, fixed by the class (which is keyed)"),
    ("_metadata", "of pandas' own classes: names of what the token keys already (a Series' name);"
     " a subclass's names and their values are keyed"),
)


@register_lazy("pandas")
def _register() -> None:
    import pandas as pd  # type: ignore[import-untyped]

    register_type(pd.DataFrame, guarded(frame_token, hasher=True), not_content=_NOT_CONTENT)
    register_type(pd.Series, guarded(series_token), not_content=_NOT_CONTENT)
    register_type(pd.Index, guarded(index_token))
    register_type(pd.api.extensions.ExtensionArray, guarded(array_token))
