"""The disk store's own promises: what it assumes of diskcache, orphaned value files, a damaged
database, private directories. Faults are made the way they happen: a writer killed with SIGKILL,
a database file overwritten or truncated, a umask of 000."""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import diskcache
import diskcache.core
import pytest

import fncache
from fncache.stores import open_store
from fncache.stores._diskfs import ValueFiles
from fncache.stores.disk import COLUMNS, ORPHAN_GRACE, DiskStore

from .helpers import REPO, cli, doctor_failed, run_py, write

FILL = """
import json, sys
import fncache

@fncache.memoize(store=sys.argv[1])
def value(x):
    return {"x": x}

@fncache.memoize(store=sys.argv[1])
def big(n):
    return b"\\x01" * n

if __name__ == "__main__":
    kind, arg = sys.argv[2], int(sys.argv[3])
    f = value if kind == "value" else big
    out = f(arg)
    print(json.dumps({"ok": out == ({"x": arg} if kind == "value" else b"\\x01" * arg),
                      "hits": f.cache_info().hits}))
"""


def _fill(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "fill.py", FILL), tmp_path / "cache"


# -- what the SQL assumes of diskcache -------------------------------------------------------------


def test_diskcache_schema_is_what_the_sql_assumes(tmp_path):
    """The installed diskcache has the columns, modes, private methods and file names the store's
    own SQL relies on, and its version is within the bound in pyproject.toml."""
    store = DiskStore(str(tmp_path / "s"))
    store.add("a" * 32, b"v", {"function": "m:f"})
    columns = [r[1] for r in store.cache._sql("PRAGMA table_info(Cache)").fetchall()]
    assert set(COLUMNS) <= set(columns), columns
    assert (diskcache.core.MODE_RAW, diskcache.core.MODE_BINARY) == (1, 2)
    assert diskcache.core.MODE_PICKLE not in (1, 2) and diskcache.core.MODE_TEXT not in (1, 2)
    policies = diskcache.core.EVICTION_POLICY
    assert policies["none"]["get"] is None
    assert "access_time" in policies["least-recently-used"]["get"]
    # fncache's transactions mark themselves as diskcache's own do: diskcache's writes join them.
    with store.db.transact() as (sql, _):
        assert store.cache._txn_id == threading.get_ident()
        assert store.cache._con.in_transaction
        with store.cache.transact():
            store.cache._sql("UPDATE Settings SET value = value WHERE key = 'count'")
        assert store.cache._con.in_transaction  # joined: not committed by diskcache's exit
    assert store.cache._txn_id is None and not store.cache._con.in_transaction
    assert list(inspect.signature(diskcache.Cache._cull).parameters) == \
        ["self", "now", "sql", "cleanup", "limit"]
    name, _ = store.cache.disk.filename()
    ValueFiles(store.directory).path(name)  # diskcache's own names have the shape we accept
    bound = re.search(r'"diskcache>=([\d.]+),<([\d.]+)"', (REPO / "pyproject.toml").read_text())
    assert bound is not None

    def version(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split(".")[:2])

    assert version(bound[1]) <= version(diskcache.__version__) < version(bound[2])
    store.close()


def test_plain_diskcache_still_reads_what_fncache_wrote(tmp_path):
    """Values written by the store (inline and in a value file) read back with diskcache itself."""
    store = DiskStore(str(tmp_path / "s"))
    store.add("a" * 32, b"small", {"function": "m:f"})
    store.add("b" * 32, b"L" * 100_000, {"function": "m:f"})
    store.close()
    with diskcache.Cache(str(tmp_path / "s")) as dc:
        assert dc.get("a" * 32) == b"small"
        assert dc.get("b" * 32) == b"L" * 100_000


def _index_sql(directory: Path) -> str | None:
    import sqlite3

    con = sqlite3.connect(directory / "cache.db")
    try:
        found = con.execute("SELECT sql FROM sqlite_master WHERE name = 'Cache_expire_time'").fetchall()
        return found[0][0] if found else None
    finally:
        con.close()


def test_expiry_index_holds_only_the_rows_that_expire(tmp_path):
    """A store made by plain diskcache (its expiry index covers every row) gets the partial index
    at fncache's first write; entries that never expire are not in it, entries that expire are,
    and expired rows are still removed by writes (diskcache's cull, through the index), by
    diskcache's own ``expire()`` and by ``prune``; plain diskcache opens the store as before."""
    import sqlite3

    directory = tmp_path / "s"
    with diskcache.Cache(str(directory)) as dc:
        dc.set("plain", b"p")
    assert _index_sql(directory) == "CREATE INDEX Cache_expire_time ON Cache (expire_time)"
    store = DiskStore(str(directory))
    forever, brief = "a" * 32, "b" * 32
    store.add(forever, b"kept", {"function": "m:f"})
    assert _index_sql(directory).endswith("WHERE expire_time IS NOT NULL")
    store.add(brief, b"brief", {"function": "m:f"}, expire=0.05)
    con = sqlite3.connect(directory / "cache.db")
    indexed = "SELECT key FROM Cache INDEXED BY Cache_expire_time WHERE expire_time IS NOT NULL"
    assert [k for (k,) in con.execute(indexed)] == [brief]
    time.sleep(0.1)
    for i in range(4):  # every fourth write removes expired rows
        store.add(f"{i:032x}", b"x", {"function": "m:f"})
    assert con.execute("SELECT count(*) FROM Cache WHERE key = ?", (brief,)).fetchone() == (0,)
    assert bytes(store.get(forever)) == b"kept"
    store.add(brief, b"brief", {"function": "m:f"}, expire=0.05)
    store.close()
    con.close()
    time.sleep(0.1)
    with diskcache.Cache(str(directory)) as dc:  # diskcache's own open keeps the partial index
        assert dc.expire() == 1 and dc.get("plain") == b"p"
    assert _index_sql(directory).endswith("WHERE expire_time IS NOT NULL")
    assert bytes(DiskStore(str(directory)).get(forever)) == b"kept"


