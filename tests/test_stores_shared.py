"""Stores shared between processes and servers: races, dead or full servers, large values, secrets.

The servers are real (see ``tests/servers.py``); the racing processes are real ``spawn``ed
interpreters that receive the store pickled, as memoized functions shipped to workers do.
"""

from __future__ import annotations

import faulthandler
import json
import multiprocessing
import os
import pickle
import signal
import time
import uuid
from typing import Any

import pytest

from fncache._errors import LockTimeout, StoreError
from fncache.stores import open_store
from fncache.stores._s3_errors import http_status as _http_status

META = {"function": "tests.test_stores_shared:f"}
RACERS = 16


def new_key() -> str:
    return uuid.uuid4().hex


# -- a 16-process create-only race ---------------------------------------------------------------


def _race(store: Any, key: str, index: int, ready: Any, go: Any, results: Any) -> None:
    """One racer: connect, wait for the start signal, then try to add its own value."""
    try:
        store.contains(key)  # connect before the start, so the race is on the add alone
        ready.put(index)
        go.wait(60)
        results.put((index, store.add(key, b"racer-%d" % index, META)))
    except BaseException as e:  # reported to the parent, which fails the test with it
        results.put((index, repr(e)))


def run_race(store: Any) -> tuple[list[int], Any]:
    """Race ``RACERS`` spawned processes adding one key; the winners and the stored value."""
    ctx = multiprocessing.get_context("spawn")
    key = new_key()
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_race, args=(store, key, i, ready, go, results)) for i in range(RACERS)
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=120)
        go.set()
        outcomes = dict(results.get(timeout=60) for _ in procs)
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    errors = {i: o for i, o in outcomes.items() if not isinstance(o, bool)}
    assert not errors, errors
    return [i for i, won in outcomes.items() if won], store.get(key)


def _assert_one_winner(store: Any) -> None:
    winners, value = run_race(store)
    assert len(winners) == 1, f"winners: {winners}"
    assert bytes(value) == b"racer-%d" % winners[0]


@pytest.mark.slow
def test_race_disk(tmp_path):
    """Of 16 processes adding one key to a disk store at once, exactly one wins."""
    _assert_one_winner(open_store(str(tmp_path / "cache")))


@pytest.mark.slow
@pytest.mark.redis
def test_race_redis(redis_server):
    """Of 16 processes adding one key to a Redis store at once, exactly one wins."""
    _assert_one_winner(open_store(redis_server.url, prefix=f"{new_key()}:"))


@pytest.mark.slow
@pytest.mark.redis
def test_race_redis_chunked(redis_server):
    """The create-only race has one winner for chunked Redis values too."""
    _assert_one_winner(open_store(redis_server.url, prefix=f"{new_key()}:", chunk_size=3))


@pytest.mark.slow
@pytest.mark.s3
def test_race_s3(s3_env):
    """Of 16 processes adding one key to an S3 store at once, exactly one wins (If-None-Match)."""
    _assert_one_winner(open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url))


# -- a lock holder killed with SIGKILL -----------------------------------------------------------


def _hold_lock(store: Any, key: str, held: Any) -> None:
    store.lock(key, timeout=1.0).__enter__()
    held.set()
    time.sleep(60)  # killed long before this ends


def _assert_dead_holder_expires(store: Any) -> None:
    ctx = multiprocessing.get_context("spawn")
    key, held = new_key(), ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(store, key, held))
    proc.start()
    try:
        assert held.wait(60), "the holder never got the lock"
    finally:
        proc.kill()
        proc.join(10)
    # Taken over, not timed out: the lock is acquired (a LockTimeout would fail the test) while
    # the dead holder's lease had no one to renew it. No bound tighter than the wait itself: a
    # loaded machine stretches the lease's expiry check by seconds.
    with store.lock(key, timeout=60):
        pass


