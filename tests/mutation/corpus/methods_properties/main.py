"""Summarize a ledger."""

import fncache
from ledger import Ledger


@fncache.memoize
def summarize(text):
    ledger = Ledger.from_text(text)
    return {"statement": ledger.statement(), "largest": ledger.largest(), "balance": ledger.balance}


if __name__ == "__main__":
    from _oracle import report

    report(summarize, "100,-20.5,3.25,-70")
