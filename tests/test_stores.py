"""The store protocol as one contract, bound to every store (disk, memory, Redis, S3).

``StoreContract`` says what every store must do; each ``Test*Store`` class binds it to one store in
two lines by defining ``open(request)``. Stores that can fail for want of a server also define
``open_unreachable(request)``. Store-specific tests follow the bindings.
"""

from __future__ import annotations

import pickle
import threading
import time
import uuid
from typing import Any

import pytest

from fncache._errors import LockTimeout, StoreError
from fncache.stores import open_store
from fncache.stores._base import EntryInfo, Store

META = {"function": "tests.test_stores:f", "python": "3"}


def new_key() -> str:
    """A fresh key in the protocol's format: 32 lowercase hex digits."""
    return uuid.uuid4().hex


class StoreContract:
    """What every store must do. Subclasses define ``open(request) -> Store``."""

    def open(self, request: pytest.FixtureRequest) -> Store:
        raise NotImplementedError

    def open_unreachable(self, request: pytest.FixtureRequest) -> Store:
        pytest.skip(f"{type(self).__name__}: this store has no backend that can be unreachable")

    @pytest.fixture
    def store(self, request: pytest.FixtureRequest) -> Any:
        store = self.open(request)
        yield store
        store.clear()
        store.close()

    # -- get / add / set / delete / contains -----------------------------------------------------
    def test_missing_key_reads_as_none(self, store: Store) -> None:
        """A key never written is neither readable nor contained."""
        key = new_key()
        assert store.get(key) is None
        assert not store.contains(key)

    def test_add_then_get_returns_the_bytes(self, store: Store) -> None:
        """A value added is read back byte for byte, including every byte value."""
        key, value = new_key(), bytes(range(256)) * 4
        assert store.add(key, value, META) is True
        assert bytes(store.get(key)) == value
        assert store.contains(key)

    def test_empty_value_is_a_value(self, store: Store) -> None:
        """An empty value is stored and read back as ``b""``, not as a miss."""
        key = new_key()
        assert store.add(key, b"", META)
        assert store.get(key) is not None and bytes(store.get(key)) == b""

    def test_add_is_create_only_first_writer_wins(self, store: Store) -> None:
        """A second add to the same key returns False and leaves the first value in place."""
        key = new_key()
        assert store.add(key, b"first", META)
        assert store.add(key, b"second", META) is False
        assert bytes(store.get(key)) == b"first"

    def test_concurrent_adds_from_threads_have_one_winner(self, store: Store) -> None:
        """Of eight threads adding one key at once, exactly one wins and its value stays."""
        key, results = new_key(), []
        barrier = threading.Barrier(8)

        def add(i: int) -> None:
            barrier.wait()
            results.append((store.add(key, b"value-%d" % i, META), i))

        threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [i for ok, i in results if ok]
        assert len(winners) == 1
        assert bytes(store.get(key)) == b"value-%d" % winners[0]

    def test_set_replaces(self, store: Store) -> None:
        """``set`` overwrites an existing entry and creates a missing one."""
        key = new_key()
        store.set(key, b"one", META)
        store.set(key, b"two", META)
        assert bytes(store.get(key)) == b"two"
        assert [e.size for e in store.entries() if e.key == key] == [3]

    def test_delete_is_idempotent(self, store: Store) -> None:
        """``delete`` reports whether there was an entry, and the entry is gone after it."""
        key = new_key()
        store.add(key, b"x", META)
        assert store.delete(key) is True
        assert store.delete(key) is False
        assert store.get(key) is None and not store.contains(key)
        assert store.add(key, b"again", META), "a deleted key can be added again"

    def test_a_value_given_as_parts_is_stored_joined(self, store: Store) -> None:
        """``add`` and ``set`` take a list of bytes-like parts and store them one after another."""
        key, parts = new_key(), [b"head-", bytearray(b"middle-"), memoryview(b"tail" * 20_000)]
        assert store.add(key, parts, META) is True
        assert bytes(store.get(key)) == b"head-middle-" + b"tail" * 20_000
        store.set(key, [b"new", b"-value"], META)
        assert bytes(store.get(key)) == b"new-value"

    def test_get_mmap_reads_what_get_reads(self, store: Store) -> None:
        """``get_mmap`` returns the value's bytes (mapped where the store can), None when absent."""
        small, large = new_key(), new_key()
        store.add(small, b"s" * 10, META)
        store.add(large, bytes(range(256)) * 1024, META)
        assert bytes(store.get_mmap(small)) == b"s" * 10
        assert bytes(store.get_mmap(large)) == bytes(range(256)) * 1024
        assert store.get_mmap(new_key()) is None

    def test_get_checked_reads_what_get_reads(self, store: Store) -> None:
        """``get_checked`` returns the value (mapped or not) whatever the check says; None if absent."""
        key = new_key()
        store.add(key, b"checked", META)
        for mapped in (False, True):
            for verdict in (True, False):
                assert bytes(store.get_checked(key, lambda k, v, ok=verdict: ok, mapped)) == \
                    b"checked"
            assert store.get_checked(new_key(), lambda k, v: True, mapped) is None

    def test_get_meta_reads_one_entrys_metadata(self, store: Store) -> None:
        """``get_meta`` returns the metadata given to ``add`` (plus the store's own), ``{}`` if absent."""
        key = new_key()
        store.add(key, b"v", META)
        assert {k: store.get_meta(key)[k] for k in META} == META
        assert store.get_meta(new_key()) == {}

    def test_clear_function_removes_only_that_functions_entries(self, store: Store) -> None:
        """``clear_function`` removes the entries whose metadata names the function, no others."""
        mine = [new_key() for _ in range(3)]
        other = new_key()
        for key in mine:
            store.add(key, b"m", META)
        store.add(other, b"o", dict(META, function="tests.test_stores:g"))
        assert store.clear_function(META["function"]) == 3
        assert [e.key for e in store.entries()] == [other]
        assert store.clear_function(META["function"]) == 0

    def test_delete_many_removes_exactly_those_entries(self, store: Store) -> None:
        """``delete_many`` removes the entries at the keys given (many: stores batch them) and no
        others, and counts only the entries that were there."""
        from concurrent.futures import ThreadPoolExecutor

        keys = [new_key() for _ in range(130)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: store.add(k, b"d", META), keys))
        doomed = keys[:110]
        assert store.delete_many([*doomed, new_key()]) == 110
        assert {e.key for e in store.listing()} == set(keys[110:])
        assert all(store.get(k) is None for k in doomed[:5])
        assert store.add(doomed[0], b"again", META), "a deleted key can be added again"
        assert store.delete_many(doomed[:3]) == 1

    def test_refresh_keeps_the_store_usable(self, store: Store) -> None:
        """``refresh`` (look for a backend replaced underneath) leaves entries readable."""
        key = new_key()
        store.add(key, b"kept", META)
        store.refresh()
        assert bytes(store.get(key)) == b"kept"

    # -- listing ---------------------------------------------------------------------------------
    def test_entries_carry_size_times_and_meta(self, store: Store) -> None:
        """``entries()`` lists each entry with its value size, creation time and metadata."""
        before = time.time()
        keys = {new_key(): b"a" * n for n in (1, 10, 1000)}
        for key, value in keys.items():
            store.add(key, value, META)
        after = time.time()
        infos = {e.key: e for e in store.entries()}
        assert set(infos) == set(keys)
        for key, value in keys.items():
            info = infos[key]
            assert isinstance(info, EntryInfo)
            assert info.size == len(value)
            assert before - 2 <= info.created <= after + 2
            assert info.accessed is None or before - 2 <= info.accessed <= time.time() + 2
            assert info.function == META["function"]
            assert {k: info.meta[k] for k in META} == META

    def test_listing_names_each_entry_size_and_function(self, store: Store) -> None:
        """``listing()`` lists what ``entries()`` lists (keys, sizes, functions), without needing
        the full metadata."""
        keys = {new_key(): b"b" * n for n in (2, 20, 2000)}
        for key, value in keys.items():
            store.add(key, value, META)
        store.add(other := new_key(), b"o", dict(META, function="tests.test_stores:g"))
        listed = {e.key: (e.size, e.function) for e in store.listing()}
        assert listed == {**{k: (len(v), META["function"]) for k, v in keys.items()},
                          other: (1, "tests.test_stores:g")}

    def test_record_use_sets_last_use_and_count(self, store: Store) -> None:
        """Recorded uses show in ``listing()`` as the last use (the latest recorded) and the number
        of uses (the sum); an entry without uses has none; uses of a gone key are dropped."""
        from fncache.stores._base import Use

        if type(store).record_use is Store.record_use:
            pytest.skip(f"{type(store).__name__} keeps no usage records (the protocol's default)")
        used, idle, gone = new_key(), new_key(), new_key()
        for key in (used, idle):
            store.add(key, b"x", META)
        t = time.time()
        store.record_use([Use(used, META["function"], t + 5, 3), Use(gone, META["function"], t, 1)])
        store.record_use([Use(used, META["function"], t + 1, 2)])
        listed = {e.key: e for e in store.listing()}
        assert set(listed) == {used, idle}
        assert listed[used].uses == 5 and abs((listed[used].accessed or 0) - (t + 5)) < 0.01
        assert listed[idle].uses is None

    def test_summary_is_the_listing_grouped(self, store: Store) -> None:
        """``summary()`` gives the rows ``summarize(listing())`` gives, through adds, a replaced
        entry, recorded uses, deletes (of a group's newest and oldest), ``clear_function`` and
        ``clear``."""
        from fncache.stores._base import Use, summarize

        def same() -> None:
            assert store.summary() == summarize(store.listing())

        same()
        keys = [new_key() for _ in range(8)]
        for i, key in enumerate(keys):
            fn = f"tests.test_stores:{'fg'[i % 2]}"
            store.add(key, b"v" * (i + 1), dict(META, function=fn, python="3.11" if i < 5 else "3.12"))
            time.sleep(0.002)  # distinct creation times: a group's newest and oldest are one entry
        same()
        assert sum(s.entries for s in store.summary()) == 8
        store.set(keys[2], b"replaced, longer", dict(META, python="3.11"))
        store.record_use([Use(keys[1], META["function"], time.time(), 3)])
        same()
        store.delete(keys[0])  # the oldest of its group
        store.delete(keys[-1])  # the newest of its group
        same()
        store.clear_function("tests.test_stores:f")
        same()
        store.clear()
        assert store.summary() == []

    def test_len_and_volume_count_entries_and_bytes(self, store: Store) -> None:
        """``len`` counts entries and ``volume`` adds their sizes (at least; some add overhead)."""
        assert len(store) == 0
        for n in (5, 7):
            store.add(new_key(), b"v" * n, META)
        assert len(store) == 2
        assert store.volume() >= 12

    def test_clear_removes_everything(self, store: Store) -> None:
        """``clear`` removes every entry and returns how many there were."""
        keys = [new_key() for _ in range(3)]
        for key in keys:
            store.add(key, b"x", META)
        assert store.clear() == 3
        assert len(store) == 0
        assert all(store.get(k) is None for k in keys)

    # -- expiry ----------------------------------------------------------------------------------
    def test_expired_entry_reads_as_missing(self, store: Store) -> None:
        """An entry added with ``expire=`` reads as missing once that many seconds passed."""
        key, keep = new_key(), new_key()
        # 2 s: long enough that a loaded machine still reads the entry back before it expires.
        assert store.add(key, b"short-lived", META, expire=2.0)
        store.add(keep, b"kept", META)
        assert bytes(store.get(key)) == b"short-lived"
        time.sleep(2.2)
        assert store.get(key) is None
        assert not store.contains(key)
        assert [e.key for e in store.entries()] == [keep]
        assert store.add(key, b"fresh", META), "an expired key can be added again"
        assert bytes(store.get(key)) == b"fresh"

    # -- locks -----------------------------------------------------------------------------------
    def test_lock_excludes_a_second_holder(self, store: Store) -> None:
        """While one holder has the lock, another waiting shorter than its lease times out."""
        key = new_key()
        with store.lock(key, timeout=10):
            with pytest.raises(LockTimeout):
                with store.lock(key, timeout=0.3):
                    pass

    def test_lock_is_free_after_release(self, store: Store) -> None:
        """Leaving the ``with`` block frees the lock at once for the next holder."""
        key = new_key()
        with store.lock(key, timeout=10):
            pass
        again = store.lock(key, timeout=10)
        again.wait = 0.0  # one attempt: taken at once, or not free
        assert again.acquire()
        again.release()

    def test_lock_of_a_dead_holder_expires(self, store: Store) -> None:
        """A lease never released (its holder died) stops blocking others after its timeout."""
        key = new_key()
        dead = store.lock(key, timeout=0.5)
        dead.__enter__()  # never exited, like a process killed while holding it
        # Waits up to 60 s (a LockTimeout otherwise): taken once the dead lease ran out.
        with store.lock(key, timeout=60) as lock:
            assert lock.acquired

    # -- pickling --------------------------------------------------------------------------------
    def test_pickles_as_configuration_and_reconnects(self, store: Store) -> None:
        """A used store pickles as its URL and options (small, no connection) and reconnects."""
        key = new_key()
        store.add(key, b"shared", META)
        payload = pickle.dumps(store)
        assert len(payload) < 2000, "a live connection or data was pickled"
        clone = pickle.loads(payload)
        assert type(clone) is type(store)
        assert clone.url == store.url
        store.close()
        assert bytes(clone.get(key)) == b"shared"
        assert bytes(store.get(key)) == b"shared", "a closed store reconnects on next use"

    # -- store facts the command line, doctor, verbose and tiers read ------------------------------
    def test_nearest_sees_what_this_machine_adds(self, store: Store) -> None:
        """``nearest`` is a store that holds what this process just added (itself, or a near tier)."""
        key = new_key()
        store.add(key, b"near", META)
        near = store.nearest
        assert isinstance(near, Store)
        assert bytes(near.get(key)) == b"near"
        assert near.nearest is near, "the nearest store is its own nearest"

    def test_local_directory_holds_the_store_or_is_none(self, store: Store) -> None:
        """``local_directory`` is an existing directory that changes when an entry is added, or
        ``None`` for a store kept elsewhere; ``database_bytes`` counts files in it only."""
        import os

        store.add(new_key(), b"x" * 1000, META)
        directory = store.local_directory
        if directory is None:
            assert store.database_bytes() == 0
            return
        def held() -> int:
            return sum(os.path.getsize(os.path.join(root, f))
                       for root, _, files in os.walk(directory) for f in files)

        assert os.path.isdir(directory)
        before = held()
        store.add(new_key(), os.urandom(100_000), META)
        assert held() >= before + 100_000, "the value is not kept in the local directory"
        assert 0 < store.database_bytes() <= held()

    def test_lists_cheaply_means_entries_stream_before_the_end(self, store: Store) -> None:
        """A store that says it lists cheaply yields its first entry from ``entries()`` when asked
        for one (``verbose`` reads a few on a miss); every store lists what it holds."""
        keys = {new_key() for _ in range(3)}
        for key in keys:
            store.add(key, b"v", META)
        assert isinstance(store.lists_cheaply, bool)
        first = next(iter(store.entries()))
        assert first.key in keys
        assert {e.key for e in store.entries()} == keys

    def test_far_tier_options_are_options_the_store_accepts(self, store: Store) -> None:
        """Reopening the store with its class's ``far_tier_options`` (what a far tier gets) works:
        each is an option this kind of store takes, not a misspelt one."""
        options = type(store).far_tier_options
        assert isinstance(options, dict)
        if not options:
            return
        reopened = type(store)(store.url, **{**store.options, **options})
        try:
            for name, value in options.items():
                assert reopened.options[name] == value
        finally:
            reopened.close()
        # The round trip below shows the options reach the client as options it takes. It runs
        # with a wide overall deadline: a far tier's (7 s for S3) is what a failing server may
        # cost a call, and a first call on a machine running both suites at once once took
        # longer than that to make its HTTP session (TestTieredS3Store says the same).
        wide = {"timeout": 120.0} if store.kind == "s3" else {}
        reopened = type(store)(store.url, **{**store.options, **options, **wide})
        try:
            key = new_key()
            store.add(key, b"far", META)
            assert bytes(reopened.get(key)) == b"far"
        finally:
            reopened.close()

    # -- failures --------------------------------------------------------------------------------
    def test_unreachable_backend_raises_store_error(self, request: pytest.FixtureRequest) -> None:
        """Every operation on an unreachable backend raises StoreError (an OSError), not a hang."""
        broken = self.open_unreachable(request)
        key = new_key()
        started = time.monotonic()
        for call in (
            lambda: broken.get(key),
            lambda: broken.contains(key),
            lambda: broken.add(key, b"x", META),
            lambda: broken.set(key, b"x", META),
            lambda: broken.delete(key),
            lambda: list(broken.entries()),
        ):
            with pytest.raises(StoreError) as info:
                call()
            assert isinstance(info.value, OSError)
        assert time.monotonic() - started < 30


