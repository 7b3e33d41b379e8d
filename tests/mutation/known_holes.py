"""Unsound mutants the oracle expects today, by cause: empty this table as the fixes land.

Each entry names a corpus program, a file (or ``"*"``), the qualified name of the function (or
class, or ``"<module>"`` for module-level assignments, or ``"*"``) whose mutations may keep their key
although the output changes, optionally a text the mutated line must contain (to single out one
module-level assignment), and the cause: an open item of the key-soundness issue. An entry with
``path`` and ``function`` both ``"*"`` also covers a program whose original cannot be keyed at all.
The full run fails on entries that no longer match anything, so a fixed hole's entry is removed.
"""

from __future__ import annotations

from typing import NamedTuple


class KnownHole(NamedTuple):
    program: str
    path: str
    function: str
    cause: str
    where: str = ""   # a text of the original line the mutation is on; "" for any line


KNOWN_HOLES: list[KnownHole] = []