@pytest.mark.slow
def test_killed_lock_holder_disk(tmp_path):
    """A disk lock whose holder was SIGKILLed is free again once its lease ran out."""
    _assert_dead_holder_expires(open_store(str(tmp_path / "cache")))


@pytest.mark.slow
@pytest.mark.redis
def test_killed_lock_holder_redis(redis_server):
    """A Redis lock whose holder was SIGKILLed is free again once its lease ran out."""
    _assert_dead_holder_expires(open_store(redis_server.url, prefix=f"{new_key()}:"))


@pytest.mark.slow
@pytest.mark.s3
def test_killed_lock_holder_s3(s3_env):
    """An S3 lease whose holder was SIGKILLed is taken over once its expiry time passed."""
    _assert_dead_holder_expires(open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url))


@pytest.mark.s3
def test_s3_lease_read_as_missing_for_a_moment_is_not_taken_over(s3_env, monkeypatch):
    """A lease the server says exists (the create is refused) but then reads as not found, as
    SeaweedFS answers now and then under load, is not deleted and taken: the second holder
    creates again, is refused again and waits; the first holder's lease is left in place."""
    store = open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url)
    key = new_key()
    call = store._call
    missing = [1]  # the next read of the lease only

    def flaky(method, *args, **kwargs):
        if method == "cat_file" and missing and args[0] == store.paths.lock(key):
            missing.pop()
            raise FileNotFoundError(args[0])
        return call(method, *args, **kwargs)

    with store.lock(key, timeout=60) as held:
        monkeypatch.setattr(store, "_call", flaky)
        with pytest.raises(LockTimeout):
            with store.lock(key, timeout=0.3):
                pass
        monkeypatch.undo()
        assert not missing  # the read did fail once
        assert held.holder() == held.token  # the first holder's lease is still there


# -- Redis: dead, hung and full servers ----------------------------------------------------------


@pytest.mark.redis
def test_redis_stopped_server_raises_store_error(redis_factory):
    """A Redis server that goes away turns every call into StoreError within seconds."""
    server = redis_factory()
    store = open_store(server.url, prefix="dead:", socket_connect_timeout=1)
    key = new_key()
    assert store.add(key, b"v", META)
    server.stop()
    started = time.monotonic()
    with pytest.raises(StoreError):
        store.get(key)
    with pytest.raises(StoreError):
        store.add(new_key(), b"v", META)
    assert time.monotonic() - started < 15


@pytest.mark.slow
@pytest.mark.redis
def test_redis_hung_server_times_out(redis_factory):
    """A Redis server that stops answering (SIGSTOP) makes a read fail by socket timeout, not hang;
    the store works again once the server resumes."""
    server = redis_factory()
    store = open_store(server.url, prefix="hung:", socket_timeout=0.5)
    key = new_key()
    assert store.add(key, b"v", META)
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError):
            store.get(key)
        assert time.monotonic() - started < 15
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert store.get(key) == b"v"


@pytest.mark.redis
def test_redis_full_server_raises_store_error_and_recovers(redis_factory):
    """At ``maxmemory`` with ``noeviction`` an add raises StoreError, leaves no chunks behind, and
    the store reads fine meanwhile and writes again once memory is available."""
    server = redis_factory()
    client = server.client()
    store = open_store(server.url, prefix="full:", chunk_size=256 * 1024)
    kept = new_key()
    assert store.add(kept, b"kept", META)
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", "1mb")
    for value in (b"x" * (2 * 2**20), b"y" * (200 * 1024)):  # chunked, then inline
        with pytest.raises(StoreError, match="maxmemory"):
            for _ in range(20):  # fill it up, whatever the baseline memory
                store.add(new_key(), value, META)
    assert not list(client.scan_iter(match="full:c:*")), "chunks of a failed add were left"
    assert store.get(kept) == b"kept"
    assert store.contains(kept)
    client.config_set("maxmemory", "0")
    key = new_key()
    assert store.add(key, b"z" * 300_000, META)
    assert store.get(key) == b"z" * 300_000


