"""An attacker with write access to a disk store, against fncache.

Every place the disk store reads a byte from is planted: rows of each diskcache storage mode, inline
and as value files, lock records, metadata, value-file names (absolute, ``../``, symlinks, FIFOs).
The payload is harmless: unpickling it creates a marker file. Each test asserts that the marker is
never created, that the call returns the right (recomputed) value and that nothing outside the store
is touched, with and without a secret. The planting is done the way an attacker would: with
diskcache's own ``Cache.set`` and with plain SQL on ``cache.db``.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import pickle
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import diskcache
import pytest

import fncache

from .helpers import Plant, cli, fncache_warnings, small_value

SECRET = b"correct horse battery staple"
SECRETS = pytest.mark.parametrize("secret", [None, SECRET], ids=["no-secret", "secret"])
HEX28 = "0123456789abcdef0123456789ab"
PRECIOUS = b"precious user data"




def _big(x: int) -> bytes:
    return bytes([x]) * 100_000


def _value_once_planted(x: int, flag: str) -> dict[str, int]:
    """small_value(x), returned once ``flag`` exists (the attacker has planted): the computation
    lasts as long as the attack takes, however slow the machine."""
    deadline = time.monotonic() + 60  # a guard against a hang only
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.005)
    return {"x": x, "double": 2 * x}


def _sql(cache: pathlib.Path, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Run one statement on the store's database from outside, as an attacker would."""
    con = sqlite3.connect(cache / "cache.db", timeout=30, isolation_level=None)
    try:
        return con.execute(statement, params).fetchall()
    finally:
        con.close()


def _plant_row(cache: pathlib.Path, key: str, *, mode: int, value: Any = None,
               filename: str | None = None, meta: Any = None, tag: str | None = None,
               expire_time: float | None = None) -> None:
    """Replace the row of ``key`` with the given columns (no file is created or removed)."""
    now = time.time()
    _sql(cache, "DELETE FROM Cache WHERE key = ? AND raw = 1", (key,))
    _sql(cache, "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag,"
                " size, mode, filename, value, fncache_meta) VALUES (?, 1, ?, ?, ?, 0, ?, 0, ?, ?, ?, ?)",
         (key, now, expire_time, now, tag, mode, filename, value, meta))


def _plant_with_diskcache(cache: pathlib.Path, key: str, value: Any) -> None:
    """Overwrite the row of ``key`` with diskcache's own ``set`` (it picks the storage mode)."""
    with diskcache.Cache(str(cache)) as dc:
        dc.set(key, value)


