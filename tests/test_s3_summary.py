"""``summary()`` of an S3 store (``fncache info``, ``ls``) from one listing: the metadata names come
from their cached listing (``prefix/s/metas``) while it holds every listed value as listed now.

Against a real SeaweedFS on loopback (``tests/servers.py``). Which prefixes a summary lists is seen
by wrapping the store's own paged listing; everything else is the store's real behaviour.
"""

from __future__ import annotations

import time
import uuid
import zlib
from typing import Any

import pytest

from fncache.stores import _s3_snapshot as snapshot
from fncache.stores import open_store
from fncache.stores._base import Use, summarize
from fncache.stores._s3_layout import group_of, meta_name


def new_key() -> str:
    return uuid.uuid4().hex


@pytest.fixture
def s3_summed(s3_env):
    """An S3 store with entries of two functions, some used, and a record of what it lists."""
    store = open_store(s3_env.url(), endpoint_url=s3_env.endpoint_url)
    keys = {"a": [new_key() for _ in range(5)], "b": [new_key() for _ in range(3)]}
    for function, names in keys.items():
        for i, key in enumerate(names):
            store.add(key, bytes(10 + 7 * i), {"function": f"m:{function}"})
    store.record_use([Use(keys["a"][1], "m:a", time.time() - 5, 3),
                      Use(keys["b"][0], "m:b", time.time() - 9, 1)])
    listed: list[str] = []
    real = store._listing._list

    def spy(under: str) -> Any:
        listed.append(under[len(store.paths.base) + 1:])
        return real(under)

    real_probe = store._listing._probe

    def probe_spy(wanted: list[str]) -> Any:
        listed.append("probe:" + ",".join(sorted(wanted)))
        return real_probe(wanted)

    store._listing._list = spy
    store._listing._probe = probe_spy
    yield store, keys, listed
    store.clear()
    store.close()


def _fresh(store: Any, listed: list[str]) -> tuple[list[Any], list[str]]:
    """``summary()`` and the prefixes it listed."""
    listed.clear()
    rows = store.summary()
    return rows, sorted(set(listed))


@pytest.mark.s3
def test_s3_summary_lists_the_metadata_once_then_answers_from_the_values(s3_summed):
    """The first summary lists values, metadata names and usage objects and caches the names; the
    next lists only the values and usage objects, and both give exactly the listing's rows, uses
    recorded in between included (usage is read every time, never cached)."""
    store, keys, listed = s3_summed
    rows, prefixes = _fresh(store, listed)
    assert prefixes == ["f", "u", "v2"]
    assert rows == summarize(store.listing())
    assert [(r.function, r.entries, r.uses) for r in rows] == [("m:a", 5, 3), ("m:b", 3, 1)]
    store.record_use([Use(keys["b"][2], "m:b", time.time(), 4)])
    rows, prefixes = _fresh(store, listed)
    assert prefixes == ["u", "v2"]
    assert rows == summarize(store.listing())
    assert [(r.function, r.uses) for r in rows] == [("m:a", 3), ("m:b", 5)]


