"""dask collections: keyed by their operations and sources' content, never by names; sources that
cannot be determined are refused (the rewrite-in-place cases run in subprocesses in
tests/test_lazy_readers.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import fncache

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")


def _refusal(value: Any) -> str:
    with pytest.raises(fncache.UnhashableArgument) as e:
        fncache.hash(value)
    message = str(e.value)
    assert "fncache.file(path)" in message and "fncache.ref" in message
    return message


@pytest.fixture
def csv(tmp_path: Path) -> str:
    pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6]}).to_csv(tmp_path / "a.csv", index=False)
    return str(tmp_path / "a.csv")


def test_arrays_key_by_operations_and_values() -> None:
    """Equal arrays built twice key alike; other values, chunks or operations key apart."""
    def build(values: Any, chunks: int = 3) -> Any:
        return da.from_array(np.asarray(values), chunks=chunks)

    x = np.arange(6)
    assert fncache.hash(build(x) + 1) == fncache.hash(build(x) + 1)
    keys = {fncache.hash(v) for v in (build(x) + 1, build(x) + 2, build(x) * 1, build(x + 1) + 1,
                                      build(x, 2) + 1, (build(x) + 1).sum())}
    assert len(keys) == 6


def test_dataframes_key_by_operations_and_file_content(csv: str) -> None:
    """One expression over one file keys alike when built twice; another operation or a rewritten
    file keys apart."""
    a = fncache.hash(dd.read_csv(csv).a.sum())
    assert a == fncache.hash(dd.read_csv(csv).a.sum())
    assert a != fncache.hash(dd.read_csv(csv).b.sum())
    assert a != fncache.hash(dd.read_csv(csv)[dd.read_csv(csv).a > 1].a.sum())
    pd.DataFrame({"a": [7, 8, 9], "b": [4, 5, 6]}).to_csv(csv, index=False)
    assert a != fncache.hash(dd.read_csv(csv).a.sum())


def test_from_pandas_keys_by_values() -> None:
    """A frame from pandas is keyed by its values."""
    def build(values: list[int]) -> Any:
        return dd.from_pandas(pd.DataFrame({"a": values}), npartitions=2)

    assert fncache.hash(build([1, 2, 3])) == fncache.hash(build([1, 2, 3]))
    assert fncache.hash(build([1, 2, 3])) != fncache.hash(build([1, 2, 4]))


def test_sources_that_cannot_be_determined_are_refused(csv: str) -> None:
    """from_map over path strings, from_delayed and an array whose task loads a path are refused,
    naming the remedies; fncache.file items are keyed by content instead."""
    import dask

    assert "cannot tell what it" in _refusal(dd.from_map(pd.read_csv, [csv]))
    fncache.hash(dd.from_map(pd.read_csv, [fncache.file(csv)]))
    assert "FromDelayed" in _refusal(dd.from_delayed([dask.delayed(pd.read_csv)(csv)],
                                                     meta={"a": "i8", "b": "i8"}))
    loaded = da.from_delayed(dask.delayed(np.loadtxt)(csv), shape=(3,), dtype=float)
    assert "cannot tell what it" in _refusal(loaded)


def test_remote_files_are_refused() -> None:
    """A CSV read through a file system other than the local one is refused, never keyed by its
    name."""
    fsspec = pytest.importorskip("fsspec")
    with fsspec.open("memory://fncache-test/a.csv", "w") as f:
        f.write("a\n1\n")
    assert "MemoryFileSystem" in _refusal(dd.read_csv("memory://fncache-test/a.csv"))
    assert "MemoryFileSystem" in _refusal(fsspec.open("memory://fncache-test/a.csv"))


def test_delayed_reading_a_path_is_refused_and_a_wrapped_file_is_keyed(csv: str) -> None:
    """A delayed call given a path string is refused (it was keyed by the name); given
    fncache.file(path) it is keyed by the file's content."""
    import dask

    assert "is given the path" in _refusal(dask.delayed(pd.read_csv)(csv))
    before = fncache.hash(dask.delayed(pd.read_csv)(fncache.file(csv)))
    assert before == fncache.hash(dask.delayed(pd.read_csv)(fncache.file(csv)))
    pd.DataFrame({"a": [0, 0, 0], "b": [4, 5, 6]}).to_csv(csv, index=False)
    assert before != fncache.hash(dask.delayed(pd.read_csv)(fncache.file(csv)))


