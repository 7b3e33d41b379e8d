"""Unsound mutants the oracle expects today, by cause: empty this table as the fixes land.

Each entry names a corpus program, a file (or ``"*"``) and the qualified name of the function (or
class, or ``"<module>"``, or ``"*"``) whose mutations may keep their key although the output changes,
and the cause: an open item of the key-soundness issue. An entry with ``path`` and ``function`` both
``"*"`` also covers a program whose original cannot be keyed at all. The full run lists entries that
no longer match anything, so a fixed hole is noticed and its entry removed.
"""

from __future__ import annotations

from typing import NamedTuple


class KnownHole(NamedTuple):
    program: str
    path: str
    function: str
    cause: str


KNOWN_HOLES: list[KnownHole] = [
]
