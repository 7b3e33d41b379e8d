"""Describe a few items using enum methods."""

import fncache
from kinds import Color, Size, Unit


@fncache.memoize
def describe(items):
    out = []
    for color, size, length in items:
        c = Color(color)
        s = Size(size)
        out.append(f"{c}:{c.weight() + int(s)}:{Unit.CM}:{length * Unit.CM.factor}")
    return out


if __name__ == "__main__":
    from _oracle import report

    report(describe, [(1, 5, 30), (3, 12, 250), (2, 1, 7)])
