"""What can be memoized: coroutine functions, methods of every kind, partials, callable objects and
builtins; and what is refused (generators)."""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import json
import math
import sys
from pathlib import Path

import pytest

import fncache
from tests.helpers import REPO, run_py, write

# Computations are counted here; ref() keys the counter by its name, so counting is not an input.
CALLS: collections.Counter[str] = fncache.ref(collections.Counter(), "calls")


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    CALLS.clear()


# -- coroutine functions ------------------------------------------------------------------------


def test_coroutine_function_result_is_cached(store: str) -> None:
    """An async function's awaited result is stored, and a later await reads it back."""

    @fncache.memoize(store=store)
    async def fetch(x):
        CALLS["fetch"] += 1
        await asyncio.sleep(0)
        return {"x": x}

    async def main():
        return [await fetch(1), await fetch(1), await fetch(2)]

    assert asyncio.run(main()) == [{"x": 1}, {"x": 1}, {"x": 2}]
    assert CALLS["fetch"] == 2
    assert fetch.cache_info().hits == 1
    assert asyncio.run(main()) == [{"x": 1}, {"x": 1}, {"x": 2}]  # a new event loop
    assert CALLS["fetch"] == 2


def test_concurrent_awaits_of_one_key_compute_once(store: str) -> None:
    """Awaits of one key that overlap in time share a single computation."""

    @fncache.memoize(store=store)
    async def slow(x):
        CALLS["slow"] += 1
        await asyncio.sleep(0.05)
        return x * 10

    async def main():
        return await asyncio.gather(*(slow(3) for _ in range(5)), slow(4))

    assert asyncio.run(main()) == [30, 30, 30, 30, 30, 40]
    assert CALLS["slow"] == 2


def test_coroutine_exception_is_its_callers_and_not_stored(store: str) -> None:
    """A failing coroutine raises in its own caller; a concurrent awaiter computes again (and here
    fails too, its own failure), and the next call computes again."""

    @fncache.memoize(store=store)
    async def boom(x):
        CALLS["boom"] += 1
        await asyncio.sleep(0.02)
        raise ValueError(x)

    async def main():
        return await asyncio.gather(boom(1), boom(1), return_exceptions=True)

    results = asyncio.run(main())
    assert [type(r) for r in results] == [ValueError, ValueError]
    assert CALLS["boom"] == 2
    with pytest.raises(ValueError):
        asyncio.run(boom(1))
    assert CALLS["boom"] == 3


def test_memoized_coroutine_function_is_seen_as_one(store: str) -> None:
    """Frameworks that check for coroutine functions recognise the memoized wrapper as one."""

    @fncache.memoize(store=store)
    async def handler(x):
        return x

    if sys.version_info >= (3, 12):
        assert inspect.iscoroutinefunction(handler)
    else:  # inspect only knows code flags before 3.12; asyncio's check is the one used then
        assert asyncio.iscoroutinefunction(handler)
    assert inspect.iscoroutine(coro := handler(1))
    assert asyncio.run(coro) == 1


# -- methods ------------------------------------------------------------------------------------


def _point_class(store: str) -> type:
    class Point:
        def __init__(self, x: float) -> None:
            self.x = x

        @fncache.memoize(store=store)
        def scaled(self, k):
            CALLS["scaled"] += 1
            return self.x * k

        @fncache.memoize(store=store, ignore=["self"])
        def table(self, n):
            CALLS["table"] += 1
            return list(range(n))

    return Point


def test_instance_method_is_keyed_by_instance_content(store: str) -> None:
    """Equal instances share entries, a different or mutated instance misses."""
    Point = _point_class(store)
    p = Point(3)
    assert p.scaled(2) == 6
    assert p.scaled(2) == 6
    assert Point(3).scaled(2) == 6  # another object with the same content
    assert CALLS["scaled"] == 1
    assert Point(4).scaled(2) == 8
    p.x = 5
    assert p.scaled(2) == 10
    assert CALLS["scaled"] == 3
    assert Point.scaled.cache_info().hits == 2


def test_cache_info_and_clear_work_on_a_bound_method(store: str) -> None:
    """``obj.method.cache_info()`` and ``obj.method.clear()`` reach the memoized method."""
    Point = _point_class(store)
    p = Point(3)
    p.scaled(2)
    p.scaled(2)
    assert p.scaled.cache_info() == Point.scaled.cache_info()
    assert p.scaled.cache_info().hits == 1 and p.scaled.cache_info().misses == 1
    assert p.scaled.clear() == 1
    assert p.scaled(2) == 6 and CALLS["scaled"] == 2


