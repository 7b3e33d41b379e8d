"""Word statistics with collections and re."""

import collections
import re

TOKEN = re.compile(r"[a-z']+")
MIN_LEN = 3


def tokens(text):
    return [t for t in TOKEN.findall(text.lower()) if len(t) >= MIN_LEN]


def top_words(text, n=3):
    counts = collections.Counter(tokens(text))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def bigrams(words):
    return collections.Counter(zip(words, words[1:])).most_common(2)
