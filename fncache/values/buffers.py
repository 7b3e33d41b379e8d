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

import sys
from typing import Any

import xxhash

from fncache._hasher import Token
from fncache.values import ahead
from fncache.values.instances import slot_names
from fncache.values.registry import guarded, is_user_code, register_lazy, register_type, token

__all__ = ["DigestsAhead", "c_order_digest", "class_token", "masked_array_token", "ndarray_token"]

# Bytes per block when a non-contiguous array is put in C order piece by piece (cache-sized).
_BLOCK_BYTES = 1 << 22


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


def _flat(np: Any, a: Any) -> Any:
    """A C-contiguous array's bytes, in order, as one flat view (no copy)."""
    return a.reshape(-1).view(np.uint8) if a.size else b""


def c_order_digest(np: Any, a: Any) -> tuple[int, bytes]:
    """(byte count, xxh3-128) of ``a``'s elements in C order, whatever its memory layout."""
    if a.flags.c_contiguous:
        flat = _flat(np, a)
        return len(flat), xxhash.xxh3_128_digest(flat)
    h = xxhash.xxh3_128()
    n = 0
    for piece in _pieces(np, a):
        flat = piece.reshape(-1).view(np.uint8)
        h.update(flat)
        n += flat.size
    return n, h.digest()


# A DataFrame's arrays (each of at least AHEAD_EACH bytes, ahead.MIN_BYTES in all) are digested
# ahead on a helper thread (DigestsAhead).
AHEAD_EACH = 1 << 20


# What may stand between a frame's arrays in the walk when they are digested ahead: values whose
# pickling runs no user code (the interpreter's, numpy's, pandas' and time zones').
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})
_ZONE_LIBRARIES = frozenset({"datetime", "zoneinfo", "pytz", "dateutil"})
_CLASS_LIBRARIES = frozenset({"numpy", "pandas"})


def _library_leaf(np: Any, part: Any) -> bool:
    """A numpy dtype, scalar or class, a pandas class (an offset's), a library's time zone."""
    if isinstance(part, np.dtype):
        return part.metadata is None and not part.hasobject
    if isinstance(part, np.generic):
        return not isinstance(part, np.void) and type(part).__module__ == "numpy"
    top = (getattr(part, "__module__", None) or "").partition(".")[0]
    if isinstance(part, type):
        return top in _CLASS_LIBRARIES
    return type(part).__module__.partition(".")[0] in _ZONE_LIBRARIES and hasattr(part, "utcoffset")


def _gather(np: Any, part: Any, found: dict[int, tuple[Any, Any]], depth: int) -> bool:
    """Collect into ``found`` the exact ndarrays in ``part``'s nested tuples and short lists that
    :func:`ndarray_token` digests as they lie (C-contiguous numbers, dates and strings: not objects,
    records or bools), with their bytes. False if ``part`` holds anything else (an object array
    but a short one of plain values, a user's class or object, a long list of elements): its
    pickling could run code that changes an array between its digest and the walk, so nothing may
    be digested ahead."""
    t = type(part)
    if t in _PLAIN:
        return True
    if t is tuple or (t is list and len(part) <= 64):
        return depth < 8 and all(_gather(np, p, found, depth + 1) for p in part)
    if t is np.ndarray:
        return _gather_array(np, part, found)
    return _library_leaf(np, part)


def _gather_array(np: Any, a: Any, found: dict[int, tuple[Any, Any]]) -> bool:
    dt = a.dtype
    if dt.hasobject:  # plain only if few and plain (an older pandas' column labels)
        return (a.size <= 4096 and dt.names is None
                and all(type(x) in _PLAIN for x in a.reshape(-1).tolist()))
    if a.nbytes >= AHEAD_EACH and a.flags.c_contiguous and dt.names is None and dt != np.bool_:
        found[id(a)] = (a, _flat(np, a))
    return True