@contextmanager
def _no_hang(seconds: int = 20) -> Iterator[None]:
    """Fail instead of blocking forever (a FIFO opened for reading blocks until a writer comes)."""
    def fail(*_: Any) -> None:
        raise TimeoutError(f"blocked for {seconds}s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- rows of every storage mode --------------------------------------------------------------------

# How each planted row is made: ("dc", value) through diskcache's Cache.set, which picks the mode
# (pickle, text, raw; inline below 32 KiB, else a value file), or ("sql", mode, value) directly.
ROWS: dict[str, Callable[[pathlib.Path], tuple[Any, ...]]] = {
    "pickle mode inline": lambda m: ("dc", Plant(m)),
    "pickle mode in a value file": lambda m: ("dc", [Plant(m), b"x" * 100_000]),
    "text mode in a value file": lambda m: ("dc", "x" * 100_000),
    "raw mode holding text": lambda m: ("dc", "short text"),
    "raw mode holding a bare pickle": lambda m: ("dc", pickle.dumps(Plant(m))),
    "binary value file holding a bare pickle": lambda m: ("dc", pickle.dumps(Plant(m)) + bytes(99_999)),
    "pickle mode number on inline bytes": lambda m: ("sql", 4, pickle.dumps(Plant(m))),
    "unknown mode": lambda m: ("sql", 9, pickle.dumps(Plant(m))),
}
READ_PATHS: dict[str, dict[str, Any]] = {
    "get": {},
    "mmap": {"mmap_mode": "r"},
    "size_limit": {"store_options": {"size_limit": 10**9}},
}


def _plant(cache: pathlib.Path, key: str, how: tuple[Any, ...], meta: bytes) -> None:
    if how[0] == "dc":
        _plant_with_diskcache(cache, key, how[1])
    else:
        _plant_row(cache, key, mode=how[1], value=how[2], meta=meta)


def test_a_planted_schema_with_a_text_mode_column_does_not_make_its_rows_readable(tmp_path,
                                                                                    caplog):
    """A database whose schema was edited to give ``mode`` text affinity keeps a mode of ``'1'``
    as text: not raw bytes to fncache (as Python compares it), so the row is removed unread and
    the call recomputed, on the hit path that reads a small entry's value in SQL too."""
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(small_value)
    assert f(3) == small_value(3)
    key = f.key(3)
    frame, meta = _sql(cache, "SELECT value, fncache_meta FROM Cache WHERE key = ?", (key,))[0]
    f.store.close()
    con = sqlite3.connect(cache / "cache.db", isolation_level=None)
    try:
        (schema,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'Cache'").fetchone()
        assert " mode INTEGER" in schema
        con.execute("PRAGMA writable_schema = ON")
        con.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'Cache'",
                    (schema.replace(" mode INTEGER", " mode TEXT"),))
        con.execute("PRAGMA writable_schema = OFF")
    finally:
        con.close()
    _plant_row(cache, key, mode="1", value=frame, meta=meta)  # type: ignore[arg-type]
    assert _sql(cache, "SELECT typeof(mode) FROM Cache WHERE key = ?", (key,)) == [("text",)]
    calls = f.cache_info().misses
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(3) == small_value(3)
    assert f.cache_info().misses == calls + 1
    assert any("not raw bytes" in w for w in fncache_warnings(caplog))


# Text that is not UTF-8, which SQLite stores as given and Python's sqlite3 cannot decode.
NOT_UTF8 = "CAST(x'ff80' AS TEXT)"
NOT_UTF8_ROWS = {
    "value": f"UPDATE Cache SET value = {NOT_UTF8} WHERE key = ?",
    "value file name": f"UPDATE Cache SET mode = 2, value = NULL, filename = {NOT_UTF8} WHERE key = ?",
    "mode": f"UPDATE Cache SET mode = {NOT_UTF8} WHERE key = ?",
}


@pytest.mark.parametrize("column", list(NOT_UTF8_ROWS))
def test_a_planted_column_of_text_that_is_not_utf8_is_removed_and_the_call_hits_again(
        tmp_path, caplog, column):
    """Such a row failed every read of its key (a store error: the call recomputed each time and
    the row stayed); now it is damage like any other planted row: removed, recomputed, stored,
    and the next call hits."""
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(small_value)
    assert f(3) == f(3) == small_value(3)  # the second read goes by the row's id (see _disksql)
    _sql(cache, NOT_UTF8_ROWS[column], (f.key(3),))
    misses = f.cache_info().misses
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(3) == small_value(3)
        assert f(3) == small_value(3)
    assert f.cache_info().misses == misses + 1
    assert not [w for w in fncache_warnings(caplog) if "failed" in w]
    assert _sql(cache, "SELECT count(*) FROM Cache WHERE typeof(value) = 'text'"
                " OR typeof(filename) = 'text' OR typeof(mode) = 'text'") == [(0,)]


def test_a_write_over_a_planted_file_name_that_is_not_utf8_replaces_the_row(tmp_path):
    """The write path reads the row it replaces (its file goes after the commit) on diskcache's
    connection, which failed on such a row: every store of the key failed."""
    from fncache.stores.disk import DiskStore

    cache = tmp_path / "cache"
    store = DiskStore(str(cache))
    store.add("k" * 32, b"old", {"function": "m:f"})
    _sql(cache, NOT_UTF8_ROWS["value file name"], ("k" * 32,))
    store.set("k" * 32, b"new", {"function": "m:f"})
    assert store.get("k" * 32) == b"new"
    assert store.clear() == 1
    store.close()


def test_planted_keys_and_metadata_that_are_not_utf8_are_listed_as_damaged(tmp_path):
    """One such row failed the whole listing (``ls --function``, ``prune``, ``clear`` with a
    filter): it is listed as damaged, the other entries as they are, and ``clear`` removes all."""
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(small_value)
    for x in range(3):
        f(x)
    (rowid,), = _sql(cache, "SELECT rowid FROM Cache WHERE key = ?", (f.key(0),))
    _sql(cache, f"UPDATE Cache SET key = {NOT_UTF8} WHERE key = ?", (f.key(0),))
    _sql(cache, f"UPDATE Cache SET fncache_meta = {NOT_UTF8} WHERE key = ?", (f.key(1),))
    listed = list(f.store.entries())
    assert len(listed) == 3
    assert sorted(e.damaged for e in listed) == [False, True, True]
    assert [e.key for e in listed if not e.damaged] == [f.key(2)]
    out = cli("prune", "--dir", str(cache), "--older-than", "0s", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    unnamed = f"<row {rowid}: key not readable>"  # the name ``DiskStore.delete`` takes back
    assert sorted(json.loads(out.stdout)["keys"]) == sorted([unnamed, f.key(1), f.key(2)]), \
        out.stdout
    out = cli("clear", "--dir", str(cache), "--yes")
    assert out.returncode == 0, out.stderr
    assert _sql(cache, "SELECT count(*) FROM Cache WHERE fncache_meta IS NOT NULL") == [(0,)]


@pytest.mark.parametrize("rowid", [0, -1, -(2**63), 2**63 - 1])
def test_a_row_planted_at_any_rowid_is_listed_and_cleared(tmp_path, rowid):
    """Listing and clearing go through the rows in batches of rowids: from the smallest SQLite
    allows, to the largest (they started after rowid 0, so such a row stayed through ``clear``)."""
    from fncache.stores.disk import DiskStore

    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(small_value)
    for x in range(3):
        f(x)
    _sql(cache, "UPDATE Cache SET rowid = ? WHERE key = ?", (rowid, f.key(1)))
    store = DiskStore(str(cache))
    assert sorted(e.key for e in store.entries()) == sorted(f.key(x) for x in range(3))
    assert store.clear_function(f.function_id) == 3
    assert _sql(cache, "SELECT count(*) FROM Cache WHERE fncache_meta IS NOT NULL") == [(0,)]
    for x in range(3):
        f(x)
    _sql(cache, "UPDATE Cache SET rowid = ? WHERE key = ?", (rowid, f.key(2)))
    assert store.clear() == 3
    assert _sql(cache, "SELECT count(*) FROM Cache") == [(0,)]
    store.close()


@pytest.mark.parametrize("planted", [
    "UPDATE Settings SET value = 'many' WHERE key = 'disk_min_file_size'",
    "UPDATE Settings SET value = NULL WHERE key = 'disk_min_file_size'",
    "UPDATE Settings SET value = 9e999 WHERE key = 'disk_min_file_size'",
    "INSERT INTO Settings(key, value) VALUES (CAST(x'ff80' AS TEXT), 1)",
    "INSERT INTO Settings(key, value) VALUES (x'ff80', 1)",
    "UPDATE Settings SET value = 'many' WHERE key = 'sqlite_mmap_size'",
    "UPDATE Settings SET value = CAST(x'ff80' AS TEXT) WHERE key = 'sqlite_cache_size'",
    "UPDATE Settings SET value = '1; DROP TABLE Cache' WHERE key = 'sqlite_synchronous'",
    "UPDATE Settings SET value = 'sideways' WHERE key = 'sqlite_journal_mode'",
    "UPDATE Settings SET value = x'00' WHERE key = 'sqlite_auto_vacuum'",
    "INSERT INTO Settings(key, value) VALUES ('sqlite_x; DROP TABLE Cache', 1)",
    "INSERT INTO Settings(key, value) VALUES ('sqlite_user_version', '1; DROP TABLE Cache')",
    # pragmas diskcache would run on every writer: each write waited for ever (or 10-15 s), or
    # SQLite's temporary files went to a folder outside the store
    "INSERT INTO Settings(key, value) VALUES ('sqlite_locking_mode', 'exclusive')",
    "INSERT INTO Settings(key, value) VALUES ('sqlite_busy_timeout', 2000000000)",
    "INSERT INTO Settings(key, value) VALUES ('sqlite_temp_store_directory', 'tmpx')",
    # a mode, but not the database's: every write waited 60 s for the switch, then failed
    "UPDATE Settings SET value = 'delete' WHERE key = 'sqlite_journal_mode'",
])
def test_planted_settings_rows_leave_the_store_usable(tmp_path, planted):
    """A Settings row that is not a setting (a key that is not text, a size that is not a number,
    a pragma's value or name diskcache puts into the pragma it runs on each connection it opens)
    stopped the store from opening or from writing: every command failed, every call recomputed.
    Such rows are put back to diskcache's defaults or removed when the store is opened."""
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(small_value)
    f(1)
    f.store.close()
    _sql(cache, planted)
    g = fncache.memoize(store=str(cache))(small_value)
    assert g(1) == small_value(1) and g.cache_info().hits == 1
    assert g(2) == small_value(2) and g.cache_info().misses == 1
    assert g(2) == small_value(2) and g.cache_info().hits == 2  # it was stored
    g.store.close()
    for command in (["info"], ["ls"], ["clear", "--yes"]):
        out = cli(*command, "--dir", str(cache))
        assert out.returncode == 0, (command, out.stderr)
    from fncache.stores._diskopen import setting_ok

    assert all(setting_ok(k, v) for k, v in _sql(cache, "SELECT key, value FROM Settings")
               if type(k) is str and type(v) is not bytes)
    assert _sql(cache, "SELECT count(*) FROM Settings WHERE typeof(key) != 'text'") == [(0,)]


def test_the_synchronous_settings_kept_are_the_ones_read_as_a_level():
    """What the repair at open keeps (``setting_ok``) and what the store reads as SQLite's level
    (``synchronous_level``) agree: a value kept is read as itself, one put right was no level."""
    from fncache.stores._diskopen import setting_ok, synchronous_level

    levels = {0: 0, 3: 3, "2": 2, " 1 ": 1, "OFF": 0, "normal": 1, "Full": 2, "EXTRA": 3}
    for value, level in levels.items():
        assert setting_ok("sqlite_synchronous", value), value
        assert synchronous_level(value) == level, value
    for value in (4, -1, 1.0, True, "garbage", "1; DROP TABLE Cache", b"1", None, "\u00b2"):
        assert not setting_ok("sqlite_synchronous", value), value
        assert synchronous_level(value) == 1, value


def test_settings_of_the_users_own_are_left_as_they_are(tmp_path, caplog):
    from fncache.stores.disk import DiskStore

    custom = {"sqlite_cache_size": -4000, "sqlite_mmap_size": 0, "sqlite_synchronous": 2,
              "sqlite_journal_mode": "WAL", "sqlite_auto_vacuum": 1}
    first = DiskStore(str(tmp_path / "s"), **custom)
    first.add("j" * 32, b"v", {"function": "m:f"})
    first.close()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        store = DiskStore(str(tmp_path / "s"))
        store.add("k" * 32, b"v", {"function": "m:f"})
        store.close()
    assert not fncache_warnings(caplog)
    stored = dict(_sql(tmp_path / "s", "SELECT key, value FROM Settings"))
    assert {k: stored[k] for k in custom} == custom


def test_explain_shows_a_planted_creation_time_no_clock_gives(tmp_path):
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(small_value)
    f(1)
    (meta,) = _sql(cache, "SELECT fncache_meta FROM Cache WHERE key = ?", (f.key(1),))[0]
    planted = json.loads(meta)
    planted["created"] = -1e308
    _sql(cache, "UPDATE Cache SET fncache_meta = ? WHERE key = ?",
         (json.dumps(planted).encode(), f.key(1)))
    assert "-1e+308" in str(f.explain(2))  # a miss, whose nearest entry is the planted one


def test_planted_sizes_near_the_integer_limit_do_not_stop_a_clear(tmp_path):
    """SQLite's SUM() fails on an overflow: the sizes a batch removes from the summary are summed
    as floats, and the summary, left of the wrong type, is rebuilt."""
    from fncache.stores.disk import DiskStore

    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(small_value)
    for x in range(3):
        f(x)
    _sql(cache, "UPDATE Cache SET size = ?, access_count = ? WHERE fncache_meta IS NOT NULL",
         (2**62, 2**62))
    store = DiskStore(str(cache))
    assert store.clear_function(f.function_id) == 3
    assert store.summary() == []
    for x in range(2):
        f(x)
    assert [(s.function, s.entries) for s in store.summary()] == [(f.function_id, 2)]
    store.close()


def test_the_planted_pickle_rows_are_live_attacks(tmp_path):
    """Sanity check of the payloads: diskcache's own Cache.get runs them (what fncache must not use)."""
    cache = tmp_path / "cache"
    for name in ("pickle mode inline", "pickle mode in a value file"):
        marker = tmp_path / name.replace(" ", "_")
        with diskcache.Cache(str(cache)) as dc:
            dc.set("k", ROWS[name](marker)[1])
            dc.get("k")
        assert marker.exists(), name


@SECRETS
@pytest.mark.parametrize("path", list(READ_PATHS))
@pytest.mark.parametrize("row", list(ROWS))
def test_planted_row_of_any_mode_is_removed_unread_and_recomputed(tmp_path, caplog, row, path,
                                                                   secret):
    """A row that is not raw bytes or a value file is never loaded: logged, removed, recomputed."""
    marker = tmp_path / "PWNED"
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache), secret=secret, **READ_PATHS[path])(small_value)
    assert f(3) == small_value(3)
    key = f.key(3)
    meta = _sql(cache, "SELECT fncache_meta FROM Cache WHERE key = ?", (key,))[0][0]
    _plant(cache, key, ROWS[row](marker), meta)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(3) == small_value(3)
    assert not marker.exists()
    assert any("not one fncache wrote" in w or "rejected" in w for w in fncache_warnings(caplog))
    # The planted row was replaced by fncache's own entry, which the next call hits quietly.
    assert _sql(cache, "SELECT mode FROM Cache WHERE key = ?", (key,))[0][0] == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(3) == small_value(3)
    assert fncache_warnings(caplog) == [] and f.cache_info().hits >= 1
    assert not marker.exists()


