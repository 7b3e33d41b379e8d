"""A memoized function of an installed library is keyed by the library's version."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import fake_distribution


def _install(root, version: str) -> None:
    """A tiny distribution ``fakelib`` at ``version``, as pip would lay it out."""
    pkg = root / "fakelib"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    fake_distribution(root, "fakelib", version, "fakelib/__init__.py,,\n", top_level="fakelib\n")


_RUN = textwrap.dedent("""
    import sys, fncache
    fncache.untrack("fakelib")  # installed code, as it would be in site-packages
    import fakelib
    f = fncache.memoize(store=sys.argv[1])(fakelib.double)
    f(21)
    print(f.cache_info().misses)
""")


def test_library_upgrade_gives_new_keys(tmp_path):
    """v1 → v2 → v1 of an installed library: the upgrade recomputes, the downgrade hits again."""
    site = tmp_path / "site"
    site.mkdir()
    store = str(tmp_path / "store")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))

    def run() -> str:
        return subprocess.run([sys.executable, "-c", _RUN, store], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    _install(site, "1.0")
    assert run() == "1"
    assert run() == "0"  # same version: a hit
    _install(site, "2.0")
    assert run() == "1"  # upgraded: its code may differ, so a new key
    _install(site, "1.0")
    assert run() == "0"


_FILLS = textwrap.dedent("""
    def memo():  # a factory whose function fills a dict it closes over
        cache = {}
        def looked(x):
            if x not in cache:
                cache[x] = x * 2
            return cache[x]
        return looked


    def _remember(seen, x):
        seen.append(x)


    def logged():  # one whose function fills its list default through other code
        def f(x, _seen=[]):
            _remember(_seen, x)
            return x * 3
        return f


    def weighted(weights):  # and one that only reads the list it was made with
        def total(x):
            return sum(w * x for w in weights)
        return total
""")

_FILLS_RUN = textwrap.dedent("""
    import sys, fncache
    fncache.untrack("filllib")
    import filllib
    LOOK, LOG, TOTAL = filllib.memo(), filllib.logged(), filllib.weighted([1, 2])

    @fncache.memoize(store=sys.argv[1])
    def g(x):
        return LOOK(x) + LOG(x)

    @fncache.memoize(store=sys.argv[1])
    def h(x):
        return LOOK(x) + TOTAL(x)

    seen = []
    for fn, x in ((g, 1), (g, 1), (g, 2), (g, 1), (g, 2), (h, 1)):
        hits = fn.cache_info().hits
        assert fn(x) == 5 * x
        seen.append("hit" if fn.cache_info().hits > hits else "miss")
    LOOK(7)  # the memo filled outside a cached call
    hits = h.cache_info().hits
    assert h(1) == 5
    seen.append("hit" if h.cache_info().hits > hits else "miss")
    print(" ".join(seen))
