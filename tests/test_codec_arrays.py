"""A result's pickle without the copies pickle makes of large datetime arrays and Arrow-backed
pandas columns (``_bands``).

numpy pickles datetime arrays in band (they export no buffer), and pandas' pickle of an Arrow-backed
column copies it to combine its chunks; fncache's result pickle sends the arrays' bytes out of band
and keeps a one-chunk column's own buffers. What a user sees: the same values, dtype (unit and byte
order), shape, flags and chunks back, from a frame that names nothing numpy's own pickles do not;
everything else pickled as ``pickle.dumps`` pickles it, ``copyreg`` registrations too.
"""

from __future__ import annotations

import copyreg
import io
import pickle

import numpy as np
import pytest

from fncache import _bands, _codec, memoize

KEY = "0123456789abcdef" * 2


def _roundtrip(value):
    frame = _codec.encode(value, KEY, created=1.0, duration=2.0)
    loaded, header = _codec.decode(frame, KEY)
    return loaded, header


def _globals(pickled: bytes, buffers) -> set[str]:
    """The names a pickle imports as it is loaded."""
    names = set()

    class Recording(pickle.Unpickler):
        def find_class(self, module, name):
            names.add(f"{module}.{name}")
            return super().find_class(module, name)

    Recording(io.BytesIO(pickled), buffers=buffers).load()
    return names


@pytest.mark.parametrize("dtype", ["M8[ns]", "M8[s]", ">M8[ms]", "m8[us]", ">m8[D]"])
@pytest.mark.parametrize("shape", [(20_000,), (100, 200), (10, 40, 50)])
def test_a_large_datetime_array_is_out_of_band_and_comes_back_the_same(dtype, shape):
    a = (np.arange(int(np.prod(shape))) * 37 - 5_000).astype(dtype).reshape(shape)
    a.flat[7] = np.array(["NaT"]).astype(a.dtype)[0]
    loaded, header = _roundtrip({"a": a})
    b = loaded["a"]
    assert b.dtype == a.dtype and b.dtype.str == a.dtype.str and b.shape == a.shape
    assert b.tobytes() == a.tobytes()  # NaT and every value, byte for byte
    assert b.flags.writeable and b.flags.c_contiguous
    assert header.buffer_lens == (a.nbytes,) and header.pickle_len < 1024


def test_datetime_arrays_come_back_writable_or_read_only_as_numeric_ones_do():
    made = []
    for kind in ("M8[s]", "f8"):
        for writable in (True, False):
            a = np.arange(20_000).astype(kind)
            a.flags.writeable = writable
            made.append(a)
    loaded, _ = _roundtrip(made)
    assert [b.flags.writeable for b in loaded] == [True, False, True, False]
    assert all(np.array_equal(a, b) for a, b in zip(made, loaded, strict=True))


def test_a_mapped_datetime_array_holds_its_map_as_a_numeric_one_does(tmp_path):
    """Closing the map under a live array fails (it does not unmap memory the array reads)."""
    from fncache import Memory

    memory = Memory(tmp_path, mmap_mode="r", verbose=0)

    @memory.cache
    def arrays(n):
        return {"t": np.arange(n).astype("M8[s]"), "f": np.ones(n)}

    arrays(50_000)
    out = arrays(50_000)
    for name in ("t", "f"):
        base = out[name]
        while getattr(base, "base", None) is not None or isinstance(base, memoryview):
            base = base.obj if isinstance(base, memoryview) else base.base
        assert type(base).__name__ == "mmap"
        with pytest.raises(BufferError):
            base.close()
    assert out["t"][-1] == np.datetime64(49_999, "s")


@pytest.mark.parametrize("make", [
    lambda: np.arange(100).astype("M8[s]"),  # under 64 KiB
    lambda: np.arange(40_000).astype("M8[s]").reshape(200, 200).T,  # Fortran order
    lambda: np.arange(40_000).astype("m8[s]")[::2],  # strided
    lambda: np.array(np.datetime64("2000-01-01")),  # 0-d
    lambda: np.empty((0, 9000), "M8[s]"),  # empty
], ids=["small", "fortran", "strided", "0-d", "empty"])
def test_other_datetime_arrays_are_pickled_in_band_as_numpy_pickles_them(make):
    a = make()
    loaded, header = _roundtrip(a)
    assert header.buffer_lens == ()
    assert loaded.dtype == a.dtype and loaded.shape == a.shape and np.array_equal(loaded, a)