# -- Redis: chunked values -----------------------------------------------------------------------


@pytest.fixture
def chunked(redis_server):
    store = open_store(redis_server.url, prefix=f"{new_key()}:", chunk_size=1000)
    yield store, redis_server.client()
    store.clear()


@pytest.mark.redis
def test_redis_large_value_is_chunked_and_read_back(chunked):
    """A value above ``chunk_size`` is stored as chunks, listed with its full size, read back whole,
    and its chunks have no pending expiry once published."""
    store, client = chunked
    key, value = new_key(), os.urandom(10_500)
    assert store.add(key, value, META)
    chunks = list(client.scan_iter(match=f"{store.prefix}c:*"))
    assert len(chunks) == 11
    assert all(client.ttl(c) == -1 for c in chunks)
    assert store.get(key) == value
    assert [e.size for e in store.entries()] == [10_500]
    assert store.volume() == 10_500
    assert store.add(key, b"other" * 1000, META) is False
    assert len(list(client.scan_iter(match=f"{store.prefix}c:*"))) == 11, "loser left chunks"


@pytest.mark.redis
def test_redis_chunked_expiry_covers_chunks(chunked):
    """An expiring chunked entry gives its chunks the same TTL."""
    store, client = chunked
    assert store.add(new_key(), b"e" * 3000, META, expire=60)
    ttls = [client.ttl(c) for c in client.scan_iter(match=f"{store.prefix}c:*")]
    assert len(ttls) == 3 and all(0 < t <= 60 for t in ttls)


@pytest.mark.redis
def test_redis_missing_chunk_reads_as_miss(chunked):
    """A chunked entry with a chunk gone reads as a miss, is removed, and can be added again."""
    store, client = chunked
    key, value = new_key(), os.urandom(5000)
    assert store.add(key, value, META)
    client.delete(next(iter(client.scan_iter(match=f"{store.prefix}c:*"))))
    assert store.get(key) is None
    assert not store.contains(key)
    assert store.add(key, value, META)
    assert store.get(key) == value


@pytest.mark.redis
def test_redis_set_and_delete_free_old_chunks(chunked):
    """Replacing or deleting a chunked value removes its chunks; no key is left behind."""
    store, client = chunked
    key = new_key()
    store.set(key, b"a" * 5000, META)
    store.set(key, b"b" * 2500, META)
    assert len(list(client.scan_iter(match=f"{store.prefix}c:*"))) == 3
    assert store.get(key) == b"b" * 2500
    store.set(key, b"small", META)
    assert not list(client.scan_iter(match=f"{store.prefix}c:*"))
    store.set(key, b"c" * 5000, META)
    assert store.delete(key)
    assert not list(client.scan_iter(match=f"{store.prefix}*"))


@pytest.mark.redis
def test_redis_oversized_write_needs_chunking(redis_factory):
    """A value over the server's bulk limit fails cleanly unchunked and works chunked."""
    server = redis_factory("--proto-max-bulk-len", "1mb")
    value = os.urandom(int(1.5 * 2**20))
    whole = open_store(server.url, prefix="whole:")
    with pytest.raises(StoreError):
        whole.add(new_key(), value, META)
    assert whole.add(new_key(), b"still usable", META)
    split = open_store(server.url, prefix="split:", chunk_size=512 * 1024)
    key = new_key()
    assert split.add(key, value, META)
    assert split.get(key) == value


