"""The key object: one CallKey per call, whose named parts make the key and the stored metadata."""

from __future__ import annotations

import dataclasses
import pickle
import sys
from unittest.mock import ANY

import pytest

import fncache
from fncache._callkey import KEY_SCHEMA
from fncache._options import Options
from fncache.values import hasher as _hasher

SCALE = 3


def _scaled(x, y=2, verbose=False):
    return x * y * SCALE


def test_key_is_the_digest_of_the_named_parts_in_the_documented_order(store):
    """key = xxh3(schema+python, code part, argument digests, ignored names), as _callkey documents."""
    m = fncache.memoize(store=store, ignore=["verbose"])(_scaled)
    ck = m.call_key(4, verbose=True)
    assert ck.key == m.key(4, verbose=True) == fncache.key_for(m, 4)
    assert ck.names == ("x", "y") and ck.ignored == ("verbose",)
    assert ck.schema == KEY_SCHEMA and ck.python == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert ck.fingerprint is not None and ck.code == ck.fingerprint.digest
    parts = [_hasher.digest((ck.schema, ck.python)), ck.code, *ck.args,
             _hasher.digest(("ignore", ck.ignored))]
    assert ck.key == _hasher._digest_of(b"".join(parts)).hex()


def test_stored_metadata_is_the_call_keys_metadata(store):
    """The metadata stored beside an entry is what the call's CallKey says (explain reads it back)."""
    m = fncache.memoize(store=store)(_scaled)
    m(5)
    ck = m.call_key(5)
    (entry,) = [e for e in m.store.entries() if e.key == ck.key]
    expected = ck.meta()
    for volatile in ("created", "duration"):
        expected.pop(volatile)
        entry.meta.pop(volatile)
    entry.meta.pop("size", None)  # added by the disk store
    # The addresses of the function sources the store keeps for explain, added when it is stored.
    assert entry.meta.pop("sources") == {"function _scaled": ANY}
    assert entry.meta == expected
    assert expected["components"] == m.call_key(5).components


def test_version_replaces_the_fingerprint_in_key_and_metadata(store):
    """With version= the code part is the pinned version: no fingerprint, the version in the metadata."""
    m = fncache.memoize(store=store, version="v7")(_scaled)
    ck = m.call_key(1)
    assert ck.fingerprint is None and ck.components is None
    assert ck.code == _hasher.digest(("version", m.function_id, "v7"))
    assert ck.meta()["version"] == "v7" and "components" not in ck.meta()


def test_call_key_is_immutable():
    """A CallKey cannot be changed after it was made."""
    ck = fncache.Memoized(_scaled).call_key(1)
    with pytest.raises(AttributeError):
        ck.key = "0" * 32  # type: ignore[misc]


def test_options_are_validated_once_frozen_and_pickled_without_the_secret():
    """Options.make checks every option; the result is frozen; pickled options leave the secret out."""
    opts = Options.make(store="memory://opts", secret="s3cret", lock=True, ignore=["b", "a"])
    assert opts.ignore == ("a", "b") and opts.secret == b"s3cret"
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.lock = False  # type: ignore[misc]
    assert "secret" not in opts.pickled()
    assert Options.make(**opts.pickled()).replace(secret=b"s3cret", accepted=(b"s3cret",)) == opts
    with pytest.raises(fncache.ConfigError, match="lock"):
        Options.make(lock="yes")  # type: ignore[arg-type]
    m = fncache.memoize(store="memory://opts", secret="s3cret")(_scaled)
    assert b"s3cret" not in pickle.dumps(m)


