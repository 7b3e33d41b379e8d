"""The sources of fingerprinted functions, kept in the store so that ``explain`` can show a diff.

When an entry is stored, the source text of every user function its key covers (the memoized
function, its helpers and methods at any depth of its walk) is kept beside it, content-addressed:

* a source is kept by the store beside its entries, never as one (:meth:`Store.put_source`: files
  under ``sources/`` for a disk store), at a keyed BLAKE2b-128 of its text (keyed with the store's
  secret when there is one): one copy per version of a function, whatever the number of entries
  that use it;
* an entry's metadata maps each function's label to its source's key (``"sources"``), and each global
  it read to how it reads to a person (``"shown"``: a short repr, else type, size and digest);
* a source is read back only if its text hashes to its key: a planted or damaged source is never
  shown (and nothing in it is ever run or unpickled: it is text);
* a source over :data:`MAX_SOURCE` bytes is not kept (explain then names the change without a diff);
* ``fncache clear`` and ``prune`` remove the sources no remaining entry refers to (:func:`unused`);
* disk, memory and tiered stores (in their nearest tier) keep sources; on Redis and S3 alone
  ``explain`` names a changed function without its lines.

Keeping sources never fails a call: a store error here is logged at DEBUG and the entry is stored
without them.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import logging
import types
import weakref
from collections.abc import Iterable
from typing import Any

__all__ = ["MAX_SOURCE", "address", "diff_lines", "keep", "read", "signing_key", "source_of",
           "unused"]

log = logging.getLogger("fncache")

#: Sources longer than this (bytes of UTF-8) are not kept: a source is stored as raw text, which the
#: disk store keeps inline in its database below its 32 KiB value-file threshold.
MAX_SOURCE = 16 * 1024
#: At most this many diff lines are shown per function.
MAX_DIFF_LINES = 40

_texts: weakref.WeakKeyDictionary[types.CodeType, str | None] = weakref.WeakKeyDictionary()


def source_of(fn: Any) -> str | None:
    """The source text of a function (``None``: no source file, or longer than :data:`MAX_SOURCE`)."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    if code in _texts:
        return _texts[code]
    try:
        text: str | None = inspect.getsource(fn)
    except (OSError, TypeError):
        text = None
    if text is not None and len(text.encode("utf-8", "surrogatepass")) > MAX_SOURCE:
        text = None
    _texts[code] = text
    return text


def signing_key(secret: Any) -> bytes | None:
    """The key sources are addressed with: the store's secret (the first one, where several are
    accepted), or None."""
    if isinstance(secret, (list, tuple)):
        secret = secret[0] if secret else None
    return secret if isinstance(secret, bytes) else None


def address(text: str, secret: bytes | None) -> str:
    """The key a source is kept under: keyed BLAKE2b-128 of its text, 32 hex characters."""
    key = hashlib.blake2b(secret, digest_size=32).digest() if secret else b""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16, key=key).hexdigest()


def keep(store: Any, functions: Iterable[tuple[str, Any]], secret: bytes | None,
         known: set[str]) -> dict[str, str]:
    """Keep the source of each ``(label, function)`` in ``store``; ``{label: source address}``.

    ``known`` holds the addresses this process already kept in ``store``: a source is written once
    per process, not per entry. Nothing where the store keeps no sources."""
    if not store.keeps_sources:
        return {}
    out: dict[str, str] = {}
    for label, fn in functions:
        text = source_of(fn)
        if text is None:
            continue
        key = address(text, secret)
        if key not in known:
            try:
                store.put_source(key, text.encode("utf-8", "surrogatepass"))
            except Exception as e:  # a source is a courtesy: the entry is stored without it
                log.debug("fncache: source of %s not kept (%s: %s)", label, type(e).__name__, e)
                continue
            known.add(key)
        out[label] = key
    return out


def read(store: Any, key: Any, secret: bytes | None) -> str | None:
    """The source kept at ``key`` if its text hashes to ``key`` (else ``None``: planted, damaged,
    removed or never kept)."""
    if not isinstance(key, str) or len(key) != 32:
        return None
    try:
        data = store.get_source(key)
    except Exception as e:
        log.debug("fncache: source %s unreadable (%s: %s)", key, type(e).__name__, e)
        return None
    if data is None or len(data) > MAX_SOURCE:
        return None
    try:
        text = bytes(data).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return text if address(text, secret) == key else None


def diff_lines(old: str, new: str) -> tuple[str, ...]:
    """The changed lines between two sources as ``-``/``+`` lines (one line of context, no
    headers), at most :data:`MAX_DIFF_LINES`."""
    body = [line for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1)
            if not line.startswith(("---", "+++", "@@"))]
    if len(body) > MAX_DIFF_LINES:
        body = body[:MAX_DIFF_LINES] + [f"  ... ({len(body) - MAX_DIFF_LINES} more lines)"]
    return tuple(body)


def unused(store: Any) -> list[str] | None:
    """The kept sources no entry of ``store`` refers to, or ``None`` when its listing does not carry
    the metadata needed to tell."""
    kept = store.source_sizes()
    if not kept:
        return []
    referenced: set[str] = set()
    for e in store.listing():
        if e.damaged or not e.meta:
            continue  # metadata lost or unreadable: refers to nothing
        refs = _sources_of(e.meta)
        if refs is None:
            return None
        referenced |= refs
    return [a for a in kept if a not in referenced]


def _sources_of(meta: dict[str, Any]) -> set[str] | None:
    """The sources an entry's metadata refers to; None for metadata that names functions only
    (a listing that cannot tell which sources are in use)."""
    if "components" not in meta and "version" not in meta:
        return None
    refs = meta.get("sources")
    return {v for v in refs.values() if isinstance(v, str)} if isinstance(refs, dict) else set()
