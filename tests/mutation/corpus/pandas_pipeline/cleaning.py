"""Cleaning steps of a small sales pipeline."""

import pandas as pd

MIN_QUANTITY = 1
REGIONS = ("north", "south", "east")


def make_sales(n):
    rows = []
    for i in range(n):
        rows.append({
            "region": REGIONS[i % len(REGIONS)],
            "quantity": (i * 7) % 11 - 2,
            "price": 1.5 + (i % 4) * 0.25,
        })
    return pd.DataFrame(rows)


def drop_bad_rows(df):
    df = df[df["quantity"] >= MIN_QUANTITY]
    return df.reset_index(drop=True)


def add_revenue(df, discount=0.1):
    df = df.copy()
    df["revenue"] = df["quantity"] * df["price"] * (1 - discount)
    return df
