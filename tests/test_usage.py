"""Usage records and listings for the command line, against real servers and real subprocesses.

Listings (``fncache ls``, ``info``, ``clear``, ``prune``) must read no entry on Redis and S3 (counted
in the command's own process for S3, by the server's command statistics for Redis); hits are
recorded in batches, at most one store write per flush however many hits; ``prune``, ``clear
--unused-for`` and ``ls --sort used`` rank by the recorded uses.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import fncache
from fncache import _usage
from fncache.stores import Store, open_store

from .helpers import last_json, run_py, write

# The command line in a subprocess whose S3 requests are counted by operation (written as JSON to
# $COUNT_FILE at exit): s3fs's one entry point for requests is wrapped before the command runs.
COUNTING_CLI = """
import atexit, collections, json, os, sys
import s3fs

calls = collections.Counter()
call_s3 = s3fs.S3FileSystem._call_s3

async def counted(self, method, *args, **kwargs):
    calls[method] += 1
    return await call_s3(self, method, *args, **kwargs)

s3fs.S3FileSystem._call_s3 = counted

def dump():
    with open(os.environ["COUNT_FILE"], "w") as f:
        json.dump(calls, f)

atexit.register(dump)
from fncache.cli.main import main
sys.exit(main(sys.argv[1:]))
"""

# Memoized functions in a script; ``python script.py STORE fill N`` computes f(0..N-1) and g(0..1),
# ``python script.py STORE hit NAME X...`` calls NAME on each X (hits, recorded at exit).
FUNCS = """
import sys
import fncache

store = sys.argv[1]

@fncache.memoize(store=store)
def f(x):
    return bytes(1000) + bytes([x % 256])

@fncache.memoize(store=store)
def g(x):
    return x

@fncache.memoize(store=store)
def h(x):
    return -x

if sys.argv[2] == "fill":
    for x in range(int(sys.argv[3])):
        f(x)
    g(0), g(1), h(0)
else:
    fn = globals()[sys.argv[3]]
    before = fn.cache_info().hits
    for x in sys.argv[4:]:
        fn(int(x))
    assert fn.cache_info().hits == before + len(sys.argv[4:]), fn.cache_info()
