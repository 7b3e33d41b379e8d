"""Statistics of a paragraph."""

import fncache
from words import bigrams, tokens, top_words

TEXT = "the quick fox and the quick dog and the lazy cat saw the quick fox"


@fncache.memoize
def text_summary(text):
    return {"top": top_words(text), "bigrams": bigrams(tokens(text)), "n": len(tokens(text))}


if __name__ == "__main__":
    from _oracle import report

    report(text_summary, TEXT)