class DigestsAhead:
    """``with DigestsAhead(h, np, parts): ...``: while the block runs on this thread (a frame's
    Arrow-backed columns hashed), a helper thread digests the large arrays in ``parts``
    (:class:`fncache.values.ahead.Ahead`); at its end every digest is left in ``h.known``, taken by
    the walk when it meets the array (:func:`_ndarray_token`; once: an array met again is digested
    again, as the walk would). The digests are those the walk would make: keys do not depend on
    whether a helper ran (one CPU, a small value: the walk digests as before).

    ``parts`` is what the walk meets up to the last of the arrays; the block must run no code
    that could change them. Where ``parts`` holds anything whose pickling could (see
    :func:`_gather`), nothing is digested ahead. Nothing happens unless ``h`` is a hasher.
    """

    __slots__ = ("h", "jobs", "work")

    def __init__(self, h: Any, np: Any, parts: Any) -> None:
        self.h = h
        self.work: ahead.Ahead | None = None
        self.jobs: list[tuple[Any, Any]] = []
        if getattr(h, "known", None) is None or ahead.usable_cpus() < 2:
            return
        found: dict[int, tuple[Any, Any]] = {}
        if (_gather(np, parts, found, 0)
                and sum(len(f) for _, f in found.values()) >= ahead.MIN_BYTES):
            self.jobs = list(found.values())

    def __enter__(self) -> DigestsAhead:
        if self.jobs:
            work = ahead.Ahead(xxhash.xxh3_128_digest, [flat for _, flat in self.jobs])
            self.work = work.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        work, self.work = self.work, None
        if work is None:
            return
        work.__exit__(exc_type, exc, tb)
        if exc_type is None:
            known = self.h.known
            for (a, flat), d in zip(self.jobs, work.results, strict=True):
                known[id(a)] = (a, len(flat), d)


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
        if dt.names is not None:
            # Each field as an array of its own: tolist() would make a float32 field's values
            # Python floats, quieting a signaling NaN (its payload is content, as elsewhere).
            return ("ndarray-object-fields", dt, a.shape,
                    tuple(ndarray_token(a[name]) for name in dt.names))
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
    kind = class_token(type(a), "numpy")
    head: tuple[Any, ...] = (kind, ndarray_token(data), ndarray_token(mask) if masked else None,
                             a.fill_value, bool(a.hardmask))
    base, skip = _data_class(np, a)
    if base is not np.ndarray:
        # The class its data is a view of (``m.data``: a user's ndarray subclass; its pickle keeps
        # it), by its code.
        head = (*head, ("baseclass", class_token(base, "numpy")))
    # Any other attribute counts, in sorted order: a subclass's own, and those numpy copies into
    # every masked array from the array it was made of (``fs`` of a ``Signal``), which a method
    # or ``m.data`` reads. (numpy's pickle would drop them.)
    extra = tuple(sorted((k, v) for k, v in vars(a).items() if k not in skip))
    return (*head, extra) if extra else head


def _data_class(np: Any, a: Any) -> tuple[Any, frozenset[str]]:
    """The class a masked array's data is a view of, and the attributes of its ``__dict__`` that
    are not content: over a memory map, where its bytes live is not (as for the memmap itself)."""
    base = getattr(a, "_baseclass", np.ndarray)
    if isinstance(base, type) and issubclass(base, np.memmap):
        return (np.ndarray if base is np.memmap else base), _MASKED_STATE | frozenset(_MEMMAP_STATE)
    return base, _MASKED_STATE


# What every MaskedArray's ``__dict__`` holds; keyed above or bookkeeping (see the registration).
_MASKED_STATE = frozenset({"_baseclass", "_basedict", "_fill_value", "_hardmask", "_isfield",
                           "_mask", "_optinfo", "_sharedmask"})


# ---------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------


def _ndarray_token(h: Any, a: Any) -> Any:
    if h.cyclic and a.dtype.hasobject:
        return _cyclic_object_token(a)
    if h.known:
        known = h.known.pop(id(a), None)  # digested ahead (DigestsAhead): as below, once
        if known is not None and known[0] is a:
            return token("ndarray", a.dtype, a.shape, known[1], known[2])
    return token(*ndarray_token(a))


