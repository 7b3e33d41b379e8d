"""Closures and decorators in use."""

import fncache
from tools import area, compose, make_counter

OFFSET = 4
pipeline = compose(lambda x: x + OFFSET, lambda x: x * 2)


@fncache.memoize
def run(n):
    tick = make_counter(10, 5)
    ticks = [tick() for _ in range(n)]
    return {"area": area(2, n), "ticks": ticks, "piped": pipeline(n)}


if __name__ == "__main__":
    from _oracle import report

    report(run, 3)
