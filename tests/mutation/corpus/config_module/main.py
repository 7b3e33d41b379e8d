"""Score a few records."""

import fncache
from scoring import verdict, weighted


@fncache.memoize
def score_all(records):
    return [(weighted(r), verdict(weighted(r))) for r in records]


if __name__ == "__main__":
    from _oracle import report

    report(score_all, [{"a": 2, "b": 4}, {"c": 3}, {"a": 1, "b": 1, "c": 1}])
