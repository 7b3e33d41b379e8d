"""Lazy readers (polars scans, Arrow datasets, h5py, zarr, memmaps, xarray, dask) keyed by the
files they read.

Each reader is run in fresh processes against one path rewritten in place with new data, also with
its size and modification time put back: the call after a rewrite computes and returns the new
result, the one after that hits.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import fncache
from tests.helpers import last_json, run_py, write

SCRIPT = """
import json, os, sys
import fncache

reader, store, path, other = sys.argv[1:5]
# Calls are counted in a file: zarr starts an event loop thread, and a global the function mutates
# while another thread exists keeps its result out of the store (it may be that thread's doing).
COUNTER = os.path.join(os.path.dirname(store), "calls.txt")


def calls_so_far():
    return os.path.getsize(COUNTER) if os.path.exists(COUNTER) else 0


before = calls_so_far()


def build(reader, path, other):
    if reader.startswith("scan_"):
        import polars as pl
        return getattr(pl, reader)(path)
    if reader == "polars_concat":
        import polars as pl
        return pl.concat([pl.scan_parquet(path), pl.scan_csv(other)]).cache()
    if reader == "polars_join":
        import polars as pl
        return pl.scan_parquet(path).join(pl.scan_csv(other), on="a", how="left")
    if reader == "arrow_dataset":
        import pyarrow.dataset as ds
        return ds.dataset(path, format="parquet")
    if reader == "h5py":
        import h5py
        return h5py.File(path, "r")["x"]
    if reader == "h5py_file":
        import h5py
        return h5py.File(path, "r")
    if reader == "zarr":
        import zarr
        return zarr.open_array(path, mode="r")
    if reader == "memmap":
        import numpy as np
        return np.load(path, mmap_mode="r")
    if reader.startswith("file_"):
        return fncache.file(path)
    if reader.startswith("xr_"):
        import xarray as xr
        if reader == "xr_open_zarr":
            return xr.open_zarr(path)
        if reader == "xr_mfdataset":
            return xr.open_mfdataset([path], engine="h5netcdf")
        engine = "scipy" if reader == "xr_scipy" else "h5netcdf"
        return xr.open_dataset(path, engine=engine, chunks={"i": 2} if reader == "xr_chunks" else None)
    if reader == "dd_read_parquet":
        import dask.dataframe as dd
        return dd.read_parquet(path)
    if reader == "dd_read_csv":
        import dask.dataframe as dd
        return dd.read_csv(path)
    if reader == "da_from_zarr":
        import dask.array as da
        return da.from_zarr(path)
    raise ValueError(reader)


@fncache.memoize(store=store)
def total(reader, value):
    with open(COUNTER, "a") as f:
        f.write("x")
    if reader.startswith(("scan_", "polars_")):
        return int(value.collect()["a"].sum())
    if reader == "arrow_dataset":
        return int(value.to_table()["a"].to_numpy().sum())
    if reader == "h5py":
        return int(value[()].sum())
    if reader == "h5py_file":
        return int(value["x"][()].sum())
    if reader in ("zarr", "memmap"):
        return int(value[...].sum())
    if reader == "file_polars":
        import polars as pl
        return int(pl.read_parquet(value)["a"].sum())
    if reader == "file_numpy":
        import numpy as np
        return int(np.load(value, mmap_mode="r").sum())
    if reader == "file_h5py":
        import h5py
        with h5py.File(value, "r") as f:
            return int(f["x"][()].sum())
    if reader.startswith("xr_"):
        return int(value["x"].values.sum())
    if reader.startswith("dd_"):
        return int(value["a"].sum().compute())
    if reader == "da_from_zarr":
        return int(value.sum().compute())
    raise ValueError(reader)


