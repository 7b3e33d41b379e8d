"""The shared-scale benchmark: ``summary()`` (what ``fncache info`` and ``ls`` read) against
``summarize(listing())`` on Redis and S3 stores of many entries (100,000 by default).

The stores run on loopback, started as the tests start them (``tests/servers.py``), and are filled
with the store's own ``add`` (entries of 100 bytes over 20 functions, from 16 threads, as a team's
workers write them); a tenth of them carry usage records. Redis answers ``summary()`` from the
totals its index keeps and one counted ``SCAN``; S3 keeps no totals (it has no transaction to keep
them in), and answers from one listing (the values) and its cached listing of the metadata names
(``prefix/s/metas``) instead of two listings. Each line also checks that the two answers
are equal. ``--scale N`` sets the number of entries (the same option as the disk scale benchmark);
``$FNCACHE_BENCH_SHARED`` (``redis``, ``s3`` or ``redis,s3``, the default) the stores, and
``$FNCACHE_BENCH_S3_SCALE`` a smaller number of entries for S3, whose fill takes far longer.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Callable
from typing import Any

from benchmarks._listing import _servers
from fncache.stores import Store, open_store
from fncache.stores._base import Use, summarize

_FUNCTIONS = 20
_THREADS = 16


def _fill(store: Store, n: int) -> float:
    """Seconds to add ``n`` entries of 100 bytes over the functions, from the threads."""
    keys = [os.urandom(16).hex() for _ in range(n)]
    value = bytes(100)

    def part(start: int) -> None:
        for i in range(start, n, _THREADS):
            store.add(keys[i], value, {"function": f"benchmarks.shared:f{i % _FUNCTIONS}"})

    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(_THREADS) as pool:
        list(pool.map(part, range(_THREADS)))
    took = time.perf_counter() - t
    uses = [Use(k, f"benchmarks.shared:f{i % _FUNCTIONS}", time.time(), 1)
            for i, k in enumerate(keys[: n // 10])]
    for i in range(0, len(uses), 1000):
        store.record_use(uses[i : i + 1000])
    return took


def bench_shared_scale(tmp: str, quick: bool, entries: int, *, row: Callable[..., Any],
                       stat: Callable[..., Any], const: Callable[[float], Any]) -> list[Any]:
    rounds = 3 if quick else 5
    rows = []
    wanted = (os.environ.get("FNCACHE_BENCH_SHARED") or "redis,s3").split(",")
    with _servers(tmp) as urls:
        for kind, url in urls.items():
            if kind not in wanted:
                continue
            store = open_store(url)
            n = int(os.environ.get("FNCACHE_BENCH_S3_SCALE") or entries) if kind == "s3" \
                else entries
            wrote = _fill(store, n)
            print(f"# shared-scale: {n} entries written to {kind} in {wrote:.1f}s "
                  f"({wrote / n * 1e6:.0f} us/entry)")
            store.summary()  # the first may rebuild (usage recorded after the fill): not timed
            fast, slow = [], []
            for _ in range(rounds):
                t = time.perf_counter()
                ours = store.summary()
                fast.append(time.perf_counter() - t)
                t = time.perf_counter()
                listed = summarize(store.listing())
                slow.append(time.perf_counter() - t)
                assert ours == listed, f"{kind}: summary() differs from the listing"
            assert sum(r.entries for r in ours) == n, (kind, ours)
            rows.append(row(f"summary() of {n} entries ({kind})", stat(fast), stat(slow),
                            "summarize(listing())", "<= 0.1x listing" if kind == "redis"
                            else "(information: one listing of two)",
                            0.1 if kind == "redis" else None, "ms"))
            store.clear()
            store.close()
    return rows
