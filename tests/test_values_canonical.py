"""Arrays, tensors and tables: the same logical value built many ways is one key; one change is another.

Each library gets a hypothesis property that builds one value several ways (fresh; sliced out of a
larger buffer; re-chunked; through IPC, Parquet, memory maps; read-only; Fortran or strided; with an
all-valid bitmap; after ``.null_count``) and asserts one key, then applies one change at a time
(a value, a null, a dtype parameter, a field name, a schema flag, the row count, subclass state)
and asserts a new key. The same holds through a ``memoize`` round trip with a disk store.
"""

from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fncache

from .helpers import fail_on_pickle_fallback, import_torch, last_json, run_py, write

H = fncache.hash
SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

canonical_paths_only = pytest.fixture(autouse=True)(fail_on_pickle_fallback)


def _one_key(ways: dict[str, object]) -> None:
    keys = {name: H(v) for name, v in ways.items()}
    assert len(set(keys.values())) == 1, keys


def _all_new(base: object, changed: dict[str, object]) -> None:
    key = H(base)
    same = [name for name, v in changed.items() if H(v) == key]
    assert not same, same


def _hits_across(ways: list[object], tmp: str) -> None:
    calls = []

    def size(x):
        calls.append(1)
        return 1

    f = fncache.memoize(store=os.path.join(tmp, "store"))(size)
    for v in ways:
        f(v)
    assert len(calls) == 1 and f.cache_info().hits == len(ways) - 1


# -- numpy -------------------------------------------------------------------------------------

arrays = st.integers(1, 6).flatmap(lambda rows: st.integers(1, 6).flatmap(
    lambda cols: st.tuples(st.sampled_from(["<f8", "<i4", "<u2", "|b1", "<c8"]),
                           st.lists(st.integers(-50, 50), min_size=rows * cols,
                                    max_size=rows * cols).map(lambda v, r=rows, c=cols:
                                                              np.array(v).reshape(r, c)))))


def _numpy_ways(a: np.ndarray, tmp: str) -> dict[str, object]:
    big = np.zeros((a.shape[0] + 3, a.shape[1] * 2 + 1), dtype=a.dtype)
    big[2:2 + a.shape[0], 1::2] = a
    ro = a.copy()
    ro.flags.writeable = False
    path = os.path.join(tmp, "a.npy")
    np.save(path, a)
    mm = np.memmap(os.path.join(tmp, "a.bin"), dtype=a.dtype, mode="w+", shape=a.shape)
    mm[:] = a
    return {"fresh": a.copy(), "fortran": np.asfortranarray(a), "strided": big[2:2 + a.shape[0], 1::2],
            "read-only": ro, "np.load mmap": np.load(path, mmap_mode="r"), "memmap": mm,
            "frombuffer": np.frombuffer(a.tobytes(), dtype=a.dtype).reshape(a.shape),
            "transposed twice": np.ascontiguousarray(a.T).T}


@SETTINGS
@given(arrays)
def test_numpy_equal_arrays_built_any_way_are_one_key(case):
    """Equal numpy arrays from copies, views, memory maps and read-only buffers share a key."""
    dtype, base = case
    a = base.astype(dtype)
    with tempfile.TemporaryDirectory() as tmp:
        _one_key(_numpy_ways(a, tmp))


@SETTINGS
@given(arrays)
def test_numpy_one_change_is_a_new_key(case):
    """A changed element, dtype or shape gives a new key."""
    dtype, base = case
    a = base.astype(dtype)
    changed = a.copy()
    changed.flat[-1] = 1 if not changed.flat[-1] else 0
    other = "<i8" if dtype != "<i8" else "<i4"
    _all_new(a, {"value": changed, "dtype": a.astype(other), "shape": a.reshape(1, -1)[:, :]
                 if a.shape[0] > 1 else a.reshape(-1), "one more row": np.vstack([a, a[:1]])})


def test_numpy_memoize_hits_across_layouts(tmp_path):
    """A memoized call hits again with a read-only, memory-mapped or strided twin."""
    a = np.arange(30.0).reshape(5, 6)
    _hits_across(list(_numpy_ways(a, str(tmp_path)).values()), str(tmp_path))


