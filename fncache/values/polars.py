"""Canonical keys for polars frames and series.

polars pickles through its IPC writer (hundreds of milliseconds for a 10-column million-row frame),
so a Series is keyed as its name, its polars dtype (``repr``: every parameter, including a
Categorical's named category set, which the Arrow export drops) and the logical content of its
zero-copy Arrow export (see :mod:`fncache.values.arrow`: slices, chunking, views and validity
bitmaps do not count). A DataFrame is its columns in order.

A Categorical or Enum column is exported as its codes and the categories they index (the Arrow
export would renumber the codes and copy each category: most of the time such a column takes to
hash); it is keyed as the same Arrow dictionary column either way, by its decoded values. A
Categorical whose codes reach past ``_MAX_CODES`` (a large shared category set) takes the export.

Two dtypes do not go through Arrow: ``Object`` columns export object *pointers*, so they are keyed
by their elements' content; and a dtype the Arrow export refuses (``Int128``) is keyed by its
Python values.
"""

from __future__ import annotations

import sys
from typing import Any

from fncache.values.registry import guarded, register_lazy, register_type

__all__ = ["polars_token"]

# A Categorical's categories are looked up one by one, up to its largest code: beyond this many,
# the Arrow export (a pass over the codes, a copy of the used categories) is cheaper.
_MAX_CODES = 1 << 12


def _has_object(pl: Any, dtype: Any) -> bool:
    if dtype == pl.Object:
        return True
    inner = getattr(dtype, "inner", None)
    if inner is not None and _has_object(pl, inner):
        return True
    return any(_has_object(pl, f.dtype) for f in getattr(dtype, "fields", None) or ())


def _categorical(pl: Any, s: Any) -> Any:
    """A Categorical or Enum series as an Arrow DictionaryArray of its codes and the categories
    they index (strings as ``to_arrow`` gives them: large strings); None to take the export."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = s.to_physical().to_arrow()
    if isinstance(s.dtype, pl.Enum):  # codes index the Enum's fixed category list
        return pa.DictionaryArray.from_arrays(codes, s.dtype.categories.to_arrow())
    top = pc.max(codes).as_py()
    count = 0 if top is None else top + 1
    if count > _MAX_CODES:
        return None
    found = s.dtype.categories  # a Categories: a category by its code
    try:
        names = [found[i] for i in range(count)]
    except IndexError:  # a code reserved by a concurrent query, not yet named
        return None
    return pa.DictionaryArray.from_arrays(codes, pa.array(names, pa.large_string()))


def _to_arrow(pl: Any, s: Any) -> Any:
    """The Arrow form of a Series. polars keeps strings and binaries as views: exported as views
    they are not copied, and the native kernel reads them as the plain arrays they stand for
    (the same key); without it, polars' own conversion to plain arrays is the faster one."""
    from fncache.values import arrow_streams

    if arrow_streams.speedups is not None and s.dtype in (pl.String, pl.Binary):
        level = getattr(pl, "CompatLevel", None)  # (polars >= 1.1)
        if level is not None:
            return s.to_arrow(compat_level=level.newest())
    return s.to_arrow()


def _series(pl: Any, s: Any) -> tuple[Any, ...]:
    head: tuple[Any, ...] = (s.name, repr(s.dtype), len(s))
    flags = s.flags
    asc, desc = bool(flags.get("SORTED_ASC")), bool(flags.get("SORTED_DESC"))
    if (asc or desc) and not _sorted_as_flagged(pl, s, desc):
        # A sortedness flag is kept by the pickle, and polars trusts it: ``max`` of a series
        # flagged sorted is its last value. One the values bear out strictly changes no result
        # (and how a series was made decides whether it has one); any other is content.
        head = (*head, ("sorted", asc, desc))
    if _has_object(pl, s.dtype):
        return (*head, "objects", s.to_list())
    arrow = _categorical(pl, s) if isinstance(s.dtype, (pl.Categorical, pl.Enum)) else None
    try:
        if arrow is None:
            arrow = _to_arrow(pl, s)
    except Exception:  # a dtype without an Arrow form (Int128, UInt128)
        return (*head, "values", s.to_list())
    from fncache.values.arrow import chunks_content

    chunks = arrow.chunks if hasattr(arrow, "num_chunks") else [arrow]
    return (*head, "arrow", chunks_content(chunks))