def test_the_frame_references_only_numpy_so_any_reader_loads_it():
    a = np.arange(50_000).astype("M8[us]")
    buffers = []
    pickled = _bands.dumps({"t": a, "f": np.ones(10_000)}, buffers.append)
    assert len(buffers) == 2
    names = _globals(pickled, [bytearray(b) for b in buffers])
    numeric = []
    numpys = _globals(pickle.dumps(np.ones(10_000), protocol=5, buffer_callback=numeric.append),
                      [bytearray(b) for b in numeric])
    assert names == numpys | {"numpy.dtype"}  # what numpy's own pickle of a float array names


class _Registered:
    def __init__(self, x):
        self.x = x


def _reduce_registered(obj):
    return _Registered, (obj.x * 10,)


def test_copyreg_registrations_made_after_import_are_used(monkeypatch):
    monkeypatch.setitem(copyreg.dispatch_table, _Registered, _reduce_registered)
    loaded, _ = _roundtrip([_Registered(4), np.arange(20_000).astype("M8[s]")])
    assert loaded[0].x == 40 and loaded[1].dtype == np.dtype("M8[s]")


def test_a_users_copyreg_reducer_for_ndarray_is_kept(monkeypatch):
    def as_list(a):
        return list, (a.tolist(),)

    monkeypatch.setitem(copyreg.dispatch_table, np.ndarray, as_list)
    loaded, _ = _roundtrip(np.arange(20_000).astype("M8[s]"))
    assert isinstance(loaded, list) and len(loaded) == 20_000


def test_numeric_and_object_arrays_are_pickled_as_numpy_pickles_them():
    f, o = np.arange(20_000, dtype=np.float64), np.array(["x", 1, None] * 10_000, dtype=object)
    pickled = _bands.dumps((f, o), [].append)
    assert pickled == pickle.dumps((f, o), protocol=5, buffer_callback=[].append)


@pytest.mark.parametrize("where", ["top", "dict", "list", "tuple"])
def test_datetime_arrays_at_a_values_top_or_one_level_down_go_out_of_band(where):
    a = np.arange(20_000).astype("M8[s]")
    value = {"top": a, "dict": {"t": a, "n": 1}, "list": [a, "x"], "tuple": (1, a)}[where]
    buffers = []
    _bands.dumps(value, buffers.append)
    assert len(buffers) == 1


def test_other_values_are_pickled_by_pickle_dumps_itself():
    """Deeper, or among many items, a datetime array stays in band (pickled as before); values
    of many objects are not slowed by the table."""
    a = np.arange(20_000).astype("M8[s]")
    for value in ([[a]], [a] + list(range(100)), {"k": {"t": a}}, list(range(10_000))):
        buffers = []
        assert _bands.dumps(value, buffers.append) == pickle.dumps(value, protocol=5)
        assert buffers == []


def test_a_dataframe_with_datetime_columns_round_trips_through_a_store(tmp_path):
    pd = pytest.importorskip("pandas")
    calls = []

    @memoize(store=str(tmp_path / "store"))
    def frame(n):
        calls.append(n)
        return pd.DataFrame({
            "t": pd.date_range("2000-01-01", periods=n, freq="s"),
            "tz": pd.date_range("2000-01-01", periods=n, freq="min", tz="Europe/Paris"),
            "d": pd.to_timedelta(np.arange(n), unit="ms"),
            "x": np.arange(n, dtype=np.float64),
        }).set_index(pd.date_range("1999-01-01", periods=n, freq="h"))

    first, second = frame(50_000), frame(50_000)
    assert calls == [50_000]
    pd.testing.assert_frame_equal(first, second)
    assert second.index.freq == first.index.freq
    assert second["tz"].dtype == first["tz"].dtype and str(second["tz"].dtype.tz) == "Europe/Paris"
    second.iloc[0, 3] = -1.0  # a loaded frame is writable, as before
    assert frame(50_000).iloc[0, 3] == 0.0


def test_an_xarray_time_coordinate_goes_out_of_band_and_round_trips():
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    ds = xr.Dataset({"v": ("time", np.arange(20_000.0))},
                    coords={"time": pd.date_range("2000-01-01", periods=20_000, freq="h")})
    loaded, header = _roundtrip(ds)
    assert len(header.buffer_lens) == 2  # the variable and its time coordinate
    xr.testing.assert_identical(loaded, ds)


# -- Arrow-backed pandas arrays (pandas 3's string columns) ---------------------------------------

def _address(buffer) -> int:
    return np.frombuffer(memoryview(buffer).cast("B"), dtype=np.uint8).ctypes.data


