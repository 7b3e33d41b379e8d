"""fncache.Memory: the joblib.Memory surface on top of fncache's keys."""

from __future__ import annotations

import asyncio
import collections
import datetime
import functools
import importlib
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

import fncache
from fncache import _usage
from fncache.joblib.memory import (
    AsyncMemorizedFunc,
    AsyncNotMemorizedFunc,
    MemorizedFunc,
    MemorizedResult,
    Memory,
    NotMemorizedFunc,
    NotMemorizedResult,
    expires_after,
)

DATA = Path(__file__).resolve().parent / "data"
# Counts computations without entering any key (a ref is keyed by its token, not its content).
CALLS = fncache.ref(collections.Counter(), "test-memory-calls")


def run_py(path: Path, *args: str, seed: str = "0", check: bool = True) -> str:
    """Run a Python file in a fresh interpreter with PYTHONHASHSEED=seed; return its stdout."""
    env = dict(os.environ, PYTHONHASHSEED=seed)
    env.pop("FNCACHE_DISABLE", None)
    proc = subprocess.run([sys.executable, str(path), *args], env=env, capture_output=True,
                          text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{path} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def memory(tmp_path):
    return Memory(tmp_path / "cache", verbose=0)


def counted(name: str):
    """A module-level-like function body that counts its runs under ``name``."""

    def f(x, y=1):
        CALLS[name] += 1
        return x + y

    return f


# -- calls and keys ------------------------------------------------------------------------------


def test_positional_keyword_and_default_forms_are_one_call(memory):
    """f(1), f(x=1), f(1, 1) and f(1, y=1) compute once; another argument computes again."""
    f = memory.cache(counted("forms"))
    assert f(1) == f(x=1) == f(1, 1) == f(1, y=1) == 2
    assert CALLS["forms"] == 1
    assert f(2) == 3 and CALLS["forms"] == 2


def test_cache_survives_a_new_memory_on_the_same_location(tmp_path):
    """A second Memory on the same path (str or pathlib.Path) hits the first one's entries."""
    f1 = Memory(str(tmp_path), verbose=0).cache(counted("reopen"))
    f1(5)
    f2 = Memory(tmp_path, verbose=0).cache(counted("reopen"))
    assert f2(5) == 6 and CALLS["reopen"] == 1
    assert (tmp_path / "fncache").is_dir()


def test_location_none_runs_every_time(tmp_path):
    """Memory(None) caches nothing, writes nothing, and clear() and reduce_size() are harmless."""
    memory = Memory(None)
    f = memory.cache(counted("none"))
    assert isinstance(f, NotMemorizedFunc)
    f(1), f(1)
    assert CALLS["none"] == 2
    assert f.call(1) == (2, {}) and not f.check_call_in_cache(1)
    shelved = f.call_and_shelve(1)
    assert isinstance(shelved, NotMemorizedResult) and shelved.get() == 2
    shelved.clear()
    with pytest.raises(KeyError):
        shelved.get()
    assert memory.eval(lambda: 7) == 7
    memory.clear()
    memory.reduce_size(items_limit=0)
    f.clear()
    assert list(tmp_path.iterdir()) == []


def test_deleting_the_directory_under_a_live_memory(tmp_path, memory):
    """After rm -rf of the location the next call recomputes, and its result persists again."""
    f = memory.cache(counted("rmtree"))
    f(1)
    shutil.rmtree(tmp_path / "cache")
    assert f(1) == 2 and CALLS["rmtree"] == 2
    assert f(1) == 2 and CALLS["rmtree"] == 2
    fresh = Memory(tmp_path / "cache", verbose=0).cache(counted("rmtree"))
    assert fresh.check_call_in_cache(1)
    memory.clear(warn=False)
    shutil.rmtree(tmp_path / "cache")
    memory.clear(warn=False)


def test_decorator_forms_and_ignore(memory):
    """@memory.cache and @memory.cache(ignore=[...]) work; ignored arguments share entries."""

    @memory.cache
    def plain(x):
        CALLS["plain"] += 1
        return x

    @memory.cache(ignore=["verbose"])
    def quiet(x, verbose=0):
        CALLS["quiet"] += 1
        return x

    assert plain(1) == plain(1) == 1 and CALLS["plain"] == 1
    assert quiet.ignore == ["verbose"]
    assert quiet(1, verbose=0) == quiet(1, verbose=5) == 1 and CALLS["quiet"] == 1
    with pytest.raises(ValueError):
        memory.cache(ignore=["nope"])(lambda x: x)


def test_ignore_through_a_functools_wraps_wrapper(memory):
    """ignore= names a parameter of the function a functools.wraps decorator wraps."""

    def logged(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return f(*args, **kwargs)

        return wrapper

    @memory.cache(ignore=["y"])
    @logged
    def z(x, y=1):
        CALLS["wrapped"] += 1
        return x

    assert z.ignore == ["y"] and z.__name__ == "z"
    assert z(0, y=1) == z(0, y=2) == 0 and CALLS["wrapped"] == 1
    assert z(1) == 1 and CALLS["wrapped"] == 2


def test_lambdas_partials_exec_functions_and_builtins(memory):
    """Lambdas, functools.partial objects, exec/eval-made functions and builtins are cached."""
    double = memory.cache(lambda x: CALLS.update(["lambda"]) or 2 * x)
    assert double(3) == double(3) == 6 and CALLS["lambda"] == 1

    def power(base, exp):
        CALLS["partial"] += 1
        return base**exp

    two_to = memory.cache(functools.partial(power, 2))
    assert two_to(10) == two_to(exp=10) == 1024 and CALLS["partial"] == 1
    assert memory.cache(functools.partial(power, 3))(2) == 9 and CALLS["partial"] == 2

    ns: dict = {"CALLS": CALLS}
    exec("def made(x):\n    CALLS['exec'] += 1\n    return -x\n", ns)
    made = memory.cache(ns["made"])
    assert made(4) == made(4) == -4 and CALLS["exec"] == 1
    evaluated = memory.cache(eval("lambda x: x * 10"))
    assert evaluated(2) == evaluated(2) == 20

    ident = memory.cache(id)
    obj = object()
    assert ident(obj) == id(obj)
    assert memory.cache(max)([3, 1, 2]) == 3


def test_annotated_and_keyword_only_signatures(memory):
    """Annotations do not matter; keyword-only arguments (with defaults) are part of the call, and
    the items of ``**extra`` keep their order (the function can see it)."""

    @memory.cache
    def f(a: int, *, b: int = 2, **extra: object) -> int:
        CALLS["kwonly"] += 1
        return a * b + len(extra)

    assert f(1) == f(1, b=2) == 2 and CALLS["kwonly"] == 1
    assert f(1, b=3) == 3 and CALLS["kwonly"] == 2
    assert f(1, z=0, y=0) == 4 and CALLS["kwonly"] == 3
    assert f(1, y=0, z=0) == 4 and CALLS["kwonly"] == 4
    assert f(1, z=0, y=0) == 4 and CALLS["kwonly"] == 4
    with pytest.raises(TypeError):
        f(1, 2)


def test_bound_method_with_dict_and_set_arguments(memory):
    """self.f = memory.cache(self.f) caches by instance content; set order does not matter."""

    class Model:
        def __init__(self, scale):
            self.scale = scale
            self.predict = memory.cache(self.predict)

        def predict(self, options, labels):
            CALLS["method"] += 1
            return self.scale * options["k"], sorted(labels)

    m = Model(2)
    labels = {"pear", "apple", "fig"}
    assert m.predict({"k": 3}, labels) == (6, ["apple", "fig", "pear"])
    assert m.predict({"k": 3}, set(sorted(labels, reverse=True)))[0] == 6
    assert CALLS["method"] == 1
    assert Model(2).predict({"k": 3}, labels)[0] == 6 and CALLS["method"] == 1
    assert Model(5).predict({"k": 3}, labels)[0] == 15 and CALLS["method"] == 2
    import cloudpickle  # a local class only pickles by value

    assert pickle.loads(cloudpickle.dumps(m)).predict({"k": 3}, labels)[0] == 6
    assert CALLS["method"] == 2


def test_coroutine_functions_are_awaitable(memory):
    """A coroutine function gives an AsyncMemorizedFunc whose calls are awaited and cached."""

    @memory.cache
    async def fetch(x):
        CALLS["async"] += 1
        await asyncio.sleep(0)
        return x * 2

    async def main():
        assert await fetch(2) == await fetch(2) == 4
        value, meta = await fetch.call(2)
        shelved = await fetch.call_and_shelve(3)
        return value, meta, shelved.get()

    assert isinstance(fetch, AsyncMemorizedFunc)
    value, meta, shelved = asyncio.run(main())
    assert (value, shelved) == (4, 6) and meta["duration"] >= 0
    assert CALLS["async"] == 3
    off = Memory(None).cache(fetch.func)
    assert isinstance(off, AsyncNotMemorizedFunc)
    assert asyncio.run(off.call_and_shelve(1)).get() == 2


def test_arguments_are_hashed_when_the_call_starts(memory):
    """A function that mutates its argument stores the result under the argument as passed."""

    @memory.cache
    def consume(items):
        CALLS["mutate"] += 1
        total = sum(items)
        items.clear()
        return total

    assert consume([1, 2, 3]) == 6
    assert consume([1, 2, 3]) == 6 and CALLS["mutate"] == 1
    assert consume([]) == 0 and CALLS["mutate"] == 2


def test_numpy_arguments_are_keyed_by_content(memory):
    """Equal arrays hit whatever their identity; one changed element computes again."""
    np = pytest.importorskip("numpy")

    @memory.cache
    def total(a):
        CALLS["numpy"] += 1
        return float(a.sum())

    a = np.arange(1000.0)
    assert total(a) == total(a.copy()) and CALLS["numpy"] == 1
    b = a.copy()
    b[500] = -1
    assert total(b) != total(a) and CALLS["numpy"] == 2


def test_exceptions_are_not_cached(memory):
    """A call that raises raises again on the next call and stores nothing."""

    @memory.cache
    def fragile(x):
        CALLS["raise"] += 1
        raise ValueError(x)

    for _ in range(2):
        with pytest.raises(ValueError):
            fragile(1)
    assert CALLS["raise"] == 2 and not fragile.check_call_in_cache(1)


def test_name_doc_and_repr(tmp_path, memory):
    """__name__ and __doc__ are the function's; two wrappers of one function print alike."""

    def documented(x):
        """Adds nothing."""
        return x

    a = memory.cache(documented)
    b = Memory(tmp_path / "cache", verbose=0).cache(documented)
    assert a.__name__ == "documented" and a.__doc__ == "Adds nothing."
    assert repr(a) == repr(b) and "documented" in repr(a)
    assert "cache" in repr(memory)


# -- MemorizedFunc methods -----------------------------------------------------------------------


def test_call_always_runs_and_returns_metadata(memory):
    """call() runs even on a hit, refreshes the entry, and returns (result, metadata)."""
    f = memory.cache(counted("call"))
    f(1)
    before = time.time()
    result, meta = f.call(1)
    assert result == 2 and CALLS["call"] == 2
    assert meta["duration"] >= 0 and meta["time"] >= before
    assert f(1) == 2 and CALLS["call"] == 2


class _Hashed:
    """An argument whose hash handler counts how often a key is made from it."""

    def __init__(self, n):
        self.n = n

    def __add__(self, other):
        return self.n + other


_KEYED = collections.Counter()


def _hashed_token(value):
    _KEYED["keys"] += 1
    return value.n


def test_call_and_shelve_counts_its_hits_and_misses_and_makes_one_key(memory):
    """A shelving call is a miss or a hit in cache_info() as a call is (a hit was not counted);
    each makes the call's key once (a miss made it three times, a hit twice); a hit is a use of
    its entry in the usage records; with caching disabled the result comes back unshelved."""
    fncache.register(_Hashed, _hashed_token)
    try:
        f = memory.cache(counted("shelve-counts"))
        _KEYED.clear()
        first = f.call_and_shelve(_Hashed(4))
        assert first.get() == 5 and CALLS["shelve-counts"] == 1
        assert f.cache_info()[:2] == (0, 1) and _KEYED["keys"] == 1
        again = f.call_and_shelve(_Hashed(4))
        assert again.get() == 5 and CALLS["shelve-counts"] == 1
        assert f.cache_info()[:2] == (1, 1) and _KEYED["keys"] == 2
        assert again.args_id == first.args_id
        _usage.flush_all()
        (entry,) = [e for e in f.store.entries() if e.key.endswith(first.args_id)]
        assert entry.uses == 1
        fncache.disable()
        try:
            off = f.call_and_shelve(_Hashed(6))
        finally:
            fncache.enable()
        assert isinstance(off, NotMemorizedResult) and off.get() == 7
        assert CALLS["shelve-counts"] == 2 and f.cache_info()[:2] == (1, 1)
        assert not f.check_call_in_cache(_Hashed(6))
    finally:
        fncache.unregister(_Hashed)


def test_call_and_shelve_gives_a_picklable_handle(memory):
    """call_and_shelve gives a MemorizedResult: get() loads; after clear(), get() is a KeyError."""
    f = memory.cache(counted("shelve"))
    shelved = f.call_and_shelve(4)
    assert isinstance(shelved, MemorizedResult) and CALLS["shelve"] == 1
    assert f.call_and_shelve(4).get() == 5 and CALLS["shelve"] == 1
    copy = pickle.loads(pickle.dumps(shelved))
    assert copy.get() == 5 and copy.args_id == shelved.args_id
    assert shelved.metadata["duration"] >= 0
    shelved.clear()
    with pytest.raises(KeyError):
        copy.get()
    assert f(4) == 5 and CALLS["shelve"] == 2


def test_call_and_shelve_of_a_result_not_stored_gives_the_result(memory):
    """A result that was not stored (here one no pickle takes) comes back itself, in a
    NotMemorizedResult, not as a handle whose get() could only raise KeyError."""
    lock = threading.Lock()

    def locked(x):
        return lock

    f = memory.cache(locked)
    shelved = f.call_and_shelve(1)
    assert isinstance(shelved, NotMemorizedResult) and shelved.get() is lock
    assert not f.check_call_in_cache(1)


def test_check_call_in_cache_does_not_run(memory):
    """check_call_in_cache tells whether a call is cached without running the function."""
    f = memory.cache(counted("check"))
    assert not f.check_call_in_cache(1)
    f(1)
    assert f.check_call_in_cache(1) and f.check_call_in_cache(x=1, y=1)
    assert not f.check_call_in_cache(2) and CALLS["check"] == 1


def test_clear_of_one_function_and_of_the_whole_memory(memory):
    """MemorizedFunc.clear() removes that function's entries only; Memory.clear() removes all."""
    f = memory.cache(counted("clear_f"))
    g = memory.cache(lambda x: -x)
    f(1), g(1)
    f.clear(warn=False)
    assert not f.check_call_in_cache(1) and g.check_call_in_cache(1)
    f(1)
    memory.clear(warn=False)
    assert not f.check_call_in_cache(1) and not g.check_call_in_cache(1)


def test_direct_construction(tmp_path):
    """MemorizedFunc(func, location, ...) and NotMemorizedFunc(func) work without a Memory."""
    seen = []
    f = MemorizedFunc(counted("direct"), str(tmp_path), verbose=0, timestamp=time.time(),
                      cache_validation_callback=lambda meta: seen.append(meta) or True)
    f(1), f(1)
    assert CALLS["direct"] == 1 and seen and {"duration", "time"} <= set(seen[0])
    assert Memory(tmp_path, verbose=0).cache(counted("direct")).check_call_in_cache(1)
    plain = NotMemorizedFunc(counted("direct"))
    assert plain(1) == 2 and CALLS["direct"] == 2


def test_cache_validation_callback_can_reject_entries(memory, monkeypatch):
    """A callback returning False makes a hit recompute; expires_after rejects entries by age."""
    verdict = {"ok": True}
    f = memory.cache(counted("validate"), cache_validation_callback=lambda meta: verdict["ok"])
    f(1), f(1)
    assert CALLS["validate"] == 1
    verdict["ok"] = False
    assert not f.check_call_in_cache(1)
    f(1)
    assert CALLS["validate"] == 2

    fresh = memory.cache(counted("expires"), cache_validation_callback=expires_after(hours=2))
    stale = memory.cache(counted("expires"), cache_validation_callback=expires_after(seconds=30))
    fresh(1)
    assert stale(1) == 2 and CALLS["expires"] == 1
    # A minute later (the callbacks' clock moved on, not the test's: no margin a slow machine
    # could miss), the entry is past the 30 s limit and within the 2 h one.
    import fncache.joblib.memory as joblib_memory

    real = time.time
    monkeypatch.setattr(joblib_memory, "time", types.SimpleNamespace(time=lambda: real() + 60))
    assert fresh(1) == 2 and CALLS["expires"] == 1
    assert stale(1) == 2 and CALLS["expires"] == 2
    assert expires_after(days=1, hours=1, minutes=1, weeks=1)({"time": time.time()})
    with pytest.raises(ValueError):
        memory.cache(counted("expires"), cache_validation_callback=3)


def test_memory_eval(memory):
    """Memory.eval(func, *args) computes once per distinct call."""
    f = counted("eval")
    assert memory.eval(f, 1, y=2) == memory.eval(f, 1, 2) == 3 and CALLS["eval"] == 1


def test_reduce_size_keeps_the_most_recent_entries(memory, monkeypatch):
    """reduce_size drops the oldest entries past items/bytes limits, and those past age_limit."""
    f = memory.cache(lambda i: "x" * 1000 + str(i))
    for i in range(5):
        f(i)
        time.sleep(0.01)
    assert memory.reduce_size() == 0
    assert memory.reduce_size(items_limit=3) == 2
    assert [f.check_call_in_cache(i) for i in range(5)] == [False, False, True, True, True]
    assert memory.reduce_size(bytes_limit="2K") == 2
    assert [f.check_call_in_cache(i) for i in range(5)] == [False] * 4 + [True]
    time.sleep(0.05)
    cut = time.time()  # f(4) was stored before, f(0) (removed above) is stored again after
    time.sleep(0.05)
    f(0)
    # The age limit is measured from a clock set 100 s after ``cut``: however long the steps
    # above took on a loaded machine, exactly the entries stored before ``cut`` are over 100 s old.
    import fncache.stores.prune

    monkeypatch.setattr(fncache.stores.prune, "time", types.SimpleNamespace(time=lambda: cut + 100))
    assert memory.reduce_size(age_limit=datetime.timedelta(seconds=100)) == 1
    assert f.check_call_in_cache(0) and not f.check_call_in_cache(4)
    with pytest.raises(ValueError):
        memory.reduce_size(age_limit=datetime.timedelta(seconds=-1))


def test_reduce_size_ranks_the_uses_this_process_has_not_written_yet(memory, monkeypatch):
    """A hit's use is written with the next flush (up to a minute later): reduce_size writes it
    first, so the entry just hit is kept and the ones stored after it but not used go."""
    import fncache._usage

    f = memory.cache(lambda i: "x" * 1000 + str(i))
    for i in range(3):
        f(i)
    real = time.time
    # The hit's clock 30 s on: later than every store, and within the flush interval.
    monkeypatch.setattr(fncache._usage, "_clock", lambda: real() + 30)
    f(0)
    assert memory.reduce_size(items_limit=1) == 2
    assert [f.check_call_in_cache(i) for i in range(3)] == [True, False, False]

def test_memory_and_memorized_functions_pickle(tmp_path, memory):
    """Memory and MemorizedFunc (of a lambda, even) survive pickle and reach the same entries."""
    f = memory.cache(lambda x: time.time_ns(), ignore=["x"])
    stamp = f(1)
    g = pickle.loads(pickle.dumps(f))
    assert isinstance(g, MemorizedFunc) and g.ignore == ["x"] and g(99) == stamp
    m = pickle.loads(pickle.dumps(memory))
    assert m.location == memory.location and m.timestamp is None
    assert m.cache(f.func, ignore=["x"]).check_call_in_cache(5)


def test_invalid_options_raise_value_errors(tmp_path):
    """Unknown backends, mmap modes and compressors fail at construction with a ValueError."""
    for kwargs in ({"backend": "hdfs"}, {"mmap_mode": "x"}, {"compress": "snappy"},
                   {"compress": (1, 2, 3)}):
        with pytest.raises(ValueError):
            Memory(tmp_path, **kwargs)
    with pytest.raises(ValueError):
        Memory(12)


# -- memory maps, compression, verbosity ---------------------------------------------------------


def _mapped(a) -> bool:
    import mmap

    base = a
    while getattr(base, "base", None) is not None:
        base = base.base
    return isinstance(base, mmap.mmap) or isinstance(getattr(base, "obj", None), mmap.mmap)


def test_mmap_mode_returns_memory_mapped_arrays_from_the_first_call(tmp_path):
    """mmap_mode='r' returns read-only memory-mapped arrays on the first call and later ones,
    datetime arrays (which numpy pickles in band) included."""
    np = pytest.importorskip("numpy")
    memory = Memory(tmp_path, mmap_mode="r", verbose=0)

    @memory.cache
    def ones(n):
        return {"a": np.ones(n), "t": np.arange(n).astype(">M8[ms]"), "n": n}

    for _ in range(2):
        out = ones(100_000)
        assert _mapped(out["a"]) and not out["a"].flags.writeable and out["a"].sum() == 100_000
        assert _mapped(out["t"]) and not out["t"].flags.writeable
        assert out["t"].dtype == np.dtype(">M8[ms]") and out["t"][-1] == np.datetime64(99_999, "ms")
    assert _mapped(ones.call_and_shelve(100_000).get()["a"])
    private = memory.cache(ones.func, mmap_mode="c")(100_000)["a"]
    private[:] = 0
    assert ones(100_000)["a"].sum() == 100_000


@pytest.mark.parametrize("compress", [False, True, 3, ("zlib", 3), "lz4"])
@pytest.mark.parametrize("mmap_mode", [None, "r"])
@pytest.mark.parametrize("verbose", [0, 1])
def test_compress_mmap_and_verbose_combine(tmp_path, capfd, compress, mmap_mode, verbose):
    """Each compress/mmap_mode/verbose mix round-trips; verbose=0 is silent, 1 says each compute."""
    np = pytest.importorskip("numpy")
    memory = Memory(tmp_path, compress=compress, mmap_mode=mmap_mode, verbose=verbose)
    key = f"combo-{compress}-{mmap_mode}-{verbose}"

    @memory.cache
    def make(n, key=key):
        CALLS[key] += 1
        return np.arange(n, dtype=np.float64)

    for _ in range(2):
        a = make(50_000)
        assert a[-1] == 49_999 and a.shape == (50_000,)
    assert CALLS[key] == 1
    assert _mapped(a) == (mmap_mode == "r" and not compress)
    out, err = capfd.readouterr()
    assert out == ""
    if verbose:
        assert err.count("[Memory] Calling") == 1 and "make - " in err
    else:
        assert err == ""


# -- processes, interpreters, edits --------------------------------------------------------------


def test_parallel_workers_write_one_location_concurrently(tmp_path):
    """joblib.Parallel(n_jobs=2) workers share the cache; a second pass computes nothing."""
    joblib = pytest.importorskip("joblib")
    marks = tmp_path / "marks"
    marks.mkdir()
    memory = Memory(tmp_path / "cache", verbose=0)

    def square(i, where=str(marks)):
        import uuid

        Path(where, f"{i}-{uuid.uuid4().hex}").touch()
        return i * i

    cached = memory.cache(square)
    work = [i % 6 for i in range(24)]
    first = joblib.Parallel(n_jobs=2)(joblib.delayed(cached)(i) for i in work)
    assert first == [i * i for i in work]
    computed = len(list(marks.iterdir()))
    assert 6 <= computed <= 24
    assert all(cached.check_call_in_cache(i) for i in range(6))
    again = joblib.Parallel(n_jobs=2)(joblib.delayed(cached)(i) for i in work)
    assert again == first and len(list(marks.iterdir())) == computed
    # loky keeps its executor (and a manager thread in this process) for reuse: stop it, so later
    # tests run without a thread that could run user code (see "Inputs that change while the
    # function runs" in the README).
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)


MAIN_SCRIPT = """
import sys
from fncache import Memory

memory = Memory(sys.argv[1], verbose=0)

def helper(x):
    return x * 2

@memory.cache
def f(x, tags=frozenset({"alpha", "beta", "gamma", "delta"})):
    print("computing", flush=True)
    return helper(x) + len(tags)

print(f(3), f(3))
"""


@pytest.mark.slow
def test_main_functions_hit_from_a_new_interpreter_with_another_hash_seed(tmp_path):
    """A __main__ script's cache is hit by the next run, even under another PYTHONHASHSEED."""
    script = tmp_path / "script.py"
    script.write_text(MAIN_SCRIPT)
    cache = str(tmp_path / "cache")
    assert run_py(script, cache, seed="1").split() == ["computing", "10", "10"]
    assert run_py(script, cache, seed="2").split() == ["10", "10"]
    script.write_text(MAIN_SCRIPT.replace("x * 2", "x * 3"))
    assert run_py(script, cache, seed="3").split() == ["computing", "13", "13"]


NOTEBOOK = """
import random, sys, __main__
cell = '''
from fncache import Memory
memory = Memory(LOCATION, verbose=0)

@memory.cache
def g(x):
    print("computing", flush=True)
    return sorted({x, "y", "z"})

print(g("w"))
'''
# A notebook kernel compiles each cell under a new temporary file name every session.
name = f"/tmp/ipykernel_{random.randrange(10**6)}/{random.randrange(10**9)}.py"
__main__.LOCATION = sys.argv[1]
exec(compile(cell, name, "exec"), __main__.__dict__)
"""


@pytest.mark.slow
def test_notebook_functions_hit_after_a_kernel_restart(tmp_path):
    """A function defined in a notebook cell hits from a new kernel with another cell file name."""
    script = tmp_path / "kernel.py"
    script.write_text(NOTEBOOK)
    cache = str(tmp_path / "cache")
    assert run_py(script, cache, seed="11").split("\n")[0] == "computing"
    assert "computing" not in run_py(script, cache, seed="12")


MODULE_V1 = """
from fncache import Memory

memory = Memory({location!r}, verbose=0)


def helper(x):
    return x + 1


@memory.cache
def f(x):
    with open({log!r}, "a") as out:
        out.write("run\\n")
    return helper(x)
"""


def test_source_edits_need_a_reload_and_helper_edits_invalidate(tmp_path, monkeypatch):
    """File edits count only once reloaded; a helper edit recomputes, a comment-only revert hits."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "runs.txt"
    src = tmp_path / "memory_edit_mod.py"
    v1 = MODULE_V1.format(location=str(tmp_path / "cache"), log=str(log))
    src.write_text(v1)
    mod = importlib.import_module("memory_edit_mod")
    try:
        assert mod.f(1) == 2 and len(lines(log)) == 1
        src.write_text(v1.replace("x + 1", "x + 100"))
        assert mod.f(1) == 2 and len(lines(log)) == 1
        mod = importlib.reload(mod)
        assert mod.f(1) == 101 and len(lines(log)) == 2
        src.write_text(v1.replace("def helper(x):", "# reformatted\ndef helper(x):  # adds one"))
        mod = importlib.reload(mod)
        assert mod.f(1) == 2 and len(lines(log)) == 2
    finally:
        sys.modules.pop("memory_edit_mod", None)


@pytest.mark.slow
def test_a_joblib_script_runs_unchanged_but_for_the_import(tmp_path):
    """A joblib.Memory script, with only its import changed, computes nothing when rerun."""
    pytest.importorskip("joblib")
    pytest.importorskip("numpy")
    original = (DATA / "joblib_script.py").read_text()
    assert "from joblib import Memory, Parallel, delayed" in original
    ported = tmp_path / "ported.py"
    ported.write_text(original.replace(
        "from joblib import Memory, Parallel, delayed",
        "from fncache import Memory\nfrom joblib import Parallel, delayed",
    ))
    log = tmp_path / "log.txt"
    cache = str(tmp_path / "cache")
    expected = run_py(DATA / "joblib_script.py", str(tmp_path / "joblib_cache"),
                      str(tmp_path / "joblib_log.txt"))
    assert run_py(ported, cache, str(log), seed="1") == expected
    computed = lines(log)
    assert computed.count("summarize") == 2 and len(computed) == len(set(computed)) + 1 == 9
    assert run_py(ported, cache, str(log), seed="2") == expected
    assert lines(log) == computed


def test_a_misspelt_keyword_names_the_nearest_one(tmp_path):
    """Memory(verbos=0) and memory.cache(ignor=[...]) are TypeErrors, as Python's own, that name
    the keyword most likely meant; nothing is created for a Memory refused so."""
    with pytest.raises(TypeError, match=r"^Memory: unknown option 'verbos' \(did you mean 'verbose'\?\)$"):
        fncache.Memory(tmp_path / "c", verbos=0)
    assert not (tmp_path / "c").exists()
    memory = fncache.Memory(tmp_path / "c", verbose=0)
    with pytest.raises(TypeError,
                       match=r"^Memory.cache: unknown option 'ignor' \(did you mean 'ignore'\?\)$"):
        memory.cache(ignor=["x"])
    assert memory.cache(ignore=["x"])(lambda x: 1)(2) == 1
