"""The fast paths give the same answers as the slow ones: keys, stored values, reads, clears."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import fncache
from fncache import _codec
from fncache._errors import IntegrityError
from fncache.stores.disk import DiskStore
from fncache.values import hasher as _hasher
from tests.helpers import REPO, import_torch, run_py

KEY = "0123456789abcdef" * 2


# -- import ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_import_is_light():
    """``import fncache`` imports none of numpy, pandas, polars, torch, pyarrow, redis or s3fs."""
    code = ("import sys, fncache; print(__import__('json').dumps(sorted(m for m in "
            "('numpy', 'pandas', 'polars', 'torch', 'pyarrow', 'redis', 's3fs', 'fsspec') "
            "if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


_LIBRARY_ONLY = r"""
import json, os, sys
import fncache

walked = lambda: "fncache.code.walk" in sys.modules
lib = fncache.memoize(store=sys.argv[1])(os.path.join)
first = [lib("a", "b"), walked()]

@fncache.memoize(store=sys.argv[1])
def mine(x):
    return x + 1

print(json.dumps([*first, mine(1), walked()]))
"""


@pytest.mark.slow
def test_the_code_walk_is_loaded_by_the_first_user_function(tmp_path):
    """A process that keys library functions only (a scikit-learn pipeline's ``memory=``) does not
    load the code walk; the first user function keyed does, and is keyed by its code."""
    from tests.helpers import last_json, run_py, write

    script = write(tmp_path / "lib.py", _LIBRARY_ONLY)
    assert last_json(run_py(script, str(tmp_path / "cache"))) == ["a/b", False, 2, True]


_HITS_ONLY = r"""
import json, sys
import fncache

@fncache.memoize(store=sys.argv[1])
def square(x):
    return x * x

print(json.dumps([square(3), square.cache_info().hits, "diskcache" in sys.modules]))
"""


@pytest.mark.slow
def test_a_process_whose_calls_all_hit_does_not_import_diskcache(tmp_path):
    """A process that only reads an existing disk store (every call a hit) never imports
    diskcache: its settings are read from the store; the first process, which writes, does."""
    from tests.helpers import last_json, run_py, write

    script = write(tmp_path / "hits.py", _HITS_ONLY)
    store = str(tmp_path / "cache")
    assert last_json(run_py(script, store)) == [9, 0, True]
    assert last_json(run_py(script, store)) == [9, 1, False]


def test_a_disk_stores_settings_come_from_options_then_the_store_then_diskcache():
    """The settings a disk store opens with: a given option wins, then the stored row, then
    diskcache's default (only then is diskcache asked); a planted row whose key is not text is no
    setting."""
    from diskcache.core import DEFAULT_SETTINGS

    from fncache.stores._diskopen import READ_SETTINGS as _READ_SETTINGS
    from fncache.stores._diskopen import open_settings as _settings

    stored = {"disk_min_file_size": 1, "sqlite_synchronous": 2, b"statistics": 1}
    opts = {"sqlite_synchronous": 0, "eviction_policy": "none"}
    out = _settings(stored, opts)
    assert out == {"disk_min_file_size": 1, "sqlite_synchronous": 0,
                   "sqlite_journal_mode": DEFAULT_SETTINGS["sqlite_journal_mode"],
                   "statistics": DEFAULT_SETTINGS["statistics"]}
    assert set(_settings({}, {})) == set(_READ_SETTINGS)
    assert _settings({}, {}) == {k: DEFAULT_SETTINGS[k] for k in _READ_SETTINGS}


# -- scalar digests ----------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, -1, 2**63, 2**200, "", "x", "é" * 300, "a" * 257])
def test_scalar_table_matches_the_pickler(value):
    """A small int or str digests the same from the table as from a pickler run, every time."""
    assert _hasher.digest(value) == _hasher._digest(value, None) == _hasher.digest(value)


def test_scalar_table_keeps_types_apart():
    """1, True, 1.0 and "1" still have four different digests."""
    assert len({_hasher.digest(v) for v in (1, True, 1.0, "1", b"1")}) == 5


# -- numpy ---------------------------------------------------------------------------------------

def test_equal_arrays_in_any_layout_hash_alike():
    """C order, Fortran order and a strided view of equal content give one digest."""
    a = np.arange(60, dtype=np.float32).reshape(6, 10)
    f = np.asfortranarray(a)
    strided = np.arange(120, dtype=np.float32).reshape(6, 20)[:, ::2] * 0 + a
    assert fncache.hash(a) == fncache.hash(f) == fncache.hash(strided)


def test_dtype_and_shape_still_count():
    """Same bytes with another dtype or shape give another digest."""
    a = np.arange(12, dtype=np.int32)
    assert len({fncache.hash(a), fncache.hash(a.view(np.float32)), fncache.hash(a.reshape(3, 4)),
                fncache.hash(a.reshape(4, 3))}) == 4


def test_object_arrays_hash_by_element():
    """Object arrays hash their elements: equal strings in distinct objects agree, others differ."""
    a = np.array(["ab", "c", None], dtype=object)
    b = np.array(["".join(["a", "b"]), "c", None], dtype=object)
    assert fncache.hash(a) == fncache.hash(b)
    assert fncache.hash(a) != fncache.hash(np.array(["ab", "d", None], dtype=object))


# -- pandas ----------------------------------------------------------------------------------------

def test_pandas_object_and_string_columns_are_hashed_by_content():
    """A frame's string and object columns change its digest when a value changes, not otherwise."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"s": ["a", "bb", "c"], "o": pd.Series([1, "x", None], dtype=object),
                       "f": [0.5, 1.5, 2.5]})
    same = pd.DataFrame({"s": ["a", "b" + "b", "c"], "o": pd.Series([1, "x", None], dtype=object),
                         "f": [0.5, 1.5, 2.5]})
    assert fncache.hash(df) == fncache.hash(same)
    changed = df.copy()
    changed.loc[1, "o"] = "y"
    assert fncache.hash(changed) != fncache.hash(df)
    changed = df.copy()
    changed.loc[2, "s"] = "d"
    assert fncache.hash(changed) != fncache.hash(df)