print(json.dumps({"result": total(reader, build(reader, path, other)), "computed": calls_so_far() - before}))
"""

# reader -> (file name, library that writes it)
READERS = {
    "scan_parquet": "data.parquet",
    "scan_csv": "data.csv",
    "scan_ipc": "data.ipc",
    "scan_ndjson": "data.ndjson",
    "polars_concat": "data.parquet",
    "polars_join": "data.parquet",
    "arrow_dataset": "data.parquet",
    "h5py": "data.h5",
    "h5py_file": "data.h5",
    "zarr": "data.zarr",
    "memmap": "data.npy",
    "file_polars": "data.parquet",
    "file_numpy": "data.npy",
    "file_h5py": "data.h5",
    "xr_open_dataset": "data.nc",
    "xr_scipy": "data.nc3",
    "xr_chunks": "data.nc",
    "xr_mfdataset": "data.nc",
    "xr_open_zarr": "data.xzarr",
    "dd_read_parquet": "data.parquet",
    "dd_read_csv": "data.csv",
    "da_from_zarr": "data.zarr",
}
NEEDS = {"h5py": "h5py", "h5py_file": "h5py", "file_h5py": "h5py", "zarr": "zarr",
         "xr_open_dataset": "h5netcdf", "xr_scipy": "xarray", "xr_chunks": "h5netcdf",
         "xr_mfdataset": "h5netcdf", "xr_open_zarr": "zarr", "dd_read_parquet": "dask.dataframe",
         "dd_read_csv": "dask.dataframe", "da_from_zarr": "dask.array"}


def _write(path: Path, values: list[int]) -> None:
    """Write ``values`` as column/array ``a``/``x`` in the format ``path``'s suffix names, so that
    two lists of one length give files of one size."""
    suffix = path.suffix
    if suffix in (".parquet", ".csv", ".ipc", ".ndjson"):
        import polars as pl

        df = pl.DataFrame({"a": values})
        if suffix == ".parquet":
            df.write_parquet(path, compression="uncompressed", statistics=False)
        elif suffix == ".csv":
            df.write_csv(path)
        elif suffix == ".ipc":
            df.write_ipc(path, compression="uncompressed")
        else:
            df.write_ndjson(path)
        return
    import numpy as np

    if suffix == ".npy":
        np.save(path, np.array(values, dtype=np.int64))
    elif suffix == ".h5":
        import h5py

        with h5py.File(path, "w") as f:
            f["x"] = np.array(values, dtype=np.int64)
    elif suffix == ".zarr":
        import zarr

        z = zarr.create_array(str(path), shape=(len(values),), chunks=(2,), dtype="i8",
                              compressors=None, overwrite=True)
        z[:] = np.array(values, dtype=np.int64)
    elif suffix in (".nc", ".nc3", ".xzarr"):
        import xarray as xr

        ds = xr.Dataset({"x": ("i", np.array(values, dtype=np.int64))})
        if suffix == ".xzarr":
            ds.to_zarr(str(path), mode="w", consolidated=False,
                       encoding={"x": {"compressors": None, "chunks": (2,)}})
        else:
            ds.to_netcdf(path, engine="scipy" if suffix == ".nc3" else "h5netcdf")
    else:
        raise ValueError(path)


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def _stats(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path.parent)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in _files(path)}


def _put_back(path: Path, before: dict[str, tuple[int, int]]) -> None:
    """Set every file's mtime back to ``before``'s and check that the sizes match it too."""
    for p in _files(path):
        size, mtime = before[str(p.relative_to(path.parent))]
        os.utime(p, ns=(mtime, mtime))
    assert _stats(path) == before  # the rewrite is invisible to size and mtime


@pytest.mark.slow
@pytest.mark.parametrize("reader", sorted(READERS))
def test_rewritten_file_misses_then_hits(tmp_path: Path, reader: str) -> None:
    """A lazy value over a file rewritten in place (same size, mtime put back) computes the new
    result in a new process, and hits on the next call; an unchanged file hits."""
    if reader in NEEDS:
        pytest.importorskip(NEEDS[reader])
    script = write(tmp_path / "job.py", SCRIPT)
    store = str(tmp_path / "store")
    data = tmp_path / READERS[reader]
    other = tmp_path / "other.csv"
    other.write_text("a\n100\n")

    def run() -> dict[str, int]:
        return last_json(run_py(script, reader, store, str(data), str(other)))  # type: ignore[no-any-return]

    extra = 100 if reader == "polars_concat" else 0
    _write(data, [1, 2, 3])
    assert run() == {"result": 6 + extra, "computed": 1}
    before = _stats(data)
    _write(data, [7, 8, 9])
    _put_back(data, before)
    assert run() == {"result": 24 + extra, "computed": 1}
    assert run() == {"result": 24 + extra, "computed": 0}


GLOB_SCRIPT = """
import json, os, sys
import fncache