# -- bindings ------------------------------------------------------------------------------------


class TestDiskStore(StoreContract):
    def open(self, request):
        return open_store(str(request.getfixturevalue("tmp_path") / "cache"))

    def open_unreachable(self, request):
        blocker = request.getfixturevalue("tmp_path") / "a-file"
        blocker.write_text("not a directory")
        return open_store(str(blocker / "cache"))


class TestMemoryStore(StoreContract):
    def open(self, request):
        return open_store(f"memory://{uuid.uuid4().hex}")


@pytest.mark.redis
class TestRedisStore(StoreContract):
    def open(self, request):
        return open_store(request.getfixturevalue("redis_server").url, prefix=f"{new_key()}:")

    def open_unreachable(self, request):
        port = request.getfixturevalue("unused_port")
        return open_store(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=2)


@pytest.mark.s3
class TestS3Store(StoreContract):
    def open(self, request):
        server = request.getfixturevalue("s3_env")
        return open_store(server.url(), endpoint_url=server.endpoint_url)

    def open_unreachable(self, request):
        url = f"http://127.0.0.1:{request.getfixturevalue('unused_port')}"
        return open_store(
            "s3://nowhere/x", endpoint_url=url, key="k", secret="s", connect_timeout=2
        )


class TestTieredStore(StoreContract):
    def open(self, request):
        return open_store([str(request.getfixturevalue("tmp_path") / "near"),
                           f"memory://{new_key()}"])

    def open_unreachable(self, request):
        blocker = request.getfixturevalue("tmp_path") / "a-file"
        blocker.write_text("not a directory")
        return open_store([str(blocker / "near"), f"memory://{new_key()}"])