"""

META = {"function": "tests.test_usage:many"}


class Target:
    """A store under test, for the command line (``cli``) and in this process (``store``)."""

    def __init__(self, url: str, env: dict[str, str] | None = None) -> None:
        self.url = url
        self.env = env or {}
        self.store: Store = open_store(url)

    def cli(self, *args: str, counted: Path | None = None) -> Any:
        """``fncache ARGS --store URL --json`` in a subprocess; its JSON output."""
        cmd = [sys.executable, "-m", "fncache"]
        env = dict(os.environ, **self.env)
        if counted is not None:
            script = write(counted.parent / "counting_cli.py", COUNTING_CLI)
            cmd = [sys.executable, str(script)]
            env["COUNT_FILE"] = str(counted)
        proc = subprocess.run([*cmd, *args, "--store", self.url, "--json"], capture_output=True,
                              text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)


@pytest.fixture(params=["disk", "redis", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """Each persistent store in turn (the memory store lives in one process only)."""
    if request.param == "disk":
        return Target(str(tmp_path / "cache"))
    if request.param == "redis":
        server = request.getfixturevalue("redis_factory")()
        return Target(server.url)
    s3 = request.getfixturevalue("s3_env")
    return Target(s3.url(), s3.env)


def _fill(store: Store, n: int, functions: int = 3) -> list[str]:
    """``n`` entries of 100 bytes over ``functions`` functions, added concurrently; their keys."""
    keys = [os.urandom(16).hex() for _ in range(n)]

    def add(i: int) -> None:
        store.add(keys[i], bytes(100), {"function": f"tests.test_usage:f{i % functions}"})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(add, range(n)))
    return keys


def _run(target: Target, tmp_path: Path, *args: str) -> None:
    run_py(write(tmp_path / "funcs.py", FUNCS), target.url, *args, env=target.env)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["redis", "s3"])
def test_listing_commands_read_no_entry(kind, request, tmp_path):
    """`info`, `ls`, `clear --older-than --dry-run` and `prune --max-size --dry-run` over 600
    entries of three functions list them right, and read none of them: no GET of any entry on
    S3 (only listings, one GET per function with usage records and one of the cached metadata
    names, which spares ``ls`` the listing of the names after ``info``), no GET on Redis."""
    if kind == "redis":
        server = request.getfixturevalue("redis_factory")()
        target = Target(server.url)
    else:
        s3 = request.getfixturevalue("s3_env")
        target = Target(s3.url(), s3.env)
    _fill(target.store, 600)
    from fncache.stores._base import Use

    one = [e for e in target.store.listing() if e.function.endswith(":f0")][:5]
    target.store.record_use([Use(e.key, e.function, time.time(), 1) for e in one])
    client = server.client() if kind == "redis" else None
    commands = [("info",), ("ls",), ("clear", "--older-than", "1h", "--dry-run"),
                ("prune", "--max-size", "30000B", "--dry-run")]
    outputs = []
    for i, command in enumerate(commands):
        counts = tmp_path / f"counts-{i}.json"
        if client is not None:
            client.config_resetstat()
        outputs.append(target.cli(*command, counted=counts if kind == "s3" else None))
        if client is not None:
            stats = client.info("commandstats")
            assert "cmdstat_get" not in stats and "cmdstat_mget" not in stats, stats
            per_entry = sum(v["calls"] for k, v in stats.items()
                            if k in ("cmdstat_strlen", "cmdstat_getrange"))
            assert per_entry <= 2 * 600, stats  # a length and one byte: no value, no record
        else:
            calls = json.loads(counts.read_text())
            # The one function with usage records, and the cached metadata names (info, ls).
            assert calls.get("get_object", 0) <= 2, (command, calls)
            assert calls.get("head_object", 0) == 0, calls
            assert calls.get("list_objects_v2", 0) <= 6, calls
            if command == ("ls",):  # after info cached the names: values and usage objects only
                assert calls.get("list_objects_v2", 0) == 2, calls
    info, rows, dry, plan = outputs
    assert (info["entries"], info["functions"], info["bytes"]) == (600, 3, 60_000)
    assert sorted(r["entries"] for r in rows) == [200, 200, 200]
    assert dry["would_remove"] == 0
    assert plan["would_remove"] == 300


@pytest.mark.slow
def test_prune_max_size_keeps_recently_used_entries(target, tmp_path):
    """`prune --max-size` removes the least recently used entries first: entries hit in a later
    process survive, however old they are, and entries never used go."""
    _run(target, tmp_path, "fill", "8")
    time.sleep(1.1)
    _run(target, tmp_path, "hit", "f", "2", "5")
    f_size = {e.key: e.size for e in target.store.listing()}
    keep = sorted(f_size.values())[-1] * 2  # room for two f entries
    out = target.cli("prune", "--max-size", f"{keep}B", "--yes")
    assert out["removed"] == len(f_size) - 2
    left = list(target.store.listing())
    assert len(left) == 2 and all(e.function.endswith(":f") and e.uses == 1 for e in left)
    _run(target, tmp_path, "hit", "f", "2", "5")  # both still hit


@pytest.mark.slow
def test_clear_unused_for_removes_only_idle_entries(target, tmp_path):
    """`clear --unused-for AGE` removes entries neither created nor used within AGE and keeps those
    used since. The gap between the two groups scales with how long a process takes here, and AGE
    falls in the middle of it, so a loaded machine moves both sides alike."""
    start = time.monotonic()
    _run(target, tmp_path, "fill", "3")
    gap = 8 + 4 * (time.monotonic() - start)
    time.sleep(gap)
    used = time.monotonic()
    _run(target, tmp_path, "hit", "f", "1")
    _run(target, tmp_path, "hit", "g", "0")

    def age() -> str:  # older than every use, younger than the fill, by half the gap each way
        return f"{math.ceil(gap / 2 + time.monotonic() - used)}s"

    dry = target.cli("clear", "--unused-for", age(), "--dry-run")
    assert dry["would_remove"] == 4
    assert target.cli("clear", "--unused-for", age(), "--yes")["removed"] == 4
    left = sorted(e.function.rpartition(":")[2] for e in target.store.listing())
    assert left == ["f", "g"]


@pytest.mark.slow
def test_ls_sort_used_orders_functions_by_last_use(target, tmp_path):
    """`ls --sort used` lists the most recently used function first and functions never used
    last, with the number of uses recorded."""
    _run(target, tmp_path, "fill", "2")
    _run(target, tmp_path, "hit", "f", "0", "1", "1")
    time.sleep(1.1)
    _run(target, tmp_path, "hit", "g", "0")
    rows = target.cli("ls", "--sort", "used")
    names = [r["function"].rpartition(":")[2] for r in rows]
    assert names == ["g", "f", "h"]
    assert [r["uses"] for r in rows] == [1, 3, 0]
    assert rows[0]["used"] > rows[1]["used"] and rows[2]["used"] is None


def _count_calls(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wrap ``store.record_use`` (on the instance) to count its calls; the list of batch sizes."""
    calls: list[int] = []
    real: Callable[..., Any] = store.record_use

    def counted(uses: Any) -> None:
        calls.append(sum(u.times for u in uses))
        real(uses)

    monkeypatch.setattr(store, "record_use", counted)
    return calls


