"""``python -m benchmarks``: fncache side by side with joblib.Memory, diskcache, lru_cache, np.load,
pickle and parquet.

Method: the implementations compared in a row run in the same rounds, interleaved, their order
rotated every round; before each large timed step a block of memory is written and freed (on VMs
that hand freed memory back to the host, whichever step runs first after a free otherwise pays for
faulting it back in), and a step's result is freed after the clock stops. Stores start from a
clean slate (earlier rounds' files are deleted, untimed: none pays for the kernel writing back
another's files). Each line gives the median and [min-max] per call, the ratio of medians and
whether this run met the target. The machines this runs on are shared and noisy: compare medians
and ratios, and rerun before concluding from one line. Cold loads drop the files' pages with
``posix_fadvise(DONTNEED)`` (no root needed, nothing else on the machine loses its cache).

Options: ``--quick`` (smaller sizes, fewer rounds), ``--only NAME`` (repeatable; names below),
``--json FILE``, ``--scale N`` (entries for the scale benchmark; 1000000 for the full run, which
takes several minutes). The default run takes about two minutes.

Benchmarks: hit, miss, hash, large, frame, compress, scale, import, listing (``fncache ls`` on S3
and Redis against writing the entries; starts SeaweedFS and redis-server on loopback, as the tests
do, and leaves itself out where they are not installed), lazy (a warm call with a polars scan and
with ``fncache.file`` of a 200 MB file, against a ``stat`` and a full read), global (a DataFrame
result reached through a helper's global), pipeline (a scikit-learn ``Pipeline(memory=...)`` warm fit
in process and in a new process), peak (traced memory of a large load and store); see
:mod:`benchmarks._round3`, shared-scale
(``summary()`` of 100,000 entries on Redis and S3 against their listing; ``--scale`` sets the
number; not in the default run).
"""

from __future__ import annotations

import argparse
import functools
import glob
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import fncache
from benchmarks import _funcs, _state
from benchmarks._kit import Stat
from benchmarks._kit import const as _const
from benchmarks._kit import evict as _evict
from benchmarks._kit import forget as _forget
from benchmarks._kit import measure as _measure
from benchmarks._kit import row as _row
from benchmarks._kit import stat as _stat

# In the default run's order. ``listing`` runs last: its S3 store leaves fsspec's I/O thread
# running, which changes the rows after it (beside it a miss hashes what its function reads once
# more before the call: see docs/invalidation.md).
NAMES = ("hit", "miss", "hash", "large", "frame", "compress", "scale", "import", "lazy", "global",
         "pipeline", "peak", "listing", "shared-scale")
Row = dict[str, Any]


def small(a: int, b: str) -> int:  # the __main__ twin of _funcs.small
    return a + len(b)


# -- hit and miss of a small call ---------------------------------------------------------------