def _frame_columns(pl: Any, df: Any) -> tuple[Any, ...]:
    """Each column of a DataFrame as :func:`_series` keys it: a large frame's on two threads
    (:func:`fncache.values.ahead.map_ahead`, each column converted and digested whole by one
    thread: one column's Arrow form held at a time per thread) where every dtype is a plain one,
    whose conversion runs no user code (not an object, nor an extension type)."""
    from fncache.values import ahead

    columns = df.get_columns()
    sizes = [s.estimated_size() for s in columns]
    if sum(sizes) >= ahead.MIN_BYTES and all(_plain_dtype(pl, s.dtype) for s in columns):
        return tuple(ahead.map_ahead(lambda s: _series(pl, s), columns, sizes))
    return tuple(_series(pl, s) for s in columns)


def _plain_dtype(pl: Any, dtype: Any) -> bool:
    """Numbers, dates and times, strings, binaries, booleans, categoricals and enums, decimals, nulls,
    and lists, arrays and structs of them."""
    if dtype.is_numeric() or dtype.is_temporal() or dtype in (pl.String, pl.Binary, pl.Boolean,
                                                             pl.Null):
        return True
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        return True
    if isinstance(dtype, (pl.List, pl.Array)):
        return _plain_dtype(pl, dtype.inner)
    if isinstance(dtype, pl.Struct):
        return all(_plain_dtype(pl, f.dtype) for f in dtype.fields)
    return False


def _sorted_as_flagged(pl: Any, s: Any, descending: bool) -> bool:
    """Whether the values of ``s`` are sorted as its flag says, read without the flag (element
    by element comparisons): nulls all at the start, each value after the previous one. False
    where that cannot be told for sure (a NaN, a dtype whose comparison may not be the order
    polars sorts it in: categoricals, nested types)."""
    dtype = s.dtype
    if not (dtype.is_numeric() or dtype.is_temporal() or dtype in (pl.String, pl.Boolean)):
        return False
    values = _nulls_first(s)
    if values is None or (dtype.is_float() and values.is_nan().any()):
        return False
    before, after = values.head(-1), values.tail(-1)
    # Strictly: with ties, or 0.0 beside -0.0, the flag does change results (``arg_max`` takes
    # the last of equal values, ``min`` the first).
    return bool((before > after if descending else before < after).all())


def _nulls_first(s: Any) -> Any:
    """``s`` without its nulls if they are all at its start (where a flag puts them); else None."""
    nulls = s.null_count()
    if not nulls:
        return s
    if not s.is_null().head(nulls).all():
        return None
    return s.drop_nulls()


def _subclass_state(pl: Any, obj: Any, base: type) -> tuple[Any, ...]:
    """A user's subclass of a polars class: the class (keyed by its code) and the attributes it
    sets beside polars' own handle (sorted); nothing for polars' own classes."""
    if type(obj) is base:
        return ()
    extra = tuple(sorted((k, v) for k, v in vars(obj).items() if k not in ("_df", "_s")))
    return (type(obj), extra)


def polars_token(obj: Any) -> Any:
    """A polars DataFrame or Series by names, dtypes and logical values (a subclass adds its class
    and its own attributes)."""
    pl = sys.modules["polars"]
    if isinstance(obj, pl.DataFrame):
        return ("polars.DataFrame", obj.height, _frame_columns(pl, obj),
                *_subclass_state(pl, obj, pl.DataFrame))
    if isinstance(obj, pl.Series):
        return ("polars.Series", *_series(pl, obj), *_subclass_state(pl, obj, pl.Series))
    return NotImplemented


@register_lazy("polars")
def _register() -> None:
    import polars as pl

    register_type((pl.DataFrame, pl.Series), guarded(polars_token), not_content=(
        ("chunking, slices, string views, validity bitmaps without nulls",
         "layout: the Arrow export's logical values are keyed"),
    ))