@pytest.mark.slow
@SECRETS
def test_planted_rows_are_not_loaded_by_listing_or_clearing(tmp_path, secret):
    """info, ls, clear and prune read metadata only: planted pickle rows never run there either."""
    marker = tmp_path / "PWNED"
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache), secret=secret)(small_value)
    for x, row in enumerate(ROWS):
        f(x)
        key = f.key(x)
        meta = _sql(cache, "SELECT fncache_meta FROM Cache WHERE key = ?", (key,))[0][0]
        _plant(cache, key, ROWS[row](marker), meta)
    for args in (["info"], ["ls"], ["prune", "--max-size", "1B", "-y"], ["clear", "-y"]):
        proc = cli(*args, "--dir", str(cache))
        assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    assert _sql(cache, "SELECT COUNT(*) FROM Cache")[0][0] == 0


# -- lock records ----------------------------------------------------------------------------------


@SECRETS
def test_planted_lock_record_is_replaced_unread(tmp_path, secret):
    """A pickle planted as the lease of a key is never loaded; the call takes the lease at once."""
    marker = tmp_path / "PWNED"
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache), secret=secret, lock=True, lock_timeout=30)(small_value)
    f.store.add("0" * 32, b"probe", {"function": "probe"})  # creates the database
    key = f.key(5)
    _plant_with_diskcache(cache, "l:" + key, Plant(marker))  # no expiry: would block for good
    start = time.monotonic()
    assert f(5) == small_value(5)
    assert time.monotonic() - start < 10  # did not wait for a lease that never expires
    assert not marker.exists()


