"""The lazy-reader benchmark: a warm call on a 200 MB file against a ``stat`` and a full read.

A memoized function is called with a polars ``scan_parquet`` of the file and with
``fncache.file(path)``; both hit, and their keys take the file's digest from the table of
:mod:`fncache.values.digests` (one ``stat``) in the same process. Baselines: ``os.stat`` of the file and
a full read (the bytes digested with xxh3). Each timing is a whole hit (the key and one store read);
the same-process scan rows also build the scan, which reads the file's footer. The fresh-process
rows time the first call on the file in a new process (after calls on a small file have opened the
store, fingerprinted the function and serialized a first polars plan, 30 ms whatever it reads): the
digest comes from the record kept in the store (:mod:`fncache._digest_records`), a ``stat`` and one
store read. The file is used once it is more
than two seconds old: a younger file's digest is not kept (it could be rewritten unseen within the
timestamp granularity).
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
    fresh = {kind: [] for kind in ("file", "scan")}
    code = ("import sys, time, fncache, polars as pl\n"
            "@fncache.memoize(store=sys.argv[2])\n"
            "def rows(data): return 0\n"
            # Open the store, fingerprint the function, warm polars' plan serialization up (30 ms
            # on the first plan of a process, whatever it reads) on a small file.
            "rows(fncache.file(sys.argv[3])); rows(pl.scan_parquet(sys.argv[3]))\n"
            "value = fncache.file(sys.argv[1]) if sys.argv[4] == 'file' else pl.scan_parquet(sys.argv[1])\n"
            "t = time.perf_counter(); rows(value); print(time.perf_counter() - t)")
    small = os.path.join(tmp, "small.parquet")
    pl.DataFrame({"x": [1.0]}).write_parquet(small)
    for _ in range(3 if quick else 5):
        for kind, times in fresh.items():
            out = subprocess.run([sys.executable, "-c", code, path, os.path.join(tmp, "store"),
                                  small, kind], capture_output=True, text=True, check=True)
            times.append(float(out.stdout))
    label = f"{size_mb:.0f} MB"
    out_rows = []
    for kind, name in (("scan", "scan_parquet"), ("file", "fncache.file")):
        out_rows += [
            row(f"warm {name} {label} vs full read", t[kind], t["read"], "read + xxh3",
                "<= 0.05x", 0.05, "ms"),
            row(f"warm {name} {label} vs stat", t[kind], t["stat"], "os.stat", "(info)", None,
                "ms"),
            row(f"fresh process warm {name} {label} vs full read", stat(fresh[kind]), t["read"],
                "read + xxh3", "<= 0.05x", 0.05, "ms"),
            row(f"fresh process warm {name} {label} vs stat", stat(fresh[kind]), t["stat"],
                "os.stat", "(info)", None, "ms"),
        ]
    return out_rows
