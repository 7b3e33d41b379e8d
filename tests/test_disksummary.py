"""The disk store's summary table: kept by triggers, checked against the rows, rebuilt when damaged,
and never what ``prune`` or ``clear`` decide on."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
import uuid

import diskcache

from fncache.stores._base import summarize
from fncache.stores.disk import DiskStore

META = {"function": "m:f", "python": "3.11"}


def _store(tmp_path, n=5, function="m:f"):
    store = DiskStore(str(tmp_path / "s"))
    for i in range(n):
        store.add(uuid.uuid4().hex, b"v" * (i + 1), dict(META, function=function))
    return store


def _sql(store, statement, params=()):
    con = sqlite3.connect(store.directory + "/cache.db", isolation_level=None)
    try:
        return con.execute(statement, params).fetchall()
    finally:
        con.close()


def test_planted_counts_are_rebuilt_from_the_rows(tmp_path, caplog):
    """A summary whose counts disagree with the rows (planted, or written by a writer without the
    triggers) is rebuilt from the rows, with a warning, and then agrees with the listing."""
    store = _store(tmp_path)
    _sql(store, "UPDATE fncache_summary SET rows = 1000000, size = 1 << 40")
    with caplog.at_level("WARNING", logger="fncache"):
        assert store.summary() == summarize(store.listing())
    assert "rebuilt" in caplog.text
    assert store.summary()[0].entries == 5


def test_a_missing_summary_table_is_rebuilt(tmp_path):
    """Dropping the summary table and its triggers (a store from before them) costs one rebuild."""
    store = _store(tmp_path)
    _sql(store, "DROP TABLE fncache_summary")
    assert store.summary() == summarize(store.listing())
    store.add(uuid.uuid4().hex, b"x", META)
    assert store.summary() == summarize(store.listing())


def test_prune_never_removes_entries_on_a_planted_summary(tmp_path):
    """``fncache prune --max-size`` decides on the entries themselves: a summary claiming the store
    is huge removes nothing from a store within the limit."""
    store = _store(tmp_path)
    _sql(store, "UPDATE fncache_summary SET size = 1 << 40")
    out = subprocess.run([sys.executable, "-m", "fncache", "prune", "--dir", store.directory,
                          "--max-size", "1MB", "--yes"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "removed 0 entries" in out.stdout
    assert len(store) == 5


def test_rows_written_by_plain_diskcache_are_counted(tmp_path):
    """Rows that diskcache itself writes or evicts (not through fncache) keep the summary right:
    the triggers are in the database."""
    store = _store(tmp_path)
    store.close()
    with diskcache.Cache(store.directory) as dc:
        dc.set("plain", b"not an entry")
        for key in list(dc.iterkeys())[:2]:
            if key != "plain":
                dc.delete(key)
    store = DiskStore(store.directory)
    assert store.summary() == summarize(store.listing())
    assert store.summary()[0].entries == 3


def test_expired_entries_are_left_out_as_the_listing_leaves_them(tmp_path):
    """An expired entry that no write has removed yet is not in the summary, as not in a listing."""
    store = _store(tmp_path, n=2)
    store.add(uuid.uuid4().hex, b"e", META, expire=0.001)
    time.sleep(0.01)
    assert store.summary() == summarize(store.listing())
    assert store.summary()[0].entries == 2


def test_damaged_metadata_is_its_own_row(tmp_path):
    """Entries whose metadata is unreadable are summarised in one damaged row, as listed."""
    store = _store(tmp_path, n=2)
    key = uuid.uuid4().hex
    store.add(key, b"d", META)
    _sql(store, "UPDATE Cache SET fncache_meta = X'7b6e6f7065' WHERE key = ?", (key,))
    assert store.summary() == summarize(store.listing())
    assert [s.damaged for s in store.summary()] == [True, False]
