"""@fncache.memoize: hits, misses, invalidation, options and the wrapper's surface."""

from __future__ import annotations

import asyncio
import collections
import inspect
import json
import logging
import pickle
import shutil
import time

import pytest

import fncache

from .helpers import run_py, write

CALLS = fncache.ref(collections.Counter(), "test-call-counter")


def test_second_call_is_a_hit_and_forms_of_one_call_share_it(store):
    """f(1), f(a=1) and f(1, b=default) compute once; another argument computes again."""

    @fncache.memoize(store=store)
    def f(a, b="x"):
        CALLS["f"] += 1
        return (a, b)

    before = CALLS["f"]
    assert f(1) == f(a=1) == f(1, "x") == f(1, b="x") == (1, "x")
    assert CALLS["f"] - before == 1
    assert f(2) == (2, "x")
    assert CALLS["f"] - before == 2
    assert f.cache_info().hits == 3
    assert fncache.key_for(f, 1) == f.key(a=1, b="x")


def test_global_rebound_between_calls_changes_the_key(store):
    """A module-level value the function reads, changed in the same process, gives a new key."""
    ns: dict = {"__name__": "scratch_mod", "SCALE": 2}
    exec("def g(x):\n    return x * SCALE\n", ns)
    g = fncache.memoize(store=store)(ns["g"])
    assert g(5) == 10
    ns["SCALE"] = 3
    assert g(5) == 15
    ns["SCALE"] = 2
    assert g(5) == 10
    assert g.cache_info().misses == 2 and g.cache_info().hits == 1


def test_mutated_global_dict_changes_the_key(store):
    """A config dict mutated in place between calls is not a stale hit."""
    ns: dict = {"__name__": "scratch_cfg", "CONFIG": {"lr": 0.1}}
    exec("def train(n):\n    return n * CONFIG['lr']\n", ns)
    train = fncache.memoize(store=store)(ns["train"])
    assert train(10) == pytest.approx(1.0)
    ns["CONFIG"]["lr"] = 0.2
    assert train(10) == pytest.approx(2.0)


def test_default_and_closure_changes_change_the_key(store):
    """A changed default value or closure value is a different function."""

    def make(k):
        def h(x, y=1):
            return x + y + k

        return h

    h1 = fncache.memoize(store=store)(make(1))
    h2 = fncache.memoize(store=store)(make(2))
    assert h1.key(0) != h2.key(0)
    h1b = fncache.memoize(store=store)(make(1))
    assert h1.key(0) == h1b.key(0)
    h1b.__wrapped__.__defaults__ = (5,)
    assert h1b.key(0) != h1.key(0)


def test_exceptions_propagate_and_are_not_stored(store):
    """An exception from the function reaches the caller unchanged and the next call runs again."""
    attempts = []

    class Boom(Exception):
        pass

    def flaky(x):
        attempts.append(x)
        if len(attempts) == 1:
            raise Boom("first")
        return x

    m = fncache.memoize(store=store, ignore=[])(flaky)
    with pytest.raises(Boom, match="first"):
        m(1)
    assert len(fncache.open_store(store)) == 0


def test_ignore_leaves_parameters_out_of_the_key(store):
    """Ignored parameters do not change the key; unknown names are refused at decoration."""

    @fncache.memoize(store=store, ignore=["verbose"])
    def f(x, verbose=False):
        return x

    assert f.key(1, verbose=True) == f.key(1) == f.key(1, False)
    with pytest.raises(fncache.ConfigError, match="ignore"):
        fncache.memoize(ignore=["nope"])(lambda x: x)


def test_wrapper_keeps_name_doc_signature_and_wrapped(store):
    """The memoized function looks like the original to introspection."""

    def documented(a: int, b: str = "s") -> str:
        """Docstring here."""
        return b * a

    m = fncache.memoize(store=store)(documented)
    assert m.__name__ == "documented"
    assert m.__doc__ == "Docstring here."
    assert m.__wrapped__ is documented
    assert inspect.signature(m) == inspect.signature(documented)


