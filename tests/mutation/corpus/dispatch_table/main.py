"""Replay inventory operations."""

import fncache
from inventory import apply


@fncache.memoize
def replay(ops):
    stock, errors = apply(ops)
    return {"stock": sorted(stock.items()), "errors": errors}


if __name__ == "__main__":
    from _oracle import report

    report(replay, [("add", "bolt", 5), ("remove", "bolt", 2), ("remove", "nut", 1), ("scale", "bolt", 3)])
