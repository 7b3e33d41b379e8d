"""Trust: who can put something in a cache that fncache will unpickle.

Threat model, as these tests pin it down. Unpickling runs code, so an entry is only as trustworthy
as whoever can write to the store. The cache directory is created 0700, so on one machine only its
owner (and root) can plant entries. Every entry carries an xxh3 checksum bound to its key: that
catches corruption and entries moved between keys, but it is no defence against an attacker, who
can compute it. With a secret (``memoize(secret=...)`` or ``$FNCACHE_SECRET``) every entry is
signed with HMAC-SHA256 and an entry whose signature is missing or wrong is never unpickled; it is
a logged miss and gets replaced. Use a secret whenever others can write to the store (a shared
directory, Redis, a bucket).
"""

from __future__ import annotations

import logging
import os
import pickle
import stat
import time
from typing import Any

import pytest

import fncache
from fncache import _codec
from fncache.stores import open_store

from .helpers import Plant, fncache_warnings, small_value

SECRET = b"correct horse battery staple"




def _frame(value: Any, key: str, secret: bytes | None = None) -> bytes:
    return _codec.encode(value, key, created=time.time(), duration=0.0, secret=secret)


def _flags_off(frame: bytes) -> bytes:
    """The frame with its "signed" flag cleared (signature bytes left where they were)."""
    return frame[:4] + bytes([frame[4] & ~1]) + frame[5:]


def _mac_zeroed(frame: bytes) -> bytes:
    end = _codec._FIXED.size + 8 * len(_codec.read_header(frame).buffer_lens) + _codec._CHECK
    return frame[:end] + b"\0" * _codec._MAC + frame[end + _codec._MAC:]


# -- directories -----------------------------------------------------------------------------------


def test_cache_directory_is_created_private_whatever_the_umask(tmp_path):
    """A new cache directory is mode 0700 even under umask 000, so others cannot plant entries."""
    old = os.umask(0)
    try:
        store = open_store(str(tmp_path / "a" / "b" / "cache"))
        store.add("0" * 32, b"v", {"function": "t"})
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "a" / "b" / "cache").stat().st_mode)
    assert mode == 0o700, oct(mode)
    store.close()


def test_default_cache_directory_is_private(tmp_path, monkeypatch):
    """The default store ($FNCACHE_DIR here) is created 0700 on first use."""
    monkeypatch.delenv("FNCACHE_STORE", raising=False)
    monkeypatch.setenv("FNCACHE_DIR", str(tmp_path / "default"))
    f = fncache.memoize(small_value)
    assert f(1) == small_value(1)
    assert stat.S_IMODE((tmp_path / "default").stat().st_mode) == 0o700


# -- planted entries with a secret -----------------------------------------------------------------

PLANTS = {
    "a bare pickle, no frame": lambda plant, key: pickle.dumps(plant, protocol=5),
    "a well-formed unsigned frame": lambda plant, key: _frame(plant, key),
    "a frame signed with another secret": lambda plant, key: _frame(plant, key, b"other"),
    "a signed frame copied from another key": lambda plant, key: _frame(plant, "f" * 32, SECRET),
    "a signed frame with its signed flag cleared": lambda plant, key: _flags_off(
        _frame(plant, key, SECRET)
    ),
    "a signed frame with a zeroed signature": lambda plant, key: _mac_zeroed(
        _frame(plant, key, SECRET)
    ),
}


@pytest.mark.parametrize("how", list(PLANTS))
def test_with_a_secret_a_planted_entry_is_never_unpickled(tmp_path, caplog, how):
    """With a secret, an entry without a valid signature is a logged miss; its pickle never runs."""
    marker = tmp_path / "PWNED"
    f = fncache.memoize(store=str(tmp_path / "cache"), secret=SECRET)(small_value)
    key = f.key(3)
    f.store.set(key, PLANTS[how](Plant(marker), key), {"function": f.function_id})
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(3) == small_value(3)
    assert not marker.exists()
    assert len(fncache_warnings(caplog)) == 1
    # The planted entry was replaced by a signed one, which the next call hits quietly.
    frame = f.store.get(key)
    assert _codec.read_header(frame).signed
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(3) == small_value(3)
    assert fncache_warnings(caplog) == []


