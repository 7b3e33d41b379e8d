# %% [markdown]
# # fncache in a notebook-style script
#
# The `# %%` markers make cells in VS Code, PyCharm and Jupytext: run them one by one, edit one,
# re-run. Cached steps come back instantly after a kernel restart (or, as a script, in a new
# process), and compute again only when their code, a helper they call, or their input changes.
#
# Needs numpy besides fncache (`python -m pip install numpy`, or the `examples` extra:
# `python -m pip install ".[examples]"`).
#
# Run it as a script: `python examples/notebook_style.py` (the store is `$FNCACHE_DIR`, else the
# default `~/.cache/fncache`). Run it twice: the second run prints `hit` for every cached step.

# %%
import time

try:
    import numpy as np
except ImportError:  # the one library this example needs besides fncache
    raise SystemExit("this example needs numpy: python -m pip install numpy") from None

import fncache

# %% Load data (cheap here; in real life a file or a query)
rng = np.random.default_rng(0)
X = rng.normal(size=(5_000, 8))
y = X @ np.linspace(-1.0, 1.0, 8) + 0.1 * rng.normal(size=5_000)


# %% Features: a helper and a cached step that uses it
def standardize(a):
    """Edit this helper and `make_features` computes again; edit a comment and it does not."""
    return (a - a.mean(axis=0)) / a.std(axis=0)


@fncache.memoize
def make_features(X, degree=2):
    time.sleep(0.5)  # stands for real work
    Z = standardize(X)
    return np.hstack([Z**d for d in range(1, degree + 1)])


F = make_features(X)
print("features:", F.shape)


# %% Model: a cached fit, keyed by the feature matrix's content and alpha
@fncache.memoize
def fit_ridge(F, y, alpha=1.0):
    time.sleep(0.5)
    A = F.T @ F + alpha * np.eye(F.shape[1])
    return np.linalg.solve(A, F.T @ y)


coef = fit_ridge(F, y, alpha=1.0)
rmse = float(np.sqrt(np.mean((F @ coef - y) ** 2)))
print(f"rmse: {rmse:.4f}")


# %% What came from the cache: one line per cached step, "hit NAME" or "miss NAME"
for step in (make_features, fit_ridge):
    info = step.cache_info()
    print(f"{'miss' if info.misses else 'hit'} {step.__name__}  {info}")


# %% Try next
print("""
Try next:
  edit standardize() above and re-run: make_features and fit_ridge compute again
  edit only a comment and re-run: every step hits
  make_features.explain(X): why a call hits or misses (see docs/explain.md)
  fncache ls: the cached steps, by function""")
