"""The scale benchmark: a disk store of N entries (``--scale N``; 1,000,000 for the full run).

Measured, side by side in one run (interleaved, their order rotated, as every comparison here):
the fill rate through ``memoize`` in a store of N entries and in one of 1,000 (growing by 30,000
as it is measured, which several of SQLite's own checkpoints then fall into), the hit in each,
and a miss among nine hits in each; ``fncache info``, ``ls``, ``clear --dry-run`` and
``prune --dry-run --max-size`` within the store's size (run in this process through
``fncache.cli.main``: no interpreter start counted); in fresh processes, with their peak memory,
``prune --dry-run`` to half the store's size, a ``prune`` that removes a tenth of the bytes,
and ``fncache clear --yes`` of the rest; and, for what SQLite itself adds with size, a plain
``diskcache.Cache`` of N rows with random keys against one of 1,000 (a ``get`` and ``set`` of a
new key).

Filling a million entries through ``memoize`` takes over two minutes of a shared machine, so all but
the first and last few thousand are written by the store's own write path in batches (its insert
statement and summary update, 10,000 rows per transaction), with
metadata shaped as ``memoize`` writes it. The hits are of entries ``memoize`` wrote.

Targets: ``info`` and ``ls`` at most 1 s at N; the hit at N at most 1.2x the hit at 1,000; the fill
rate at N within 1.2x of the rate at 1,000; ``clear`` of N at most 60 s with memory flat (peak of
the clearing process under 200 MB resident, under 100 MB of its own: the rest is the database's
pages SQLite maps).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import fncache
from benchmarks import _funcs

_BULK = 10_000
_BLOCK = 2_000
# Misses per store in the fill rows, in 5 timed blocks: each block spans at least two of SQLite's
# own checkpoints (the backstop at 16,000 log pages, about 2,700 writes, that a store's checkpoint
# thread leaves to a writer that never pauses), so every block carries its share of them. With
# blocks of 2,000 a block held one backstop or none, and the median of five picked between the two:
# 1.12-1.27x from one run to the next of the same stores, against 1.17-1.18x with blocks of 6,000.
_FILL = 30_000
# Misses in the rows of a miss among hits (five blocks of cycles of one miss and nine hits).
_MIXED = 1_500


def _fill(f: Callable[..., Any], start: int, stop: int) -> float:
    """Seconds per entry to fill ``f``'s entries ``start`` to ``stop`` through memoize."""
    t = time.perf_counter()
    for i in range(start, stop):
        f(i, "x")
    return (time.perf_counter() - t) / max(stop - start, 1)


def _cycle(f: Callable[..., Any], new: Any, hot: Any) -> None:
    """One miss (a new key) and nine hits of memoized keys."""
    f(next(new), "x")
    for _ in range(9):
        f(next(hot), "x")


def _bulk_fill(store: Any, n: int, function: str) -> float:
    """Write ``n`` entries by the store's insert statement and summary update (``executemany``,
    ``_BULK`` per transaction); seconds."""
    import fncache.stores._disksql as q
    from fncache.stores._disksummary import add_own

    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    value = sqlite3.Binary(b"\0" * 64)
    t = time.perf_counter()
    done = 0
    while done < n:
        batch = min(_BULK, n - done)
        now = time.time()
        fields = {"created": now, "function": function, "python": python, "size": 64}
        meta = json.dumps(fields, separators=(",", ":")).encode()
        rows = [(uuid.uuid4().hex, now, None, now, function, 0, q.MODE_RAW, None, value, meta)
                for _ in range(batch)]
        with store.db.transact() as (sql, _):
            store.db.cache._con.executemany(q.INSERT_ROW, rows)
            if store.db.summary_kept:
                for _ in range(batch):  # each row as its insert adds it (rowid: unused here)
                    add_own(sql, fields, meta, len(value), now, 0)
        done += batch
    return time.perf_counter() - t


def _command(*args: str) -> float:
    """Seconds ``fncache ARGS`` takes in this process (its output discarded)."""
    from fncache.cli.main import main

    out = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    elapsed = time.perf_counter() - t
    assert code == 0, (args, out.getvalue()[-500:])
    return elapsed