def test_a_journal_mode_a_wal_store_cannot_switch_to_is_refused_at_open(tmp_path):
    """SQLite cannot take a database out of WAL mode while another connection is open, this
    process's own readers among them: asked for, such a mode made every write wait a minute and
    fail. It is refused when the store is opened, naming the option; the store is untouched."""
    from fncache._errors import ConfigError

    store = DiskStore(str(tmp_path / "s"))
    store.add("a" * 32, b"one", {"function": "m:f"})
    store.close()
    with pytest.raises(ConfigError, match="sqlite_journal_mode"):
        DiskStore(str(tmp_path / "s"), sqlite_journal_mode="delete").get("a" * 32)
    again = DiskStore(str(tmp_path / "s"))
    assert again.get("a" * 32) == b"one"
    assert again.add("b" * 32, b"two", {"function": "m:f"})
    again.close()
    # A store made in another mode keeps it, asked for or not.
    other = DiskStore(str(tmp_path / "d"), sqlite_journal_mode="delete")
    other.add("a" * 32, b"one", {"function": "m:f"})
    other.close()
    for options in ({}, {"sqlite_journal_mode": "delete"}):
        reopened = DiskStore(str(tmp_path / "d"), **options)
        assert reopened.get("a" * 32) == b"one"
        assert reopened.add("b" * 32 if not options else "c" * 32, b"two", {"function": "m:f"})
        reopened.close()


def _until(condition, what: str, limit: float = 60.0) -> None:
    """Wait for ``condition()`` (another thread's work); fail naming ``what`` after ``limit`` s."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"still not: {what}"
        time.sleep(0.01)


def _rows_in_database_file(directory: Path, tmp: Path) -> int:
    """Entries in the store's database file alone (a copy without its log): what checkpoints
    have copied there."""
    import shutil
    import sqlite3

    tmp.mkdir()
    shutil.copy(directory / "cache.db", tmp / "cache.db")
    con = sqlite3.connect(tmp / "cache.db")
    try:
        return int(con.execute("SELECT count(*) FROM Cache").fetchone()[0])
    finally:
        con.close()


def _checkpointed(store: DiskStore) -> bool:
    """Whether the store's thread has completed a checkpoint; if not, asks it for one more."""
    checkpointer = store.db.checkpointer
    if checkpointer.done >= 1:
        return True
    checkpointer._request()
    return False


_CHECKPOINT_THREAD = r"""
import json, sys, threading, time
import fncache
from fncache._threads import alone as _alone, threads_besides_main
from fncache.stores.disk import DiskStore

LOGS = {"a": [], "b": [], "c": []}


def appends_a(x):  # changes what it reads: stored only when no other thread could have
    LOGS["a"].append(x)
    return len(LOGS["a"])


def appends_b(x):  # the same, a function of its own (a function's state is marked once)
    LOGS["b"].append(x)
    return len(LOGS["b"])


def appends_c(x):
    LOGS["c"].append(x)
    return len(LOGS["c"])


def calls(appends):
    f = fncache.memoize(store=f"memory://{appends.__name__}")(appends)
    return [f(1), f(1), f(1), f.cache_info().stores]


out = {"alone": calls(appends_a)}  # no thread at all
store = DiskStore(sys.argv[1], sqlite_wal_autocheckpoint=320)  # every 10 commits
for i in range(10):
    store.add(f"{i:032x}", b"v", {"function": "m:f"})
checkpointer = store.db.checkpointer
deadline = time.monotonic() + 60
while checkpointer.done < 1 and time.monotonic() < deadline:
    time.sleep(0.01)
thread = checkpointer._thread
out.update(done=checkpointer.done, alive=thread is not None and thread.is_alive(),
           threads=threading.active_count(), besides=threads_besides_main(), alone_now=_alone(),
           beside_checkpoints=calls(appends_b))
done = threading.Event()
worker = threading.Thread(target=done.wait)  # alive until the checks are made, however slow
worker.start()
out.update(besides_with_a_worker=threads_besides_main(), beside_a_worker=calls(appends_c))
done.set()
worker.join()
print(json.dumps(out))
"""

