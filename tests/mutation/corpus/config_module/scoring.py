"""Scoring driven by the settings module."""

import config
from config import NAMES, WEIGHTS


def weighted(counts):
    return sum(WEIGHTS[k] * v for k, v in counts.items())


def verdict(total):
    lo, hi = config.LIMITS
    total = min(max(total, lo), hi)
    if config.DEBUG:
        return f"debug:{total}"
    return NAMES[0] if total >= config.THRESHOLD else NAMES[1]
