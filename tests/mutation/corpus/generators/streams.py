"""Generators consumed inside the cached function."""


def windows(xs, size=3):
    for i in range(len(xs) - size + 1):
        yield xs[i:i + size]


def running_total(xs):
    total = 0
    for x in xs:
        total += x
        yield total


def evens_then_odds(xs):
    yield from (x for x in xs if x % 2 == 0)
    yield from (x for x in xs if x % 2 == 1)