def test_checkpoints_run_on_a_thread_of_their_own_that_runs_no_user_code(tmp_path):
    """A writing process's checkpoints (copying the write-ahead log into the database file) run
    on a thread of the store's, woken every sqlite_wal_autocheckpoint/32 commits; SQLite's own
    checkpoint in a commit stays as the backstop at that many pages, on every connection of the
    process, and is not stored for other programs on the directory. The thread is not one that
    could change what a function reads: a function that changes a global it reads is stored as
    in a process of one thread (in a fresh process: no other test's threads)."""
    from fncache.stores._diskcache import WAL_AUTOCHECKPOINT

    assert WAL_AUTOCHECKPOINT == 16_000
    store = DiskStore(str(tmp_path / "s"), sqlite_wal_autocheckpoint=320)  # every 10 commits
    for i in range(9):
        store.add(f"{i:032x}", b"v", {"function": "m:f"})
    checkpointer = store.db.checkpointer
    assert checkpointer is not None and checkpointer.done == 0
    assert _rows_in_database_file(tmp_path / "s", tmp_path / "copy0") == 0  # all in the log
    store.add(f"{9:032x}", b"v", {"function": "m:f"})
    _until(functools.partial(_checkpointed, store), "a checkpoint")
    assert _rows_in_database_file(tmp_path / "s", tmp_path / "copy1") == 10
    thread = checkpointer._thread
    assert thread is not None and thread.is_alive() and thread.name == "fncache-checkpoint"
    assert store.db.cache._con.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 320
    assert store.db._reader().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 320
    with diskcache.Cache(str(tmp_path / "s")) as plain:  # SQLite's default for other programs
        assert plain._con.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    store.close()
    assert not thread.is_alive()
    default = DiskStore(str(tmp_path / "d"))
    default.add("a" * 32, b"v", {"function": "m:f"})
    assert default.db.checkpointer.every == WAL_AUTOCHECKPOINT // 32
    assert default.db.cache._con.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 16_000
    default.close()
    script = tmp_path / "thread.py"
    script.write_text(_CHECKPOINT_THREAD)
    out = json.loads(run_py(script, str(tmp_path / "p")).stdout)
    assert out["done"] >= 1 and out["alive"] and out["threads"] == 2
    assert out["besides"] == 0 and out["alone_now"]
    assert out["beside_checkpoints"] == out["alone"]  # as with no thread at all
    assert out["besides_with_a_worker"] == 1
    assert out["beside_a_worker"] != out["alone"]  # a thread that could run user code counts


def test_a_checkpoint_thread_that_cannot_open_the_database_leaves_room_for_the_next(tmp_path):
    """A thread that found no database (moved aside since) ends, and the next request starts
    another, which checkpoints once the database is back."""
    import sqlite3

    from fncache.stores._checkpoint import Checkpointer

    path = tmp_path / "cache.db"
    checkpointer = Checkpointer(str(path), 1)
    checkpointer.committed()
    _until(lambda: checkpointer._thread is None, "the thread that found nothing ends")
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = wal")
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    checkpointer.committed()
    _until(lambda: checkpointer.done >= 1, "a checkpoint by a new thread")
    checkpointer.close()
    con.close()


_LOCK_STATE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    print("free")
except OSError:
    print("held")
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists descriptors in /proc")
def test_the_checkpoint_thread_syncs_the_database_through_sqlites_own_descriptor(tmp_path):
    """After a checkpoint that copied pages, the thread syncs the database file itself (a writer's
    backstop checkpoint then has few pages left to sync inside a commit), through the descriptor
    SQLite opened for its connection: the process's POSIX locks on the file stay, where closing a
    descriptor of its own would drop every one of them (another process could then take the
    database for unused). Not where the store's synchronous is OFF."""
    import fcntl

    from fncache.stores._checkpoint import _database_fd, _database_fds, _sync

    store = DiskStore(str(tmp_path / "s"), sqlite_wal_autocheckpoint=320)  # every 10 commits
    store.add("f" * 32, b"v", {"function": "m:f"})
    database = tmp_path / "s" / "cache.db"
    script = tmp_path / "lock.py"
    script.write_text(_LOCK_STATE)
    mine = os.open(database, os.O_RDWR)
    try:
        fcntl.lockf(mine, fcntl.LOCK_SH, 1, 0)  # byte 0: no lock of SQLite's is there
        assert run_py(script, str(database)).stdout.split() == ["held"]
        checkpointer = store.db.checkpointer
        for i in range(30):
            store.add(f"{i:032x}", b"v", {"function": "m:f"})
        _until(lambda: checkpointer.synced >= 1, "a sync after a checkpoint")
        assert checkpointer.synchronous == 1  # the store's (NORMAL), on the thread's connection
        assert run_py(script, str(database)).stdout.split() == ["held"]  # the lock stayed
        store.close()
    finally:
        os.close(mine)
    assert run_py(script, str(database)).stdout.split() == ["free"]  # the check sees it go

    off = DiskStore(str(tmp_path / "off"), sqlite_wal_autocheckpoint=320, sqlite_synchronous=0)
    for i in range(30):
        off.add(f"{i:032x}", b"v", {"function": "m:f"})
    _until(lambda: off.db.checkpointer.done >= 1, "a checkpoint")
    assert off.db.checkpointer.synchronous == 0 and off.db.checkpointer.synced == 0
    off.close()

    # The descriptor found is the connection's own, checked again before each sync: once it is
    # closed (and its number perhaps reused for another file), it is never synced in its place.
    import sqlite3

    before = _database_fds(str(database))
    con = sqlite3.connect(database)
    found = _database_fd(before, str(database))
    assert found is not None and os.path.samefile(f"/proc/self/fd/{found[0]}", database)
    assert _sync(found)
    con.close()
    other = os.open(tmp_path / "lock.py", os.O_RDONLY)  # the lowest free number: likely the same
    try:
        assert not _sync(found)
    finally:
        os.close(other)


