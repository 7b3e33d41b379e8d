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

import contextvars
import functools
import io
import pathlib
import pickle
import struct
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import cloudpickle
import xxhash

from fncache._errors import ArgumentTypeError, UnhashableArgument
from fncache._hasher import Token
from fncache.values import instances as _instances
from fncache.values import registry as _registry
from fncache.values import typing_tokens as _typing_tokens

_persistent_ids: Any
try:
    from fncache._speedups import persistent_ids as _persistent_ids
except ImportError:  # not built (no compiler at install), or an older build: the method, same digests
    _persistent_ids = None

__all__ = ["digest", "hash", "ref", "register", "unregister"]

_PROTOCOL = 5
_new_digest = xxhash.xxh3_128
_dumps = pickle.dumps
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
    _registry.register_user(type_, _registered_token(fn, type_))


def unregister(type_: type) -> None:
    """Undo :func:`register` for ``type_``; no error if it was not registered."""
    _registry.unregister_user(type_)


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
# Built-in handlers (registered in fncache.values.registry's table below)
# ---------------------------------------------------------------------------------------------


def _qualname(t: type) -> str:
    module = t.__module__
    return f"{module}.{t.__qualname__}" if isinstance(module, str) else t.__qualname__


def _module_token(h: _Hasher, obj: Any) -> Any:
    return (_Token, ("module", obj.__name__))


def _set_subclass_token(h: _Hasher, obj: Any) -> Any:
    # The C pickler's own set path would drop slots; read them here (an unset slot is absent).
    state = getattr(obj, "__dict__", None) or None
    slots = tuple((n, getattr(obj, n, _Token)) for n in _instances.slot_names(type(obj)))
    return (_Token, ("set-subclass", type(obj), _set_token(obj, h.root), state, slots))


def _fncache_token_token(h: _Hasher, obj: Any) -> Any:
    return (_Token, ("token", type(obj), obj.__fncache_token__()))


def _weakref_token(h: _Hasher, obj: Any) -> Any:
    # A weak reference hashes as what it points to (or as dead).
    return (_Token, ("weakref", obj()))


def _stream_token(h: _Hasher, obj: Any) -> Any:
    from fncache.values.files import refuse_stream

    return refuse_stream(obj)


def _path_token(h: _Hasher, obj: Any) -> Any:
    # What 3.11's pathlib pickles, on every version: the class and the normalised parts. From 3.12 a
    # path pickles the segments as they were spelled (``a//b``, ``("a", "b")``), so paths that are
    # equal would get different keys. Only pathlib's own classes: a subclass may carry state of its
    # own, which its pickle keeps (it takes the ordinary path).
    return (type(obj), tuple(obj.parts))


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

    def _wrapper_token(h: _Hasher, obj: Any) -> Any:
        from fncache.code.usercode import compile_options, wrapped_user_code, wrapper_attributes

        inner = wrapped_user_code(obj)
        if inner is None:
            return NotImplemented if rest is None else rest(h, obj)
        # What the user set on the wrapper (``cached.scale = 3``), read by code as the code is.
        attrs = wrapper_attributes(obj, inner)
        extra = (("attributes", tuple(sorted(attrs.items()))),) if attrs else ()
        options = compile_options(obj)
        if options is not None:
            return (_Token, ("compiled", _qualname(type(obj)), inner, options, *extra))
        state = obj.__reduce_ex__(_PROTOCOL)
        return (_Token, ("wrapper", _qualname(type(obj)), inner,
                         None if isinstance(state, str) else state, *extra))

    return _wrapper_token


def _registered_token(fn: Callable[[Any], Any], t: type) -> Callable[[_Hasher, Any], Any]:
    name = _qualname(t)

    def _user_token(h: _Hasher, obj: Any) -> Any:
        # The actual type, not only the registered base: two subclasses may give equal tokens.
        return (_Token, ("registered", name, type(obj), fn(obj)))

    return _user_token


def _protocols(t: type, entry: _registry.Entry | None) -> Callable[[_Hasher, Any], Any] | None:
    """The registry's rule for what its table does not settle: ``__fncache_token__``, open streams,
    type aliases, callables that may wrap user code, and instances keyed with their attributes in
    sorted order."""
    if entry is not None and entry.final:
        return entry.handler
    if callable(getattr(t, "__fncache_token__", None)):
        return _fncache_token_token
    special = _special(t)
    if special is not None:
        return special
    found = None if entry is None else entry.handler
    if _defines_call(t):
        return _wrapper_handler(_instances.by_reduce(t, found, wrapper=True))
    return _instances.by_reduce(t, found, wrapper=False)


