"""A small pipeline of cached steps that call each other.

    python examples/pipeline.py                 # first run: every step computes
    python examples/pipeline.py                 # again: the final step hits, nothing computes
    python examples/pipeline.py --alpha 0.1     # only `fit` (and `evaluate`) compute again
    python examples/pipeline.py --window 10     # features, fit and evaluate compute; load hits
    python examples/pipeline.py --seed 1        # new data: every step computes

Each flag changes the score it prints (the error on held-out data). Needs numpy besides fncache
(``python -m pip install numpy``, or the ``examples`` extra: ``python -m pip install ".[examples]"``).

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
    """A noisy seasonal signal (period 50): stands for reading a large file."""
    time.sleep(0.3)
    rng = np.random.default_rng(seed)
    return 2.0 * np.sin(np.arange(n) * 2 * np.pi / 50) + rng.normal(scale=0.5, size=n)


@fncache.memoize
def features(n: int, seed: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Moving averages over a few windows; the target is the next value."""
    series = load(n, seed)
    time.sleep(0.3)
    cols = [np.convolve(series, np.ones(w) / w, mode="valid")[: n - window] for w in (2, window)]
    X = np.column_stack([series[window - 1 : n - 1][: n - window], *cols])
    return X, series[window:]


def split(X: np.ndarray, y: np.ndarray) -> tuple[int, int]:
    """Rows for training (the first 80%) and for testing (the rest)."""
    cut = int(0.8 * len(y))
    return cut, len(y) - cut


@fncache.memoize
def fit(n: int, seed: int, window: int, alpha: float) -> np.ndarray:
    """Ridge regression of the next value on the features (penalty ``alpha`` per training row)."""
    X, y = features(n, seed, window)
    train, _ = split(X, y)
    X, y = X[:train], y[:train]
    time.sleep(0.3)
    return np.linalg.solve(X.T @ X + alpha * train * np.eye(X.shape[1]), X.T @ y)


@fncache.memoize
def evaluate(n: int, seed: int, window: int, alpha: float) -> float:
    """Root mean squared error of the fitted model on the held-out rows."""
    X, y = features(n, seed, window)
    train, _ = split(X, y)
    coef = fit(n, seed, window, alpha)
    return float(np.sqrt(np.mean((X[train:] @ coef - y[train:]) ** 2)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="series length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", type=int, default=5, help="longest moving-average window")
    parser.add_argument("--alpha", type=float, default=1.0, help="ridge penalty")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    rmse = evaluate(args.n, args.seed, args.window, args.alpha)
    print(f"rmse {rmse:.4f} on held-out data (n={args.n}, seed={args.seed}, window={args.window}, "
          f"alpha={args.alpha}) in {time.perf_counter() - start:.2f}s")
    for step in (evaluate, fit, features, load):
        info = step.cache_info()
        status = "miss" if info.misses else "hit" if info.hits else "skip"
        print(f"{status} {step.__name__}")
    print(NEXT)


NEXT = """
Try next:
  python examples/pipeline.py --alpha 0.1   # only fit and evaluate compute again
  python examples/pipeline.py --window 10   # features, fit and evaluate compute; load hits
  edit the helper split() and run again     # fit and evaluate, which call it, compute again
  fncache ls                                # the cached steps, by function (fncache --help)"""


if __name__ == "__main__":
    main()
