"""Canonical hashing: any Python value -> a 128-bit xxh3 digest of its *content*.

How: a subclass of cloudpickle's C-accelerated ``Pickler`` writes into a streaming xxh3-128 digest.
Plain data (ints, strings, lists, dicts, tuples) stays on the C fast path; only a few kinds of object
take a Python detour. What makes the stream canonical, and why each step is needed:

* **No memo.** The C pickler memoizes ``str``/``bytes``/tuples by object identity, so the same value
  pickles differently depending on sharing and string interning (cloudpickle #453, #524). We pickle in
  the pickler's "fast" mode, which writes no memo at all: equal values give equal bytes whatever their
  identity. Fast mode cannot express cycles; a cyclic value is re-hashed by a second, slower pickler
  that keeps a memo but feeds strings and bytes through ``persistent_id`` as fresh objects, so their
  identity still cannot leak into the stream.
* **Sets in a canonical order.** The C pickler saves exact ``set``/``frozenset`` before it consults
  ``reducer_override``; only ``persistent_id`` is asked first for every object. So sets are replaced
  there by their sorted elements (or, for mixed or unorderable elements, their sorted element digests).
* **Functions, classes and code by fingerprint.** cloudpickle pickles importable functions by name and
  dynamic ones with file names, line numbers and random class-tracker ids. ``reducer_override`` instead
  replaces them with the digest of :mod:`fncache.code.fingerprint`, which covers code, constants, defaults,
  closures, the globals read and the user helpers and classes reached, and nothing positional.
* **Wrappers by what they wrap.** A library's callable object with a user ``__wrapped__``
  (``functools.cache``/``lru_cache``, which pickle by name; numba dispatchers, which pickle with a
  per-process id) is its type, the wrapped code's fingerprint and (for a dispatcher) its compile
  options; a ufunc made by ``np.frompyfunc`` (which cannot be pickled) is the function it holds.
  Wherever such an object is reached, in a global or deep in a value, an edit of its code counts.
* **Buffers straight into the digest.** Arrays, tensors and tables are keyed by canonical tokens
  (:mod:`fncache.values.buffers`): their buffers are digested where they lie, in a layout-free form (C order
  for numpy and torch, logical values for Arrow), so strides, offsets, chunking, read-only flags and
  memory maps never change a key while dtype, shape, nulls and values do. Any other protocol-5 buffer
  is digested as its bytes alone (``persistent_id``): the pickler would otherwise record its read-only
  flag.
* **Classes by where they live.** A class (an argument, an instance's type, a class attribute) is its
  fingerprint plus its module, so ``a.NotFound`` and ``b.NotFound`` with one body stay apart. Classes
  of the *root* module (the memoized function's own, passed as ``root``) leave the module out, so a
  script run as ``__main__`` and the same file imported share keys.
* **Extension points** (:func:`register`, ``__fncache_token__``, :func:`ref`) run inside
  ``reducer_override``/``persistent_id``, never through ``dispatch_table`` (which the C pickler reads
  once at construction, so late registrations would be silently ignored).

What this module is *not*: a serialiser. Nothing it writes is ever read back.
"""

from __future__ import annotations

import io
import pathlib
import pickle
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import cloudpickle
import xxhash

from fncache import _forks
from fncache._errors import ArgumentTypeError, UnhashableArgument
from fncache._hasher import Token

__all__ = ["digest", "hash", "ref", "register", "unregister"]

_PROTOCOL = 5
_new_digest = xxhash.xxh3_128
_digest_of = xxhash.xxh3_128_digest

# Types whose order is total and whose sort is deterministic; a set made only of one of these is
# sorted directly (fast), any other set by the digests of its elements.
_SORTABLE = frozenset({str, bytes, int})

_MISSING = object()

# The marker of tokens (pickled by reference: its module and name are part of the key format).
_Token = Token


# ---------------------------------------------------------------------------------------------
# Extension points
# ---------------------------------------------------------------------------------------------

_registry: dict[type, Callable[[Any], Any]] = {}
_registry_lock = threading.Lock()


def _fresh_registry_lock() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()