def _memoryview_token(h: _Hasher, obj: memoryview) -> Any:
    """A memoryview by its format, item size and shape with its bytes: cloudpickle's pickle keeps
    only the bytes, so ``memoryview(b).cast("i")`` and ``memoryview(b)`` were one value."""
    data = pickle.PickleBuffer(obj if obj.c_contiguous else obj.tobytes())  # in C order
    return (_Token, ("memoryview", obj.format, obj.itemsize, obj.shape, data))


def _special(t: type) -> Callable[[_Hasher, Any], Any] | None:
    """The handler of a type alias, type variable or forward reference
    (:mod:`fncache.values.typing_tokens`), or of an open stream (refused: reading it would consume
    it, see files); None for any other type."""
    found: Callable[[_Hasher, Any], Any] | None = _typing_tokens.handler_for(t)
    if found is not None:
        return found
    return _stream_token if _is_stream(t) else None


def _is_stream(t: type) -> bool:
    """Whether ``t`` is an I/O stream other than the in-memory ``BytesIO`` and ``StringIO``."""
    return issubclass(t, io.IOBase) and not issubclass(t, (io.BytesIO, io.StringIO))


def _defines_call(t: type) -> bool:
    """Whether ``t`` or a class it inherits from defines ``__call__`` (a bound method's type aside):
    its instances may wrap user code."""
    return t is not types.MethodType and any("__call__" in vars(c) for c in t.__mro__)


def _register_builtins() -> None:
    # Functions, classes and code objects are keyed by fncache.code.fingerprint, which registers
    # their handlers itself (the code wing imports this module; this module never imports it).
    def builtin(types_: Any, handler: Any, exact: bool = False, **more: Any) -> None:
        _registry.register_type(types_, handler, exact=exact, final=True, library="builtins", **more)

    builtin(types.ModuleType, _module_token, exact=True)
    builtin((set, frozenset), _set_subclass_token)
    builtin((weakref.ReferenceType, weakref.WeakMethod), _weakref_token, exact=True)
    builtin(_instances.KEY_WRAPPER, _instances.key_wrapper_token, exact=True)
    builtin(struct.Struct, _instances.struct_token, exact=True)
    builtin(contextvars.ContextVar, _instances.context_var_token, exact=True)
    builtin(weakref.WeakValueDictionary, _instances.weak_value_dict_token, exact=True, not_content=(
        ("_remove, _pending_removals, _iterating", "the bookkeeping of dead references, not the items"),
        ("data", "weak references: keyed by the live items they reach")))
    builtin(types.SimpleNamespace, _instances.namespace_token, exact=True)
    builtin(memoryview, _memoryview_token, exact=True)
    builtin((pathlib.PurePath, pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.Path,
             pathlib.PosixPath, pathlib.WindowsPath), _path_token, exact=True)
    _registry.add_rule(_protocols)


_register_builtins()
_refs = _registry.refs
_resolved = _registry.resolved

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


# The types whose objects :meth:`_Hasher.persistent_id` gives an id (exact types, as it tests them);
# with a memo (cyclic values), strings and bytes too. The native hook calls the method for these
# only, and for every object while any ``fncache.ref`` token exists.
_SPECIAL = frozenset({set, frozenset, pickle.PickleBuffer})
_CYCLIC_SPECIAL = _SPECIAL | {str, bytes}


class _Hasher(cloudpickle.Pickler):
    """One reusable canonical pickler; see the module docstring for the rules.

    Not thread-safe: :func:`digest` keeps a pool per thread.
    """

    def __init__(self, cyclic: bool = False) -> None:
        self._sink = _Sink()
        if _persistent_ids is not None:
            # The C pickler calls persistent_id for every object it saves; answered in C for all
            # but the types the method handles (and every object while refs exist), it is no
            # longer most of the time of hashing a list or dict of plain values. The instance's
            # attribute is what the pickler's __init__ looks up, before the class's method.
            # The method is reached through a weak proxy: a strong reference from the hook back
            # to this pickler would make every hasher a reference cycle, freed only by the cyclic
            # collector (never, with it disabled).
            self.persistent_id = _persistent_ids(  # type: ignore[method-assign]
                _CYCLIC_SPECIAL if cyclic else _SPECIAL, _refs,
                functools.partial(_Hasher.persistent_id, weakref.proxy(self)))  # type: ignore[arg-type]
        super().__init__(self._sink, protocol=_PROTOCOL)
        self.cyclic = cyclic
        self.fast = not cyclic
        self.root: str | None = None  # see the module docstring: classes by where they live
        self.states: dict[int, tuple[Any, Any]] = {}  # re-ordered instance states, per hash
        #: The tokens of the classes and functions met in this hash, by id, as
        #: ``[object, token, make, used again]`` (see fncache.code.fingerprint._once_per_hash):
        #: a class's fingerprint is found and checked once per hash, not once per instance.
        #: Emptied when the hash ends: the next hash checks again. None: made every time.
        self.tokens: dict[int, list[Any]] | None = {}
        #: Arrays digested ahead of the walk in this hash, by id, as ``(array, bytes, digest)``
        #: (see fncache.values.buffers.DigestsAhead). Emptied when the hash ends.
        self.known: dict[int, tuple[Any, int, bytes]] = {}

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
        handler = _resolved.get(t, _MISSING)
        if handler is _MISSING:
            handler = _registry.lookup(t)
        if handler is None:
            return NotImplemented
        return handler(self, obj)  # type: ignore[operator]

    def digest_of(self, obj: Any) -> bytes:
        """The digest of a part of the value being hashed, classes named as this hash names them."""
        return _digest(obj, self.root)

    def hash(self, obj: Any) -> bytes:
        sink = self._sink
        sink.h.reset()
        tokens = self.tokens
        try:
            self.dump(obj)
            if tokens and not _tokens_held(self, tokens):
                # A class or function met twice stands otherwise than when first met (a reducer or
                # a registered token ran code that changed it): hashed again without reusing
                # tokens, each occurrence keyed as it then stands (the reducers run again).
                self.clear_memo()
                self.states.clear()
                self.known.clear()
                sink.h.reset()
                self.tokens = None
                self.dump(obj)
        finally:
            self.clear_memo()
            if self.states:
                self.states.clear()
            if self.known:
                self.known.clear()
            self.tokens = tokens
            if tokens:
                tokens.clear()
        return sink.h.digest()


