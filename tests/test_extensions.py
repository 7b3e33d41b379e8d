"""Extension points (register, __fncache_token__, ref) and which globals enter a fingerprint."""

from __future__ import annotations

import concurrent.futures
import importlib
import multiprocessing
import sys
import threading
from pathlib import Path

import pytest

import fncache
from fncache.code.fingerprint import fingerprint

from .helpers import import_source

FIXTURES = Path(__file__).parent / "fixtures_code"


@pytest.fixture(scope="module")
def ext():
    """The fixture module that registers its types at import (as a user's module would)."""
    sys.path.insert(0, str(FIXTURES))
    try:
        yield importlib.import_module("fncache_ext_fixture")
    finally:
        sys.path.remove(str(FIXTURES))


# ---------------------------------------------------------------------------------------------
# register
# ---------------------------------------------------------------------------------------------

def test_registered_reducer_is_used_for_nested_instances(ext):
    """The C pickler uses the registration inside lists, dicts, tuples and sets, subclasses too."""
    a = [{"h": (ext.Handle("db://a"),)}, {ext.PooledHandle("db://b")}]
    same = [{"h": (ext.Handle("db://a"),)}, {ext.PooledHandle("db://b")}]
    other = [{"h": (ext.Handle("db://other"),)}, {ext.PooledHandle("db://b")}]
    assert fncache.hash(a) == fncache.hash(same)
    assert fncache.hash(a) != fncache.hash(other)
    assert fncache.hash(ext.Handle("x")) != fncache.hash("x")  # the type's name is mixed in


def test_registration_after_first_use_takes_effect():
    """Registering after hashers exist still works (no dispatch_table read at construction)."""
    class Late:
        def __init__(self, v):
            self.v = v

        def __reduce__(self):
            raise TypeError("no")

    fncache.hash([1, 2, 3])  # warm this thread's pickler pool
    with pytest.raises(fncache.UnhashableArgument):
        fncache.hash([Late(1)])
    fncache.register(Late, lambda o: o.v)
    try:
        assert fncache.hash([Late(1)]) == fncache.hash([Late(1)]) != fncache.hash([Late(2)])
    finally:
        fncache.unregister(Late)
    with pytest.raises(fncache.UnhashableArgument):
        fncache.hash([Late(1)])


def test_register_refuses_what_it_cannot_honour():
    """Built-in containers and scalars are hashed by the C pickler itself: registering fails."""
    for t in (dict, list, str, int, set):
        with pytest.raises(TypeError):
            fncache.register(t, repr)
    with pytest.raises(TypeError):
        fncache.register("Handle", repr)  # type: ignore[arg-type]


@pytest.mark.parametrize("call", [
    lambda: fncache.register(dict, repr),
    lambda: fncache.register("Handle", repr),
    lambda: fncache.ref(3, "token"),
    lambda: fncache.track(3),
    lambda: fncache.untrack(""),
    lambda: fncache.file(3),
])
def test_wrong_argument_types_raise_a_fncache_error_that_is_a_type_error(call):
    """Misuse of the API raises ArgumentTypeError: catchable as FncacheError and as TypeError."""
    with pytest.raises(fncache.ArgumentTypeError) as caught:
        call()
    assert isinstance(caught.value, fncache.FncacheError) and isinstance(caught.value, TypeError)


@pytest.mark.slow
def test_hooks_hold_in_a_spawned_worker(ext):
    """A spawned worker that imports the same module hashes hooked types exactly as this process."""
    here = ext.digests()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        there = pool.submit(ext.digests).result(timeout=120)
    assert there == here


# ---------------------------------------------------------------------------------------------
# __fncache_token__ and ref
# ---------------------------------------------------------------------------------------------

def test_fncache_token_stands_for_the_object(ext):
    """__fncache_token__ replaces the object's content, also inside containers and call keys."""
    assert fncache.hash({"m": [ext.Model("m", 1)]}) == fncache.hash({"m": [ext.Model("m", 1)]})
    assert fncache.hash(ext.Model("m", 1)) != fncache.hash(ext.Model("m", 2))
    k = fncache.key_for(ext.score, ext.Handle("u"), ext.Model("m", 1))
    assert k == fncache.key_for(ext.score, ext.Handle("u"), ext.Model("m", 1))
    assert k != fncache.key_for(ext.score, ext.Handle("u"), ext.Model("m", 2))


def test_ref_keys_an_unpicklable_argument_by_its_token():
    """fncache.ref(obj, token) keys obj by token: two objects with one token give one key."""
    def f(conn, x):
        return x

    a, b, c = threading.Lock(), threading.Lock(), threading.Lock()
    with pytest.raises(fncache.UnhashableArgument):
        fncache.key_for(f, a, 1)
    assert fncache.ref(a, "db-main") is a
    fncache.ref(b, "db-main")
    fncache.ref(c, "db-replica")
    assert fncache.key_for(f, a, 1) == fncache.key_for(f, b, 1) != fncache.key_for(f, c, 1)
    assert fncache.key_for(f, [a], 1) == fncache.key_for(f, [b], 1)


def test_ref_keys_a_global_by_its_token(tmp_path):
    """A global that cannot be pickled is keyed by name until ref gives it a token; a new token counts."""
    m = import_source("ext_refglobal", "import threading\nCONN = threading.Lock()\n"
                "def f(x):\n    return CONN is not None and x\n", tmp_path, keep=False)
    by_name = fncache.key_for(m.f, 1)
    fncache.ref(m.CONN, "conn-v1")
    assert fncache.key_for(m.f, 1) != by_name
    k1 = fncache.key_for(m.f, 1)
    assert k1 == fncache.key_for(m.f, 1)
    fncache.ref(m.CONN, "conn-v2")
    assert fncache.key_for(m.f, 1) != k1


# ---------------------------------------------------------------------------------------------
# Globals: only what the code reads
# ---------------------------------------------------------------------------------------------

def test_only_globals_the_code_reads_enter_the_fingerprint(tmp_path):
    """A big unrelated global (or one that cannot even be hashed) changes no key."""
    m = import_source("ext_globals", "import threading\nBIG = list(range(200_000))\n"
                "LOCK = threading.Lock()\nK = 3\ndef f(x):\n    return x * K\n", tmp_path, keep=False)
    assert set(fingerprint(m.f).components) == {"function f", "global K"}
    k1 = fncache.key_for(m.f, 1)
    m.BIG.append(-1)
    m.BIG = list(range(300_000))
    assert fncache.key_for(m.f, 1) == k1
    m.K = 4
    assert fncache.key_for(m.f, 1) != k1


def test_a_global_the_function_writes_is_state_not_input(tmp_path):
    """A list the function appends to does not make each call miss; ref() pins it from the start."""
    m = import_source("ext_state", "import fncache\nLOG = []\nSEEN = fncache.ref([], 'seen')\n"
                "def f(x):\n    LOG.append(x)\n    return x * 2\n"
                "def g(x):\n    SEEN.append(x)\n    return x * 3\n", tmp_path, keep=False)
    store = fncache.open_store("memory://ext-state")
    f = fncache.memoize(store=store)(m.f)
    assert [f(1), f(1), f(1)] == [2, 2, 2]
    assert m.LOG == [1] and f.cache_info().hits == 2
    g = fncache.memoize(store=store)(m.g)
    k = g.key(1)
    assert [g(1), g(1)] == [3, 3] and m.SEEN == [1]
    assert g.key(1) == k  # keyed by the token, whatever the list holds