# A command's process (clear, prune) reports its own peaks: of its resident memory (Linux: VmHWM, which starts
# afresh at exec; the children's ru_maxrss counts the parent's memory the child shared before its
# exec), and of the part of it that is the process's own (RssAnon, sampled every 20 ms): the rest is
# pages of the database file that SQLite maps, which the kernel can drop at any time.
_PROCESS = """
import resource, sys, threading, time
from fncache.cli.main import main

def status(name):
    try:
        with open("/proc/self/status") as f:
            return int([l for l in f if l.startswith(name)][0].split()[1]) / 1024
    except (OSError, IndexError):
        return None

anon = [0.0]
done = threading.Event()

def sample():
    while not done.is_set():
        anon[0] = max(anon[0], status("RssAnon:") or 0.0)
        time.sleep(0.02)

threading.Thread(target=sample, daemon=True).start()
code = main(sys.argv[1:])
done.set()
peak = status("VmHWM:") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(peak, max(anon[0], status("RssAnon:") or 0.0), file=sys.stderr)
sys.exit(code)
"""


def _in_a_process(*args: str) -> tuple[float, float, float]:
    """(seconds, peak resident MB, peak anonymous MB) of ``fncache ARGS`` in a fresh process."""
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _PROCESS, *args], check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, anon = done.stderr.strip().splitlines()[-1].split()
    return time.perf_counter() - t, float(peak), float(anon)