def _cyclic_object_token(a: Any) -> Any:
    """An object array in a value with a cycle (the hasher's memoizing pass): its elements follow
    the array's own reduction, as a list's follow the list, so the pickler has memoized the array
    when an element is, or holds, the array itself (``a[0] = a``), and writes a reference to it.
    Elements in the reduction's arguments would reach the array again before it is memoized: a
    recursion without end, which made such arrays unhashable."""
    dt = a.dtype
    if dt.names is not None:  # field by field, as ndarray_token: numeric ones by their bytes
        return (Token, ("ndarray-object-fields-cyclic", dt, a.shape), None,
                iter([a[n] if dt[n].hasobject else ndarray_token(a[n]) for n in dt.names]))
    return (Token, ("ndarray-object-cyclic", dt, a.shape), None, iter(a.reshape(-1).tolist()))


def _ndarray_subclass_token(h: Any, a: Any) -> Any:
    """An ndarray, or a user's subclass of it that pickles as numpy pickles one (``class
    Signal(np.ndarray)`` setting ``self.fs``): its class by its code and the array, and its own
    attributes (``__dict__`` and slots, sorted) as the state, which numpy's pickle of a subclass
    drops (``Signal(x, fs=100)`` and ``Signal(x, fs=200)`` had one key: a wrong hit). A subclass
    with a ``__reduce__``, ``__reduce_ex__`` or ``__getstate__`` of its own declares its state:
    its pickle decides, as do numpy's and other libraries' subclasses (``np.matrix``, astropy)."""
    np = sys.modules["numpy"]
    t = type(a)
    if t is np.ndarray:
        return _ndarray_token(h, a)
    if not is_user_code(t) or not _numpy_reduce(t, np):
        return NotImplemented
    attrs = dict(getattr(a, "__dict__", None) or {})
    if isinstance(a, np.memmap):  # where its bytes live is not content, as for a memmap
        for name in _MEMMAP_STATE:
            attrs.pop(name, None)
    attrs.update((n, getattr(a, n)) for n in slot_names(t) if hasattr(a, n))
    # The attributes as the state (after the array), a dict in sorted order made once per hash: one
    # that holds the array itself is then met again as the same dict, a cycle the pickler finds
    # (and its cyclic pass closes with its memo), as for an instance (instances.instance_token).
    state = h.states.setdefault(id(a), (a, dict(sorted(attrs.items()))))[1]
    return (*token("ndarray-subclass", t, ndarray_token(a.view(np.ndarray))), state)


# What numpy's memmap keeps in an instance's __dict__: the open map and where it came from.
_MEMMAP_STATE = ("_mmap", "filename", "offset", "mode")


def _numpy_reduce(t: type, np: Any) -> bool:
    """Whether ``t`` pickles by ndarray's own reduce (no reducer or state of its own)."""
    return (getattr(t, "__reduce__", None) is np.ndarray.__reduce__
            and getattr(t, "__reduce_ex__", None) is np.ndarray.__reduce_ex__
            and getattr(t, "__getstate__", object.__getstate__) is object.__getstate__)


def _ufunc_token(h: Any, obj: Any) -> Any:
    """``np.frompyfunc(f, nin, nout)``: the ufunc holds ``f``, which counts by its code. Other
    ufuncs (``np.add``) pickle by name, as numpy does."""
    import gc

    held = [r for r in gc.get_referents(obj) if callable(r)]
    if len(held) != 1:
        return NotImplemented
    return token("frompyfunc", obj.nin, obj.nout, obj.identity, held[0])


_LAYOUT = (("strides, memory order, offset, read-only flag, where the bytes live (memmap)",
            "layout: the elements are keyed in C order"),
           ("padding bytes of structured dtypes", "undefined bytes"))


@register_lazy("numpy")
def _register() -> None:
    import numpy as np

    register_type(np.memmap, _ndarray_token, exact=True, final=True, not_content=_LAYOUT)
    register_type(np.ndarray, _ndarray_subclass_token, not_content=_LAYOUT)
    register_type(np.ufunc, _ufunc_token, exact=True, final=True)


@register_lazy("numpy.ma")  # (18 ms to import: only once a masked array arrives)
def _register_masked() -> None:
    import numpy.ma

    register_type(numpy.ma.MaskedArray, guarded(masked_array_token), not_content=(
        ("the data under masked slots", "undefined: masked_array.filled() decides"),
        ("the mask when nothing is masked", "nomask and an all-False mask are one value"),
        ("_sharedmask, _isfield, _baseclass", "bookkeeping of views, not of the values"),
    ))
