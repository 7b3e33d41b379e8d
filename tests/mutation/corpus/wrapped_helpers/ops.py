"""Helpers behind functools wrappers, reached through values: a dict, a registry, a partial."""

import functools

REGISTRY = {}


def register(fn):
    REGISTRY[fn.__name__] = fn
    return fn


@functools.cache
def square(x):
    return x * x


@functools.lru_cache(maxsize=32)
def offset(x, by=3):
    return x + by


@register
@functools.cache
def halve(x):
    return x / 2


@register
@functools.lru_cache
def label(x):
    return "n%d" % x


OPS = {"square": square, "offset": offset}
PLUS_ONE = functools.partial(offset, by=1)