def test_new_defaults_bind_calls_by_the_signature_as_it_stands(tmp_path):
    """Defaults replaced (``__defaults__``), edited in place (``__kwdefaults__["k"]``) or a
    partial's keywords edited after decoration: ``f(0)`` now runs with the new default, so it must
    not share the key of ``f(0, <old default>)``. A helper's keyword default edited in place is a
    new key too."""
    import functools

    @fncache.memoize(store=str(tmp_path / "a"))
    def f(x, b=1):
        return (x, b)

    f.__wrapped__.__defaults__ = (2,)
    assert (f(0), f(0, 1)) == ((0, 2), (0, 1))

    @fncache.memoize(store=str(tmp_path / "b"))
    def g(x, *, k=1):
        return (x, k)

    assert g(0) == (0, 1)
    g.__wrapped__.__kwdefaults__["k"] = 2
    assert (g(0), g(0, k=1)) == ((0, 2), (0, 1))

    def helper(x, *, k=1):
        return x * k

    @fncache.memoize(store=str(tmp_path / "c"))
    def uses(x):
        return helper(x)

    assert uses(3) == 3
    helper.__kwdefaults__["k"] = 10
    assert uses(3) == 30

    @fncache.memoize(store=str(tmp_path / "e"), version="1")
    def pinned(x, b=1):  # version= stands for the code: no fingerprint watches the defaults
        return (x, b)

    assert pinned(0) == (0, 1)
    pinned.__wrapped__.__defaults__ = (2,)
    assert (pinned(0), pinned(0, 1)) == ((0, 2), (0, 1))

    p = functools.partial(_scaled, y=1)
    mp = fncache.memoize(store=str(tmp_path / "d"))(p)
    assert mp(1) == _scaled(1, y=1)
    p.keywords["y"] = 5
    assert (mp(1), mp(1, y=1)) == (_scaled(1, y=5), _scaled(1, y=1))


def test_a_wrapper_binds_by_its_own_signature(tmp_path):
    """A decorator's wrapper (``functools.wraps`` sets ``__wrapped__``) is what the call runs:
    its parameters and defaults bind the call, not the wrapped function's (which inspect follows
    by default: ``h(3)`` and ``h(3, 1)`` shared a key, and a keyword only the wrapper takes
    raised ``TypeError``)."""
    import functools

    def scaled(fn):
        @functools.wraps(fn)
        def wrapper(x, scale=2):
            return fn(x, scale)
        return wrapper

    def retrying(fn):
        @functools.wraps(fn)
        def wrapper(*args, retries=3, **kwargs):
            return fn(*args, **kwargs)
        return wrapper

    @fncache.memoize(store=str(tmp_path / "a"))
    @scaled
    def h(x, scale=1):
        return x * scale

    @fncache.memoize(store=str(tmp_path / "b"))
    @retrying
    def load(x):
        return x * 10

    assert (h(3), h(3, 1)) == (6, 3)
    assert (load(2, retries=1), load(2)) == (20, 20)
    assert load.cache_info().hits == 0  # retries= is an argument of the wrapper: two calls


def test_signatures_read_through_objects_and_wrapped_functions_are_read_again(tmp_path):
    """The defaults a call binds by are read again when they change in a callable object's
    ``__call__``, or in the wrapped function whose signature binds (``ignore=`` naming its
    parameters); a change that leaves an ignored parameter out fails every call, clearly."""
    import functools

    class Deco:
        def __init__(self, fn):
            self.fn = fn
            functools.update_wrapper(self, fn)

        def __call__(self, x, scale=2):
            return self.fn(x, scale)

    def h(x, scale=1):
        return x * scale

    m = fncache.memoize(store=str(tmp_path / "a"))(Deco(h))
    assert m(3) == 6
    Deco.__call__.__defaults__ = (5,)
    assert (m(3), m(3, 2)) == (15, 6)

    def passing(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper

    def inner(x, scale=1, verbose=False):
        return x * scale

    f = fncache.memoize(store=str(tmp_path / "b"), ignore=["verbose"])(passing(inner))
    assert f(3) == 3
    inner.__defaults__ = (2, False)
    assert (f(3), f(3, 1)) == (6, 3)

    def g(x, verbose=False):
        return x

    def g2(x, loud=False):
        return (x, loud)

    mg = fncache.memoize(store=str(tmp_path / "c"), ignore=["verbose"])(g)
    assert mg(1) == 1
    g.__code__ = g2.__code__
    for _ in range(2):
        with pytest.raises(fncache.ConfigError, match="'verbose' is not a parameter"):
            mg(1, True)