def _arrow_frame(pd, n=50_000):
    return pd.DataFrame({"s": pd.array([f"id-{i}" for i in range(n)], dtype="string[pyarrow]"),
                         "i": pd.array(np.arange(n), dtype="int64[pyarrow]"),
                         "x": np.arange(n, dtype=np.float64)})


def test_an_arrow_column_is_pickled_from_its_own_buffers_and_round_trips():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    df = _arrow_frame(pd)
    buffers = []
    pickled = _bands.dumps(df, buffers.append)
    own = df["s"].array._pa_array.chunk(0).buffers()[2]
    assert own.address in {_address(b) for b in buffers}  # not a copy made to pickle it
    loaded = pickle.loads(pickled, buffers=[bytearray(memoryview(b).cast("B")) for b in buffers])
    pd.testing.assert_frame_equal(loaded, df)
    plain = pickle.loads(pickle.dumps(df, protocol=5))
    for name in ("s", "i"):
        assert loaded[name].dtype == plain[name].dtype
        assert loaded[name].array._pa_array.num_chunks == plain[name].array._pa_array.num_chunks


def test_a_slice_or_chunks_of_an_arrow_column_are_combined_as_pandas_pickles_them():
    """A small slice of a large column is stored compact (its whole buffers are not kept), and a
    column of several chunks loads as pandas' own pickle loads it (one chunk)."""
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    head = _arrow_frame(pd, 500_000).head(10)
    loaded, header = _roundtrip(head)
    pd.testing.assert_frame_equal(loaded, head)
    assert header.pickle_len + sum(header.buffer_lens) < 64 * 1024
    chunked = pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array([["a", "b"] * 40_000, ["c"] * 9])))
    loaded, _ = _roundtrip(chunked)
    pd.testing.assert_series_equal(loaded, chunked)
    assert loaded.array._pa_array.num_chunks == 1


def test_a_pandas_whose_getstate_does_otherwise_gets_the_plain_pickle(monkeypatch):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    from pandas.core.arrays.arrow.array import ArrowExtensionArray

    seen = []

    def getstate(self):  # another pandas's: reads the chunks itself
        seen.append(type(self._pa_array).__name__)
        state = self.__dict__.copy()
        state["_pa_array"] = pa.concat_arrays(self._pa_array.chunks)
        state["_cache"] = {}
        return state

    monkeypatch.setattr(ArrowExtensionArray, "__getstate__", getstate)
    df = _arrow_frame(pd)
    loaded, _ = _roundtrip({"df": df})
    pd.testing.assert_frame_equal(loaded["df"], df)
    assert "ChunkedArray" in seen  # the real array was pickled by pandas' own state


def _wide_ints(pd, pa):
    return pd.DataFrame({f"c{j}": pd.array(np.arange(500), dtype="int64[pyarrow]")
                         for j in range(200)}).head(5)


def _list_views(pd, pa):
    values = pa.array([list(range(100))] * 10_000, pa.list_view(pa.int64()))
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array([values]))).head(10)


def _shared_fields(pd, pa):
    a = pa.array(np.arange(1_000_000))
    st = pa.StructArray.from_arrays([a] * 20, [f"f{i}" for i in range(20)])
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array([st[:50_000]])))


@pytest.mark.parametrize("make", [_wide_ints, _list_views, _shared_fields],
                         ids=["many small slices", "list views", "shared struct fields"])
def test_a_slices_entry_is_no_larger_than_pandas_own_pickle_of_it(make):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    value = make(pd, pa)
    frame = _codec.encode(value, KEY, created=1.0, duration=2.0)
    assert len(frame) <= len(pickle.dumps(value, protocol=5)) * 1.05 + 4096
    loaded, _ = _codec.decode(frame, KEY)
    assert loaded.equals(value)


def _frame_subclass():
    import pandas as pd

    global Frame

    class Frame(pd.DataFrame):  # a user's subclass, importable by pickle (a module global)
        @property
        def _constructor(self):
            return Frame

    return Frame


def test_a_users_dataframe_subclass_gets_the_same_pickle_as_a_dataframe():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = _frame_subclass()(_arrow_frame(pd).assign(t=pd.date_range("2000", periods=50_000, freq="s")))
    buffers = []
    _bands.dumps(frame, buffers.append)
    own = frame["s"].array._pa_array.chunk(0).buffers()[2]
    assert own.address in {_address(b) for b in buffers}
    assert frame["t"].array._ndarray.nbytes in {memoryview(b).nbytes for b in buffers}
