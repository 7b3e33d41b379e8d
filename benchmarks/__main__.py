"""``python -m benchmarks``: fncache side by side with joblib.Memory, diskcache and lru_cache.

Every measurement is a median over interleaved rounds (the machines this runs on are shared and
noisy); each line names a target and whether this run met it. Options: ``--quick`` (smaller sizes,
fewer rounds), ``--only NAME`` (repeatable; names below), ``--json FILE``, ``--scale N`` (entries
for the scale benchmark; 1000000 for the full run, which takes several minutes).

Benchmarks: hit, miss, hash, large, compress, scale, import.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import fncache
from benchmarks import _funcs

NAMES = ("hit", "miss", "hash", "large", "compress", "scale", "import")
Row = dict[str, Any]


def small(a: int, b: str) -> int:  # the __main__ twin of _funcs.small
    return a + len(b)


def _median_per_call(fn: Callable[[], Any], number: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return statistics.median(times)


def _interleaved(fns: dict[str, Callable[[], Any]], number: int, rounds: int) -> dict[str, float]:
    """Median seconds per call of each function, rounds interleaved so noise hits all alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t = time.perf_counter()
            for _ in range(number):
                fn()
            times[name].append((time.perf_counter() - t) / number)
    return {k: statistics.median(v) for k, v in times.items()}