def test_secret_from_environment_protects_like_an_explicit_one(tmp_path, caplog, monkeypatch):
    """$FNCACHE_SECRET signs and verifies entries just as secret= does."""
    monkeypatch.setenv("FNCACHE_SECRET", SECRET.decode())
    marker = tmp_path / "PWNED"
    f = fncache.memoize(store=str(tmp_path / "cache"))(small_value)
    key = f.key(4)
    f.store.set(key, _frame(Plant(marker), key), {"function": f.function_id})
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(4) == small_value(4)
    assert not marker.exists()
    assert len(fncache_warnings(caplog)) == 1
    assert _codec.read_header(f.store.get(key)).signed
    # What it signed verifies under the same secret given explicitly.
    explicit = fncache.memoize(store=str(tmp_path / "cache"), secret=SECRET)(small_value)
    assert explicit.check_call_in_cache(4)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert explicit(4) == small_value(4)
    assert len(fncache_warnings(caplog)) == 1


def test_unsigned_entries_are_recomputed_once_a_secret_is_set(tmp_path, caplog):
    """Turning a secret on makes earlier unsigned entries misses: they are replaced, not trusted."""
    plain = fncache.memoize(store=str(tmp_path / "cache"))(small_value)
    plain(5)
    signed = fncache.memoize(store=str(tmp_path / "cache"), secret=SECRET)(small_value)
    key = signed.key(5)
    assert not _codec.read_header(signed.store.get(key)).signed
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert signed(5) == small_value(5)
    assert len(fncache_warnings(caplog)) == 1
    assert _codec.read_header(signed.store.get(key)).signed


def test_secret_is_never_pickled_with_the_function(tmp_path):
    """Shipping a memoized function to workers does not carry its secret, in any form."""

    def local(x: int) -> int:
        return x + 1

    f = fncache.memoize(store=str(tmp_path / "cache"), secret=SECRET)(local)
    data = pickle.dumps(f)
    assert SECRET not in data
    assert SECRET.hex().encode() not in data


# -- the honest part: without a secret -------------------------------------------------------------


def test_without_a_secret_a_planted_well_formed_entry_is_loaded(tmp_path):
    """Without a secret the checksum stops corruption, not attackers: a forged frame IS loaded."""
    marker = tmp_path / "PWNED"
    f = fncache.memoize(store=str(tmp_path / "cache"))(small_value)
    key = f.key(6)
    f.store.set(key, _frame(Plant(marker), key), {"function": f.function_id})
    f(6)
    assert marker.exists()  # documented: anyone who can write the store can run code here


def test_without_a_secret_a_bare_planted_pickle_is_not_loaded(tmp_path, caplog):
    """Without a secret, bytes that are not a well-formed frame for this key are never loaded."""
    marker = tmp_path / "PWNED"
    f = fncache.memoize(store=str(tmp_path / "cache"))(small_value)
    key = f.key(7)
    for planted in (pickle.dumps(Plant(marker), protocol=5), _frame(Plant(marker), "e" * 32)):
        f.store.set(key, planted, {"function": f.function_id})
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fncache"):
            assert f(7) == small_value(7)
        assert len(fncache_warnings(caplog)) == 1
    assert not marker.exists()


def test_a_secret_with_mmap_mode_says_what_it_cannot_protect(tmp_path, caplog, monkeypatch):
    """mmap_mode="r" under a secret is allowed, and warned once: mapped arrays stay shared."""
    from fncache import _options

    monkeypatch.setattr(_options, "_WARNED_MAPPED", [])
    with caplog.at_level(logging.WARNING, logger="fncache"):
        fncache.memoize(store=str(tmp_path / "c"), mmap_mode="r")(small_value)
        assert fncache_warnings(caplog) == []
        fncache.memoize(store=str(tmp_path / "c"), secret=SECRET, mmap_mode="r")(small_value)
        fncache.memoize(store=str(tmp_path / "c"), secret=SECRET, mmap_mode="r")(small_value)
    (warning,) = fncache_warnings(caplog)
    assert "mmap_mode='r' with a secret" in warning and "SIGBUS" in warning


