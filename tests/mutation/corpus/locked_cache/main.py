"""Convert a basket's total."""

import fncache
from lookup import Basket, rate


@fncache.memoize
def convert(items, currencies):
    basket = Basket(items)
    return {c: round(basket.total * rate(c), 6) for c in currencies}


if __name__ == "__main__":
    from _oracle import report

    report(convert, [(2.5, 2), (10.0, 1)], ["USD", "GBP"])
