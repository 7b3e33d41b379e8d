"""The key stream's marker, in a module of its own because its name is part of the key format.

Every token in a key's canonical stream is pickled as ``(_Token, (kind, payload))`` and ``_Token`` is
pickled by reference, so the bytes ``fncache._hasher`` / ``_Token`` are written into every key that
holds a token (functions, classes, arrays, tables...). Moving or renaming this module or the function
changes those keys: that is a key-format change, to be made only with a schema bump (see
``fncache.values.hasher``'s ``SCHEMA``) and called out in CHANGES.md. The module imports nothing of
fncache, so any part of the package can use the marker without an import cycle.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Token"]


def _Token(*args: Any) -> Any:  # noqa: N802 - reads as a constructor in reduce tuples
    """Stands in the stream for a value that is hashed by something other than its pickle.

    Pickled as ``(_Token, (kind, payload))``: the kind keeps tokens of different origins apart, and
    no real object reduces to this private function, so a token never equals ordinary data. Never
    called: nothing the hasher writes is unpickled.
    """
    raise TypeError("fncache hash streams are not meant to be unpickled")


#: The marker under its public name (it pickles as ``fncache._hasher._Token`` all the same).
Token = _Token
