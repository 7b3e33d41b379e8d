"""Aggregate revenue per region."""

import fncache
from cleaning import add_revenue, drop_bad_rows, make_sales

TOP = 2


@fncache.memoize
def revenue_by_region(n, discount=0.1):
    df = add_revenue(drop_bad_rows(make_sales(n)), discount=discount)
    summary = df.groupby("region", sort=True).agg(total=("revenue", "sum"), orders=("quantity", "count"))
    summary["share"] = summary["total"] / summary["total"].sum()
    return summary.sort_values("total", ascending=False).head(TOP).round(6)


if __name__ == "__main__":
    from _oracle import report

    report(revenue_by_region, 30)