# -- credentials with special characters ---------------------------------------------------------

ODD = ["@", "#", "/", "?", ",", ":", "%"]


def _odd_url(c: str, where: str) -> tuple[str, list[str]]:
    """A store URL whose password holds ``c`` (unescaped, as users paste them), and the pieces
    of that password that must never be shown."""
    password = f"Zq7hd{c}Xk9wv"
    url = {"userinfo": f"redis://user:{password}@127.0.0.1:1/0",
           "query": f"redis://127.0.0.1:1/0?password={password}"}[where]
    return url, ["Zq7hd", "Xk9wv"]


def _shows_none(text: str, pieces: list[str]) -> None:
    for piece in pieces:
        assert piece not in text, f"{piece!r} shown in: {text}"


@pytest.mark.parametrize("where", ["userinfo", "query"])
@pytest.mark.parametrize("c", ODD)
def test_odd_passwords_are_never_shown_in_process(tmp_path, caplog, c, where):
    """A password holding ``@ # / ? , : %`` shows in no repr, error, log or pickle, whether the
    client library can parse the URL (a store) or not (a ConfigError)."""
    pytest.importorskip("redis")
    from fncache.stores import public_config, redact

    url, pieces = _odd_url(c, where)
    _shows_none(redact(url), pieces)
    _shows_none(repr(public_config(url, {})), pieces)
    _shows_none(redact(f"{tmp_path},{url}"), pieces)
    with caplog.at_level(logging.DEBUG, logger="fncache"):
        try:
            f = fncache.memoize(store=url, lock=True)(small_value)
        except fncache.ConfigError as e:
            _shows_none(str(e), pieces)
            assert "store" in str(e)
        else:
            _shows_none(repr(f), pieces)
            _shows_none(repr(f.store), pieces)
            assert f(1) == small_value(1)  # port 1 refuses: a logged miss
            for piece in pieces:
                assert piece.encode() not in pickle.dumps(f)
    _shows_none(caplog.text, pieces)


@pytest.mark.parametrize("c", ODD)
def test_odd_passwords_are_never_shown_by_the_command_line_or_the_environment(tmp_path, c):
    """``fncache info`` on such a URL, and ``FNCACHE_STORE`` holding one, show no part of it."""
    pytest.importorskip("redis")
    from .helpers import cli

    url, pieces = _odd_url(c, "userinfo")
    proc = cli("info", "--store", url)
    _shows_none(proc.stdout + proc.stderr, pieces)
    script = tmp_path / "job.py"
    script.write_text("import fncache\n"
                      "try:\n"
                      "    f = fncache.memoize(lambda x: x)\n"
                      "    print(f(1), repr(f))\n"
                      "except fncache.ConfigError as e:\n"
                      "    print('ConfigError', e)\n")
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, FNCACHE_STORE=url))
    assert proc.returncode == 0, proc.stderr
    _shows_none(proc.stdout + proc.stderr, pieces)


def test_a_comma_inside_a_password_does_not_split_tiers(tmp_path):
    """Tiers given as one string split at commas between URLs, never inside a userinfo."""
    from fncache.stores.tiered import split_tiers

    url = "redis://user:pa,ss@127.0.0.1:6379/0"
    assert split_tiers(f"{tmp_path},{url}") == [str(tmp_path), url]
    assert split_tiers(f"{url},s3://bucket/p") == [url, "s3://bucket/p"]
    assert split_tiers(url) is None
    assert split_tiers(f"{tmp_path}/a,redis://127.0.0.1/0,{tmp_path}/b") == [
        f"{tmp_path}/a", "redis://127.0.0.1/0", f"{tmp_path}/b"]