def _diskcache_floor(tmp: str, entries: int, measure: Any) -> dict[str, Any]:
    """What plain diskcache pays for the same growth: a ``get`` and ``set`` of a new random key
    (hex, as fncache's keys are hashes) in a ``diskcache.Cache`` of ``entries`` rows and in one of
    1,000, interleaved. Its key index is as random as fncache's, so what grows here (one scattered
    leaf page per insert, more pages for each checkpoint to copy) is SQLite's, not fncache's."""
    import diskcache

    big = diskcache.Cache(os.path.join(tmp, "floor-big"), eviction_policy="none")
    small = diskcache.Cache(os.path.join(tmp, "floor-small"), eviction_policy="none")
    value = sqlite3.Binary(b"\0" * 64)
    for cache, n in ((big, entries), (small, 1000)):
        done = 0
        while done < n:  # diskcache's own row, written in bulk as the store's padding is
            t = time.time()
            rows = [(uuid.uuid4().hex, 1, t, None, t, 0, None, 0, 1, None, value)
                    for _ in range(min(_BULK, n - done))]
            with cache.transact():
                cache._con.executemany(
                    "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count,"
                    " tag, size, mode, filename, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            done += len(rows)
    os.sync()

    def one(cache: Any) -> None:
        key = uuid.uuid4().hex
        cache.get(key)
        cache.set(key, b"\0" * 64)

    try:
        return measure({"big": lambda: one(big), "small": lambda: one(small)}, 5, number=_BLOCK // 5)
    finally:
        big.close()
        small.close()


def bench_scale(tmp: str, quick: bool, entries: int, *, measure: Any, row: Any, const: Any) -> list[Any]:
    from fncache.stores.disk import DiskStore

    directory = os.path.join(tmp, "scale")
    store = DiskStore(directory)
    small_store = DiskStore(os.path.join(tmp, "scale-small"))
    f = fncache.memoize(store=store)(_funcs.small)
    small = fncache.memoize(store=small_store)(_funcs.small)
    _fill(f, 0, 1000)
    _fill(small, 0, 1000)
    padding = max(entries - 1000 - _FILL - _BLOCK - _MIXED, 0)
    bulk = _bulk_fill(store, padding, "benchmarks._funcs:padding")
    print(f"# scale: {padding} of the {entries} entries written by the store's insert in batches "
          f"of {_BULK} ({bulk:.1f} s, {bulk / max(padding, 1) * 1e6:.1f} us/entry); the rest "
          "through memoize", file=sys.stderr)
    os.sync()  # the bulk fill's dirty pages are written back before, not during, the timed steps
    # The large store and a small one side by side, interleaved and rotated as every comparison
    # here: new entries through memoize (the small store grows from 1,000 to 1,000 + _FILL), then
    # hits on the entries memoize wrote.
    rounds, number = 5, (_BLOCK if quick else _FILL) // 5
    grown = 1000 + rounds * number
    big_next, small_next = itertools.count(1000), itertools.count(1000)
    fills = measure({"big": lambda: f(next(big_next), "x"),
                     "small": lambda: small(next(small_next), "x")}, rounds, number=number)
    start = next(big_next)
    _fill(f, start, start + _BLOCK)  # more memoized entries to hit at N
    memoized = start + _BLOCK
    rng = random.Random(0)
    big_keys = itertools.cycle([rng.randrange(memoized) for _ in range(3000)])
    small_keys = itertools.cycle([rng.randrange(1000) for _ in range(3000)])
    hits = measure({"big": lambda: f(next(big_keys), "x"),
                    "small": lambda: small(next(small_keys), "x")}, 5, number=3000)
    hit_big, hit_small = hits["big"], hits["small"]
    # A miss among hits, as a sweep that mostly hits runs: each write drops the readers' page
    # caches, and the hits after it read their pages again. Per cycle of one miss and nine hits.
    big_new, small_new = itertools.count(10**9), itertools.count(10**9)
    mixed = measure({"big": lambda: _cycle(f, big_new, big_keys),
                     "small": lambda: _cycle(small, small_new, small_keys)}, 5, number=_MIXED // 5)
    total = len(store)
    fill_big, fill_small = fills["big"], fills["small"]
    small_store.close()
    half = max(sum(s.size for s in store.summary()) // 2, 1)  # the entries' bytes, halved
    info = _command("info", "--dir", directory, "--json")
    ls = _command("ls", "--dir", directory, "--json")
    dry = _command("clear", "--dir", directory, "--dry-run", "--json")
    within = _command("prune", "--dir", directory, "--max-size", f"{4 * half}B", "--dry-run",
                      "--json")
    # Pruning in a process of its own, as a user runs it: planning half the store away (the
    # plan ranks every entry) and removing a tenth of it (a batch of keys per transaction).
    prune, prune_mb, prune_anon = _in_a_process("prune", "--dir", directory, "--max-size",
                                                f"{half}B", "--dry-run", "--json")
    pruned_s, _, _ = _in_a_process("prune", "--dir", directory, "--max-size",
                                   f"{2 * half - 2 * half // 10}B", "--yes")
    pruned = total - len(store)
    store.close()
    cleared = total - pruned
    clear, peak_mb, anon_mb = _in_a_process("clear", "--dir", directory, "--yes")
    left = len(DiskStore(directory))
    assert left == 0, left
    floor = _diskcache_floor(tmp, total, measure)
    n = f"{total:,}"
    return [
        row(f"hit at {n} entries vs at 1,000", hit_big, hit_small, "hit at 1,000 entries",
            "<= 1.2x", 1.2),
        row(f"fill (memoize) at {n} vs at 1,000-{grown:,}", fill_big, fill_small,
            f"fill at 1,000-{grown:,} entries", "<= 1.2x", 1.2, "us"),
        row(f"1 miss + 9 hits at {n} vs at 1,000", mixed["big"], mixed["small"],
            "the same at 1,000 entries", "(info)", None, "us"),
        row(f"diskcache get+set, random keys, at {n} vs at 1,000", floor["big"], floor["small"],
            "diskcache at 1,000 rows", "(info)", None, "us"),
        row(f"fncache info at {n}", const(info), const(1.0), "1 s", "<= 1 s", 1.0, "s"),
        row(f"fncache ls at {n}", const(ls), const(1.0), "1 s", "<= 1 s", 1.0, "s"),
        row(f"fncache clear --dry-run at {n}", const(dry), const(1.0), "1 s", "<= 1 s", 1.0, "s"),
        row(f"prune --dry-run --max-size at {n}, within it", const(within), const(1.0), "1 s",
            "<= 1 s", 1.0, "s"),
        row(f"prune --dry-run --max-size at {n}, half to go (process)", const(prune),
            const(1.0), "1 s", "(info)", None, "s"),
        row(f"prune --dry-run at {n}, half to go: peak memory / own", const(prune_mb),
            const(prune_anon), "its own memory", "(info)", None, "MB"),
        row(f"fncache prune removing {pruned:,} of {n} (process)", const(pruned_s), const(prune),
            "its plan alone: the dry run above", "(info)", None, "s"),
        row(f"fncache clear of {cleared:,} (process)", const(clear), const(60.0), "60 s",
            "<= 60 s", 1.0, "s"),
        row(f"fncache clear of {cleared:,}: peak memory", const(peak_mb), const(200.0), "200 MB",
            "<= 200 MB", 1.0, "MB"),
        row(f"fncache clear of {cleared:,}: peak own memory", const(anon_mb), const(100.0),
            "100 MB", "<= 100 MB", 1.0, "MB"),
    ]
