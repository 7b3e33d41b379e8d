"""A small pipeline of cached steps that call each other.

    python examples/pipeline.py                 # first run: every step computes
    python examples/pipeline.py                 # again: the final step hits, nothing computes
    python examples/pipeline.py --alpha 0.1     # only `fit` (and `evaluate`) compute again
    python examples/pipeline.py --window 10     # features, fit and evaluate compute; load hits

Needs numpy besides fncache (``python -m pip install numpy``).

Each step is memoized and calls the one before it, so a hit at the top skips everything below. The
store is ``$FNCACHE_DIR`` (else the default ``~/.cache/fncache``). The last lines say, per step,
``hit NAME``, ``miss NAME`` or ``skip NAME`` (not called: a step above it hit).
"""

from __future__ import annotations

import argparse
import time

try:
    import numpy as np
except ImportError:  # the one library this example needs besides fncache
    raise SystemExit("this example needs numpy: python -m pip install numpy") from None

import fncache


@fncache.memoize
def load(n: int, seed: int) -> np.ndarray:
    """A noisy random walk: stands for reading a large file."""
    time.sleep(0.3)
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=n))


@fncache.memoize
def features(n: int, seed: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Moving averages over a few windows; the target is the next value."""
    series = load(n, seed)
    time.sleep(0.3)
    cols = [np.convolve(series, np.ones(w) / w, mode="valid")[: n - window] for w in (2, window)]
    X = np.column_stack([series[window - 1 : n - 1][: n - window], *cols])
    return X, series[window:]


@fncache.memoize
def fit(n: int, seed: int, window: int, alpha: float) -> np.ndarray:
    """Ridge regression of the next value on the features."""
    X, y = features(n, seed, window)
    time.sleep(0.3)
    return np.linalg.solve(X.T @ X + alpha * np.eye(X.shape[1]), X.T @ y)


@fncache.memoize
def evaluate(n: int, seed: int, window: int, alpha: float) -> float:
    """Root mean squared error of the fitted model on its own data."""
    X, y = features(n, seed, window)
    coef = fit(n, seed, window, alpha)
    return float(np.sqrt(np.mean((X @ coef - y) ** 2)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="series length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", type=int, default=5, help="longest moving-average window")
    parser.add_argument("--alpha", type=float, default=1.0, help="ridge penalty")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    rmse = evaluate(args.n, args.seed, args.window, args.alpha)
    print(f"rmse {rmse:.4f} in {time.perf_counter() - start:.2f}s")
    for step in (evaluate, fit, features, load):
        info = step.cache_info()
        status = "miss" if info.misses else "hit" if info.hits else "skip"
        print(f"{status} {step.__name__}")


if __name__ == "__main__":
    main()
