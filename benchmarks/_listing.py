"""The listing benchmark: ``fncache ls``/``info``/``prune`` on a shared store, against writing.

Listing N entries (:meth:`Store.listing`, what the admin commands read) must cost at most a tenth of
the time it took to write them, against SeaweedFS (S3) and Redis on loopback, started here as the
tests start them (``tests/servers.py``). Writing is ``Store.add`` of N entries of 1 KiB over ten
functions, one after another as a process stores its results; some entries carry usage records, so
the listing reads the usage objects too. The full ``entries()`` (metadata read per entry, what
``explain`` needs) is shown for information.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fncache.stores import Store, open_store
from fncache.stores._base import Use


@contextlib.contextmanager
def _servers(tmp: str) -> Iterator[dict[str, str]]:
    """URLs of a fresh S3 prefix and Redis database, each server stopped on exit; a store whose
    server cannot start is left out."""
    from tests import servers

    with contextlib.ExitStack() as stack:
        urls = {}
        try:
            s3 = stack.enter_context(servers.start_seaweedfs(Path(tmp)))
            os.environ.update(s3.env)
            urls["s3"] = s3.url()
        except BaseException as e:  # pytest's skip is a BaseException: no weed binary
            print(f"# listing: no S3 server ({e})")
        try:
            redis = stack.enter_context(servers.start_redis(Path(tmp)))
            urls["redis"] = redis.url
        except BaseException as e:
            print(f"# listing: no Redis server ({e})")
        yield urls


def _fill(store: Store, n: int) -> float:
    """Seconds to add ``n`` entries of 1 KiB over ten functions, one after another."""
    value = bytes(1024)
    keys = [os.urandom(16).hex() for _ in range(n)]
    start = time.perf_counter()
    for i, key in enumerate(keys):
        store.add(key, value, {"function": f"benchmarks.listing:f{i % 10}"})
    took = time.perf_counter() - start
    store.record_use([Use(k, f"benchmarks.listing:f{i % 10}", time.time(), 1)
                      for i, k in enumerate(keys[: n // 10])])
    return took


def bench_listing(tmp: str, quick: bool, *, row: Callable[..., Any], stat: Callable[..., Any],
                  const: Callable[[float], Any]) -> list[Any]:
    n = 1000 if quick else 2000
    rounds = 3 if quick else 5
    rows = []
    with _servers(tmp) as urls:
        for kind, url in urls.items():
            store = open_store(url)
            wrote = _fill(store, n)
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                listed = sum(1 for _ in store.listing())
                times.append(time.perf_counter() - start)
            assert listed == n, (kind, listed)
            rows.append(row(f"listing {n} entries ({kind})", stat(times), const(wrote),
                            f"write {n}", "<= 0.1x writing", 0.1, "ms"))
            start = time.perf_counter()
            full = sum(1 for _ in store.entries())
            assert full == n
            rows.append(row(f"entries() with metadata, {n} ({kind})",
                            const(time.perf_counter() - start), const(wrote), f"write {n}",
                            "(info)", None, "ms"))
            store.clear()
            store.close()
    return rows
