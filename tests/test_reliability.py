"""When things go wrong: crashed writers, damaged entries, limits, bad input, failing stores.

The rule under test everywhere: a call returns the function's exact value or the function's own
exception, never a wrong value and never an error from inside fncache's machinery; damage is logged
once (a WARNING on the ``fncache`` logger), removed and recomputed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import random
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fncache
from fncache import _codec
from fncache._errors import IntegrityError, StoreError
from fncache.stores import open_store

from .helpers import clear_larger_than, clear_older_than, fncache_warnings, prune_to_size


def _append(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def _count(path: str | Path) -> int:
    p = Path(path)
    return len(p.read_text().splitlines()) if p.exists() else 0


def _make(x: int, size: int, log: str) -> dict[str, Any]:
    """A value of about ``size`` bytes that names its own argument; counts its computations."""
    _append(log, str(x))
    return {"x": x, "data": bytes([x % 256]) * size}


# -- crash safety ----------------------------------------------------------------------------------

CRASH_TRIALS = 50
CRASH_KEYS = 6


def _payload(x: int) -> tuple[int, Any]:
    """1 to 4 MB of pseudo-random bytes: bytes (inside the pickle) or an array (beside it)."""
    data = random.Random(x).randbytes(1_000_000 * (1 + x % 4))
    if x % 2 == 0:
        return (x, data)
    import numpy

    return (x, numpy.frombuffer(data, dtype=numpy.uint8).copy())


def _same_payload(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a[0] == b[0] and type(a[1]) is type(b[1]) and (
        bytes(a[1]) == bytes(b[1]))


def _big(x: int, log: str) -> tuple[int, Any]:
    _append(log, str(x))
    return _payload(x)


def _crash_writer(store: str, log: str) -> None:
    """Store and replace large entries in a loop until killed."""
    f = fncache.memoize(store=store)(_big)
    for x in range(CRASH_KEYS):
        f(x, log)
    i = 0
    while True:
        f.call(i % CRASH_KEYS, log)  # replaces the entry: the other write path
        i += 1


def _crash_verify(store: str, log: str, out: Any) -> None:
    """Read every key raw and through the function; report what was found."""
    try:
        f = fncache.memoize(store=store)(_big)
        missing, bad = [], []
        for x in range(CRASH_KEYS):
            key = f.key(x, log)
            frame = f.store.get(key)
            if frame is None:
                missing.append(x)
                continue
            try:
                value, _ = _codec.decode(frame, key)
            except IntegrityError as e:
                bad.append(f"{x}: {e}")
                continue
            if not _same_payload(value, _payload(x)):
                bad.append(f"{x}: wrong value")
        before = _count(log)
        wrong = [x for x in range(CRASH_KEYS) if not _same_payload(f(x, log), _payload(x))]
        out.put({"missing": missing, "bad": bad, "wrong": wrong,
                 "recomputed": _count(log) - before, "errors": f.cache_info().errors})
    except BaseException as e:
        out.put({"exception": repr(e)})


@pytest.mark.slow
def test_writers_killed_at_random_moments_never_leave_a_damaged_entry(tmp_path):
    """50 writers SIGKILLed mid-store leave every entry missing or exact, and the store usable."""
    ctx = multiprocessing.get_context("fork")
    store, log = str(tmp_path / "cache"), str(tmp_path / "computed.log")
    rng = random.Random(6)
    for trial in range(CRASH_TRIALS):
        writer = ctx.Process(target=_crash_writer, args=(store, log))
        writer.start()
        time.sleep(rng.uniform(0.0, 0.4))
        writer.kill()  # SIGKILL
        writer.join(10)
        assert writer.exitcode == -9, f"trial {trial}: writer exited {writer.exitcode}"
        out = ctx.Queue()
        verifier = ctx.Process(target=_crash_verify, args=(store, log, out))
        verifier.start()
        report = out.get(timeout=120)
        verifier.join(30)
        assert "exception" not in report, f"trial {trial}: {report}"
        assert report["bad"] == [] and report["wrong"] == [], f"trial {trial}: {report}"
        # The next call recomputes exactly the entries the crash left missing, and nothing else.
        assert report["recomputed"] == len(report["missing"]), f"trial {trial}: {report}"
        assert report["errors"] == 0
    # Still a working store: a new entry can be added and read back.
    s = open_store(store)
    assert s.add("0" * 32, b"still usable", {"function": "t"})
    assert bytes(s.get("0" * 32)) == b"still usable"
    s.close()


# -- integrity: every way an entry can be damaged --------------------------------------------------


def _db_row(directory: Path, key: str) -> tuple[str | None, bytes | None]:
    con = sqlite3.connect(directory / "cache.db")
    try:
        row = con.execute(
            "SELECT filename, value FROM Cache WHERE key = ? AND raw = 1", (key,)
        ).fetchone()
        con.commit()
    finally:
        con.close()
    assert row is not None, f"no row for {key}"
    return row[0], row[1]


def _db_set_value(directory: Path, key: str, value: bytes) -> None:
    con = sqlite3.connect(directory / "cache.db")
    try:
        con.execute("UPDATE Cache SET value = ? WHERE key = ? AND raw = 1", (value, key))
        con.commit()
    finally:
        con.close()


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]


def _damage(kind: str, directory: Path, key: str, other_frame: bytes) -> None:
    filename, inline = _db_row(directory, key)
    path = directory / filename if filename else None
    if kind == "flipped byte, inline in SQLite":
        assert inline is not None
        _db_set_value(directory, key, _flip(inline, len(inline) - 10))
    elif kind == "garbage instead of a frame, inline":
        _db_set_value(directory, key, b"this is not a frame at all" * 3)
    elif kind == "pickle garbage behind a bad checksum, inline":
        assert inline is not None
        _db_set_value(directory, key, inline[:-40] + b"\x80\x05garbage!" * 4)
    elif kind == "entry copied from another key, inline":
        _db_set_value(directory, key, other_frame)
    elif kind == "flipped byte in the value file":
        assert path is not None
        data = path.read_bytes()
        path.write_bytes(_flip(data, len(data) // 2))
    elif kind == "flipped byte in the header of the value file":
        assert path is not None
        path.write_bytes(_flip(path.read_bytes(), 9))
    elif kind == "truncated value file":
        assert path is not None
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "empty value file":
        assert path is not None
        path.write_bytes(b"")
    elif kind == "bytes appended to the value file":
        assert path is not None
        with open(path, "ab") as fh:
            fh.write(b"\0" * 64)
    elif kind == "garbage instead of a frame, file":
        assert path is not None
        path.write_bytes(os.urandom(path.stat().st_size))
    elif kind == "missing value file":
        assert path is not None
        path.unlink()
    else:  # pragma: no cover
        raise AssertionError(kind)


DAMAGE = {
    # kind: size of the value (inline below diskcache's 32 KiB, in a file above)
    "flipped byte, inline in SQLite": 1_000,
    "garbage instead of a frame, inline": 1_000,
    "pickle garbage behind a bad checksum, inline": 1_000,
    "entry copied from another key, inline": 1_000,
    "flipped byte in the value file": 200_000,
    "flipped byte in the header of the value file": 200_000,
    "truncated value file": 200_000,
    "empty value file": 200_000,
    "bytes appended to the value file": 200_000,
    "garbage instead of a frame, file": 200_000,
    "missing value file": 200_000,
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_entry_is_detected_logged_removed_and_recomputed(tmp_path, caplog, kind):
    """A damaged entry reads as a miss with one warning, is replaced, and the value stays exact."""
    directory, log = tmp_path / "cache", str(tmp_path / "computed.log")
    size = DAMAGE[kind]
    f = fncache.memoize(store=str(directory))(_make)
    assert f(1, size, log) == _make(1, size, os.devnull)
    f(2, size, log)
    key, other = f.key(1, size, log), f.key(2, size, log)
    _damage(kind, directory, key, bytes(f.store.get(other)))
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(1, size, log) == _make(1, size, os.devnull)
        assert _count(log) == 3  # 1, 2, then 1 again
        assert len(fncache_warnings(caplog)) == 1, fncache_warnings(caplog)
        # The damaged entry was replaced by a sound one: the next call is a quiet hit.
        value, _ = _codec.decode(f.store.get(key), key)
        assert value == _make(1, size, os.devnull)
        assert f(1, size, log) == _make(1, size, os.devnull)
        assert _count(log) == 3
        assert len(fncache_warnings(caplog)) == 1


def test_every_single_byte_flip_is_caught_or_harmless(caplog):
    """Flipping any one byte of a frame never yields a wrong value; outside padding it is caught."""
    log = os.devnull
    f = fncache.memoize(store=f"memory://flip-{os.getpid()}")(_make)
    f(5, 40, log)
    key = f.key(5, 40, log)
    frame = bytes(f.store.get(key))
    header = _codec.read_header(frame)
    trailer_end = _codec._FIXED.size + 8 * len(header.buffer_lens) + _codec._CHECK
    missed = []
    for at in range(len(frame)):
        f.store.set(key, _flip(frame, at), {"function": f.function_id})
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fncache"):
            assert f(5, 40, log) == _make(5, 40, log)
        if not fncache_warnings(caplog):
            missed.append(at)
    # Only the zero padding between the checksum and the aligned body is not covered.
    assert all(trailer_end <= at < header.body_offset for at in missed), missed


def test_verified_frame_whose_pickle_does_not_load_is_a_logged_miss(tmp_path, caplog):
    """An entry that passes its checksum but does not unpickle is a logged miss, not an error."""
    f = fncache.memoize(store=str(tmp_path / "cache"))(_make)
    log = str(tmp_path / "computed.log")
    key = f.key(3, 10, log)
    f.store.set(key, _forge(b"\x80\x05garbage", key), {"function": f.function_id})
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(3, 10, log) == _make(3, 10, os.devnull)
    assert len(fncache_warnings(caplog)) == 1
    assert _count(log) == 1


def _forge(pickle_bytes: bytes, key: str) -> bytes:
    """A well-formed, correctly checksummed, unsigned frame around arbitrary pickle bytes."""
    header = _codec._FIXED.pack(_codec.MAGIC, 0, time.time(), 0.0, len(pickle_bytes), 0, 0)
    body = [pickle_bytes, b"\0" * (-len(pickle_bytes) % 64)]
    head = header + _codec._checksum(key.encode(), header, body)
    return head + b"\0" * (-len(head) % 64) + b"".join(body)


# -- limits, expiry and pruning --------------------------------------------------------------------


def test_size_limit_evicts_least_recently_used_entries(tmp_path):
    """With size_limit, old unused entries are evicted, recently used ones kept, volume bounded."""
    limit = 2_000_000
    f = fncache.memoize(store=str(tmp_path / "cache"), store_options={"size_limit": limit})(_make)
    log = str(tmp_path / "computed.log")
    for x in range(40):
        f(x, 100_000, log)
        f(0, 100_000, log)  # keep entry 0 in use
    assert f.store.volume() <= limit + 10 * 100_000
    assert f.check_call_in_cache(0, 100_000, log)
    assert f.check_call_in_cache(39, 100_000, log)
    assert not any(f.check_call_in_cache(x, 100_000, log) for x in range(1, 6))
    assert _count(log) == 40  # entry 0 was never evicted, so never recomputed


def test_expired_entries_are_misses_and_are_removed(tmp_path):
    """An entry older than expire= is recomputed, and expired entries leave the store."""
    log = str(tmp_path / "computed.log")
    f = fncache.memoize(store=str(tmp_path / "cache"), expire=2.0)(_make)
    for x in range(5):
        f(x, 10, log)
    f(0, 10, log)
    assert _count(log) == 5  # hits while fresh (2 s: room for a loaded machine)
    time.sleep(2.2)
    assert not f.check_call_in_cache(0, 10, log)
    assert f(0, 10, log) == _make(0, 10, os.devnull)
    assert _count(log) == 6
    # Writing the new entry swept the four expired ones out of the store.
    assert len(f.store) == 1


def test_expire_applies_to_entries_stored_without_one(tmp_path, caplog):
    """expire= on a function also ages out entries that were stored without an expiry."""
    log = str(tmp_path / "computed.log")
    plain = fncache.memoize(store=str(tmp_path / "cache"))(_make)
    plain(1, 10, log)
    time.sleep(2.2)
    short = fncache.memoize(store=str(tmp_path / "cache"), expire=2.0)(_make)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert short(1, 10, log) == _make(1, 10, os.devnull)
    assert _count(log) == 2
    assert fncache_warnings(caplog) == []  # an expired entry is routine, not damage
    assert short(1, 10, log) == _make(1, 10, os.devnull)
    assert _count(log) == 2


def _filled_store(tmp_path: Path) -> Any:
    f = fncache.memoize(store=str(tmp_path / "cache"))(_make)
    log = str(tmp_path / "computed.log")
    for x, size in enumerate([100, 50_000, 200_000, 300, 80_000]):
        f(x, size, log)
        time.sleep(0.02)  # distinct creation times, in order
    return f, log


def test_clear_older_than_removes_only_old_entries(tmp_path):
    """clear_older_than removes entries created before the cut-off and keeps newer ones."""
    f, log = _filled_store(tmp_path)
    time.sleep(2.2)
    f(9, 10, log)
    assert clear_older_than(f.store, 2.0) == 5  # f(9) is younger by far, even on a loaded machine
    assert f.check_call_in_cache(9, 10, log)
    assert len(f.store) == 1
    assert clear_older_than(f.store, 3600) == 0


def test_clear_larger_than_removes_only_large_entries(tmp_path):
    """clear_larger_than removes the entries whose stored size exceeds the bound."""
    f, log = _filled_store(tmp_path)
    assert clear_larger_than(f.store, 60_000) == 2
    assert {e.meta["args"]["x"] for e in f.store.entries()} == {
        fncache.hash(x) for x in (0, 1, 3)
    }


def test_prune_to_size_removes_oldest_first_until_under_the_bound(tmp_path):
    """prune_to_size drops the least recently created entries until the total fits."""
    f, log = _filled_store(tmp_path)
    total = sum(e.size for e in f.store.entries())
    removed = prune_to_size(f.store, total - 100_000)
    assert removed == 3  # 100 + 50 000 + 200 000 bytes from the oldest three
    assert sum(e.size for e in f.store.entries()) <= total - 100_000
    assert f.check_call_in_cache(3, 300, log) and f.check_call_in_cache(4, 80_000, log)
    assert prune_to_size(f.store, 10**12) == 0
    assert prune_to_size(f.store, 0) == 2 and len(f.store) == 0


@pytest.mark.parametrize("call", [
    lambda s: clear_older_than(s, -1),
    lambda s: clear_larger_than(s, -5),
    lambda s: prune_to_size(s, -1),
    lambda s: prune_to_size(s, "10MB"),
])
def test_pruning_rejects_negative_or_non_numeric_bounds(call):
    """The pruning helpers refuse a negative or non-numeric bound instead of clearing everything."""
    with pytest.raises(ValueError):
        call(open_store("memory://prune-bounds"))


# -- bad input -------------------------------------------------------------------------------------


class _RefusesPickling:
    def __reduce__(self) -> Any:
        raise RuntimeError("not today")


def _identity(value: Any, n: int = 0) -> Any:
    return n


def _gen() -> Any:
    yield 1


@pytest.mark.parametrize("make, type_name", [
    (_gen, "generator"),
    (threading.Lock, "lock"),
    (lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM), "socket"),
    (_RefusesPickling, "_RefusesPickling"),
])
def test_unhashable_argument_names_the_parameter_and_type(make, type_name):
    """An argument that cannot be hashed raises UnhashableArgument (a TypeError) naming it."""
    f = fncache.memoize(store="memory://bad-input")(_identity)
    value = make()
    try:
        with pytest.raises(fncache.UnhashableArgument) as info:
            f(value, n=1)
    finally:
        if isinstance(value, socket.socket):
            value.close()
    assert isinstance(info.value, TypeError)
    assert info.value.parameter == "value"
    assert "'value'" in str(info.value) and type_name in str(info.value)


def test_unhashable_argument_with_on_unhashable_call_runs_uncached_and_warns_once(caplog):
    """With on_unhashable="call" the function runs on every call, with a single warning."""
    ran = []
    f = fncache.memoize(store="memory://bad-input-call", on_unhashable="call")(
        lambda value, n: ran.append(n) or n
    )
    lock = threading.Lock()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert [f(lock, i) for i in range(3)] == [0, 1, 2]
    assert ran == [0, 1, 2]
    assert len(fncache_warnings(caplog)) == 1 and "'value'" in fncache_warnings(caplog)[0]


def _make_lock(log: str) -> Any:
    _append(log, "lock")
    return threading.Lock()


def test_unpicklable_result_is_returned_and_not_stored(tmp_path, caplog):
    """A result that cannot be pickled is returned every time, never stored, with one warning."""
    f = fncache.memoize(store=str(tmp_path / "cache"))(_make_lock)
    log = str(tmp_path / "computed.log")
    with caplog.at_level(logging.WARNING, logger="fncache"):
        results = [f(log) for _ in range(3)]
    assert all(type(r) is type(threading.Lock()) for r in results)
    assert _count(log) == 3
    assert not f.check_call_in_cache(log)
    assert len(fncache_warnings(caplog)) == 1


class _Boom(Exception):
    pass


def _fails(x: int, log: str) -> int:
    _append(log, str(x))
    raise _Boom(x)


def test_user_exception_propagates_unchanged_and_is_not_cached(tmp_path):
    """The function's own exception reaches the caller as is, with its frame, and is not stored."""
    f = fncache.memoize(store=str(tmp_path / "cache"))(_fails)
    log = str(tmp_path / "computed.log")
    for _ in range(2):
        with pytest.raises(_Boom) as info:
            f(4, log)
        assert info.value.args == (4,)
        assert info.traceback[-1].name == "_fails"
    assert _count(log) == 2
    assert not f.check_call_in_cache(4, log)
    assert f.cache_info().stores == 0