@SECRETS
def test_lock_record_rewritten_while_the_holder_computes_is_never_loaded(tmp_path, secret):
    """A lease overwritten with a pickle during the computation is not read back on release."""
    marker = tmp_path / "PWNED"
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache), secret=secret, lock=True,
                        lock_timeout=30)(_value_once_planted)
    f.store.add("0" * 32, b"probe", {"function": "probe"})
    flag = str(tmp_path / "planted")
    name = "l:" + f.key(6, flag)
    planted = threading.Event()

    def attacker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if _sql(cache, "SELECT 1 FROM Cache WHERE key = ?", (name,)):
                _plant_with_diskcache(cache, name, Plant(marker))
                planted.set()
                open(flag, "w").close()  # the holder may finish now
                return
            time.sleep(0.005)

    t = threading.Thread(target=attacker)
    t.start()
    assert f(6, flag) == small_value(6)
    t.join()
    assert planted.is_set()
    assert not marker.exists()
    assert _sql(cache, "SELECT mode FROM Cache WHERE key = ?", (name,))[0][0] == 4  # still planted
    # The next computation of that key replaces the planted lease without loading it.
    f.store.delete(f.key(6, flag))
    start = time.monotonic()
    assert f(6, flag) == small_value(6)
    assert time.monotonic() - start < 10
    assert not marker.exists()


# -- metadata --------------------------------------------------------------------------------------

BAD_META: list[Any] = [
    b'{"function": "m:f", "size": "big", "created": 1.0}',
    b'{"function": "m:f", "size": 10, "created": [1]}',
    b'{"function": 5, "size": 10, "created": 1.0}',
    b'{"function": "m:f", "size": -1, "created": 1.0}',
    b'{"function": "m:f", "size": 10, "created": NaN}',
    b"[" * 100_000 + b"]" * 100_000,
    b"null",
    b"\xff\xfe not json",
]