def test_the_writers_page_cache_is_small_unless_asked_and_not_stored(tmp_path):
    """The writer's page cache is WRITER_CACHE_KIB (each commit after a page split walks it at a
    million entries) on the first connection, on another thread's and on a forked child's; a
    ``sqlite_cache_size`` given at open is used instead, as is one stored by an earlier open;
    diskcache's stored setting stays its own for other programs."""
    from fncache.stores._diskopen import WRITER_CACHE_KIB

    def cache_size(store: DiskStore) -> int:
        return int(store.db.cache._con.execute("PRAGMA cache_size").fetchone()[0])

    store = DiskStore(str(tmp_path / "s"))
    store.add("a" * 32, b"v", {"function": "m:f"})
    on_thread: list[int] = []
    worker = threading.Thread(target=lambda: on_thread.append(cache_size(store)))
    worker.start()
    worker.join()
    assert cache_size(store) == -WRITER_CACHE_KIB and on_thread == [-WRITER_CACHE_KIB]
    if hasattr(os, "fork"):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child writes through a connection of its own
            try:
                store.add("c" * 32, b"child", {"function": "m:f"})
                os.write(write, str(cache_size(store)).encode())
            finally:
                os._exit(0)
        os.close(write)
        assert os.read(read, 64) == str(-WRITER_CACHE_KIB).encode()
        os.close(read)
        os.waitpid(pid, 0)
    assert store.get("a" * 32) == b"v"
    store.close()
    with diskcache.Cache(str(tmp_path / "s")) as plain:
        assert plain._con.execute("PRAGMA cache_size").fetchone()[0] == 2**13
    asked = DiskStore(str(tmp_path / "s"), sqlite_cache_size=1234)
    asked.add("b" * 32, b"w", {"function": "m:f"})
    assert cache_size(asked) == 1234
    asked.close()
    again = DiskStore(str(tmp_path / "s"))  # diskcache stored the choice: it stays
    again.add("d" * 32, b"x", {"function": "m:f"})
    assert cache_size(again) == 1234
    again.close()


_HOLD_EXCLUSIVE = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
con.execute("BEGIN EXCLUSIVE")
con.execute("UPDATE Settings SET value = value WHERE key = 'count'")
print("held", flush=True)
time.sleep(1.5)
con.execute("COMMIT")
"""


def test_a_rollback_journal_stores_first_write_waits_for_another_process(tmp_path):
    """The writer's page-cache pragma reads the schema; in a store in rollback-journal mode that
    another process holds locked, the first write of a process waits for the lock (the store's
    timeout) as before, and succeeds."""
    path = tmp_path / "s"
    made = DiskStore(str(path), sqlite_journal_mode="delete")
    made.add("a" * 32, b"v", {"function": "m:f"})
    made.close()
    script = tmp_path / "hold.py"
    script.write_text(_HOLD_EXCLUSIVE)
    store = DiskStore(str(path), sqlite_journal_mode="delete")
    assert store.get("a" * 32) == b"v"  # opened for reading: the writer opens at the first write
    holder = subprocess.Popen([sys.executable, str(script), str(path / "cache.db")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert store.add("b" * 32, b"w", {"function": "m:f"})  # waits out the holder
        assert store.get("b" * 32) == b"w" and store.get("a" * 32) == b"v"
        store.close()
    finally:
        assert holder.wait(60) == 0


def test_a_checkpoint_thread_ends_when_idle_and_starts_again(tmp_path, monkeypatch):
    """The thread ends after IDLE seconds without work (a store left open holds no thread for
    good) and the next commits that need it start another."""
    from fncache.stores import _checkpoint

    monkeypatch.setattr(_checkpoint, "IDLE", 0.05)
    store = DiskStore(str(tmp_path / "s"), sqlite_wal_autocheckpoint=64)  # every 2 commits
    store.add("a" * 32, b"v", {"function": "m:f"})
    store.add("b" * 32, b"v", {"function": "m:f"})
    checkpointer = store.db.checkpointer
    _until(lambda: checkpointer.done == 1 and checkpointer._thread is None, "idle end")
    store.add("c" * 32, b"v", {"function": "m:f"})
    store.add("d" * 32, b"v", {"function": "m:f"})
    _until(lambda: checkpointer.done == 2, "a second thread's checkpoint")
    assert _rows_in_database_file(tmp_path / "s", tmp_path / "copy") == 4
    store.close()


def test_a_write_at_interpreter_shutdown_starts_no_checkpoint_thread_and_succeeds(tmp_path,
                                                                                 monkeypatch):
    """Where no thread can be started (Python refuses new threads once it shuts down), the write
    that would have started one succeeds without it: SQLite's backstop checkpoints instead."""
    def refused(self):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    store = DiskStore(str(tmp_path / "s"), sqlite_wal_autocheckpoint=64)  # every 2 commits
    monkeypatch.setattr(threading.Thread, "start", refused)
    store.add("a" * 32, b"v", {"function": "m:f"})
    store.add("b" * 32, b"v", {"function": "m:f"})
    assert store.get("b" * 32) == b"v" and store.db.checkpointer._thread is None
    monkeypatch.undo()
    store.add("c" * 32, b"v", {"function": "m:f"})
    store.add("d" * 32, b"v", {"function": "m:f"})
    checkpointer = store.db.checkpointer
    _until(lambda: checkpointer.done >= 1, "a checkpoint once threads start again")
    store.close()


