"""The S3 store's dealings with its s3fs client that are not requests of the layout: one GET that
keeps the user metadata (s3fs's ``cat_file`` drops it), and dropping a client inherited over
``fork`` without closing it.
"""

from __future__ import annotations

import weakref
from typing import Any

from fncache.stores._s3_config import SECONDS_PER_BYTE

__all__ = ["ABANDONED", "abandon", "get_object"]

# Clients inherited over fork: never used or closed in this process, only kept from collection.
ABANDONED: list[Any] = []


def abandon(fs: Any) -> None:
    """Drop a client inherited from the parent process over ``fork`` without closing it.

    s3fs closes a client's HTTP session when it is garbage-collected, on the client's event loop.
    In a forked child that loop's thread does not exist: the close would stall for a second and
    log "attached to a different loop" errors, and its sockets belong to the parent anyway. So the
    close is cancelled (``weakref.finalize`` entries are found in CPython's registry), and the
    client is kept referenced, since aiohttp warns about sessions collected unclosed.
    """
    ABANDONED.append(fs)
    registry = getattr(weakref.finalize, "_registry", None)
    for finalizer in list(registry or ()):
        info = finalizer.peek()
        if info is not None and info[0] is fs:
            finalizer.detach()


async def get_object(
    fs: Any, bucket: str, key: str, deadline: float
) -> tuple[dict[str, str], bytes]:
    """One GET returning user metadata and body (``cat_file`` drops the metadata).

    The request must answer within ``deadline`` seconds, and the body then arrive within
    ``deadline`` plus 1 s per MiB of its announced length (a frozen server cannot hold it longer).
    """
    import asyncio

    resp = await asyncio.wait_for(fs._call_s3("get_object", Bucket=bucket, Key=key), deadline)
    body = resp["Body"]
    try:
        length = resp.get("ContentLength")
        extra = length * SECONDS_PER_BYTE if isinstance(length, int) and length > 0 else 0.0
        data = await asyncio.wait_for(body.read(), deadline + extra)
    finally:
        body.close()
    return resp.get("Metadata") or {}, data