def test_ignore_self_shares_entries_between_instances(store: str) -> None:
    """With ``ignore=["self"]`` a method's result depends on its other arguments only."""
    Point = _point_class(store)
    assert Point(1).table(3) == [0, 1, 2]
    assert Point(2).table(3) == [0, 1, 2]
    assert Point(2).table(4) == [0, 1, 2, 3]
    assert CALLS["table"] == 2


def test_memoized_bound_method_is_keyed_by_its_instance(store: str) -> None:
    """``memoize(obj.method)`` caches calls of that method with that instance's content."""

    class Model:
        def __init__(self, w):
            self.w = w

        def predict(self, x):
            CALLS["predict"] += 1
            return self.w * x

    m = fncache.memoize(store=store)(Model(2).predict)
    assert m(5) == 10
    assert fncache.memoize(store=store)(Model(2).predict)(5) == 10
    assert fncache.memoize(store=store)(Model(3).predict)(5) == 15
    assert CALLS["predict"] == 2


@pytest.mark.parametrize("order", ["classmethod-over-memoize", "memoize-over-classmethod"])
def test_classmethod_in_either_decorator_order(store: str, order: str) -> None:
    """A memoized classmethod receives its class, caches, and keys calls from subclasses apart."""
    if order == "classmethod-over-memoize":

        class Base:
            factor = 2

            @classmethod
            @fncache.memoize(store=store)
            def make(cls, x):
                CALLS[cls.__name__] += 1
                return (cls.__name__, x * cls.factor)

    else:

        class Base:  # type: ignore[no-redef]
            factor = 2

            @fncache.memoize(store=store)
            @classmethod
            def make(cls, x):
                CALLS[cls.__name__] += 1
                return (cls.__name__, x * cls.factor)

    class Sub(Base):
        factor = 3

    assert isinstance(Base.__dict__["make"], classmethod)
    assert Base.make(1) == ("Base", 2)
    assert Base().make(1) == ("Base", 2)  # through an instance: the same call
    assert Sub.make(1) == ("Sub", 3)
    assert Sub.make(1) == ("Sub", 3)
    assert dict(CALLS) == {"Base": 1, "Sub": 1}


@pytest.mark.parametrize("order", ["staticmethod-over-memoize", "memoize-over-staticmethod"])
def test_staticmethod_in_either_decorator_order(store: str, order: str) -> None:
    """A memoized staticmethod gets no instance or class, through the class or an instance."""
    if order == "staticmethod-over-memoize":

        class Tools:
            @staticmethod
            @fncache.memoize(store=store)
            def square(x):
                CALLS["square"] += 1
                return x * x

    else:

        class Tools:  # type: ignore[no-redef]
            @fncache.memoize(store=store)
            @staticmethod
            def square(x):
                CALLS["square"] += 1
                return x * x

    assert isinstance(Tools.__dict__["square"], staticmethod)
    assert Tools.square(4) == 16
    assert Tools().square(4) == 16
    assert CALLS["square"] == 1


def test_memoized_class_refuses_a_bare_classmethod_object() -> None:
    """Constructing ``Memoized`` around a classmethod object says which decorator order to use."""
    with pytest.raises(fncache.ConfigError, match="@classmethod above @fncache.memoize"):
        fncache.Memoized(classmethod(lambda cls: None))


# -- partials, callable objects, builtins --------------------------------------------------------


def _add(a, b):
    CALLS["add"] += 1
    return a + b


def test_partial_is_keyed_by_its_function_and_bound_arguments(store: str) -> None:
    """A memoized ``functools.partial`` caches; partials binding other values are other calls."""
    add1 = fncache.memoize(store=store)(functools.partial(_add, 1))
    assert add1(2) == 3
    assert add1(2) == 3
    assert fncache.memoize(store=store)(functools.partial(_add, 1))(2) == 3
    assert CALLS["add"] == 1
    add2 = fncache.memoize(store=store)(functools.partial(_add, 2))
    assert add2(2) == 4
    assert CALLS["add"] == 2
    # Both are listed and cleared under one stable name (no memory address in it).
    assert add1.function_id == add2.function_id == f"{__name__}:partial(_add)"
    assert add1.clear() == 2
    assert add2(2) == 4
    assert CALLS["add"] == 3


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        CALLS["scaler"] += 1
        return x * self.k


