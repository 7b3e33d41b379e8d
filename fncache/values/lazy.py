"""Keys for lazy readers: values that point at files and read them later.

A polars ``LazyFrame`` from ``scan_parquet("sales/*.parquet")``, a ``pyarrow.dataset`` over a folder,
an h5py dataset or a zarr array holds file *names*; its pickle (or query plan) stays the same when the
files are rewritten, so keying it by its pickle gives a stale hit. Each such value is keyed here by
what it does with the files (the plan, the names relative to the folder scanned, the format and
read options) plus the content digest of every file it can read, from the one table of
:mod:`fncache.values.digests`: a warm call costs one ``stat`` per file.

What each reader is keyed by:

* **polars LazyFrame** whose plan scans files (``scan_parquet``, ``scan_csv``, ``scan_ipc``,
  ``scan_ndjson``, and joins/unions/concats of them): the plan's JSON serialization (``Cache`` node
  ids, which are random per process, replaced by their order of appearance) and, per source path,
  the files it names *now*: a glob is expanded at call time (a superset of polars' own matching, see
  :func:`fncache.values.digests.expand_glob`), a folder is every file below it, so a file added to the
  folder is a miss. A plan that scans no file (``df.lazy()``) keeps the key of its pickle.
* **pyarrow.dataset.FileSystemDataset**: its pickle (fragments with their paths and partition
  expressions, schema, format and read options, file system) plus each listed file's content. The
  file list is the one discovered when the dataset was made, which is what it reads. A
  ``UnionDataset`` is its children.
* **h5py File/Group/Dataset** opened read-only with the default driver: the object's name in the
  file and the file's content. A file opened for writing (unflushed changes are not in the file),
  an in-memory or file-object driver, virtual or external datasets and external links (other files)
  are refused.
* **zarr Array/Group** on a local store (a ``LocalStore``, or an ``FsspecStore`` on the local file
  system, as ``da.from_zarr(path)`` opens): the node's path and metadata and every file below it.
* **xarray** lazy values and **dask** collections: :mod:`fncache.values.lazy_xarray` and
  :mod:`fncache.values.lazy_dask`; what all share is in :mod:`fncache.values.lazy_paths`.

Refused with :class:`~fncache.UnhashableArgument` (naming the remedies: ``fncache.file(path)`` and
reading inside the function, ``.load()``/``.collect()`` first, or ``fncache.ref``), never keyed by
name: remote sources (``s3://``, ``gs://``, ``http(s)://``...), polars plans reading through a Python
function (``scan_pyarrow_dataset``, IO plugins) or from open file objects, ``pq.ParquetFile`` (it
does not say which file it has open), filtered Arrow datasets, h5py handles whose file was replaced
since it was opened.

numpy memmaps are not handled here: they are keyed by the mapped bytes (:mod:`fncache.values.buffers`),
which are the file's content as the array reads it.

The file digests are taken when the key is made, just before the function runs: a file rewritten
while the function reads it is the caller's race, as with any input.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from typing import Any

from fncache.values import digests as _digests
from fncache.values.lazy_paths import path_content as _path_content
from fncache.values.lazy_paths import refuse as _refuse
from fncache.values.registry import register_lazy, register_type, token

__all__: list[str] = []

Handler = Callable[[Any, Any], Any]

_POLARS_FORMATS = frozenset({"Parquet", "Csv", "Ipc", "NDJson"})


# ---------------------------------------------------------------------------------------------
# polars
# ---------------------------------------------------------------------------------------------


def _lazyframe_token(h: Any, lf: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the JSON form is deprecated, and the one we can read
        try:
            text = lf.serialize(format="json")
        except Exception as e:  # an open file object in the plan, or a newer polars
            raise _refuse(lf, f"its plan cannot be inspected ({e})") from e
    plan = json.loads(text)
    contents: list[Any] = []
    caches: dict[str, int] = {}
    _walk_plan(lf, plan, contents, caches)
    if not contents:
        return NotImplemented  # no file is read: the pickle holds everything (today's key)
    return token("polars.LazyFrame", json.dumps(plan, sort_keys=True, separators=(",", ":")),
                 tuple(contents))


def _walk_plan(lf: Any, node: Any, contents: list[Any], caches: dict[str, int]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk_plan(lf, item, contents, caches)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if isinstance(value, dict):
            _plan_node(lf, key, value, contents, caches)
        elif key == "PythonScan":
            _plan_node(lf, key, {}, contents, caches)
        _walk_plan(lf, value, contents, caches)


def _plan_node(lf: Any, key: str, value: dict[str, Any], contents: list[Any],
               caches: dict[str, int]) -> None:
    """What one named node of the plan adds to the key (or its refusal)."""
    if key == "PythonScan":
        raise _refuse(lf, "its plan reads through a Python function (scan_pyarrow_dataset, an "
                          "IO plugin), whose files fncache cannot see")
    if key == "Cache" and isinstance(value.get("id"), str):
        # A random id per process: the same plan must give the same key everywhere.
        value["id"] = caches.setdefault(value["id"], len(caches))
    if key == "Scan" and "sources" in value:
        _scan(lf, value, contents)


def _scan(lf: Any, scan: dict[str, Any], contents: list[Any]) -> None:
    sources = scan["sources"]
    if not isinstance(sources, dict) or len(sources) != 1:
        raise _refuse(lf, f"its plan has sources fncache does not know ({str(sources)[:80]})")
    (kind, items), = sources.items()
    if kind == "Buffers":
        return  # the bytes are in the plan itself
    if kind != "Paths":
        raise _refuse(lf, f"its plan reads {kind}, which fncache cannot key")
    _check_formats(lf, scan.get("scan_type"))
    args = scan.get("unified_scan_args") or {}
    glob = bool(args.get("glob", True))
    for item in items:
        path = item.get("inner") if isinstance(item, dict) else item
        if not isinstance(path, str):
            raise _refuse(lf, f"its plan has a source fncache does not know ({str(item)[:80]})")
        contents.append((path, _path_content(lf, path, glob)))


def _check_formats(lf: Any, scan_type: Any) -> None:
    formats = set(scan_type) if isinstance(scan_type, dict) else {str(scan_type)}
    if not formats <= _POLARS_FORMATS:
        raise _refuse(lf, f"its plan scans {sorted(formats)}, which fncache does not read")


# ---------------------------------------------------------------------------------------------
# pyarrow
# ---------------------------------------------------------------------------------------------


def _arrow_dataset_token(h: Any, d: Any) -> Any:
    import pyarrow.dataset as ds
    from pyarrow import fs

    if isinstance(d, ds.UnionDataset):
        return token("pyarrow.UnionDataset", tuple(d.children))
    if not isinstance(d.filesystem, fs.LocalFileSystem):
        raise _refuse(d, f"it reads from {type(d.filesystem).__name__}, whose objects fncache "
                         "cannot tell changed")
    try:
        state = d.__reduce__()[1]
    except ValueError as e:  # a filtered or projected dataset cannot list its fragments
        raise _refuse(d, f"{e} (pass the filter as an argument and apply it inside the "
                         "function)") from e
    files = tuple((p, _path_content(d, p, False)) for p in d.files)
    return token("pyarrow.FileSystemDataset", state, files)


def _parquet_file_token(h: Any, pf: Any) -> Any:
    raise _refuse(pf, "a pyarrow.parquet.ParquetFile does not say which file it has open")


# ---------------------------------------------------------------------------------------------
# h5py
# ---------------------------------------------------------------------------------------------


def _h5py_token(h: Any, obj: Any) -> Any:
    import h5py

    f = obj.file
    if not f.id.valid:
        raise _refuse(obj, "its file is closed")
    if f.mode != "r":
        raise _refuse(obj, "its file is open for writing: changes not yet flushed are not in "
                           "the file (open it with mode='r')")
    if f.driver != "sec2":
        raise _refuse(obj, f"its file is open with the {f.driver!r} driver, not on a local path")
    path = os.path.abspath(f.filename)
    try:
        now = os.stat(path)
        opened = os.fstat(f.id.get_vfd_handle())
    except OSError as e:
        raise _refuse(obj, f"its file cannot be read ({e})") from e
    if (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
        raise _refuse(obj, f"{path!r} was replaced since the file was opened (reopen it)")
    if isinstance(obj, h5py.Dataset):
        _h5py_check_dataset(obj)
    else:
        _h5py_check_group(obj)
    return token(f"h5py.{type(obj).__name__}", obj.name, _digests.file_digest(path, now))


def _h5py_check_dataset(d: Any) -> None:
    if d.is_virtual or d.external:
        raise _refuse(d, f"the dataset {d.name!r} reads other files (virtual or external storage)")


def _h5py_check_group(g: Any) -> None:
    import h5py

    def visit(name: str, link: Any) -> None:
        if isinstance(link, h5py.ExternalLink):
            raise _refuse(g, f"{name!r} is an external link to {link.filename!r}")
        if isinstance(link, h5py.HardLink):
            found = g.get(name)
            if isinstance(found, h5py.Dataset):
                _h5py_check_dataset(found)

    g.visititems_links(visit)


# ---------------------------------------------------------------------------------------------
# zarr
# ---------------------------------------------------------------------------------------------


def _zarr_token(h: Any, node: Any) -> Any:
    store = node.store
    try:
        root = _zarr_root(store)
    except ImportError as e:  # zarr 2: its stores are not read here
        raise _refuse(node, "fncache reads zarr 3 local stores only") from e
    if root is None:
        if type(store).__name__ in ("MemoryStore", "GpuMemoryStore"):
            return NotImplemented  # the data is in the process: its pickle holds it
        raise _refuse(node, f"it lives in a {type(store).__name__}, not on a local folder")
    where = os.path.join(root, node.path) if node.path else root
    metadata = node.metadata.to_dict()
    return token(f"zarr.{type(node).__name__}", node.path, json.dumps(
        metadata, sort_keys=True, default=repr), _path_content(node, where, False))


def _zarr_root(store: Any) -> str | None:
    """The local folder of a zarr store: a ``LocalStore``, or an ``FsspecStore`` on the local file
    system (what ``da.from_zarr(path)`` opens); ``None`` for any other store."""
    from zarr.storage import LocalStore

    if isinstance(store, LocalStore):
        return os.fspath(store.root)
    fs = getattr(store, "fs", None)
    fs = getattr(fs, "sync_fs", fs)  # fsspec's async wrapper of a sync file system
    protocol = getattr(fs, "protocol", None)
    protocol = (protocol,) if isinstance(protocol, str) else protocol
    if type(store).__name__ == "FsspecStore" and isinstance(protocol, tuple) and (
            "file" in protocol or "local" in protocol):
        return os.path.abspath(str(store.path))
    return None


# ---------------------------------------------------------------------------------------------
# Dispatch
# ---------------------------------------------------------------------------------------------


_FILES = (("the file names alone", "replaced by the content digest of every file read"),)


@register_lazy("polars")
def _register_polars() -> None:
    import polars as pl

    register_type(pl.LazyFrame, _lazyframe_token, not_content=_FILES)


@register_lazy("pyarrow._dataset")  # where the dataset classes live
def _register_arrow_dataset() -> None:
    import pyarrow.dataset as ds

    register_type((ds.FileSystemDataset, ds.UnionDataset), _arrow_dataset_token,
                  not_content=_FILES)


@register_lazy("pyarrow.parquet")
def _register_parquet_file() -> None:
    import pyarrow.parquet as pq

    register_type(pq.ParquetFile, _parquet_file_token)


@register_lazy("h5py")
def _register_h5py() -> None:
    import h5py

    register_type((h5py.Dataset, h5py.Group), _h5py_token, not_content=_FILES)


@register_lazy("zarr")
def _register_zarr() -> None:
    import zarr

    register_type((zarr.Array, zarr.Group), _zarr_token, not_content=_FILES)