@pytest.mark.parametrize("kind", ["memory", "disk", "redis", "s3"])
def test_hits_are_recorded_in_one_batched_write(kind, request, tmp_path, monkeypatch):
    """100 quick hits of one entry write nothing while the interval runs, then one usage write
    (counting 100 uses) at the flush, on every store; the entry then lists 100 uses."""
    if kind == "memory":
        url = f"memory://{os.urandom(8).hex()}"
    elif kind == "disk":
        url = str(tmp_path / "cache")
    elif kind == "redis":
        url = request.getfixturevalue("redis_factory")().url
    else:
        url = request.getfixturevalue("s3_env").url()

    def square(x: int) -> int:
        return x * x

    monkeypatch.setattr(_usage, "INTERVAL", 3600.0)  # no flush but the test's, however slow the hits
    f = fncache.memoize(store=url)(square)
    calls = _count_calls(f.store, monkeypatch)
    assert f(3) == 9
    for _ in range(100):
        assert f(3) == 9
    assert f.cache_info().hits == 100 and calls == []
    _usage.flush_all()
    assert calls == [100]
    (entry,) = list(f.store.listing())
    assert entry.uses == 100 and entry.accessed is not None
    assert abs(entry.accessed - time.time()) < 60


def test_flush_waits_for_the_interval(monkeypatch, tmp_path):
    """Hits within the interval are not written; the first hit after it writes the batch once."""
    # The usage log's clock is the test's: the interval passes when the test says so, however
    # long the hits take on a loaded machine.
    now = [time.time()]
    monkeypatch.setattr(_usage, "_clock", lambda: now[0])
    monkeypatch.setattr(_usage, "INTERVAL", 2.0)
    f = fncache.memoize(store=str(tmp_path / "cache"))(lambda x: x + 1)
    calls = _count_calls(f.store, monkeypatch)
    f(1)
    _usage.log_for(f.store).flush()  # start a fresh interval now
    calls.clear()
    for _ in range(50):
        f(1)
    now[0] += 1.9
    f(1)  # still within the interval
    assert calls == []
    now[0] += 0.2
    f(1)
    assert calls == [52]
    f(1)
    assert calls == [52]


