"""Moving averages and totals."""

import fncache
from streams import evens_then_odds, running_total, windows


@fncache.memoize
def stats(xs):
    means = [sum(w) / len(w) for w in windows(xs)]
    return {"means": means, "totals": list(running_total(xs)), "order": list(evens_then_odds(xs))}


if __name__ == "__main__":
    from _oracle import report

    report(stats, [5, 2, 8, 3, 6, 1])