def bench_hit(tmp: str, quick: bool) -> list[Row]:
    import diskcache
    import joblib

    rows = []
    number, rounds = (300, 7) if quick else (2000, 15)
    for where, fn in (("__main__", small), ("module", _funcs.small)):
        ours = fncache.memoize(store=os.path.join(tmp, f"hit-fn-{where}"))(fn)
        dc = diskcache.Cache(os.path.join(tmp, f"hit-dc-{where}"))
        theirs = dc.memoize()(fn)
        jl = joblib.Memory(os.path.join(tmp, f"hit-jl-{where}"), verbose=0).cache(fn)
        lru = functools.lru_cache(maxsize=None)(fn)
        for f in (ours, theirs, jl, lru):
            f(1, "x")
        t = _measure({"ours": lambda f=ours: f(1, "x"), "dc": lambda f=theirs: f(1, "x"),
                      "lru": lambda f=lru: f(1, "x")}, rounds, number=number)
        t.update(_measure({"jl": lambda f=jl: f(1, "x")}, max(rounds // 2, 3),
                          number=max(number // 10, 30)))
        rows.append(_row(f"hit {where} vs diskcache", t["ours"], t["dc"], "diskcache.memoize",
                         "<= 0.5x", 0.5))
        rows.append(_row(f"hit {where} vs joblib", t["ours"], t["jl"], "joblib.Memory",
                         "<= 0.2x", 0.2))
        rows.append(_row(f"hit {where} vs lru_cache", t["ours"], t["lru"], "functools.lru_cache",
                         "(info)", None))
        dc.close()
    # A function that reads a dataclass: what a hit checks grows with what the code read.
    plain = fncache.memoize(store=os.path.join(tmp, "hit-fn-plain"))(_funcs.small)
    ours = fncache.memoize(store=os.path.join(tmp, "hit-fn-dataclass"))(_funcs.with_settings)
    plain(1, "x"), ours(1, "x")
    t = _measure({"ours": lambda: ours(1, "x"), "plain": lambda: plain(1, "x")}, rounds,
                 number=number)
    rows.append(_row("hit of a function reading a dataclass vs a plain one", t["ours"],
                     t["plain"], "hit, small call", "(info)", None))
    return rows


def bench_miss(tmp: str, quick: bool) -> list[Row]:
    import diskcache

    n, rounds = (300, 5) if quick else (1000, 9)
    ours = fncache.memoize(store=os.path.join(tmp, "miss-fn"))(_funcs.small)
    dc = diskcache.Cache(os.path.join(tmp, "miss-dc"))
    theirs = dc.memoize()(_funcs.small)
    counter = itertools.count()

    def misses(f: Callable[..., Any]) -> None:
        for i in itertools.islice(counter, n):  # every call a new key: a miss, then a store
            f(i, "x")

    t = _measure({"ours": lambda: misses(ours), "dc": lambda: misses(theirs)}, rounds)
    per_call = {k: Stat(*(x / n for x in v)) for k, v in t.items()}
    parts = _miss_parts(tmp, n, rounds, theirs, counter)
    dc.close()
    return [_row("miss+store small call", per_call["ours"], per_call["dc"], "diskcache.memoize",
                 "<= 1.0x", 1.0), *parts]


def _miss_parts(tmp: str, n: int, rounds: int, theirs: Any, counter: Any) -> list[Row]:
    """Where a miss's time goes, in the same rounds: each library's store write alone (a new key,
    a small value, as its memoize stores it: the statements and the Python around them), and
    fncache's memoize layer alone (key, lookup, single-flight, checks, frame, metadata) on an
    in-process store, against diskcache's whole memoized miss."""
    import uuid

    import diskcache

    from fncache import _codec
    from fncache.stores.disk import DiskStore

    store = DiskStore(os.path.join(tmp, "miss-store"))
    dc = diskcache.Cache(os.path.join(tmp, "miss-dc-set"))
    layer = fncache.memoize(store="memory://benchmark-miss")(_funcs.small)
    meta = fncache.memoize(store=store)(_funcs.small).call_key(1, "x").meta(time.time(), 0.0)
    frame = _codec.encode_parts(2, "0" * 32, created=time.time(), duration=0.0)
    name = f"{_funcs.small.__module__}.{_funcs.small.__qualname__}"

    def writes(f: Callable[[], Any]) -> None:
        for _ in range(n):
            f()

    t = _measure({
        "add": lambda: writes(lambda: store.add(uuid.uuid4().hex, frame, meta)),
        "set": lambda: writes(lambda: dc.set((name, next(counter), "x", None), 2)),
        "layer": lambda: writes(lambda: layer(next(counter), "x")),
        "dc": lambda: writes(lambda: theirs(next(counter), "x")),
    }, rounds)
    store.close()
    dc.close()
    per = {k: Stat(*(x / n for x in v)) for k, v in t.items()}
    return [
        _row("miss: the store write alone (DiskStore.add)", per["add"], per["set"],
             "diskcache Cache.set", "(info)", None),
        _row("miss: fncache's memoize layer alone (in-process store)", per["layer"], per["dc"],
             "diskcache.memoize miss", "(info)", None),
    ]


# -- argument hashing ---------------------------------------------------------------------------

def bench_hash(tmp: str, quick: bool) -> list[Row]:
    import joblib
    import numpy as np
    import xxhash

    rows = []
    rounds = 3 if quick else 7
    n = 2**22 if quick else 2**25  # 32 MB / 256 MB of float64
    a = np.random.default_rng(0).random(n)
    f = np.asfortranarray(a.reshape(-1, 64))
    fns: dict[str, Callable[[], Any]] = {
        "raw": lambda: xxhash.xxh3_128_digest(a), "ours": lambda: fncache.hash(a),
        "fortran": lambda: fncache.hash(f)}
    fns["fcopy"] = lambda: xxhash.xxh3_128_digest(np.ascontiguousarray(f))
    try:
        import torch

        tensor = torch.from_numpy(a)
        tt = tensor.reshape(64, -1).t()  # a transposed tensor: (n, 64) with strides (1, n)
        fns["torch"] = lambda: fncache.hash(tensor)
        fns["tt"] = lambda: fncache.hash(tt)
        fns["ttcopy"] = lambda: xxhash.xxh3_128_digest(tt.contiguous().numpy())
    except ImportError:
        pass
    t = _measure(fns, rounds)
    t.update(_measure({"jl": lambda: joblib.hash(a)}, max(rounds // 3, 1)))
    mb = a.nbytes >> 20
    rows.append(_row(f"hash ndarray {mb} MB vs xxh3", t["ours"], t["raw"], "xxh3 zero-copy",
                     "speed >= 0.9x", 1 / 0.9, "ms"))
    rows.append(_row(f"hash ndarray {mb} MB vs joblib", t["ours"], t["jl"], "joblib.hash",
                     "<= 0.05x", 0.05, "ms"))
    rows.append(_row("hash Fortran-order ndarray vs xxh3", t["fortran"], t["raw"],
                     "xxh3 zero-copy (C)", "(info: one C-order copy)", None, "ms"))
    rows.append(_row("hash Fortran-order ndarray vs copy+xxh3", t["fortran"], t["fcopy"],
                     "C-order copy, then xxh3", "<= 1.0x (no full copy)", 1.0, "ms"))
    if "torch" in t:
        rows.append(_row(f"hash torch {mb} MB vs xxh3", t["torch"], t["raw"], "xxh3 zero-copy",
                         "speed >= 0.9x", 1 / 0.9, "ms"))
        rows.append(_row("hash transposed torch tensor vs copy+xxh3", t["tt"], t["ttcopy"],
                         ".contiguous(), then xxh3", "<= 1.0x (no full copy)", 1.0, "ms"))

    # Plain values and user records: what the canonical pickler adds to pickle, per object saved.
    n_plain = 1000 if quick else 10000
    for what, value in (("(int, str, float) tuples", [(i, str(i), float(i)) for i in range(n_plain)]),
                        ("dataclass instances", [_funcs.Record(i, str(i)) for i in range(n_plain)])):
        rows.extend(_plain_rows(f"hash a list of {n_plain} {what}", value, rounds))

    import pandas as pd

    rows_n = 10**5 if quick else 10**6
    rng = np.random.default_rng(1)
    df = pd.DataFrame({f"x{i}": rng.random(rows_n) for i in range(6)})
    df["i"] = np.arange(rows_n)
    df["s"] = rng.choice(["a", "bb", "ccc"], rows_n)
    df["c"] = pd.Categorical(rng.choice(["x", "y"], rows_n))
    df["t"] = pd.date_range("2000", periods=rows_n, freq="s")
    numeric_df = df[[f"x{i}" for i in range(6)]]
    numeric = np.ascontiguousarray(numeric_df.to_numpy())
    fns = {"ours": lambda: fncache.hash(df), "num": lambda: fncache.hash(numeric_df),
           "raw": lambda: xxhash.xxh3_128_digest(numeric)}
    try:
        import pyarrow as pa

        table = pa.Table.from_pandas(df)
        fns["arrow"] = lambda: fncache.hash(table)
        rows.extend(_bench_arrow_nullable(pa, np, xxhash, rows_n, rounds))
    except ImportError:
        pass
    try:
        import polars as pl

        pdf = pl.from_pandas(df)
        fns["polars"] = lambda: fncache.hash(pdf)
    except ImportError:
        pass
    t = _measure(fns, rounds)
    t.update(_measure({"jl": lambda: joblib.hash(df)}, max(rounds // 3, 1)))
    rows.append(_row(f"hash pandas {rows_n}x10 mixed vs joblib", t["ours"], t["jl"],
                     "joblib.hash", "<= 0.125x", 0.125, "ms"))
    rows.append(_row(f"hash pandas {rows_n}x6 float vs xxh3", t["num"], t["raw"],
                     "xxh3 zero-copy", "speed >= 0.6x", 1 / 0.6, "ms"))
    for kind in ("arrow", "polars"):
        if kind in t:
            rows.append(_row(f"hash {kind} {rows_n}x10 vs joblib(pandas)", t[kind], t["jl"],
                             "joblib.hash(pandas)", "<= 0.125x", 0.125, "ms"))
    # A wide frame: what each column costs besides its bytes (2,000 columns of 1,000 floats).
    wide = pd.DataFrame(rng.random((100 if quick else 1000, 2000)))
    flat = np.ascontiguousarray(wide.to_numpy())
    w = _measure({"ours": lambda: fncache.hash(wide), "raw": lambda: xxhash.xxh3_128_digest(flat),
                  "jl": lambda: joblib.hash(wide)}, rounds)
    what = f"hash pandas {wide.shape[0]}x2000 float (wide)"
    rows.append(_row(f"{what} vs joblib", w["ours"], w["jl"], "joblib.hash", "(info)", None,
                     "ms"))
    rows.append(_row(f"{what} vs xxh3", w["ours"], w["raw"], "xxh3 of its bytes", "(info)", None,
                     "ms"))
    return rows


def _plain_rows(what: str, value: Any, rounds: int) -> list[Row]:
    """``value`` hashed by fncache against pickle.dumps with xxh3 and joblib.hash (information)."""
    import pickle

    import joblib
    import xxhash

    p = _measure({"ours": lambda: fncache.hash(value),
                  "pickle": lambda: xxhash.xxh3_128_digest(pickle.dumps(value, 5)),
                  "jl": lambda: joblib.hash(value)}, rounds)
    return [_row(f"{what} vs pickle", p["ours"], p["pickle"], "pickle.dumps + xxh3", "(info)", None,
                 "ms"),
            _row(f"{what} vs joblib", p["ours"], p["jl"], "joblib.hash", "(info)", None, "ms")]


def _bench_arrow_nullable(pa: Any, np: Any, xxhash: Any, n: int, rounds: int) -> list[Row]:
    """A table with nullable int, float, string and bool columns (10% nulls) and one without;
    and the same with the numpy code that runs where the native kernels were not built."""
    from fncache.values import arrow_streams as _arrow_streams

    kernels = _arrow_streams.speedups

    def without_kernels() -> Any:
        _arrow_streams.speedups = None
        try:
            return fncache.hash(table)
        finally:
            _arrow_streams.speedups = kernels

    rng = np.random.default_rng(2)

    def nulls() -> Any:
        return rng.random(n) < 0.1

    table = pa.table({"i": pa.array(rng.integers(0, 1000, n), mask=nulls()),
                      "f": pa.array(rng.random(n), mask=nulls()),
                      "s": pa.array(rng.choice(["a", "bb", "ccc"], n), mask=nulls()),
                      "b": pa.array(rng.random(n) < 0.5, mask=nulls()), "k": np.arange(n)})
    buffers = [b for col in table.columns for chunk in col.chunks for b in chunk.buffers()
               if b is not None]
    t = _measure({"ours": lambda: fncache.hash(table),
                  "raw": lambda: [xxhash.xxh3_128_digest(b) for b in buffers]}, rounds * 2)
    rows = [_row(f"hash pyarrow {n} rows, nullable columns", t["ours"], t["raw"],
                 "xxh3 over its buffers", "<= 2.0x", 2.0, "ms")]
    if kernels is not None:  # (a run of its own: the target's run stays as it was)
        t = _measure({"ours": lambda: fncache.hash(table), "numpy": without_kernels}, rounds)
        rows.append(_row("  the same without the native kernels", t["numpy"], t["ours"],
                         "with them", "(info)", None, "ms"))
    return rows


# -- results holding large buffers ---------------------------------------------------------------

def bench_large(tmp: str, quick: bool) -> list[Row]:
    import joblib
    import numpy as np

    size = 2**22 if quick else 2**25  # float64: 32 MB / 256 MB
    rounds = 3 if quick else 5
    nbytes = size * 8
    mb = nbytes >> 20
    store_dir, jl_dir = os.path.join(tmp, "large-fn"), os.path.join(tmp, "large-jl")
    fn = fncache.memoize(store=store_dir)(_funcs.full)
    fm = fncache.memoize(store=store_dir, mmap_mode="r")(_funcs.full)
    jl = joblib.Memory(jl_dir, verbose=0).cache(_funcs.full)
    jm = joblib.Memory(jl_dir, verbose=0, mmap_mode="r").cache(_funcs.full)
    # Storing is measured on a prepared array (a new key each call, no computing): a fresh
    # 256 MB array costs a different, noisy time to fault in each round.
    fncache.untrack("benchmarks._state")
    _state.VALUE = _funcs.full(7, size)
    ours_s = fncache.memoize(store=os.path.join(tmp, "store-fn"))(_funcs.prepared)
    jl_s = joblib.Memory(os.path.join(tmp, "store-jl"), verbose=0).cache(_funcs.prepared)
    counter = itertools.count(1)
    t = _measure({"ours": lambda: ours_s(next(counter)), "jl": lambda: jl_s(next(counter))},
                 rounds, touch=nbytes, before=lambda: _forget(ours_s, jl_s))
    _state.VALUE = None
    rows = [_row(f"store {mb} MB array", t["ours"], t["jl"], "joblib.Memory", "<= 1.0x", 1.0,
                 "ms")]
    path = os.path.join(tmp, "a.npy")
    np.save(path, _funcs.full(0, size))
    fn(0, size), jl(0, size)
    t = _measure({"ours": lambda: fn(0, size), "np": lambda: np.load(path),
                  "jl": lambda: jl(0, size)}, rounds + 2, touch=nbytes)
    rows.append(_row(f"warm load {mb} MB vs np.load", t["ours"], t["np"], "np.load",
                     "faster (<= 1.0x)", 1.0, "ms"))
    rows.append(_row(f"warm load {mb} MB vs joblib", t["ours"], t["jl"], "joblib.Memory",
                     "(info)", None, "ms"))
    if hasattr(os, "posix_fadvise"):
        files = [path] + glob.glob(os.path.join(store_dir, "*", "*", "*.val"))
        files += glob.glob(os.path.join(jl_dir, "**", "*.pkl"), recursive=True)
        t = _measure({"ours": lambda: fn(0, size), "np": lambda: np.load(path),
                      "jl": lambda: jl(0, size)}, rounds, touch=nbytes,
                     before=lambda: _evict(files))
        rows.append(_row(f"cold load {mb} MB vs np.load", t["ours"], t["np"],
                         "np.load, files evicted", "<= 1.0x", 1.0, "ms"))
        rows.append(_row(f"cold load {mb} MB vs joblib", t["ours"], t["jl"],
                         "joblib.Memory, evicted", "(info)", None, "ms"))
    value = fm(0, size)
    assert not value.flags.writeable and np.array_equal(value[:10], np.zeros(10))
    t = _measure({"ours": lambda: fm(0, size), "jl": lambda: jm(0, size),
                  "np": lambda: np.load(path, mmap_mode="r")}, rounds * 3)
    rows.append(_row(f"mmap load {mb} MB vs np.load(mmap)", t["ours"], t["np"],
                     "np.load(mmap_mode='r')", "< 2 ms", 0.002 / t["np"].median, "ms"))
    rows.append(_row(f"mmap load {mb} MB vs joblib(mmap)", t["ours"], t["jl"],
                     "joblib.Memory(mmap_mode='r')", "(info)", None, "ms"))
    return rows


def _frame(n: int) -> Any:
    """A mixed frame: floats, ints, bool, datetime, category and two columns of pandas' default
    string dtype (Arrow-backed when pyarrow is installed)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(2)
    return pd.DataFrame({
        "f1": rng.random(n), "f2": rng.random(n), "f3": rng.random(n),
        "i1": rng.integers(0, 10**9, n), "i2": np.arange(n),
        "flag": rng.random(n) > 0.5,
        "t": pd.date_range("2000-01-01", periods=n, freq="s"),
        "cat": pd.Categorical(rng.choice(["red", "green", "blue"], n)),
        "s1": pd.array(rng.choice(["alpha", "beta", "gamma", "delta"], n), dtype="str"),
        "s2": pd.Series(np.arange(n)).astype("str").radd("id-").astype("str"),
    })


def bench_frame(tmp: str, quick: bool) -> list[Row]:
    """A pandas DataFrame result: stored and loaded by fncache, joblib, pickle-5 and parquet."""
    import pickle

    import joblib
    import pandas as pd

    n = 10**5 if quick else 10**6
    rounds = 3 if quick else 5
    _state.VALUE = df = _frame(n)
    nbytes = int(df.memory_usage(deep=True).sum())
    fncache.untrack("benchmarks._state")  # keyed by code: store and load are measured, not hashing
    ours = fncache.memoize(store=os.path.join(tmp, "frame-fn"))(_funcs.prepared)
    jl = joblib.Memory(os.path.join(tmp, "frame-jl"), verbose=0).cache(_funcs.prepared)
    pkl, parquet = os.path.join(tmp, "frame.pkl"), os.path.join(tmp, "frame.parquet")

    counter = itertools.count(1)

    # Every store writes a new file, as a cache does: rewriting one file reuses its page-cache
    # pages, while a new file's pages are fresh memory (on VMs that hand freed memory back to
    # the host, writing 80 MB to a new file takes up to four times as long as rewriting one).
    def pickle_store() -> None:
        with open(f"{pkl}.{next(counter)}", "wb") as f:
            pickle.dump(df, f, protocol=5)

    def pickle_load() -> Any:
        with open(pkl, "rb") as f:
            return pickle.load(f)

    stores = {"ours": lambda: ours(next(counter)), "jl": lambda: jl(next(counter)),
              "pickle": pickle_store}
    loads = {"ours": lambda: ours(0), "jl": lambda: jl(0), "pickle": pickle_load}
    try:
        import pyarrow  # noqa: F401

        stores["parquet"] = lambda: df.to_parquet(f"{parquet}.{next(counter)}")
        loads["parquet"] = lambda: pd.read_parquet(parquet)
    except ImportError:
        pass
    ours(0), jl(0)  # what the loads read: key 0, and the files
    with open(pkl, "wb") as f:
        pickle.dump(df, f, protocol=5)
    if "parquet" in stores:
        df.to_parquet(parquet)
    check = ours(0)
    assert check.equals(df) and check.dtypes.equals(df.dtypes), "frame does not round-trip"
    del check
    ld = _measure(loads, rounds, touch=nbytes)
    s = _measure(stores, rounds, touch=nbytes,
                 before=lambda: _forget(ours, jl, f"{pkl}.*", f"{parquet}.*"))
    what = f"pandas {n}x10 ({nbytes >> 20} MB)"
    rows = [
        _row(f"store {what} vs joblib", s["ours"], s["jl"], "joblib.Memory", "<= 0.9x", 0.9,
             "ms"),
        _row(f"store {what} vs pickle-5", s["ours"], s["pickle"], "pickle.dump, protocol 5",
             "<= 1.5x", 1.5, "ms"),
        _row(f"load {what} vs joblib", ld["ours"], ld["jl"], "joblib.Memory", "<= 0.8x", 0.8,
             "ms"),
        _row(f"load {what} vs pickle-5", ld["ours"], ld["pickle"], "pickle.load", "<= 1.5x", 1.5,
             "ms"),
    ]
    if "parquet" in s:
        rows.append(_row(f"store {what} vs parquet", s["ours"], s["parquet"],
                         "DataFrame.to_parquet", "(info)", None, "ms"))
        rows.append(_row(f"load {what} vs parquet", ld["ours"], ld["parquet"],
                         "pandas.read_parquet", "(info)", None, "ms"))
    _state.VALUE = None
    return rows


def bench_compress(tmp: str, quick: bool) -> list[Row]:
    import numpy as np

    size = 2**21 if quick else 2**24
    rounds = 3 if quick else 5
    # Compressible, array-like data: a smooth signal rounded to 3 decimals.
    data = np.round(np.sin(np.arange(size) / 1000.0), 3)
    funcs = {comp: fncache.memoize(store=os.path.join(tmp, f"comp-{comp}"), compress=comp)(
        lambda n, _d=data: _d * n) for comp in (None, "lz4", "zstd")}
    counter = itertools.count(2)
    for f in funcs.values():
        f(1)
    stores = _measure({c: lambda f=f: f(next(counter)) for c, f in funcs.items()}, rounds,
                      touch=data.nbytes)
    loads = _measure({c: lambda f=f: f(1) for c, f in funcs.items()}, rounds, touch=data.nbytes)
    rows = []
    for comp, f in funcs.items():
        smaller = data.nbytes * (rounds + 1) / (f.store.volume() or 1)
        rows.append(_row(f"compress={comp}: store {data.nbytes >> 20} MB", stores[comp],
                         stores[None], "compress=None", f"(info: {smaller:.1f}x smaller)", None,
                         "ms"))
        rows.append(_row(f"compress={comp}: load", loads[comp], loads[None], "compress=None",
                         "(info)", None, "ms"))
    return rows


# -- import ------------------------------------------------------------------------------------

def bench_import(tmp: str, quick: bool) -> list[Row]:
    code = ("import sys, time; t = time.perf_counter(); import fncache; "
            "d = time.perf_counter() - t; "
            "print(d, [m for m in ('numpy', 'pandas', 'redis', 's3fs') if m in sys.modules])")
    times, heavy = [], []
    for _ in range(3 if quick else 7):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.split(" ", 1)
        times.append(float(out[0]))
        heavy = json.loads(out[1].replace("'", '"'))
    row = _row("import fncache", _stat(times), _const(0.150), "150 ms",
               "< 150 ms, no numpy/pandas/redis/s3fs", 1.0, "ms")
    row["met"] = row["met"] and not heavy
    return [row]


# -- driver -------------------------------------------------------------------------------------

def _compile_bytecode() -> None:
    """Write fncache's bytecode files, as ``pip install`` does for an installed package, so that the
    rows run in new processes (``import fncache``, the new-process pipeline fit) measure an import,
    not a compile. An editable checkout run with ``PYTHONDONTWRITEBYTECODE`` (or never imported
    before) has none: every new process would compile all of fncache's modules again, about 100 ms
    here, while the libraries it is compared with were compiled when they were installed."""
    import compileall

    package = os.path.dirname(fncache.__file__)
    if not compileall.compile_dir(package, quiet=1):
        print(f"note: could not write bytecode under {package}: new-process rows include "
              "compiling fncache", file=sys.stderr)


def _print(rows: list[Row]) -> None:
    head = (f"{'benchmark':42} {'fncache median [min-max]':>28} {'baseline median [min-max]':>28}"
            f" {'ratio':>6}  {'target':<15} met")
    print(head)
    print("-" * len(head))
    for r in rows:
        u = r["unit"]

        def cell(median: float, span: list[float], u: str = u) -> str:
            return f"{median:.4g}{u} [{span[0]:.3g}-{span[1]:.3g}]"

        met = "(info)" if r["target"].startswith("(") else "met" if r["met"] else "MISSED"
        print(f"{r['name']:42} {cell(r['ours'], r['ours_range']):>28} "
              f"{cell(r['baseline'], r['baseline_range']):>28} {r['ratio']:5.2f}x  "
              f"{r['target']:<15} {met}   [{r['baseline_name']}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument("--only", action="append", choices=NAMES, help="run only these")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    parser.add_argument("--scale", type=int, default=None,
                        help="entries for the scale benchmark (default 20000, quick 5000)")
    args = parser.parse_args(argv)
    _compile_bytecode()
    entries = args.scale or (5000 if args.quick else 20000)
    rows: list[Row] = []
    tmp = tempfile.mkdtemp(prefix="fncache-bench-", dir=os.environ.get("FNCACHE_BENCH_DIR"))
    try:
        for name in args.only or [n for n in NAMES if n != "shared-scale"]:
            t = time.perf_counter()
            where = os.path.join(tmp, name)
            os.mkdir(where)
            if name == "scale":
                from benchmarks._scale import bench_scale

                new = bench_scale(where, args.quick, entries, measure=_measure, row=_row,
                                  const=_const)
            elif name == "listing":
                from benchmarks._listing import bench_listing

                new = bench_listing(where, args.quick, row=_row, stat=_stat, const=_const)
            elif name == "shared-scale":
                from benchmarks._shared_scale import bench_shared_scale

                new = bench_shared_scale(where, args.quick, args.scale or 100_000, row=_row,
                                         stat=_stat, const=_const)
            elif name == "lazy":
                from benchmarks._lazy import bench_lazy

                new = bench_lazy(where, args.quick, measure=_measure, row=_row, stat=_stat)
            elif name in ("global", "pipeline", "peak"):
                from benchmarks import _round3

                kit = {"global": {"frame": _frame, "forget": _forget}, "pipeline": {"stat": _stat},
                       "peak": {"const": _const}}[name]
                measure = {"measure": _measure} if name != "peak" else {}
                new = getattr(_round3, f"bench_{name}")(where, args.quick, row=_row, **measure,
                                                         **kit)
            else:
                new = globals()[f"bench_{name}"](where, args.quick)
            # Removed at once: files left for the kernel to write back would slow the next ones.
            shutil.rmtree(where, ignore_errors=True)
            print(f"# {name}: {time.perf_counter() - t:.1f}s", file=sys.stderr)
            rows += new
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _print(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": sys.version, "quick": args.quick, "rows": rows}, f, indent=1)
    return 0 if all(r["met"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