# -- pyarrow -----------------------------------------------------------------------------------

pa = pytest.importorskip("pyarrow")

ints = st.lists(st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)), min_size=1, max_size=20)
texts = st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1, max_size=20)
bools = st.lists(st.one_of(st.none(), st.booleans()), min_size=1, max_size=20)
lists = st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(-9, 9)), max_size=4)),
                 min_size=1, max_size=12)
COLUMNS = {"i": (ints, pa.int64(), 7), "s": (texts, pa.string(), "junk"),
           "b": (bools, pa.bool_(), True), "l": (lists, pa.list_(pa.int64()), [5, 5])}


def _garbage_under_nulls(arr):
    """The same array with non-zero bytes under its null slots (Arrow leaves them undefined)."""
    if not arr.null_count or arr.type != pa.int64():
        return arr
    data = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr)].copy()
    valid = np.array(arr.is_valid())
    data[~valid] = 12345
    return pa.Array.from_buffers(arr.type, len(arr), [arr.buffers()[0] and
                                                      pa.py_buffer(np.packbits(valid, bitorder="little")),
                                                      pa.py_buffer(data)])


def _with_all_valid_bitmap(arr):
    if arr.null_count or arr.type != pa.int64():
        return arr
    bitmap = pa.py_buffer(np.packbits(np.ones(len(arr), bool), bitorder="little"))
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, pa.py_buffer(np.array(arr.to_pylist()))])


def _array_ways(values, typ, junk):
    fresh = pa.array(values, typ)
    sliced = pa.array([junk] * 3 + list(values) + [junk] * 2, typ).slice(3, len(values))
    counted = pa.array(values, typ)
    counted.null_count  # noqa: B018 - reading it caches the count inside the array
    return {"fresh": fresh, "sliced": sliced, "null_count read": counted,
            "garbage under nulls": _garbage_under_nulls(fresh), "all-valid bitmap":
            _with_all_valid_bitmap(fresh)}


@SETTINGS
@given(st.sampled_from(sorted(COLUMNS)).flatmap(lambda k: st.tuples(st.just(k), COLUMNS[k][0])))
def test_arrow_arrays_built_any_way_are_one_key(case):
    """An Arrow array fresh, sliced, with garbage under nulls or an all-valid bitmap is one key."""
    name, values = case
    _, typ, junk = COLUMNS[name]
    _one_key(_array_ways(values, typ, junk))
    cut = len(values) // 2
    _one_key({"one chunk": pa.chunked_array([pa.array(values, typ)]),
              "two chunks": pa.chunked_array([pa.array(values[:cut], typ),
                                              pa.array(values[cut:], typ)], type=typ),
              "sliced chunks": pa.chunked_array([pa.array([junk] + values, typ).slice(1, cut),
                                                 pa.array(values[cut:] + [junk], typ)
                                                 .slice(0, len(values) - cut)], type=typ)})


def _table(cols):
    return pa.table({k: pa.array(cols[k], typ) for k, (_, typ, _) in COLUMNS.items()})


tables = st.integers(1, 15).flatmap(lambda n: st.fixed_dictionaries({
    k: st.lists(COLUMNS[k][0].map(lambda v: v[0]), min_size=n, max_size=n) for k in COLUMNS}))


def _table_ways(cols, tmp):
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    t = _table(cols)
    n = t.num_rows
    bigger = _table({k: [COLUMNS[k][2]] * 2 + v + [COLUMNS[k][2]] for k, v in cols.items()})
    cut = n // 2
    with ipc.new_file(os.path.join(tmp, "t.arrow"), t.schema) as w:
        w.write_table(t, max_chunksize=max(1, cut))
    with pa.memory_map(os.path.join(tmp, "t.arrow")) as src:
        from_ipc = ipc.open_file(src).read_all()
    pq.write_table(t, os.path.join(tmp, "t.parquet"), row_group_size=max(1, cut),
                   use_compliant_nested_type=False)  # keeps the list item name "item"
    return {"fresh": t, "sliced": bigger.slice(2, n),
            "rechunked": pa.concat_tables([t.slice(0, cut), t.slice(cut)]),
            "ipc memory map": from_ipc, "parquet": pq.read_table(os.path.join(tmp, "t.parquet")),
            "combined": pa.concat_tables([t.slice(0, cut), t.slice(cut)]).combine_chunks()}


