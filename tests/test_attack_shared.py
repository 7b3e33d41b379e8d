"""An attacker with write access to a shared store (Redis, S3), against real servers.

Every place fncache reads a byte from (values, chunk manifests, chunks, metadata, lock leases,
listings) is planted with a pickle whose loading would create a marker file, with poisoned or deeply
nested JSON, or with oversized claims. Each test asserts that the marker never appears, that the call
returns the right value, and that the admin commands keep working. Also here: a paused server, the
credentials a memoized function carries when pickled, replayed and swapped signed entries, a reader
that lacks a module, and the options and command-line input refused at the front door.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fncache
from fncache import _codec
from fncache._errors import ConfigError

from .helpers import Plant, import_source, run_py, small_value, write

SECRET = b"attack suite secret"
SECRETS = [pytest.param(None, id="no-secret"), pytest.param(SECRET, id="secret")]
DEEP = b"[" * 100_000 + b"]" * 100_000




def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "fncache" and r.levelno >= logging.WARNING]


def fncache_cmd(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line, run as a real subprocess (it inherits the test's environment)."""
    return subprocess.run([sys.executable, "-m", "fncache", *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def cli_json(*args: str) -> Any:
    proc = fncache_cmd(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# -- the two shared stores, behind one small interface --------------------------------------------


class Shared:
    """A shared store under test: how to memoize into it, and raw access for planting."""

    kind: str
    url: str
    options: dict[str, Any]

    def memoize(self, func: Callable[..., Any] = small_value, **options: Any) -> Any:
        return fncache.memoize(store=self.url, store_options=dict(self.options), **options)(func)

    def put(self, place: str, key: str, data: bytes) -> None:
        raise NotImplementedError

    def get(self, place: str, key: str) -> bytes | None:
        raise NotImplementedError

    def cli(self) -> list[str]:
        """Arguments that point the command line at this store."""
        return ["--store", self.url]


class RedisShared(Shared):
    kind = "redis"

    def __init__(self, server: Any, prefix: str = "fncache:") -> None:
        self.server = server
        self.client = server.client()
        self.url = server.url
        self.prefix = prefix
        self.options = {} if prefix == "fncache:" else {"prefix": prefix}

    def name(self, place: str, key: str) -> str:
        short = {"value": "v", "meta": "m", "lease": "l"}[place]
        return f"{self.prefix}{short}:{key}"

    def put(self, place: str, key: str, data: bytes) -> None:
        self.client.set(self.name(place, key), data)

    def get(self, place: str, key: str) -> bytes | None:
        raw = self.client.get(self.name(place, key))
        return None if raw is None else bytes(raw)


class S3Shared(Shared):
    kind = "s3"

    def __init__(self, server: Any) -> None:
        self.server = server
        self.fs = server.filesystem()
        self.url = server.url()
        self.base = self.url[len("s3://"):]
        self.options = {}

    def path(self, place: str, key: str) -> str:
        if place == "lease":
            return f"{self.base}/locks/{key}"
        if place == "meta":
            # Under its function's group: the one listed for the key, else small_value's.
            found = [p for p in self.fs.find(f"{self.base}/f") if p.rsplit("/", 1)[1][:32] == key]
            return found[0] if found else f"{self.base}/f/tests.helpers%3Asmall_value/{key}"
        return f"{self.base}/v2/{key[:2]}/{key}"

    def put(self, place: str, key: str, data: bytes) -> None:
        self.fs.pipe_file(self.path(place, key), data)

    def get(self, place: str, key: str) -> bytes | None:
        try:
            return bytes(self.fs.cat_file(self.path(place, key)))
        except FileNotFoundError:
            return None


@pytest.fixture
def redis_shared(redis_factory: Any) -> RedisShared:
    """A private Redis server with the default prefix (so the command line sees the same keys)."""
    return RedisShared(redis_factory())


@pytest.fixture
def s3_shared(s3_env: Any) -> Iterator[S3Shared]:
    """A fresh prefix in the session's SeaweedFS bucket, credentials in the environment."""
    shared = S3Shared(s3_env)
    yield shared
    shared.fs.rm(shared.base, recursive=True) if shared.fs.exists(shared.base) else None


@pytest.fixture(params=["redis", "s3"])
def shared(request: pytest.FixtureRequest) -> Shared:
    """Each shared store in turn."""
    fixture = "redis_shared" if request.param == "redis" else "s3_shared"
    return request.getfixturevalue(fixture)  # type: ignore[no-any-return]


def _frame(value: Any, key: str, secret: bytes | None = None) -> bytes:
    return _codec.encode(value, key, created=time.time(), duration=0.0, secret=secret)


# -- planted pickles -------------------------------------------------------------------------------


@pytest.mark.parametrize("secret", SECRETS)
def test_planted_metadata_is_never_loaded_and_listings_survive(shared, tmp_path, secret):
    """A pickle planted as an entry's metadata is never loaded; the call hits, `ls`/`info` (which
    list from the index, never reading metadata) still list the entry under its function, the full
    `entries()` (what `explain` reads) marks it damaged, and `f.clear()` and `clear` remove it."""
    marker = tmp_path / "PWNED"
    f = shared.memoize(secret=secret)
    assert f(3) == small_value(3)
    shared.put("meta", f.key(3), pickle.dumps(Plant(marker), protocol=5))
    assert f(3) == small_value(3) and f.cache_info().hits == 1
    info = cli_json("info", *shared.cli())
    assert info["entries"] == 1 and info["damaged"] == 0
    rows = cli_json("ls", *shared.cli())
    assert [r["function"] for r in rows] == [f.function_id]
    assert [e.damaged for e in f.store.entries()] == [True]
    assert f.clear() == 1
    f(3)
    proc = fncache_cmd("clear", "--yes", *shared.cli())
    assert proc.returncode == 0, proc.stderr
    assert cli_json("info", *shared.cli())["entries"] == 0
    assert not marker.exists()


@pytest.mark.parametrize("secret", SECRETS)
def test_planted_lease_is_never_loaded(shared, tmp_path, secret):
    """A pickle planted as the lock lease of a key is never loaded: a `lock=True` call waits out
    its lock timeout, computes, and returns the right value."""
    marker = tmp_path / "PWNED"
    f = shared.memoize(secret=secret, lock=True, lock_timeout=1.0)
    shared.put("lease", f.key(4), pickle.dumps(Plant(marker), protocol=5))
    started = time.monotonic()
    assert f(4) == small_value(4)
    assert time.monotonic() - started < 15
    assert f(4) == small_value(4) and f.cache_info().hits == 1
    assert not marker.exists()


@pytest.mark.parametrize("secret", SECRETS)
def test_planted_value_is_never_loaded(shared, tmp_path, caplog, secret):
    """A bare pickle planted as a value (no frame) is rejected unloaded, and replaced; with a secret
    so is a well-formed but unsigned frame."""
    marker = tmp_path / "PWNED"
    f = shared.memoize(secret=secret)
    key = f.key(5)
    plants = [pickle.dumps(Plant(marker), protocol=5)]
    if secret is not None:
        plants.append(_frame(Plant(marker), key))
    for plant in plants:
        shared.put("value", key, plant)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fncache"):
            assert f(5) == small_value(5)
        assert _warnings(caplog)
    assert not marker.exists()


@pytest.mark.parametrize("secret", SECRETS)
def test_redis_planted_manifest_and_chunks_are_never_loaded(redis_shared, tmp_path, caplog, secret):
    """A pickle planted as a chunk manifest, or in chunks a valid-looking manifest points to (a
    well-formed unsigned frame when a secret is set), is never loaded; the call recomputes."""
    marker = tmp_path / "PWNED"
    shared = redis_shared
    f = shared.memoize(secret=secret)
    key = f.key(6)
    shared.put("value", key, b"\x01" + pickle.dumps(Plant(marker), protocol=5))
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(6) == small_value(6)
    token = uuid.uuid4().hex
    payload = (_frame(Plant(marker), key) if secret is not None
               else pickle.dumps(Plant(marker), protocol=5))
    chunks = [payload[i:i + 7] for i in range(0, len(payload), 7)]
    for i, part in enumerate(chunks):
        shared.client.set(f"fncache:c:{{{key}}}:{token}:{i}", part)
    manifest = {"token": token, "n": len(chunks), "size": len(payload), "chunk": 7}
    shared.put("value", key, b"\x01" + json.dumps(manifest).encode())
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(6) == small_value(6)
    assert not marker.exists()


def test_redis_oversized_manifest_is_damage_not_memory(redis_shared, caplog):
    """Manifests claiming 10**12 chunks, a petabyte, or chunks that are not there are damage: the
    call returns the right value at once, without allocating or fetching anything large."""
    shared = redis_shared
    f = shared.memoize()
    key = f.key(7)
    token = uuid.uuid4().hex
    claims = [
        {"token": token, "n": 10**12, "size": 10**12},
        {"token": token, "n": 2, "size": 10**15, "chunk": 2**29},
        {"token": token, "n": 65536, "size": 65536 * 2**20, "chunk": 2**20},
        {"token": "../../x", "n": 1, "size": 1},
    ]
    for claim in claims:
        shared.put("value", key, b"\x01" + json.dumps(claim).encode())
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="fncache"):
            assert f(7) == small_value(7)
        assert time.monotonic() - started < 20  # never read the claimed size
        info = cli_json("info", *shared.cli())
        assert info["entries"] == 1
        f.store.delete(key)


# -- poisoned JSON -------------------------------------------------------------------------------

POISON = {"size": "big", "created": [1], "function": 5, "expires": "soon", "duration": {}}


POISONS = [json.dumps(POISON).encode(), DEEP, b"\xff\xfe not json"]
POISON_IDS = ["wrong-types", "deeply-nested", "garbage"]


@pytest.mark.parametrize("meta", POISONS, ids=POISON_IDS)
def test_poisoned_metadata_never_crashes_admin_commands(shared, meta):
    """Metadata of the wrong JSON types, nested 100 000 deep, or garbage: `info`, `ls`,
    `clear --older-than`, `prune` and `f.clear()` all work (listings never read metadata), and the
    full `entries()` lists that one entry as damaged."""
    f = shared.memoize()
    g = shared.memoize(lambda x: x + 1)
    assert f(1) == small_value(1) and f(2) == small_value(2) and g(1) == 2
    shared.put("meta", f.key(1), meta)
    info = cli_json("info", *shared.cli())
    assert info["entries"] == 3 and info["damaged"] == 0
    rows = {r["function"]: r["entries"] for r in cli_json("ls", "--sort", "used", *shared.cli())}
    assert rows[f.function_id] == 2
    assert sorted(e.damaged for e in f.store.entries()) == [False, False, True]
    assert f(1) == small_value(1) and f.cache_info().hits == 1  # the value itself is fine
    dry = cli_json("clear", "--older-than", "1h", "--dry-run", *shared.cli())
    assert dry["would_remove"] == 0
    plan = cli_json("prune", "--max-size", "1B", "--dry-run", *shared.cli())
    assert plan["would_remove"] == 3
    assert f.clear() == 2
    assert fncache_cmd("clear", "--older-than", "0s", "--yes", *shared.cli()).returncode == 0
    assert cli_json("info", *shared.cli())["entries"] == 0


def _plant_usage(shared: Shared, f: Any, key: str, data: bytes) -> None:
    """Write ``data`` where the usage records of ``f``'s entry ``key`` are kept."""
    if isinstance(shared, S3Shared):
        group = f.function_id.replace(":", "%3A")
        shared.fs.pipe_file(f"{shared.base}/u/{group}", data)
    else:
        index = f"{shared.prefix}f:{f.function_id}"
        shared.client.hset(index, mapping={f"{key}:u": data, f"{key}:n": data})


@pytest.mark.parametrize("poison", POISONS, ids=POISON_IDS)
def test_poisoned_usage_records_only_change_ranking(shared, poison):
    """Usage records of the wrong types, nested 100 000 deep, or garbage are ignored: the admin
    commands work, the calls return the right values, and no entry counts as used."""
    f = shared.memoize()
    assert f(1) == small_value(1) and f(2) == small_value(2)
    _plant_usage(shared, f, f.key(1), poison)
    info = cli_json("info", *shared.cli())
    assert info["entries"] == 2 and info["damaged"] == 0
    rows = cli_json("ls", "--sort", "used", *shared.cli())
    assert [(r["function"], r["used"]) for r in rows] == [(f.function_id, None)]
    assert cli_json("clear", "--unused-for", "1h", "--dry-run", *shared.cli())["would_remove"] == 0
    assert cli_json("prune", "--max-size", "1B", "--dry-run", *shared.cli())["would_remove"] == 2
    assert f(1) == small_value(1) and f(2) == small_value(2) and f.cache_info().hits == 2


def test_bogus_usage_record_ranks_but_never_serves(shared):
    """A well-formed usage record claiming a use in the year 3000 is not believed; one claiming a
    recent use keeps its entry longest under `prune`, and the entry still holds its own value."""
    f = shared.memoize()
    for x in (1, 2, 3):
        assert f(x) == small_value(x)
    far, recent = f.key(1), f.key(3)
    if isinstance(shared, S3Shared):
        records = {far: [32503680000.0, 5], recent: [time.time(), 7]}
        _plant_usage(shared, f, far, json.dumps(records).encode())
    else:
        index = f"{shared.prefix}f:{f.function_id}"
        shared.client.hset(index, mapping={f"{far}:u": "32503680000.0", f"{far}:n": "5",
                                           f"{recent}:u": repr(time.time()), f"{recent}:n": "7"})
    used = {e.key: (e.accessed, e.uses) for e in f.store.listing()}
    assert used[far] == (None, None) and used[recent][1] == 7
    plan = cli_json("prune", "--max-size", "1B", "--dry-run", *shared.cli())
    assert plan["would_remove"] == 3
    keep_two = f.store.volume() - 1
    kept = cli_json("prune", "--max-size", f"{keep_two}B", "--yes", *shared.cli())
    assert kept["removed"] == 1
    assert {e.key for e in f.store.listing()} >= {recent}
    assert f(3) == small_value(3) and f.cache_info().hits >= 1


def test_redis_deeply_nested_manifest_is_a_logged_miss(redis_shared, caplog):
    """A manifest nested 100 000 levels deep is damage (a logged miss and removal), not a
    RecursionError from the call."""
    f = redis_shared.memoize()
    key = f.key(8)
    redis_shared.put("value", key, b"\x01" + DEEP)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(8) == small_value(8)
    assert any("damaged" in m for m in _warnings(caplog))
    assert f(8) == small_value(8) and f.cache_info().hits == 1


@pytest.mark.parametrize("lease", [DEEP, json.dumps({"token": [1], "expires": "x"}).encode()],
                         ids=["deeply-nested", "wrong-types"])
def test_s3_poisoned_lease_is_taken_over(s3_shared, lease):
    """An S3 lease nested 100 000 deep or of the wrong types is unreadable, so it is taken over;
    the `lock=True` call returns the right value."""
    f = s3_shared.memoize(lock=True, lock_timeout=60.0)
    s3_shared.put("lease", f.key(9), lease)
    started = time.monotonic()
    assert f(9) == small_value(9)
    # Taken over at once: waiting the lease out would take the 60 s lock time-out (the margin is
    # for S3 requests on a machine running both suites, one of which once took over 7 s).
    assert time.monotonic() - started < 30
    assert f.cache_info().errors == 0


# -- listings ------------------------------------------------------------------------------------


def test_redis_admin_commands_use_stored_lengths(redis_shared):
    """`info` and `prune` count the stored length of each value, not the size its (unsigned)
    metadata claims: a planted claim of a petabyte makes prune remove nothing real."""
    shared = redis_shared
    f = shared.memoize()
    for i in range(3):
        f(i)
    real = cli_json("info", *shared.cli())["bytes"]
    meta = json.loads(shared.get("meta", f.key(0)) or b"{}")
    shared.put("meta", f.key(0), json.dumps(dict(meta, size=10**15)).encode())
    assert cli_json("info", *shared.cli())["bytes"] == real
    assert cli_json("prune", "--max-size", f"{real}B", "--dry-run", *shared.cli())["would_remove"] == 0


def test_redis_planted_key_names_never_crash_listings(redis_shared):
    """Keys under the prefix that fncache never writes (not a key, not UTF-8) do not crash `ls`,
    `info` or `clear`, and `clear` removes them."""
    shared = redis_shared
    f = shared.memoize()
    f(1)
    shared.client.set(b"fncache:v:not-a-key", b"\x00junk")
    shared.client.set(b"fncache:v:\xff\xfe", b"\x00junk")
    shared.client.set(b"fncache:m:\xff", DEEP)
    assert cli_json("info", *shared.cli())["entries"] >= 2
    assert fncache_cmd("ls", *shared.cli()).returncode == 0
    assert fncache_cmd("clear", "--yes", *shared.cli()).returncode == 0
    assert not [k for k in shared.client.scan_iter(match="fncache:[vm]:*")]


def test_redis_keys_of_another_type_are_damage(redis_shared):
    """A hash planted where a value, its metadata or a chunk belongs is damage: the call returns
    the right value, `ls`/`info` list it as damaged, and `clear --older-than` removes it."""
    shared = redis_shared
    f = shared.memoize()
    f(1)
    key, other = f.key(2), f.key(3)
    shared.client.hset(f"fncache:v:{key}", "a", "b")
    assert f(2) == small_value(2) and f(2) == small_value(2) and f.cache_info().hits == 1
    f(3)
    shared.client.delete(f"fncache:m:{other}")
    shared.client.hset(f"fncache:m:{other}", "a", "b")
    planted = uuid.uuid4().hex
    shared.client.hset(f"fncache:v:{planted}", "a", "b")
    shared.client.set(f"fncache:f:{f.function_id}.evil", b"not a hash")
    info = cli_json("info", *shared.cli())
    # The metadata hash is not read by listings; it is damage to `entries()` (what explain reads).
    assert info["entries"] == 4 and info["damaged"] == 1, info
    assert sum(e.damaged for e in f.store.entries()) == 2
    assert {r["function"] for r in cli_json("ls", *shared.cli())} == {f.function_id, "(damaged)"}
    proc = fncache_cmd("clear", "--older-than", "1h", "--yes", *shared.cli())
    assert proc.returncode == 0, proc.stderr
    after = cli_json("info", *shared.cli())
    assert (after["entries"], after["damaged"], after["functions"]) == (3, 0, 1)


def test_s3_clear_function_deletes_exactly_what_it_listed(s3_shared):
    """Objects planted outside fncache's layout (another fan-out directory, the earlier layout, a
    group name fncache never writes) or filing a real entry's key under another function as well
    make `clear --function` of that function delete nothing real: an entry listed under two
    functions is damaged and matches neither."""
    shared = s3_shared
    f = shared.memoize()
    assert f(1) == small_value(1)
    victim = f.key(1)
    for planted in (f"{shared.base}/v2/zz/{victim}", f"{shared.base}/v1/{victim[:2]}/{victim}"):
        shared.fs.pipe_file(planted, b"x")
        shared.fs.pipe_file(planted + ".json", json.dumps({"function": "evil:f"}).encode())
    shared.fs.pipe_file(f"{shared.base}/f/evil%3Af/{victim}", json.dumps({"function": "evil:f"}))
    shared.fs.pipe_file(f"{shared.base}/f/evil%3af/{victim}", b"{}")  # not canonical: ignored
    rows = cli_json("ls", *shared.cli())
    assert [(r["function"], r["entries"]) for r in rows] == [("(damaged)", 1)]
    proc = fncache_cmd("clear", "--function", "evil:f", "--yes", *shared.cli())
    assert proc.returncode == 0, proc.stderr
    assert shared.get("value", victim) is not None
    assert f(1) == small_value(1) and f.cache_info().hits == 1


# -- replayed and swapped entries ----------------------------------------------------------------


@pytest.mark.parametrize("secret", SECRETS)
def test_swapped_and_replayed_entries_are_rejected(shared, caplog, secret):
    """Entries swapped between two keys, or one entry copied over another, fail their key-bound
    checksum (and signature): each call still returns its own right value."""
    f = shared.memoize(secret=secret)
    assert f(1) == small_value(1) and f(2) == small_value(2)
    one, two = shared.get("value", f.key(1)), shared.get("value", f.key(2))
    assert one is not None and two is not None
    shared.put("value", f.key(1), two)
    shared.put("value", f.key(2), one)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(1) == small_value(1) and f(2) == small_value(2)
    assert len(_warnings(caplog)) == 2
    assert f.cache_info().hits == 0
    replay = shared.get("value", f.key(2))
    assert replay is not None
    shared.put("value", f.key(1), replay)
    assert f(1) == small_value(1) and f.cache_info().hits == 0


# -- a paused server -----------------------------------------------------------------------------


def _call_all(f: Any, xs: list[int]) -> tuple[list[Any], float]:
    """Call ``f`` on each x in its own thread; the results and the time the slowest took."""
    results: list[Any] = [None] * len(xs)

    def run(i: int) -> None:
        try:
            results[i] = f(xs[i])
        except BaseException as e:  # reported as the result, so the test shows it
            results[i] = e

    started = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, time.monotonic() - started


def test_paused_redis_server_is_a_bounded_logged_miss(redis_factory, caplog):
    """Calls in flight while the Redis server is frozen (SIGSTOP) return the right values as logged
    misses within the socket time-out, never an error; after SIGCONT the entries hit again."""
    server = redis_factory()
    f = fncache.memoize(store=server.url, store_options={"socket_timeout": 1.0})(small_value)
    for x in range(4):
        f(x)
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        with caplog.at_level(logging.WARNING, logger="fncache"):
            results, took = _call_all(f, [0, 1, 2, 3, 0, 1, 5, 6])
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert results == [small_value(x) for x in [0, 1, 2, 3, 0, 1, 5, 6]], results
    assert took < 30, took  # bounded (a frozen server would hold a call for good)
    assert any("treated as a miss" in m for m in _warnings(caplog))
    hits = f.cache_info().hits
    assert f(0) == small_value(0) and f.cache_info().hits == hits + 1


@pytest.mark.slow
def test_paused_s3_server_is_a_bounded_logged_miss(s3_factory, monkeypatch, caplog):
    """With read_timeout=3 a frozen S3 server (SIGSTOP) holds a call for the store's deadline
    (connect + read time-out), not for the client's retries times the time-out."""
    server = s3_factory()
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    f = fncache.memoize(store=server.url(),
                        store_options={"read_timeout": 3, "connect_timeout": 1,
                                       "retries": 5})(small_value)
    assert f(1) == small_value(1)
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        with caplog.at_level(logging.WARNING, logger="fncache"):
            started = time.monotonic()
            assert f(1) == small_value(1)
            took = time.monotonic() - started
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    # One read (4 s deadline) and one write (4 s); sync() polls once a second. Without the
    # deadline, five tries of each, 3 s each, would take at least 30 s: the bound leaves 8 s of
    # margin for a loaded machine and stays well below that.
    assert took < 20, took
    assert any("treated as a miss" in m for m in _warnings(caplog))


# -- credentials ---------------------------------------------------------------------------------

PW = "pw-Zq81-never-shown"


def _redis_forms(port: int) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        "userinfo": (f"redis://:{PW}@127.0.0.1:{port}/0", {}),
        "query": (f"redis://127.0.0.1:{port}/0?password={PW}", {}),
        "option": (f"redis://127.0.0.1:{port}/0", {"password": PW}),
    }


@pytest.mark.parametrize("form", ["userinfo", "query", "option"])
def test_redis_password_never_in_pickles_reprs_logs_or_errors(redis_factory, caplog, monkeypatch,
                                                             form):
    """A Redis password given in the URL, its query or store_options authenticates, but is not in
    the pickle of a memoized closure, its repr, the store's repr, the log, or a bad-URL error."""
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    server = redis_factory(password=PW)
    url, options = _redis_forms(server.port)[form]

    def local(x: int) -> int:  # a closure: pickled by value, with its options
        return x * 3

    with caplog.at_level(logging.DEBUG, logger="fncache"):
        f = fncache.memoize(store=url, store_options=options)(local)
        assert f(2) == 6 and f(2) == 6 and f.cache_info().hits == 1
        data = pickle.dumps(f)
    assert PW.encode() not in data
    assert PW not in repr(f) and PW not in repr(f.store) and PW not in repr(f.store.options)
    assert all(PW not in r.getMessage() for r in caplog.records)
    bad = url.replace(f":{server.port}/", ":99999/")
    with pytest.raises(ConfigError) as err:
        fncache.memoize(store=bad, store_options=options)(local)
    assert PW not in str(err.value) and PW not in repr(err.value)
    wrong = url.replace(PW, PW + "-wrong")
    options = {k: v.replace(PW, PW + "-wrong") for k, v in options.items()}
    g = fncache.memoize(store=wrong, store_options=options, on_store_error="raise")(local)
    with pytest.raises(fncache.StoreError) as failed:
        g(1)
    assert PW not in _chain_text(failed.value)
    assert PW not in repr(g)


def _chain_text(e: BaseException | None) -> str:
    """The text of an exception and of every cause and context behind it."""
    out = []
    while e is not None:
        out.append(f"{type(e).__name__}: {e!s} {e!r}")
        e = e.__cause__ or e.__context__
    return " | ".join(out)


def test_joblib_style_memory_never_pickles_or_shows_a_password():
    """``fncache.Memory`` and the functions it caches pickle and print a Redis location without its
    password, whether it is in the URL or in backend_options (nothing connects here)."""

    def local(x: int) -> int:
        return x

    for location, options in ((f"redis://:{PW}@127.0.0.1:1/0", None),
                              ("redis://127.0.0.1:1/0", {"password": PW})):
        memory = fncache.Memory(location, backend_options=options, verbose=0)
        cached = memory.cache(local)
        for obj in (memory, cached):
            assert PW.encode() not in pickle.dumps(obj)
            assert PW not in repr(obj)


WORKER = """
import pickle, sys
import fncache

@fncache.memoize(store=sys.argv[2])
def triple(x):
    print("computing", file=sys.stderr)
    return x * 3

if sys.argv[1] == "dump":
    triple(5)
    sys.stdout.buffer.write(pickle.dumps(triple))  # defined in __main__: pickled by value
else:
    print(pickle.loads(sys.stdin.buffer.read())(5))
"""


@pytest.mark.slow
def test_redis_function_from_main_travels_without_password(redis_factory, tmp_path, monkeypatch):
    """A memoized function defined in ``__main__`` pickles (by value) without its password; a
    worker that loads it authenticates with ``$REDIS_PASSWORD`` and hits the stored entry."""
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    server = redis_factory(password=PW)
    script = write(tmp_path / "worker.py", WORKER)
    url = f"redis://:{PW}@127.0.0.1:{server.port}/0"
    dump = subprocess.run([sys.executable, str(script), "dump", url], capture_output=True,
                          timeout=120, check=True)
    assert b"computing" in dump.stderr
    assert PW.encode() not in dump.stdout and b"triple" in dump.stdout
    loaded = subprocess.run([sys.executable, str(script), "load", str(tmp_path / "unused")],
                            input=dump.stdout, capture_output=True, timeout=120,
                            env=dict(os.environ, REDIS_PASSWORD=PW))
    assert loaded.returncode == 0, loaded.stderr.decode()
    assert loaded.stdout.split() == [b"15"]
    assert b"computing" not in loaded.stderr  # read from the store, not computed again


def test_s3_credentials_never_in_pickles_reprs_or_logs(s3_server, caplog, monkeypatch):
    """S3 key and secret given as store options (or in client_kwargs) authenticate, but are not in
    the pickle of a memoized closure, its repr, the store's repr or the log."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)

    def local(x: int) -> int:
        return x * 5

    options = {"endpoint_url": s3_server.endpoint_url, "key": s3_server.key,
               "client_kwargs": {"aws_secret_access_key": s3_server.secret}}
    with caplog.at_level(logging.DEBUG, logger="fncache"):
        f = fncache.memoize(store=s3_server.url(), store_options=options)(local)
        assert f(2) == 10 and f(2) == 10 and f.cache_info().hits == 1
        data = pickle.dumps(f)
    for secret in (s3_server.secret, s3_server.key):
        assert secret.encode() not in data
        assert secret not in repr(f) and secret not in repr(f.store)
        assert all(secret not in r.getMessage() for r in caplog.records)
    f.store.clear()
    wrong = "wrong-secret-Kq72"
    options["client_kwargs"] = {"aws_secret_access_key": wrong}
    g = fncache.memoize(store=s3_server.url(), store_options=options, on_store_error="raise")(local)
    with pytest.raises(fncache.StoreError) as failed:
        g(1)
    assert wrong not in _chain_text(failed.value) and s3_server.key not in str(failed.value)


# -- a reader that cannot load an entry ----------------------------------------------------------

READER = """
import os, sys
import fncache

@fncache.memoize(store=sys.argv[1], version="1")
def load(x):
    import thingmod  # only some processes have it
    return thingmod.Thing(x)

try:
    print("value", load(7).x)
except ImportError as e:
    print("compute failed:", e.name)
"""

THINGMOD = """
class Thing:
    def __init__(self, x):
        self.x = x
"""


@pytest.mark.slow
def test_reader_without_a_module_keeps_the_shared_entry(shared, tmp_path):
    """A process that cannot unpickle a verified entry (it lacks the module) treats it as a miss,
    warns naming the module, and leaves the entry for processes that can still read it."""
    script = write(tmp_path / "reader.py", READER)
    write(tmp_path / "has" / "thingmod.py", THINGMOD)
    with_module = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "has"),
                                                  os.environ.get("PYTHONPATH", "")])}
    assert "value 7" in run_py(script, shared.url, env=with_module).stdout
    f = shared.memoize(lambda x: x, version="1")
    keys_before = [e.key for e in f.store.entries()]
    assert len(keys_before) == 1
    lacking = run_py(script, shared.url)
    assert "compute failed: thingmod" in lacking.stdout
    assert "thingmod" in lacking.stderr and "cannot be loaded" in lacking.stderr
    assert [e.key for e in f.store.entries()] == keys_before
    assert shared.get("value", keys_before[0]) is not None
    assert "value 7" in run_py(script, shared.url, env=with_module).stdout


def test_unloadable_entry_is_replaced_once_a_recompute_succeeded(shared, tmp_path, caplog):
    """An entry this process cannot load (its module is gone) is a miss warned once by module
    name; the recomputed value then replaces it, and the next call hits it quietly."""
    mod = import_source("thingmod_gone", THINGMOD, tmp_path)
    state = {"thing": True}

    def make(x: int) -> Any:
        return mod.Thing(x) if state["thing"] else ("plain", x)

    f = shared.memoize(make, version="1")
    assert f(1).x == 1
    sys.modules.pop("thingmod_gone")  # and it is not on sys.path: unpickling cannot import it
    state["thing"] = False
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(1) == ("plain", 1)
    assert any("thingmod_gone" in m for m in _warnings(caplog))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(1) == ("plain", 1)
    assert _warnings(caplog) == [] and f.cache_info().hits == 1


# -- the front door: options and command-line input ----------------------------------------------


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"expire": float("nan")}, "expire"),
        ({"expire": float("inf")}, "expire"),
        ({"lock_timeout": float("nan")}, "lock_timeout"),
        ({"lock_timeout": float("inf")}, "lock_timeout"),
        ({"lock": "no"}, "lock"),
        ({"verbose": "yes"}, "verbose"),
        ({"depends_on": "data.csv"}, "depends_on=['data.csv']"),
        ({"depends_on": pathlib.Path("data.csv")}, "depends_on"),
        ({"store": "redis://127.0.0.1:99999/0"}, "Redis URL"),
        ({"store": "redis://127.0.0.1:1/0", "store_options": {"chunk_size": 0}}, "chunk_size"),
        ({"store": "redis://127.0.0.1:1/0", "store_options": {"colour": 1}}, "colour"),
        ({"store": "s3://bucket/p", "store_options": {"colour": 1}}, "colour"),
        ({"store": "s3://bucket/p", "store_options": {"read_timeout": float("nan")}}, "read_timeout"),
        ({"store_options": {"colour": 1}}, "colour"),
        ({"store": "memory://x", "store_options": {"colour": 1}}, "colour"),
    ],
)
def test_bad_options_are_refused_at_decoration_time(tmp_path, monkeypatch, options, needle):
    """Invalid options raise ConfigError naming the option when decorating, before any call, and
    without creating a cache directory."""
    monkeypatch.setenv("FNCACHE_DIR", str(tmp_path / "default"))
    monkeypatch.delenv("FNCACHE_STORE", raising=False)
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(")):
        fncache.memoize(**options)(small_value)
    assert not (tmp_path / "default").exists()


def test_cli_malformed_store_url_is_bad_usage():
    """A malformed store URL exits 2 (usage), naming the problem."""
    for url in ("redis://127.0.0.1:99999/0", "bogus://x", "redis://"):
        proc = fncache_cmd("ls", "--store", url)
        assert proc.returncode == 2, (url, proc.stderr)
        assert "--store" in proc.stderr


@pytest.mark.parametrize("command", [["ls"], ["info"], ["explain", "tests.test_attack_shared:small_value"]])
def test_cli_directory_without_a_store_exits_1_and_creates_nothing(tmp_path, command):
    """`ls`, `info` and `explain` on a directory that holds no store exit 1 and leave it empty."""
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = fncache_cmd(*command, "--dir", str(empty))
    assert proc.returncode == 1 and "no cache" in proc.stderr
    assert list(empty.iterdir()) == []


def test_cli_explain_of_a_module_that_does_not_exist_exits_1(tmp_path):
    """`explain nosuchmodule:f` with nothing stored exits 1 and says why."""
    f = fncache.memoize(store=str(tmp_path / "c"))(small_value)
    f(1)
    proc = fncache_cmd("explain", "nosuchmodule:f", "--dir", str(tmp_path / "c"))
    assert proc.returncode == 1 and "nosuchmodule" in proc.stderr
