"""xarray values opened lazily from files, keyed by the files' content and not by process ids.

A ``Dataset`` from ``xr.open_dataset("era5.nc")`` holds, under each variable not yet loaded, a chain
of xarray's lazy wrappers (the indexing applied so far, CF decoding as functions with their
arguments, dask chunks) around a backend array whose data store reads the file through a *file
manager*. Its pickle names the file and carries a random id per process (the manager's id, a
``SerializableLock`` token), so it never hit; keying it by name instead would turn it into a stale
hit. Here the value is pickled as usual, with two objects replaced where the hasher meets them:

* a file manager (``CachingFileManager`` of every netCDF backend: h5netcdf, netCDF4, scipy) is its
  opener, open arguments and mode, and the content of the file it opens (from the digest table of
  :mod:`fncache.values.digests`, one ``stat`` when unchanged), without its id;
* an xarray lock (``SerializableLock``, ``CombinedLock``, ``DummyLock``) is the word "lock": locks
  order reads, they never change what is read.

So a lazy value is keyed by the file's content plus what it does with it: the variables selected
(only those left in the value are pickled), the lazy indexing (``isel``/``sel`` keys), the decoding
options (the decoders and their fill values, scales and units) and, with ``chunks=``, the dask graph
(keyed by :mod:`fncache.values.lazy_dask`: its operations and chunks, never its names).
``open_mfdataset`` is the same over each file; ``open_zarr`` keys each zarr array by the files of
its folder (:mod:`fncache.values.lazy`). A value whose variables are all in memory (built in memory,
or after ``.load()``) holds no file manager that reaches its data and is keyed by its content as
before; one that still has a ``close`` hook of the file it came from is keyed with that file too (at
worst a needless miss once the file changes).

Refused, naming the remedies: a file manager over an open file object or in-memory bytes
(``DummyFileManager``, ``PickleableFileManager`` of a buffer) and remote paths.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from fncache.values.lazy_paths import path_content, refuse, token
from fncache.values.registry import register_lazy, register_type

__all__ = ["file_manager_token", "lock_token"]


def file_manager_token(h: Any, m: Any) -> Any:
    """An xarray file manager: opener, arguments, mode and the content of the file it opens."""
    fm = sys.modules["xarray.backends.file_manager"]
    if isinstance(m, fm.CachingFileManager):
        state = m.__getstate__()  # (opener, args, mode, kwargs, lock, manager id)
        if not (isinstance(state, tuple) and len(state) == 6):
            raise refuse(m, "fncache does not know this xarray version's file manager state")
        opener, args, mode, kwargs, _lock, _manager_id = state
    elif isinstance(m, fm.PickleableFileManager):
        opener, args = getattr(m, "_opener", None), getattr(m, "_args", ())
        mode, kwargs = getattr(m, "_mode", None), getattr(m, "_kwargs", {})
    else:
        raise refuse(m, "it reads an already open file object, whose file fncache cannot see")
    if not args or not isinstance(args[0], (str, os.PathLike)):
        raise refuse(m, "it reads an open file object or in-memory bytes, not a path")
    path = os.fspath(args[0])
    return token("xarray.FileManager", opener, mode, kwargs, args[1:],
                 path_content(m, path, glob=False))


def lock_token(h: Any, lock: Any) -> Any:
    """A lock orders reads and never changes what is read: one token for every lock."""
    return token("lock")


@register_lazy("xarray.backends")
def _register() -> None:
    from xarray.backends import file_manager, locks

    register_type(file_manager.FileManager, file_manager_token, not_content=(
        ("the manager's id and its lock", "a random id per process; a lock orders reads"),
        ("the file name alone", "replaced by the content digest of the file it opens"),
    ))
    register_type((locks.SerializableLock, locks.CombinedLock, locks.DummyLock), lock_token,
                  not_content=(("the lock's token", "a random id per process; locks never change "
                                "what is read"),))