@SETTINGS
@given(tables)
def test_arrow_tables_built_any_way_are_one_key(cols):
    """A table fresh, sliced, re-chunked, read from IPC or Parquet is one key."""
    with tempfile.TemporaryDirectory() as tmp:
        _one_key(_table_ways(cols, tmp))


@SETTINGS
@given(tables)
def test_arrow_table_one_change_is_a_new_key(cols):
    """A value, a null, a type parameter, a field name, nullability or the row count: new key."""
    t = _table(cols)
    value = dict(cols, i=[(cols["i"][0] or 0) + 1] + cols["i"][1:])
    null = dict(cols, s=[None if cols["s"][0] is not None else "x"] + cols["s"][1:])
    schema = t.schema
    _all_new(t, {
        "value": _table(value), "null": _table(null),
        "type parameter": t.cast(schema.set(0, schema.field(0).with_type(pa.int32()))),
        "field name": t.rename_columns(["j", "s", "b", "l"]),
        "nullable flag": t.cast(schema.set(2, schema.field(2).with_nullable(False)))
        if t["b"].null_count == 0 else t.drop_null(),
        "list item name": t.cast(schema.set(3, pa.field("l", pa.list_(pa.field("x", pa.int64()))))),
        "metadata": t.replace_schema_metadata({"k": "v"}),
        "row count": t.slice(0, t.num_rows - 1) if t.num_rows > 1 else pa.concat_tables([t, t]),
    })


def test_arrow_memoize_hits_across_layouts(tmp_path):
    """A memoized call hits again with the table read back from IPC, Parquet, sliced or re-chunked."""
    cols = {"i": [1, None, 3, 4], "s": ["a", None, "ccc", ""], "b": [True, None, False, True],
            "l": [[1], None, [], [2, None]]}
    _hits_across(list(_table_ways(cols, str(tmp_path)).values()), str(tmp_path))


# -- polars ------------------------------------------------------------------------------------

pl = pytest.importorskip("polars")


def _flagged_as_fresh(ways):
    """The ways whose columns carry the sortedness flags the fresh one's do."""
    def flags(v):
        return [c.flags for c in (v.get_columns() if isinstance(v, pl.DataFrame) else [v])]

    return {k: v for k, v in ways.items() if flags(v) == flags(ways["fresh"])}


def _polars_ways(cols, tmp):
    df = pl.DataFrame({"i": pl.Series(cols["i"], dtype=pl.Int64), "s": pl.Series(cols["s"], dtype=pl.String),
                       "b": pl.Series(cols["b"], dtype=pl.Boolean)})
    n = df.height
    big = pl.concat([df.head(1), df, df.head(2)])
    cut = n // 2
    df.write_ipc(os.path.join(tmp, "p.arrow"))
    df.write_parquet(os.path.join(tmp, "p.parquet"))
    return {"fresh": df, "sliced": big.slice(1, n), "chunks": pl.concat([df[:cut], df[cut:]], rechunk=False),
            "ipc": pl.read_ipc(os.path.join(tmp, "p.arrow")),
            "parquet": pl.read_parquet(os.path.join(tmp, "p.parquet")),
            "from arrow": pl.from_arrow(pa.table({"i": pa.array(cols["i"], pa.int64()),
                                                  "s": pa.array(cols["s"], pa.large_string()),
                                                  "b": pa.array(cols["b"], pa.bool_())}))}


@SETTINGS
@given(tables)
def test_polars_frames_built_any_way_are_one_key(cols):
    """A polars frame fresh, sliced, chunked, read from IPC or Parquet, or from Arrow is one key.

    Unless polars flagged a column sorted on the way where its values have ties (``pl.concat`` of
    one-row chunks does): the flag changes results (``arg_max`` takes the last of equal values),
    so that frame is another value (see test_values_regressions)."""
    with tempfile.TemporaryDirectory() as tmp:
        ways = _polars_ways(cols, tmp)
        _one_key(_flagged_as_fresh(ways))
        _one_key(_flagged_as_fresh({k: v["s"] for k, v in ways.items()}))
        df = ways["fresh"]
        _all_new(df, {"value": df.with_columns(pl.col("i").fill_null(0) + 1),
                      "null": df.with_columns(pl.lit(None, pl.String).alias("s"))
                      if df["s"].null_count() < df.height else df.with_columns(pl.lit("x").alias("s")),
                      "dtype": df.with_columns(pl.col("i").cast(pl.Int32)),
                      "name": df.rename({"i": "j"}), "rows": pl.concat([df, df.head(1)])})


