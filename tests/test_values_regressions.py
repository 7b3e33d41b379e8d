"""One regression test per reported way an array, tensor or table key was wrong, missed or crashed.

Numbers in the docstrings refer to the list of cases in the changelog entry "Canonical value keys".
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import pytest

import fncache
from tests.helpers import last_json, run_py, write

from .helpers import fail_on_pickle_fallback, import_torch

H = fncache.hash
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")
pd = pytest.importorskip("pandas")


canonical_paths_only = pytest.fixture(autouse=True)(fail_on_pickle_fallback)


def _torch():
    torch = import_torch()
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")
    return torch


# -- wrong hits ----------------------------------------------------------------------------------

class Box:
    def __init__(self, v):
        self.v = v


def test_1_polars_object_columns_are_keyed_by_element_content():
    """(1) An object changed in place changes the key; equal distinct objects share one."""
    box = Box(1)
    s = pl.Series("o", [box], dtype=pl.Object)
    before = H(s)
    box.v = 2
    assert H(s) != before
    assert H(pl.Series("o", [Box(2)], dtype=pl.Object)) == H(s)
    assert H(pl.DataFrame({"o": s})) == H(pl.DataFrame({"o": pl.Series("o", [Box(2)], dtype=pl.Object)}))


def test_2_torch_subclass_state_counts():
    """(2) Two tensors of a subclass that differ only in an instance attribute have two keys."""
    torch = _torch()

    class Boxes(torch.Tensor):
        pass

    a = torch.arange(4.0).as_subclass(Boxes)
    b = torch.arange(4.0).as_subclass(Boxes)
    a.format, b.format = "xyxy", "xywh"
    assert H(a) != H(b)
    b.format = "xyxy"
    assert H(a) == H(b)


def test_3_arrow_table_without_columns_keys_its_row_count():
    """(3) Tables with no columns and 3 or 0 rows have different keys."""
    three = pa.table({"a": [1, 2, 3]}).drop_columns(["a"])
    assert three.num_rows == 3
    assert H(three) != H(pa.table({}))
    batch = pa.RecordBatch.from_pydict({"a": [1, 2, 3]}).drop_columns(["a"])
    assert H(batch) != H(pa.RecordBatch.from_pydict({"a": []}).drop_columns(["a"]))


def test_4_arrow_schema_is_keyed_in_full():
    """(4) keys_sorted, a fixed-size list's item name and nullability and nested metadata count."""
    def one(typ):
        return pa.table({"c": pa.array([], typ)})

    assert H(one(pa.map_(pa.string(), pa.int64(), keys_sorted=True))) != \
        H(one(pa.map_(pa.string(), pa.int64())))
    fixed = [pa.list_(pa.field(n, pa.int64(), nullable=nb), 2) for n, nb in
             (("item", True), ("x", True), ("item", False))]
    assert len({H(one(t)) for t in fixed}) == 3
    meta = pa.struct([pa.field("x", pa.int64(), metadata={"unit": "m"})])
    assert H(one(meta)) != H(one(pa.struct([pa.field("x", pa.int64())])))
    assert H(pa.schema([("a", pa.int64())])) != H(pa.schema([pa.field("a", pa.int64(), False)]))


def test_5_sparse_coo_tensors_key_requires_grad():
    """(5) A sparse COO tensor with and without requires_grad has two keys."""
    torch = _torch()
    s = torch.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,))
    assert H(s) != H(s.clone().requires_grad_())


def test_6_polars_series_keep_their_categories():
    """(6) A Categorical series with a named category set differs from a plain one."""
    named = pl.Series("c", ["a", "b"], dtype=pl.Categorical(pl.Categories("colours")))
    plain = pl.Series("c", ["a", "b"], dtype=pl.Categorical())
    assert H(named) != H(plain)
    assert H(pl.Series("c", ["a", "b"], dtype=pl.Enum(["a", "b"]))) != \
        H(pl.Series("c", ["a", "b"], dtype=pl.Enum(["a", "b", "z"])))


# -- needless misses -----------------------------------------------------------------------------

def test_7_read_only_and_mapped_values_equal_their_writable_copies(tmp_path):
    """(7) Read-only arrays, memmaps, mmap_mode results and IPC/Parquet tables hit their copies."""
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    a = np.arange(100.0)
    np.save(tmp_path / "a.npy", a)
    mm = np.memmap(tmp_path / "m.bin", dtype=a.dtype, mode="w+", shape=a.shape)
    mm[:] = a
    ro = np.frombuffer(a.tobytes())
    assert not ro.flags.writeable
    assert len({H(a), H(ro), H(mm), H(np.load(tmp_path / "a.npy", mmap_mode="r"))}) == 1
    t = pa.table({"x": [1.5, None, 3.0], "s": ["a", "b", None]})
    with ipc.new_file(str(tmp_path / "t.arrow"), t.schema) as w:
        w.write_table(t)
    with pa.memory_map(str(tmp_path / "t.arrow")) as src:
        mapped = ipc.open_file(src).read_all()
    pq.write_table(t, str(tmp_path / "t.parquet"))
    assert H(mapped) == H(t) == H(pq.read_table(str(tmp_path / "t.parquet")))

    def make(n):
        return np.full(1000, float(n))

    step1 = fncache.memoize(store=str(tmp_path / "c"), mmap_mode="r")(make)
    step2 = fncache.memoize(store=str(tmp_path / "c"))(lambda x: float(x.sum()))
    step2(step1(2))
    step2(step1(2))  # the second step1 result is a read-only memory map
    assert step2.cache_info().hits == 1


def test_8_arrow_offsets_and_slices_hash_the_logical_values():
    """(8) Slices at any offset of every kind of column equal their fresh twins."""
    cases = {
        "bool": ([True, False, None, True, True, False, True, False, True, None, False], None),
        "string": (["a", "bb", None, "", "c" * 20, "d"], pa.string()),
        "large binary": ([b"x", None, b"", b"yy", b"z" * 30], pa.large_binary()),
        "string view": (["a", "long string over twelve", None, "", "b"], pa.string_view()),
        "list": ([[1, 2], None, [], [3, None], [4]], pa.list_(pa.int64())),
        "struct": ([{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}, {"a": 4, "b": None}], None),
        "fixed list": ([[1, 2], None, [3, 4], [None, 6]], pa.list_(pa.int32(), 2)),
        "map": ([[("k", 1)], None, [("a", 2), ("b", 3)]], pa.map_(pa.string(), pa.int64())),
        "dictionary": (["x", "y", None, "x", "z"], pa.dictionary(pa.int8(), pa.string())),
    }
    for name, (values, typ) in cases.items():
        full = pa.array(values, typ)
        for start in range(1, len(values)):
            part = full.slice(start)
            fresh = pa.array(values[start:], full.type)
            assert H(part) == H(fresh), (name, start)
            assert H(pa.chunked_array([part])) == H(pa.chunked_array([fresh])), (name, start)
            batch = pa.RecordBatch.from_arrays([part], ["c"])
            assert H(batch) == H(pa.RecordBatch.from_arrays([fresh], ["c"])), (name, start)
    df = pl.DataFrame({"a": [1, 2, 3, 4], "s": ["w", "x", None, "z" * 20]})
    assert H(df.slice(1, 2)) == H(pl.DataFrame({"a": [2, 3], "s": ["x", None]}))
    s = pd.Series(["a", "bb", None, "ccc"], dtype="str")
    assert H(s.iloc[1:].reset_index(drop=True)) == H(pd.Series(["bb", None, "ccc"], dtype="str"))