@pytest.mark.slow
def test_malformed_metadata_is_listed_as_damaged_and_never_crashes_a_command(tmp_path):
    """Valid JSON of the wrong types (or no JSON) shows as damaged in info/ls; clear and prune work."""
    marker = tmp_path / "PWNED"
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(small_value)
    for x, meta in enumerate([*BAD_META, pickle.dumps(Plant(marker))]):
        f(x)
        _sql(cache, "UPDATE Cache SET fncache_meta = ? WHERE key = ?", (meta, f.key(x)))
    f(100)  # one healthy entry
    n_bad = len(BAD_META) + 1
    proc = cli("info", "--dir", str(cache), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["entries"] == n_bad + 1 and data["damaged"] == n_bad
    proc = cli("ls", "--dir", str(cache))
    assert proc.returncode == 0 and "(damaged)" in proc.stdout, proc.stdout + proc.stderr
    proc = cli("clear", "--dir", str(cache), "--older-than", "1h", "-y")
    assert proc.returncode == 0, proc.stderr
    proc = cli("clear", "--dir", str(cache), "--function", "(damaged)", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    proc = cli("prune", "--dir", str(cache), "--max-size", "0", "-y")
    assert proc.returncode == 0, proc.stderr
    assert len(f.store) == 0
    assert not marker.exists()


# -- value file names: nothing outside the store ---------------------------------------------------


def _victims(tmp_path: pathlib.Path) -> list[pathlib.Path]:
    """Files outside the store that an attacker wants fncache to read or delete."""
    plain = tmp_path / "outside" / "a" / "b" / "victim.txt"
    shaped = tmp_path / "outside" / "vd" / "ee" / f"{HEX28}.val"
    for p in (plain, shaped):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(PRECIOUS)
    return [plain, shaped]


def _untouched(victims: list[pathlib.Path]) -> None:
    for p in victims:
        assert p.is_file() and p.read_bytes() == PRECIOUS, p
        assert p.parent.is_dir() and p.parent.parent.is_dir()


def _escape(kind: str, cache: pathlib.Path, victims: list[pathlib.Path]) -> str:
    """Arrange the store for one kind of escape; the filename to put in the row."""
    plain, shaped = victims
    inside = cache / "ab" / "cd" / f"{HEX28}.val"
    if kind == "absolute path":
        return str(plain)
    if kind == "../ path":
        return os.path.relpath(plain, cache)
    if kind == "../ inside a value-file name":
        return "ab/cd/../../" + os.path.relpath(plain, cache)
    if kind == "symlinked sub-directory":
        (cache / "ab").symlink_to(shaped.parent.parent, target_is_directory=True)
        return f"ab/ee/{HEX28}.val"
    inside.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlinked value file":
        inside.symlink_to(plain)
    elif kind == "hard link":
        os.link(plain, inside)
    elif kind == "FIFO":
        os.mkfifo(inside)
    return f"ab/cd/{HEX28}.val"


ESCAPES = ["absolute path", "../ path", "../ inside a value-file name", "symlinked sub-directory",
           "symlinked value file", "hard link", "FIFO"]


def _store_with_escape(tmp_path: pathlib.Path, kind: str, secret: bytes | None = None,
                       expire_time: float | None = None, **options: Any) -> tuple[Any, list[pathlib.Path]]:
    cache = tmp_path / "cache"
    victims = _victims(tmp_path)
    f = fncache.memoize(store=str(cache), secret=secret, **options)(small_value)
    assert f(3) == small_value(3)
    key = f.key(3)
    meta = _sql(cache, "SELECT fncache_meta FROM Cache WHERE key = ?", (key,))[0][0]
    _plant_row(cache, key, mode=2, filename=_escape(kind, cache, victims), meta=meta,
               tag=f.function_id, expire_time=expire_time)
    return f, victims


@SECRETS
@pytest.mark.parametrize("mmap_mode", [None, "r"], ids=["read", "mmap"])
@pytest.mark.parametrize("kind", ESCAPES)
def test_read_of_an_escaping_value_file_touches_nothing_outside(tmp_path, caplog, kind, mmap_mode,
                                                                secret):
    """A row naming a file outside the store (or a symlink or FIFO) is refused without blocking; a
    hard link to a file elsewhere is a regular file, read, and rejected by its checksum."""
    f, victims = _store_with_escape(tmp_path, kind, secret, mmap_mode=mmap_mode)
    with _no_hang(), caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(3) == small_value(3)
    expected = "rejected and removed" if kind == "hard link" else "not one fncache wrote"
    assert any(expected in w for w in fncache_warnings(caplog)), fncache_warnings(caplog)
    _untouched(victims)
    with _no_hang():
        assert f(3) == small_value(3)
    assert f.cache_info().hits == 1


@pytest.mark.parametrize("kind", ESCAPES)
def test_clearing_a_function_with_an_escaping_row_touches_nothing_outside(tmp_path, kind):
    """f.clear() removes the planted row but no file outside the store."""
    f, victims = _store_with_escape(tmp_path, kind)
    with _no_hang():
        assert f.clear() == 1
    _untouched(victims)


@pytest.mark.parametrize("kind", ESCAPES)
def test_cull_on_write_of_an_expired_escaping_row_touches_nothing_outside(tmp_path, kind):
    """The expired-row cleanup that ordinary writes run never deletes a file outside the store."""
    f, victims = _store_with_escape(tmp_path, kind, expire_time=time.time() - 10)
    g = fncache.memoize(store=str(tmp_path / "cache"), expire=3600)(_big)
    with _no_hang():
        for x in range(6):
            assert g(x) == _big(x)
    assert not _sql(tmp_path / "cache", "SELECT 1 FROM Cache WHERE key = ?", (f.key(3),))
    _untouched(victims)


@pytest.mark.slow
@pytest.mark.parametrize("command", [["clear", "-y"], ["clear", "--function", "small_value", "-y"],
                                     ["clear", "--older-than", "0s", "-y"],
                                     ["prune", "--max-size", "0", "-y"]],
                         ids=["clear", "clear-function", "clear-older-than", "prune"])
@pytest.mark.parametrize("kind", ESCAPES)
def test_cli_cleanup_of_an_escaping_row_touches_nothing_outside(tmp_path, kind, command):
    """fncache clear/prune remove the planted row (a real subprocess) and no file outside the store."""
    f, victims = _store_with_escape(tmp_path, kind)
    time.sleep(0.05)
    proc = cli(*command, "--dir", str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    assert not _sql(tmp_path / "cache", "SELECT 1 FROM Cache WHERE key = ?", (f.key(3),))
    _untouched(victims)


def test_writes_never_go_through_a_planted_symlinked_sub_directory(tmp_path):
    """A value-file sub-directory replaced by a symlink to elsewhere is not written into."""
    cache = tmp_path / "cache"
    outside = tmp_path / "outside"
    outside.mkdir()
    f = fncache.memoize(store=str(cache))(_big)
    f.store.add("0" * 32, b"probe", {"function": "probe"})
    for a in range(256):  # every first-level sub-directory leads outside
        (cache / f"{a:02x}").symlink_to(outside, target_is_directory=True)
    assert f(1) == _big(1)
    assert list(outside.iterdir()) == []


# -- swapped and replayed entries -----------------------------------------------------------------


@SECRETS
@pytest.mark.parametrize("func", [small_value, _big], ids=["inline", "value file"])
def test_entry_of_one_key_copied_or_swapped_to_another_is_rejected(tmp_path, caplog, func, secret):
    """An entry moved under another key (row contents copied, or value files swapped) never serves
    the other key's value."""
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache), secret=secret)(func)
    f(1), f(2)
    k1, k2 = f.key(1), f.key(2)
    (m1, n1, v1), = _sql(cache, "SELECT mode, filename, value FROM Cache WHERE key = ?", (k1,))
    (m2, n2, v2), = _sql(cache, "SELECT mode, filename, value FROM Cache WHERE key = ?", (k2,))
    _sql(cache, "UPDATE Cache SET mode = ?, filename = ?, value = ? WHERE key = ?", (m2, n2, v2, k1))
    _sql(cache, "UPDATE Cache SET mode = ?, filename = ?, value = ? WHERE key = ?", (m1, n1, v1, k2))
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(1) == func(1)
        assert f(2) == func(2)
    assert len(fncache_warnings(caplog)) >= 2
    assert f(1) == func(1) and f(2) == func(2)


# -- checked bytes are never read again: a value file rewritten in place during the check ----------

_REWRITER = r"""
import os, sys
path, offset, data = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
sys.stdin.readline()                      # the victim is between its signature check and its load
fd = os.open(path, os.O_WRONLY)
os.pwrite(fd, data, offset)               # in place: the victim's shared mapping sees it at once
os.close(fd)
print("done", flush=True)
"""


def _mapped_result(x: int) -> dict[str, Any]:
    import numpy as np

    return {"array": np.full(50_000, x, dtype=np.int64), "note": "n" * 600}


def _forged_head(frame: bytes, key: str, payload: bytes) -> tuple[int, bytes]:
    """(offset, bytes) that rewrite a frame's pickle to ``payload`` with a matching head checksum:
    what someone who can write the value file (and knows the key from its row) can compute."""
    import xxhash

    from fncache import _codec

    h = _codec.read_header(frame)
    header_end = 40 + 8 * len(h.buffer_lens)
    split = h.pickle_len + (-h.pickle_len % 64)
    assert len(payload) <= h.pickle_len
    body = payload + bytes(split - len(payload))  # pickle stops at its STOP opcode
    check = xxhash.xxh3_128(key.encode() + frame[:header_end] + body).digest()
    # head checksum (16 bytes after the full one), then the body from its start: one write.
    region = bytearray(frame[header_end + 16 : h.body_offset + split])
    region[:16] = check
    region[h.body_offset - header_end - 16 :] = body
    return header_end + 16, bytes(region)


def test_mapped_entry_rewritten_in_place_after_its_signature_check_never_runs(tmp_path, monkeypatch):
    """mmap_mode="r" with a secret: a writer of the value file who rewrites its pickle (and head
    checksum) right after the signature was checked cannot make the signed process load it."""
    import hmac
    import subprocess
    import sys

    import numpy as np

    marker = tmp_path / "PWNED"
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache), secret=SECRET, mmap_mode="r")(_mapped_result)
    f(7)
    key = f.key(7)
    (filename,) = _sql(cache, "SELECT filename FROM Cache WHERE key = ?", (key,))[0]
    path = cache / filename
    offset, data = _forged_head(path.read_bytes(), key, pickle.dumps(Plant(marker)))
    rewriter = subprocess.Popen([sys.executable, "-c", _REWRITER, str(path), str(offset), data.hex()],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    real = hmac.compare_digest
    rewrites = []

    def rewrite_during_the_check(a: Any, b: Any) -> bool:
        # The signature has just been computed: the rewrite lands between the check and the load.
        if not rewrites:
            assert rewriter.stdin is not None and rewriter.stdout is not None
            rewriter.stdin.write("go\n")
            rewriter.stdin.flush()
            rewrites.append(rewriter.stdout.readline())
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", rewrite_during_the_check)
    try:
        value = f(7)
    finally:
        monkeypatch.undo()
        rewriter.kill()
        rewriter.wait()
    assert rewrites == ["done\n"], "the rewrite did not happen during the read"
    assert not marker.exists()
    assert value["note"] == "n" * 600 and np.array_equal(value["array"], np.full(50_000, 7))
    # The file was rewritten: the next read rejects it and recomputes, still without running it.
    assert f(7)["note"] == "n" * 600
    assert not marker.exists()


# -- planted files larger than their header says ---------------------------------------------------


def _bytes_read() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io (Linux)")
@pytest.mark.parametrize("mmap_mode", [None, "r"], ids=["read", "mmap"])
@SECRETS
def test_sparse_value_file_larger_than_its_header_is_rejected_unread(tmp_path, caplog, mmap_mode,
                                                                      secret):
    """A value file grown to 8 GiB (sparse: no blocks) behind a small frame's header is damage:
    refused from its header without reading or hashing the rest, removed, and recomputed once."""
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache), secret=secret, mmap_mode=mmap_mode)(_big)
    f(4)
    (filename,) = _sql(cache, "SELECT filename FROM Cache WHERE key = ?", (f.key(4),))[0]
    os.truncate(cache / filename, 8 << 30)  # what a planted sparse file looks like
    before = _bytes_read()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(4) == _big(4)
    assert _bytes_read() - before < 64 << 20  # not the 8 GiB
    assert any("header says" in w for w in fncache_warnings(caplog))
    # Removed: the next call hits the recomputed entry quietly.
    caplog.clear()
    hits = f.cache_info().hits
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(4) == _big(4)
    assert fncache_warnings(caplog) == [] and f.cache_info().hits == hits + 1


