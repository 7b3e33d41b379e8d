"""The result's pickle, with the large arrays numpy keeps in band sent out of band.

numpy gives an array's memory to pickle protocol 5 as an out-of-band buffer only if the array
exports a buffer, and ``datetime64`` and ``timedelta64`` arrays do not (PEP 3118 has no format for
them): their bytes are copied into the pickle when it is made and out of it again when it is
loaded. A DataFrame's datetime column is such an array: 8 MB of a 1e6-row frame of ten columns,
whose pickle took 12.1 ms with it in band and 7.3 ms without, its load 3.6 ms and 1.2 ms (medians,
the pages touched before each).

The result pickler sends those arrays, when C-contiguous and of at least :data:`OUT_OF_BAND_MIN`
bytes, as their bytes viewed as ``uint8``, rebuilt on load by the function numpy's own pickles of
numeric arrays name (``numpy._core.numeric._frombuffer`` in numpy 2): the same dtype (unit and
byte order included), shape and elements, backed by the loaded buffer, which the array holds as a
numeric one does (writable, or read-only if the array was; a read-only memory map with
``mmap_mode="r"``). Readers need nothing numpy's own pickles do not.

Every other object is pickled exactly as ``pickle.dumps`` pickles it: the table holds ``copyreg``'s
entries as they stand at each call, and a reducer a user registered there for ``ndarray`` is kept.
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
#: Packages whose values may hold datetime arrays (a frame's column, an index, a variable).
_HOLDERS = frozenset({"numpy", "pandas", "xarray", "geopandas"})
#: Types that hold nothing.
_PLAIN = frozenset({int, float, complex, str, bytes, bool, type(None)})
_BUILTIN = _PLAIN | {dict, list, tuple, set, frozenset}
#: A dict, list or tuple of at most this many items is looked into, one level down.
_LOOK_INTO = 64
_rebuild: list[Any] = []  # numpy's rebuilder of out-of-band arrays, once known


def _ndarray() -> Any:
    """numpy's ``ndarray`` if numpy is imported (no array exists before), else None."""
    return getattr(sys.modules.get("numpy"), "ndarray", None)


def _holder(kind: type) -> bool:
    module = getattr(kind, "__module__", None)
    return isinstance(module, str) and module.partition(".")[0] in _HOLDERS


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


def _table() -> dict[Any, Any]:
    table = copyreg.dispatch_table.copy()
    table.setdefault(_ndarray(), _reduce_ndarray)
    return table


class _Pickler(pickle.Pickler):
    # Read once by the C pickler as it is built: copyreg's table of that moment, plus ndarray.
    dispatch_table = property(lambda self: _table())


def dumps(value: Any, buffer_callback: Callable[[pickle.PickleBuffer], Any]) -> bytes:
    """``pickle.dumps(value, protocol=5, buffer_callback=buffer_callback)``, with large datetime
    and timedelta arrays out of band where ``value`` may hold them."""
    if not _may_hold(value) or _ndarray() is None:
        return pickle.dumps(value, protocol=5, buffer_callback=buffer_callback)
    f = io.BytesIO()
    _Pickler(f, 5, buffer_callback=buffer_callback).dump(value)
    return f.getvalue()
