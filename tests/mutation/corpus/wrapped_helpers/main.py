"""Combine wrapped helpers reached through containers, an argument and a default."""

import fncache
from ops import OPS, PLUS_ONE, REGISTRY, offset, square


class Table:
    steps = {"square": square}


@fncache.memoize
def combine(xs, fn, fallbacks=(offset,)):
    out = []
    for x in xs:
        y = OPS["square"](x) + OPS["offset"](x)
        y += REGISTRY["halve"](x) + PLUS_ONE(x)
        y += fn(x) + fallbacks[0](x) + Table.steps["square"](x)
        out.append([REGISTRY["label"](x), y])
    return out


if __name__ == "__main__":
    from _oracle import report

    report(combine, [1, 2, 5], square)