def test_polars_memoize_hits_across_layouts(tmp_path):
    """A memoized call hits again with the frame sliced, chunked or read back from files."""
    cols = {"i": [1, None, 3, 4], "s": ["a", None, "c" * 20, ""], "b": [True, None, False, True]}
    _hits_across(list(_polars_ways(cols, str(tmp_path)).values()), str(tmp_path))


def test_polars_categoricals_key_by_values_not_categories():
    """Categorical and Enum columns key by their values, whatever order categories were met in,
    chunked, sliced or from Arrow; Categorical, Enum and String stay three keys."""
    values = ["b", None, "a", "b", "c", "a"]
    cat = pl.Series("c", values, dtype=pl.Categorical)
    seen_first = pl.Series("c", ["c", "a", "z", "b"], dtype=pl.Categorical)  # other category order
    from_arrow = pl.from_arrow(pa.DictionaryArray.from_arrays(
        pa.array([1, None, 0, 1, 4, 0], pa.int32()), pa.array(["a", "b", "unused", "b", "c"])))
    enum = pl.Enum(["c", "b", "a", "unused"])
    _one_key({"fresh": cat, "after other categories": pl.concat([seen_first[:0], cat]),
              "chunked": pl.concat([cat[:2], pl.Series("c", values[2:], dtype=pl.Categorical)],
                                   rechunk=False),
              "sliced": pl.concat([seen_first, cat]).slice(len(seen_first), len(values)),
              "from arrow": from_arrow.rename("c"),
              "cast": pl.Series("c", values).cast(pl.Categorical)})
    _one_key({"fresh": pl.Series("c", values, dtype=enum), "cast": pl.Series("c", values).cast(enum),
              "chunked": pl.concat([pl.Series("c", values[:3], dtype=enum),
                                    pl.Series("c", values[3:], dtype=enum)], rechunk=False)})
    _all_new(cat, {"enum": pl.Series("c", values, dtype=enum), "string": pl.Series("c", values),
                   "value": pl.Series("c", values[:-1] + ["c"], dtype=pl.Categorical),
                   "null": pl.Series("c", values[:-1] + [None], dtype=pl.Categorical),
                   "rows": pl.Series("c", values[:-1], dtype=pl.Categorical)})
    assert H(pl.Series("c", values, dtype=enum)) != H(pl.Series("c", values[::-1], dtype=enum))


CATEGORICAL_KEYS = """
import json, sys
import polars as pl
import fncache

if sys.argv[1] == "after many categories":  # the same values get high codes in this process
    kept = pl.Series([f"other{i}" for i in range(5000)], dtype=pl.Categorical)
    assert pl.Series(["b"], dtype=pl.Categorical).to_physical()[0] >= 5000
values = ["b", None, "a", "b", "\u00e9"]
many = [f"v{i % 5000}" for i in range(6000)]
print(json.dumps([fncache.hash(pl.Series("c", values, dtype=pl.Categorical)),
                  fncache.hash(pl.Series("c", many, dtype=pl.Categorical)),
                  fncache.hash(pl.Series("c", values).cast(pl.Enum(["\u00e9", "b", "a"])))]))
"""


@pytest.mark.slow
def test_polars_categorical_keys_do_not_depend_on_the_process_codes(tmp_path):
    """A Categorical keys alike in a fresh process and in one whose shared category set already
    holds thousands of other strings (the codes differ, and so does how the column is read)."""
    script = write(tmp_path / "keys.py", CATEGORICAL_KEYS)
    fresh = last_json(run_py(script, "fresh"))
    crowded = last_json(run_py(script, "after many categories"))
    assert fresh == crowded
    assert len(set(fresh)) == 3