# -- a large frame's arrays digested on a helper thread ----------------------------------------

_BIG_FRAME = None


def _big_frame(pd, rows=600_000):
    """24 MB and more in columns of 4.8 MB: digested ahead (ahead.MIN_BYTES, buffers.AHEAD_EACH)."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"f1": rng.random(rows), "f2": rng.random(rows), "i": np.arange(rows),
                       "t": pd.date_range("2001-01-01", periods=rows, freq="s"),
                       "cat": pd.Categorical(rng.choice(["a", "b", "c"], rows)),
                       "m": pd.array(np.arange(rows), dtype="Int64")})
    df.loc[7, "m"] = pd.NA
    try:
        import pyarrow  # noqa: F401

        df["s"] = pd.array(rng.choice(["x", "yy", "zzz"], rows), dtype="string[pyarrow]")
    except ImportError:
        pass
    return df


def _keys_without_helper(monkeypatch, values):
    from fncache.values import ahead

    with monkeypatch.context() as m:
        m.setattr(ahead, "MIN_BYTES", 1 << 62)
        return [fncache.hash(v) for v in values]


class _Bump:
    """Hashing it adds 1 to an array in place (user code the walk runs: a reducer)."""

    def __init__(self, a):
        self.a = a

    def __reduce__(self):
        self.a[0] += 1
        return (_Bump, (None,))


def _helper_spy(monkeypatch, wrong=False):
    """Count the items a helper thread took (fncache.values.ahead.Ahead: a frame's arrays, a
    table's columns), and make it answer wrongly, to see that its answers are used. The caller's
    thread waits for the helper to be done first: the helper takes every item, however loaded the
    machine (no timing margin)."""
    import threading

    from fncache.values import ahead

    took = []
    first, last = ahead._take_first, ahead._take_last
    done = threading.Event()

    def spy(fn, items, results, pending):
        try:
            first(lambda x: took.append(1) or (("wrong",) if wrong else fn(x)), items, results,
                  pending)
        finally:
            done.set()

    def wait_then_take(fn, items, results, pending):
        assert done.wait(120)
        done.clear()
        last(fn, items, results, pending)

    monkeypatch.setattr(ahead, "usable_cpus", lambda: 2)
    monkeypatch.setattr(ahead, "_take_first", spy)
    monkeypatch.setattr(ahead, "_take_last", wait_then_take)
    return took


def test_a_large_frame_digested_ahead_keys_as_the_walk_does(monkeypatch):
    """A frame's arrays digested on a helper thread give the key the hash's own walk gives, in every
    shape a frame's arrays take: mixed columns, one 2-D block, Fortran order, a datetime index with
    a frequency, zoned datetimes, bools with odd bytes, records, a frame in a cyclic value, an
    array both in a column and outside the frame; and the walk uses the helper's digests."""
    pd = pytest.importorskip("pandas")
    rows = 600_000
    rng = np.random.default_rng(1)
    df = _big_frame(pd)
    loop = [df]
    loop.append(loop)
    data = np.arange(rows)
    shared = pd.DataFrame({"m": pd.arrays.IntegerArray(data, np.zeros(rows, dtype=bool)),
                           "f": rng.random(rows), "g": rng.random(rows), "h": rng.random(rows)},
                          copy=False)
    odd = np.zeros(rows, dtype=np.uint8)
    odd[::3] = 7
    other = pd.DataFrame({"b": odd.view(np.bool_), "r": np.zeros(rows, dtype="i8,f8"),
                          "z": pd.date_range("2001-01-01", periods=rows, freq="s", tz="UTC"),
                          "f": rng.random(rows), "g": rng.random(rows)},
                         index=pd.date_range("2001-01-01", periods=rows, freq="min"))
    values = [df, df.set_index("t"), pd.DataFrame(rng.random((rows, 6))),
              pd.DataFrame(np.asfortranarray(rng.random((rows, 6)))), other, loop,
              (shared, data), df[["f1", "f2", "i", "t"]]]
    ran = _helper_spy(monkeypatch)
    ahead = []
    for v in values:
        ran.clear()
        ahead.append(fncache.hash(v))
        assert ran, f"nothing digested ahead for value {len(ahead)}"
    assert ahead == _keys_without_helper(monkeypatch, values)
    assert len(set(ahead)) == len(values)
    _helper_spy(monkeypatch, wrong=True)
    assert [fncache.hash(v) for v in values] != ahead  # (the helper's digests are the key's)


def test_no_array_is_digested_ahead_where_user_code_runs_before_the_walk_meets_it(monkeypatch):
    """Where a label, an element of an object column or an array met again in the value runs user
    code that changes an array between the helper's digest and the walk, the key is the walk's:
    the helper does not run, or its digest is taken once."""
    pd = pytest.importorskip("pandas")
    rows = 1_000_000

    def labelled():
        df = pd.DataFrame({"f": np.zeros(rows), "g": np.zeros(rows), "h": np.zeros(rows)})
        df.columns = pd.Index([_Bump(df["f"].array._ndarray), "g", "h"], dtype=object)
        return df

    def object_column():
        f = np.zeros(rows)
        return pd.DataFrame({"o": pd.Series([_Bump(f)] + [0] * (rows - 1), dtype=object),
                             "f": f, "g": np.zeros(rows), "h": np.zeros(rows)}, copy=False)

    def met_again():
        data = np.zeros(rows, dtype=np.int64)
        df = pd.DataFrame({"m": pd.arrays.IntegerArray(data, np.zeros(rows, dtype=bool)),
                           "f": np.zeros(rows), "g": np.zeros(rows)}, copy=False)
        return (df, _Bump(data), data)

    ran = _helper_spy(monkeypatch)
    for make in (labelled, object_column, met_again):
        ran.clear()
        ahead = fncache.hash(make())
        assert (make is met_again) == bool(ran)
        assert [ahead] == _keys_without_helper(monkeypatch, [make()])


def test_an_edit_of_any_column_of_a_frame_digested_ahead_is_a_new_key(monkeypatch):
    """One value changed in any column (or the index) of a large frame is a new key."""
    pd = pytest.importorskip("pandas")
    ran = _helper_spy(monkeypatch)
    df = _big_frame(pd)
    keys = {fncache.hash(df)}
    assert ran
    row = 123_456
    for col in df.columns:
        edited = df.copy()
        old = edited.loc[row, col]
        if col in ("cat", "s"):
            new = next(v for v in ("a", "b", "x", "yy") if v != old and v in set(df[col].head(50)))
        elif col == "t":
            new = old + pd.Timedelta(1, "s")
        else:
            new = old + 1
        edited.loc[row, col] = new
        assert edited.loc[row, col] != old
        keys.add(fncache.hash(edited))
    moved = df.copy()
    moved.index = moved.index + 1
    keys.add(fncache.hash(moved))
    assert len(keys) == len(df.columns) + 2


def test_the_digest_helper_has_ended_when_a_hash_returns_or_fails(monkeypatch):
    """No thread is left behind by a hash, one that fails inside (an Arrow column's digest raises:
    the frame is keyed through its pickle) or one that gets no thread (the walk digests)."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    import _thread
    import threading

    from fncache.values import arrow

    ran = _helper_spy(monkeypatch)
    df = _big_frame(pd)
    before = _thread._count()
    key = fncache.hash(df)
    assert ran and _thread._count() == before
    with monkeypatch.context() as m:
        m.setattr(arrow, "chunks_content", lambda chunks: 1 / 0)
        fallback = fncache.hash(df)
    assert fallback != key  # (keyed by pandas' pickle of the frame instead)
    assert _thread._count() == before
    assert not [t for t in threading.enumerate() if t.name == "fncache-digests"]

    for error in (RuntimeError("can't start new thread"), MemoryError()):
        def refuse(self, error=error):
            raise error

        with monkeypatch.context() as m:
            m.setattr(threading.Thread, "start", refuse)
            assert fncache.hash(df) == key


def _large_arrow_values(pa, rows=1_000_000):
    rng = np.random.default_rng(3)

    def nulls():
        return rng.random(rows) < 0.1

    table = pa.table({"i": pa.array(rng.integers(0, 1000, rows), mask=nulls()),
                      "f": pa.array(rng.random(rows), mask=nulls()),
                      "s": pa.array(rng.choice(["a", "bb", "ccc"], rows), mask=nulls()),
                      "b": pa.array(rng.random(rows) < 0.5, mask=nulls()), "k": np.arange(rows),
                      "d": pa.array(rng.choice(["x", "y"], rows)).dictionary_encode(),
                      "l": pa.array([[1, 2]] * rows), "st": pa.array([{"a": 1, "b": "x"}] * rows)})
    return [table, pa.Table.from_batches(table.to_batches(max_chunksize=300_000)),
            table.to_batches()[0]]


def test_large_arrow_tables_and_polars_frames_keyed_on_two_threads_key_as_on_one(monkeypatch):
    """A table's, a record batch's and a polars frame's columns taken by a helper thread give the
    keys one thread gives (nulls, strings, dictionaries, lists, structs, chunks), and those keys
    are made of what the helper computed."""
    pa = pytest.importorskip("pyarrow")
    values = _large_arrow_values(pa)
    try:
        import polars as pl

        rng = np.random.default_rng(4)
        values.append(pl.from_arrow(values[0].drop_columns(["st"])))
        values.append(pl.DataFrame({"a": np.arange(10**6), "b": rng.random(10**6),
                                    "c": rng.choice(["p", "q"], 10**6)}))
    except ImportError:
        pass
    took = _helper_spy(monkeypatch)
    keys = []
    for v in values:
        took.clear()
        keys.append(fncache.hash(v))
        assert took, f"no column taken by a helper for value {len(keys)}"
    assert keys == _keys_without_helper(monkeypatch, values)
    _helper_spy(monkeypatch, wrong=True)
    assert all(fncache.hash(v) != k for v, k in zip(values, keys, strict=True))


def test_a_large_table_with_an_extension_type_is_keyed_on_one_thread(monkeypatch):
    """An Arrow extension type's Python methods are user code: such a table's columns all stay on
    the caller's thread (one key either way)."""
    pa = pytest.importorskip("pyarrow")

    class Meters(pa.ExtensionType):
        def __init__(self):
            super().__init__(pa.float64(), "test.meters")

        def __arrow_ext_serialize__(self):
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type, serialized):
            return cls()

    rows = 1_000_000
    rng = np.random.default_rng(6)
    meters = pa.ExtensionArray.from_storage(Meters(), pa.array(rng.random(rows)))
    table = pa.table({"m": meters, "f": rng.random(rows), "g": rng.random(rows)})
    took = _helper_spy(monkeypatch)
    key = fncache.hash(table)
    assert not took
    assert [key] == _keys_without_helper(monkeypatch, [table])


