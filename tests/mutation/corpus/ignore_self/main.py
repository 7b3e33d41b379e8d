"""A method memoized with ignore=["self"]: the instance's state is left out, its class's code is not."""

import fncache
from units import Unit


class Shape(Unit):
    sides = 4

    def __init__(self, name):
        self.name = name

    def perimeter(self, side):
        return self.sides * side

    @fncache.memoize(ignore=["self"])
    def describe(self, side):
        total = self.convert(self.perimeter(side))
        return f"{total} {self.suffix()}"


if __name__ == "__main__":
    from _oracle import report

    report(Shape.describe, Shape("square"), 3)