# -- the secret in workers, and its rotation -------------------------------------------------------

_WORKER = r"""
import logging, pickle, sys
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
f = pickle.loads(open(sys.argv[1], "rb").read())
print([f(3), f(3)], f.cache_info().hits, f.cache_info().stores, flush=True)
"""


def test_a_worker_without_the_secret_neither_reads_nor_writes_unsigned_entries(tmp_path):
    """A function memoized with a secret and pickled to a worker that lacks FNCACHE_SECRET: the
    worker warns once, computes, loads no planted unsigned entry and writes none of its own."""
    import subprocess
    import sys

    from .helpers import REPO

    marker = tmp_path / "PWNED"
    f = fncache.memoize(store=str(tmp_path / "cache"), secret=SECRET)(small_value)
    key = f.key(3)
    f.store.add(key, _frame(Plant(marker), key), {"function": f.function_id})  # unsigned, planted
    (tmp_path / "f.pkl").write_bytes(pickle.dumps(f))
    (tmp_path / "worker.py").write_text(_WORKER)
    env = {k: v for k, v in os.environ.items() if k != "FNCACHE_SECRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, str(tmp_path / "worker.py"), str(tmp_path / "f.pkl")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[{'x':", "3,", "'double':", "6},", "{'x':", "3,", "'double':",
                                   "6}]", "0", "0"]
    assert not marker.exists()
    assert proc.stderr.count("no secret is set in this process") == 1, proc.stderr
    assert len(f.store) == 1  # the planted entry only: the worker wrote nothing
    # The signed parent rejects the planted entry and stores its own, signed.
    assert f(3) == small_value(3) and not marker.exists()
    assert _codec.read_header(f.store.get(key)).signed


def test_a_worker_with_the_secret_shares_signed_entries(tmp_path, monkeypatch):
    """With FNCACHE_SECRET set in the worker, the pickled function signs and hits as usual."""
    import subprocess
    import sys

    from .helpers import REPO

    monkeypatch.setenv("FNCACHE_SECRET", SECRET.decode())
    f = fncache.memoize(store=str(tmp_path / "cache"))(small_value)
    assert f(3) == small_value(3)
    (tmp_path / "f.pkl").write_bytes(pickle.dumps(f))
    (tmp_path / "worker.py").write_text(_WORKER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, str(tmp_path / "worker.py"), str(tmp_path / "f.pkl")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["2", "0"] and "WARNING" not in proc.stderr


def test_secret_rotation_accepts_old_signatures_and_signs_with_the_first(tmp_path, caplog):
    """secret=[new, old]: entries signed with the old secret hit, new ones are signed with the
    new; a deployment still on [old, new] and one on [new, old] hit each other's entries, and
    neither rejects (deletes) what the other wrote."""
    store = str(tmp_path / "cache")
    new, old = b"new secret", b"old secret"
    before = fncache.memoize(store=store, secret=old)(small_value)
    assert before(1) == small_value(1)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        after = fncache.memoize(store=store, secret=[new, old])(small_value)
        assert after(1) == small_value(1) and after.cache_info().hits == 1
        assert after(2) == small_value(2)
        entry = after.store.get(after.key(2))
        assert _codec.decode(entry, after.key(2), secret=new)[0] == small_value(2)
        with pytest.raises(fncache.IntegrityError):
            _codec.decode(entry, after.key(2), secret=old)
        still_old = fncache.memoize(store=store, secret=[old, new])(small_value)
        assert still_old(2) == small_value(2) and still_old(1) == small_value(1)
        assert still_old.cache_info().hits == 2
        assert after(3) == small_value(3) and still_old(3) == small_value(3)
    assert fncache_warnings(caplog) == []
    with pytest.raises(fncache.ConfigError, match="secret"):
        fncache.memoize(store=store, secret=[])(small_value)
    with pytest.raises(fncache.ConfigError, match="secret"):
        fncache.memoize(store=store, secret=[new, ""])(small_value)
