"""What a frame's integrity rests on: its checksum (xxh3-128) and its signature (HMAC-SHA256).

Both cover the entry's key, the frame's header and its body, in that order, so a frame moved to
another key, or a header edited, fails as surely as a flipped bit of the body. The layout they are
written in is :mod:`fncache._codec`'s.
"""

from __future__ import annotations

import hmac
from typing import Any

import xxhash

from fncache._errors import IntegrityError

__all__ = ["check_mac", "checksum", "checksums", "mac"]


def mac(secret: bytes, key: bytes, header: Any, body: list[Any]) -> bytes:
    """The frame's signature: HMAC-SHA256 under ``secret`` of the key, the header and the body."""
    m = hmac.new(secret, key, "sha256")
    m.update(header)
    for part in body:
        m.update(part)
    return m.digest()


def check_mac(signature: bytes, secret: bytes | tuple[bytes, ...], key: bytes, header: Any,
               body: list[Any]) -> None:
    """Raise :class:`IntegrityError` unless ``signature`` is the one under ``secret`` (or under
    any of several: a rotation, the signing secret first, then older ones still accepted)."""
    for one in (secret,) if isinstance(secret, bytes) else secret:
        if hmac.compare_digest(signature, mac(one, key, header, body)):
            return
    raise IntegrityError("entry signature does not match (tampered, or another secret)")


def checksum(key: bytes, header: Any, body: list[Any]) -> bytes:
    """The frame's checksum: xxh3-128 of the key, the header and the body, in that order."""
    h = xxhash.xxh3_128(key)
    h.update(header)
    for part in body:
        h.update(part)
    return h.digest()


def checksums(key: bytes, header: Any, head: Any, rest: list[Any]) -> tuple[bytes, bytes]:
    """(full checksum, head checksum): one stream, read once where ``head`` ends."""
    h = xxhash.xxh3_128(key)
    h.update(header)
    h.update(head)
    at_head = h.digest()
    for part in rest:
        h.update(part)
    return h.digest(), at_head
