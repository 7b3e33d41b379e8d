"""A hit finds a small entry's row by the rowid its previous hit in this process read.

Whatever another store object or process does to the row in between (deletes it, replaces it,
plants something there, lets it expire, gives its rowid to another key), the read answers what a
read by key answers: the row at the rowid is used only while it holds the key.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

import fncache
import fncache.stores._diskcache as diskcache_module
from fncache.stores import _disksql as q
from fncache.stores.disk import DiskStore

from .helpers import run_py, write

K1, K2 = "1" * 32, "2" * 32
META = {"function": "m:f"}

OTHER_PROCESS = """
import sqlite3, sys
from fncache.stores.disk import DiskStore
store = DiskStore(sys.argv[1])
assert store.delete(sys.argv[2])
store.add(sys.argv[3], b"two", {"function": "m:f"})
store.close()
con = sqlite3.connect(sys.argv[1] + "/cache.db")
print(con.execute("SELECT rowid FROM Cache WHERE key = ?", (sys.argv[3],)).fetchone()[0])
"""


@pytest.fixture(params=["get", "get_checked"])
def read(request):
    """A store's two reads: ``get``, and ``get_checked`` (a hit's, which reads a small entry read
    before in one step, by its rowid)."""
    if request.param == "get":
        return lambda store, key: store.get(key)
    return lambda store, key: store.get_checked(key, lambda *_: True)


def _rowid(directory: Path, key: str) -> int | None:
    con = sqlite3.connect(directory / "cache.db", isolation_level=None)
    try:
        found = con.execute("SELECT rowid FROM Cache WHERE key = ?", (key,)).fetchall()
        return found[0][0] if found else None
    finally:
        con.close()


def _sql(directory: Path, statement: str, params: tuple[object, ...]) -> None:
    con = sqlite3.connect(directory / "cache.db", timeout=30, isolation_level=None)
    try:
        con.execute(statement, params)
    finally:
        con.close()


def test_a_rowid_given_to_another_key_never_answers_for_the_first(tmp_path, read):
    """Another process deletes an entry this process has hit and writes a new key, which SQLite
    gives the freed rowid: the first key is then a miss here, not the new key's value."""
    d = tmp_path / "s"
    store = DiskStore(str(d))
    store.add(K1, b"one", META)
    assert read(store, K1) == b"one"
    assert read(store, K1) == b"one"  # the second read goes by the rowid the first one read
    before = _rowid(d, K1)
    out = run_py(write(tmp_path / "other.py", OTHER_PROCESS), str(d), K1, K2)
    assert int(out.stdout) == before  # the precondition: the rowid was reused
    assert read(store, K1) is None
    assert read(store, K2) == b"two"
    assert read(store, K1) is None
    store.close()


def test_an_entry_replaced_elsewhere_reads_its_new_value(tmp_path, read):
    """Replaced by another store object, inline, then by a value file, then inline again."""
    d = tmp_path / "s"
    reader, writer = DiskStore(str(d)), DiskStore(str(d))
    writer.add(K1, b"one", META)
    for value in (b"uno", b"L" * 100_000, b"eins", b"one"):
        assert read(reader, K1) == read(reader, K1)
        writer.set(K1, value, META)
        assert read(reader, K1) == value
        assert read(reader, K1) == value
    reader.close()
    writer.close()


def test_a_key_written_again_at_another_rowid_reads_its_new_value(tmp_path, read):
    """The remembered rowid now holds another key, and the key itself a row further on: the read
    goes back to the key and finds the new value (not a miss, not the other key's value)."""
    d = tmp_path / "s"
    reader, writer = DiskStore(str(d)), DiskStore(str(d))
    writer.add(K1, b"one", META)
    assert read(reader, K1) == read(reader, K1) == b"one"
    first = _rowid(d, K1)
    assert writer.delete(K1)
    writer.add(K2, b"two", META)
    writer.add(K1, b"uno", META)
    assert _rowid(d, K2) == first and _rowid(d, K1) != first  # the precondition
    assert read(reader, K1) == read(reader, K1) == b"uno"
    assert read(reader, K2) == b"two"
    reader.close()
    writer.close()