def test_map_ahead_keeps_order_and_redoes_what_the_helper_could_not(monkeypatch):
    """Results come in the items' order; an item that raises on the helper thread is done again
    on the caller's (the same answer, or the same exception there), and no helper is left."""
    import threading

    from fncache.values import ahead

    monkeypatch.setattr(ahead, "usable_cpus", lambda: 2)
    items = list(range(40))
    sizes = [1 << 20] * len(items)

    def square(x):
        if threading.current_thread().name == "fncache-digests" and x % 3 == 0:
            raise ValueError(x)
        return x * x

    assert ahead.map_ahead(square, items, sizes) == [x * x for x in items]

    def fails(x):
        if x == 39:
            raise KeyError(x)
        return x

    with pytest.raises(KeyError):
        ahead.map_ahead(fails, items, sizes)
    assert not [t for t in threading.enumerate() if t.name == "fncache-digests"]


_FINALISERS = """
import gc, sys, threading
import numpy as np, pyarrow as pa, pandas as pd, fncache
from fncache.values import ahead
ahead.usable_cpus = lambda: 2
rows = 1_000_000
table = pa.table({c: pa.array(np.arange(rows), mask=np.arange(rows) % 7 == 0) for c in "abcdefgh"})
frame = pd.DataFrame({c: np.arange(rows) * 1.5 for c in "abcd"} | {"s": ["x"] * rows})
lock = threading.RLock()
ran_on = set()

class Resource:
    def __init__(self):
        self.me = self  # in a cycle: freed by the collector, on whichever thread it runs

    def __del__(self):
        ran_on.add(threading.current_thread().name)
        with lock:  # (a pool's release, logging): the hashing thread holds it
            pass

for i in range(150):
    gc.disable()
    garbage = [Resource() for _ in range(50)]
    del garbage
    gc.set_threshold(gc.get_count()[0] + 5 + i * 7)
    gc.enable()
    with lock:
        fncache.hash(table if i % 2 else frame)
    assert gc.isenabled()
    gc.set_threshold(700)
gc.collect()
print(sorted(ran_on))
"""


