"""Recursive helpers in one result."""

import fncache
from algo import depth, fib, flatten, is_even


@fncache.memoize
def analyse(n, tree):
    return {"fib": fib(n), "depth": depth(tree), "even": is_even(n), "flat": flatten(tree)}


if __name__ == "__main__":
    from _oracle import report

    report(analyse, 9, (1, (2, 3), ((4,), 5)))
