"""What the Redis store reads back from the server, checked: it is untrusted.

Values are stored behind a one-byte tag (``\\x00`` inline, ``\\x01`` a JSON chunk manifest). A
manifest is at most 1 KiB of JSON with a 32-hex-digit token; its chunk count must match its size and
chunk size, at most 65536 chunks and 1 TiB, so a planted ``{"n": 10**12}`` costs one small read and
is then damage. Listings count stored lengths, never the size the metadata claims.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fncache.stores._base import MAX_JSON_BYTES, EntryInfo, entry_info, load_json, parse_meta

__all__ = ["is_error", "listed", "parse_manifest"]

_INLINE = b"\x00"
_CHUNKED = b"\x01"
# Redis refuses strings over 512 MB (proto-max-bulk-len); stay well below it with the tag byte.
_MAX_CHUNK = 512 * 2**20 - 4096
# A manifest is about 80 bytes of JSON; chunk counts and sizes are capped before anything is
# allocated or fetched.
_MAX_MANIFEST = 1024
_MAX_CHUNKS = 65536
_MAX_VALUE = 1 << 40
_TOKEN = _KEY = re.compile(r"[0-9a-f]{32}")


def parse_manifest(raw: bytes | None) -> tuple[str, int, int] | None:
    """``(token, n, size)`` of a chunked value's manifest; ``None`` if it is not a valid one.

    A manifest is untrusted: it must be small, a JSON object with a 32-hex-digit token, a size
    up to 1 TiB and a chunk count that the size and the chunk size allow (at most 65536).
    """
    if not raw or raw[:1] != _CHUNKED or len(raw) > _MAX_MANIFEST:
        return None
    try:
        manifest = load_json(raw[1:], max_bytes=_MAX_MANIFEST)
    except ValueError:
        return None
    if not isinstance(manifest, dict):
        return None
    token, n, size = manifest.get("token"), manifest.get("n"), manifest.get("size")
    chunk = manifest.get("chunk")  # absent in manifests of fncache 0.1
    if not (isinstance(token, str) and _TOKEN.fullmatch(token)):
        return None
    if type(n) is not int or type(size) is not int or not 0 < size <= _MAX_VALUE:
        return None
    if not 0 < n <= min(_MAX_CHUNKS, size) or n < -(-size // _MAX_CHUNK):
        return None
    if chunk is not None and (
        type(chunk) is not int or not 0 < chunk <= _MAX_CHUNK or n != -(-size // chunk)
    ):
        return None
    return token, n, size


def listed(key: str, row: list[Any], raw_meta: Any, manifest: Any, chunks: list[str],
            lengths: Iterator[int], t: float) -> EntryInfo:
    """One listed entry from what the round trips read (see RedisStore._describe)."""
    strlen, head, metalen, idle = row
    damaged = metalen > MAX_JSON_BYTES
    meta = parse_meta(raw_meta) if not damaged else None
    size = int(strlen) - 1
    if head == _CHUNKED:
        if manifest is None:
            damaged = True
        else:
            size = sum(next(lengths) for _ in chunks)
            damaged = damaged or size != manifest[2]
    elif head != _INLINE:
        damaged = True
    damaged = damaged or not _KEY.fullmatch(key)  # a name fncache never writes
    return entry_info(
        key, size, meta, damaged=damaged or meta is None,
        accessed=t - float(idle) if isinstance(idle, int) else None,
    )


def is_error(reply: Any) -> bool:
    """Whether a pipelined reply is an error (``raise_on_error=False`` returns them as values)."""
    return isinstance(reply, Exception)