@pytest.mark.s3
def test_s3_summary_follows_adds_deletes_replacements_and_expiry(s3_summed):
    """A value added or replaced since the names were cached is probed (its metadata object, where
    the value says it is) and the cache written again; a deleted entry is simply not listed; an
    entry whose expiry passes drops out by the expiry kept in its cached name. Each summary is the
    listing's, and none lists the metadata names again."""
    store, keys, listed = s3_summed
    store.summary()
    added = new_key()
    store.add(added, b"new", {"function": "m:c"})
    rows, prefixes = _fresh(store, listed)
    assert prefixes == [f"probe:{added}", "u", "v2"]
    assert rows == summarize(store.listing())
    assert [r.function for r in rows] == ["m:a", "m:b", "m:c"]
    rows, prefixes = _fresh(store, listed)
    assert prefixes == ["u", "v2"], "the probed value was cached"
    assert store.delete(keys["a"][0])
    rows, prefixes = _fresh(store, listed)
    assert prefixes == ["u", "v2"] and rows == summarize(store.listing())
    assert rows[0].entries == 4
    store.set(keys["a"][1], b"replaced, longer than before", {"function": "m:b"})
    rows, prefixes = _fresh(store, listed)
    assert prefixes == [f"probe:{keys['a'][1]}", "u", "v2"]
    assert rows == summarize(store.listing())
    assert [(r.function, r.entries) for r in rows] == [("m:a", 3), ("m:b", 4), ("m:c", 1)]
    short = new_key()
    store.add(short, b"brief", {"function": "m:c"}, expire=1.0)
    assert [r.entries for r in store.summary()] == [3, 4, 2]  # cached with its expiry
    deadline = time.monotonic() + 60
    # Wait on the store's own expiry, not a duration: the read's (exact) and the listing's (its
    # name's, whole seconds rounded up).
    while store.contains(short) or short in {e.key for e in store.listing()}:
        assert time.monotonic() < deadline, "the entry never expired"
        time.sleep(0.1)
    rows, prefixes = _fresh(store, listed)
    assert prefixes == ["u", "v2"]
    assert rows == summarize(store.listing())
    assert [r.entries for r in rows] == [3, 4, 1]


@pytest.mark.s3
def test_s3_summary_lists_the_names_again_when_many_values_are_new(s3_summed, monkeypatch):
    """Past a few new values (here: one, by the threshold's floor set to 1 for the test), probing
    them one by one would cost more than listing: the summary lists the names and caches them."""
    from fncache.stores import _s3_listing

    store, _, listed = s3_summed
    store.summary()
    monkeypatch.setattr(_s3_listing, "_PROBE_MIN", 1)
    for _ in range(2):
        store.add(new_key(), b"new", {"function": "m:c"})
    rows, prefixes = _fresh(store, listed)
    assert prefixes == ["f", "u", "v2"]
    assert rows == summarize(store.listing())
    assert _fresh(store, listed)[1] == ["u", "v2"]


@pytest.mark.s3
def test_s3_value_whose_metadata_is_on_its_way_is_not_cached_as_functionless(s3_summed):
    """A value listed before its metadata object is written shows as the listing shows it (no
    function) and is probed again by the next summary rather than cached so: once its metadata
    is there, it shows under its function."""
    store, _, listed = s3_summed
    store.summary()
    key = new_key()
    meta = {"function": "m:a"}
    group = group_of("m:a")
    assert store._put(store._value_path(key), b"late meta", group, None, create_only=True)
    rows, prefixes = _fresh(store, listed)
    assert rows == summarize(store.listing())
    assert [r.function for r in rows] == ["", "m:a", "m:b"]
    store._put_meta(key, group, b"late meta", meta, None)
    rows, prefixes = _fresh(store, listed)
    assert prefixes == [f"probe:{key}", "u", "v2"]
    assert rows == summarize(store.listing())
    assert [(r.function, r.entries) for r in rows] == [("m:a", 6), ("m:b", 3)]


def _plants(store: Any) -> list[tuple[str, bytes]]:
    """Damaged cached listings: each must be ignored as if missing."""
    values = store._listing._values()
    refs = store._listing._refs(values)
    good = snapshot.encode(values, refs, time.time())
    body = zlib.decompress(good[len(snapshot._MAGIC):])
    key = next(iter(values))

    def planted(old: bytes, new: bytes) -> bytes:
        assert old in body
        return snapshot._MAGIC + zlib.compress(body.replace(old, new, 1))

    return [
        ("random bytes", b"\x00" * 64),
        ("truncated", good[:-7]),
        ("not zlib", snapshot._MAGIC + b"{}"),
        ("not JSON", snapshot._MAGIC + zlib.compress(b"[1, 2")),
        ("another format", planted(b'"format":1', b'"format":2')),
        ("a key that is not 32 hex digits", planted(key.encode(), b"../" + key[3:].encode())),
        ("a group index out of range", planted(b'"groups":[', b'"groups":[],"x":[')),
        ("a size of the wrong type", planted(b'"values":{"' + key.encode() + b'":[',
                                             b'"values":{"' + key.encode() + b'":["1",')),
        ("a planted name that parses to another key",
         planted(b"]]]", b',"m%3Aa/' + new_key().encode() + b'"]]]')),
        ("deeply nested", snapshot._MAGIC + zlib.compress(b"[" * 100_000 + b"]" * 100_000)),
        ("a bomb over the bound", snapshot._MAGIC + zlib.compress(
            b'{"format":1,"groups":[],"values":{},"pad":"' + b" " * (snapshot._MAX_PLAIN + 1)
            + b'"}')),
    ]