def test_a_pragma_setting_sqlite_does_not_take_is_refused_naming_it(tmp_path):
    """diskcache formats its sqlite_* settings into the PRAGMA it runs on each connection: a value
    that pragma does not take is refused at decoration, naming the option (it failed at the first
    write with SQLite's words, or a raw OverflowError), and the store is untouched."""
    from fncache._errors import ConfigError

    for name, bad in (("sqlite_cache_size", 2**70), ("sqlite_cache_size", "4096; drop table Cache"),
                      ("sqlite_mmap_size", -1), ("sqlite_journal_mode", "nope")):
        with pytest.raises(ConfigError, match=name):
            fncache.memoize(store=str(tmp_path / "s"), store_options={name: bad})(len)
    assert not (tmp_path / "s").exists()
    f = fncache.memoize(store=str(tmp_path / "s"),
                        store_options={"sqlite_cache_size": 1000, "sqlite_mmap_size": 0})(len)
    assert f([1]) == 1 and f([1]) == 1 and f.cache_info().hits == 1


def test_the_checkpoint_setting_is_checked_and_applied(tmp_path):
    """sqlite_wal_autocheckpoint is a disk store option (memoize's store_options take it); a
    value that is not a page count is refused naming it, the store untouched; 0 turns
    checkpoints off as SQLite's pragma does (no thread)."""
    from fncache._errors import ConfigError

    store = DiskStore(str(tmp_path / "s"))
    store.add("a" * 32, b"kept", {"function": "m:f"})
    store.close()
    for bad in (-1, "4000", 1.5, True, 2**31):  # 2**31 and more: SQLite's 0, no checkpoints
        with pytest.raises(ConfigError, match="sqlite_wal_autocheckpoint"):
            DiskStore(str(tmp_path / "s"), sqlite_wal_autocheckpoint=bad).get("a" * 32)
        with pytest.raises(ConfigError, match="sqlite_wal_autocheckpoint"):
            fncache.memoize(store=str(tmp_path / "s"),
                            store_options={"sqlite_wal_autocheckpoint": bad})(len)
    f = fncache.memoize(store=str(tmp_path / "s"),
                        store_options={"sqlite_wal_autocheckpoint": 100})(len)
    assert f([1, 2]) == 2 and f([1, 2]) == 2 and f.cache_info().hits == 1
    off = DiskStore(str(tmp_path / "s"), sqlite_wal_autocheckpoint=0)
    assert off.get("a" * 32) == b"kept"
    off.add("b" * 32, b"v", {"function": "m:f"})
    assert off.db.checkpointer is None
    off.close()


