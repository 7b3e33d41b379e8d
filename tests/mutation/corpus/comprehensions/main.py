"""Comprehensions of every kind, in one module."""

import fncache

STOP = {"the", "a", "of"}


def vocabulary(docs):
    return sorted({w for d in docs for w in d.lower().split() if w not in STOP})


def index(docs):
    return {w: [i for i, d in enumerate(docs) if w in d.lower().split()] for w in vocabulary(docs)}


@fncache.memoize
def build_index(docs):
    idx = index(docs)
    lengths = [len(d.split()) for d in docs]
    long_docs = [i for i, n in enumerate(lengths) if n > 3]
    return {"index": idx, "long": long_docs, "total": sum(n for n in lengths)}


if __name__ == "__main__":
    from _oracle import report

    report(build_index, ["The cat of the house", "A dog", "cat and dog play"])