def test_call_check_and_clear(store):
    """call() recomputes and stores, check_call_in_cache() tells, clear() removes this function's entries."""
    runs = []

    @fncache.memoize(store=store)
    def f(x):
        runs.append(x)
        return -x

    @fncache.memoize(store=store)
    def other(x):
        return x

    assert not f.check_call_in_cache(3)
    assert f(3) == -3
    assert f.check_call_in_cache(3)
    assert f.call(3) == -3
    assert len(runs) == 2
    other(1)
    assert f.clear() >= 1
    assert not f.check_call_in_cache(3)
    assert other.check_call_in_cache(1)


def test_expire_makes_old_entries_misses(store):
    """An entry older than expire= seconds is recomputed."""
    runs = []

    # 2 s: long enough that a loaded machine still hits before the entry expires.
    @fncache.memoize(store=store, expire=2.0)
    def f(x):
        runs.append(x)
        return x

    f(1)
    f(1)
    assert len(runs) == 1
    time.sleep(2.2)
    f(1)
    assert len(runs) == 2


def test_unhashable_argument_names_the_parameter(store):
    """A generator argument raises UnhashableArgument naming the parameter, or runs uncached on request."""

    @fncache.memoize(store=store)
    def total(items, scale=1):
        return sum(items) * scale

    with pytest.raises(fncache.UnhashableArgument, match="'items'") as info:
        total(i for i in range(3))
    assert info.value.parameter == "items"
    lax = fncache.memoize(store=store, on_unhashable="call")(total.__wrapped__)
    assert lax(i for i in range(4)) == 6


def test_unpicklable_result_is_returned_not_stored(store, caplog):
    """A result that cannot be pickled reaches the caller and a warning says it was not stored."""
    import threading

    @fncache.memoize(store=store)
    def make_lock(x):
        return threading.Lock()

    with caplog.at_level(logging.WARNING, logger="fncache"):
        lock = make_lock(1)
    assert hasattr(lock, "acquire")
    assert "not stored" in caplog.text
    assert not make_lock.check_call_in_cache(1)


def test_invalid_options_fail_at_decoration_naming_the_option():
    """Each bad option raises ConfigError (a ValueError) with the option's name in the message."""
    bad = [
        ({"expire": -1}, "expire"),
        ({"on_unhashable": "ignore"}, "on_unhashable"),
        ({"on_store_error": "panic"}, "on_store_error"),
        ({"version": 3}, "version"),
        ({"store": 42}, "store"),
        ({"compress": "gzip"}, "compress"),
        ({"ignore": "x"}, "ignore"),
        ({"colour": "red"}, "colour"),
    ]
    for options, name in bad:
        with pytest.raises(ValueError, match=name):
            fncache.memoize(**options)(lambda x: x)


def test_generators_are_refused():
    """Generator functions cannot be memoized: their result is consumed lazily."""

    def gen(n):
        yield from range(n)

    with pytest.raises(fncache.ConfigError, match="generator"):
        fncache.memoize(gen)


def test_version_pins_the_code_part(store):
    """With version=, an edited body keeps its entries; a new version string does not."""
    ns1: dict = {}
    ns2: dict = {}
    exec("def f(x):\n    return x + 1\n", ns1)
    exec("def f(x):\n    return x + 2\n", ns2)
    a = fncache.memoize(store=store, version="v1")(ns1["f"])
    b = fncache.memoize(store=store, version="v1")(ns2["f"])
    c = fncache.memoize(store=store, version="v2")(ns2["f"])
    assert a.key(1) == b.key(1) != c.key(1)
    assert fncache.memoize(store=store)(ns1["f"]).key(1) != fncache.memoize(store=store)(ns2["f"]).key(1)


