"""Geometry with dataclasses."""

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    x: float
    y: float = 0.0

    def distance(self, other):
        return math.hypot(self.x - other.x, self.y - other.y)


@dataclass
class Polygon:
    name: str
    points: list = field(default_factory=list)
    closed: bool = True

    def __post_init__(self):
        self.name = self.name.strip().title()

    def perimeter(self):
        pts = self.points + ([self.points[0]] if self.closed else [])
        return sum(a.distance(b) for a, b in zip(pts, pts[1:]))
