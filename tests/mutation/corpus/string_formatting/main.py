"""An invoice as text."""

import fncache
from report import footer, header, line, wrap


@fncache.memoize
def invoice(items, note):
    lines = [header("Invoice")]
    lines += [line(n, q, p) for n, q, p in items]
    lines.append(footer(sum(q * p for _, q, p in items)))
    return lines + wrap(note)


if __name__ == "__main__":
    from _oracle import report

    report(invoice, [("apple", 3, 0.5), ("pear", 12, 1.25)], "Thank you for shopping with us today")