def test_methods_key_the_instance_by_content(store):
    """A memoized method hits for an equal instance and misses for a different one."""

    class Model:
        def __init__(self, w):
            self.w = w

        @fncache.memoize(store=store)
        def predict(self, x):
            CALLS["predict"] += 1
            return self.w * x

    before = CALLS["predict"]
    assert Model(2).predict(3) == 6
    assert Model(2).predict(3) == 6
    assert Model(5).predict(3) == 15
    assert CALLS["predict"] - before == 2


def test_async_functions_are_awaited_and_cached(store):
    """A coroutine function's result is cached; concurrent awaits of one key compute once."""

    @fncache.memoize(store=store)
    async def fetch(x):
        CALLS["fetch"] += 1
        await asyncio.sleep(0.05)
        return x * 10

    async def main():
        return await asyncio.gather(fetch(1), fetch(1), fetch(1))

    before = CALLS["fetch"]
    assert asyncio.run(main()) == [10, 10, 10]
    assert asyncio.run(fetch(1)) == 10
    assert CALLS["fetch"] - before == 1


def test_threads_missing_on_one_key_compute_once(store):
    """Eight threads calling the same slow miss at once run the function once."""
    import threading

    @fncache.memoize(store=store)
    def slow(x):
        CALLS["slow"] += 1
        time.sleep(0.3)
        return x

    barrier = threading.Barrier(8)
    results = []
    before = CALLS["slow"]

    def worker():
        barrier.wait()
        results.append(slow(7))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [7] * 8
    assert CALLS["slow"] - before == 1


def test_state_written_by_the_function_is_not_an_input(store):
    """A function appending to a list it reads still hits on the second call (joblib-style counters)."""
    calls = []

    @fncache.memoize(store=store)
    def f(x):
        calls.append(x)
        return x * 2

    assert f(1) == 2
    assert f(1) == 2
    assert f(2) == 4
    assert f(2) == 4
    assert calls == [1, 2]


def test_disable_turns_caching_off_until_enable(store):
    """fncache.disable() makes every call run and store nothing; fncache.enable() turns caching back on."""
    runs = []

    @fncache.memoize(store=store)
    def f(x):
        runs.append(x)
        return x

    fncache.disable()
    try:
        f(1)
        f(1)
        assert runs == [1, 1] and f.cache_info().stores == 0
    finally:
        fncache.enable()
    f(1)
    f(1)
    assert runs == [1, 1, 1] and f.cache_info().hits == 1


@pytest.mark.slow
def test_disable_env_is_read_once_at_import(tmp_path):
    """FNCACHE_DISABLE=1 at start-up turns caching off; changing the variable later changes nothing."""
    script = write(tmp_path / "off.py", f"""
        import json, os
        import fncache

        runs = []

        @fncache.memoize(store={str(tmp_path / "cache")!r})
        def f(x):
            runs.append(x)
            return x

        f(1); f(1)
        os.environ["FNCACHE_DISABLE"] = "0"
        f(1)
        fncache.enable()
        f(1); f(1)
        print(json.dumps(runs))
    """)
    out = run_py(script, env={"FNCACHE_DISABLE": "1"})
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [1, 1, 1, 1]


def test_memory_store_url(store):
    """memory:// stores work in-process and share entries by name."""

    @fncache.memoize(store="memory://shared-test")
    def f(x):
        CALLS["mem"] += 1
        return x

    before = CALLS["mem"]
    f(1)
    g = fncache.memoize(store="memory://shared-test")(f.__wrapped__)
    g(1)
    assert CALLS["mem"] - before == 1


@fncache.memoize
def module_level(x):
    return x + 1


def test_module_level_wrapper_pickles_by_name():
    """A module-level memoized function pickles by reference, with plain pickle."""
    data = pickle.dumps(module_level)
    assert pickle.loads(data) is module_level
    assert b"module_level" in data


