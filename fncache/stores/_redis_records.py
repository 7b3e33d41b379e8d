"""What the Redis store reads back from the server, checked: it is untrusted.

Values are stored behind a one-byte tag (``\\x00`` inline, ``\\x01`` a JSON chunk manifest). A
manifest is at most 1 KiB of JSON with a 32-hex-digit token; its chunk count must match its size and
chunk size, at most 65536 chunks and 1 TiB, so a planted ``{"n": 10**12}`` costs one small read and
is then damage. Listings count stored lengths, never the size the metadata claims.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from fncache.stores._base import parse_use
from fncache.stores._meta import load_json

__all__ = [
    "CHUNKED",
    "INLINE",
    "KEY",
    "MAX_CHUNK",
    "MAX_MANIFEST",
    "is_error",
    "number",
    "parse_index",
    "parse_manifest",
    "stored_size",
]

#: The tag byte before a value: the bytes follow (inline), or a JSON chunk manifest.
INLINE = b"\x00"
CHUNKED = b"\x01"
# Redis refuses strings over 512 MB (proto-max-bulk-len); stay well below it with the tag byte.
MAX_CHUNK = 512 * 2**20 - 4096
# A manifest is about 80 bytes of JSON; chunk counts and sizes are capped before anything is
# allocated or fetched.
MAX_MANIFEST = 1024
_MAX_CHUNKS = 65536
_MAX_VALUE = 1 << 40
_TOKEN = KEY = re.compile(r"[0-9a-f]{32}")


def parse_manifest(raw: bytes | None) -> tuple[str, int, int] | None:
    """``(token, n, size)`` of a chunked value's manifest; ``None`` if it is not a valid one.

    A manifest is untrusted: it must be small, a JSON object with a 32-hex-digit token, a size
    up to 1 TiB and a chunk count that the size and the chunk size allow (at most 65536).
    """
    manifest = _manifest_object(raw)
    if manifest is None:
        return None
    token, n, size = manifest.get("token"), manifest.get("n"), manifest.get("size")
    chunk = manifest.get("chunk")  # absent in manifests of fncache 0.1
    if not (isinstance(token, str) and _TOKEN.fullmatch(token)):
        return None
    if type(n) is not int or type(size) is not int or not _valid_counts(n, size, chunk):
        return None
    return token, n, size


def _manifest_object(raw: bytes | None) -> dict[str, Any] | None:
    """The JSON object of a small manifest (marked ``CHUNKED``), or ``None``."""
    if not raw or raw[:1] != CHUNKED or len(raw) > MAX_MANIFEST:
        return None
    try:
        manifest = load_json(raw[1:], max_bytes=MAX_MANIFEST)
    except ValueError:
        return None
    return manifest if isinstance(manifest, dict) else None


def _valid_counts(n: int, size: int, chunk: Any) -> bool:
    """Whether a size up to 1 TiB, ``n`` chunks and the chunk size (if given) agree."""
    if not 0 < size <= _MAX_VALUE:
        return False
    if not 0 < n <= min(_MAX_CHUNKS, size) or n < -(-size // MAX_CHUNK):
        return False
    return chunk is None or (
        type(chunk) is int and 0 < chunk <= MAX_CHUNK and n == -(-size // chunk)
    )


def stored_size(strlen: int, head: bytes, manifest: tuple[str, int, int] | None,
                lengths: list[int]) -> tuple[int, bool]:
    """``(size, damaged)`` of one listed value from its stored length and first byte, and for a
    chunked one its manifest and its chunks' stored lengths: always what is stored, never a
    size a manifest or metadata claims."""
    if head == INLINE:
        return int(strlen) - 1, False
    if head == CHUNKED and manifest is not None:
        size = sum(lengths)
        return size, size != manifest[2]
    return int(strlen), True


#: Index fields: ``KEY`` (creation time), ``KEY:u`` (last use), ``KEY:n`` (number of uses).
_FIELD = re.compile(r"([0-9a-f]{32})(:[un])?")


def number(raw: Any) -> float | int | None:
    """A number field of an index as fncache writes it (short ASCII digits), else ``None``."""
    if not isinstance(raw, str) or not 0 < len(raw) <= 32 or not raw.isascii():
        return None
    try:
        return int(raw) if raw.isdigit() else float(raw)
    except ValueError:
        return None


def parse_index(fields: Iterable[tuple[str, str]], t: float) -> dict[str, list[Any]]:
    """One function's index hash, read back: ``{KEY: [created, last_use, uses]}`` for each key
    with a valid ``KEY`` field (``None`` where a part is missing or invalid). Field names and
    values are untrusted: anything but short ASCII numbers in the layout's field names is dropped,
    and usage records go through :func:`~fncache.stores._base.parse_use`."""
    created: dict[str, Any] = {}
    last: dict[str, Any] = {}
    count: dict[str, Any] = {}
    parts = {None: created, ":u": last, ":n": count}
    for name, value in fields:
        found = _FIELD.fullmatch(name) if isinstance(name, str) else None
        if found is not None:
            parts[found[2]][found[1]] = number(value)
    out = {}
    for key, when in created.items():
        use = parse_use(last.get(key), count.get(key), t) if key in last else None
        born = parse_use(when, 0, t)
        out[key] = [None if born is None else born[0], *(use or (None, None))]
    return out


def is_error(reply: Any) -> bool:
    """Whether a pipelined reply is an error (``raise_on_error=False`` returns them as values)."""
    return isinstance(reply, Exception)