_FORK_WHILE_WRITING = """
import os, sys, threading
from fncache.stores import open_store

store = open_store(sys.argv[1], timeout=5.0)
store.set("first", b"x", {})  # opened, its modules imported, before another thread exists
writing, stop = threading.Event(), threading.Event()
writing.set()


def writer():
    i = 0
    while not stop.is_set():
        writing.wait()
        store.set(f"w{i}", os.urandom(3000), {})
        i += 1


thread = threading.Thread(target=writer, daemon=True)
thread.start()
while store.get("w1") is None:  # the thread writes
    pass
failed = []
for n in range(20):
    go_r, go_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()  # while the thread writes: often inside one of its transactions
    if pid == 0:
        os.read(go_r, 1)
        try:
            store.set(f"child{n}", b"x", {})
            os.write(res_w, b"ok" if store.get(f"child{n}") == b"x" else b"wrong")
        except Exception as e:
            os.write(res_w, repr(e).encode()[:500])
        os._exit(0)
    writing.clear()  # the parent's writes pause: the child's write meets no other writer
    os.write(go_w, b"1")
    result = os.read(res_r, 1000).decode()
    os.waitpid(pid, 0)
    for fd in (go_r, go_w, res_r, res_w):
        os.close(fd)
    if result != "ok":
        failed.append(result)
    writing.set()
stop.set()
print(failed)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_writes_can_write(tmp_path):
    """A fork waits for the write transactions other threads are in: a child forked inside one
    inherited its write lock (SQLite keeps locks in the process's memory), held for good by a
    thread the child does not have, and every write of the child waited its whole timeout and
    failed (about a third of the children of such a loop). The child's write here meets no other
    writer: it succeeds at once, or never."""
    script = write(tmp_path / "fork_writing.py", _FORK_WHILE_WRITING)
    proc = run_py(script, str(tmp_path / "s"), timeout=600)
    assert proc.stdout.strip() == "[]", proc.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_forked_while_checkpoints_run_uses_the_store(tmp_path):
    """A fork stops the checkpoint threads first, after the checkpoint they may be in, and the
    parent starts one again when it needs one; each
    child writes, checkpoints and reads the store, and exits. (Forking while the thread was inside
    SQLite hung children on the locks SQLite keeps in memory: some children of some runs of this
    test waited for ever.)"""
    store = DiskStore(str(tmp_path / "s"), sqlite_wal_autocheckpoint=32)  # every commit
    children = []
    for n in range(6):
        for i in range(20):
            store.add(f"{n:04x}{i:028x}", b"v", {"function": "m:f"})
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                child = DiskStore(str(tmp_path / "s"), sqlite_wal_autocheckpoint=32)
                for i in range(20):
                    child.add(f"c{n:03x}{i:028x}", b"c", {"function": "m:f"})
                ok = child.get(f"c{n:03x}{19:028x}") == b"c" and child.get(f"{n:04x}{0:028x}") == b"v"
                # The child's own thread checkpoints (a lock inherited held would stop it).
                # (one may be refused as busy while the parent's thread checkpoints: asked again)
                _until(functools.partial(_checkpointed, child), "a checkpoint in the child")
                child.close()
                code = 0 if ok else 1
            finally:
                os._exit(code)
        children.append(pid)
    deadline = time.monotonic() + 120
    for pid in children:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                pytest.fail("a forked child hung")
            time.sleep(0.01)
        assert os.waitstatus_to_exitcode(status) == 0
    assert len(store) == 6 * 40
    store.close()


def test_a_process_that_writes_exits_with_its_log_copied(tmp_path):
    """A writing process ends its checkpoint thread at exit (after the checkpoint it is in), and
    its last connection copies the rest of the log: the database file alone holds every entry."""
    script = tmp_path / "w.py"
    script.write_text(
        "import sys\n"
        "from fncache.stores.disk import DiskStore\n"
        "s = DiskStore(sys.argv[1], sqlite_wal_autocheckpoint=64)\n"
        "for i in range(400):\n"
        "    s.add(f'{i:032x}', b'v', {'function': 'm:f'})\n"
    )
    run_py(script, str(tmp_path / "s"))
    assert not (tmp_path / "s" / "cache.db-wal").exists() or \
        (tmp_path / "s" / "cache.db-wal").stat().st_size == 0
    assert _rows_in_database_file(tmp_path / "s", tmp_path / "copy") == 400


def test_a_write_that_fails_midway_leaves_nothing_and_the_lock_free(tmp_path):
    """A write transaction whose body raises is rolled back: nothing it wrote is stored, the
    write lock is free for another process at once, and a shorter wait given to it is the
    connection's busy timeout only while it ran."""
    import sqlite3

    store = DiskStore(str(tmp_path / "s"))
    store.add("a" * 32, b"v", {"function": "m:f"})
    db = store.db
    with pytest.raises(RuntimeError), db.transact(wait=0.25) as (sql, _):
        assert sql("PRAGMA busy_timeout").fetchone() == (250,)
        sql("DELETE FROM Cache")
        raise RuntimeError("midway")
    assert db.cache._sql("PRAGMA busy_timeout").fetchone() == (int(db.timeout * 1000),)
    assert db.cache._txn_id is None and not db.cache._con.in_transaction
    assert bytes(store.get("a" * 32)) == b"v"
    other = sqlite3.connect(tmp_path / "s" / "cache.db", timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the lock is free
    other.execute("ROLLBACK")
    other.close()


def test_an_interrupt_just_after_the_write_lock_is_taken_leaves_it_free(tmp_path):
    """Ctrl-C that arrives while BEGIN waits for the write lock is raised once it returns, with the
    lock taken and before the body runs: the transaction is rolled back, not left holding the lock
    (and no thread id left in diskcache's ``_txn_id``). Raised here at that very line, by a trace
    function, so that no timing is involved."""
    import sqlite3
    import sys

    from fncache.stores import _diskopen

    store = DiskStore(str(tmp_path / "s"))
    store.add("a" * 32, b"v", {"function": "m:f"})
    db = store.db
    code = _diskopen.Transaction.__enter__.__code__
    line = next(n for n, text in enumerate(inspect.getsourcelines(code)[0], code.co_firstlineno)
                if "self._begun = True" in text)

    def tracer(frame, event, arg):
        if frame.f_code is not code:
            return None

        def local(frame, event, arg):
            if event == "line" and frame.f_lineno == line and frame.f_locals["con"].in_transaction:
                raise KeyboardInterrupt
            return local
        return local

    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt), db.transact() as (sql, _):
            sql("DELETE FROM Cache")  # never runs
    finally:
        sys.settrace(None)
    assert db.cache._txn_id is None and not db.cache._con.in_transaction
    other = sqlite3.connect(tmp_path / "s" / "cache.db", timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the lock is free
    other.execute("ROLLBACK")
    other.close()
    assert bytes(store.get("a" * 32)) == b"v"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_joins_a_transaction_of_its_parent(tmp_path):
    """A transaction open in the parent when it forks (its thread id in diskcache's ``_txn_id``)
    is not the child's: a child thread with the same id begins one of its own, so the child's
    writes stay atomic."""
    store = DiskStore(str(tmp_path / "s"))
    store.add("a" * 32, b"v", {"function": "m:f"})
    db = store.db
    db.cache._txn_id = threading.get_ident()  # as if this thread were inside a transaction
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether its transaction is a real one
        ok = False
        try:
            with db.transact() as (sql, _):
                ok = db.cache._con.in_transaction
                sql("UPDATE Settings SET value = value WHERE key = 'count'")
        finally:
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
    finally:
        os.close(read)
        os.waitpid(pid, 0)
        db.cache._txn_id = None


# -- orphaned value files --------------------------------------------------------------------------


def _kill_mid_write(script: Path, cache: Path, size: int) -> Path:
    """Run a writer of a ``size``-byte result and SIGKILL it while its value file is being written."""
    files = ValueFiles(str(cache))
    for _ in range(5):
        before = {n for n, _ in files.walk()}
        proc = subprocess.Popen([sys.executable, str(script), str(cache), "big", str(size)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                new = [(n, st) for n, st in files.walk() if n not in before and st.st_size > 0]
                if new:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
                    path = Path(files.path(new[0][0]))
                    if path.stat().st_size < size:  # killed mid-write, before the row existed
                        return path
                    break
                time.sleep(0.001)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    raise AssertionError("could not kill the writer mid-write")


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


@pytest.mark.slow
def test_value_files_of_killed_writers_are_reported_and_swept_after_the_grace_period(tmp_path):
    """A writer SIGKILLed mid-write leaves a value file no entry owns: info counts it once nobody
    has written it for 10 s (its writer's lock is gone; no need to wait for the hour's grace),
    prune and clear remove it; a file a live writer holds and entries' own files stay."""
    script, cache = _fill(tmp_path)
    proc = run_py(script, str(cache), "big", "100000")  # one healthy file-backed entry
    assert json.loads(proc.stdout)["ok"]
    store = DiskStore(str(cache))
    ((healthy,),) = store.db.rows("SELECT filename FROM Cache WHERE filename IS NOT NULL", ())
    _age(Path(store.db.files.path(healthy)), 2 * ORPHAN_GRACE)

    orphan = _kill_mid_write(script, cache, 200 * 2**20)
    assert len(store) == 1  # the killed write published nothing
    # A writer at work (here, this process) holds its file's lock, however long ago it wrote.
    live, fd = store.db.files.new()
    os.write(fd, b"partial")
    _age(Path(store.db.files.path(live)), 60)
    # As if the killed writer had written it just now, however long the steps above took.
    _age(orphan, -60)
    info = json.loads(cli("info", "--dir", str(cache), "--json").stdout)
    assert info["orphans"] == 0  # the killed writer's file was written just now
    _age(orphan, 11)  # as 11 s after the kill
    info = json.loads(cli("info", "--dir", str(cache), "--json").stdout)
    assert (info["orphans"], info["orphan_bytes"]) == (1, orphan.stat().st_size)

    proc = cli("prune", "--dir", str(cache), "--max-size", "1GB", "-y")
    assert proc.returncode == 0 and "1 orphaned files" in proc.stdout, proc.stdout + proc.stderr
    assert not orphan.exists()
    assert Path(store.db.files.path(live)).exists()  # still being written: never swept
    os.close(fd)
    store.db.files.remove(live)
    # Another orphan, for clear: a copy of the entry's file under a name no row references.
    copy = Path(store.db.files.path("ff/ee/" + "d" * 28 + ".val"))
    copy.parent.mkdir(parents=True)
    copy.write_bytes(Path(store.db.files.path(healthy)).read_bytes())
    _age(copy, ORPHAN_GRACE + 60)
    proc = cli("clear", "--dir", str(cache), "--older-than", "100d", "-y")
    assert proc.returncode == 0 and "1 orphaned files" in proc.stdout, proc.stdout + proc.stderr
    assert not copy.exists()
    # The entry's own file, older still, was never an orphan.
    proc = run_py(script, str(cache), "big", "100000")
    assert json.loads(proc.stdout) == {"ok": True, "hits": 1}
    store.close()


# -- a damaged database ----------------------------------------------------------------------------

DAMAGE = {
    "garbage header": lambda data: b"this is not SQLite" * 8 + data[144:],
    "truncated to half": lambda data: data[: len(data) // 2],
    "truncated inside the header": lambda data: data[:50],
}


def _damaged_store(tmp_path: Path, how: str) -> tuple[Path, Path]:
    script, cache = _fill(tmp_path)
    run_py(script, str(cache), "value", "2")
    store = DiskStore(str(cache))
    for x in range(300):  # enough pages that half a file misses some of every table
        store.add(f"{x:032x}", os.urandom(2000), {"function": "m:f"})
    store.close()
    db = cache / "cache.db"
    assert not (cache / "cache.db-wal").exists()
    db.write_bytes(DAMAGE[how](db.read_bytes()))
    return script, cache


def _moved_aside(cache: Path) -> list[str]:
    return [p.name for p in cache.iterdir() if re.fullmatch(r"cache\.db\.corrupt-[0-9TZ]+", p.name)]


@pytest.mark.slow
@pytest.mark.parametrize("how", list(DAMAGE))
def test_damaged_database_is_moved_aside_and_a_fresh_one_started(tmp_path, how):
    """A garbage or truncated cache.db is moved aside with a WARNING; calls work again at once."""
    script, cache = _damaged_store(tmp_path, how)
    proc = run_py(script, str(cache), "value", "1")
    assert json.loads(proc.stdout.splitlines()[-1]) == {"ok": True, "hits": 0}
    assert "is damaged" in proc.stderr and "moved it aside" in proc.stderr, proc.stderr
    assert len(_moved_aside(cache)) == 1
    proc = run_py(script, str(cache), "value", "1")
    assert json.loads(proc.stdout.splitlines()[-1]) == {"ok": True, "hits": 1}
    assert "damaged" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", list(DAMAGE))
def test_doctor_reports_a_damaged_database(tmp_path, how):
    """fncache doctor fails and names the damaged database it moved aside."""
    _, cache = _damaged_store(tmp_path, how)
    proc = cli("doctor", "--dir", str(cache))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "database" in ln)
    assert line.startswith("BAD") and "cache.db.corrupt-" in line, proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("how", list(DAMAGE))
def test_clear_recovers_a_damaged_database(tmp_path, how):
    """fncache clear on a damaged store succeeds, and the store works afterwards."""
    script, cache = _damaged_store(tmp_path, how)
    proc = cli("clear", "--dir", str(cache), "-y")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(_moved_aside(cache)) == 1
    run_py(script, str(cache), "value", "1")
    assert json.loads(run_py(script, str(cache), "value", "1").stdout) == {"ok": True, "hits": 1}


def test_database_replaced_by_a_symlink_is_moved_aside_not_written_through(tmp_path):
    """A cache.db that is a symlink to a file elsewhere is moved aside; that file is untouched."""
    cache = tmp_path / "cache"
    store = DiskStore(str(cache))
    store.add("a" * 32, b"v", {"function": "m:f"})
    store.close()
    victim = tmp_path / "victim.db"
    victim.write_bytes(b"precious")
    (cache / "cache.db").unlink()
    (cache / "cache.db").symlink_to(victim)
    store = DiskStore(str(cache))
    store.add("b" * 32, b"v", {"function": "m:f"})
    assert store.get("b" * 32) == b"v"
    assert victim.read_bytes() == b"precious"
    assert not (cache / "cache.db").is_symlink() and len(_moved_aside(cache)) == 1
    store.close()


# -- permissions -----------------------------------------------------------------------------------


def test_every_directory_and_file_created_is_private_under_umask_000(tmp_path):
    """Parents, the cache directory, value-file directories and files are 0700/0600 under umask 000."""
    old = os.umask(0)
    try:
        store = open_store(str(tmp_path / "a" / "b" / "cache"))
        store.add("0" * 32, b"L" * 100_000, {"function": "t"})
    finally:
        os.umask(old)
    for d in ("a", "a/b", "a/b/cache"):
        assert stat.S_IMODE((tmp_path / d).stat().st_mode) == 0o700, d
    files = list(ValueFiles(str(tmp_path / "a" / "b" / "cache")).walk())
    assert len(files) == 1 and stat.S_IMODE(files[0][1].st_mode) == 0o600
    sub = Path(str(tmp_path / "a" / "b" / "cache"), files[0][0]).parent
    assert stat.S_IMODE(sub.stat().st_mode) == stat.S_IMODE(sub.parent.stat().st_mode) == 0o700
    store.close()


@pytest.mark.slow
@pytest.mark.parametrize("secret", [None, "s3cret"], ids=["no-secret", "secret"])
def test_parent_writable_by_others_warns_and_fails_doctor_unless_a_secret_is_set(
        tmp_path, caplog, monkeypatch, secret):
    """A parent others can write (no sticky bit) lets them swap the cache directory: a WARNING and
    a failed doctor check without a secret; with FNCACHE_SECRET neither."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    cache = shared / "cache"
    env = {"FNCACHE_SECRET": secret} if secret else {}
    if secret:
        monkeypatch.setenv("FNCACHE_SECRET", secret)
    else:
        monkeypatch.delenv("FNCACHE_SECRET", raising=False)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        store = DiskStore(str(cache))
        store.add("0" * 32, b"v", {"function": "t"})
        store.close()
    warned = [r.getMessage() for r in caplog.records if "writable by others" in r.getMessage()]
    assert bool(warned) == (secret is None), warned
    proc = cli("doctor", "--dir", str(cache), env=env)
    line = next(ln for ln in proc.stdout.splitlines() if "parent directories" in ln)
    assert line.startswith("ok" if secret else "BAD"), proc.stdout
    assert doctor_failed(proc) == (set() if secret else {"parent directories"}), proc.stdout
    assert proc.returncode == (1 if secret is None or "BAD  free space" in proc.stdout else 0)


def test_memoized_function_in_a_private_store_does_not_warn(tmp_path, caplog):
    """The ordinary case (a private cache under private parents) logs no permission warning."""
    with caplog.at_level(logging.WARNING, logger="fncache"):
        f = fncache.memoize(store=str(tmp_path / "cache"))(len)
        assert f([1, 2]) == 2
    assert not [r for r in caplog.records if "writable by others" in r.getMessage()]