def _tokens_held(h: _Hasher, tokens: dict[int, list[Any]]) -> bool:
    """Whether each token the hash used more than once is still the one its object gives now."""
    return all(make(h, obj) == token for obj, token, make, again in list(tokens.values()) if again)


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
        f"cannot hash a value of type {_qualname(type(obj))}: {exc}",
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
            # An exact int is pickled by the C pickler itself, never through reducer_override or
            # a reference (ref refuses ints), and fast mode memoizes nothing an int writes: its
            # stream is pickle.dumps's, without a pickler from the pool (2 us a new int).
            if t is int:
                try:
                    found = _digest_of(_dumps(obj, _PROTOCOL))
                except Exception:  # too large to pickle: the pickler's path names the error
                    found = _digest(obj, None)
            else:
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
    except Exception as e:  # pickling errors surface as many types (TypeError, PicklingError, ...)
        # Too deep, or a cycle fast mode cannot see (through a reduction that makes a new
        # tuple each time: an object array holding itself): the memoizing pass below tells.
        if not _too_deep(e):
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
        if _too_deep(e):
            raise UnhashableArgument(
                f"cannot hash a value of type {type(obj).__qualname__}: nested too deeply, or it "
                "holds itself where the key cannot follow (through a set, whose elements are "
                "hashed on their own, or an array subclass)", None,
                type(obj).__qualname__,
            ) from e
        raise _explain_failure(obj, e) from e


def _too_deep(e: BaseException) -> bool:
    """Whether a pickler failed on the interpreter's recursion limit (cloudpickle gives that as a
    ``PicklingError`` caused by the ``RecursionError``)."""
    return isinstance(e, RecursionError) or isinstance(e.__cause__, RecursionError)


def hash(obj: Any) -> str:  # noqa: A001 - the public name mirrors the builtin on purpose
    """Hex digest (32 characters) of the canonical content of ``obj``.

    Equal values give equal digests across processes, machines, ``PYTHONHASHSEED`` s and checkout
    paths (same Python minor version); values that differ in type or content give different ones.
    """
    return digest(obj).hex()


_registry.install_digest(digest)

# Each library's handlers live in a module of their own, imported the first time a value of one of
# its libraries is looked up (``tests/test_values_imports.py`` checks this table against what each
# module registers): ``import fncache`` imports neither a library nor a handler module.
for _module, _libraries in (
        ("arrow", ("pyarrow",)),
        ("buffers", ("numpy", "numpy.ma")),
        ("geopandas", ("geopandas", "shapely")),
        ("lazy", ("polars", "pyarrow._dataset", "pyarrow.parquet", "h5py", "zarr")),
        ("lazy_dask", ("fsspec.core", "dask._task_spec", "dask.utils", "dask.array.core",
                       "dask.delayed", "dask.dataframe.dask_expr._collection")),
        ("lazy_xarray", ("xarray.backends",)),
        ("nibabel", ("nibabel",)),
        ("numba", ("numba.typed",)),
        ("pandas", ("pandas",)),
        ("polars", ("polars",)),
        ("pydantic", ("pydantic",)),
        ("scipy", ("scipy.sparse",)),
        ("stdlib", ("_blake2", "_hashlib", "_md5", "_sha1", "_sha2", "_sha256", "_sha3", "_sha512",
                    "hmac", "tarfile", "zipfile")),
        ("torch", ("torch",)),
        ("xarray", ("xarray",)),
):
    _registry.handlers_in(f"fncache.values.{_module}", *_libraries)
