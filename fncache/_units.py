"""Durations and byte sizes written by people: ``"30m"``, ``"10MB"``, ``"1.5GiB"``, ``"10M"``.

One parser of each for the command line and ``fncache.Memory.reduce_size`` (joblib's ``"10M"``).
Sizes use binary units (``K`` = 1024).
"""

from __future__ import annotations

import re

__all__ = ["parse_duration", "parse_size"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZES = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


def parse_duration(text: str) -> float:
    """``"90"``, ``"45s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"`` -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if not m:
        raise ValueError(f"expected a duration like 45s, 30m, 12h, 7d or 2w, got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_size(text: str) -> int:
    """``"512"``, ``"10MB"``, ``"1.5GiB"`` -> bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _SIZES:
        raise ValueError(f"expected a size like 512, 10MB or 2GB, got {text!r}")
    return int(float(m.group(1)) * _SIZES[m.group(2)])