def test_9_validity_bitmaps_without_nulls_and_bytes_under_nulls_do_not_count():
    """(9) An all-valid bitmap equals none, reading null_count changes nothing, null bytes are free."""
    plain = pa.array([1, 2, 3], pa.int64())
    bitmap = pa.py_buffer(np.packbits(np.ones(3, bool), bitorder="little"))
    with_bitmap = pa.Array.from_buffers(pa.int64(), 3, [bitmap, plain.buffers()[1]])
    assert with_bitmap.buffers()[0] is not None
    assert H(with_bitmap) == H(plain)
    fresh = pa.array([1, None, 3])
    before = H(fresh)
    assert fresh.null_count == 1 and H(fresh) == before
    bits = pa.py_buffer(np.packbits([True, False, True], bitorder="little"))
    junk = pa.Array.from_buffers(pa.int64(), 3, [bits, pa.py_buffer(np.array([1, 99, 3]))])
    assert H(junk) == H(fresh)
    assert H(pa.table({"a": [1, None]}).drop_null()) == H(pa.table({"a": pa.array([1])}))
    assert H(pl.Series([1, None, 3]).drop_nulls()) == H(pl.Series([1, 3]))


def test_9_bytes_under_null_strings_and_long_columns_do_not_count():
    """(9) Strings whose null slots keep bytes, and columns longer than a block, key by values."""
    bits = pa.py_buffer(np.packbits([True, False, True], bitorder="little"))
    offsets = pa.py_buffer(np.array([0, 1, 3, 4], np.int32))
    masked = pa.Array.from_buffers(pa.string(), 3, [bits, offsets, pa.py_buffer(b"abbc")])
    assert masked.to_pylist() == ["a", None, "c"]  # the null slot still spans "bb"
    assert H(masked) == H(pa.array(["a", None, "c"]))
    rng = np.random.default_rng(0)
    n = 200_003
    values = rng.integers(0, 100, n)
    scattered = rng.random(n) < 0.2
    clustered = np.zeros(n, bool)
    clustered[100_000:100_500] = True  # most blocks have no null at all
    for nulls, typ in [(m, t) for m in (scattered, clustered) for t in
                       (pa.int64(), pa.int16(), pa.string(), pa.decimal128(24, 2), pa.bool_())]:
        base = pa.array(values, mask=nulls)  # keeps the values under the nulls
        col = pa.array(values.astype(bool), mask=nulls) if typ == pa.bool_() else base.cast(typ)
        fresh = pa.array(col.to_pylist()[5:], typ)
        assert H(col.slice(5)) == H(fresh), typ
        assert H(pa.chunked_array([col.slice(5, 70_001), col.slice(70_006)])) == \
            H(pa.chunked_array([fresh])), typ
        changed = col.to_pylist()[5:]
        changed[150_000] = None if changed[150_000] is not None else changed[150_001]
        assert H(pa.array(changed, typ)) != H(fresh), typ


def test_10_chunk_boundaries_do_not_count_for_arrays_either():
    """(10) ChunkedArrays with different chunk boundaries, bit-packed booleans too, share a key."""
    values = [True, None, False, True, True, False, None, True, False, True, True]
    one = pa.chunked_array([values])
    for cut in range(1, len(values)):
        two = pa.chunked_array([values[:cut], values[cut:]])
        assert H(two) == H(one), cut
    assert H(pa.chunked_array([], pa.int64())) == H(pa.chunked_array([pa.array([], pa.int64())]))


def test_11_pandas_block_layout_and_bytes_under_na_do_not_count():
    """(11) A frame built at once or column by column, and masked arrays differing under NA, agree."""
    at_once = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "c": [5, 6]})
    by_column = pd.DataFrame({"a": [1.0, 2.0]})
    by_column["b"] = [3.0, 4.0]
    by_column["c"] = [5, 6]
    assert H(at_once) == H(by_column)
    x = pd.array([1, 2, 3], dtype="Int64")
    y = pd.array([1, 7, 3], dtype="Int64")
    x[1] = pd.NA
    y[1] = pd.NA
    assert H(x) == H(y) and H(pd.Series(x)) == H(pd.Series(y))
    assert H(pd.Series(x)) != H(pd.Series(pd.array([1, 0, 3], dtype="Int64")))
    assert H(at_once) != H(at_once[["b", "a", "c"]])


def test_12_quantized_tensors_hit():
    """(12) Equal quantized tensors share a key; another scale or value does not."""
    torch = _torch()

    def q(values, scale):
        return torch.quantize_per_tensor(torch.tensor(values), scale, 0, torch.quint8)

    assert H(q([1.0, 2.0], 0.5)) == H(q([1.0, 2.0], 0.5))
    assert len({H(q([1.0, 2.0], 0.5)), H(q([1.0, 2.0], 0.25)), H(q([1.0, 3.0], 0.5))}) == 3
    ch = torch.quantize_per_channel(torch.ones(2, 2), torch.tensor([0.1, 0.2]), torch.tensor([0, 0]),
                                    0, torch.qint8)
    assert H(ch) == H(ch.clone())


def test_13_cyclic_values_hash_after_many_errors():
    """(13) Errors while hashing never leave a broken hasher behind for later cyclic values."""
    import threading

    class Bad:
        def __reduce__(self):
            raise RuntimeError("no")

    for _ in range(30):
        cyclic: list[object] = [1]
        cyclic.append(cyclic)
        assert H(cyclic) == H(cyclic)
        with pytest.raises(fncache.UnhashableArgument):
            H([Bad()])
    other = {"k": []}
    other["k"].append(other)
    assert len(H(other)) == 32
    assert threading.active_count() >= 1


# -- crashes -------------------------------------------------------------------------------------

def test_14_nested_masked_and_meta_tensors_and_int128_hash():
    """(14) Nested, masked and meta tensors and polars Int128 are keyed, not refused."""
    torch = _torch()
    nested = torch.nested.nested_tensor([torch.arange(3.0), torch.arange(2.0)])
    assert H(nested) == H(torch.nested.nested_tensor([torch.arange(3.0), torch.arange(2.0)]))
    assert H(nested) != H(torch.nested.nested_tensor([torch.arange(3.0), torch.arange(1.0, 3.0)]))
    from torch.masked import masked_tensor

    data = torch.tensor([1.0, 2.0, 3.0])
    mask = torch.tensor([True, False, True])
    m = masked_tensor(data, mask)
    assert H(m) == H(masked_tensor(torch.tensor([1.0, 9.0, 3.0]), mask))  # masked-out data is free
    assert H(m) != H(masked_tensor(data, torch.tensor([True, True, True])))
    meta = torch.empty(3, 4, device="meta")
    assert H(meta) == H(torch.empty(3, 4, device="meta"))
    assert len({H(meta), H(torch.empty(4, 3, device="meta")),
                H(torch.empty(3, 4, device="meta", dtype=torch.float16))}) == 3
    big = pl.Series("x", [2**100, -1], dtype=pl.Int128)
    assert H(big) == H(pl.Series("x", [2**100, -1], dtype=pl.Int128))
    assert H(big) != H(pl.Series("x", [2**100, 0], dtype=pl.Int128))