reader, store, folder = sys.argv[1:4]
# Calls are counted in a file: zarr starts an event loop thread, and a global the function mutates
# while another thread exists keeps its result out of the store (it may be that thread's doing).
COUNTER = os.path.join(os.path.dirname(store), "calls.txt")


def calls_so_far():
    return os.path.getsize(COUNTER) if os.path.exists(COUNTER) else 0


before = calls_so_far()


@fncache.memoize(store=store)
def total(value):
    with open(COUNTER, "a") as f:
        f.write("x")
    if reader == "arrow_dataset":
        return int(value.to_table()["a"].to_numpy().sum())
    if reader.startswith("dd_"):
        return int(value["a"].sum().compute())
    if reader == "xr_mfdataset":
        return int(value["x"].values.sum())
    return int(value.collect()["a"].sum())


if reader == "dd_csv_glob":
    import dask.dataframe as dd
    value = dd.read_csv(folder + "/*.csv")
elif reader == "dd_parquet_folder":
    import dask.dataframe as dd
    value = dd.read_parquet(folder)
elif reader == "xr_mfdataset":
    import xarray as xr
    value = xr.open_mfdataset(folder + "/*.nc", engine="h5netcdf", combine="nested", concat_dim="i")
elif reader == "glob":
    import polars as pl
    value = pl.scan_parquet(folder + "/*.parquet")
elif reader == "folder":
    import polars as pl
    value = pl.scan_parquet(folder)
else:
    import pyarrow.dataset as ds
    value = ds.dataset(folder, format="parquet")