_HUGE_CONSISTENT_FRAME = r"""
import json, logging, os, resource, struct, sys
import numpy as np
import fncache

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
store = sys.argv[1]

@fncache.memoize(store=store)
def arrays(x):
    return np.full(200_000, x, dtype=np.uint8)

if sys.argv[2] == "plant":
    arrays(1)
    print(json.dumps(arrays.key(1)))
    sys.exit()
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # 2 GiB: the planted buffer cannot fit
first = arrays(1)
second = arrays(1)
print(json.dumps([int(first[0]), int(second[-1]), arrays.cache_info().hits]))
"""


@pytest.mark.skipif(not hasattr(os, "truncate"), reason="needs sparse files")
def test_frame_too_large_to_read_is_damage_not_kept(tmp_path):
    """A planted frame whose header is consistent with its (sparse) size but which cannot be read
    into memory (MemoryError) is damage: removed, so later calls do not pay again."""
    import struct

    from .helpers import run_py, write

    script = write(tmp_path / "huge.py", _HUGE_CONSISTENT_FRAME)
    cache = tmp_path / "cache"
    key = json.loads(run_py(script, str(cache), "plant").stdout)
    (filename,) = _sql(cache, "SELECT filename FROM Cache WHERE key = ?", (key,))[0]
    path = cache / filename
    frame = path.read_bytes()
    from fncache import _codec

    h = _codec.read_header(frame)
    assert len(h.buffer_lens) == 1
    huge = 4 << 30
    with open(path, "r+b") as out:
        out.seek(40)
        out.write(struct.pack("<Q", huge))  # the buffer's length, as the header says it
    os.truncate(path, h.body_offset + h.pickle_len + (-h.pickle_len % 64) + huge)
    proc = run_py(script, str(cache), "read", timeout=300)
    assert json.loads(proc.stdout.splitlines()[-1]) == [1, 1, 1], proc.stderr
    assert "too large to read" in proc.stderr, proc.stderr