@pytest.mark.slow
def test_no_finaliser_runs_on_a_helper_thread(tmp_path):
    """Users' finalisers never run on a helper thread while the caller waits for it holding a lock
    they take (a deadlock: the process hung), and the collector runs again after each hash."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    script = tmp_path / "finalisers.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(REPO)!r})\n" + _FINALISERS)
    assert run_py(script, timeout=180).stdout.split()[-1] == "['MainThread']"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_process_forked_while_a_helper_runs_gets_the_collector_back():
    """A child forked while a helper had the collector paused has it running."""
    import gc

    from fncache.values import ahead

    assert gc.isenabled()
    ahead._pause_collector()
    try:
        assert not gc.isenabled()
        pid = os.fork()
        if pid == 0:  # the child
            os._exit(0 if gc.isenabled() else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        ahead._resume_collector()
    assert os.waitstatus_to_exitcode(status) == 0
    assert gc.isenabled()


@pytest.mark.slow
def test_a_large_frames_key_is_one_on_one_cpu_or_two_in_new_processes(tmp_path):
    """New processes with other hash seeds, in other directories, one held to one CPU (no helper
    thread), one not: one key for the same frame."""
    pd = pytest.importorskip("pandas")
    script = tmp_path / "key.py"
    script.write_text(
        "import os, sys\n"
        "if sys.argv[1] == 'one' and hasattr(os, 'sched_setaffinity'):\n"
        "    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "import pandas as pd, fncache\n"
        "from tests.test_performance_paths import _big_frame\n"
        "print(fncache.hash(_big_frame(pd)))\n")
    keys = set()
    for i, (cpus, seed) in enumerate((("one", "1"), ("all", "2"), ("one", "random"))):
        where = tmp_path / f"dir{i}"
        where.mkdir()
        keys.add(run_py(script, cpus, cwd=where, seed=seed).stdout.strip())
    assert len(keys) == 1
    assert keys == {fncache.hash(_big_frame(pd))}


def _sum_of_big_frame(n):
    return float(_BIG_FRAME["f1"].sum()) + n


def test_a_function_reading_a_large_frame_global_stores_hits_and_sees_an_edit(tmp_path, monkeypatch):
    """A function reading a large frame global (keyed with the helper thread) is stored on its
    miss, hits on the next call, and misses after an edit of the global in place."""
    pd = pytest.importorskip("pandas")
    ran = _helper_spy(monkeypatch)
    monkeypatch.setattr(sys.modules[__name__], "_BIG_FRAME", _big_frame(pd))
    calls = []
    f = fncache.memoize(store=str(tmp_path / "store"))(
        lambda n: calls.append(n) or _sum_of_big_frame(n))
    first = f(1)
    assert f(1) == first and calls == [1] and ran
    _BIG_FRAME.loc[10, "f1"] += 1.0
    assert f(1) == first + 1.0 and calls == [1, 1]
    assert f(1) == first + 1.0 and calls == [1, 1]


# -- torch ---------------------------------------------------------------------------------------

def test_torch_tensors_hash_by_content_dtype_and_shape():
    """Equal tensors agree in any layout; dtype, shape and requires_grad tell them apart."""
    torch = import_torch()
    a = torch.arange(12.0).reshape(3, 4)
    assert fncache.hash(a.t()) == fncache.hash(a.t().contiguous())
    assert fncache.hash(a) == fncache.hash(a.clone())
    assert len({fncache.hash(a), fncache.hash(a.double()), fncache.hash(a.reshape(4, 3)),
                fncache.hash(a.clone().requires_grad_()), fncache.hash(a + 1)}) == 5
    assert fncache.hash(torch.empty(0)) != fncache.hash(torch.empty(0, 3))


def test_torch_tensor_matches_its_numpy_content_not_its_storage():
    """A view hashes as its own elements, not as the whole storage it lives in."""
    torch = import_torch()
    big = torch.arange(100.0)
    assert fncache.hash(big[10:20]) == fncache.hash(torch.arange(10.0, 20.0))


# -- polars and pyarrow ----------------------------------------------------------------------------

def test_polars_frames_hash_alike_whatever_their_chunking():
    """A frame built by concatenation (several chunks) hashes like the same frame in one chunk."""
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"a": [1, 2, 3], "s": ["x", "y" * 30, None]})
    chunked = pl.concat([df[:1], df[1:]], rechunk=False)
    assert chunked.n_chunks() > 1
    assert fncache.hash(df) == fncache.hash(chunked)
    assert fncache.hash(df["s"]) == fncache.hash(chunked["s"])
    assert fncache.hash(df) != fncache.hash(df.with_columns(pl.col("s").fill_null("")))
    assert fncache.hash(df) != fncache.hash(df.with_columns(pl.col("a").cast(pl.Int32)))


def test_arrow_tables_hash_alike_whatever_their_chunking():
    """Equal tables with nulls agree across chunkings; a changed value or type does not."""
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"a": [1, None, 3], "s": ["x", None, "z"]})
    chunked = pa.concat_tables([t.slice(0, 1), t.slice(1)])
    assert fncache.hash(t) == fncache.hash(chunked)
    other = pa.table({"a": [1, None, 4], "s": ["x", None, "z"]})
    narrower = t.cast(pa.schema([("a", pa.int32()), ("s", pa.string())]))
    assert fncache.hash(t) != fncache.hash(other)
    assert fncache.hash(t) != fncache.hash(narrower)


# -- codec: memory-mapped reads -------------------------------------------------------------------

def _frame(value, secret=None):
    return _codec.encode(value, KEY, created=1.0, duration=0.0, secret=secret)


def test_unverified_buffers_still_verify_header_and_pickle():
    """With verify_buffers=False a flipped pickle byte is still rejected, and values round-trip."""
    value = {"a": np.arange(100_000.0), "b": "x"}
    frame = bytearray(_frame(value))
    out, _ = _codec.decode(bytes(frame), KEY, verify_buffers=False)
    assert np.array_equal(out["a"], value["a"])
    header = _codec.read_header(frame)
    frame[header.body_offset + 3] ^= 1
    with pytest.raises(IntegrityError):
        _codec.decode(bytes(frame), KEY, verify_buffers=False)


def test_full_decode_still_catches_a_flipped_buffer_byte():
    """The default decode checks the buffers: one flipped array byte rejects the entry."""
    frame = bytearray(_frame(np.arange(100_000.0)))
    frame[-100] ^= 1
    with pytest.raises(IntegrityError):
        _codec.decode(bytes(frame), KEY)


def test_secret_still_checks_everything_when_mapped():
    """Under a secret, a flipped buffer byte is rejected even with verify_buffers=False."""
    frame = bytearray(_frame(np.arange(100_000.0), secret=b"k"))
    frame[-100] ^= 1
    with pytest.raises(IntegrityError):
        _codec.decode(bytes(frame), KEY, secret=b"k", verify_buffers=False)


def test_mmap_mode_returns_read_only_mapped_arrays(tmp_path):
    """mmap_mode='r' returns equal, read-only arrays backed by the entry's file."""
    def make(n):
        return np.full(100_000, float(n))

    plain = fncache.memoize(store=str(tmp_path / "c"))(make)
    mapped = fncache.memoize(store=str(tmp_path / "c"), mmap_mode="r")(make)
    first = plain(3)
    assert first.flags.writeable
    again = mapped(3)
    assert np.array_equal(again, first) and not again.flags.writeable
    assert plain(3).flags.writeable  # a plain read still gives a private, writable copy
    assert mapped.cache_info().hits == 1