# -- pandas ------------------------------------------------------------------------------------

pd = pytest.importorskip("pandas")


def _pandas_ways(cols, tmp):
    data = {"i": pd.array(cols["i"], dtype="Int64"), "s": pd.array(cols["s"], dtype="str"),
            "f": np.arange(len(cols["i"]), dtype=float), "g": np.ones(len(cols["i"]))}
    at_once = pd.DataFrame(data)
    by_column = pd.DataFrame(index=pd.RangeIndex(len(cols["i"])))
    for k, v in data.items():
        by_column[k] = v
    n = len(cols["i"])
    head = at_once.head(2)
    bigger = pd.concat([head, at_once]).iloc[len(head):].reset_index(drop=True)
    path = os.path.join(tmp, "d.parquet")
    at_once.to_parquet(path)
    back = pd.read_parquet(path)
    return {"at once": at_once, "by column": by_column, "sliced": bigger,
            "pickled": pickle.loads(pickle.dumps(at_once)), "parquet": back,
            "halves": pd.concat([at_once.iloc[: n // 2], at_once.iloc[n // 2:]])}


@SETTINGS
@given(tables)
def test_pandas_frames_built_any_way_are_one_key(cols):
    """A pandas frame built at once, column by column, sliced, pickled or from Parquet is one key."""
    with tempfile.TemporaryDirectory() as tmp:
        ways = _pandas_ways(cols, tmp)
        _one_key(ways)
        _one_key({k: v["s"] for k, v in ways.items()})
        df = ways["at once"]
        changed = df.copy()
        changed.iloc[0, 2] = -1.0
        na = df.copy()
        na["i"] = pd.array([None] * len(df), dtype="Int64") if df["i"].notna().any() else 1
        _all_new(df, {"value": changed, "NA": na, "dtype": df.astype({"f": "float32"}),
                      "column name": df.rename(columns={"f": "h"}),
                      "index": df.set_axis(pd.RangeIndex(1, len(df) + 1)),
                      "rows": pd.concat([df, df.head(1)], ignore_index=True)})


def test_pandas_arrow_dictionary_columns_key_by_values():
    """A pandas column of Arrow dictionary type keys by its values, not by its dictionary (a
    null entry no slot refers to, order, unused entries); a slot referring to a null entry by a
    valid index is not a null slot to Arrow, and keys apart."""
    one = pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 0]), pa.array(["x", "y"]))
    two = pa.DictionaryArray.from_arrays(pa.array([2, 0, None, 2]), pa.array(["y", None, "x", "z"]))
    by_entry = pa.DictionaryArray.from_arrays(pa.array([2, 0, 1, 2]), pa.array(["y", None, "x", "z"]))
    assert one.to_pylist() == two.to_pylist() == by_entry.to_pylist()

    def series(arr):
        return pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array([arr])), name="c")

    assert H(series(one)) == H(series(two))
    assert H(series(one)) != H(series(one.slice(1)))
    assert H(series(by_entry)) != H(series(one))


def test_pandas_memoize_hits_across_layouts(tmp_path):
    """A memoized call hits again with the frame rebuilt column by column, sliced or read back."""
    cols = {"i": [1, None, 3, 4], "s": ["a", None, "c", ""]}
    _hits_across(list(_pandas_ways(cols, str(tmp_path)).values()), str(tmp_path))


