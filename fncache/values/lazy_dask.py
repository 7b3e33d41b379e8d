"""dask collections keyed by their operations and the content of their sources, never by names.

A dask collection's pickle is a graph whose keys are names: tokens of the arguments (for files,
the path and perhaps its mtime), random per process where dask cannot tokenize something. Keyed
by that pickle it never hit; keyed by its name it would hit stale once a file is rewritten. Here:

* **dask arrays** (``da.from_zarr``, ``da.from_array``, the chunks of a lazy xarray variable) are
  their dtype, chunks and low-level graph with every key replaced by its position in a walk from
  the outputs (each task once, dependencies in argument order): the same operations give the same
  key in every process whatever dask named them. Sources are what the graph's tasks hold: a zarr
  array (keyed by its folder's files), an h5py dataset, an xarray backend array (by its file), a
  numpy array (by its values).
* **dask DataFrames, Series and Indexes** (dask-expr) are their expression tree, each node its class
  and operands (dask's caches left out), with the files their readers read: ``read_parquet``'s paths
  (a glob or folder listed at call time, so a new file is a miss), ``read_csv``'s blocks (each an
  fsspec ``OpenFile``: its path's content, offsets and delimiter), ``from_pandas``' frame (its
  values). A reader fncache does not know (``from_delayed``, ``read_sql``, a collection built from a
  raw graph) is refused, never keyed by its pickle.
* **dask.delayed values** are their graph by position, as arrays are.
* **fsspec OpenFiles** on the local file system are their mode, compression and the content of the
  file; on any other file system they are refused.

A task argument that is a string naming an existing path or a remote URL (``from_map(load,
["a.csv"])``, ``delayed(np.load)("x.npy")`` turned into an array) is refused: fncache cannot tell what
the task reads there; ``fncache.file(path)`` items are keyed by their content and accepted. The
refusals name the remedies (:data:`fncache.values.lazy_paths.REMEDY`). Locks (``SerializableLock``,
random per process) are one token: they never change what is read.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from fncache.values.digests import glob_base
from fncache.values.files import File
from fncache.values.lazy_paths import is_remote, local_path, path_content, refuse, token
from fncache.values.registry import register_lazy, register_type

__all__ = ["array_token", "delayed_token", "frame_token", "openfile_token", "task_token"]

# Operands dask-expr fills in as caches (what it learned of the files, not what it was asked).
_CACHES = frozenset({"_dataset_info_cache", "_pq_length_stats"})
# Readers whose sources are in their operands (a frame, an array) or are keyed below.
_KNOWN_IO = frozenset({"FromPandas", "FromPandasDivisions", "FromArray", "FromScalars", "FromMap",
                       "FromMapProjectable", "ReadParquetFSSpec", "ReadParquetPyarrowFS"})
_LOCAL_FS = frozenset({"file", "local"})

Ref = Callable[[Any], int]


# ---------------------------------------------------------------------------------------------
# Tasks and arguments
# ---------------------------------------------------------------------------------------------


def _plain(owner: Any, v: Any, ref: Ref) -> Any:
    """A task argument with references to other tasks as their positions (via ``ref``)."""
    ts = sys.modules["dask._task_spec"]
    t = type(v)
    if t is tuple or t is list:
        return t(_plain(owner, x, ref) for x in v)
    if t is dict:
        return {k: _plain(owner, x, ref) for k, x in v.items()}
    if isinstance(v, ts.TaskRef):
        return ("ref", ref(v.key))
    if isinstance(v, ts.GraphNode):
        return _node(owner, v, ref)
    _check_path(owner, v, ref)
    return v


def _check_path(owner: Any, v: Any, ref: Ref) -> None:
    """Refuse a task argument that is a path (a task's function may hold one too:
    ``partial(np.load, p)``)."""
    if isinstance(v, (str, bytes, os.PathLike)) and not isinstance(v, File):
        _check_path_string(owner, v)
    elif isinstance(v, functools.partial):
        _plain(owner, (v.args, v.keywords), ref)


def _check_path_string(owner: Any, v: str | bytes | os.PathLike[Any]) -> None:
    try:
        s = os.fsdecode(v)
    except (TypeError, ValueError):  # (a PathLike whose __fspath__ fails: no path)
        return
    if is_remote(s):
        raise refuse(owner, f"a task reads the remote object {s!r}, and fncache cannot tell "
                            "whether it changed")
    if len(s) >= 4096:
        return
    # A path with a folder in it that exists, or a bare name of a file in the working folder
    # (``"a.csv"``; a bare folder name, which column names and labels often are, is not taken).
    if (("/" in s or os.sep in s) and os.path.exists(s)) or os.path.isfile(s):
        raise refuse(owner, f"a task is given the path {s!r} and fncache cannot tell what it "
                            "reads there (pass fncache.file(path) items)")


def _node(owner: Any, n: Any, ref: Ref) -> Any:
    """A graph node without its key: what it computes, from what."""
    ts = sys.modules["dask._task_spec"]
    if isinstance(n, ts.Alias):
        return ("ref", ref(n.target))
    if isinstance(n, ts.DataNode):
        return ("data", _plain(owner, n.value, ref))
    if isinstance(n, ts.Task):
        return ("task", _plain(owner, n.func, ref), _plain(owner, n.args, ref),
                _plain(owner, n.kwargs, ref))
    return ("data", _plain(owner, n, ref))


def graph_nodes(owner: Any, graph: Any, outputs: list[Any]) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """The graph reachable from ``outputs`` as (output positions, nodes), a node's position being
    the order in which a walk from the outputs first meets it: no key name is kept."""
    index: dict[Any, int] = {}
    queue: list[Any] = []

    def ref(key: Any) -> int:
        i = index.get(key)
        if i is None:
            if key not in graph:
                raise refuse(owner, f"its graph refers to {key!r}, which it does not hold")
            i = index[key] = len(queue)
            queue.append(key)
        return i

    out = tuple(ref(k) for k in outputs)
    nodes = []
    i = 0
    while i < len(queue):  # the queue grows as nodes meet new dependencies
        nodes.append(_node(owner, graph[queue[i]], ref))
        i += 1
    return out, tuple(nodes)


def task_token(h: Any, n: Any) -> Any:
    """A task outside a graph (an operand of a dask-expr reader): what it computes, from what."""

    def ref(key: Any) -> int:
        raise refuse(n, f"a task refers to {key!r} by name, and fncache cannot see what it holds")

    return token("dask.Task", _node(n, n, ref))


# ---------------------------------------------------------------------------------------------
# Collections
# ---------------------------------------------------------------------------------------------


def array_token(h: Any, a: Any) -> Any:
    """A dask array: dtype, chunks and its graph by position (sources by content)."""
    outputs = _flatten(a.__dask_keys__())
    out, nodes = graph_nodes(a, dict(a.__dask_graph__()), outputs)
    return token("dask.Array", a.dtype, a.chunks, out, nodes)


def delayed_token(h: Any, d: Any) -> Any:
    """A ``dask.delayed`` value: its graph by position (arguments by content)."""
    out, nodes = graph_nodes(d, dict(d.__dask_graph__()), _flatten(d.__dask_keys__()))
    return token("dask.Delayed", out, nodes)


def _flatten(keys: Any) -> list[Any]:
    """The keys of a nested list of keys (``__dask_keys__``), in order."""
    out: list[Any] = []
    stack = [iter([keys])]
    while stack:
        for k in stack[-1]:
            if type(k) is list:
                stack.append(iter(k))
                break
            out.append(k)
        else:
            stack.pop()
    return out


def frame_token(h: Any, frame: Any) -> Any:
    """A dask-expr DataFrame, Series or Index: its expression tree by position, readers' files by
    content."""
    base = sys.modules["dask._expr"].Expr
    index: dict[int, int] = {}
    queue: list[Any] = []

    def ref(e: Any) -> int:
        i = index.get(id(e))
        if i is None:
            i = index[id(e)] = len(queue)
            queue.append(e)
        return i

    root = ref(frame.expr)
    nodes = []
    i = 0
    while i < len(queue):
        nodes.append(_expr_node(frame, queue[i], base, ref))
        i += 1
    return token(f"dask.{type(frame).__name__}", root, tuple(nodes))


def _expr_node(frame: Any, e: Any, base: type, ref: Callable[[Any], int]) -> Any:
    cls = type(e)
    io = sys.modules.get("dask.dataframe.dask_expr.io.io")
    if io is not None and isinstance(e, io.IO) and cls.__name__ not in _KNOWN_IO:
        raise refuse(frame, f"it reads through {cls.__name__}, whose sources fncache cannot "
                            "determine")

    def operand(v: Any) -> Any:
        t = type(v)
        if isinstance(v, base):
            return ("expr", ref(v))
        if t is tuple or t is list:
            return t(operand(x) for x in v)
        if t is dict:
            return {k: operand(x) for k, x in v.items()}
        return _plain(frame, v, _no_ref(frame))

    files: Any = ()
    ops = []
    for name in e._parameters:
        if name in _CACHES:
            continue
        v = e.operand(name)
        if name == "path" and cls.__name__.startswith("ReadParquet"):
            files = _parquet_files(frame, e, v)
            ops.append((name, v))
            continue
        ops.append((name, operand(v)))
    return (f"{cls.__module__}.{cls.__qualname__}", tuple(ops), files)


def _no_ref(frame: Any) -> Ref:
    def ref(key: Any) -> int:
        raise refuse(frame, f"a task refers to {key!r} by name, and fncache cannot see what it "
                            "holds")

    return ref


def _parquet_files(frame: Any, e: Any, path: Any) -> Any:
    """What ``read_parquet``'s paths hold now: each path's files (globs and folders listed)."""
    fs = e.operand("filesystem")
    if not (fs is None or isinstance(fs, str) or _is_local_fs(fs)):
        raise refuse(frame, f"it reads through {type(fs).__name__}, whose objects fncache cannot "
                            "tell changed")
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    listed = tuple((os.fspath(p), path_content(frame, os.fspath(p), glob=True)) for p in paths)
    return listed + _cached_listing(e, [os.fspath(p) for p in paths])


def _cached_listing(e: Any, paths: list[str]) -> tuple[Any, ...]:
    """What the frame learned of its files when it was made and reads by (dask-expr keeps it in
    ``_dataset_info_cache``): the files its dataset lists, by name, and the schemas. A frame made
    before a file was added, or before a file's columns changed, still reads the files and
    columns it found then, while the listing above is what is there now: without these, its
    result was stored under the key of a frame made now (a stale hit for that one). None while
    dask has not looked (the frame then lists the files when it runs, as keyed above). The files
    are named relative to the folder the paths start from (dask keeps them absolute), so that data
    moved with its checkout keeps its keys."""
    try:
        info = e.operand("_dataset_info_cache")
    except Exception:  # noqa: BLE001 - another dask-expr: nothing cached to key
        return ()
    if not isinstance(info, dict) or not info:
        return ()
    files = getattr(info.get("ds"), "files", None)
    if files is not None:
        files = tuple(_relative(str(f), paths) for f in files)
    # The plan: which row groups of which files each partition reads, as the statistics the frame
    # gathered when made decided (``filters=`` prunes by them): a file rewritten since is read
    # through that plan.
    plan = info.get("plan")
    parts = None
    if isinstance(plan, dict):
        parts = (bool(plan.get("empty")), tuple(_plan_part(p, paths) for p in plan.get("parts") or ()))
    return (("cached", files, info.get("physical_schema"), info.get("schema"), parts),)


def _plan_part(part: Any, paths: list[str]) -> Any:
    """One partition of a parquet plan: its file (relative, as above), row groups and partition
    keys; a part of another shape (an empty frame standing for none) by its type."""
    piece = part.get("piece") if isinstance(part, dict) else None
    if isinstance(piece, tuple) and piece and isinstance(piece[0], str):
        return (_relative(piece[0], paths), *piece[1:])
    return type(part).__qualname__


def _relative(file: str, paths: list[str]) -> str:
    """``file`` relative to the folder the given ``paths`` have in common (each path up to its
    first glob part), as far as there is one; else as it is."""
    bases = [glob_base(p)[0] for p in paths]
    try:
        return os.path.relpath(file, os.path.commonpath(bases)).replace(os.sep, "/")
    except ValueError:  # no common folder (another drive)
        return file


def _is_local_fs(fs: Any) -> bool:
    fs = getattr(fs, "sync_fs", fs)  # fsspec's async wrapper of a sync file system
    protocol = getattr(fs, "protocol", None)
    if isinstance(protocol, str):
        protocol = (protocol,)
    if isinstance(protocol, tuple) and not _LOCAL_FS.isdisjoint(protocol):
        return True
    return type(fs).__name__ == "LocalFileSystem" and type(fs).__module__.startswith("pyarrow")


def openfile_token(h: Any, f: Any) -> Any:
    """An fsspec ``OpenFile`` (a ``read_csv`` block's file): mode, compression and content."""
    if not _is_local_fs(f.fs):
        raise refuse(f, f"it reads {f.path!r} through {type(f.fs).__name__}, whose objects "
                        "fncache cannot tell changed")
    path = local_path(f, f.path)
    return token("fsspec.OpenFile", f.mode, f.compression, f.encoding,
                 path_content(f, path, glob=False))


def lock_token(h: Any, lock: Any) -> Any:
    """A lock orders reads and never changes what is read: one token for every lock."""
    return token("lock")


_NAMES = (("dask's key names", "a random id or a token per process: replaced by positions in the graph"),)


def _registrar(module: str, name: str, handler: Callable[[Any, Any], Any],
               not_content: tuple[tuple[str, str], ...]) -> Callable[[], None]:
    def register() -> None:
        import importlib

        register_type(getattr(importlib.import_module(module), name), handler,
                      not_content=not_content)

    return register


# (the module a class lives in (waited for), the class, its handler): each registered when a value
# of that module is first met, so a process that uses dask.delayed only never imports dask.array.
for _module, _name, _handler, _not_content in (
        ("fsspec.core", "OpenFile", openfile_token,
         (("the file name alone", "replaced by the content digest of the file"),)),
        ("dask._task_spec", "GraphNode", task_token, _NAMES),
        ("dask.utils", "SerializableLock", lock_token,
         (("the lock's token", "a random id per process"),)),
        ("dask.array.core", "Array", array_token, _NAMES),
        ("dask.delayed", "Delayed", delayed_token, _NAMES),
        ("dask.dataframe.dask_expr._collection", "FrameBase", frame_token,
         (("dask's caches and names", "made per process from the expression"),)),
):
    register_lazy(_module)(_registrar(_module, _name, _handler, _not_content))
