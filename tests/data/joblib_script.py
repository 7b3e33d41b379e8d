"""A small analysis script written for joblib.Memory.

The tests run it as it is, and then with only its ``from joblib import Memory`` line changed.
Usage: joblib_script.py CACHE_DIR LOG_FILE; every computation appends a line to LOG_FILE.
"""

import json
import sys

import numpy as np
from joblib import Memory, Parallel, delayed

location, log_path = sys.argv[1], sys.argv[2]
memory = Memory(location, verbose=0)
mapped = Memory(location, mmap_mode="r", verbose=0)


def note(what):
    with open(log_path, "a") as f:
        f.write(what + "\n")


@memory.cache
def load(n, seed=0):
    note(f"load {n} {seed}")
    return np.random.default_rng(seed).normal(size=n)


def center(x):
    return x - x.mean()


@memory.cache(ignore=["verbose"])
def summarize(x, verbose=False):
    note("summarize")
    c = center(x)
    return {"std": float(c.std()), "max": float(c.max()), "tags": {"a", "b"}}


@mapped.cache
def grid(n):
    note(f"grid {n}")
    return np.ones((n, 8))


@memory.cache
def square(i):
    note(f"square {i}")
    return i * i


if __name__ == "__main__":
    data = load(10_000)
    first = summarize(data, verbose=True)
    assert summarize(data) == first
    shelved = summarize.call_and_shelve(load(500, seed=1))
    assert shelved.get()["std"] > 0
    g = grid(20_000)
    assert g.sum() == 160_000 and not g.flags.writeable
    assert load.check_call_in_cache(10_000)
    squares = Parallel(n_jobs=2)(delayed(square)(i) for i in range(4))
    assert squares == [0, 1, 4, 9]
    print(json.dumps({"std": first["std"], "squares": squares}))