def test_mmap_mode_rejects_other_values():
    """mmap_mode accepts only None and 'r'."""
    with pytest.raises(fncache.ConfigError):
        fncache.memoize(mmap_mode="w+")(lambda x: x)


# -- disk store fast paths ---------------------------------------------------------------------

def test_disk_entries_stay_readable_by_plain_diskcache(tmp_path):
    """Values written by the fast path read back through diskcache's own Cache.get."""
    import diskcache

    store = DiskStore(str(tmp_path / "s"))
    big = os.urandom(100_000)
    store.add("a" * 32, b"small", {"function": "m:f"})
    store.add("b" * 32, big, {"function": "m:f"})
    store.close()
    with diskcache.Cache(str(tmp_path / "s")) as cache:
        assert cache.get("a" * 32) == b"small"
        assert cache.get("b" * 32) == big


def test_disk_get_of_a_file_value_is_writable_and_equal(tmp_path):
    """A value over 32 KiB comes back whole, in a writable buffer."""
    store = DiskStore(str(tmp_path / "s"))
    big = os.urandom(300_000)
    store.add("c" * 32, big, {"function": "m:f"})
    got = store.get("c" * 32)
    assert bytes(got) == big and not memoryview(got).readonly


def test_disk_expired_entries_read_as_missing_and_add_replaces_them(tmp_path):
    """An expired entry is a miss, and add() may then store a new value at its key."""
    store = DiskStore(str(tmp_path / "s"))
    key = "d" * 32
    assert store.add(key, b"old", {"function": "m:f"}, expire=2.0)
    assert not store.add(key, b"other", {"function": "m:f"})  # within 2 s, even on a loaded machine
    import time

    time.sleep(2.2)
    assert store.get(key) is None
    assert store.add(key, b"new", {"function": "m:f"})
    assert store.get(key) == b"new"


