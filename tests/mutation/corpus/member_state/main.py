"""A table of each planet's surface gravity, combined with each operation."""

import fncache
from kinds import Op, Planet


@fncache.memoize
def table(ops):
    out = []
    for planet in Planet:
        g = round(planet.gravity(), 2)
        out.append((planet.name, g, [Op(op).fn(g, 2) for op in ops]))
    return out


if __name__ == "__main__":
    from _oracle import report

    report(table, ["add", "mul"])