def _every_kind_of_column(n=40):
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "f": rng.random(n), "i": np.arange(n), "b": rng.random(n) > .5,
        "t": pd.date_range("2000", periods=n, freq="h"),
        "tz": pd.date_range("2000", periods=n, freq="h", tz="Europe/Paris"),
        "td": pd.to_timedelta(np.arange(n), unit="s"), "p": pd.period_range("2000", periods=n, freq="D"),
        "c": pd.Categorical(rng.choice(["x", "y"], n)),
        "s": pd.array(rng.choice(["a", "bb"], n), dtype="str"),
        "so": pd.Series(rng.choice(["a", "bb"], n), dtype=object),
        "I": pd.array([*range(n - 1), None], dtype="Int64"),
        "B": pd.array([True, None] * (n // 2), dtype="boolean"),
        "iv": pd.arrays.IntervalArray.from_breaks(np.arange(n + 1)),
        "sp": pd.arrays.SparseArray([0, 1] * (n // 2)),
        "pa": pd.array(list(range(n)), dtype="int64[pyarrow]"),
        "f2": rng.random(n),  # a second column of the float block
    })


def test_pandas_frame_columns_from_blocks_key_as_through_iloc(monkeypatch):
    """A frame's columns are taken from its blocks, not through a Series each (``iloc``): every kind of
    column gives the array and dtype ``iloc`` gives, and where pandas' manager cannot give them (another
    pandas) the public path keys the frame as before."""
    from fncache.values import pandas as handler

    df = _every_kind_of_column()
    df.insert(2, "late", 1.5)  # a block of its own, placed between the others
    through_iloc = [df.iloc[:, i] for i in range(df.shape[1])]
    from_blocks = handler._column_values(df)
    assert [v.dtype for v in from_blocks] == [c.dtype for c in through_iloc]
    assert [type(v) for v in from_blocks] == [type(c._values) for c in through_iloc]
    assert [H(v) for v in from_blocks] == [H(c._values) for c in through_iloc]
    key = H(df)

    def fails(self, i):
        raise TypeError("no such manager")

    monkeypatch.setattr(type(df._mgr), "iget_values", fails)
    assert H(df) == key
    monkeypatch.delattr(type(df._mgr), "iget_values")
    assert H(df) == key
    changed = df.copy()
    changed.iloc[3, 0] = -1.0
    assert H(changed) != key


class _FloatColumns(pd.DataFrame):
    """A subclass whose columns, taken one at a time, come out as floats (``_constructor_sliced``)."""

    @property
    def _constructor(self):  # type: ignore[no-untyped-def]
        return _FloatColumns

    @property
    def _constructor_sliced(self):  # type: ignore[no-untyped-def]
        return lambda data, *a, **k: pd.Series(data, *a, **k).astype("float64")


def test_pandas_frame_subclass_keys_its_own_columns_not_what_slicing_makes():
    """A frame is keyed by the arrays it holds (what its pickle keeps), not by what its subclass's
    ``_constructor_sliced`` makes of a column: a frame of ints and one of the equal floats are two
    keys (through ``iloc`` the ints were cast to floats first, and the two frames had one key)."""
    ints, floats = _FloatColumns({"a": [1, 2]}), _FloatColumns({"a": [1.0, 2.0]})
    assert ints["a"].dtype == floats["a"].dtype == "float64"  # the subclass's own view of them
    assert H(ints) != H(floats)


# -- torch -------------------------------------------------------------------------------------

@SETTINGS
@given(arrays)
def test_torch_tensors_built_any_way_are_one_key(case):
    """Equal CPU tensors contiguous, transposed twice, sliced from storage or from numpy are one key."""
    torch = import_torch()
    dtype, base = case
    if dtype == "<u2":
        dtype = "<i2"
    a = base.astype(dtype)
    t = torch.from_numpy(a.copy())
    big = torch.zeros((a.shape[0] + 2, a.shape[1] * 2), dtype=t.dtype)
    big[1:1 + a.shape[0], ::2] = t
    ways = {"fresh": t, "transposed twice": t.t().contiguous().t(), "view": big[1:1 + a.shape[0], ::2],
            "from numpy read-only": torch.from_numpy(np.ascontiguousarray(a)), "clone": t.clone()}
    _one_key(ways)
    changed = t.clone()
    changed.view(-1)[0] = 1 if not bool(changed.view(-1)[0]) else 0
    other = t.double() if t.dtype != torch.float64 else t.float()
    news = {"value": changed, "dtype": other, "shape": t.reshape(-1) if t.dim() > 1 else t[None]}
    if t.is_floating_point():
        news["requires_grad"] = t.clone().requires_grad_()
    _all_new(t, news)


def test_torch_memoize_hits_across_layouts(tmp_path):
    """A memoized call hits again with a strided twin of a tensor."""
    torch = import_torch()
    t = torch.arange(24.0).reshape(4, 6)
    _hits_across([t, t.t().contiguous().t(), torch.arange(48.0).reshape(4, 12)[:, ::2] * 0 + t],
                 str(tmp_path))