def test_nested_wrapper_pickles_with_options(tmp_path):
    """A memoized closure pickles by value, keeps its options and still computes the same keys."""
    k = 3

    def add_k(x):
        return x + k

    m = fncache.memoize(store=str(tmp_path / "c"), ignore=["x"])(add_k)
    again = pickle.loads(pickle.dumps(m))
    assert again(1) == 4
    assert again.ignore == ["x"]
    assert again.key(5) == m.key(5)


# -- real processes ------------------------------------------------------------------------------

SCRIPT_V1 = """
import os, sys, json
import fncache

FACTOR = 3

def log(name):
    with open(os.environ["COUNT_FILE"], "a") as f:
        f.write(name + "\\n")

@fncache.memoize
def features(values, scale=2.0):
    log("features")
    return [v * scale * FACTOR for v in values]

if __name__ == "__main__":
    print(json.dumps({"result": features([1, 2, 3]), "key": features.key([1, 2, 3])}))
"""


def _count(path):
    return path.read_text().count("features") if path.exists() else 0


@pytest.mark.slow
def test_second_process_hits_edit_misses_revert_hits(tmp_path):
    """A new process hits; an edit to the __main__ function misses; reverting it hits again."""
    script = write(tmp_path / "proj" / "pipeline.py", SCRIPT_V1)
    env = {"FNCACHE_DIR": str(tmp_path / "cache"), "COUNT_FILE": str(tmp_path / "count")}
    count = tmp_path / "count"
    first = run_py(script, env=env, seed="1").stdout
    assert _count(count) == 1
    assert run_py(script, env=env, seed="2").stdout == first
    assert _count(count) == 1, "second process recomputed"

    # Comments, blank lines and a docstring do not invalidate.
    reformatted = SCRIPT_V1.replace(
        "def features(values, scale=2.0):\n",
        "def features(values, scale=2.0):  # tidy\n    '''Compute features.'''\n\n",
    )
    write(script, "# header comment\n\n" + reformatted)
    run_py(script, env=env)
    assert _count(count) == 1, "a formatting-only edit invalidated"

    write(script, SCRIPT_V1.replace("v * scale * FACTOR", "v * scale * FACTOR + 1"))
    edited = run_py(script, env=env)
    assert _count(count) == 2
    assert edited.stdout != first

    write(script, SCRIPT_V1.replace("FACTOR = 3", "FACTOR = 4"))
    run_py(script, env=env)
    assert _count(count) == 3, "a changed global did not invalidate"

    write(script, SCRIPT_V1)
    assert run_py(script, env=env).stdout == first
    assert _count(count) == 3, "reverting the edit did not hit the old entry"


@pytest.mark.slow
def test_same_script_in_two_checkouts_shares_entries(tmp_path):
    """The same code run from two directories computes once (keys are path-independent)."""
    a = write(tmp_path / "a" / "job.py", SCRIPT_V1)
    b = write(tmp_path / "elsewhere" / "b" / "job.py", SCRIPT_V1)
    env = {"FNCACHE_DIR": str(tmp_path / "cache"), "COUNT_FILE": str(tmp_path / "count")}
    out_a = run_py(a, env=env, seed="1", cwd=a.parent).stdout
    out_b = run_py(b, env=env, seed="2", cwd=b.parent).stdout
    assert out_a == out_b
    assert _count(tmp_path / "count") == 1


WORKER_MODULE = """
import os
import fncache

@fncache.memoize
def square(x):
    with open(os.environ["COUNT_FILE"], "a") as f:
        f.write("features\\n")
    return x * x
"""

POOL_SCRIPT = """
import multiprocessing, sys, pickle
sys.path.insert(0, sys.argv[1])
import workmod

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        assert pool.map(workmod.square, range(6)) == [x * x for x in range(6)]
    # the parent now hits what the children stored
    assert [workmod.square(x) for x in range(6)] == [x * x for x in range(6)]
    assert workmod.square.cache_info().misses == 0, workmod.square.cache_info()
    print("ok")
"""