def test_disk_clear_removes_rows_files_and_counts_entries(tmp_path):
    """clear() empties rows and value files and returns the number of entries, not rows."""
    store = DiskStore(str(tmp_path / "s"))
    for i in range(30):
        store.add(f"{i:032x}", os.urandom(40_000 if i % 3 == 0 else 100), {"function": "m:f"})
    with store.lock("e" * 32, 5):
        pass
    assert len(store) == 30
    assert store.clear() == 30
    fresh = DiskStore(str(tmp_path / "fresh"))  # the empty database file only (its schema)
    fresh.add("f" * 32, b"x", {"function": "m:f"})
    assert len(store) == 0 and store.cache.volume() < fresh.cache.volume() + 40_000
    files = [f for _, _, fs in os.walk(tmp_path / "s") for f in fs if f.endswith(".val")]
    assert files == []


def test_disk_clear_function_leaves_other_functions(tmp_path):
    """clear_function() removes one function's entries and keeps the others'."""
    store = DiskStore(str(tmp_path / "s"))
    for i in range(10):
        store.add(f"{i:032x}", b"v", {"function": "m:f" if i % 2 else "m:g"})
    assert store.clear_function("m:f") == 5
    assert sorted(e.function for e in store.entries()) == ["m:g"] * 5


def test_the_read_after_a_write_is_on_the_warm_writer_and_still_right(tmp_path):
    """The first read after this thread's own write goes to the connection that wrote (a write
    empties every other connection's page cache) and sees the new entry; after that, reads are on
    the thread's reader again. If the writer's connection has been closed since, the read falls
    back to the reader and still finds the entry."""
    store = DiskStore(str(tmp_path / "s"))
    db = store.db
    assert store.add("a" * 32, b"one", {"function": "m:f"})
    writer = db._readers.after_write
    assert writer is not None and writer.connection is db.cache._con
    assert store.get("a" * 32) == b"one"
    assert db._readers.after_write is None  # the next reads are on the reader
    assert store.get("a" * 32) == b"one"
    assert store.add("b" * 32, b"two", {"function": "m:f"})
    db.cache.close()  # diskcache's connection for this thread: closed under the kept cursor
    assert store.get("b" * 32) == b"two" and store.get("a" * 32) == b"one"
    assert store.add("c" * 32, b"three", {"function": "m:f"})  # a new writer connection
    assert db._readers.after_write.connection is db.cache._con
    assert store.get("c" * 32) == b"three"