_forks.on_fork(_fresh_registry_lock)
# Resolved handler per concrete type (None: let pickle do its default). Cleared on (un)register.
_handlers: dict[type, Callable[[_Hasher, Any], Any] | None] = {}
_refs: dict[int, tuple[Any, Any]] = {}

# The C pickler handles these itself before reducer_override is called; a registration would be
# silently ignored, so it is refused instead.
_NOT_REGISTRABLE = (str, bytes, int, float, bool, type(None), dict, list, tuple, set, frozenset,
                    bytearray)


def register(type_: type, fn: Callable[[Any], Any]) -> None:
    """Hash values of ``type_`` (and its subclasses) by ``fn(value)`` instead of their pickle.

    ``fn`` returns any hashable-by-fncache token, e.g. a database handle's URL or a model's weights.
    The value's own class (a subclass, not the registered type) is mixed in, so tokens of different
    types never collide. Takes effect at
    once, in this process; register in an imported module so child processes register too.
    """
    if not isinstance(type_, type):
        raise ArgumentTypeError(f"register: type_ must be a class, got {type(type_).__name__}")
    if not callable(fn):
        raise ArgumentTypeError(f"register: fn must be callable, got {type(fn).__name__}")
    if type_ in _NOT_REGISTRABLE:
        raise ArgumentTypeError(f"register: {type_.__name__} is hashed by value and cannot be overridden")
    with _registry_lock:
        _registry[type_] = fn
        _handlers.clear()


def unregister(type_: type) -> None:
    """Undo :func:`register` for ``type_``; no error if it was not registered."""
    with _registry_lock:
        _registry.pop(type_, None)
        _handlers.clear()


def ref(obj: Any, token: Any) -> Any:
    """Key ``obj`` by ``token`` instead of its content; returns ``obj`` itself.

    For objects that are large, external or impossible to pickle (a database connection, a loaded
    model): ``f(fncache.ref(model, "resnet50-v2"))``. The mapping holds while ``obj`` lives (or, for
    objects that cannot be weakly referenced, until the process ends). The token must change whenever
    the object's meaning does: fncache cannot check it.
    """
    if isinstance(obj, (str, bytes, int, float, complex, tuple, frozenset)) or obj is None:
        # Small ints, strings and the like are shared by identity across the whole process: keying
        # one object by a token would key every equal value by it.
        raise ArgumentTypeError(f"ref: a {type(obj).__name__} is hashed by value; pass it as it is")
    key = id(obj)
    try:
        weakref.finalize(obj, _refs.pop, key, None)
        _refs[key] = (None, token)
    except TypeError:  # not weakly referenceable: keep it alive so its id cannot be reused
        _refs[key] = (obj, token)
    return obj


# ---------------------------------------------------------------------------------------------
# Handlers used by reducer_override, resolved once per type
# ---------------------------------------------------------------------------------------------


def _qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _handle_function(h: _Hasher, obj: Any) -> Any:
    from fncache.code.fingerprint import fingerprint

    return (_Token, ("function", fingerprint(obj).digest))


def _handle_class(h: _Hasher, obj: Any) -> Any:
    from fncache.code.fingerprint import fingerprint

    # A fingerprint says what a class does, not which class it is: two modules may define one body
    # under one name, and ``except a.NotFound`` does not catch ``b.NotFound``.
    module = getattr(obj, "__module__", None)
    where = None if h.root is not None and module == h.root else module
    return (_Token, ("class", where, fingerprint(obj).digest))


def _handle_code(h: _Hasher, obj: Any) -> Any:
    from fncache.code.fingerprint import code_digest

    return (_Token, ("code", code_digest(obj)))


def _handle_module(h: _Hasher, obj: Any) -> Any:
    return (_Token, ("module", obj.__name__))


def _slot_names(t: type) -> tuple[str, ...]:
    """Attribute names of every ``__slots__`` entry along ``t``'s MRO (private names mangled)."""
    names: list[str] = []
    for c in t.__mro__:
        slots = vars(c).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{c.__name__.lstrip('_')}{name}"
            names.append(name)
    return tuple(sorted(set(names)))