def _once(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _row(name: str, ours: float, base: float, base_name: str, target: str, ok: bool,
         unit: str = "us") -> Row:
    scale = {"us": 1e6, "ms": 1e3, "s": 1.0}[unit]
    return {"name": name, "ours": ours * scale, "baseline": base * scale, "baseline_name": base_name,
            "unit": unit, "ratio": ours / base if base else float("nan"), "target": target,
            "met": ok}


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
        t = _interleaved({"ours": lambda f=ours: f(1, "x"), "dc": lambda f=theirs: f(1, "x"),
                          "lru": lambda f=lru: f(1, "x")}, number, rounds)
        t["jl"] = _median_per_call(lambda f=jl: f(1, "x"), max(number // 10, 30),
                                   max(rounds // 2, 3))
        rows.append(_row(f"hit {where} vs diskcache", t["ours"], t["dc"], "diskcache.memoize",
                         "<= 0.8x", t["ours"] <= 0.8 * t["dc"]))
        rows.append(_row(f"hit {where} vs joblib", t["ours"], t["jl"], "joblib.Memory",
                         "<= 0.2x", t["ours"] * 5 <= t["jl"]))
        rows.append(_row(f"hit {where} vs lru_cache", t["ours"], t["lru"], "functools.lru_cache",
                         "(info)", True))
        dc.close()
    return rows


def bench_miss(tmp: str, quick: bool) -> list[Row]:
    import diskcache

    n, rounds = (300, 5) if quick else (1000, 9)
    ours = fncache.memoize(store=os.path.join(tmp, "miss-fn"))(_funcs.small)
    dc = diskcache.Cache(os.path.join(tmp, "miss-dc"))
    theirs = dc.memoize()(_funcs.small)
    times: dict[str, list[float]] = {"ours": [], "dc": []}
    counter = [0]
    for _ in range(rounds):
        for name, f in (("ours", ours), ("dc", theirs)):
            start = counter[0]
            counter[0] += n
            t = time.perf_counter()
            for i in range(start, start + n):
                f(i, "x")
            times[name].append((time.perf_counter() - t) / n)
    o, d = statistics.median(times["ours"]), statistics.median(times["dc"])
    dc.close()
    return [_row("miss+store small call", o, d, "diskcache.memoize", "<= 1.0x", o <= d)]


# -- argument hashing ---------------------------------------------------------------------------

def bench_hash(tmp: str, quick: bool) -> list[Row]:
    import joblib
    import numpy as np
    import xxhash

    rows = []
    rounds = 3 if quick else 7
    n = 2**22 if quick else 2**25  # 32 MB / 256 MB of float64
    a = np.random.default_rng(0).random(n)
    both = _interleaved({"ours": lambda: fncache.hash(a),
                         "raw": lambda: xxhash.xxh3_128_digest(a)}, 1, rounds)
    ours, raw = both["ours"], both["raw"]
    rows.append(_row(f"hash ndarray {a.nbytes >> 20} MB vs xxh3", ours, raw, "xxh3 zero-copy",
                     "<= 1.11x (>= 0.9x speed)", ours <= raw / 0.9, "ms"))
    jl = _once(lambda: joblib.hash(a), max(rounds // 2, 1))
    rows.append(_row(f"hash ndarray {a.nbytes >> 20} MB vs joblib", ours, jl, "joblib.hash",
                     "<= 0.05x", ours * 20 <= jl, "ms"))
    f = np.asfortranarray(a.reshape(-1, 64))
    t = _interleaved({"ours": lambda: fncache.hash(f),
                      "copy": lambda: xxhash.xxh3_128_digest(np.ascontiguousarray(f))}, 1, rounds)
    rows.append(_row("hash Fortran-order ndarray vs copy+xxh3", t["ours"], t["copy"],
                     "C-order copy, then xxh3", "<= 1.0x (no full copy)", t["ours"] <= t["copy"],
                     "ms"))
    rows.append(_row("hash Fortran-order ndarray vs xxh3", t["ours"], raw, "xxh3 zero-copy (C)",
                     "(info)", True, "ms"))

    import pandas as pd

    rows_n = 10**5 if quick else 10**6
    rng = np.random.default_rng(1)
    df = pd.DataFrame({f"x{i}": rng.random(rows_n) for i in range(6)})
    df["i"] = np.arange(rows_n)
    df["s"] = rng.choice(["a", "bb", "ccc"], rows_n)
    df["c"] = pd.Categorical(rng.choice(["x", "y"], rows_n))
    df["t"] = pd.date_range("2000", periods=rows_n, freq="s")
    ours = _once(lambda: fncache.hash(df), rounds)
    jl = _once(lambda: joblib.hash(df), max(rounds // 2, 1))
    rows.append(_row(f"hash pandas {rows_n}x10 mixed vs joblib", ours, jl, "joblib.hash",
                     "<= 0.125x", ours * 8 <= jl, "ms"))
    numeric = np.ascontiguousarray(df[[f"x{i}" for i in range(6)]].to_numpy())
    raw = _once(lambda: xxhash.xxh3_128_digest(numeric), rounds)
    ours_num = _once(lambda: fncache.hash(df[[f"x{i}" for i in range(6)]]), rounds)
    rows.append(_row(f"hash pandas {rows_n}x6 float vs xxh3", ours_num, raw, "xxh3 zero-copy",
                     "<= 1.67x", ours_num <= raw / 0.6, "ms"))
    try:
        import pyarrow as pa

        table = pa.Table.from_pandas(df)
        ours = _once(lambda: fncache.hash(table), rounds)
        rows.append(_row(f"hash pyarrow {rows_n}x10 vs joblib(pandas)", ours, jl,
                         "joblib.hash(pandas)", "<= 0.125x", ours * 8 <= jl, "ms"))
        rows.append(_bench_arrow_nullable(pa, np, xxhash, rows_n, rounds))
    except ImportError:
        pass
    try:
        import polars as pl

        pdf = pl.from_pandas(df)
        ours = _once(lambda: fncache.hash(pdf), rounds)
        rows.append(_row(f"hash polars {rows_n}x10 vs joblib(pandas)", ours, jl,
                         "joblib.hash(pandas)", "<= 0.125x", ours * 8 <= jl, "ms"))
    except ImportError:
        pass
    try:
        import torch

        t = torch.from_numpy(a)
        times = _interleaved({"ours": lambda: fncache.hash(t),
                              "raw": lambda: xxhash.xxh3_128_digest(a)}, 1, rounds)
        rows.append(_row(f"hash torch {a.nbytes >> 20} MB vs xxh3", times["ours"], times["raw"],
                         "xxh3 zero-copy", "<= 1.11x (>= 0.9x speed)",
                         times["ours"] <= times["raw"] / 0.9, "ms"))
        tt = t.reshape(64, -1).t()  # a transposed tensor: (n, 64) with strides (1, n)
        times = _interleaved({"ours": lambda: fncache.hash(tt),
                              "copy": lambda: xxhash.xxh3_128_digest(tt.contiguous().numpy())},
                             1, rounds)
        rows.append(_row("hash transposed torch tensor vs copy+xxh3", times["ours"], times["copy"],
                         ".contiguous(), then xxh3", "<= 1.0x (no full copy)",
                         times["ours"] <= times["copy"], "ms"))
    except ImportError:
        pass
    return rows


def _bench_arrow_nullable(pa: Any, np: Any, xxhash: Any, n: int, rounds: int) -> Row:
    """A table with nullable int, float, string and bool columns (10% nulls) and one without."""
    rng = np.random.default_rng(2)

    def nulls() -> Any:
        return rng.random(n) < 0.1

    table = pa.table({"i": pa.array(rng.integers(0, 1000, n), mask=nulls()),
                      "f": pa.array(rng.random(n), mask=nulls()),
                      "s": pa.array(rng.choice(["a", "bb", "ccc"], n), mask=nulls()),
                      "b": pa.array(rng.random(n) < 0.5, mask=nulls()), "k": np.arange(n)})
    buffers = [b for col in table.columns for chunk in col.chunks for b in chunk.buffers()
               if b is not None]
    t = _interleaved({"ours": lambda: fncache.hash(table),
                      "raw": lambda: [xxhash.xxh3_128_digest(b) for b in buffers]}, 1, rounds * 2)
    return _row(f"hash pyarrow {n} rows, nullable columns", t["ours"], t["raw"],
                "xxh3 over its buffers", "<= 2.0x", t["ours"] <= 2 * t["raw"], "ms")


# -- results holding large buffers ---------------------------------------------------------------

def bench_large(tmp: str, quick: bool) -> list[Row]:
    import joblib
    import numpy as np

    size = 2**22 if quick else 2**25  # float64: 32 MB / 256 MB
    rounds = 3 if quick else 5
    mb = size * 8 >> 20
    fn = fncache.memoize(store=os.path.join(tmp, "large-fn"))(_funcs.full)
    fm = fncache.memoize(store=os.path.join(tmp, "large-fn"), mmap_mode="r")(_funcs.full)
    jl = joblib.Memory(os.path.join(tmp, "large-jl"), verbose=0).cache(_funcs.full)
    jm = joblib.Memory(os.path.join(tmp, "large-jl"), verbose=0, mmap_mode="r").cache(_funcs.full)
    compute = _once(lambda: _funcs.full(0, size), rounds)
    miss_ours, miss_jl = [], []
    for i in range(rounds):
        t = time.perf_counter()
        fn(i, size)
        miss_ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        jl(i, size)
        miss_jl.append(time.perf_counter() - t)
    store_ours = max(statistics.median(miss_ours) - compute, 1e-9)
    store_jl = max(statistics.median(miss_jl) - compute, 1e-9)
    rows = [_row(f"store {mb} MB array (miss - compute)", store_ours, store_jl, "joblib.Memory",
                 "<= 1.0x", store_ours <= store_jl, "ms")]
    path = os.path.join(tmp, "a.npy")
    np.save(path, _funcs.full(0, size))
    t = _interleaved({"ours": lambda: fn(0, size), "np": lambda: np.load(path),
                      "jl": lambda: jl(0, size)}, 1, rounds)
    rows.append(_row(f"warm load {mb} MB vs np.load", t["ours"], t["np"], "np.load",
                     "<= 1.25x", t["ours"] <= t["np"] / 0.8, "ms"))
    rows.append(_row(f"warm load {mb} MB vs joblib", t["ours"], t["jl"], "joblib.Memory",
                     "(info)", True, "ms"))
    value = fm(0, size)
    assert not value.flags.writeable and np.array_equal(value[:10], np.zeros(10))
    t = _interleaved({"ours": lambda: fm(0, size), "jl": lambda: jm(0, size),
                      "np": lambda: np.load(path, mmap_mode="r")}, 1, rounds * 3)
    rows.append(_row(f"mmap load {mb} MB vs np.load(mmap)", t["ours"], t["np"],
                     "np.load(mmap_mode='r')", "< 2 ms", t["ours"] < 0.002, "ms"))
    rows.append(_row(f"mmap load {mb} MB vs joblib(mmap)", t["ours"], t["jl"],
                     "joblib.Memory(mmap_mode='r')", "(info)", True, "ms"))
    return rows


def bench_compress(tmp: str, quick: bool) -> list[Row]:
    import numpy as np

    size = 2**21 if quick else 2**24
    rounds = 3 if quick else 5
    # Compressible, array-like data: a smooth signal rounded to 3 decimals.
    data = np.round(np.sin(np.arange(size) / 1000.0), 3)
    rows = []
    base_store = base_load = None
    for comp in (None, "lz4", "zstd"):
        f = fncache.memoize(store=os.path.join(tmp, f"comp-{comp}"), compress=comp)(
            lambda n, _d=data: _d * n
        )
        times = []
        for i in range(rounds):
            t = time.perf_counter()
            f(i + 1)
            times.append(time.perf_counter() - t)
        store_t = statistics.median(times)
        load_t = _once(lambda f=f: f(1), rounds)
        stored = f.store.volume() / rounds or 1
        if base_store is None:
            base_store, base_load = store_t, load_t
        rows.append(_row(f"compress={comp}: store {data.nbytes >> 20} MB", store_t, base_store,
                         "compress=None", f"(info: {data.nbytes / stored:.1f}x smaller)", True,
                         "ms"))
        rows.append(_row(f"compress={comp}: load", load_t, base_load, "compress=None", "(info)",
                         True, "ms"))
    return rows


# -- many entries -------------------------------------------------------------------------------

def bench_scale(tmp: str, quick: bool, entries: int) -> list[Row]:
    import diskcache

    from fncache.stores.disk import DiskStore

    def fill(f: Callable[..., Any], start: int, stop: int) -> float:
        t = time.perf_counter()
        for i in range(start, stop):
            f(i, "x")
        return time.perf_counter() - t

    def hit_time(f: Callable[..., Any], n: int) -> float:
        import random

        rng = random.Random(0)
        keys = [rng.randrange(n) for _ in range(3000)]
        times = []
        for _ in range(5):
            t = time.perf_counter()
            for k in keys:
                f(k, "x")
            times.append((time.perf_counter() - t) / len(keys))
        return statistics.median(times)

    store = DiskStore(os.path.join(tmp, "scale-fn"))
    f = fncache.memoize(store=store)(_funcs.small)
    fill(f, 0, 1000)
    hit_small = hit_time(f, 1000)
    sample = min(entries, 20000)
    ours_fill = fill(f, 1000, 1000 + sample) / sample
    dc = diskcache.Cache(os.path.join(tmp, "scale-dc"))
    theirs = dc.memoize()(_funcs.small)
    dc_fill = fill(theirs, 0, sample) / sample
    dc.close()
    shutil.rmtree(os.path.join(tmp, "scale-dc"), ignore_errors=True)
    t = time.perf_counter()
    entries = max(entries, 1000 + sample)
    fill(f, 1000 + sample, entries)
    rest = time.perf_counter() - t
    hit_big = hit_time(f, entries)
    t = time.perf_counter()
    n = store.clear()
    clear_t = time.perf_counter() - t
    assert n == entries, (n, entries)
    return [
        _row(f"hit at {entries} entries vs at 1000", hit_big, hit_small, "hit at 1000 entries",
             "<= 1.5x", hit_big <= 1.5 * hit_small),
        _row(f"fill rate (per entry, first {sample})", ours_fill, dc_fill, "diskcache.memoize",
             "<= 1.0x", ours_fill <= dc_fill),
        _row(f"fill to {entries} (total)", rest + ours_fill * sample, 1.0, "1 s", "(info)",
             True, "s"),
        _row(f"clear {entries} entries", clear_t, 1.0, "1 s", "seconds, not minutes",
             clear_t < 60, "s"),
    ]


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
    t = statistics.median(times)
    return [_row("import fncache", t, 0.150, "150 ms", "< 150 ms, no numpy/pandas/redis/s3fs",
                 t < 0.150 and not heavy, "ms")]


# -- driver -------------------------------------------------------------------------------------

def _print(rows: list[Row]) -> None:
    head = f"{'benchmark':44} {'fncache':>12} {'baseline':>12} {'ratio':>7}  {'target':<22} met"
    print(head)
    print("-" * len(head))
    for r in rows:
        u = r["unit"]
        print(f"{r['name']:44} {r['ours']:10.2f}{u:>2} {r['baseline']:10.2f}{u:>2} "
              f"{r['ratio']:6.2f}x  {r['target']:<22} {'yes' if r['met'] else 'NO'}"
              f"   [{r['baseline_name']}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument("--only", action="append", choices=NAMES, help="run only these")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    parser.add_argument("--scale", type=int, default=None,
                        help="entries for the scale benchmark (default 20000, quick 5000)")
    args = parser.parse_args(argv)
    entries = args.scale or (5000 if args.quick else 20000)
    rows: list[Row] = []
    tmp = tempfile.mkdtemp(prefix="fncache-bench-", dir=os.environ.get("FNCACHE_BENCH_DIR"))
    try:
        for name in args.only or NAMES:
            t = time.perf_counter()
            if name == "scale":
                new = bench_scale(tmp, args.quick, entries)
            else:
                new = globals()[f"bench_{name}"](tmp, args.quick)
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