# -- documented choices --------------------------------------------------------------------------

def test_documented_value_choices():
    """Byte order, NaN payloads and -0.0 count; padding, masked data and odd bool bytes do not."""
    a = np.arange(4.0)
    assert H(a) != H(a.astype(">f8"))
    assert H(np.array([0.0])) != H(np.array([-0.0]))
    nan2 = np.array([np.nan]).view(np.uint64) | 1
    assert H(np.array([np.nan])) != H(nan2.view(np.float64))
    aligned = np.dtype([("a", "u1"), ("b", "<i8")], align=True)
    x = np.zeros(2, aligned)
    y = np.zeros(2, aligned)
    y.view(np.uint8).reshape(2, -1)[:, 1:8] = 7  # padding bytes only
    assert H(x) == H(y)
    assert H(np.ma.array([1, 2, 3], mask=[0, 1, 0])) == H(np.ma.array([1, 5, 3], mask=[0, 1, 0]))
    assert H(np.ma.array([1, 2], mask=[0, 0])) == H(np.ma.array([1, 2]))
    odd = np.array([1, 2, 0], np.uint8).view(np.bool_)
    assert H(odd) == H(np.array([True, True, False]))
    assert H(pa.array(["x", "y"]).dictionary_encode()) != H(pa.array(["x", "y"]))
    dict_type = pa.dictionary(pa.int8(), pa.string())
    def enc(indices, dictionary):
        return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int8()), dictionary)

    one = pa.chunked_array([enc([0, 1, 0], ["x", "y"])])
    other = pa.chunked_array([enc([1], ["y", "x", "unused"]), enc([0, 1], ["y", "x"])],
                             type=dict_type)
    assert H(one) == H(other)
    def union(codes, small, big):
        return pa.UnionArray.from_sparse(pa.array(codes, pa.int8()),
                                         [pa.array(small, pa.int8()), pa.array(big, pa.int64())])

    assert H(union([0, 1], [1, 0], [0, 1])) != H(union([1, 0], [0, 1], [1, 0]))  # both [1, 1]
    assert H(union([0, 1], [1, 0], [0, 1]).slice(1)) == H(union([1], [0], [1]))
    ree = pa.RunEndEncodedArray.from_arrays([2, 3], ["a", "b"])
    assert H(ree) == H(pa.RunEndEncodedArray.from_arrays([1, 2, 3], ["a", "a", "b"]))


def test_documented_tensor_choices():
    """Sparse entry order and duplicates do not count; requires_grad and device-free content do."""
    torch = _torch()
    a = torch.sparse_coo_tensor([[2, 0]], [3.0, 1.0], (4,))
    b = torch.sparse_coo_tensor([[0, 2]], [1.0, 3.0], (4,))
    c = torch.sparse_coo_tensor([[0, 2, 2]], [1.0, 1.0, 2.0], (4,))
    assert H(a) == H(b) == H(c)
    odd = torch.tensor([1, 2, 0], dtype=torch.uint8).view(torch.bool)
    assert H(odd) == H(torch.tensor([True, True, False]))
    bf = torch.arange(6.0, dtype=torch.bfloat16).reshape(2, 3)
    assert H(bf.t()) == H(bf.t().contiguous()) != H(bf.float())


# -- across processes ------------------------------------------------------------------------------

def test_keys_are_the_same_in_fresh_processes(tmp_path):
    """Array, tensor and table keys agree across processes and hash seeds (no addresses leak)."""
    script = write(tmp_path / "keys.py", f"""
        import json, sys
        sys.path.insert(0, {os.getcwd()!r})
        import numpy as np, pandas as pd, polars as pl, pyarrow as pa
        import fncache

        class Box:
            def __init__(self, v):
                self.v = v
            def __reduce__(self):
                return (Box, (self.v,))

        values = {{
            "numpy": np.arange(10.0).reshape(2, 5).T,
            "arrow": pa.table({{"s": ["a", None, "c"], "l": [[1], None, [2, 3]]}}).slice(1),
            "polars": pl.DataFrame({{"o": pl.Series([1, "x"], dtype=pl.Object), "i": [1, None]}}),
            "pandas": pd.DataFrame({{"s": ["a", None], "i": pd.array([1, None], dtype="Int64")}}),
        }}
        values["pandas array with an attribute"] = pd.array([1, None], dtype="Int64")
        values["pandas array with an attribute"].label = Box(3)
        values["pandas array"] = pd.array([1, None], dtype="Int64")  # after: the class is known
        import datetime as dt
        zone = dt.timezone(dt.timedelta(hours=1), "X")
        values["zoned"] = pd.Series(pd.date_range("2020", periods=2, tz="UTC")).dt.tz_convert(zone)
        values["business days"] = pd.date_range(
            "2020-01-01", periods=2, freq=pd.offsets.CustomBusinessDay(holidays=["2020-01-10"]))
        values["multiindex"] = pd.MultiIndex(levels=[["b", "a"], [1, 2]], codes=[[0, 1], [0, 1]])
        values["ordered dictionary"] = pa.DictionaryArray.from_arrays(
            pa.array([1, 0], pa.int8()), pa.array(["b", "a"]), ordered=True)
        values["flagged"] = pl.Series([3, 1, 2]).set_sorted()
        try:
            import torch
            values["torch"] = torch.arange(6.0).reshape(2, 3).t()
        except ImportError:
            pass
        print(json.dumps({{k: fncache.hash(v) for k, v in values.items()}}))
    """)
    first = last_json(run_py(script, seed="1"))
    second = last_json(run_py(script, seed="2"))
    assert first == second and len(set(first.values())) == len(first)


