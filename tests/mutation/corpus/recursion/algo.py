"""Recursive algorithms."""


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def depth(tree):
    if not isinstance(tree, tuple):
        return 0
    return 1 + max((depth(t) for t in tree), default=0)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


def flatten(tree):
    if isinstance(tree, tuple):
        out = []
        for t in tree:
            out.extend(flatten(t))
        return out
    return [tree]
