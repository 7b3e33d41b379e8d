"""Decorators and closures."""

import functools


def scaled(factor):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return fn(*args) * factor
        return wrapper
    return decorate


def make_counter(start=0, step=1):
    count = start

    def counter():
        nonlocal count
        count += step
        return count
    return counter


def compose(*fns):
    def composed(x):
        for fn in reversed(fns):
            x = fn(x)
        return x
    return composed


@scaled(3)
def area(w, h):
    return w * h