@pytest.mark.parametrize("options, option", [
    ({"expire": -1}, "expire"),
    ({"expire": "soon"}, "expire"),
    ({"lock_timeout": 0}, "lock_timeout"),
    ({"on_unhashable": "ignore"}, "on_unhashable"),
    ({"on_store_error": "ignore"}, "on_store_error"),
    ({"store": 42}, "store"),
    ({"store": "ftp://host/x"}, "store"),
    ({"store_options": "size_limit=1"}, "store_options"),
    ({"store_options": {"size_limit": -1}}, "size_limit"),
    ({"secret": b""}, "secret"),
    ({"compress": "gzip"}, "compress"),
    ({"ignore": "n"}, "ignore"),
    ({"ignore": ["nope"]}, "ignore"),
    ({"version": 3}, "version"),
    ({"expires": 10}, "expires"),
])
def test_invalid_option_fails_at_decoration_naming_it(options, option):
    """An invalid option raises ConfigError (a ValueError) when decorating, naming the option."""
    with pytest.raises(fncache.ConfigError, match=option) as info:
        fncache.memoize(**options)(_identity)
    assert isinstance(info.value, ValueError)


# -- store failures --------------------------------------------------------------------------------


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


@pytest.fixture
def full_disk(tmp_path):
    """A directory on a 1 MiB tmpfs (skips where tmpfs cannot be mounted)."""
    path = tmp_path / "tiny"
    if not _mount_tmpfs(path, "1m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


@pytest.mark.slow
def test_full_disk_is_a_logged_miss_and_the_value_is_returned(full_disk, tmp_path, caplog):
    """When the disk is full the value is still returned; the failed write is one warning."""
    log = str(tmp_path / "computed.log")
    f = fncache.memoize(store=str(full_disk / "cache"))(_make)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        for _ in range(3):
            assert f(1, 3_000_000, log) == _make(1, 3_000_000, os.devnull)
    assert _count(log) == 3
    assert len(fncache_warnings(caplog)) == 1
    assert f.cache_info().errors == 3
    assert f(2, 100, log) == _make(2, 100, os.devnull)  # small entries still fit


@pytest.mark.slow
def test_full_disk_raises_with_on_store_error_raise(full_disk, tmp_path):
    """With on_store_error="raise" a full disk raises StoreError (an OSError)."""
    f = fncache.memoize(store=str(full_disk / "cache"), on_store_error="raise")(_make)
    with pytest.raises(StoreError) as info:
        f(1, 3_000_000, str(tmp_path / "computed.log"))
    assert isinstance(info.value, OSError)


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """Make ``path`` a read-only bind mount of itself (root ignores permissions, not mounts)."""
    steps = [["mount", "--bind", str(path), str(path)],
             ["mount", "-o", "remount,ro,bind", str(path)]]
    for i, step in enumerate(steps):
        proc = subprocess.run(step, capture_output=True, timeout=30)
        if proc.returncode != 0:
            if i:
                subprocess.run(["umount", str(path)], capture_output=True, timeout=30)
            pytest.skip(f"cannot make a read-only bind mount here: {proc.stderr!r}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("mount"), reason="needs mount")
@pytest.mark.parametrize("layout", ["empty read-only directory", "read-only existing cache"])
def test_read_only_store_is_a_logged_miss(tmp_path, caplog, layout):
    """A store that cannot be written gives correct values and a warning, or StoreError if asked."""
    store, log = tmp_path / "cache", str(tmp_path / "computed.log")
    store.mkdir()
    if layout == "read-only existing cache":
        s = open_store(str(store))
        s.add("1" * 32, b"x", {"function": "t"})
        s.close()
    with _read_only(store):
        f = fncache.memoize(store=str(store))(_make)
        with caplog.at_level(logging.WARNING, logger="fncache"):
            assert [f(x, 10, log)["x"] for x in (1, 1, 2)] == [1, 1, 2]
        assert _count(log) == 3
        assert 1 <= len(fncache_warnings(caplog)) <= 2  # the failed write (and a failed read, per kind)
        strict = fncache.memoize(store=str(store), on_store_error="raise")(_make)
        with pytest.raises(StoreError):
            strict(3, 10, log)


def test_vanished_store_directory_is_survived(tmp_path, caplog):
    """Deleting the cache directory under a running program costs misses, not errors."""
    directory, log = tmp_path / "cache", str(tmp_path / "computed.log")
    f = fncache.memoize(store=str(directory))(_make)
    f(1, 100, log)
    f(2, 100_000, log)
    shutil.rmtree(directory)
    for _ in range(3):
        assert f(1, 100, log) == _make(1, 100, os.devnull)
        assert f(2, 100_000, log) == _make(2, 100_000, os.devnull)
        assert f(3, 100_000, log) == _make(3, 100_000, os.devnull)
    # Back to normal: the directory is recreated and entries are stored and hit again.
    n = _count(log)
    assert f(3, 100_000, log) == _make(3, 100_000, os.devnull)
    assert f(4, 100_000, log) == _make(4, 100_000, os.devnull)
    assert f(4, 100_000, log) == _make(4, 100_000, os.devnull)
    assert _count(log) == n + 1 and directory.is_dir()


def test_prune_on_a_size_limited_disk_store_keeps_recently_read_entries(tmp_path):
    """With size_limit (diskcache's LRU policy) reads are recorded, so pruning drops unread entries first."""
    store = fncache.open_store(str(tmp_path / "cache"), size_limit=10**9)
    keys = [f"{i:032x}" for i in range(3)]
    for key in keys:
        store.add(key, b"x" * 100, {"function": "m:f"})
        time.sleep(0.02)
    time.sleep(0.02)
    assert store.get(keys[0]) is not None  # the oldest entry is now the most recently used
    assert all(e.accessed is not None for e in store.entries())
    assert prune_to_size(store, 150) == 2
    assert [e.key for e in store.entries()] == [keys[0]]


# -- fork while a thread computes ------------------------------------------------------------------

_FORK_DURING_A_COMPUTATION = r"""
import json, os, signal, sys, threading
import fncache

store = sys.argv[1]
parent = os.getpid()
inside, release = threading.Event(), threading.Event()

@fncache.memoize(store=store)
def work(x):
    if os.getpid() == parent and threading.current_thread() is not threading.main_thread():
        inside.set()
        release.wait()            # the parent's thread stays inside the computation
    return {"x": x, "pid": os.getpid()}

t = threading.Thread(target=work, args=(1,))
t.start()
inside.wait()
fncache.key_for(work, 2)          # the key machinery is in use too
pid = os.fork()
if pid == 0:
    signal.alarm(60)              # a hang is a failure, not a stuck test run
    first = work(1)               # the key the parent's thread is computing
    other = work(2)
    print(json.dumps({"child": [first["x"], other["x"], first["pid"] == os.getpid()]}), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
release.set()
t.join()
print(json.dumps({"status": status, "parent": work(1)["x"]}), flush=True)
"""


@pytest.mark.parametrize("kind", ["disk", "memory"])
def test_child_forked_while_a_thread_computes_the_same_key_returns(tmp_path, kind):
    """A process forked while one of its threads computes a key: the child's own call of that key
    computes it there and returns (it used to wait forever for the inherited in-flight entry)."""
    from .helpers import run_py, write

    script = write(tmp_path / "fork_during.py", _FORK_DURING_A_COMPUTATION)
    store = str(tmp_path / "cache") if kind == "disk" else "memory://"
    lines = [json.loads(line) for line in run_py(script, store, timeout=120).stdout.splitlines()]
    assert lines == [{"child": [1, 2, True]}, {"status": 0, "parent": 1}]


_FORK_WHILE_LOCKS_ARE_HELD = r"""
import json, os, signal, sys, threading
import fncache
from fncache import _usage, stores
from fncache.values import digests as _digests
from fncache.code import fingerprint as _fingerprint
from fncache.values import registry as _registry
from fncache.stores import tiered

held, release = threading.Event(), threading.Event()
LOCKS = [_registry._lock, _fingerprint._fp_lock, _digests._lock, stores._cache_lock,
         tiered._breakers_lock, _usage._logs_lock]

def hold():                       # a thread inside each of fncache's module-level critical sections
    for lock in LOCKS:
        lock.acquire()
    held.set()
    release.wait()

threading.Thread(target=hold, daemon=True).start()
held.wait()
pid = os.fork()
if pid == 0:
    signal.alarm(60)
    f = fncache.memoize(store=[sys.argv[1], "memory://"], depends_on=[sys.argv[2]])(lambda x: x + 1)
    print(json.dumps([f(1), f(1), f.cache_info().hits]), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
release.set()
print(json.dumps(status), flush=True)
"""


def test_child_forked_while_module_locks_are_held_can_use_fncache(tmp_path):
    """Every module-level lock is fresh in a forked child: a child forked while other threads were
    inside fncache (opening a store, hashing, fingerprinting) still computes, stores and hits."""
    from .helpers import run_py, write

    script = write(tmp_path / "fork_locks.py", _FORK_WHILE_LOCKS_ARE_HELD)
    (tmp_path / "input.txt").write_text("data")
    out = run_py(script, str(tmp_path / "cache"), str(tmp_path / "input.txt"), timeout=120)
    assert [json.loads(line) for line in out.stdout.splitlines()] == [[2, 2, 1], 0]


_FORKED_CHILD_READS = r"""
import json, os, signal, sys
import fncache

f = fncache.memoize(store=sys.argv[1])(lambda x: x * 2)
print(json.dumps([f(1), f(1)]), flush=True)  # stored, then a hit on the parent's reader
store = f.store
inherited = store.db._readers.cursor.connection
pid = os.fork()
if pid == 0:
    signal.alarm(60)
    got = [f(1), f(2), f(2), list(f.cache_info())]
    mine = store.db._readers.cursor.connection
    print(json.dumps(got + [mine is not inherited]), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(json.dumps([f(1), f(2), f.cache_info().hits, status]), flush=True)
"""


def test_forked_child_reads_on_a_connection_of_its_own(tmp_path):
    """A child forked after its parent read from a disk store hits, stores and hits again through a
    reader it opened itself (SQLite connections must not cross a fork; the hit path uses the
    thread's cursor without asking which process it is in), and the parent then hits the child's
    entry."""
    from .helpers import run_py, write

    script = write(tmp_path / "fork_reads.py", _FORKED_CHILD_READS)
    out = run_py(script, str(tmp_path / "cache"), timeout=120)
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        [2, 2], [2, 4, 4, [3, 2, 2, 0], True], [2, 4, 3, 0]]


def test_every_module_level_lock_is_reset_in_a_forked_child():
    """A lock made at module level in fncache belongs to a module that resets it at fork."""
    import re

    package = Path(fncache.__file__).parent
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        locks = re.findall(r"(?m)^(_\w+) = threading\.R?Lock\(\)", source)
        for name in locks:
            assert re.search(rf"(?m)^\s+{name} = threading\.R?Lock\(\)", source) and \
                "_forks.on_fork(" in source, f"{path.name}: {name} is not reset at fork"


# -- a paused writer -------------------------------------------------------------------------------

_HOLD_WRITE_LOCK = r"""
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")     # as an sqlite3 shell, or a process stopped inside a write
print("held", flush=True)
sys.stdin.readline()
"""

_PAUSED_WRITER_VICTIM = r"""
import json, logging, pathlib, sys
import fncache

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
store, timeout, policy = sys.argv[1], float(sys.argv[2]), sys.argv[3]
marker = pathlib.Path(store).parent / "runs"  # the same in every run: part of the key

@fncache.memoize(store=store, store_options={"timeout": timeout}, on_store_error=policy)
def double(x):
    marker.write_text(marker.read_text() + f"{x} " if marker.exists() else f"{x} ")
    return 2 * x

out = {"hit": double(1)}
try:
    out["miss"] = double(2)
except fncache.StoreError as e:
    out["raised"] = str(e)
out["info"] = [double.cache_info().hits, double.cache_info().misses]
print(json.dumps(out), flush=True)
"""


@contextlib.contextmanager
def _write_lock_held(db: Path) -> Iterator[None]:
    import sys

    holder = subprocess.Popen([sys.executable, "-c", _HOLD_WRITE_LOCK, str(db)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("policy", ["log", "raise"])
def test_a_paused_writer_delays_neither_opening_nor_a_hit_and_bounds_a_write(tmp_path, policy):
    """An sqlite3 client holding BEGIN IMMEDIATE on the store: a new process opens the store and
    hits without waiting for it; its miss waits the store's timeout, then is a logged miss (the
    value returned, not stored) or, with on_store_error="raise", raises StoreError."""
    from .helpers import run_py, write

    cache = tmp_path / "cache"
    runs = tmp_path / "runs"
    script = write(tmp_path / "victim.py", _PAUSED_WRITER_VICTIM)
    run_py(script, str(cache), "10", "log")  # computes and stores 1 and 2
    assert runs.read_text() == "1 2 "
    with _write_lock_held(cache / "cache.db"):
        # Hits: with a timeout of 10 minutes, any wait for the write lock would hang the run.
        hit = json.loads(run_py(script, str(cache), "600", "log").stdout)
    assert hit == {"hit": 2, "miss": 4, "info": [2, 0]} and runs.read_text() == "1 2 "
    with contextlib.closing(sqlite3.connect(cache / "cache.db", isolation_level=None)) as con:
        con.execute("DELETE FROM Cache WHERE rowid = (SELECT MAX(rowid) FROM Cache"
                    " WHERE fncache_meta IS NOT NULL)")  # the entry of 2: its call misses next
    with _write_lock_held(cache / "cache.db"):
        proc = run_py(script, str(cache), "0.5", policy)
    out = json.loads(proc.stdout)
    assert out["hit"] == 2 and runs.read_text() == "1 2 2 "  # 2 computed, 1 still a hit
    if policy == "log":
        assert out["miss"] == 4 and "WARNING" in proc.stderr and "database is locked" in proc.stderr
    else:
        assert "miss" not in out and "database is locked" in out["raised"]
    # Nothing was stored meanwhile; once the writer is gone, results are stored as usual.
    run_py(script, str(cache), "10", "log")
    assert runs.read_text() == "1 2 2 2 "
    final = json.loads(run_py(script, str(cache), "10", "log").stdout)
    assert final["info"] == [2, 0] and runs.read_text() == "1 2 2 2 "


# -- a killed lock holder and its waiters ----------------------------------------------------------

_LOCKED_JOB = r"""
import logging, os, pathlib, sys, time
import fncache

logging.basicConfig(level=logging.INFO, format=f"{os.getpid()} %(asctime)s %(message)s")
store, here = sys.argv[1], pathlib.Path(sys.argv[3])

@fncache.memoize(store=store, lock=True, lock_timeout=20, ignore=["role"])
def slow(x, role):
    if role == "holder":
        (here / "holder-started").touch()
        time.sleep(3600)                       # killed while it computes
    with open(here / "computed", "a") as f:    # one line per computation by a waiter
        f.write(f"{os.getpid()}\n")
    while not (here / "release").exists():     # still computing while the others' waits run out
        time.sleep(0.01)
    return {"x": x}

print("calling", flush=True)
print(slow(7, sys.argv[2]), flush=True)
"""


def _wait_until(condition: Any, what: str, limit: float = 300) -> None:
    """Wait for a condition (the limit only catches a hang, it is no timing margin)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


@pytest.mark.slow
def test_after_a_lock_holder_is_killed_one_waiter_computes(tmp_path):
    """lock=True: the holder of a key is SIGKILLed while several processes wait; once its lease
    runs out one waiter takes it over and computes, and the others wait for that one (their own
    waits running out meanwhile) and share its result: one computation, not one per waiter.

    (The new holder computes until every other waiter's own wait of 20 s has run out, which
    happens a few seconds after the take-over, and well within the new holder's 20 s lease.)"""
    import signal
    import sys

    from .helpers import write

    script = write(tmp_path / "locked.py", _LOCKED_JOB)
    store = str(tmp_path / "cache")
    env = dict(os.environ)
    env.pop("FNCACHE_DISABLE", None)

    def start(role: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, str(script), store, role, str(tmp_path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    holder = start("holder")
    _wait_until((tmp_path / "holder-started").exists, "the holder to start computing")
    waiters = [start("waiter") for _ in range(4)]
    try:
        for w in waiters:
            assert w.stdout is not None and w.stdout.readline() == "calling\n"
        called = time.monotonic()  # every waiter's wait started before this, or right after
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        computed = tmp_path / "computed"
        _wait_until(computed.exists, "a waiter to take the lease over")
        # Past every other waiter's own wait (20 s from its call): unfixed, each computes now.
        time.sleep(max(0.0, called + 21 - time.monotonic()))
        (tmp_path / "release").touch()
        outs = [w.communicate(timeout=300) for w in waiters]
        results = [o[0] for o in outs]
    finally:
        for p in (holder, *waiters):
            p.kill()
            p.wait()
    assert [r.splitlines()[-1] for r in results] == ["{'x': 7}"] * 4
    assert len(computed.read_text().splitlines()) == 1, "\n".join(o[1] for o in outs)


# -- the store named by the environment ------------------------------------------------------------

_ENV_JOB = r"""
import logging, fncache
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
f = fncache.memoize(lambda x: x + 1)
print(f(1), f(1), flush=True)
g = fncache.memoize(on_store_error="raise")(lambda x: x * 2)
try:
    print(g(1), flush=True)
except fncache.StoreError as e:
    print("StoreError", e, flush=True)
"""


@pytest.mark.parametrize("value", ["htp://host/x", "redis://host:notaport/0"])
def test_a_malformed_fncache_store_is_a_store_failure_not_an_import_error(tmp_path, value):
    """A malformed $FNCACHE_STORE, like an unreachable one, does not make decorating (importing)
    fail: calls are logged misses naming the variable, or StoreError with on_store_error="raise"."""
    from .helpers import run_py, write

    script = write(tmp_path / "env_job.py", _ENV_JOB)
    proc = run_py(script, env={"FNCACHE_STORE": value})
    lines = proc.stdout.splitlines()
    assert lines[0] == "2 2" and lines[1].startswith("StoreError") and "FNCACHE_STORE" in lines[1]
    assert "WARNING" in proc.stderr and "FNCACHE_STORE" in proc.stderr


@pytest.mark.parametrize("name, value, says", [
    ("FNCACHE_STORE", "   ", "blank"), ("FNCACHE_DIR", "", "blank"),
    ("FNCACHE_DIR", "relative/cache", "relative"), ("FNCACHE_STORE", "relative/cache", "relative")])
def test_a_blank_or_relative_store_variable_warns(tmp_path, name, value, says):
    """A blank $FNCACHE_STORE/$FNCACHE_DIR is ignored and a relative one used as given, each with
    one WARNING naming the variable."""
    from .helpers import run_py, write

    script = write(tmp_path / "env_job.py", _ENV_JOB)
    env = {"FNCACHE_STORE": "", "FNCACHE_DIR": str(tmp_path / "default"), name: value}
    if name == "FNCACHE_STORE" and not value.strip():
        env["FNCACHE_DIR"] = str(tmp_path / "default")
    proc = run_py(script, env=env, cwd=tmp_path)
    assert proc.stdout.splitlines() == ["2 2", "2"]
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("WARNING")]
    assert len([w for w in warnings if name in w and says in w]) == 1, proc.stderr
    if (name, value) == ("FNCACHE_DIR", ""):
        # Neither variable names a store: the default one, in the user cache directory (the
        # run's own: tests/conftest.py), holds the two functions' entries.
        default = os.path.join(os.environ["XDG_CACHE_HOME"], "fncache")
        assert os.path.isdir(default) and not (tmp_path / "default").exists()
