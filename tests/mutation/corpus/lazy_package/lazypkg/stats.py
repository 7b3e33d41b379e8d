"""Statistics helpers."""

FACTOR = 2


def spread(values):
    return max(values) - min(values)


def scale(v):
    return v * FACTOR + 1