def _handle_set_subclass(h: _Hasher, obj: Any) -> Any:
    # The C pickler's own set path would drop slots; read them here (an unset slot is absent).
    state = getattr(obj, "__dict__", None) or None
    slots = tuple((n, getattr(obj, n, _Token)) for n in _slot_names(type(obj)))
    return (_Token, ("set-subclass", type(obj), _set_token(obj, h.root), state, slots))


def _handle_token_method(h: _Hasher, obj: Any) -> Any:
    return (_Token, ("token", type(obj), obj.__fncache_token__()))


def _handle_weakref(h: _Hasher, obj: Any) -> Any:
    # A weak reference hashes as what it points to (or as dead).
    return (_Token, ("weakref", obj()))


def _handle_stream(h: _Hasher, obj: Any) -> Any:
    from fncache.values.files import refuse_stream

    return refuse_stream(obj)


def _handle_path(h: _Hasher, obj: Any) -> Any:
    # What 3.11's pathlib pickles, on every version: the class and the normalised parts. From 3.12 a
    # path pickles the segments as they were spelled (``a//b``, ``("a", "b")``), so paths that are
    # equal would get different keys. Only pathlib's own classes: a subclass may carry state of its
    # own, which its pickle keeps (it takes the ordinary path).
    return (type(obj), tuple(obj.parts))


def _handle_ndarray(h: _Hasher, a: Any) -> Any:
    from fncache.values.buffers import ndarray_token

    return (_Token, ndarray_token(a))


def _wrapper_handler(
    rest: Callable[[_Hasher, Any], Any] | None,
) -> Callable[[_Hasher, Any], Any]:
    """A handler for a callable type whose instances may wrap user code (``__wrapped__``).

    ``functools.cache``/``lru_cache`` wrappers pickle by name and numba dispatchers by a per-process
    id: either way the user code they wrap would not count. Such an object is its type, the code it
    wraps (fingerprinted) and, for a dispatcher, its compile options; any other wrapper object adds
    the state it pickles with (not its name: the code stands for that). Other instances of the type
    take ``rest`` (or pickle's default).
    """

    def handle(h: _Hasher, obj: Any) -> Any:
        from fncache.code.usercode import compile_options, wrapped_user_code

        inner = wrapped_user_code(obj)
        if inner is None:
            return NotImplemented if rest is None else rest(h, obj)
        options = compile_options(obj)
        if options is not None:
            return (_Token, ("compiled", _qualname(type(obj)), inner, options))
        state = obj.__reduce_ex__(_PROTOCOL)
        return (_Token, ("wrapper", _qualname(type(obj)), inner,
                         None if isinstance(state, str) else state))

    return handle


def _handle_ufunc(h: _Hasher, obj: Any) -> Any:
    """``np.frompyfunc(f, nin, nout)``: the ufunc holds ``f``, which counts by its code. Other
    ufuncs (``np.add``) pickle by name, as numpy does."""
    import gc

    held = [r for r in gc.get_referents(obj) if callable(r)]
    if len(held) != 1:
        return NotImplemented
    return (_Token, ("frompyfunc", obj.nin, obj.nout, obj.identity, held[0]))


def _registered(fn: Callable[[Any], Any], t: type) -> Callable[[_Hasher, Any], Any]:
    name = _qualname(t)

    def handle(h: _Hasher, obj: Any) -> Any:
        # The actual type, not only the registered base: two subclasses may give equal tokens.
        return (_Token, ("registered", name, type(obj), fn(obj)))

    return handle


_PATH_TYPES = frozenset({pathlib.PurePath, pathlib.PurePosixPath, pathlib.PureWindowsPath,
                         pathlib.Path, pathlib.PosixPath, pathlib.WindowsPath})
_VALUE_LIBRARIES = frozenset({"numpy", "torch", "polars", "pyarrow", "pandas", "dask", "fsspec"})