def test_redis_password_is_cut_from_every_url_form():
    """Passwords in the userinfo or the query of redis://, rediss:// and unix:// URLs are removed
    from ``url`` and still used to connect; a URL without one is kept as given."""
    from fncache.stores._redis_config import split_password as _split_password
    from fncache.stores.redis import RedisStore

    assert _split_password("redis://:p%40ss@h:1/0") == ("redis://h:1/0", "p@ss")
    assert _split_password("rediss://me:pw@h/2?x=1") == ("rediss://me@h/2?x=1", "pw")
    assert _split_password("unix://:pw@/run/r.sock?db=2") == ("unix:///run/r.sock?db=2", "pw")
    assert _split_password("redis://h/0?password=pw&db=1") == ("redis://h/0?db=1", "pw")
    assert _split_password("redis://u@h:6379/0") == ("redis://u@h:6379/0", None)
    store = RedisStore("redis://:pw@127.0.0.1:1/0")
    assert store.url == "redis://127.0.0.1:1/0" and "pw" not in repr(store.options)


# -- Redis: secrets, fork ------------------------------------------------------------------------


@pytest.mark.redis
def test_redis_password_is_never_pickled(redis_factory, monkeypatch):
    """A password in the URL connects but stays out of ``url``, ``options`` and the pickle; the
    unpickled store authenticates with ``$REDIS_PASSWORD``."""
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    server = redis_factory(password="s3cret-pw")
    url = f"redis://:s3cret-pw@127.0.0.1:{server.port}/0"
    store = open_store(url, prefix="pw:")
    key = new_key()
    assert store.add(key, b"v", META)
    assert "s3cret" not in store.url and "s3cret" not in repr(store.options)
    payload = pickle.dumps(store)
    assert b"s3cret" not in payload
    store.close()
    clone = pickle.loads(payload)
    if clone is not store:  # a fresh process would read the password from its environment
        with pytest.raises(StoreError):
            clone.get(key)
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret-pw")
    from fncache.stores.redis import RedisStore

    fresh = RedisStore(f"redis://127.0.0.1:{server.port}/0", prefix="pw:")
    assert fresh.get(key) == b"v"


def _add_in_child(store: Any, key: str) -> None:
    faulthandler.dump_traceback_later(20, exit=True)  # a hung child shows where, then exits 1
    os._exit(0 if store.add(key, b"from-child", META) else 1)


@pytest.mark.slow
@pytest.mark.redis
def test_redis_store_survives_fork(redis_server):
    """A store used before ``fork`` reconnects in the child rather than share the parent socket."""
    store = open_store(redis_server.url, prefix=f"{new_key()}:")
    assert store.add(new_key(), b"parent", META)
    key = new_key()
    proc = multiprocessing.get_context("fork").Process(target=_add_in_child, args=(store, key))
    proc.start()
    proc.join(30)
    assert proc.exitcode == 0
    assert store.get(key) == b"from-child"
    assert len(store) == 2


# -- S3 ------------------------------------------------------------------------------------------


@pytest.mark.s3
def test_s3_stopped_server_raises_store_error(s3_factory, monkeypatch):
    """An S3 server that goes away turns calls into StoreError within seconds, not a hang."""
    server = s3_factory()
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    store = open_store(server.url(), endpoint_url=server.endpoint_url, connect_timeout=1)
    key = new_key()
    assert store.add(key, b"v", META)
    server.stop()
    started = time.monotonic()
    with pytest.raises(StoreError):
        store.get(key)
    with pytest.raises(StoreError):
        store.add(new_key(), b"v", META)
    assert time.monotonic() - started < 30


@pytest.mark.slow
@pytest.mark.s3
def test_s3_store_survives_fork(s3_env):
    """A store used before ``fork`` makes a new client in the child (loops are per process)."""
    store = open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url)
    assert store.add(new_key(), b"parent", META)
    key = new_key()
    proc = multiprocessing.get_context("fork").Process(target=_add_in_child, args=(store, key))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert store.get(key) == b"from-child"
    store.clear()


@pytest.mark.s3
def test_s3_multipart_value_is_create_only(s3_env):
    """A value large enough for a multipart upload reads back whole and is still create-only."""
    store = open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url, part_size=5 * 2**20)
    key, value = new_key(), os.urandom(11 * 2**20)
    assert store.add(key, value, META)
    assert store.add(key, b"late" * 3 * 2**20, META) is False
    assert store.get(key) == value
    assert [e.size for e in store.entries()] == [len(value)]
    store.clear()


