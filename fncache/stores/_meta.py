"""Entry metadata and store records as JSON: written compact and deterministic, read back bounded.

Metadata is a small JSON object beside each entry (function, Python version, sizes, times, the
key's parts for ``explain``); manifests, lease and usage records are JSON too. Written by
:func:`encode_meta` (sorted keys, no spaces, never over :data:`META_LIMIT`); everything read from a
store is untrusted and goes through :func:`load_json`, which refuses documents too large or nested
too deeply before parsing, and :func:`parse_meta`, which never raises.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["LONG_TEXT", "META_LIMIT", "decode_meta", "encode_meta", "load_json", "parse_meta"]

#: Metadata, manifests and lease records are small; anything larger is damage, never parsed.
MAX_JSON_BYTES = 1 << 20
#: fncache writes JSON nested a few levels deep; deeper input is damage (and could exhaust the stack).
MAX_JSON_DEPTH = 16
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")



def load_json(raw: bytes | bytearray | str | None, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Parse JSON read from a store, or raise ``ValueError``: bounded in size and nesting depth.

    Store data is untrusted: a planted document nested a hundred thousand levels deep would raise
    ``RecursionError`` in :func:`json.loads`, a huge one would take its time and memory. Both are
    refused before parsing (depth is counted over the brackets outside strings).
    """
    if raw is None:
        raise ValueError("no data")
    data = raw.encode() if isinstance(raw, str) else bytes(raw)
    if len(data) > max_bytes:
        raise ValueError(f"{len(data)} bytes of JSON, more than the {max_bytes} allowed")
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for c in brackets if len(brackets) > MAX_JSON_DEPTH else b"":
        depth += 1 if c in b"[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested {deepest} levels deep, more than {MAX_JSON_DEPTH}")
    try:
        return json.loads(data)
    except (RecursionError, UnicodeDecodeError) as e:  # counted above; belt and braces
        raise ValueError(str(e)) from e


# The largest metadata every store reads back as sound (the disk store's limit; Redis and S3 read
# up to 1 MiB): larger metadata is shortened when written, never written to be read as damaged.
META_LIMIT = 64 * 1024
#: Texts of metadata that :func:`encode_meta` may shorten are longer than this; shorter ones are
#: always written as they are.
LONG_TEXT = 1024


def encode_meta(meta: dict[str, Any]) -> bytes:
    """Metadata as compact, deterministic JSON bytes, at most :data:`META_LIMIT` of them.

    Metadata that would be larger (a function name of 70,000 characters) is shortened: each long
    text to 1,024 characters and an ellipsis, then, if that is not enough, to its numbers and
    short texts only. The entry itself is unchanged.
    """
    raw = _json(meta)
    if len(raw) <= META_LIMIT:
        return raw
    short = {k: v[:LONG_TEXT] + "\u2026" if isinstance(v, str) and len(v) > LONG_TEXT else v
             for k, v in meta.items()}
    raw = _json(short)
    if len(raw) <= META_LIMIT:
        return raw
    return _json({k: v for k, v in short.items() if not isinstance(v, (dict, list, tuple))})


def _json(meta: dict[str, Any]) -> bytes:
    """Standard JSON (what SQLite's JSON functions and other languages read): a number that is
    not finite is written as its text, as values JSON has no form for are (``default=str``)."""
    try:
        return "".join(_ENCODE(meta, 0)).encode()
    except ValueError:
        return _json(_json_numbers(meta))


def _make_encoder() -> Any:
    """``json.dumps(x, sort_keys=True, separators=(",", ":"), default=str, allow_nan=False)`` as
    one function made once: CPython's C encoder where there is one (``json.dumps`` makes an
    encoder, and that encoder makes a C one, for every call: a third of the time of encoding an
    entry's metadata). No check for cycles: metadata is a tree that fncache builds."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has it
        return json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str,
                                allow_nan=False, check_circular=False).iterencode
    # (markers, default, encoder, indent, key separator, item separator, sort_keys, skipkeys,
    # allow_nan), as JSONEncoder.iterencode passes them
    return make(None, str, encoder.encode_basestring_ascii, None, ":", ",", True, False, False)


_ENCODE = _make_encoder()


def _json_numbers(x: Any) -> Any:
    """``x`` with each float that is not finite (NaN, infinity) replaced by its text."""
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, dict):
        return {k: _json_numbers(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_numbers(v) for v in x]
    return x


def decode_meta(raw: bytes | str | None) -> dict[str, Any]:
    """Inverse of :func:`encode_meta`; damaged metadata reads as ``{}`` rather than failing a listing."""
    meta = parse_meta(raw)
    return {} if meta is None else meta


def parse_meta(raw: bytes | bytearray | str | None) -> dict[str, Any] | None:
    """Metadata read from a store: ``{}`` for none, ``None`` for damaged metadata.

    Damaged means unparsable, too large or too deep (see :func:`load_json`), or not a JSON object;
    it never raises, so one bad record cannot fail a listing.
    """
    if not raw:
        return {}
    try:
        value = load_json(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