def test_a_row_of_the_key_that_is_no_longer_an_entry_row_is_not_read_by_its_rowid(tmp_path, read):
    """diskcache's ``raw`` column says how the key was stored; a row not stored as fncache stores
    a key (``raw = 0``: a pickled key) is not the entry of that key."""
    d = tmp_path / "s"
    store = DiskStore(str(d))
    store.add(K1, b"one", META)
    assert read(store, K1) == read(store, K1) == b"one"
    _sql(d, "UPDATE Cache SET raw = 0 WHERE key = ?", (K1,))
    assert read(store, K1) is None
    store.close()


def test_an_entry_that_expired_or_was_planted_over_is_not_read_by_its_rowid(tmp_path, read):
    d = tmp_path / "s"
    store = DiskStore(str(d))
    store.add(K1, b"one", META)
    assert read(store, K1) == read(store, K1) == b"one"
    _sql(d, "UPDATE Cache SET expire_time = ? WHERE key = ?", (time.time() - 1, K1))
    assert read(store, K1) is None
    store.add(K2, b"two", META)
    assert read(store, K2) == read(store, K2) == b"two"
    # The row keeps its rowid and key, but no longer holds raw bytes: read whole, and refused.
    _sql(d, "UPDATE Cache SET mode = 4 WHERE key = ?", (K2,))
    assert read(store, K2) is None
    assert _rowid(d, K2) is None  # removed as a row fncache did not write
    store.close()


def test_the_rowids_kept_are_bounded_and_every_read_stays_right(tmp_path, monkeypatch, read):
    monkeypatch.setattr(diskcache_module, "_ROWIDS", 8)
    store = DiskStore(str(tmp_path / "s"))
    keys = [f"{i:032x}" for i in range(30)]
    for i, key in enumerate(keys):
        store.add(key, str(i).encode(), META)
    for _ in range(3):
        for i, key in enumerate(keys):
            assert read(store, key) == str(i).encode()
            assert len(store.db._rowids) <= 8
    store.close()


def test_the_read_by_rowid_searches_the_table_not_the_key_index(tmp_path):
    """What makes a hit in a store of a million entries as fast as in a small one: one search of
    the table's B-tree (see q.SELECT_INLINE_AT)."""
    store = DiskStore(str(tmp_path / "s"))
    store.add(K1, b"one", META)
    con = sqlite3.connect(tmp_path / "s" / "cache.db")
    try:
        plan = con.execute("EXPLAIN QUERY PLAN " + q.SELECT_INLINE_AT, (1, K1, 0.0)).fetchall()
    finally:
        con.close()
    assert [row[3] for row in plan] == ["SEARCH Cache USING INTEGER PRIMARY KEY (rowid=?)"]
    store.close()


def test_memoized_hits_across_a_clear_in_another_process_recompute(tmp_path):
    """The user's view: hits, then ``fncache clear`` from another process, then the same calls
    compute again (and give their own results, not another call's)."""
    d = tmp_path / "cache"
    calls = []

    @fncache.memoize(store=str(d))
    def f(x):
        calls.append(x)
        return x * 10

    assert [f(x) for x in range(5)] == [0, 10, 20, 30, 40]
    assert [f(x) for x in range(5)] == [0, 10, 20, 30, 40]
    assert len(calls) == 5
    run_py(write(tmp_path / "clear.py", "import sys\nfrom fncache.cli import main\n"
                 "sys.exit(main(['clear', '--dir', sys.argv[1], '--yes']))\n"), str(d))
    assert [f(x) for x in (4, 3, 2, 1, 0)] == [40, 30, 20, 10, 0]
    assert len(calls) == 10