""")


def test_a_library_function_filling_what_it_was_made_with_still_hits(tmp_path):
    """A library factory's function that fills the dict it closes over (a memo) is keyed by its
    type: its own code changes it. One that fills its list default through other code is keyed by
    that content (it may be what it was made with), and once a cached call is seen filling it, by
    its first content. Calls hit again, in the process and in the next ones (keyed by their
    content now, every call would miss)."""
    (tmp_path / "filllib.py").write_text(_FILLS)
    store = str(tmp_path / "store")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))

    def run() -> str:
        return subprocess.run([sys.executable, "-c", _FILLS_RUN, store], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    assert run() == "miss hit miss hit hit miss hit"
    # The next process starts from the first content again: its first call hits. g(2) ran after
    # the first process marked the state, under a key the unmarked process does not make (as
    # with a memo dict that is the user's global), so it runs once more; from then on, all hit.
    assert run() == "hit hit miss hit hit hit hit"
    assert run() == "hit hit hit hit hit hit hit"


_SHAPES = textwrap.dedent("""
    import bisect, heapq, operator, types


    def direct():
        cache = {}
        def f(x):
            cache[x] = x * 2
            return cache[x]
        return f


    def nested():
        groups = {0: [], 1: []}
        def f(x):
            groups[x % 2].append(x)
            return x * 2
        return f


    def alias():
        cache = {}
        def f(x, _hits=[0]):
            c, h = cache, _hits
            h[0] += 1
            c[x] = x * 2
            return c[x]
        return f


    def setitem():
        cache = {}
        def f(x):
            operator.setitem(cache, x, x * 2)
            return cache[x]
        return f


    def heap():
        h = []
        def f(x):
            heapq.heappush(h, x)
            bisect.insort(h, x)
            return x * 2
        return f


    def counter():
        st = types.SimpleNamespace(calls=0)
        def f(x):
            st.calls += 1
            return x * 2
        return f


    def bound():
        cache = {}
        put = cache.__setitem__
        def f(x, _get=cache.get):
            put(x, x * 2)
            return _get(x)
        return f


    def branches():
        cache, other = {}, {}
        def f(x):
            c = cache if x > 0 else other  # (branches meet at the alias)
            (c or cache)[x] = x * 2
            heapq.heappush(
                h_list,
                x,
            )
            return c[x]
        h_list = []
        return f


    def chained():
        cache = {}
        def f(x):
            a = b = cache
            b[x] = x * 2
            (w := a)[x + 1] = 0
            return w[x]
        return f


    def arrays():  # a numpy array written by functions it is passed to
        import numpy as np
        arr = np.zeros(4)
        def f(x):
            np.copyto(arr, x)
            np.add(arr, 1, out=arr)
            return x * 2
        return f


    def offset(series):  # reads a Series with a method that gives a new one
        def f(x):
            return int(series.add(x).iloc[-1])
        return f


    def scaler(weights):  # reads its list on a line that writes an item of another
        def f(x):
            out = [0] * len(weights)
            for i in range(len(weights)):
                out[i] = x * weights[i]
            return sum(out) // 3 * 2 if weights == [1, 2] else x * 2
        return f
""")

_SHAPES_RUN = textwrap.dedent("""
    import json, sys, fncache
    fncache.untrack("shapelib")
    import shapelib
    out = {}
    for name in ("direct", "nested", "alias", "setitem", "heap", "counter", "bound", "branches",
                 "chained", "arrays"):
        F = getattr(shapelib, name)()
        def g(x, F=F):
            return F(x)
        m = fncache.memoize(store=sys.argv[1])(g)
        before = m.key(1)
        F(5)  # the library function used outside a cached call
        out[name] = [before, m.key(1), m(1)]
    keys = {}
    for w in ([1, 2], [1, 3]):
        F = shapelib.scaler(w)
        def g(x, F=F):
            return F(x)
        keys[str(w)] = fncache.memoize(store=sys.argv[1])(g).key(1)
    out["scaler"] = keys
    import pandas as pd
    keys = {}
    for last in (2, 3):
        F = shapelib.offset(pd.Series([1, last]))
        def g(x, F=F):
            return F(x)
        keys[str(last)] = fncache.memoize(store=sys.argv[1])(g).key(1)
    out["offset"] = keys
    print(json.dumps(out))
""")


def test_what_a_library_function_changes_in_place_keeps_the_key(tmp_path):
    """A library factory's function changing what it closes over in these shapes (an item written,
    a list in a dict appended to, through an alias (also one where branches meet), ``operator.setitem``,
    ``heappush`` (also over several lines), an attribute of a namespace, a bound ``__setitem__`` it
    keeps, ``a = b = cache``, a walrus, an array passed to ``np.copyto`` and as ``out=``) keeps its
    key when called outside a cached call, the same in processes with other hash seeds; a list it
    only reads, on a line that writes an item of another, and a Series it reads with ``add``
    (which gives a new one), are keyed by their content (an edit is another key)."""
    import json

    pytest.importorskip("pandas")
    (tmp_path / "shapelib.py").write_text(_SHAPES)
    store = str(tmp_path / "store")

    def run(seed: str) -> dict:
        env = dict(os.environ, PYTHONHASHSEED=seed,
                   PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
        return json.loads(subprocess.run([sys.executable, "-c", _SHAPES_RUN, store], env=env,
                                         check=True, capture_output=True, text=True).stdout)

    first, second = run("1"), run("2")
    for name in ("direct", "nested", "alias", "setitem", "heap", "counter", "bound", "branches",
                 "chained", "arrays"):
        before, after, value = first[name]
        assert before == after, name
        assert value == 2, name
        assert second[name][0] == before, name
    for name, (a, b) in (("scaler", ("[1, 2]", "[1, 3]")), ("offset", ("2", "3"))):
        assert first[name][a] != first[name][b], name
        assert first[name] == second[name], name
