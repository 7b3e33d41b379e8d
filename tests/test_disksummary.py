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


def _table(store):
    return sorted(_sql(store, "SELECT fn, py, py_known, damaged, entry, rows, size, newest, oldest,"
                              " used, access, uses FROM fncache_summary"), key=repr)


def _from_rows(store):
    import fncache.stores._disksql as q

    return sorted((tuple(r[:12]) for r in _sql(store, q.SUMMARY_BOUNDS_ALL)), key=repr)


ODD_METAS = [
    {"function": "m:f", "python": "3.11"},
    {"function": "m:f"},  # no Python version
    {"function": "m:f", "python": None},
    {"function": "m:f", "python": "3.11-and-more-than-sixteen"},
    {"function": "m:g", "python": 3},
    {"function": "m:f\u00e9", "python": "3.11"},  # not ASCII: grouped by SQL
    {"function": "m:" + "x" * 70_000, "python": "3.11"},  # shortened when written
    {"function": "m:" + "y" * 70_000, "shown": {"function": "m:" + "y" * 70_000}},  # only the top
    {"function": "m:" + "z" * 2_000, "python": "3.11"},  # long, not shortened
    {"function": "", "python": "3.11"},
    {"python": "3.11"},  # no function
    {"function": None, "python": "3.11"},  # damaged: the name is not text
    {"function": "m:f", "python": "3.11", "created": 1_700_000_000},
    {"function": "m:f", "python": "3.11", "created": "yesterday"},  # damaged
    {"function": "m:f", "python": "3.11", "x": float("nan")},  # not JSON to SQLite
    {"function": "m:f", "python": "3.11", "args": [[[[1]]]] * 20},
]


def test_fncaches_own_writes_are_summarised_as_the_rows_say(tmp_path):
    """fncache adds its own entries to the summary from what it wrote (no trigger): the summary
    equals the one SQL computes from the rows, field for field, for names, versions and times of
    every shape; and deleting every entry leaves it empty (each row was in the group the delete
    trigger subtracts it from)."""
    store = DiskStore(str(tmp_path / "s"), disk_min_file_size=64)
    keys = []
    for i, meta in enumerate(ODD_METAS):
        for value in (b"", b"v" * (i + 1), b"f" * 100):  # empty, inline, a value file
            keys.append(uuid.uuid4().hex)
            store.add(keys[-1], value, dict(meta))
    store.set(keys[0], b"replaced", dict(ODD_METAS[1]))  # the update trigger's path
    store.add(keys[1], b"kept", dict(ODD_METAS[0]))  # taken: no change
    assert _table(store) == _from_rows(store)
    assert store.summary() == summarize(store.listing())
    assert {s.damaged for s in store.summary()} == {True, False}
    for key in keys:
        store.delete(key)
    assert _table(store) == [] and store.summary() == []


def test_a_summary_made_by_other_statements_is_rebuilt(tmp_path, caplog):
    """A store whose summary triggers are not this version's (an older fncache: its insert trigger
    counted every row) has them made anew, from the rows, when it is opened for writing: no entry
    is counted twice."""
    import fncache.stores._disksql as q

    store = _store(tmp_path)
    store.close()
    old = q.SUMMARY_SCHEMA[1].replace(f" WHEN NEW.{q.META_COLUMN} IS NULL", "", 1)
    _sql(store, "DROP TRIGGER fncache_summary_insert")
    _sql(store, old)
    with caplog.at_level("WARNING", logger="fncache"):
        store = DiskStore(store.directory)
        store.add(uuid.uuid4().hex, b"x", META)
    assert "another version" in caplog.text
    defined = dict(_sql(store, "SELECT name, sql FROM sqlite_master WHERE name LIKE 'fncache_%'"))
    assert defined == q.SUMMARY_DEFINITIONS
    assert store.summary()[0].entries == 6
    assert _table(store) == _from_rows(store)


