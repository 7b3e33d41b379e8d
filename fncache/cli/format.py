"""Text for the ``fncache`` command: human sizes and ages, escaped store fields, suggestions for
mistyped names, and the progress counter of long operations (on a terminal only)."""

from __future__ import annotations

import difflib
import sys
import time
from collections.abc import Iterable
from typing import Any

__all__ = [
    "CONTROL", "CONTROL_AND_NEWLINE", "DAMAGED", "closest", "did_you_mean", "did_you_mean_function",
    "entries_word", "human_age", "human_size", "one_line", "printable", "progress", "pythons_text",
    "version_order",
]


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit} ago"
    return f"{seconds:.0f}s ago"


# What ``ls`` shows for entries whose metadata is unreadable or of the wrong types.
DAMAGED = "(damaged)"


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The valid name nearest to a mistyped one, if any is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the nearest valid name, or ``""``."""
    close = closest(word, choices)
    return f"; did you mean {close!r}?" if close else ""


def entries_word(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def progress(items: Iterable[Any], label: str, total: int | None = None) -> Iterable[Any]:
    """Yield items; on a terminal, show a counter on stderr every few hundred (quiet when piped)."""
    if not sys.stderr.isatty():
        yield from items
        return
    n = 0
    last = 0.0
    for item in items:
        n += 1
        now = time.monotonic()
        if now - last > 0.2:
            last = now
            of = f"/{total}" if total else ""
            print(f"\r{label}: {n}{of}", end="", file=sys.stderr, flush=True)
        yield item
    print(f"\r{label}: {n} done" + " " * 10, file=sys.stderr)


def did_you_mean_function(name: str, names: list[str]) -> str:
    """The nearest of ``names`` to ``name``, compared whole and by qualname alone."""
    close = closest(name, names)
    if close is None:
        by_qualname = {n.rpartition(":")[2]: n for n in names}
        near = closest(name.rpartition(":")[2], by_qualname)
        close = by_qualname[near] if near is not None else None
    return f"; did you mean {close!r}?" if close else ""


# Control characters but newline: function names come from a store that others may write, and a
# planted name must not move the cursor, retitle or clear the terminal of whoever lists the store.
CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c != 0x0A}


CONTROL_AND_NEWLINE = {**CONTROL, 0x0A: "\\x0a"}


def one_line(text: str) -> str:
    """A field read from the store (a function name) on one line: every control character,
    newline included, as ``\\xNN``, so that a planted name cannot forge lines of a listing."""
    return text.translate(CONTROL_AND_NEWLINE)


def printable(text: str) -> str:
    """``text`` with control characters (escape sequences among them) shown as ``\\xNN``."""
    return text.translate(CONTROL)


def version_order(version: str) -> tuple[int, ...]:
    parts = version.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else (-1,)


def pythons_text(pythons: dict[str, int]) -> str:
    if not pythons:
        return "-"
    text = ", ".join(f"{v} ({entries_word(n)})" for v, n in pythons.items())
    if len(pythons) > 1 and "?" not in pythons:
        text += f"; remove an old version's with `fncache clear --python {next(reversed(pythons))}`"
    return text
