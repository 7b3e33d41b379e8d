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
from collections.abc import Callable
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
    _check_not_replaced(m, path)
    return token("xarray.FileManager", opener, mode, kwargs, args[1:],
                 path_content(m, path, glob=False))


def _check_not_replaced(m: Any, path: str) -> None:
    """Refuse a manager that holds open a file ``path`` no longer names (a writer's atomic rename
    since): it reads the file it opened, not the one at ``path``."""
    opened = _opened_identity(m)
    if opened is None:
        return
    try:
        now = os.stat(path)
    except OSError:
        return  # (path_content says why it cannot be read)
    if (now.st_dev, now.st_ino) != opened:
        raise refuse(m, f"{path!r} was replaced since the file was opened, and the dataset still "
                        "reads the file it opened (reopen it)")


def _opened_identity(m: Any) -> tuple[int, int] | None:
    """(device, inode) of the file the manager holds open now, where its backend's file object
    shows it (scipy's, h5netcdf's, any with ``fileno()``); None if it holds none open or hides it
    (netCDF4's: then a file replaced on disk since is not seen)."""
    cache, key = getattr(m, "_cache", None), getattr(m, "_key", None)
    try:
        f = cache.get(key) if cache is not None and key is not None else getattr(m, "_file", None)
    except Exception:  # a cache of another shape
        return None
    if f is None:
        return None
    reads: tuple[Callable[[], Any], ...] = (
        lambda: f.fileno(), lambda: f.fp.fileno(), lambda: f._h5file.id.get_vfd_handle(),
        lambda: f.id.get_vfd_handle())
    for read in reads:
        try:
            st = os.fstat(read())
        except Exception:  # not this backend's way
            continue
        return st.st_dev, st.st_ino
    return None


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