def test_a_failed_usage_write_never_fails_a_call(monkeypatch, tmp_path, caplog):
    """A store that fails to write usage records (unreachable, full) costs the records only: the
    hit that triggers the flush returns its value, and the failure is logged at debug level."""
    import logging

    monkeypatch.setattr(_usage, "INTERVAL", 0.0)
    f = fncache.memoize(store=str(tmp_path / "cache"))(lambda x: x * 2)

    def broken(uses: Any) -> None:
        raise fncache.StoreError("disk usage failed: no space left")

    monkeypatch.setattr(f.store, "record_use", broken)
    assert f(4) == 8
    with caplog.at_level(logging.DEBUG, logger="fncache"):
        assert f(4) == 8 and f(4) == 8
    assert f.cache_info().hits == 2 and f.cache_info().errors == 0
    assert any("usage records" in r.getMessage() for r in caplog.records)


def test_prune_needs_a_size_or_an_age(tmp_path):
    """`prune` without `--max-size` or `--older-than` is bad usage (exit 2) and removes nothing."""
    f = fncache.memoize(store=str(tmp_path / "cache"))(lambda x: x)
    f(1)
    proc = subprocess.run([sys.executable, "-m", "fncache", "prune", "--dir", str(tmp_path / "cache"),
                           "--yes"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--max-size" in proc.stderr
    assert len(f.store) == 1


def _flush_in_child() -> None:
    _usage.flush_all()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_writes_its_parents_uses(tmp_path):
    """Uses noted before a fork are written once, by the parent: a child that flushes (or exits)
    has none of them."""
    import multiprocessing

    f = fncache.memoize(store=str(tmp_path / "cache"))(lambda x: x - 1)
    f(1)
    for _ in range(5):
        f(1)
    child = multiprocessing.get_context("fork").Process(target=_flush_in_child)
    child.start()
    child.join(60)
    assert child.exitcode == 0
    (entry,) = list(f.store.listing())
    assert entry.uses is None
    _usage.flush_all()
    (entry,) = list(f.store.listing())
    assert entry.uses == 5


_ONLY_READS = r"""
import json, sys
import fncache
from fncache import _usage

@fncache.memoize(store=sys.argv[1])
def square(x):
    return x * x

for _ in range(5):
    assert square(3) == 9
_usage.flush_all()
print(json.dumps([square.cache_info().hits, square.store.db._cache is None]), flush=True)
"""


def test_a_process_that_only_read_writes_its_uses_without_opening_the_writer(tmp_path):
    """A process whose calls all hit writes its uses at exit (or at a flush) with one update on
    its reader's connection: diskcache's writer, whose opening writes the store's settings, is
    never opened there; the entry then lists those uses."""
    store = str(tmp_path / "cache")
    script = write(tmp_path / "reads.py", _ONLY_READS)
    out = run_py(script, store)  # the entry stored by a first process: a miss, then hits
    assert json.loads(out.stdout) == [4, False]
    out = run_py(script, store)
    assert json.loads(out.stdout) == [5, True]
    (entry,) = list(open_store(store).listing())
    assert entry.uses == 4 + 5


def test_a_busy_database_drops_a_reading_processs_uses_and_stays_readable(tmp_path):
    """While another connection holds the write lock, the uses of a process that only read are
    dropped (the store error is the flush's to log; the hits are unaffected); once the lock is
    free they are written, and the reader goes back to not waiting for locks."""
    import sqlite3

    store = str(tmp_path / "cache")
    f = fncache.memoize(store=store)(lambda x: x + 2)
    f(1)
    _usage.flush_all()
    from fncache.stores.disk import DiskStore

    reader = DiskStore(store)  # another store object on the same files: it only reads
    key = next(iter(reader.listing())).key
    assert reader.get(key) is not None and reader.db._cache is None
    holder = sqlite3.connect(os.path.join(store, "cache.db"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(fncache.StoreError, match="locked"):  # the flush logs it, drops them
            reader.record_use([_usage.Use(key, "m:f", time.time(), 3)])
        assert reader.get(key) is not None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    (entry,) = list(reader.listing())
    assert entry.uses in (None, 0)
    reader.record_use([_usage.Use(key, "m:f", time.time(), 3)])
    (entry,) = list(reader.listing())
    assert entry.uses == 3 and reader.db._cache is None
    assert reader.db._reader().execute("PRAGMA busy_timeout").fetchone() == (0,)


def test_a_failed_usage_update_leaves_no_transaction_open_on_the_reader(tmp_path):
    """An update of usage records that fails midway on the reader's connection is rolled back:
    no transaction stays open there (it would pin the reader's snapshot, and every later read
    would miss what other processes store), so an entry stored afterwards is found."""
    import sqlite3

    from fncache.stores.disk import DiskStore

    store = str(tmp_path / "cache")
    f = fncache.memoize(store=store)(lambda x: x + 3)
    f(1)
    reader = DiskStore(store)
    key = next(iter(reader.listing())).key
    with pytest.raises(sqlite3.Error):  # a value SQLite cannot bind, after a good record
        reader.db.record_uses([(key, time.time(), 2), (key, object(), 1)])  # type: ignore[list-item]
    assert reader.db._cache is None and not reader.db._reader().in_transaction
    (entry,) = list(reader.listing())
    assert entry.uses in (None, 0)  # the good record went with the failed one
    f(2)  # stored by the other store object, after the failure
    assert len(list(reader.listing())) == 2


class _Interrupts:
    """Interrupts whatever binds it as an SQL parameter (as Ctrl-C would, midway)."""

    def __conform__(self, protocol: object) -> object:
        raise KeyboardInterrupt


def test_an_interrupted_usage_update_releases_the_write_lock(tmp_path):
    """An interrupt in the middle of a usage update on the reader's connection rolls it back:
    the write lock is free for other processes at once, the reader waits for no lock, and
    entries stored afterwards are found."""
    import sqlite3

    from fncache.stores.disk import DiskStore

    store = str(tmp_path / "cache")
    f = fncache.memoize(store=store)(lambda x: x + 4)
    f(1)
    reader = DiskStore(store)
    key = next(iter(reader.listing())).key
    with pytest.raises(KeyboardInterrupt):
        reader.db.record_uses([(key, time.time(), 2), (key, _Interrupts(), 1)])  # type: ignore[list-item]
    con = reader.db._reader()
    assert not con.in_transaction and con.execute("PRAGMA busy_timeout").fetchone() == (0,)
    other = sqlite3.connect(os.path.join(store, "cache.db"), timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the lock is free: no wait, no "database is locked"
    other.execute("ROLLBACK")
    other.close()
    f(2)
    assert len(list(reader.listing())) == 2


@pytest.mark.parametrize("setting", ["NORMAL", "full", 2, "garbage"])
def test_a_text_or_odd_synchronous_setting_still_opens_the_store(tmp_path, setting):
    """diskcache's ``sqlite_synchronous`` may be a level's name; an odd or planted one falls back
    to diskcache's default: the store opens, stores and hits, and a reading process's usage
    records are written."""
    from fncache.stores.disk import DiskStore

    path = str(tmp_path / "cache")
    store = DiskStore(path, sqlite_synchronous=setting) if setting != "garbage" else DiskStore(path)
    store.add("a" * 32, b"v", {"function": "m:f"})
    if setting == "garbage":
        with store.db.transact() as (sql, _):
            sql("UPDATE Settings SET value = 'garbage' WHERE key = 'sqlite_synchronous'")
    reader = DiskStore(path)
    assert reader.get("a" * 32) == b"v"
    reader.record_use([_usage.Use("a" * 32, "m:f", time.time(), 2)])
    (entry,) = list(reader.listing())
    assert entry.uses == 2


_CALLS = r"""
import json, sys
import fncache
import fncache._usage

@fncache.memoize(store=sys.argv[1])
def square(x):
    return x * x

for x in sys.argv[2:]:
    if x == "flush":  # the uses so far written now, on the reader if no writer is open
        fncache._usage.flush_all()
    else:
        assert square(int(x)) == int(x) ** 2
print(json.dumps([square.cache_info().hits, square.store.db._cache is None]), flush=True)
"""


@pytest.mark.slow
def test_a_process_that_only_read_leaves_the_wal_to_the_next_one(tmp_path):
    """The exit of a process whose calls all hit does not checkpoint the database: its uses stay
    in the WAL (the next process reads them there), the WAL file is not deleted (so the next
    process's first write need not create it again, syncing it), and a process that writes
    checkpoints at its exit as before. Each process is the only one open on the store."""
    import sqlite3

    store = tmp_path / "cache"
    wal = store / "cache.db-wal"
    script = write(tmp_path / "calls.py", _CALLS)
    assert last_json(run_py(script, str(store), "3", "3", "3")) == [2, False]
    assert not wal.exists()  # the writing process's close checkpointed and removed it
    assert last_json(run_py(script, str(store), "3", "3", "3", "3")) == [4, True]
    assert wal.exists() and wal.stat().st_size > 0
    assert last_json(run_py(script, str(store), "3")) == [1, True]
    # Uses written on the reader (the WAL kept), then a miss: the writer opens, and the process
    # checkpoints at its exit.
    assert last_json(run_py(script, str(store), "3", "flush", "4")) == [1, False]
    assert not wal.exists()
    con = sqlite3.connect(store / "cache.db")
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        con.close()
    uses = {e.key: e.uses for e in open_store(str(store)).listing()}
    assert sorted(uses.values(), key=lambda u: u or 0) in ([None, 2 + 4 + 1 + 1], [0, 2 + 4 + 1 + 1])


def test_a_store_that_kept_its_wal_closes_every_connection(tmp_path):
    """``close()`` of a store that only read and wrote its uses closes the read-only connection
    that kept the WAL too; the uses are in the database for the next connection, which is sound."""
    import sqlite3

    from fncache.stores.disk import DiskStore

    store = str(tmp_path / "cache")
    run_py(write(tmp_path / "calls.py", _CALLS), store, "3")  # the only other connection, gone
    reader = DiskStore(store)
    key = next(iter(reader.listing())).key
    reader.record_use([_usage.Use(key, "m:f", time.time(), 2)])
    keeper = reader.db._keeper
    assert reader.db._cache is None and keeper is not None
    assert DiskStore(store).db._keeper is None  # another store object: nothing written yet
    writing = DiskStore(store)
    writing.record_use([_usage.Use(key, "m:f", time.time(), 1)])
    assert writing.db._keeper is not None
    writing.db.cache  # noqa: B018 - the writer opens: its process's exit checkpoints again
    assert writing.db._keeper is None
    writing.close()
    reader.close()
    assert reader.db._keeper is None
    with pytest.raises(sqlite3.ProgrammingError):  # closed
        keeper.execute("SELECT 1")
    con = sqlite3.connect(os.path.join(store, "cache.db"))
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        con.close()
    assert next(iter(DiskStore(store).listing())).uses == 3


@pytest.mark.parametrize("deleted", [True, False])
def test_uses_at_exit_do_not_make_a_deleted_store_again(tmp_path, deleted):
    """A process that hit a store, closed it and deleted its directory leaves no directory behind
    at exit (its uses are of entries that went with it); one that kept it writes its uses."""
    store_dir = tmp_path / "store"
    script = write(tmp_path / "script.py", """
        import shutil, sys
        import fncache
        from fncache.stores.disk import DiskStore

        store = DiskStore(sys.argv[1])
        f = fncache.memoize(store=store)(abs)
        f(-3), f(-3)  # a miss, then a hit: a use waits for the exit
        store.close()
        if sys.argv[2] == "delete":
            shutil.rmtree(sys.argv[1])
    """)
    run_py(script, str(store_dir), "delete" if deleted else "keep")
    assert store_dir.exists() is not deleted
    if not deleted:
        assert [e.uses for e in open_store(str(store_dir)).entries()] == [1]
