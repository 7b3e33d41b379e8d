"""The result's pickle, without the copies pickle makes of two kinds of large columns.

**Datetime arrays.** numpy gives an array's memory to pickle protocol 5 as an out-of-band buffer
only if the array exports a buffer, and ``datetime64`` and ``timedelta64`` arrays do not (PEP 3118
has no format for them): their bytes are copied into the pickle when it is made and out of it again
when it is loaded. The result pickler sends them, when C-contiguous and of at least
:data:`OUT_OF_BAND_MIN` bytes, as their bytes viewed as ``uint8``, rebuilt on load by the function
numpy's own pickles of numeric arrays name (``numpy._core.numeric._frombuffer`` in numpy 2): the
same dtype (unit and byte order included), shape and elements, backed by the loaded buffer, which
the array holds as a numeric one does (writable, or read-only if the array was; a read-only memory
map with ``mmap_mode="r"``). Readers need nothing numpy's own pickles do not.

**Arrow-backed pandas arrays** (pandas 3's default string columns, ``int64[pyarrow]``...). pandas'
``__getstate__`` keeps ``combine_chunks()`` of the column, a copy of all of it even when it has one
chunk (it undoes a slice's slack, which pyarrow's pickle would keep). For a column of one compact
chunk the state is made by pandas' own ``__getstate__`` run on a stand-in whose
``combine_chunks()`` is that chunk (:func:`_reduce_arrow`): the same state, the chunk's own buffers
out of band. A 1e6-row frame of ten columns (one datetime, two string columns: 8 + 30 MB of 75 MB)
pickled in 12.9 ms before and in 1.9 ms with both (medians, the pages touched before each).

Every other object is pickled exactly as ``pickle.dumps`` pickles it: the table holds ``copyreg``'s
entries as they stand at each call, and a reducer a user registered there for these types is kept.
The table is used only for values that may hold such arrays at their top (:func:`_may_hold`):
before Python 3.13 the C pickler raises and clears a ``KeyError`` for each object whose type a
table lacks (a list of 300,000 dates pickled 20% slower), and a small result would pay for the
pickler's construction (about 1 us).
"""

from __future__ import annotations

import copyreg
import io
import pickle
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["OUT_OF_BAND_MIN", "dumps"]

#: Buffers smaller than this in total stay inside the pickle: not worth a separate, aligned region.
OUT_OF_BAND_MIN = 64 * 1024
#: Packages whose values may hold such arrays (a frame's column, an index, a variable).
_HOLDERS = frozenset({"numpy", "pandas", "xarray", "geopandas"})
#: Types that hold nothing.
_PLAIN = frozenset({int, float, complex, str, bytes, bool, type(None)})
_BUILTIN = _PLAIN | {dict, list, tuple, set, frozenset}
#: A dict, list or tuple of at most this many items is looked into, one level down.
_LOOK_INTO = 64
_rebuild: list[Any] = []  # numpy's rebuilder of out-of-band arrays, once known
_arrow: list[Any] = []  # pandas' Arrow-backed array classes, once known
_NEWOBJ: Any = copyreg.__newobj__  # type: ignore[attr-defined]
_OBJECT: Any = object


def _ndarray() -> Any:
    """numpy's ``ndarray`` if numpy is imported (no array exists before), else None."""
    return getattr(sys.modules.get("numpy"), "ndarray", None)


def _holder(kind: type) -> bool:
    """Whether ``kind`` or a class it derives from (a user's DataFrame subclass) is one of theirs."""
    for cls in kind.__mro__:
        module = getattr(cls, "__module__", None)
        if isinstance(module, str) and module.partition(".")[0] in _HOLDERS:
            return True
    return False


def _may_hold(value: Any) -> bool:
    """Whether ``value`` is, or directly holds, a value of numpy, pandas, xarray or geopandas."""
    kind = type(value)
    if kind in _PLAIN:
        return False
    if kind is dict or kind is list or kind is tuple:
        if len(value) > _LOOK_INTO:
            return False
        for item in value.values() if kind is dict else value:
            if type(item) not in _BUILTIN and _holder(type(item)):
                return True
        return False
    return _holder(kind)


def _reduce_ndarray(a: Any) -> Any:
    """An ``ndarray`` (of exactly that type: the table is read by type) -> its reduction."""
    if a.dtype.kind in "mM" and a.nbytes >= OUT_OF_BAND_MIN and a.flags.c_contiguous:
        if not _rebuild:
            _rebuild.append(type(a)(0, "u1").__reduce_ex__(5)[0])
        return _rebuild[0], (pickle.PickleBuffer(a.reshape(-1).view("u1")), a.dtype, a.shape, "C")
    return a.__reduce_ex__(5)