@pytest.mark.s3
class TestTieredS3Store(StoreContract):
    def open(self, request):
        server = request.getfixturevalue("s3_env")
        near = str(request.getfixturevalue("tmp_path") / "near")
        # The S3 store's own time-outs, not a far tier's short ones (2 s to connect, 5 s to read:
        # what a far tier's failing server may cost a call): the contract is what this store
        # does, and a first call on a machine running both suites at once once took longer than
        # the short deadline to make its HTTP session.
        return open_store(f"{near},{server.url()}",
                          tiers=[{}, {"endpoint_url": server.endpoint_url, "connect_timeout": 5.0,
                                      "read_timeout": 60.0}])


def _readme_store_class() -> type[Store]:
    """The third-party store class the docs show (docs/sharing.md), run from the page's own text."""
    from tests.helpers import REPO
    from tests.test_readme import readme_blocks

    for line, code in readme_blocks(REPO / "docs" / "sharing.md"):
        if "class DictStore(Store)" in code:
            namespace: dict[str, Any] = {"__name__": "readme_store"}
            exec(compile(code, f"docs/sharing.md:{line}", "exec"), namespace)
            return namespace["DictStore"]  # type: ignore[no-any-return]
    raise AssertionError("docs/sharing.md no longer shows a third-party store")


class TestReadmeStore(StoreContract):
    """The README's example store, written from the public ``fncache.stores`` API alone."""

    def open(self, request):
        return _readme_store_class()(f"dict://{new_key()}")

    def test_pickles_as_configuration_and_reconnects(self, store: Store) -> None:
        """Not asked of the example: its entries live in one process's dict, with no URL to reopen."""
        pytest.skip("the README's store keeps its entries in this process only")


def test_every_store_translates_failures_in_one_form(tmp_path):
    """A backend failure reads "<kind> <what> failed on <url>: <error>" with the password masked."""
    import fncache
    from fncache.stores import store_error
    from fncache.stores.memory import MemoryStore

    store = MemoryStore("memory://errors")
    store.url = "redis://:hunter2@example:6379/0"
    store.kind = "redis"
    cause = ConnectionError("connection reset")
    e = store_error(store, "read", cause, " (hint)")
    assert isinstance(e, fncache.StoreError)
    assert str(e) == "redis read failed on redis://:***@example:6379/0 (hint): connection reset"
    disk = fncache.open_store(tmp_path / "c")
    assert str(store_error(disk, "write", OSError(28, "No space left on device"))).startswith(
        f"disk write failed on {disk.url}: ")
