"""Defaults and keyword order in one result."""

import fncache
from options import clamp, greet, make_row


@fncache.memoize
def build(xs, name="world"):
    return {
        "clamped": [clamp(x) for x in xs],
        "wrapped": [clamp(x, 1, 5, wrap=True) for x in xs],
        "columns": make_row(id=1, name=name, score=0.5),
        "greeting": greet(name, punct="?"),
    }


if __name__ == "__main__":
    from _oracle import report

    report(build, [-3, 4, 12, 7])
