"""xarray values opened lazily: keyed by what they do with their files, refused when the file is
not a path (the rewrite-in-place cases run in subprocesses in tests/test_lazy_readers.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import fncache

xr = pytest.importorskip("xarray")
np = pytest.importorskip("numpy")
pytest.importorskip("h5netcdf")


def _dataset() -> Any:
    return xr.Dataset({"t": (("i", "j"), np.arange(12.0).reshape(3, 4)),
                       "u": ("i", np.array([1, 2, 3]))}, coords={"i": [10, 20, 30]})


@pytest.fixture
def nc(tmp_path: Path) -> str:
    path = str(tmp_path / "a.nc")
    _dataset().to_netcdf(path, engine="h5netcdf")
    return path


def _open(path: str, **kwargs: Any) -> Any:
    return xr.open_dataset(path, engine="h5netcdf", **kwargs)


def test_same_lazy_dataset_keys_alike(nc: str) -> None:
    """Opening one file twice gives one key (no file manager id or lock token in it)."""
    assert fncache.hash(_open(nc)) == fncache.hash(_open(nc))
    assert fncache.hash(_open(nc, chunks={"i": 1})) == fncache.hash(_open(nc, chunks={"i": 1}))


def test_what_is_done_with_the_file_is_keyed(nc: str) -> None:
    """Selected variables, lazy indexing, decoding options and chunks each change the key."""
    keys = [fncache.hash(v) for v in (
        _open(nc), _open(nc)[["t"]], _open(nc)["t"], _open(nc).isel(i=slice(0, 2)),
        _open(nc).sel(i=20), _open(nc, mask_and_scale=False), _open(nc, chunks={"i": 1}),
        _open(nc, chunks={"i": 2}))]
    assert len(set(keys)) == len(keys)


def test_file_content_is_keyed(nc: str) -> None:
    """A rewritten file changes the key of a new lazy dataset over it."""
    before = fncache.hash(_open(nc))
    (_dataset() + 1).to_netcdf(nc, engine="h5netcdf")
    assert fncache.hash(_open(nc)) != before


def test_in_memory_dataset_keeps_its_content_key() -> None:
    """A dataset built in memory is keyed by its values, as before."""
    assert fncache.hash(_dataset()) == fncache.hash(_dataset())
    assert fncache.hash(_dataset()) != fncache.hash(_dataset() + 1)


def test_lazy_and_loaded_compute_alike(nc: str, tmp_path: Path) -> None:
    """A memoized function over a lazy dataset computes once and then hits in the process."""
    calls = []

    @fncache.memoize(store=str(tmp_path / "store"))
    def mean(ds: Any) -> float:
        calls.append(1)
        return float(ds["t"].mean())

    assert mean(_open(nc)) == mean(_open(nc)) == 5.5
    assert len(calls) == 1


def test_open_file_object_is_refused(nc: str) -> None:
    """A dataset read from in-memory bytes or an open file names the remedies, and is never keyed
    by a name."""
    with open(nc, "rb") as f:
        data = f.read()
    with pytest.raises(fncache.UnhashableArgument) as e:
        fncache.hash(xr.open_dataset(io.BytesIO(data), engine="h5netcdf"))
    assert "fncache.file(path)" in str(e.value) and "fncache.ref" in str(e.value)


@pytest.mark.parametrize("engine", ["h5netcdf", "scipy"])
def test_a_dataset_whose_file_was_replaced_since_it_was_opened_is_refused(tmp_path: Path,
                                                                         engine: str) -> None:
    """A writer's atomic replace while the dataset holds the old file open: it still reads the old
    file, so it is refused, never keyed by the new file's content; one opened after keys as usual."""
    pytest.importorskip("scipy") if engine == "scipy" else None
    path = str(tmp_path / "a.nc")
    _dataset().to_netcdf(path, engine=engine)
    old = xr.open_dataset(path, engine=engine)
    assert old["u"].values.tolist() == [1, 2, 3]  # the file is open now
    (_dataset() + 1).to_netcdf(path + ".tmp", engine=engine)
    Path(path + ".tmp").replace(path)
    assert old["t"].values.tolist() != xr.open_dataset(path, engine=engine)["t"].values.tolist()
    with pytest.raises(fncache.UnhashableArgument, match="was replaced since the file was opened"):
        fncache.hash(old)
    fresh = [xr.open_dataset(path, engine=engine) for _ in range(2)]
    assert fncache.hash(fresh[0]) == fncache.hash(fresh[1])
