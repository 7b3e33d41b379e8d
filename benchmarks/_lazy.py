"""The lazy-reader benchmark: a warm call on a 200 MB file against a ``stat`` and a full read.

A memoized function is called with a polars ``scan_parquet`` of the file and with
``fncache.file(path)``; both hit, and their keys take the file's digest from the table of
:mod:`fncache.values.digests` (one ``stat``) in the same process. Baselines: ``os.stat`` of the file and
a full read (the bytes digested with xxh3). A last row times the first key of the file in a fresh
process, which reads the file: the digest table is not kept in the store yet. The file is used
once it is more than two seconds old: a younger file's digest is not kept (it could be rewritten
unseen within the timestamp granularity).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import fncache


def bench_lazy(tmp: str, quick: bool, *, measure: Callable[..., Any], row: Callable[..., Any],
               stat: Callable[..., Any]) -> list[Any]:
    import numpy as np
    import polars as pl
    import xxhash

    nbytes = (20 if quick else 200) << 20
    path = os.path.join(tmp, "big.parquet")
    values = np.random.default_rng(0).random(nbytes // 8)
    pl.DataFrame({"x": values}).write_parquet(path, compression="uncompressed", statistics=False)
    del values
    while time.time_ns() - os.stat(path).st_ctime_ns <= 2_100_000_000:
        time.sleep(0.1)  # until the digest table keeps the file's record
    size_mb = os.path.getsize(path) / (1 << 20)

    @fncache.memoize(store=os.path.join(tmp, "store"))
    def rows(data: Any) -> int:
        return 0

    def full_read() -> bytes:
        h = xxhash.xxh3_128()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.digest()

    rows(pl.scan_parquet(path))
    rows(fncache.file(path))
    rounds, number = (5, 20) if quick else (9, 100)
    t = measure({"scan": lambda: rows(pl.scan_parquet(path)),
                 "file": lambda: rows(fncache.file(path)),
                 "stat": lambda: os.stat(path)}, rounds, number=number)
    t.update(measure({"read": full_read}, 3 if quick else 5))
    fresh = []
    code = ("import sys, time, fncache; t = time.perf_counter(); "
            "fncache.hash(fncache.file(sys.argv[1])); print(time.perf_counter() - t)")
    for _ in range(3 if quick else 5):
        out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                             check=True)
        fresh.append(float(out.stdout))
    label = f"{size_mb:.0f} MB"
    return [
        row(f"warm scan_parquet {label} vs full read", t["scan"], t["read"], "read + xxh3",
            "<= 0.05x", 0.05, "ms"),
        row(f"warm scan_parquet {label} vs stat", t["scan"], t["stat"], "os.stat", "(info)",
            None, "ms"),
        row(f"warm fncache.file {label} vs full read", t["file"], t["read"], "read + xxh3",
            "<= 0.05x", 0.05, "ms"),
        row(f"warm fncache.file {label} vs stat", t["file"], t["stat"], "os.stat", "(info)",
            None, "ms"),
        row(f"fresh process fncache.file {label} key", stat(fresh), t["read"], "read + xxh3",
            "(info)", None, "ms"),
    ]
