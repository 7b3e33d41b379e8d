"""Use a package that imports lazily."""

import fncache
from lazypkg.core import normalize, summarize


@fncache.memoize
def analyse(values):
    return {"summary": summarize(values), "normalized": normalize(values)}


if __name__ == "__main__":
    from _oracle import report

    report(analyse, [4, 9, 1, 7])
