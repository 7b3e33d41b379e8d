"""Records as NamedTuples and slotted classes; a serializer with singledispatchmethod."""

import functools
from typing import NamedTuple


class Reading(NamedTuple):
    sensor: str
    value: float
    unit: str = "C"

    def in_kelvin(self):
        return self.value + 273.15 if self.unit == "C" else self.value


class Window:
    __slots__ = ("start", "size")

    def __init__(self, start, size=2):
        self.start = start
        self.size = size

    def select(self, readings):
        return readings[self.start:self.start + self.size]


class Serializer:
    precision = 2

    @functools.singledispatchmethod
    def dump(self, value):
        return str(value)

    @dump.register
    def _(self, value: float):
        return f"{value:.{self.precision}f}"

    @dump.register
    def _(self, value: list):
        return "[" + ", ".join(self.dump(v) for v in value) + "]"