def test_a_read_inside_an_open_transaction_does_not_see_its_uncommitted_rows(tmp_path):
    """Inside a transaction that is then rolled back, a read does not return the row it wrote
    (the read is on the reader, not on the writer's open transaction): nothing that was never
    stored is returned."""
    store = DiskStore(str(tmp_path / "s"))
    assert store.add("a" * 32, b"one", {"function": "m:f"})

    class Abort(Exception):
        pass

    seen = []
    with pytest.raises(Abort):
        with store.db.transact():
            assert store.add("b" * 32, b"two", {"function": "m:f"})  # nested: not committed yet
            seen.append(store.get("b" * 32))
            raise Abort
    assert seen == [None]
    assert store.get("b" * 32) is None and store.get("a" * 32) == b"one"


def test_a_hit_runs_few_python_calls(tmp_path):
    """A hit on the disk store runs about two dozen Python calls (43 before the one-step frame
    check and the inline lookup; diskcache's memoize makes about 180): a regression shows here."""
    import sys

    f = fncache.memoize(store=str(tmp_path / "cache"))(_small_for_calls)
    f(1, "x")
    f(1, "x")  # warm: fingerprint, key prefix, connections
    calls = [0]

    def count(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            calls[0] += 1

    sys.setprofile(count)
    try:
        assert f(1, "x") == 2
    finally:
        sys.setprofile(None)
    assert f.cache_info().hits == 2
    assert calls[0] <= 30, calls[0]


def _small_for_calls(a: int, b: str) -> int:
    return a + len(b)


def test_outside_wal_mode_reads_after_a_write_stay_on_the_reader(tmp_path):
    """Only in WAL mode (diskcache's default) may a read use the writer's connection, whose busy
    timeout is the store's: with another journal mode, where a commit locks readers out, the
    read after a write stays on the reader (which waits for nothing) and still finds the entry."""
    store = DiskStore(str(tmp_path / "s"), sqlite_journal_mode="delete")
    assert store.add("a" * 32, b"one", {"function": "m:f"})
    assert getattr(store.db._readers, "after_write", None) is None
    assert store.get("a" * 32) == b"one"
