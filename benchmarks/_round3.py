"""Benchmarks of a miss that hashes a large global, of a scikit-learn pipeline's ``memory=``, and of
the memory a large load or store takes.

* ``global``: a function returning a 1e6 x 10 mixed DataFrame that it reaches through a helper's
  global (so the key hashes the 75 MB frame), stored under a new key each call, against
  joblib.Memory (which does not hash globals); then loaded back. Beside them, in the same
  interleaved rounds, a floor for a cache built as fncache is: a pickle-5 file of the frame
  written or read, plus one xxh3 pass over as many bytes as the frame holds for each pass the
  design makes (a load: the key's read of the global and the entry's checksum; a store: those
  and the read after the call that sees whether the call changed the global). Information rows
  print the floor against joblib.Memory and fncache against the floor.
* ``pipeline``: a warm ``Pipeline(memory=...).fit`` (its transformers cached), in process and in a
  new process, fncache.Memory against joblib.Memory. In the new process the target row is what
  the child times: ``Memory``'s import and the warm fit (the first key of a library function
  included). fncache's import (the package and its disk store's modules), which joblib.Memory does
  not pay there (scikit-learn has imported joblib already), and the whole process's time, which
  adds the interpreter's start and scikit-learn's import to both, are printed beside it.
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
    import pickle

    import joblib
    import numpy as np
    import xxhash

    n = 10**5 if quick else 10**6
    # 11 rounds: with 5, one slow step of three (a write-back, another tenant) moved the median
    # by 10-40% from one run to the next.
    rounds = 3 if quick else 11
    _funcs.BIG = df = frame(n)
    nbytes = int(df.memory_usage(deep=True).sum())
    pkl = os.path.join(tmp, "global.pkl")
    # As many bytes as the frame holds, in one block: what a key by content must read at least.
    scan = np.ones(nbytes, dtype=np.uint8)
    counter = itertools.count(1)

    def floor_store() -> None:
        xxhash.xxh3_128_digest(scan)  # the key
        xxhash.xxh3_128_digest(scan)  # after the call: did it change the global?
        with open(f"{pkl}.{next(counter)}", "wb") as f:
            pickle.dump(df, f, protocol=5)
        xxhash.xxh3_128_digest(scan)  # the entry's checksum

    def floor_load() -> Any:
        xxhash.xxh3_128_digest(scan)  # the key
        with open(pkl, "rb") as f:
            value = pickle.load(f)
        xxhash.xxh3_128_digest(scan)  # the entry's checksum
        return value

    try:
        ours = fncache.memoize(store=os.path.join(tmp, "global-fn"))(_funcs.through_helper)
        jl = joblib.Memory(os.path.join(tmp, "global-jl"), verbose=0).cache(_funcs.through_helper)
        s = measure({"ours": lambda: ours(next(counter)), "jl": lambda: jl(next(counter)),
                     "floor": floor_store},
                    rounds, touch=nbytes, before=lambda: forget(ours, jl, f"{pkl}.*"))
        ours(0), jl(0)
        with open(pkl, "wb") as f:
            pickle.dump(df, f, protocol=5)
        ld = measure({"ours": lambda: ours(0), "jl": lambda: jl(0), "floor": floor_load}, rounds,
                     touch=nbytes)
        # The key's part of the load: fncache's hash of the frame (column by column, as a call's
        # key reads the global) against the floor's one xxh3 pass over as many bytes.
        key = measure({"ours": lambda: fncache.hash(df),
                       "floor": lambda: xxhash.xxh3_128_digest(scan)}, rounds)
    finally:
        _funcs.BIG = df = None
    what = f"pandas {n}x10 ({nbytes >> 20} MB) read via a helper's global"
    floor = "pickle-5 file + xxh3 passes"
    return [row(f"store {what}", s["ours"], s["jl"], "joblib.Memory", "<= 1.0x", 1.0, "ms"),
            row("  the store's floor vs joblib.Memory", s["floor"], s["jl"], "joblib.Memory",
                "(info)", None, "ms"),
            row("  fncache's store vs that floor", s["ours"], s["floor"], floor, "(info)", None,
                "ms"),
            row(f"load {what}", ld["ours"], ld["jl"], "joblib.Memory", "<= 0.8x", 0.8, "ms"),
            row("  the load's floor vs joblib.Memory", ld["floor"], ld["jl"], "joblib.Memory",
                "(info)", None, "ms"),
            row("  fncache's load vs that floor", ld["ours"], ld["floor"], floor, "(info)", None,
                "ms"),
            row("  in it, the key's hash of the frame vs one xxh3 pass", key["ours"],
                key["floor"], "xxh3 over as many bytes", "(info)", None, "ms")]


_PIPELINE = textwrap.dedent("""
    import sys, time
    import numpy as np
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    rng = np.random.default_rng(0)
    X = rng.random((int(sys.argv[3]), 50))
    y = (X[:, 0] > 0.5).astype(int)
    start = time.perf_counter()
    if sys.argv[1] == "ours":
        from fncache import Memory
        import fncache.stores.disk  # imported by the first call otherwise
    else:
        from joblib import Memory
    imported = time.perf_counter() - start
    memory = Memory(sys.argv[2], verbose=0)
    pipe = Pipeline([("scale", StandardScaler()), ("pca", PCA(10, random_state=0)),
                     ("clf", LogisticRegression(max_iter=50))], memory=memory)
    pipe.fit(X, y)
    print(time.perf_counter() - start, imported)
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
    # The target row is what the two differ in, timed by the child: Memory's import and the warm
    # fit (the interpreter's start and scikit-learn's import, the same code in both, swing by
    # +-100 ms between processes); the whole process, timed from here, is printed beside it.
    compileall.compile_dir(os.path.dirname(fncache.__file__), quiet=1)
    whole: dict[str, list[float]] = {"ours": [], "jl": []}
    timed: dict[str, list[float]] = {"ours": [], "jl": []}
    imports: list[float] = []
    dirs = {"ours": os.path.join(tmp, "proc-fn"), "jl": os.path.join(tmp, "proc-jl")}
    for name in whole:
        _child(name, dirs[name], n)  # cold: fills the cache
    for r in range(3 if quick else 15):
        for name in (list(whole) if r % 2 == 0 else list(whole)[::-1]):
            start = time.perf_counter()
            fit, imported = _child(name, dirs[name], n)
            whole[name].append(time.perf_counter() - start)
            timed[name].append(fit)
            if name == "ours":
                imports.append(imported)
    rows.append(row("sklearn Pipeline, new process: import+fit", stat(timed["ours"]),
                    stat(timed["jl"]), "joblib.Memory", "<= 1.0x", 1.0, "ms"))
    rows.append(row("  fncache's import in it (package, disk store)", stat(imports),
                    stat(timed["ours"]), "its import + fit", "(info)", None, "ms"))
    rows.append(row("  the whole new process", stat(whole["ours"]), stat(whole["jl"]),
                    "joblib.Memory", "(info)", None, "ms"))
    # What the row charges joblib.Memory for its import: nothing, since scikit-learn imported
    # joblib already. Each import alone, in a new process that has imported numpy only.
    alone: dict[str, list[float]] = {"ours": [], "jl": []}
    for r in range(3 if quick else 11):
        for name in (list(alone) if r % 2 == 0 else list(alone)[::-1]):
            alone[name].append(_import_alone(name))
    rows.append(row("  Memory's import alone, after numpy only", stat(alone["ours"]),
                    stat(alone["jl"]), "joblib's", "(info)", None, "ms"))
    return rows


_IMPORT_ALONE = textwrap.dedent("""
    import sys, time
    import numpy
    start = time.perf_counter()
    if sys.argv[1] == "ours":
        from fncache import Memory
        import fncache.stores.disk
    else:
        from joblib import Memory
    print(time.perf_counter() - start)
""")


def _import_alone(name: str) -> float:
    """Seconds a new process's import of ``Memory`` took, as it measured them."""
    return _printed(_IMPORT_ALONE, name)[-1]


def _child(name: str, location: str, n: int) -> tuple[float, float]:
    """Run one new-process fit: the seconds its import and warm fit took, and its import alone,
    as it measured them."""
    fit, imported = _printed(_PIPELINE, name, location, str(n))
    return fit, imported


def _printed(script: str, *args: str) -> list[float]:
    """Run ``script`` in a new process; the numbers it prints."""
    done = subprocess.run([sys.executable, "-c", script, *args], check=True, capture_output=True,
                          text=True)
    return [float(x) for x in done.stdout.split()]


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