@pytest.mark.s3
def test_s3_layout_fans_out_by_key_prefix(s3_env):
    """Values live at ``prefix/v2/<first two hex digits>/<key>``, their JSON metadata under the
    function's group ``prefix/f/<function, percent-encoded>/<key>``."""
    store = open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url)
    key = "ab" + new_key()[2:]
    store.add(key, b"v", META)
    fs = s3_env.filesystem()
    base = store.url[len("s3://") :]
    group = META["function"].replace(":", "%3A")
    assert sorted(fs.find(base)) == [f"{base}/f/{group}/{key}", f"{base}/v2/ab/{key}"]
    store.clear()
    assert [p for p in fs.find(base) if p != base] == []  # SeaweedFS may keep the folder itself


@pytest.mark.s3
def test_s3_credentials_are_never_pickled(s3_server, monkeypatch):
    """Explicit key and secret work but stay out of ``options`` and the pickle; the unpickled store
    authenticates from the AWS environment of the process that loads it."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    store = open_store(
        s3_server.url(),
        endpoint_url=s3_server.endpoint_url,
        key=s3_server.key,
        client_kwargs={"aws_secret_access_key": s3_server.secret},
    )
    key = new_key()
    assert store.add(key, b"v", META)
    payload = pickle.dumps(store)
    assert s3_server.secret.encode() not in payload and s3_server.key.encode() not in payload
    assert s3_server.secret not in repr(store.options)
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    from fncache.stores.s3 import S3Store

    clone = S3Store(*pickle.loads(payload).__reduce__()[1][:1], **store.options)
    assert clone.get(key) == b"v"
    store.clear()


@pytest.mark.s3
def test_s3_missing_bucket_is_an_error_not_a_miss(s3_env):
    """A read from a bucket that does not exist raises StoreError instead of reading as a miss.

    (``contains`` is a HEAD request, whose 404 has no body to tell a missing bucket apart, and
    SeaweedFS creates buckets on upload, so writes are not checked here.)
    """
    store = open_store(f"s3://no-such-bucket-{new_key()[:8]}/x", endpoint_url=s3_env.endpoint_url)
    with pytest.raises(StoreError, match="NoSuchBucket|bucket"):
        store.get(new_key())


@pytest.mark.s3
def test_s3_endpoint_from_environment(s3_env):
    """With no options at all, endpoint and credentials come from the AWS_* environment."""
    store = open_store(s3_env.url())
    key = new_key()
    assert store.add(key, b"env", META)
    assert store.get(key) == b"env"
    store.clear()


@pytest.mark.s3
def test_s3_server_ignoring_if_none_match_still_stores_a_value(s3_env, monkeypatch):
    """Where a server ignores ``If-None-Match`` every add succeeds and the last write stays."""
    store = open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url)
    pipe_file = store.fs._pipe_file

    async def ignoring_condition(path: str, data: bytes, mode: Any = None, **kw: Any) -> Any:
        return await pipe_file(path, data, **kw)

    monkeypatch.setattr(store.fs, "_pipe_file", ignoring_condition)
    key = new_key()
    assert store.add(key, b"same", META)
    assert store.add(key, b"same", META)
    assert store.get(key) == b"same"
    store.clear()


def test_s3_exists_is_recognised_by_status_not_class():
    """A 412 is found on the exception chain whatever class s3fs translated it into."""

    class FakeClientError(Exception):
        response = {
            "Error": {"Code": "PreconditionFailed"},
            "ResponseMetadata": {"HTTPStatusCode": 412},
        }

    try:
        try:
            raise FakeClientError("precondition")
        except FakeClientError as inner:
            raise OSError(22, "Invalid argument") from inner
    except OSError as e:
        assert _http_status(e) == 412
    assert _http_status(ValueError("no response")) is None


@pytest.mark.s3
def test_s3_long_function_names_list_under_a_checked_hashed_group(s3_env):
    """A function id too long to spell in an object name lists under a hashed group whose name is
    read from a metadata record and believed only if it hashes to that group."""
    from fncache.stores._s3_layout import group_of

    store = open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url)
    long = "tests.test_stores_shared:" + "nested.<locals>." * 40 + "f"
    keys = [new_key(), new_key()]
    for key in keys:
        store.add(key, b"v", {"function": long})
    group = group_of(long)
    assert group.startswith("~") and len(group) == 33
    assert {(e.key, e.function, e.damaged) for e in store.listing()} == {
        (k, long, False) for k in keys}
    fs = s3_env.filesystem()
    base = store.url[len("s3://") :]
    fs.pipe_file(f"{base}/f/{group}/{keys[0]}", json.dumps({"function": "evil:f"}).encode())
    fs.pipe_file(f"{base}/f/{group}/{keys[1]}", json.dumps({"function": "evil:f"}).encode())
    assert {e.damaged for e in store.listing()} == {True}  # a name that does not hash there
    assert store.clear_function(long) == 2
    assert list(store.listing()) == []


def test_s3_groups_round_trip_and_never_name_a_directory_step():
    """Function ids encode to groups that decode back exactly; `.`, `..` and names that are not
    in canonical form are no group."""
    from fncache.stores._s3_layout import GROUP, function_of, group_of

    for name in ["m:f", ".hidden:x", "mod:<lambda>", "é:ü", "a b/c:d%e", "m:f\udcff"]:
        group = group_of(name)
        assert GROUP.fullmatch(group) and "/" not in group and function_of(group) == name
    for bad in [".", "..", "a/b", "%2e", "m%3af", "m%3A%66"]:
        assert function_of(bad) is None
    assert group_of("..") == "%2E." and function_of("%2E.") == ".."


# -- summaries from the Redis totals -------------------------------------------------------------


@pytest.fixture
def summed(redis_server):
    """A Redis store holding entries of two functions, some used, under a fresh prefix."""
    from fncache.stores._base import Use

    store = open_store(redis_server.url, prefix=f"{new_key()}:")
    keys = {"a": [new_key() for _ in range(5)], "b": [new_key() for _ in range(3)]}
    for function, names in keys.items():
        for i, key in enumerate(names):
            store.add(key, os.urandom(10 + 7 * i), {"function": f"m:{function}",
                                                    "created": 1_700_000_000.0 + i})
    store.record_use([Use(keys["a"][1], "m:a", time.time() - 5, 3),
                      Use(keys["b"][0], "m:b", time.time() - 9, 1)])
    yield store, keys
    store.clear()
    store.close()


def _totals(store: Any) -> dict[str, dict[bytes, bytes]]:
    client = store.client
    return {name.decode(): client.hgetall(name)
            for name in client.scan_iter(match=store.keys.pattern("s"))}


@pytest.mark.redis
def test_redis_summary_is_the_listing_summarised_and_kept_as_totals(summed):
    """``summary()`` gives exactly ``summarize(listing())`` (entries, bytes, newest, oldest, last
    use, uses per function), and the totals it answers from are kept by the adds themselves."""
    from fncache.stores._base import summarize

    store, keys = summed
    totals = _totals(store)
    assert sorted(totals) == [store.keys.totals("m:a"), store.keys.totals("m:b")]
    assert totals[store.keys.totals("m:a")][b"n"] == b"5"
    assert totals[store.keys.totals("m:a")][b"uses"] == b"3"
    rows = store.summary()
    assert rows == summarize(store.listing())
    assert [(r.function, r.entries) for r in rows] == [("m:a", 5), ("m:b", 3)]
    assert _totals(store) == totals, "totals that agree with the values are not rewritten"


@pytest.mark.redis
def test_redis_summary_follows_deletes_replacements_and_expiry(summed):
    """A delete (the oldest entry), a replacement by ``set``, a whole function cleared and an
    entry that expires on the server all show in the next ``summary()``: missing or outdated
    totals are rebuilt from the listing."""
    from fncache.stores._base import summarize

    store, keys = summed
    assert store.delete(keys["a"][0])  # the oldest of m:a
    assert store.summary() == summarize(store.listing())
    store.set(keys["a"][1], b"replaced, longer than before", {"function": "m:a"})
    assert store.summary() == summarize(store.listing())
    store.clear_function("m:b")
    assert store.summary() == summarize(store.listing())
    assert [r.function for r in store.summary()] == ["m:a"]
    short = new_key()
    store.add(short, b"brief", {"function": "m:a"}, expire=0.05)
    deadline = time.monotonic() + 30
    while store.contains(short):  # wait on the server's expiry, not a duration
        assert time.monotonic() < deadline, "the entry never expired"
        time.sleep(0.02)
    rows = store.summary()
    assert rows == summarize(store.listing())
    assert rows[0].entries == 4


@pytest.mark.redis
def test_redis_planted_totals_are_rebuilt_and_never_decide_a_prune(summed):
    """Totals that are malformed, or name a function with no entries, or count more entries than
    there are values, are replaced by the listing's; totals that keep the count but lie about
    bytes show only in ``summary()``: prune decides on the listed entries and keeps them all."""
    from fncache.stores._base import summarize
    from fncache.stores.prune import plan_prune

    store, keys = summed
    client = store.client
    truth = summarize(store.listing())
    client.hset(store.keys.totals("m:a"), "n", "lots")
    assert store.summary() == truth
    assert _totals(store)[store.keys.totals("m:a")][b"n"] == b"5", "the damaged total is rebuilt"
    client.hset(store.keys.totals("m:ghost"), mapping={
        "n": 2, "b": 1, "new": "1.0", "old": "1.0", "used": "0", "uses": 0})
    assert store.summary() == truth
    assert store.keys.totals("m:ghost") not in _totals(store)
    client.hset(store.keys.totals("m:b"), mapping={"n": 4, "b": 10**12})
    assert store.summary() == truth
    # Counts kept, bytes planted: the one lie a count cannot catch, and it reaches no decision.
    client.hset(store.keys.totals("m:b"), "b", 10**12)
    assert sum(r.size for r in store.summary()) > 10**12
    real = sum(e.size for e in store.listing())
    assert plan_prune(store, max_bytes=real) == []
    assert len(store) == 8


@pytest.mark.redis
def test_redis_summary_counts_entries_outside_any_index(summed):
    """Values with no index (metadata naming no function, or written by something else) have no
    totals; the count of values finds them and the summary is the listing's."""
    from fncache.stores._base import summarize

    store, _ = summed
    store.add(new_key(), b"anonymous", {})
    store.client.set(store.keys.value(new_key()), b"\x00planted")
    rows = store.summary()
    assert rows == summarize(store.listing())
    assert sum(r.entries for r in rows) == 10


@pytest.mark.redis
def test_redis_listing_of_a_function_with_a_thousand_entries_ends(redis_server):
    """A function's index large enough to be read in several pages, the last of them empty, is
    listed once through (the empty last page once restarted the read from the first page, and
    the listing never ended)."""
    import threading

    store = open_store(redis_server.url, prefix=f"{new_key()}:")
    try:
        keys = {new_key() for _ in range(1000)}
        for key in keys:
            store.add(key, b"v", META)
        listed: list[Any] = []
        reader = threading.Thread(target=lambda: listed.extend(store.listing()), daemon=True)
        reader.start()
        reader.join(timeout=300)  # a bound on a hang, not a timing margin: the read takes ~1 s
        assert not reader.is_alive(), "the listing never ended"
        assert {e.key for e in listed} == keys
        assert {e.function for e in listed} == {META["function"]}
    finally:
        store.clear()
        store.close()
