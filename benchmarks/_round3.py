"""Benchmarks of a miss that hashes a large global, of a scikit-learn pipeline's ``memory=``, and of
the memory a large load or store takes.

* ``global``: a function returning a 1e6 x 10 mixed DataFrame that it reaches through a helper's
  global (so the key hashes the 75 MB frame), stored under a new key each call, against
  joblib.Memory (which does not hash globals); then loaded back.
* ``pipeline``: a warm ``Pipeline(memory=...).fit`` (its transformers cached), in process and in a
  new process (import and fit), fncache.Memory against joblib.Memory.
* ``peak``: the traced allocation peak of a load and of a store of an N-byte array result, over N.
"""

from __future__ import annotations

import compileall
import itertools
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import fncache
from benchmarks import _funcs


def bench_global(tmp: str, quick: bool, *, measure: Callable[..., Any], row: Callable[..., Any],
                 frame: Callable[[int], Any], forget: Callable[..., Any]) -> list[Any]:
    import joblib

    n = 10**5 if quick else 10**6
    rounds = 3 if quick else 5
    _funcs.BIG = frame(n)
    nbytes = int(_funcs.BIG.memory_usage(deep=True).sum())
    try:
        ours = fncache.memoize(store=os.path.join(tmp, "global-fn"))(_funcs.through_helper)
        jl = joblib.Memory(os.path.join(tmp, "global-jl"), verbose=0).cache(_funcs.through_helper)
        counter = itertools.count(1)
        s = measure({"ours": lambda: ours(next(counter)), "jl": lambda: jl(next(counter))},
                    rounds, touch=nbytes, before=lambda: forget(ours, jl))
        ours(0), jl(0)
        ld = measure({"ours": lambda: ours(0), "jl": lambda: jl(0)}, rounds, touch=nbytes)
    finally:
        _funcs.BIG = None
    what = f"pandas {n}x10 ({nbytes >> 20} MB) read via a helper's global"
    return [row(f"store {what}", s["ours"], s["jl"], "joblib.Memory", "<= 1.0x", 1.0, "ms"),
            row(f"load {what}", ld["ours"], ld["jl"], "joblib.Memory", "<= 0.8x", 0.8, "ms")]


_PIPELINE = textwrap.dedent("""
    import sys, time
    start = time.perf_counter()
    import numpy as np
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    if sys.argv[1] == "ours":
        from fncache import Memory
    else:
        from joblib import Memory
    rng = np.random.default_rng(0)
    X = rng.random((int(sys.argv[3]), 50))
    y = (X[:, 0] > 0.5).astype(int)
    memory = Memory(sys.argv[2], verbose=0)
    pipe = Pipeline([("scale", StandardScaler()), ("pca", PCA(10, random_state=0)),
                     ("clf", LogisticRegression(max_iter=50))], memory=memory)
    pipe.fit(X, y)
    print(time.perf_counter() - start)
""")


def _pipeline_fit(memory: Any, n: int) -> Callable[[], Any]:
    import numpy as np
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.random((n, 50))
    y = (X[:, 0] > 0.5).astype(int)

    def fit() -> Any:
        pipe = Pipeline([("scale", StandardScaler()), ("pca", PCA(10, random_state=0)),
                         ("clf", LogisticRegression(max_iter=50))], memory=memory)
        return pipe.fit(X, y)

    return fit


def bench_pipeline(tmp: str, quick: bool, *, measure: Callable[..., Any], row: Callable[..., Any],
                   stat: Callable[..., Any]) -> list[Any]:
    import joblib

    n = 2000 if quick else 20000
    rounds = 5 if quick else 15
    ours_dir, jl_dir = os.path.join(tmp, "pipe-fn"), os.path.join(tmp, "pipe-jl")
    fits = {"ours": _pipeline_fit(fncache.Memory(ours_dir, verbose=0), n),
            "jl": _pipeline_fit(joblib.Memory(jl_dir, verbose=0), n)}
    for fit in fits.values():
        fit()  # the transformers' results are stored: every timed fit is warm
    t = measure(fits, rounds)
    rows = [row("sklearn Pipeline warm fit, in process", t["ours"], t["jl"], "joblib.Memory",
                "<= 0.5x", 0.5, "ms")]
    # A new process per fit: the import, the first key of a library function, the warm fit.
    # fncache's modules are compiled first, as pip compiles an installed wheel's (joblib's are, in
    # site-packages): from a source checkout with bytecode writing off (PYTHONDONTWRITEBYTECODE),
    # every child would compile each module edited since its last .pyc, about 2 ms a module.
    compileall.compile_dir(os.path.dirname(fncache.__file__), quiet=1)
    runs: dict[str, list[float]] = {"ours": [], "jl": []}
    dirs = {"ours": os.path.join(tmp, "proc-fn"), "jl": os.path.join(tmp, "proc-jl")}
    for name in runs:
        _child(name, dirs[name], n)  # cold: fills the cache
    for r in range(3 if quick else 7):
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            start = time.perf_counter()
            _child(name, dirs[name], n)
            runs[name].append(time.perf_counter() - start)
    rows.append(row("sklearn Pipeline warm fit, new process", stat(runs["ours"]), stat(runs["jl"]),
                    "joblib.Memory", "<= 1.0x", 1.0, "ms"))
    return rows


def _child(name: str, location: str, n: int) -> None:
    subprocess.run([sys.executable, "-c", _PIPELINE, name, location, str(n)], check=True,
                   capture_output=True, text=True)


def bench_peak(tmp: str, quick: bool, *, row: Callable[..., Any], const: Callable[..., Any]
               ) -> list[Any]:
    """Traced allocation peaks (numpy reports its buffers to tracemalloc) over the result's size."""
    import tracemalloc

    import numpy as np

    size = 2**22 if quick else 2**25
    f = fncache.memoize(store=os.path.join(tmp, "peak-fn"))(_funcs.full)
    g = fncache.memoize(store=os.path.join(tmp, "peak-store"))(_funcs.given)
    value = np.full(size, 3.0)
    f(1, size)
    peaks = {}
    for what, call in (("load", lambda: f(1, size)), ("store", lambda: g(value))):
        tracemalloc.start()
        try:
            result = call()
            peaks[what] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        del result
    mb = value.nbytes >> 20
    return [row(f"peak memory of a {mb} MB load (x its size)", const(peaks["load"] / value.nbytes),
                const(1.0), "the result's size", "<= 1.25x", 1.25, "x"),
            row(f"peak memory of a {mb} MB store (x its size)",
                const(peaks["store"] / value.nbytes), const(1.0), "the result's size",
                "<= 1.25x", 1.25, "x")]