def test_callable_object_is_keyed_by_its_content(store: str) -> None:
    """``memoize(obj)`` on an object with ``__call__`` caches by the object's content."""
    s3 = fncache.memoize(store=store)(Scaler(3))
    assert s3(2) == 6
    assert s3(2) == 6
    assert fncache.memoize(store=store)(Scaler(3))(2) == 6
    assert CALLS["scaler"] == 1
    assert fncache.memoize(store=store)(Scaler(4))(2) == 8
    assert CALLS["scaler"] == 2
    assert s3.function_id == f"{__name__}:Scaler"


def test_builtins_can_be_memoized(store: str) -> None:
    """Builtin functions cache by their arguments like any other function."""
    mlen = fncache.memoize(store=store)(len)
    assert mlen([1, 2, 3]) == 3
    assert mlen([1, 2, 3]) == 3
    assert mlen("ab") == 2
    assert tuple(mlen.cache_info())[:2] == (1, 2)
    msqrt = fncache.memoize(store=store)(math.sqrt)
    assert msqrt(9.0) == 3.0
    assert msqrt.check_call_in_cache(9.0)
    assert not msqrt.check_call_in_cache(16.0)
    assert mlen.function_id == "builtins:len"


# -- refused at decoration time -----------------------------------------------------------------


def test_generator_functions_are_refused() -> None:
    """A generator function cannot be memoized, and the message says what to do instead."""

    def numbers(n):
        yield from range(n)

    with pytest.raises(fncache.ConfigError, match="generator function.*Return a list"):
        fncache.memoize(numbers)


def test_async_generator_functions_are_refused() -> None:
    """An async generator function cannot be memoized either, with the same message."""

    async def numbers(n):
        for i in range(n):
            yield i

    with pytest.raises(fncache.ConfigError, match="generator function"):
        fncache.memoize(store="memory://")(numbers)


# -- across processes ---------------------------------------------------------------------------

KINDS_SCRIPT = '''
import asyncio, functools, json, os, sys
import fncache

COUNT_FILE = os.environ["COUNT_FILE"]

def count(name):
    with open(COUNT_FILE, "a") as f:
        f.write(name + "\\n")

@fncache.memoize
async def fetch(x):
    count("async")
    return x + 1

class Point:
    def __init__(self, x):
        self.x = x

    @fncache.memoize
    def scaled(self, k):
        count("method")
        return self.x * k

    @classmethod
    @fncache.memoize
    def make(cls, x):
        count("classmethod")
        return x

    @fncache.memoize
    @staticmethod
    def square(x):
        count("staticmethod")
        return x * x

def power(base, exp):
    count("partial")
    return base ** exp

class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        count("callable")
        return x * self.k

cube = fncache.memoize(functools.partial(power, exp=3))
scale = fncache.memoize(Scaler(3))
mlen = fncache.memoize(len)

print(json.dumps([asyncio.run(fetch(1)), Point(2).scaled(5), Point.make(7), Point.square(3),
                  cube(2), scale(4), mlen([1, 2])]))
'''


def _run_kinds(script: Path, tmp_path: Path) -> tuple[list[object], list[str]]:
    counts = tmp_path / "counts.txt"
    counts.write_text("")
    proc = run_py(script, cwd=REPO,
                  env={"FNCACHE_DIR": str(tmp_path / "store"), "COUNT_FILE": str(counts)})
    return json.loads(proc.stdout), sorted(counts.read_text().split())


@pytest.mark.slow
def test_every_kind_hits_in_a_new_process_and_edits_invalidate(tmp_path: Path) -> None:
    """Each kind computes once, hits from a new process, and misses after its own code changes."""
    script = write(tmp_path / "kinds.py", KINDS_SCRIPT)
    expected = [2, 10, 7, 9, 8, 12, 2]
    every = ["async", "callable", "classmethod", "method", "partial", "staticmethod"]
    assert _run_kinds(script, tmp_path) == (expected, every)
    assert _run_kinds(script, tmp_path) == (expected, [])

    # Edit the callable object's __call__ and the partial's function: only those two compute.
    script.write_text(KINDS_SCRIPT.replace("return x * self.k", "return self.k * x")
                      .replace("return base ** exp", "return pow(base, exp)"))
    assert _run_kinds(script, tmp_path) == (expected, ["callable", "partial"])
    script.write_text(KINDS_SCRIPT)  # reverting hits the first entries
    assert _run_kinds(script, tmp_path) == (expected, [])
