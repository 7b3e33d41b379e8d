"""Bills for two plans."""

import fncache
from pricing import Plan, ProPlan


@fncache.memoize
def bills(usages):
    out = {}
    for plan in (Plan, ProPlan):
        out[plan.describe()] = [plan(u, unit).cost() for u, unit in usages]
    return out


if __name__ == "__main__":
    from _oracle import report

    report(bills, [(50, "gb"), (2, "tb"), (1500, "gb")])
