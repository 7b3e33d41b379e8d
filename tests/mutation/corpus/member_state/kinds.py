"""Enum members that hold more than their value: what ``__new__`` stores beside ``_value_``."""

import enum


class Planet(enum.Enum):
    MERCURY = (1, 3.303e23, 2.4397e6)
    VENUS = (2, 4.869e24, 6.0518e6)
    EARTH = (3, 5.976e24, 6.37814e6)

    def __new__(cls, idx, mass, radius):
        obj = object.__new__(cls)
        obj._value_ = idx
        obj.mass = mass
        obj.radius = radius
        return obj

    def gravity(self):
        return 6.673e-11 * self.mass / (self.radius * self.radius)


class Op(enum.Enum):
    ADD = ("add", lambda a, b: a + b)
    MUL = ("mul", lambda a, b: a * b)

    def __new__(cls, name, fn):
        obj = object.__new__(cls)
        obj._value_ = name
        obj.fn = fn
        return obj