class _OneChunk:
    """Stands for an Arrow-backed pandas array's one-chunk ``ChunkedArray`` in pandas' own
    ``__getstate__``, which keeps ``self._pa_array.combine_chunks()``: here that is the chunk."""

    __slots__ = ("chunk",)

    def __init__(self, chunk: Any) -> None:
        self.chunk = chunk

    def combine_chunks(self) -> Any:
        return self.chunk


def _flat(pa: Any, t: Any) -> bool:
    """Whether Arrow type ``t`` keeps its slots in flat buffers that a slice's size measures:
    fixed-width values, strings and binaries. Nested types (whose children a slice may not
    trim, or share), views, unions, dictionaries and extension types are not."""
    is_ = pa.types
    return bool(is_.is_boolean(t) or is_.is_integer(t) or is_.is_floating(t) or is_.is_decimal(t)
                or is_.is_temporal(t) or is_.is_string(t) or is_.is_large_string(t)
                or is_.is_binary(t) or is_.is_large_binary(t) or is_.is_fixed_size_binary(t))


def _one_compact_chunk(chunked: Any) -> Any:
    """The chunk of a one-chunk Arrow array of a flat type whose buffers hold at most 1/64 more
    than its own slots, else None (a slice's slack, which pyarrow's pickle would keep: what
    pandas' ``combine_chunks`` is for)."""
    try:
        if chunked.num_chunks != 1:
            return None
        chunk = chunked.chunk(0)
        if not _flat(sys.modules["pyarrow"], chunk.type):
            return None
        used, total = int(chunk.nbytes), int(chunk.get_total_buffer_size())
    except Exception:  # not what an Arrow-backed pandas array holds
        return None
    return chunk if total - used <= used // 64 else None


def _reduce_arrow(arr: Any) -> Any:
    """An Arrow-backed pandas array (a pandas 3 string column) -> what its own pickle keeps,
    without the copy of all of it that pandas' ``__getstate__`` makes when it combines the
    chunks of an array that has one, compact chunk (:func:`_one_compact_chunk`). pandas' own
    ``__getstate__`` makes the state, run on a stand-in whose ``combine_chunks()`` is that chunk;
    anything else it does (another pandas) gives the plain reduction."""
    kind: Any = type(arr)
    chunk = _one_compact_chunk(getattr(arr, "_pa_array", None))
    if chunk is not None and _pickles_by_state(kind):
        try:
            stand_in = object.__new__(kind)
            stand_in.__dict__.update(arr.__dict__, _pa_array=_OneChunk(chunk))
            state = kind.__getstate__(stand_in)
        except Exception:  # (a class with slots, or whatever another pandas does)
            state = None
        if type(state) is dict and state.get("_pa_array") is chunk:
            return _NEWOBJ, (kind,), state, None, None
    return arr.__reduce_ex__(5)


def _pickles_by_state(kind: Any) -> bool:
    """Whether ``kind``'s instances reduce as ``object`` reduces them: by ``__getstate__``."""
    return kind.__reduce_ex__ is _OBJECT.__reduce_ex__ and kind.__reduce__ is _OBJECT.__reduce__


def _arrow_types() -> list[type]:
    """pandas' Arrow-backed array classes (found once pandas' ``arrays`` module is there)."""
    if not _arrow:
        base = getattr(getattr(sys.modules["pandas"], "arrays", None), "ArrowExtensionArray", None)
        if not isinstance(base, type):  # pandas still importing, or one without Arrow arrays
            return []
        found, todo = [], [base]
        while todo:
            kind = todo.pop()
            todo.extend(kind.__subclasses__())
            module = getattr(kind, "__module__", None)
            if isinstance(module, str) and module.startswith("pandas."):
                found.append(kind)
        _arrow.extend(found)
    return _arrow


def _table() -> dict[Any, Any]:
    table = copyreg.dispatch_table.copy()
    table.setdefault(_ndarray(), _reduce_ndarray)
    if "pandas" in sys.modules:
        for kind in _arrow_types():
            table.setdefault(kind, _reduce_arrow)
    return table


class _Pickler(pickle.Pickler):
    # Read once by the C pickler as it is built: copyreg's table of that moment, plus ours.
    dispatch_table = property(lambda self: _table())


def dumps(value: Any, buffer_callback: Callable[[pickle.PickleBuffer], Any]) -> bytes:
    """``pickle.dumps(value, protocol=5, buffer_callback=buffer_callback)``, with large datetime
    arrays out of band and Arrow-backed pandas arrays not copied, where ``value`` may hold them."""
    if not _may_hold(value) or _ndarray() is None:
        return pickle.dumps(value, protocol=5, buffer_callback=buffer_callback)
    f = io.BytesIO()
    _Pickler(f, 5, buffer_callback=buffer_callback).dump(value)
    return f.getvalue()