# -- hard-linked backups ---------------------------------------------------------------------------


@SECRETS
@pytest.mark.parametrize("mmap_mode", [None, "r"], ids=["read", "mmap"])
def test_hard_linked_backup_leaves_both_copies_readable(tmp_path, caplog, mmap_mode, secret):
    """After ``cp -al`` (rsnapshot, ``rsync --link-dest``) every value file has two links: both the
    store and its backup still hit, and nothing is rejected or removed."""
    import shutil
    import subprocess

    if shutil.which("cp") is None:
        pytest.skip("needs cp")
    cache, backup = tmp_path / "cache", tmp_path / "backup"
    f = fncache.memoize(store=str(cache), secret=secret, mmap_mode=mmap_mode)(_big)
    for x in range(3):
        f(x)
    subprocess.run(["cp", "-al", str(cache), str(backup)], check=True)
    files = [p for p in cache.rglob("*.val")]
    assert len(files) == 3 and all(p.stat().st_nlink == 2 for p in files)
    g = fncache.memoize(store=str(backup), secret=secret, mmap_mode=mmap_mode)(_big)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        for x in range(3):
            assert f(x) == _big(x) and g(x) == _big(x)
    assert fncache_warnings(caplog) == []
    assert f.cache_info().hits == 3 and g.cache_info().hits == 3 and g.cache_info().misses == 0
    assert all(p.stat().st_nlink == 2 for p in files)  # nothing removed or rewritten


# -- the database's journal files replaced ---------------------------------------------------------


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
@pytest.mark.parametrize("kind", ["symlink", "directory", "FIFO"])
def test_journal_file_replaced_by_a_non_regular_file_is_moved_aside(tmp_path, caplog, kind,
                                                                     suffix):
    """A cache.db-wal, -shm or -journal that is a symlink (to a file elsewhere), a directory or a
    FIFO is moved aside with a WARNING, the database and its entries are kept, and clear works (a
    FIFO -journal hung every call, hits included: SQLite opens it to see whether it is hot)."""
    cache = tmp_path / "cache"
    f = fncache.memoize(store=str(cache))(_big)
    assert f(1) == _big(1)
    f.store.close()
    victim = tmp_path / "victim"
    victim.write_bytes(PRECIOUS)
    odd = cache / f"cache.db{suffix}"

    def plant() -> None:
        if odd.is_file() or odd.is_symlink():
            odd.unlink()
        if kind == "symlink":
            odd.symlink_to(victim)
        elif kind == "directory":
            odd.mkdir()
        else:
            os.mkfifo(odd)

    plant()
    g = fncache.memoize(store=str(cache))(_big)
    with _no_hang(), caplog.at_level(logging.WARNING, logger="fncache"):
        assert g(1) == _big(1) and g.cache_info().hits == 1  # the entry was kept
    assert any("not a regular file" in w for w in fncache_warnings(caplog))
    assert victim.read_bytes() == PRECIOUS
    assert [p.name.split(".corrupt-")[0] for p in cache.glob("cache.db*.corrupt-*")] == [odd.name]
    g.store.close()
    plant()  # again, for the command line: clear works on such a store too
    proc = cli("clear", "--dir", str(cache), "-y")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert victim.read_bytes() == PRECIOUS and len(list(cache.glob("cache.db*.corrupt-*"))) == 2


# -- names that listings show ----------------------------------------------------------------------


def test_a_function_name_with_newlines_cannot_forge_lines_of_a_listing(tmp_path):
    """A planted function name holding newlines (and other control characters) is listed on one
    line by ``fncache ls`` and ``clear --dry-run``, its control characters escaped."""
    from fncache.stores import open_store

    cache = tmp_path / "cache"
    store = open_store(str(cache))
    store.add("a" * 32, b"v", {"function": "m:f", "created": time.time()})
    store.add("b" * 32, b"v", {"function": "m:evil\nm:forged        99 1.0 GiB\r", "created": 1.0})
    store.close()
    out = cli("ls", "--dir", str(cache)).stdout
    assert out.count("\n") == 3 and "m:evil\\x0am:forged" in out and "\r" not in out, out
    out = cli("clear", "--dir", str(cache), "--dry-run").stdout
    assert "m:evil\\x0am:forged" in out and "\nm:forged" not in out and "\n  m:forged" not in out


