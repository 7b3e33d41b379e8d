"""Formatting helpers."""


def as_text(spread, n):
    return "spread=%d over %d" % (spread, n)