@pytest.mark.slow
def test_wrapper_works_in_spawned_child_processes(tmp_path):
    """A memoized function sent to a spawn pool runs there and its results are hits for the parent."""
    write(tmp_path / "mods" / "workmod.py", WORKER_MODULE)
    script = write(tmp_path / "pool.py", POOL_SCRIPT)
    env = {"FNCACHE_DIR": str(tmp_path / "cache"), "COUNT_FILE": str(tmp_path / "count")}
    assert run_py(script, str(tmp_path / "mods"), env=env).stdout.strip() == "ok"
    assert _count(tmp_path / "count") == 6


MAIN_PICKLE_SCRIPT = """
import os, sys, subprocess, pickle
import fncache

@fncache.memoize
def cube(x):
    with open(os.environ["COUNT_FILE"], "a") as f:
        f.write("features\\n")
    return x ** 3

if __name__ == "__main__":
    if sys.argv[1:] == ["child"]:
        f = pickle.load(sys.stdin.buffer)
        print(f(4))
    else:
        assert cube(4) == 64
        out = subprocess.run([sys.executable, __file__, "child"], input=pickle.dumps(cube),
                             capture_output=True, check=True).stdout
        assert out.strip() == b"64", out
        print("ok")
"""


@pytest.mark.slow
def test_main_function_wrapper_pickles_into_a_subprocess(tmp_path):
    """A __main__ function's wrapper travels by value to another interpreter and hits there."""
    script = write(tmp_path / "main_pickle.py", MAIN_PICKLE_SCRIPT)
    env = {"FNCACHE_DIR": str(tmp_path / "cache"), "COUNT_FILE": str(tmp_path / "count")}
    assert run_py(script, env=env).stdout.strip() == "ok"
    assert _count(tmp_path / "count") == 1, "the child recomputed a call the parent had stored"



def test_function_and_options_in_one_call(store):
    """memoize(f, store=...) is the same as memoize(store=...)(f); unknown options still fail."""

    def f(x):
        return x

    m = fncache.memoize(f, store=store, ignore=["x"])
    assert m.key(1) == m.key(2)
    assert m.key(1) == fncache.memoize(store=store, ignore=["x"])(f).key(1)
    with pytest.raises(fncache.ConfigError, match="colour"):
        fncache.memoize(f, colour="red")


def test_debug_log_and_verbose_lines(store, caplog, capsys, monkeypatch):
    """DEBUG logging reports miss, store and hit; verbose (or FNCACHE_VERBOSE) prints a line per hit
    and two per computation."""

    @fncache.memoize(store=store, verbose=True)
    def f(x):
        return x

    with caplog.at_level(logging.DEBUG, logger="fncache"):
        f(1)
        f(1)
    events = [r.getMessage().split()[0] for r in caplog.records if r.name == "fncache"]
    assert "miss" in events and "hit" in events
    assert any("stored" in r.getMessage() for r in caplog.records)
    err = capsys.readouterr().err.splitlines()
    assert [line.split()[1] for line in err] == ["miss", "computed", "hit"]
    assert all("test_debug_log_and_verbose_lines" in line for line in err)

    monkeypatch.setenv("FNCACHE_VERBOSE", "1")
    g = fncache.memoize(store=store)(lambda y: y)
    g(2)
    assert "[fncache] miss" in capsys.readouterr().err


def test_deleted_cache_directory_is_recreated_on_the_next_store(tmp_path, caplog):
    """rm -rf of the cache under a live process: the next miss recreates it, so results persist."""

    cache = tmp_path / "cache"

    @fncache.memoize(store=str(cache))
    def f(x):
        return x + 1

    f(1)
    shutil.rmtree(cache)
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(2) == 3
    assert "removed or replaced" in caplog.text
    assert cache.is_dir() and (cache.stat().st_mode & 0o777) == 0o700
    fresh = fncache.open_store(str(cache))
    assert f.key(2) in {e.key for e in fresh.entries()}