def test_paths_in_other_forms_are_refused(csv: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task given a path as a ``Path``, as bytes, inside a ``functools.partial`` it calls, or
    as the bare name of a file in the working folder is refused (each was keyed by the name, and
    a changed file was a stale hit); a column name, a bare folder name and fncache.file are not."""
    import functools
    import pathlib

    import dask

    for value in (dask.delayed(pd.read_csv)(pathlib.Path(csv)),
                  dask.delayed(pd.read_csv)(os.fsencode(csv)),
                  dask.delayed(functools.partial(pd.read_csv, csv))(),
                  dd.from_map(pd.read_csv, [pathlib.Path(csv)])):
        assert "is given the path" in _refusal(value)
    monkeypatch.chdir(os.path.dirname(csv))
    assert "is given the path" in _refusal(dd.from_map(pd.read_csv, [os.path.basename(csv)]))
    os.mkdir("b")
    fncache.hash(dd.from_pandas(pd.DataFrame({"b": [1, 2]}), npartitions=1)["b"])
    fncache.hash(dd.from_map(pd.read_csv, [fncache.file(os.path.basename(csv))]))


def test_delayed_values_key_alike_in_two_processes(tmp_path: Path) -> None:
    """dask.delayed names its tasks with a random id per process; the key leaves names out, so two
    processes (dask alone imported) give one key, and another argument another."""
    from tests.helpers import run_py, write

    script = write(tmp_path / "job.py", """
        import sys, dask, fncache
        print(fncache.hash(dask.delayed(sum)([1, int(sys.argv[1])])))
    """)
    keys = [run_py(script, arg).stdout.strip() for arg in ("2", "2", "3")]
    assert keys[0] == keys[1] != keys[2]


def test_a_parquet_frame_made_before_its_files_changed_reads_and_keys_what_it_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dask keeps the files and schema it found when ``read_parquet`` was called: a frame made
    before a file was added, or before a file gained a column, still reads those. Its result was
    stored under the key of a frame made now, which then hit it (one row, where it reads two)."""
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    pd.DataFrame({"v": [1]}).to_parquet("data/a.parquet")
    older = dd.read_parquet("data")
    pd.DataFrame({"v": [2]}).to_parquet("data/b.parquet")
    rows = fncache.memoize(store=str(tmp_path / "store"))(lambda f: len(f.compute()))
    assert rows(older) == len(older.compute()) == 1
    assert rows(dd.read_parquet("data")) == 2

    (tmp_path / "cols").mkdir()
    pd.DataFrame({"v": [1]}).to_parquet("cols/a.parquet")
    older = dd.read_parquet("cols")
    pd.DataFrame({"v": [1], "w": [2]}).to_parquet("cols/a.parquet")
    width = fncache.memoize(store=str(tmp_path / "store"))(lambda f: list(f.compute().columns))
    assert width(older) == list(older.compute().columns) == ["v"]
    assert width(dd.read_parquet("cols")) == ["v", "w"]


def test_a_filtered_parquet_frame_keys_the_row_groups_it_planned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``filters=`` prunes row groups by the statistics the frame gathered when made: a frame
    made before its file was rewritten reads through that plan (nothing, here) while a frame made
    after reads the new rows; they are two keys."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"x": [1, 2]}), "data/a.parquet")
    older = dd.read_parquet("data", filters=[("x", ">", 5)])
    pq.write_table(pa.table({"x": [10, 20]}), "data/a.parquet", row_group_size=1)
    rows = fncache.memoize(store=str(tmp_path / "store"))(
        lambda f: sorted(f.compute()["x"].tolist()))
    assert rows(older) == sorted(older.compute()["x"].tolist())
    assert rows(dd.read_parquet("data", filters=[("x", ">", 5)])) == [10, 20]
