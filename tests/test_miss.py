"""The miss path (fncache._miss): its store decision, and how often a call hashes what it reads."""

from __future__ import annotations

import asyncio
import itertools
import threading

import pytest

import fncache
from fncache._miss import Verdict, verdict


class Table:
    """A mutable global whose hashing is counted (through a registered handler)."""

    def __init__(self, rows: list[int]) -> None:
        self.rows = rows


HASHES: list[int] = []
TABLE = Table([1, 2, 3])


def _token(table: Table) -> object:
    HASHES.append(1)
    return tuple(table.rows)


@pytest.fixture(autouse=True)
def counted():
    fncache.register(Table, _token)
    HASHES.clear()
    yield HASHES
    fncache.unregister(Table)


def _rows() -> list[int]:  # the global is reached through a helper, as in a real pipeline
    return TABLE.rows


def total(x: int) -> int:
    return x + sum(_rows())


async def atotal(x: int) -> int:
    return x + sum(_rows())


def test_a_hit_hashes_a_mutable_global_once(store, counted):
    """A hit hashes each mutable value the code reads once: to check that it did not change."""
    f = fncache.memoize(store=store)(total)
    assert f(1) == 7
    counted.clear()
    assert f(1) == 7
    assert f.cache_info().hits == 1
    assert len(counted) == 1


_SINGLE_THREADED = """
import json, sys
import fncache
import fncache.code.walk

# A value whose first hash took over a millisecond (a loaded machine) is hashed once more to time
# it for the slow-value report: not a hash of the call path, which is what this counts.
fncache.code.walk.SLOW_REHASH = float("inf")


class Table:
    def __init__(self, rows):
        self.rows = rows


HASHES = []
TABLE = Table([1, 2, 3])


def _token(table):
    HASHES.append(1)
    return tuple(table.rows)


fncache.register(Table, _token)


def _rows():
    return TABLE.rows


def total(x):
    return x + sum(_rows())


f = fncache.memoize(store=sys.argv[1])(total)
first = f(1)
on_first = len(HASHES)
HASHES.clear()
second = f(2)
on_miss = len(HASHES)
key = f.key(2)
(entry,) = [e for e in f.store.entries() if e.key == key]
print(json.dumps({"results": [first, second], "first": on_first, "miss": on_miss,
                  "info": list(f.cache_info()),
                  "meta_is_key": entry.meta["components"] == f.call_key(2).components}))
"""


def test_a_miss_hashes_a_mutable_global_once_for_the_key_and_once_after_the_call(tmp_path):
    """A miss in a single-threaded process (a fresh one: a test run leaves threads behind): once
    to make the key (which also serves as the check before the call) and once after it, to see
    whether the call changed it; the stored metadata reuses the key's parts."""
    from tests.helpers import last_json, run_py, write

    script = write(tmp_path / "job.py", _SINGLE_THREADED)
    out = last_json(run_py(script, str(tmp_path / "store")))
    # The first call also computes the fingerprint: hashing the global once is part of that.
    assert out == {"results": [7, 8], "first": 2, "miss": 2, "info": [0, 2, 2, 0],
                   "meta_is_key": True}


def test_with_another_thread_the_check_before_the_call_hashes_once_more(store, counted):
    """With another thread that could rebind or modify the global, the inputs are checked again
    just before the call: once more, no more."""
    f = fncache.memoize(store=store)(total)
    f(1)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        counted.clear()
        assert f(2) == 8
        assert len(counted) == 3
        assert f.cache_info().stores == 2
    finally:
        stop.set()
        other.join()


def test_a_coroutine_miss_hashes_as_a_plain_one(store, counted):
    """The async miss path is the same steps: a key, then one check after the call (and the check
    before it, once more, where threads a test run left behind are running)."""
    from fncache._miss import threads_besides_main

    f = fncache.memoize(store=store)(atotal)
    assert asyncio.run(f(1)) == 7
    counted.clear()
    others = threads_besides_main()
    assert asyncio.run(f(2)) == 8
    assert len(counted) == (2 if others == 0 else 3)
    counted.clear()
    assert asyncio.run(f(2)) == 8
    assert len(counted) == 1


def test_a_global_modified_by_another_thread_during_the_call_is_not_stored(store):
    """The check after the call still sees what another thread did meanwhile."""
    started, done = threading.Event(), threading.Event()

    def slow(x: int) -> int:
        started.set()
        done.wait(60)
        return x + sum(_rows())

    f = fncache.memoize(store=store)(slow)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(f(1)))
    worker.start()
    try:
        assert started.wait(60)
        TABLE.rows.append(4)
        done.set()
        worker.join(60)
        assert f.cache_info().stores == 0
    finally:
        TABLE.rows.remove(4)
        done.set()
        worker.join(60)


def test_a_global_rebound_between_two_calls_still_gives_a_new_key(store):
    """Skipping the second check before the call never reuses a key the inputs no longer give."""
    global TABLE
    f = fncache.memoize(store=store)(total)
    assert f(1) == 7
    saved, TABLE = TABLE, Table([10])
    try:
        assert f(1) == 11
        assert f.cache_info() == (0, 2, 2, 0)
    finally:
        TABLE = saved
    assert f(1) == 7
    assert f.cache_info().hits == 1


@pytest.mark.parametrize("drifted,rebound,changed,alone,private",
                         list(itertools.product((False, True), repeat=5)))
def test_verdict_truth_table(drifted, rebound, changed, alone, private):
    """Store unless the inputs drifted or something changed that may be another thread's doing."""
    got = verdict(drifted=drifted, rebound=rebound, changed=changed, alone=alone, private=private)
    if drifted:
        expected = Verdict.SKIP
    elif not rebound and not changed:
        expected = Verdict.STORE
    elif alone or (not rebound and private):
        expected = Verdict.STATE if changed else Verdict.STORE_AFRESH
    else:
        expected = Verdict.SKIP
    assert got is expected


def test_the_thread_count_it_reads_counts_a_running_thread_until_it_ends():
    """What the one-step check before the call relies on: a started thread counts from before it
    runs Python code until it has ended."""
    from fncache._miss import threads_besides_main

    assert threading.current_thread() is threading.main_thread()
    before = threads_besides_main()  # a test run may leave threads of its own behind
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    assert threads_besides_main() == before + 1
    stop.set()
    other.join()
    assert threads_besides_main() == before
