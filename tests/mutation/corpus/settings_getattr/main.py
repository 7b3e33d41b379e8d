"""Compute with settings read through a module __getattr__."""

import fncache
import settings


def combine(values):
    if settings.MODE == "sum":
        return sum(values)
    return max(values)


@fncache.memoize
def compute(values):
    return combine([v * settings.SCALE + settings.OFFSET for v in values])


if __name__ == "__main__":
    from _oracle import report

    report(compute, [1, 2, 3])