def test_a_prune_within_the_limits_reads_no_entry(tmp_path, monkeypatch):
    """``prune`` (and ``Memory.reduce_size``) on a store within its size, count and age limits is
    answered by the summary, without listing the entries; past a limit it picks from the entries,
    least recently active first."""
    from fncache.stores.prune import plan_prune

    store = _store(tmp_path)  # 5 entries of 1 to 5 bytes
    listed = []
    real = type(store).entries

    def entries(self):
        listed.append(1)
        yield from real(self)

    monkeypatch.setattr(type(store), "entries", entries)
    assert plan_prune(store, 15) == [] and plan_prune(store, max_items=5) == []
    assert plan_prune(store, older_than=3600) == [] and plan_prune(store, 100, max_items=9) == []
    assert plan_prune(store, 15, entries=store.listing()) == []  # as the command line calls it
    assert listed == []
    picked = plan_prune(store, 14)
    assert listed and [e.size for e in picked] == [1]
    assert len(plan_prune(store, max_items=3)) == 2


def test_planted_summary_values_of_the_wrong_type_are_rebuilt(tmp_path, caplog):
    """SQLite keeps whatever a planted row gives a column: a count of text, a time of text, a name
    that is not UTF-8 (read as its bytes). Such a summary is damaged: rebuilt, never formatted."""
    store = _store(tmp_path)
    for planted in ("fn = CAST(x'ff80' AS TEXT)", "py = CAST(x'ff80' AS TEXT)", "size = 'many'",
                    "newest = 'today'", "uses = 1.5", "used = ''", "access = x''"):
        _sql(store, f"UPDATE fncache_summary SET {planted}")
        with caplog.at_level("WARNING", logger="fncache"):
            assert store.summary() == summarize(store.listing()), planted
        assert store.summary()[0].function == "m:f"
    assert caplog.text.count("rebuilt") == 7
    out = subprocess.run([sys.executable, "-m", "fncache", "ls", "--dir", store.directory],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "m:f" in out.stdout, out.stderr


def test_an_entry_naming_its_function_in_bytes_that_are_not_utf8_is_summarised_as_damaged(
        tmp_path):
    """A rebuild reads the planted name from the entry's metadata too: the summary then stays
    unused and the listing, which lists that entry as damaged, is summarised instead."""
    store = _store(tmp_path)
    (key,) = _sql(store, "SELECT key FROM Cache LIMIT 1")[0]
    _sql(store, "UPDATE Cache SET fncache_meta = ? WHERE key = ?",
         (b'{"function": "\xff\x80", "python": "3.11"}', key))
    summary = store.summary()
    assert summary == summarize(store.listing())
    assert sorted((s.function, s.entries, s.damaged) for s in summary) == [("", 1, True),
                                                                          ("m:f", 4, False)]
    for command in ("info", "ls"):
        out = subprocess.run([sys.executable, "-m", "fncache", command, "--dir", store.directory],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr


def test_planted_counts_at_the_integer_limit_are_rebuilt(tmp_path):
    """Counts whose sum overflows SQLite's integers failed the check of the summary (SUM) and with
    it every command that reads the summary; they are now one more damaged summary."""
    store = _store(tmp_path)
    _sql(store, "INSERT INTO fncache_summary SELECT 'm:g', py, py_known, damaged, entry, ?, size,"
                " newest, oldest, used, access, uses, stale FROM fncache_summary", (2**63 - 1,))
    assert store.summary() == summarize(store.listing())
    assert [(s.function, s.entries) for s in store.summary()] == [("m:f", 5)]


def test_a_view_planted_in_the_summarys_place_is_dropped_and_the_summary_rebuilt(tmp_path):
    """A view (or an index) holding one of the summary's names, in any case (SQLite's names ignore
    it), is dropped as what it is when the summary is rebuilt: ``DROP TABLE`` of a view failed, and
    with it every write, ``clear`` and ``prune`` of the store."""
    for name in ("fncache_summary", "FNCACHE_SUMMARY"):
        store = _store(tmp_path / name)
        _sql(store, "ALTER TABLE fncache_summary RENAME TO planted")
        _sql(store, f"CREATE VIEW {name} AS SELECT * FROM planted")
        _sql(store, "CREATE INDEX fncache_summary_use ON planted(fn)")
        store.close()
        store = DiskStore(store.directory)
        store.add(uuid.uuid4().hex, b"x", META)  # a write: the summary is made anew first
        assert store.summary() == summarize(store.listing())
        assert store.summary()[0].entries == 6
        kinds = _sql(store, "SELECT type, name FROM sqlite_master WHERE name LIKE 'fncache_summ%'")
        assert ("table", "fncache_summary") in kinds and ("view", name) not in kinds
        out = subprocess.run([sys.executable, "-m", "fncache", "clear", "--dir", store.directory,
                              "--yes"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert "removed 6 entries" in out.stdout
        assert len(store) == 0 and store.summary() == []


def test_a_bound_planted_null_stops_no_delete_and_is_not_trusted(tmp_path):
    """A group's ``oldest`` or ``newest`` set to NULL made the delete trigger's staleness test
    unknown, which the column's NOT NULL refused: every delete and replacement of an entry of that
    function failed (``prune``, a write over an entry). The group is now stale, and the summary
    with a NULL bound is damaged (its entries always have times): rebuilt when read."""
    for bound in ("oldest", "newest"):
        store = _store(tmp_path / bound)
        keys = [info.key for info in store.listing()]
        _sql(store, f"UPDATE fncache_summary SET {bound} = NULL")
        assert store.summary() == summarize(store.listing())  # not read as a time of 0
        _sql(store, f"UPDATE fncache_summary SET {bound} = NULL")
        store.set(keys[0], b"replaced", META)  # the update trigger
        assert store.delete(keys[1])  # the delete trigger
        assert store.summary() == summarize(store.listing())
        assert store.summary()[0].entries == 4
        _sql(store, f"UPDATE fncache_summary SET {bound} = NULL")
        out = subprocess.run([sys.executable, "-m", "fncache", "prune", "--dir", store.directory,
                              "--max-size", "3B", "--yes"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert len(store) < 4
        assert store.summary() == summarize(store.listing())


def test_delete_many_removes_listed_keys_in_batches_and_keeps_the_summary(tmp_path, monkeypatch):
    """``prune`` and a filtered ``clear`` remove what they listed with ``delete_many``: a batch of
    keys per transaction (one transaction per key made pruning a large store take minutes), taken
    out of the summary in one statement, value files removed, and the summary's delete trigger
    back in place afterwards."""
    import os

    from fncache.stores import _diskbulk

    monkeypatch.setattr(_diskbulk, "DELETE_BATCH", 7)
    store = _store(tmp_path, n=20)
    for i in range(10):  # large enough to be files of their own
        store.add(uuid.uuid4().hex, bytes([i]) * 100_000, dict(META, function="m:g"))
    def files() -> int:
        return sum(len(names) for _, _, names in os.walk(store.directory))

    before = files()
    listed = list(store.listing())
    doomed = [e.key for e in listed if e.function == "m:g"][:6] + \
        [e.key for e in listed if e.function == "m:f"][:14]
    assert store.delete_many([*doomed, doomed[0], "0" * 32, "<row 99999: key not readable>"]) == 20
    left = list(store.listing())
    assert len(left) == 10 and not {e.key for e in left} & set(doomed)
    # The table itself agrees (a summary() that disagreed would be rebuilt, hiding a wrong count).
    assert sorted(_sql(store, "SELECT fn, rows FROM fncache_summary")) == [("m:f", 6), ("m:g", 4)]
    assert store.summary() == summarize(left)
    assert sorted((s.function, s.entries) for s in store.summary()) == [("m:f", 6), ("m:g", 4)]
    assert files() == before - 6  # the six value files went with their rows
    assert store.delete(left[0].key)  # the trigger is back: a single delete is summarised
    assert store.summary() == summarize(store.listing())
    triggers = _sql(store, "SELECT name FROM sqlite_master WHERE name = 'fncache_summary_delete'")
    assert triggers == [("fncache_summary_delete",)]
