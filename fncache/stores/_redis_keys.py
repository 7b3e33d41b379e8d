"""The Redis store's key layout: one object that names every key the store writes under its prefix.

The table is in :mod:`fncache.stores.redis`; this class is its only spelling, shared by the store
(single entries) and its index (:mod:`fncache.stores._redis_index`, many entries), so neither
builds a name the other does not know.
"""

from __future__ import annotations

from fncache.stores._redis_records import parse_manifest

__all__ = ["MAX_FUNCTION", "RedisKeys", "glob_escape"]

# Function ids longer than this get no index (their entries list under no function).
MAX_FUNCTION = 1024


def glob_escape(text: str) -> str:
    """``text`` with Redis glob metacharacters escaped, for ``SCAN MATCH``."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisKeys:
    """The names of a store's keys under ``prefix`` (``"fncache:"`` by default)."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def value(self, key: str) -> str:
        """``PREFIXv:K``: the tagged value."""
        return f"{self.prefix}v:{key}"

    def meta(self, key: str) -> str:
        """``PREFIXm:K``: the metadata record."""
        return f"{self.prefix}m:{key}"

    def index(self, function: str) -> str:
        """``PREFIXf:FUNCTION``: the function's index hash."""
        return f"{self.prefix}f:{function}"

    def totals(self, function: str) -> str:
        """``PREFIXs:FUNCTION``: the function's totals (a cache of its index, for ``summary``)."""
        return f"{self.prefix}s:{function}"

    def lock(self, key: str) -> str:
        """``PREFIXl:K``: a lock lease."""
        return f"{self.prefix}l:{key}"

    def kind(self, letter: str) -> str:
        """The common start of every key of one kind (``"v"``, ``"f"``, ``"s"``...)."""
        return f"{self.prefix}{letter}:"

    def pattern(self, letter: str = "") -> str:
        """A ``SCAN MATCH`` pattern for the keys of one kind (all the store's keys for ``""``)."""
        return glob_escape(self.kind(letter) if letter else self.prefix) + "*"

    def chunks(self, key: str, token: str, n: int) -> list[str]:
        """``PREFIXc:{K}:TOKEN:I`` for ``I`` below ``n``: a chunked value's chunks."""
        return [f"{self.prefix}c:{{{key}}}:{token}:{i}" for i in range(n)]

    def manifest_chunks(self, key: str, raw: bytes | None) -> list[str]:
        """The chunk keys a stored value refers to (``[]`` for inline or invalid values)."""
        manifest = parse_manifest(raw)
        return [] if manifest is None else self.chunks(key, manifest[0], manifest[1])

    @staticmethod
    def indexed(function: object) -> bool:
        """Whether entries of ``function`` (a metadata field, untrusted) get an index."""
        return isinstance(function, str) and 0 < len(function) <= MAX_FUNCTION