def _resolve(t: type) -> Callable[[_Hasher, Any], Any] | None:
    for base in t.__mro__:
        fn = _registry.get(base)
        if fn is not None:
            return _registered(fn, base)
    if issubclass(t, type):
        return _handle_class
    if t is types.FunctionType:
        return _handle_function
    if t is types.CodeType:
        return _handle_code
    if t is types.ModuleType:
        return _handle_module
    if issubclass(t, (set, frozenset)):
        return _handle_set_subclass
    if t is weakref.ReferenceType:
        return _handle_weakref
    if callable(getattr(t, "__fncache_token__", None)):
        return _handle_token_method
    if t in _PATH_TYPES:
        return _handle_path
    if issubclass(t, io.IOBase) and not issubclass(t, (io.BytesIO, io.StringIO)):
        return _handle_stream  # an open file: refused, reading it would consume it (see _files)
    np = sys.modules.get("numpy")
    if np is not None and t in (np.ndarray, np.memmap):
        return _handle_ndarray
    if np is not None and t is np.ufunc:
        return _handle_ufunc
    handler: Callable[[_Hasher, Any], Any] | None = None
    if np is not None or not _VALUE_LIBRARIES.isdisjoint(sys.modules):
        from fncache.values.buffers import resolve

        handler = resolve(t)
    if t is not types.MethodType and any("__call__" in vars(c) for c in t.__mro__):
        return _wrapper_handler(handler)
    return handler


# ---------------------------------------------------------------------------------------------
# Sets
# ---------------------------------------------------------------------------------------------


def _set_token(obj: set[Any] | frozenset[Any], root: str | None) -> tuple[Any, ...]:
    types_ = {type(x) for x in obj}
    if len(types_) == 1 and next(iter(types_)) in _SORTABLE:
        return ("sorted", tuple(sorted(obj)))
    return ("digests", b"".join(sorted(_digest(x, root) for x in obj)))


# ---------------------------------------------------------------------------------------------
# The pickler
# ---------------------------------------------------------------------------------------------


class _Sink:
    """The pickler's output file: every frame goes straight into the current digest."""

    __slots__ = ("h",)

    def __init__(self) -> None:
        self.h = _new_digest()

    def write(self, data: Any) -> int:
        self.h.update(data)
        return len(data)


class _Hasher(cloudpickle.Pickler):
    """One reusable canonical pickler; see the module docstring for the rules.

    Not thread-safe: :func:`digest` keeps a pool per thread.
    """

    def __init__(self, cyclic: bool = False) -> None:
        self._sink = _Sink()
        super().__init__(self._sink, protocol=_PROTOCOL)
        self.cyclic = cyclic
        self.fast = not cyclic
        self.root: str | None = None  # see the module docstring: classes by where they live

    @staticmethod
    def _buffer_digest(buf: pickle.PickleBuffer) -> bytes:
        # Length and digest of the bytes only: where they live and whether they are writable is
        # not content.
        try:
            view = buf.raw()
        except BufferError:  # not contiguous: copy it (rare)
            view = memoryview(bytes(memoryview(buf)))
        return len(view).to_bytes(8, "little") + _digest_of(view)

    def persistent_id(self, obj: Any) -> Any:
        t = type(obj)
        if t is set or t is frozenset:
            return ("set" if t is set else "frozenset", _set_token(obj, self.root))
        if t is pickle.PickleBuffer:
            return ("buffer", self._buffer_digest(obj))
        if _refs:
            hit = _refs.get(id(obj), _MISSING)
            if hit is not _MISSING:
                return ("ref", hit[1])  # type: ignore[index]
        if self.cyclic:
            # With a memo, strings and bytes would be memoized by identity; fresh objects never are.
            if t is str:
                return b"s" + obj.encode("utf-8", "surrogatepass")
            if t is bytes:
                return b"b" + obj
        return None

    def reducer_override(self, obj: Any) -> Any:
        if obj is _Token:
            return NotImplemented  # saved by name, as the marker it is
        t = type(obj)
        handler = _handlers.get(t, _MISSING)
        if handler is _MISSING:
            handler = _handlers[t] = _resolve(t)
        if handler is None:
            return NotImplemented
        return handler(self, obj)  # type: ignore[operator]

    def hash(self, obj: Any) -> bytes:
        sink = self._sink
        sink.h.reset()
        try:
            self.dump(obj)
        finally:
            self.clear_memo()
        return sink.h.digest()


