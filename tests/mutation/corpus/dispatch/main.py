"""Render a document."""

import fncache
from render import render


@fncache.memoize
def document(value):
    return render(value).splitlines()


if __name__ == "__main__":
    from _oracle import report

    report(document, [1, "a", [2, "b", 3.5], None])