def test_memoize_hits_a_value_read_back_in_another_process(tmp_path):
    """A table written by one process and memory-mapped from IPC in another hits the first's entry."""
    script = write(tmp_path / "job.py", """
        import json, sys
        import pyarrow as pa, pyarrow.ipc as ipc
        import fncache

        @fncache.memoize(store=sys.argv[1])
        def rows(t):
            return t.num_rows

        t = pa.table({"a": [1, None, 3], "s": ["x", "y", None]})
        if sys.argv[2] == "write":
            with ipc.new_file(sys.argv[3], t.schema) as w:
                w.write_table(t)
            rows(t)
        else:
            with pa.memory_map(sys.argv[3]) as src:
                rows(ipc.open_file(src).read_all())
        print(json.dumps(rows.cache_info().hits))
    """)
    store, data = str(tmp_path / "store"), str(tmp_path / "t.arrow")
    env = {"PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    assert last_json(run_py(script, store, "write", data, env=env)) == 0
    assert last_json(run_py(script, store, "read", data, env=env)) == 1
    assert json.dumps(sys.version_info[:2]) != ""


def test_pandas_dtypes_and_indexes_keyed_in_full():
    """Categoricals, zoned datetimes, MultiIndexes: equal builds agree, each real difference counts."""
    def frame(tz="UTC", ordered=False, cats=("a", "b"), names=("k", "n")):
        idx = pd.MultiIndex.from_arrays([["x", "y", "x"], [1, 2, 3]], names=list(names))
        return pd.DataFrame({"c": pd.Categorical(["a", "b", "a"], categories=list(cats), ordered=ordered),
                             "t": pd.date_range("2000", periods=3, tz=tz),
                             "o": pd.Series([1, "x", None], dtype=object).values}, index=idx)

    base = frame()
    rebuilt = pd.concat([frame().iloc[:1], frame().iloc[1:]])
    assert H(base) == H(rebuilt)
    assert len({H(base), H(frame(tz="Europe/Paris")), H(frame(ordered=True)),
                H(frame(cats=("a", "b", "z"))), H(frame(names=("k", "m")))}) == 5


def test_polars_nested_columns_slice_like_fresh_ones():
    """polars list and struct columns sliced or chunked key like fresh ones; a nested change counts."""
    rows = {"l": [[1, 2], None, [], [3, None]], "st": [{"a": 1, "b": "x"}, None, {"a": None, "b": "y"},
                                                     {"a": 4, "b": None}]}
    df = pl.DataFrame(rows)
    for start in range(1, 4):
        fresh = pl.DataFrame({k: v[start:] for k, v in rows.items()}, schema=df.schema)
        assert H(df.slice(start)) == H(fresh), start
    chunked = pl.concat([df[:1], df[1:3], df[3:]], rechunk=False)
    assert H(chunked) == H(df)
    changed = dict(rows, l=[[1, 2], None, [], [3, 0]])
    assert H(pl.DataFrame(changed, schema=df.schema)) != H(df)


def test_pandas_state_its_pickle_keeps_is_keyed():
    """A subclass's _metadata and a MultiIndex's unused levels are content; equal frames agree."""
    import pandas as pd

    class Tagged(pd.DataFrame):
        _metadata = ["unit"]

        @property
        def _constructor(self):
            return Tagged

    m, km = Tagged({"a": [1]}), Tagged({"a": [1]})
    m.unit, km.unit = "m", "km"
    assert H(m) != H(km)
    same = Tagged({"a": [1]})
    same.unit = "m"
    assert H(m) == H(same)
    full = pd.DataFrame({"v": [1, 2]}, index=pd.MultiIndex.from_tuples([("x", 1), ("y", 2)]))
    part = full.loc[["x"]]
    fresh = pd.DataFrame({"v": [1]}, index=pd.MultiIndex.from_tuples([("x", 1)]))
    assert len(part.index.levels[0]) == 2 and H(part) != H(fresh)
    assert H(part.copy()) == H(part) and H(full) == H(full.copy())
    assert H(part.index.remove_unused_levels()) == H(fresh.index)


@pytest.mark.parametrize("make", [
    lambda: pd.array([1, 2, None], dtype="Int64"),
    lambda: pd.Categorical(["a", "b", "a"]),
    lambda: pd.array(["a", None], dtype="string"),
    lambda: pd.array(pd.date_range("2020-01-01", periods=3)),
    lambda: pd.arrays.IntervalArray.from_breaks([0, 1, 2]),
], ids=["Int64", "categorical", "string", "datetime", "interval"])
def test_an_attribute_set_on_a_pandas_array_is_keyed(make):
    """An attribute a user sets on one of pandas' own arrays (its pickle keeps it) is content: two
    values of it are two keys, and a memoized call follows it; equal arrays agree, with or without
    pandas' caches filled or a read-only view."""
    import pickle

    plain, m, km = make(), make(), make()
    m.label, km.label = "m", "km"
    assert pickle.loads(pickle.dumps(m)).label == "m"  # what the pickle keeps
    assert len({H(plain), H(m), H(km)}) == 3
    again = make()
    again.label = "m"
    assert H(again) == H(m) and H(make()) == H(plain) and H(plain[:]) == H(plain)
    str(plain), plain.isna(), plain.copy()  # fills caches where the class has them
    assert H(plain) == H(make())

    @fncache.memoize(store="memory://pandas-array-attributes")
    def label_of(a):
        return getattr(a, "label", None)

    assert [label_of(m), label_of(km), label_of(plain)] == ["m", "km", None]


def test_geodataframes_are_keyed_with_their_crs():
    """One set of points in two CRSs, or without one, are three keys; a copy is the same key."""
    gpd = pytest.importorskip("geopandas")
    from shapely.geometry import Point

    a = gpd.GeoDataFrame({"v": [1, 2]}, geometry=[Point(0, 0), Point(1, 1)], crs="EPSG:4326")
    b = a.set_crs("EPSG:3857", allow_override=True)
    c = gpd.GeoDataFrame({"v": [1, 2]}, geometry=[Point(0, 0), Point(1, 1)])
    assert len({H(a), H(b), H(c)}) == 3
    assert len({H(a.geometry), H(b.geometry)}) == 2
    assert H(a) == H(a.copy()) == H(gpd.GeoDataFrame(a.copy()))


def test_an_empty_point_and_a_point_at_nan_are_two_keys(tmp_path):
    """WKB writes ``POINT EMPTY`` as a point at (NaN, NaN), alone or inside a collection (so
    geopandas' own pickle makes one of the other): a memoized function reading ``is_empty`` computes
    each anew; equal ones hit."""
    gpd = pytest.importorskip("geopandas")
    shapely = pytest.importorskip("shapely")
    from shapely.geometry import GeometryCollection, MultiPoint, Point

    nan = float("nan")
    pairs = [
        ([Point(1, 2), None, Point(nan, nan)], [Point(1, 2), None, Point()]),
        ([MultiPoint([Point(nan, nan), Point(1, 2)])], [shapely.from_wkt("MULTIPOINT (EMPTY, (1 2))")]),
        ([GeometryCollection([Point(nan, nan)])], [GeometryCollection([Point()])]),
    ]
    for i, (at_nan, empty) in enumerate(pairs):
        values = [gpd.GeoSeries(at_nan), gpd.GeoSeries(empty), gpd.GeoSeries(at_nan)]
        got, truth = _memoized_sees_each(tmp_path / str(i), lambda s: s.is_empty.tolist()
                                         + shapely.is_empty(shapely.get_parts(s.values)).tolist(),
                                         values)
        assert got == truth and truth[0] != truth[1], i
        assert H(gpd.GeoDataFrame(geometry=at_nan)) != H(gpd.GeoDataFrame(geometry=empty))
    assert H(gpd.GeoSeries([Point(1, 2), Point()])) == H(gpd.GeoSeries([Point(1, 2), Point()]))


def test_an_object_array_holding_itself_is_keyed(tmp_path):
    """``a[0] = a``: pickle takes it; the key's reduction of an object array made a new tuple for
    each visit, which ran into the recursion limit (unhashable). Now keyed by its other elements,
    in a memoized call too; a mutual cycle and a list that holds itself still hash."""

    def holding_itself(x):
        a = np.empty(2, dtype=object)
        a[0], a[1] = a, x
        return a

    got, truth = _memoized_sees_each(tmp_path, lambda a: a[1] * 2,
                                     [holding_itself(1), holding_itself(2), holding_itself(1)])
    assert got == truth == [2, 4, 2]
    assert H(holding_itself(1)) == H(holding_itself(1)) != H(holding_itself(2))
    b, c = np.empty(1, dtype=object), np.empty(1, dtype=object)
    b[0], c[0] = c, b
    loop = [1]
    loop.append(loop)
    assert len({H(b), H([loop, holding_itself(1)]), H([loop, holding_itself(2)])}) == 3
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(fncache.UnhashableArgument, match="nested too deeply"):
        H(deep)
    # A cycle through a set is refused, and the message says it may be one.
    node = _Node()
    node.s = {node}
    with pytest.raises(fncache.UnhashableArgument, match="holds itself where the key cannot follow"):
        H(node)
    # A structured array with an object field, in a value with a cycle: its float32 field keeps
    # its NaN payload (by its bytes), as outside one.
    import struct

    def nan_beside_a_cycle(bits):
        a = np.zeros(1, [("o", "O"), ("f", "<f4")])
        a["f"] = np.frombuffer(struct.pack("<I", bits), "<f4")[0]
        return [a, holding_itself(1)]

    assert H(nan_beside_a_cycle(0x7F800001)) != H(nan_beside_a_cycle(0x7FC00001))
    assert H(nan_beside_a_cycle(0x7F800001)) == H(nan_beside_a_cycle(0x7F800001))


class _Node:
    pass


class _DefaultRegistry(__import__("collections").defaultdict):
    def __reduce__(self):
        return "_DEFAULT_REGISTRY"


class _OrderedRegistry(__import__("collections").OrderedDict):
    def __reduce__(self):
        return "_ORDERED_REGISTRY"


class _QueueRegistry(__import__("collections").deque):
    def __reduce__(self):
        return "_QUEUE_REGISTRY"


_DEFAULT_REGISTRY = _DefaultRegistry(list)
_ORDERED_REGISTRY = _OrderedRegistry()
_QUEUE_REGISTRY = _QueueRegistry(maxlen=5)


def test_singletons_by_name_over_c_containers_key_their_items(tmp_path):
    """A registry pickled by its global's name whose base is a ``defaultdict``, an ``OrderedDict``
    or a ``deque`` (C types, not ``dict`` or ``list`` themselves) was keyed by the name alone: a
    memoized function counting its items was served the count from before an item was added."""
    for registry, add in ((_DEFAULT_REGISTRY, lambda r: r["a"].append(1)),
                          (_ORDERED_REGISTRY, lambda r: r.update(a=1)),
                          (_QUEUE_REGISTRY, lambda r: r.append(1))):
        registry.clear()
        count = fncache.memoize(store=str(tmp_path / type(registry).__name__))(lambda r: len(r))
        before = count(registry)
        add(registry)
        assert count(registry) != before, type(registry).__name__
        assert H(registry) == H(registry)
    first = H(_QUEUE_REGISTRY)
    _QUEUE_REGISTRY.clear()
    assert H(_QUEUE_REGISTRY) != first
    first = H(_DEFAULT_REGISTRY)
    _DEFAULT_REGISTRY.default_factory = set  # what a missing key reads as: content
    try:
        assert H(_DEFAULT_REGISTRY) != first
    finally:
        _DEFAULT_REGISTRY.default_factory = list


def test_a_structured_array_with_an_object_field_keys_float32_payloads(tmp_path):
    """A float32 field beside an object field was keyed through ``tolist()``, which makes its
    values Python floats and quiets a signaling NaN: the two NaNs shared a key."""
    import struct

    def with_nan(bits):
        a = np.zeros(2, [("o", "O"), ("f", "<f4"), ("i", "<i8", (2,))])
        a["f"] = np.frombuffer(struct.pack("<I", bits), "<f4")[0]
        a["o"] = ["x", None]
        return a

    quiet, signaling = with_nan(0x7FC00001), with_nan(0x7F800001)
    got, truth = _memoized_sees_each(tmp_path, lambda a: hex(int(a["f"].view("<u4")[0])),
                                     [quiet, signaling])
    assert got == truth == ["0x7fc00001", "0x7f800001"]
    assert H(quiet) == H(with_nan(0x7FC00001))
    other = with_nan(0x7FC00001)
    other["o"][1] = 0
    assert H(other) != H(quiet)


def test_a_new_type_keys_its_supertype():
    """``NewType("UserId", int)`` and ``NewType("UserId", str)`` pickle by the name alone, though
    a validator converts by the supertype: two keys now, in a fresh process too."""
    import typing

    as_int, as_str = typing.NewType("UserId", int), typing.NewType("UserId", str)
    assert H(as_int) != H(as_str)
    assert H(as_int) == H(typing.NewType("UserId", int))
    code = ("import fncache, typing\n"
            "print(fncache.hash(typing.NewType('UserId', {})))\n")
    runs = {t: {_subprocess_out(code.format(t), seed) for seed in ("1", "2")} for t in ("int", "str")}
    assert len(runs["int"]) == len(runs["str"]) == 1 and runs["int"] != runs["str"]


def _subprocess_out(code, seed):
    import subprocess

    env = dict(os.environ, PYTHONHASHSEED=seed)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_an_lru_cache_wrapper_keys_its_settings(tmp_path):
    """``lru_cache(maxsize=128)`` and ``lru_cache(maxsize=None, typed=True)`` of one function
    pickle by name alike; code reads the settings (``cache_parameters()``), and ``typed`` changes
    what the cache returns."""
    import functools

    def inc(x):
        return x + 1

    small, typed = functools.lru_cache(maxsize=128)(inc), functools.lru_cache(typed=True)(inc)
    got, truth = _memoized_sees_each(tmp_path, lambda fn: fn.cache_parameters(), [small, typed])
    assert got == truth and truth[0] != truth[1]
    assert H(small) == H(functools.lru_cache(maxsize=128)(inc))

def test_sparse_matrices_are_keyed_by_their_logical_entries():
    """A copy, a matrix whose flags were read, unsorted vs sorted indices and duplicates vs summed
    share a key; another format, matrix vs array, a value or an explicit zero do not."""
    np = pytest.importorskip("numpy")
    sp = pytest.importorskip("scipy.sparse")
    a = sp.random(6, 6, density=0.4, format="csr", random_state=0)
    copied = a.copy()
    assert a.has_sorted_indices  # a lazily computed flag, now cached on ``a`` only
    assert H(a) == H(copied)
    unsorted = sp.csr_matrix((np.array([1.0, 2.0]), np.array([2, 0]), np.array([0, 2, 2])), shape=(2, 3))
    ordered = unsorted.copy()
    ordered.sort_indices()
    assert H(unsorted) == H(ordered)
    dup = sp.coo_array(([1.0, 2.0, 3.0], ([0, 0, 1], [1, 1, 2])), shape=(3, 3))
    summed = sp.coo_array(([3.0, 3.0], ([0, 1], [1, 2])), shape=(3, 3))
    assert H(dup) == H(summed)
    changed = a.copy()
    changed.data[0] += 1
    zero = sp.csr_matrix((np.array([0.0, 2.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    assert len({H(a), H(a.tocsc()), H(sp.csr_array(a)), H(changed)}) == 4
    assert H(zero) != H(sp.csr_matrix(np.array([[0.0, 2.0]])))


# -- what the value's own pickle keeps (found by review) ------------------------------------------

def _memoized_sees_each(tmp_path, fn, values):
    """Call ``fn`` memoized on each value in turn: the results, as computed fresh each time."""
    cached = fncache.memoize(store=str(tmp_path / "store"))(fn)
    return [cached(v) for v in values], [fn(v) for v in values]


def test_pandas_time_zones_and_frequencies_are_keyed_as_objects(tmp_path):
    """Two zones of one name at other offsets, and a custom business day with other holidays,
    print alike: a memoized function reading them computes each anew; equal ones hit."""
    import datetime as dt

    utc = pd.Series(pd.date_range("2020-01-01", periods=2, freq="h", tz="UTC"))
    one = utc.dt.tz_convert(dt.timezone(dt.timedelta(hours=1), "X"))
    two = utc.dt.tz_convert(dt.timezone(dt.timedelta(hours=2), "X"))
    got, truth = _memoized_sees_each(tmp_path, lambda s: s.dt.hour.tolist(), [one, two])
    assert got == truth == [[1, 2], [2, 3]]
    assert H(one) == H(utc.dt.tz_convert(dt.timezone(dt.timedelta(hours=1), "X")))
    ivals = [pd.arrays.IntervalArray.from_breaks(s) for s in (one, two)]
    assert H(ivals[0]) != H(ivals[1])

    holiday = pd.offsets.CustomBusinessDay(holidays=["2020-01-10"])
    a = pd.date_range("2020-01-01", periods=2, freq=holiday)
    b = pd.date_range("2020-01-01", periods=2, freq=pd.offsets.CustomBusinessDay())
    assert list(a) == list(b) and a.freqstr == b.freqstr
    got, truth = _memoized_sees_each(tmp_path / "f", lambda i: str(i.shift(7)[0].date()), [a, b])
    assert got == truth == ["2020-01-13", "2020-01-10"]
    assert H(a) == H(pd.date_range("2020-01-01", periods=2, freq=holiday))
    assert H(pd.date_range("2020", periods=3, freq="D")) == H(pd.date_range("2020", periods=3, freq="D"))
    # A weekmask given through calendar=, which pandas' own pickle drops; keyword order does not count.
    six_days = pd.offsets.CustomBusinessDay(calendar=np.busdaycalendar(weekmask="1111110"))
    c = pd.DatetimeIndex(["2024-01-01"], freq=six_days)
    d = pd.DatetimeIndex(["2024-01-01"], freq=pd.offsets.CustomBusinessDay())
    got, truth = _memoized_sees_each(tmp_path / "c", lambda i: str(i.shift(5)[0].date()), [c, d])
    assert got == truth == ["2024-01-06", "2024-01-08"]
    assert H(pd.date_range("2024", periods=3, freq=pd.DateOffset(months=1, days=2))) == \
        H(pd.date_range("2024", periods=3, freq=pd.DateOffset(days=2, months=1)))
    # Every UTC pandas takes for one (a Parquet read gives zoneinfo's for datetime's) is one key.
    import zoneinfo

    from dateutil import tz as dateutil_tz

    utcs = [pd.Series(pd.date_range("2020", periods=2, tz=tz))
            for tz in (dt.UTC, zoneinfo.ZoneInfo("UTC"), "UTC", dateutil_tz.tzutc(),
                       dateutil_tz.gettz("UTC"))]
    assert len({H(u) for u in utcs}) == 1


def test_multiindex_levels_are_keyed_in_their_order_with_the_sort_depth(tmp_path):
    """The same rows over levels in another order unstack in another order: two keys."""
    rows = [("b", 1), ("a", 2)]
    sorted_levels = pd.MultiIndex.from_tuples(rows)
    other_order = pd.MultiIndex(levels=[["b", "a"], [1, 2]], codes=[[0, 1], [0, 1]])
    assert list(sorted_levels) == list(other_order)
    frames = [pd.Series([1, 2], index=i) for i in (sorted_levels, other_order)]
    got, truth = _memoized_sees_each(tmp_path, lambda s: list(s.unstack().index), frames)
    assert got == truth == [["a", "b"], ["b", "a"]]
    assert H(sorted_levels) == H(pd.MultiIndex.from_tuples(rows))
    lexsorted = pd.MultiIndex(levels=[["a", "b"], [1, 2]], codes=[[0, 1], [1, 0]], sortorder=1)
    assert H(lexsorted) != H(pd.MultiIndex(levels=[["a", "b"], [1, 2]], codes=[[0, 1], [1, 0]]))


def test_an_ordered_arrow_dictionary_keys_its_order(tmp_path):
    """An ordered dictionary's order is how its values compare: two keys for one decoded content;
    an unordered one still keys its decoded values alone."""
    def dictionary(indices, values, ordered):
        return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int8()), pa.array(values),
                                              ordered=ordered)

    a, b = dictionary([0, 1], ["a", "b"], True), dictionary([1, 0], ["b", "a"], True)
    got, truth = _memoized_sees_each(tmp_path, lambda arr: (arr.to_pandas() < "b").tolist(), [a, b])
    assert got == truth == [[True, False], [False, False]]
    assert H(a) == H(dictionary([0, 1], ["a", "b"], True))
    assert H(dictionary([0, 1], ["a", "b"], False)) == H(dictionary([1, 0], ["b", "a"], False))
    # Chunk boundaries still do not count; a dictionary that takes over at another row does.
    whole = pa.chunked_array([dictionary([0, 1, 0], ["a", "b"], True)])
    split = pa.chunked_array([dictionary([0], ["a", "b"], True), dictionary([1, 0], ["a", "b"], True)])
    assert H(whole) == H(split)
    other = pa.chunked_array([dictionary([0], ["a", "b"], True), dictionary([0, 1], ["b", "a"], True)])
    assert other.to_pylist() == whole.to_pylist() and H(other) != H(whole)
    frame = [pd.DataFrame({"c": pd.Series(x, dtype=pd.ArrowDtype(x.type))}) for x in (a, b)]
    assert H(frame[0]) != H(frame[1])


class _Signal(np.ndarray):
    def __array_finalize__(self, obj):
        self.fs = getattr(obj, "fs", None)


def _signal(fs):
    s = np.array([1.0, 2.0]).view(_Signal)
    s.fs = fs
    return s


def test_a_masked_array_keys_the_class_and_attributes_of_its_data(tmp_path):
    """A masked array over a user's ndarray subclass keeps that class (its pickle does) and the
    attributes numpy copies from it: keyed; a plain one keys as before."""
    over = [np.ma.masked_array(_signal(100)), np.ma.masked_array(_signal(200)),
            np.ma.masked_array(np.array([1.0, 2.0]))]
    got, truth = _memoized_sees_each(
        tmp_path, lambda m: (type(np.ma.getdata(m)).__name__, getattr(m, "fs", None)), over)
    assert got == truth == [("_Signal", 100), ("_Signal", 200), ("ndarray", None)]
    assert H(over[0]) == H(np.ma.masked_array(_signal(100)))
    # Over a memory map, as over the array in memory (where its bytes live is not content).
    np.save(tmp_path / "a.npy", np.array([1.0, np.nan]))
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
    assert H(np.ma.masked_invalid(mapped)) == H(np.ma.masked_invalid(np.array([1.0, np.nan])))


def test_layout_state_code_can_read_is_keyed():
    """scipy's index dtype and BSR block shape, a SparseArray's kind, a polars sortedness flag the
    values do not bear out, and the item order of a dict subclass keyed by name: each counts."""
    sp = pytest.importorskip("scipy.sparse")
    m32 = sp.csr_array(np.eye(3))
    m64 = m32.copy()
    m64.indices, m64.indptr = m64.indices.astype(np.int64), m64.indptr.astype(np.int64)
    assert H(m32) != H(m64) and H(m32) == H(sp.csr_array(np.eye(3)))
    blocks = [sp.bsr_array(np.ones((2, 2)), blocksize=b) for b in ((2, 2), (1, 1))]
    assert H(blocks[0]) != H(blocks[1])
    kinds = [pd.arrays.SparseArray([0, 0, 1], fill_value=0, kind=k) for k in ("integer", "block")]
    assert H(kinds[0]) != H(kinds[1])
    lying = pl.Series([3, 1, 2]).set_sorted()
    assert lying.max() != pl.Series([3, 1, 2]).max()  # polars trusts the flag
    assert H(lying) != H(pl.Series([3, 1, 2]))
    assert H(pl.Series([1, 2, 3]).set_sorted()) == H(pl.Series([3, 1, 2]).sort()) == H(pl.Series([1, 2, 3]))
    assert H(pl.Series([None, 1, 2]).set_sorted()) == H(pl.Series([None, 1, 2]))
    # A flag over ties, 0.0 beside -0.0 or nulls at the end changes results (arg_max, min): counts.
    for values in ([1, 2, 2], [0.0, -0.0], [1, 2, None]):
        assert H(pl.Series(values).set_sorted()) != H(pl.Series(values)), values
    assert pl.Series([1, 2, 2]).set_sorted().arg_max() != pl.Series([1, 2, 2]).arg_max()
    registry = tmp_dict_registry()
    registry.update(a=1, b=2)
    first = H(registry)
    registry.clear()
    registry.update(b=2, a=1)
    assert H(registry) != first


def test_stored_fill_values_and_dia_diagonals_as_stored_are_keyed(tmp_path):
    """A pandas SparseArray keeps which slots are stored, a fill value among them (``npoints``,
    ``sp_values``, ``density`` show it); a scipy DIA matrix keeps its diagonals as stored, an
    all-zero one and values past the matrix's edge (``nnz``, ``offsets``, ``data`` show them),
    which its entries leave out. A memoized call is served each one's own result."""
    sp = pytest.importorskip("scipy.sparse")

    @fncache.memoize(store=str(tmp_path / "s"))
    def stored(a):
        if isinstance(a, pd.arrays.SparseArray):
            return a.npoints, a.sp_values.tolist(), a.density
        return a.nnz, a.offsets.tolist(), a.data.tolist()

    explicit = np.floor(pd.arrays.SparseArray([0.5, 1.5], fill_value=0.0))  # its 0.0 is stored
    implicit = pd.arrays.SparseArray([0.0, 1.0], fill_value=0.0)
    assert list(explicit) == list(implicit)
    assert stored(explicit) == (2, [0.0, 1.0], 1.0) and stored(implicit) == (1, [1.0], 0.5)
    assert H(pd.Series(explicit)) != H(pd.Series(implicit))
    assert H(implicit) == H(pd.arrays.SparseArray([0.0, 1.0], fill_value=0.0))
    zero = sp.dia_array((np.zeros((1, 2)), [0]), shape=(2, 2))  # an all-zero diagonal, stored
    empty = sp.dia_array((2, 2))
    assert stored(zero) == (2, [0], [[0.0, 0.0]]) and stored(empty) == (0, [], [])
    past = [sp.dia_array((np.array([[1.0, 2.0, v]]), [0]), shape=(2, 2)) for v in (3.0, 9.0)]
    assert (past[0] != past[1]).nnz == 0  # equal matrices, other data past the edge
    assert stored(past[0]) != stored(past[1]) and H(past[0]) != H(past[1])
    outside = sp.dia_array((np.array([[7.0, 7.0]]), [5]), shape=(2, 2))
    assert H(outside) != H(empty)
    assert H(sp.dia_array((np.ones((1, 2)), [0]), shape=(2, 2))) == \
        H(sp.dia_array((np.ones((1, 2)), [0]), shape=(2, 2)))


class _Registry(dict):
    def __reduce__(self):
        return "_REGISTRY"


_REGISTRY = _Registry()


def tmp_dict_registry():
    _REGISTRY.clear()
    return _REGISTRY


def test_a_type_adapter_naming_types_by_strings_keys_what_they_resolved_to(tmp_path):
    """``TypeAdapter("list[Item]")`` resolves ``Item`` where it is made (a function's locals, a
    class since redefined): two such adapters validate differently, and a memoized call tells them
    apart; adapters of real types still key by what they are made from."""
    pydantic = pytest.importorskip("pydantic")

    def make(item):
        Item = item  # noqa: F841 - read by the adapter's forward reference
        return pydantic.TypeAdapter("list[Item]")

    as_int, as_str = make(int), make(str)
    got, truth = _memoized_sees_each(tmp_path, lambda a: a.validate_python(["5"]), [as_int, as_str])
    assert got == truth == [[5], ["5"]]
    assert H(pydantic.TypeAdapter(list[int])) == H(pydantic.TypeAdapter(list[int]))
    assert H(pydantic.TypeAdapter(list[int])) != H(pydantic.TypeAdapter(list[str]))


def test_arrow_unions_and_scalars_key_what_python_values_drop(tmp_path):
    """A union's children and a scalar were keyed through Python values, which drop a
    ``time64[ns]``'s nanoseconds, a ``date64``'s part below a day and a float32 NaN's payload: a
    memoized call was served the other value's result. Layouts of one value still share a key."""
    def union(child):
        return pa.UnionArray.from_dense(pa.array([0, 0], pa.int8()), pa.array([0, 1], pa.int32()),
                                        [child])

    def nan(bits):
        return pa.array(np.array([bits], np.uint32).view(np.float32))

    def stored(v):  # what a function can read: the raw values, never as_py()
        if isinstance(v, pa.Scalar):
            v = pa.repeat(v, 1)
        child = v.field(0) if isinstance(v, pa.UnionArray) else v
        return np.asarray(child.view(pa.int64() if child.type.bit_width == 64 else pa.int32())).tolist()

    pairs = [(union(pa.array([1, 5], pa.time64("ns"))), union(pa.array([2, 5], pa.time64("ns")))),
             (union(pa.array([0, 0], pa.date64())), union(pa.array([3_600_000, 0], pa.date64()))),
             (union(pa.concat_arrays([nan(0x7FA00000)] * 2)), union(pa.concat_arrays([nan(0x7FE00000)] * 2))),
             (pa.scalar(1, pa.time64("ns")), pa.scalar(2, pa.time64("ns"))),
             (pa.scalar(0, pa.date64()), pa.scalar(3_600_000, pa.date64()))]
    for i, (a, b) in enumerate(pairs):
        assert repr(a.to_pylist() if hasattr(a, "to_pylist") else a.as_py()) == \
            repr(b.to_pylist() if hasattr(b, "to_pylist") else b.as_py())  # alike as Python values
        got, truth = _memoized_sees_each(tmp_path / str(i), stored, [a, b])
        assert got == truth and truth[0] != truth[1]
    # A dense union's child values no slot points to do not count; a chunk boundary does not.
    compact = union(pa.array([1, 2], pa.int64()))
    spread = pa.UnionArray.from_dense(pa.array([0, 0], pa.int8()), pa.array([2, 0], pa.int32()),
                                      [pa.array([2, 9, 1], pa.int64())])
    assert H(compact) == H(spread)
    assert H(pa.chunked_array([compact])) == H(pa.chunked_array([compact.slice(0, 1), compact.slice(1)]))
    assert H(pa.scalar(1, pa.int64())) == H(pa.array([0, 1])[1]) != H(pa.scalar(1, pa.int32()))


def test_a_context_variable_keys_its_default(tmp_path):
    """Two unset variables of one name with other defaults: ``get()`` gives each its own."""
    import contextvars

    fast = contextvars.ContextVar("mode", default="fast")
    exact = contextvars.ContextVar("mode", default="exact")
    got, truth = _memoized_sees_each(tmp_path, lambda v: v.get(), [fast, exact])
    assert got == truth == ["fast", "exact"]
    assert H(contextvars.ContextVar("mode")) == H(contextvars.ContextVar("mode")) != H(fast)
    assert H(fast) == H(contextvars.ContextVar("mode", default="fast"))
    # A default no key can hold (it has a lock inside) keeps the variable keyable, by its parts.
    locked = [contextvars.ContextVar("mode", default=_Locked(k)) for k in (1, 2, 1)]  # noqa: B039
    got, truth = _memoized_sees_each(tmp_path / "locked", lambda v: v.get().k, locked)
    assert got == truth == [1, 2, 1]


class _Locked:
    def __init__(self, k):
        self.k, self.lock = k, __import__("threading").Lock()


def test_geometries_key_a_linear_ring_and_a_precision_grid(tmp_path):
    """WKB writes a LinearRing as a LineString and drops a precision grid; shapely's pickle drops
    the grid too, and a ring inside a collection or a multi-linestring (where the parts keep their
    own type and grid): a memoized call was served the other's result."""
    gpd = pytest.importorskip("geopandas")
    shapely = pytest.importorskip("shapely")
    ring = [(0.0, 0.0), (1.0, 1.0), (1.0, 0.0), (0.0, 0.0)]
    line = shapely.LineString([(0.0, 0.0), (2.0, 0.0)])
    on_grid = shapely.set_precision(line, 1.0)
    cut = shapely.LineString([(0.4, 0.0), (1.6, 0.0)])

    def seen(v):
        geoms = list(v) if isinstance(v, gpd.GeoSeries) else [v]
        return [(g.geom_type, [(p.geom_type, p.intersection(cut).wkt) for p in getattr(g, "geoms", [])],
                 g.intersection(cut).wkt) for g in geoms]

    pairs = [(gpd.GeoSeries([shapely.LinearRing(ring)]), gpd.GeoSeries([shapely.LineString(ring)])),
             (gpd.GeoSeries([on_grid]), gpd.GeoSeries([line])),
             (on_grid, line),
             (shapely.GeometryCollection([shapely.LinearRing(ring)]),
              shapely.GeometryCollection([shapely.LineString(ring)])),
             (shapely.multilinestrings([shapely.LinearRing(ring)]),
              shapely.MultiLineString([shapely.LineString(ring)])),
             (gpd.GeoSeries([shapely.multilinestrings([on_grid])]),
              gpd.GeoSeries([shapely.multilinestrings([line])]))]
    for i, (a, b) in enumerate(pairs):
        got, truth = _memoized_sees_each(tmp_path / str(i), seen, [a, b])
        assert got == truth and truth[0] != truth[1]
    # Geometries without either keep their key: equal ones share it.
    assert H(gpd.GeoSeries([line])) == H(gpd.GeoSeries([shapely.from_wkt("LINESTRING (0 0, 2 0)")]))
    assert H(on_grid) == H(shapely.set_precision(shapely.from_wkt("LINESTRING (0 0, 2 0)"), 1.0))


def test_archives_are_keyed_by_the_file_they_have_open(tmp_path):
    """A zip or tar archive open for reading is keyed by its file's content (it was keyed by its
    type alone: another archive was served the first one's result); one whose path names another
    file than the one it has open, or one over a file object, is refused rather than keyed by a
    file it does not read."""
    import tarfile
    import zipfile

    def zipped(folder, content):
        path = tmp_path / folder / "a.zip"
        path.parent.mkdir(exist_ok=True)
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(zipfile.ZipInfo("k", (2024, 1, 1, 0, 0, 0)), content)
        return path

    def tarred(folder, content):
        path = tmp_path / folder / "a.tar"
        path.parent.mkdir(exist_ok=True)
        with tarfile.open(path, "w") as t:
            info = tarfile.TarInfo("k")
            info.size = len(content)
            t.addfile(info, __import__("io").BytesIO(content))
        return path

    def member(archive):
        if isinstance(archive, zipfile.ZipFile):
            return archive.read("k")
        return archive.extractfile("k").read()

    for i, (make, open_) in enumerate(((zipped, zipfile.ZipFile), (tarred, tarfile.open))):
        one, two, same = make(f"one{i}", b"1"), make(f"two{i}", b"2"), make(f"same{i}", b"1")
        got, truth = _memoized_sees_each(tmp_path / f"s{i}", member, [open_(one), open_(two)])
        assert got == truth == [b"1", b"2"]
        assert H(open_(one)) == H(open_(same))  # the same base name and content
        kept = open_(one)
        os.replace(two, one)  # the path now names another file than the one open
        assert member(kept) == b"1"
        with pytest.raises(fncache.UnhashableArgument, match="replaced"):
            H(kept)
        with open(same, "rb") as f, pytest.raises(fncache.UnhashableArgument, match="file object"):
            H(zipfile.ZipFile(f) if i == 0 else tarfile.open(fileobj=f))
    # Rewritten in place (same file) while open: it still reads members where its directory,
    # read when it was opened, says they are; a fresh one reads the new directory.
    path = zipped("inplace", b"1")
    kept = zipfile.ZipFile(path)
    fresh_bytes = zipped("other", b"22").read_bytes()
    with open(path, "r+b") as f:
        f.write(fresh_bytes)
        f.truncate()
    assert kept.namelist() == ["k"] and zipfile.ZipFile(path).read("k") == b"22"
    assert H(kept) != H(zipfile.ZipFile(path))
    locked = zipfile.ZipFile(zipped("pw", b"1"))
    plain = H(locked)
    locked.setpassword(b"secret")  # which members it can read
    assert H(locked) != plain


def test_an_archive_subclass_is_keyed_as_its_archive_class(tmp_path):
    """A subclass of ``ZipFile`` keys what the archive class itself keys (its file, not its open
    handle), plus an attribute it sets."""
    import zipfile

    class Tagged(zipfile.ZipFile):
        pass

    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("k", (2024, 1, 1, 0, 0, 0)), b"1")
    plain, tagged = Tagged(path), Tagged(path)
    assert H(plain) == H(Tagged(path))
    tagged.unit = "m"
    assert H(tagged) != H(plain)
