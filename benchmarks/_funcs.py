"""Functions benchmarked as importable module functions (the ``__main__`` twins live in runner)."""


def small(a: int, b: str) -> int:
    return a + len(b)


def full(n: int, size: int) -> object:
    import numpy as np

    return np.full(size, float(n))
