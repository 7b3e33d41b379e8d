"""fncache: a content-addressed function cache.

``@fncache.memoize`` keys each call by an xxh3-128 digest of the function's code (and the user code it
reaches) and of its arguments' content, and keeps results in a store (diskcache by default; Redis or
S3-compatible object stores for sharing). Edit the function or a helper and the next call computes
again; reformat it, move it or check it out elsewhere and it still hits.

Not for: caching within one call stack by object identity (use ``functools.lru_cache``), or values that
must not be written to disk unencrypted (entries are plain pickles; see the docs, "Guarantees and trust").
"""

import gc as _gc

# The import makes objects that live as long as the process (functions, classes, tables): the
# collector's passes while it runs free nothing (after a large library's import, those that reach
# an older generation scan that library's objects too). Paused for the import only, and only if
# it was running, as Mercurial's ``nogc`` does while it builds large structures: in new processes
# after scikit-learn's import, the import 17.3 -> 16.5 ms and the first hit's process 0.7 ms
# sooner (medians of 30). A thread that turns the collector off while this import runs finds it
# on again after it.
_collecting = _gc.isenabled()
_gc.disable()
try:
    from fncache._errors import (
        ArgumentTypeError,
        ConfigError,
        FncacheError,
        IntegrityError,
        LockTimeout,
        StoreError,
        UnhashableArgument,
    )
    from fncache._memoize import CacheInfo, Memoized, key_for, memoize
    from fncache._options import disable, enable
    from fncache.code.fingerprint import track, untrack
    from fncache.joblib.memory import MemorizedResult, Memory, expires_after
    from fncache.notebook import load_ipython_extension
    from fncache.stores import Store, open_store
    from fncache.values.files import file
    from fncache.values.hasher import hash, ref, register, unregister
finally:
    if _collecting:
        _gc.enable()
    del _collecting, _gc

__version__ = "0.1.0.dev0"

__all__ = [
    "ArgumentTypeError",
    "CacheInfo",
    "ConfigError",
    "FncacheError",
    "IntegrityError",
    "LockTimeout",
    "Memoized",
    "MemorizedResult",
    "Memory",
    "Store",
    "StoreError",
    "UnhashableArgument",
    "__version__",
    "disable",
    "enable",
    "expires_after",
    "file",
    "hash",
    "key_for",
    "load_ipython_extension",
    "memoize",
    "open_store",
    "ref",
    "register",
    "track",
    "unregister",
    "untrack",
]