def test_cache_directory_replaced_by_another_is_noticed_and_a_symlink_to_it_is_not(tmp_path,
                                                                                     caplog):
    """A cache directory renamed away and replaced by another store: the next miss is stored in
    the store now at the path, not in the one renamed away. Replaced by a symlink to itself (the
    same database): nothing to reopen, entries keep hitting."""
    cache = tmp_path / "cache"
    calls = []

    @fncache.memoize(store=str(cache))
    def f(x):
        calls.append(x)
        return x + 1

    f(1)
    cache.rename(tmp_path / "moved")
    fncache.open_store(str(cache)).add("0" * 32, b"another store", {"function": "m:g"})
    with caplog.at_level(logging.WARNING, logger="fncache"):
        assert f(2) == 3
    assert "removed or replaced" in caplog.text
    assert f.key(2) in {e.key for e in fncache.open_store(str(cache)).entries()}
    assert f.key(2) not in {e.key for e in fncache.open_store(str(tmp_path / "moved")).entries()}
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir(mode=0o700)
    link.symlink_to(real, target_is_directory=True)
    g = fncache.memoize(store=str(link))(lambda x: calls.append(x) or x)
    g(5)
    link.unlink()
    link.symlink_to(real, target_is_directory=True)  # a new link, to the same directory
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fncache"):
        g(6)
        assert g(5) == 5 and g(6) == 6
    assert "removed or replaced" not in caplog.text
    assert calls == [1, 2, 5, 6]


def test_track_after_first_call_applies_to_the_next_call(store, tmp_path):
    """fncache.track() on a module changes how a running memoized function reads it, at once."""
    from .helpers import import_source

    import_source("trackme_lib", "def helper(x):\n    return x + 1\n", tmp_path)
    fncache.untrack("trackme_lib")
    try:
        user = import_source(
            "trackme_user", "import trackme_lib\ndef f(x):\n    return trackme_lib.helper(x)\n",
            tmp_path,
        )
        f = fncache.memoize(store=store)(user.f)
        by_name = f.key(1)
        fncache.track("trackme_lib")
        by_value = f.key(1)
        assert by_value != by_name
    finally:
        fncache.code.usercode._overrides.pop("trackme_lib", None)
        fncache.code.usercode._user_module_cache.clear()


@pytest.mark.parametrize("options, message", [
    ({"expir": 3600}, "memoize: unknown option 'expir' (did you mean 'expire'?)"),
    ({"lokc": True, "zzz": 1}, "memoize: unknown options 'lokc' (did you mean 'lock'?), 'zzz'"),
])
def test_a_misspelt_option_names_the_nearest_one(options, message):
    """memoize(expir=3600) fails at decoration time naming the option it most likely meant."""
    with pytest.raises(fncache.ConfigError) as e:
        fncache.memoize(**options)
    assert str(e.value) == message


def test_ignore_self_keys_the_class_code_not_the_instance_state(tmp_path):
    """With ``ignore=["self"]`` instances share entries, but replacing a method the memoized one
    calls gives a new key (the class is code the method reads); a subclass instance keys its class."""
    calls = []

    class Shape:
        def __init__(self, n):
            self.n = n

        def helper(self, x):
            return x + 1

        @fncache.memoize(store=str(tmp_path), ignore=["self"])
        def run(self, x):
            calls.append(x)
            return self.helper(x)

    class Square(Shape):
        def helper(self, x):
            return x * 100

    assert Shape(1).run(3) == 4 and Shape(2).run(3) == 4
    assert len(calls) == 1
    assert "class of self" in Shape.run.call_key(Shape(1), 3).components
    assert Square(1).run(3) == 300  # not Shape's entry
    before = Shape.run.key(Shape(1), 3)
    Shape.helper = lambda self, x: x + 2
    assert Shape.run.key(Shape(1), 3) != before
    assert Shape(1).run(3) == 5
