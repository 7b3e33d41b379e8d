"""Functions benchmarked as importable module functions (the ``__main__`` twins live in runner)."""

from benchmarks import _state


def small(a: int, b: str) -> int:
    return a + len(b)


def full(n: int, size: int) -> object:
    import numpy as np

    return np.full(size, float(n))


def prepared(n: int) -> object:
    """The value the runner prepared (``n`` only makes a new key: a miss per call)."""
    return _state.VALUE