@pytest.mark.s3
def test_s3_damaged_cached_names_are_ignored_and_rewritten(s3_summed):
    """Every damaged or malformed cached listing is ignored (the names are listed, the summary is
    the listing's) and replaced by a sound one that the next summary answers from."""
    store, _, listed = s3_summed
    truth = summarize(store.listing())
    fs = store.fs
    for what, raw in _plants(store):
        fs.pipe_file(store.paths.snapshot, raw)
        rows, prefixes = _fresh(store, listed)
        assert rows == truth, what
        assert "f" in prefixes, what
        assert snapshot.decode(fs.cat_file(store.paths.snapshot)) is not None, what
        rows, prefixes = _fresh(store, listed)
        assert rows == truth and "f" not in prefixes, what


@pytest.mark.s3
def test_s3_planted_cached_names_move_entries_but_never_counts_or_a_prune(s3_summed):
    """A well-formed planted listing that files an entry under another function shows in ``info``
    (the one thing it can change), but the entries, bytes and times are the listed ones, and
    ``prune`` decides on the listed entries and keeps them all."""
    from fncache.stores.prune import plan_prune

    store, keys, _ = s3_summed
    truth = summarize(store.listing())
    values = store._listing._values()
    refs = store._listing._refs(values)
    moved = keys["a"][0]
    group = group_of("m:b")
    refs[moved] = [(group, None, meta_name(moved, group, None), refs[moved][0][3])]
    store.fs.pipe_file(store.paths.snapshot, snapshot.encode(values, refs, time.time()))
    rows = store.summary()
    assert [(r.function, r.entries) for r in rows] == [("m:a", 4), ("m:b", 4)]
    assert sum(r.entries for r in rows) == sum(r.entries for r in truth)
    assert sum(r.size for r in rows) == sum(r.size for r in truth)
    real = sum(e.size for e in store.listing())
    assert plan_prune(store, max_bytes=real) == []
    assert plan_prune(store, max_bytes=real - 1) != []  # one byte over: the listing decides
    assert len(store) == 8


@pytest.mark.s3
def test_s3_clear_removes_the_cached_names(s3_summed):
    """``clear`` leaves nothing under the prefix: the cached names go with the entries, and a
    summary of the empty store is empty."""
    store, _, _ = s3_summed
    store.summary()
    assert store.fs.exists(store.paths.snapshot)
    assert store.clear() == 8
    assert not store.fs.exists(store.paths.snapshot)
    assert store.summary() == []


def test_cached_names_keep_a_value_without_metadata_only_once_it_has_settled():
    """A value listed with no metadata name is cached as function-less only when it is older than
    ``SETTLE`` (its metadata is written right after it; a younger one may be on its way); names
    listed in another spelling than fncache's own are kept as listed."""
    t = 1_800_000_000.0
    young, old, named = "a" * 32, "b" * 32, "c" * 32
    values = {young: (5, t - 1.0), old: (6, t - snapshot.SETTLE - 1), named: (7, t - 1.0)}
    refs = {named: [("m%3Aa", 12, "m%3Aa/" + named + "~0012", 40)]}
    cached = snapshot.decode(snapshot.encode(values, refs, t))
    assert cached == {old: (6, t - snapshot.SETTLE - 1, []),
                      named: (7, t - 1.0, [("m%3Aa", 12, "m%3Aa/" + named + "~0012", 40)])}
    assert snapshot.decode(None) is None
    assert snapshot.decode(snapshot.encode(values, refs, t)[:-1]) is None
