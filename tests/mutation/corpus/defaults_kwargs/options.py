"""Defaults, keyword-only arguments and **kwargs."""


def make_row(**fields):
    return list(fields)


def clamp(x, lo=0, hi=10, *, wrap=False):
    if wrap:
        return lo + (x - lo) % (hi - lo)
    return min(max(x, lo), hi)


def greet(name, greeting="hello", punct="!"):
    return greeting + ", " + name + punct