_local = threading.local()
# The root module of the fingerprint being computed in this thread (see :func:`relative_to`).
_context = threading.local()
_INHERIT: Any = object()


def relative_to(module: str | None) -> str | None:
    """Make :func:`digest` calls of this thread without ``root=`` relative to ``module``; gives the
    previous setting, to be restored by passing it back. Used around a fingerprint computation, whose
    value digests then name classes the way its labels name them."""
    previous: str | None = getattr(_context, "root", None)
    _context.root = module
    return previous


def _pool() -> list[_Hasher]:
    try:
        return _local.pool  # type: ignore[no-any-return]
    except AttributeError:
        _local.pool = []
        return _local.pool  # type: ignore[no-any-return]


def _explain_failure(obj: Any, exc: BaseException) -> UnhashableArgument:
    return UnhashableArgument(
        f"cannot hash a value of type {type(obj).__module__}.{type(obj).__qualname__}: {exc}",
        type_name=type(obj).__qualname__,
    )


# Digests of small exact ints and strs, the commonest arguments: a dict lookup instead of a pickler
# run (a microsecond each on a cache hit). Keyed by (type, value): for these two exact types equal
# keys mean equal pickles (floats are left out: 0.0 == -0.0). Bounded; emptied when full.
_scalars: dict[tuple[type, Any], bytes] = {}
_SCALARS_MAX = 4096
_SCALAR_STR_MAX = 256


def digest(obj: Any, root: str | None = _INHERIT) -> bytes:
    """The 16-byte canonical digest of ``obj``.

    ``root``: classes of this module are written without their module name (the memoized function's
    own module); ``None`` names every class's module; by default, the setting of
    :func:`relative_to` in this thread (``None`` unless a fingerprint is being computed).

    Raises :class:`fncache.UnhashableArgument` (a ``TypeError``) when some part of ``obj`` cannot be
    pickled (generators, locks, sockets, objects whose ``__reduce__`` raises).
    """
    t = type(obj)
    if t is int or (t is str and len(obj) <= _SCALAR_STR_MAX):
        found = _scalars.get((t, obj))
        if found is None:
            found = _digest(obj, None)
            if len(_scalars) >= _SCALARS_MAX:
                _scalars.clear()
            _scalars[(t, obj)] = found
        return found
    return _digest(obj, root)


def _digest(obj: Any, root: str | None) -> bytes:
    if root is _INHERIT:
        root = getattr(_context, "root", None)
    pool = _pool()
    h = pool.pop() if pool else _Hasher()
    h.root = root
    try:
        found = h.hash(obj)
    except ValueError as e:
        if "fast mode" not in str(e):
            raise _explain_failure(obj, e) from e
    except UnhashableArgument:
        raise
    except RecursionError as e:
        raise UnhashableArgument(
            f"cannot hash a value of type {type(obj).__qualname__}: nested too deeply", None,
            type(obj).__qualname__,
        ) from e
    except Exception as e:  # pickling errors surface as many types (TypeError, PicklingError, ...)
        raise _explain_failure(obj, e) from e
    else:
        # Only a pickler whose last use succeeded goes back to the pool: after an error the C
        # pickler may keep state (fast mode's nesting depth), and every later cyclic value hashed
        # with it would fail.
        pool.append(h)
        return found
    # A cycle: rare, so a fresh memoizing pickler is fine.
    try:
        cyclic = _Hasher(cyclic=True)
        cyclic.root = root
        return cyclic.hash(obj)
    except UnhashableArgument:
        raise
    except Exception as e:
        raise _explain_failure(obj, e) from e


def hash(obj: Any) -> str:  # noqa: A001 - the public name mirrors the builtin on purpose
    """Hex digest (32 characters) of the canonical content of ``obj``.

    Equal values give equal digests across processes, machines, ``PYTHONHASHSEED`` s and checkout
    paths (same Python minor version); values that differ in type or content give different ones.
    """
    return digest(obj).hex()