print(json.dumps({"result": total(value), "computed": calls_so_far() - before}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("reader", ["glob", "folder", "arrow_dataset", "dd_csv_glob",
                                    "dd_parquet_folder", "xr_mfdataset"])
def test_a_file_added_to_the_folder_misses(tmp_path: Path, reader: str) -> None:
    """A glob, a scanned folder or an Arrow dataset over a folder gains a file: the next call
    computes with it (the files are listed at call time), and the one after hits."""
    needs = {"xr_mfdataset": "h5netcdf", "dd_csv_glob": "dask.dataframe",
             "dd_parquet_folder": "dask.dataframe"}
    if reader in needs:
        pytest.importorskip(needs[reader])
    suffix = {"dd_csv_glob": ".csv", "xr_mfdataset": ".nc"}.get(reader, ".parquet")
    script = write(tmp_path / "job.py", GLOB_SCRIPT)
    store = str(tmp_path / "store")
    folder = tmp_path / "sales"
    folder.mkdir()

    def run() -> dict[str, int]:
        return last_json(run_py(script, reader, store, str(folder)))  # type: ignore[no-any-return]

    _write(folder / f"day1{suffix}", [1, 2])
    assert run() == {"result": 3, "computed": 1}
    _write(folder / f"day2{suffix}", [10])
    assert run() == {"result": 13, "computed": 1}
    assert run() == {"result": 13, "computed": 0}


# ---------------------------------------------------------------------------------------------
# In-process: what is keyed, what is refused
# ---------------------------------------------------------------------------------------------


def _refusal(value: Any) -> str:
    @fncache.memoize(store="memory")
    def f(data: Any) -> int:
        return 0

    with pytest.raises(fncache.UnhashableArgument) as e:
        f(value)
    assert e.value.parameter == "data"
    return str(e.value)


def test_remote_and_python_sources_are_refused_with_remedies(tmp_path: Path) -> None:
    """A plan reading a remote URL or through a Python function is refused, naming the argument
    and the remedies; never keyed by the name."""
    pl = pytest.importorskip("polars")
    ds = pytest.importorskip("pyarrow.dataset")
    _write(tmp_path / "a.parquet", [1])
    for value in (pl.scan_parquet("s3://bucket/sales.parquet"),
                  pl.scan_parquet(str(tmp_path / "a.parquet")).join(
                      pl.scan_csv("https://example.org/x.csv"), on="a"),
                  pl.scan_pyarrow_dataset(ds.dataset(str(tmp_path / "a.parquet")))):
        message = _refusal(value)
        assert "fncache.file(path)" in message and "fncache.ref" in message


def test_parquet_file_and_writable_h5py_are_refused(tmp_path: Path) -> None:
    """A pq.ParquetFile (which does not say what it has open) and an h5py dataset of a file open
    for writing are refused with the remedies."""
    pq = pytest.importorskip("pyarrow.parquet")
    _write(tmp_path / "a.parquet", [1])
    with pq.ParquetFile(tmp_path / "a.parquet") as pf:
        assert "does not say which file" in _refusal(pf)
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "w.h5", "w") as f:
        f["x"] = [1, 2]
        assert "open for writing" in _refusal(f["x"])


def test_h5py_file_replaced_since_opened_is_refused(tmp_path: Path) -> None:
    """An h5py handle still reads the file it opened; once another file is renamed over its path,
    the path's content is not what the handle reads, so it is refused."""
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "a.h5"
    _write(path, [1, 2])
    with h5py.File(path, "r") as f:
        fncache.hash(f["x"])
        _write(tmp_path / "b.h5", [3, 4])
        os.replace(tmp_path / "b.h5", path)
        assert "was replaced" in _refusal(f["x"])


def test_plans_differ_by_what_they_do_and_not_by_process_ids(tmp_path: Path) -> None:
    """Two plans over one file that compute different things key apart; the same plan with a
    cache node (a random id per process) keys alike when built twice."""
    pl = pytest.importorskip("polars")
    p = str(tmp_path / "a.parquet")
    _write(tmp_path / "a.parquet", [1, 2, 3])
    a = fncache.hash(pl.scan_parquet(p).filter(pl.col("a") > 1))
    b = fncache.hash(pl.scan_parquet(p).filter(pl.col("a") > 2))
    assert a != b
    assert fncache.hash(pl.scan_parquet(p).cache()) == fncache.hash(pl.scan_parquet(p).cache())


def test_in_memory_lazyframe_keeps_its_key() -> None:
    """A LazyFrame that reads no file is keyed as before (through its pickle)."""
    pl = pytest.importorskip("polars")
    lf = pl.DataFrame({"a": [1, 2]}).lazy()
    assert fncache.hash(lf) == fncache.hash(pl.DataFrame({"a": [1, 2]}).lazy())
    assert fncache.hash(lf) != fncache.hash(pl.DataFrame({"a": [1, 3]}).lazy())


def test_file_wrapper_is_accepted_by_the_readers(tmp_path: Path) -> None:
    """``fncache.file(path)`` is taken as a path by polars, numpy memmaps, pyarrow and h5py."""
    pl = pytest.importorskip("polars")
    np = pytest.importorskip("numpy")
    pq = pytest.importorskip("pyarrow.parquet")
    _write(tmp_path / "a.parquet", [1, 2])
    _write(tmp_path / "a.npy", [3, 4])
    p = fncache.file(tmp_path / "a.parquet")
    assert pl.read_parquet(p)["a"].to_list() == [1, 2]
    assert pl.scan_parquet(p).collect()["a"].to_list() == [1, 2]
    assert pq.read_table(p)["a"].to_pylist() == [1, 2]
    assert np.load(fncache.file(tmp_path / "a.npy"), mmap_mode="r").tolist() == [3, 4]
    assert os.fspath(p) == str(tmp_path / "a.parquet")
    assert repr(p) == f"fncache.file({str(tmp_path / 'a.parquet')!r})"


def test_scanned_folder_follows_symlinked_folders(tmp_path: Path) -> None:
    """polars reads through a symlinked subfolder of a scanned folder or glob, so a file changed
    there changes the key."""
    pl = pytest.importorskip("polars")
    (tmp_path / "real").mkdir()
    (tmp_path / "top").mkdir()
    _write(tmp_path / "top" / "t.parquet", [1])
    _write(tmp_path / "real" / "r.parquet", [2])
    os.symlink(tmp_path / "real", tmp_path / "top" / "link")
    folder, pattern = str(tmp_path / "top"), str(tmp_path / "top" / "**" / "*.parquet")
    assert pl.scan_parquet(folder).collect()["a"].sum() == 3
    before = [fncache.hash(pl.scan_parquet(folder)), fncache.hash(pl.scan_parquet(pattern))]
    _write(tmp_path / "real" / "r.parquet", [5])
    after = [fncache.hash(pl.scan_parquet(folder)), fncache.hash(pl.scan_parquet(pattern))]
    assert before[0] != after[0] and before[1] != after[1]