def test_a_very_long_function_name_is_stored_and_listed_sound(tmp_path):
    """A function whose name is longer than the metadata limit is stored, hit, and listed (its
    name shortened), never read back as damaged."""
    def long_named(x: int) -> int:
        return x + 1

    long_named.__qualname__ = "q" * 70_000
    f = fncache.memoize(store=str(tmp_path / "cache"))(long_named)
    assert f(1) == 2 and f(1) == 2 and f.cache_info().hits == 1
    (entry,) = list(f.store.entries())
    assert not entry.damaged and entry.meta["function"].endswith("\u2026")
    assert "(damaged)" not in cli("ls", "--dir", str(tmp_path / "cache")).stdout


def test_prune_removes_planted_rows_whose_key_no_lookup_reads(tmp_path):
    """A row with metadata whose key is not fncache's (a blob, text that is not UTF-8, a number,
    text stored with ``raw = 0``) is listed as damaged under a name that holds its rowid, and
    ``prune`` removes it as it removes any damaged entry: it deletes what it lists by key, and the
    key it was given ("") removed nothing, so such rows stayed until a full ``clear``. The name
    removes only a row whose key is still unreadable: a rowid since given to an entry keeps it."""
    import uuid

    from fncache.stores._diskrows import UNNAMED
    from fncache.stores.disk import DiskStore

    store = DiskStore(str(tmp_path / "s"))
    meta = {"function": "m:f", "python": "3.11"}
    for _ in range(5):
        store.add(uuid.uuid4().hex, b"v" * 100, meta)
    con = sqlite3.connect(store.directory + "/cache.db", isolation_level=None)
    rowids = [r[0] for r in con.execute("SELECT rowid FROM Cache ORDER BY rowid")]
    for rowid, planted in zip(rowids, ("key = x'00ff'", "key = CAST(x'ff80' AS TEXT)", "key = 7",
                                       "raw = 0"), strict=False):
        con.execute(f"UPDATE Cache SET {planted} WHERE rowid = ?", (rowid,))
    listed = {info.key: info for info in store.listing()}
    assert {UNNAMED.format(r) for r in rowids[:4]} <= set(listed)
    assert all(listed[UNNAMED.format(r)].damaged for r in rowids[:4])
    # The summary counts them as damaged too (but text that is not UTF-8, which SQLite cannot tell).
    assert [(s.damaged, s.entries) for s in store.summary()] == [(True, 3), (False, 2)]
    good = rowids[4]
    assert not store.delete(UNNAMED.format(good))  # its key is readable: not removed by its rowid
    assert not store.delete(UNNAMED.format(2**63)) and store.delete_many([UNNAMED.format(-2**63 - 1)]) == 0
    assert len(store) == 5
    out = cli("prune", "--dir", store.directory, "--max-size", "150B", "--yes")
    assert out.returncode == 0, out.stderr
    assert "removed 4 entries" in out.stdout
    assert [r[0] for r in con.execute("SELECT rowid FROM Cache")] == [good]
    con.close()


def test_a_listing_name_never_removes_a_row_no_listing_shows(tmp_path):
    """``<row N: key not readable>`` names a row a listing showed: one with metadata. A plain
    diskcache row (a tuple key is a pickle stored with ``raw = 0``) that took rowid N since, or
    holds rowid N in another tier's database, is not an entry and is left alone."""
    import uuid

    from fncache.stores._diskrows import UNNAMED
    from fncache.stores.disk import DiskStore

    store = DiskStore(str(tmp_path / "s"))
    store.add(uuid.uuid4().hex, b"v", {"function": "m:f", "python": "3.11"})
    with diskcache.Cache(store.directory) as plain:
        plain.set(("job", 7), b"keep me")
        (rowid,), = plain._sql("SELECT rowid FROM Cache WHERE raw = 0").fetchall()
    assert not store.delete(UNNAMED.format(rowid))
    assert store.delete_many([UNNAMED.format(rowid)]) == 0
    with diskcache.Cache(store.directory) as plain:
        assert plain.get(("job", 7)) == b"keep me"


def test_a_planted_value_alone_moves_its_group_in_the_summary(tmp_path):
    """A row whose size column says 0 is summarised by its value's length: a value replaced alone
    (a planted update, which diskcache's own writes never make) changed the rows' bytes but not the
    summary's, which then told ``prune --max-size`` there was nothing to remove."""
    import uuid

    from fncache.stores._base import summarize
    from fncache.stores.disk import DiskStore

    store = DiskStore(str(tmp_path / "s"))
    for _ in range(3):
        store.add(uuid.uuid4().hex, b"v" * 10, {"function": "m:f", "python": "3.11"})
    _sql(tmp_path / "s", "UPDATE Cache SET fncache_meta = 'x', size = 0 WHERE rowid ="
                         " (SELECT min(rowid) FROM Cache)")
    _sql(tmp_path / "s", "UPDATE Cache SET value = zeroblob(100000) WHERE rowid ="
                         " (SELECT min(rowid) FROM Cache)")
    (size,), = _sql(tmp_path / "s", "SELECT total(size) FROM fncache_summary")
    assert size == 100_020  # the table itself, before any read that might rebuild it
    assert store.summary() == summarize(store.listing())
    out = cli("prune", "--dir", store.directory, "--max-size", "1000B", "--yes")
    assert out.returncode == 0, out.stderr
    assert "removed 1 entry" in out.stdout


def test_a_fifo_planted_as_a_kept_source_is_not_read(tmp_path):
    """``explain`` reads the sources a store keeps: one replaced by a FIFO is refused at once, as
    any file that is not a regular one (its open waited for a writer for ever)."""
    from fncache.stores._disksources import SourceFiles

    sources = SourceFiles(str(tmp_path))
    address = "a" * 32
    sources.put(address, b"def f(): pass\n")
    path = pathlib.Path(sources._path(address))
    assert sources.get(address, 1 << 20) == b"def f(): pass\n"
    path.unlink()
    os.mkfifo(path)
    with _no_hang():
        assert sources.get(address, 1 << 20) is None
