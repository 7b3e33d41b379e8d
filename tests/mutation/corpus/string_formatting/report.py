"""String formatting in several styles."""

import textwrap

WIDTH = 24
TEMPLATE = "{name:<8}|{qty:>4}|{price:8.2f}"


def line(name, qty, price):
    return TEMPLATE.format(name=name, qty=qty, price=price)


def header(title):
    return title.center(WIDTH, "=")


def footer(total):
    return "TOTAL %10.3f" % total


def wrap(text):
    return textwrap.wrap(text, width=WIDTH // 2)
