"""Perimeters of polygons."""

import fncache
from shapes import Point, Polygon


@fncache.memoize
def perimeters(specs):
    polys = [Polygon(name, [Point(x, y) for x, y in pts]) for name, pts in specs]
    return {p.name: round(p.perimeter(), 9) for p in polys}


if __name__ == "__main__":
    from _oracle import report

    report(perimeters, [(" square ", [(0, 0), (0, 2), (2, 2), (2, 0)]), ("tri", [(0, 0), (3, 0), (0, 4)])])
