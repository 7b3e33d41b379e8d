"""The S3 store's object names and the records it reads back from a listing, checked: the bucket
is untrusted.

Names under ``prefix/`` (see :mod:`fncache.stores.s3` for the whole layout):

* ``v2/ab/KEY``: a value. ``KEY`` is 32 hex digits and ``ab`` its first two.
* ``f/GROUP/KEY`` or ``f/GROUP/KEY~EXPIRES``: the entry's metadata, under its function's *group*,
  so one function's entries are one prefix listing; ``EXPIRES`` (whole POSIX seconds, rounded up)
  says from when the entry reads as missing, so a listing knows it without reading anything.
* ``u/GROUP``: the usage records of the group's entries (JSON ``{"KEY": [last_use, uses]}``).
* ``s/metas``: the metadata names as last listed, for ``summary()``
  (:mod:`fncache.stores._s3_snapshot`).

A group is the function id (``module:qualname``) percent-encoded over ``[A-Za-z0-9._-]`` (a leading
dot encoded too, so never ``.`` or ``..``), or ``~`` + its xxh3-128 hex digest when that would be
longer than 400 characters, or ``~`` alone for entries that name no function. A group read from a
listing names a function only if encoding that function gives the group back exactly; a hashed
group's name is taken from one of its metadata records and checked the same way.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from typing import Any

from fncache.stores._base import parse_use
from fncache.stores._meta import load_json

__all__ = [
    "EXPIRES_META",
    "GROUP",
    "GROUP_META",
    "KEY",
    "S3Paths",
    "encode_usage",
    "expires_at",
    "function_of",
    "group_of",
    "meta_name",
    "parse_meta_name",
    "parse_usage",
    "value_name",
]

#: User metadata of a value object: its function's group, and its expiry (``repr`` of the POSIX
#: time), from which its metadata object's name follows (:meth:`S3Paths.meta_of`).
GROUP_META = "fncache-function"
EXPIRES_META = "fncache-expires"

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_GROUP_MAX = 400
# Never ``.`` or ``..`` (a leading dot is always encoded): no listed group can name a directory
# step on servers that map object names to paths.
GROUP = re.compile(r"~|~[0-9a-f]{32}|(?:[A-Za-z0-9_-]|%[0-9A-F]{2})(?:[A-Za-z0-9._-]|%[0-9A-F]{2}){0,399}")
KEY = re.compile(r"[0-9a-f]{32}")
_META = re.compile(r"([0-9a-f]{32})(?:~([0-9]{1,12}))?")
#: Usage records of one function: at most this many entries (the most recently used are kept) and
#: this many bytes of JSON; a larger object is damage, read as empty and then rewritten.
MAX_USAGE_RECORDS = 100_000
MAX_USAGE_BYTES = 8 * 2**20


def group_of(function: str) -> str:
    """The group (one name segment, ASCII, at most 400 characters) of a function id."""
    if not function:
        return "~"
    raw = function.encode("utf-8", "surrogatepass")
    out = "".join(chr(b) if b in _SAFE and not (i == 0 and b == 0x2E) else f"%{b:02X}"
                  for i, b in enumerate(raw))
    if len(out) > _GROUP_MAX:
        import xxhash

        return "~" + xxhash.xxh3_128_hexdigest(raw)
    return out


def function_of(group: str) -> str | None:
    """The function a listed group names: ``""`` for none, ``None`` for a hashed group (whose name
    must be read) or a name fncache never writes."""
    if group == "~":
        return ""
    if group.startswith("~") or not GROUP.fullmatch(group):
        return None
    try:
        name = urllib.parse.unquote_to_bytes(group).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return name if group_of(name) == group else None


def expires_at(metadata: dict[str, str] | None) -> float | None:
    """The expiry time in a value's user metadata (``None``: none, or not a finite number)."""
    raw = (metadata or {}).get(EXPIRES_META)
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def value_name(key: str) -> str:
    """``ab/KEY``: where a value lives under ``v2/``."""
    return f"{key[:2]}/{key}"


def meta_name(key: str, group: str, expires: float | None) -> str:
    """``GROUP/KEY[~EXPIRES]``: where an entry's metadata lives under ``f/``."""
    return f"{group}/{key}" if expires is None else f"{group}/{key}~{math.ceil(expires)}"


def parse_meta_name(name: str) -> tuple[str, str, int | None] | None:
    """``(group, key, expires)`` of a listed ``GROUP/KEY[~EXPIRES]``, ``None`` if fncache never
    writes such a name."""
    group, _, rest = name.partition("/")
    found = _META.fullmatch(rest)
    if found is None or not GROUP.fullmatch(group):
        return None
    return group, found[1], None if found[2] is None else int(found[2])


def parse_usage(raw: Any, t: float) -> dict[str, tuple[float, int]]:
    """The usage records of one group, read from the bucket: bounded in size and depth, each record
    checked (:func:`fncache.stores._base.parse_use`); anything else is dropped, never an error."""
    try:
        data = load_json(raw, max_bytes=MAX_USAGE_BYTES)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    out = {}
    for key, record in data.items():
        if KEY.fullmatch(key) and isinstance(record, list) and len(record) == 2:
            use = parse_use(record[0], record[1], t)
            if use is not None:
                out[key] = use
    return out


def encode_usage(records: dict[str, tuple[float, int]]) -> bytes:
    """Usage records as compact JSON, the most recently used :data:`MAX_USAGE_RECORDS` only."""
    import json

    if len(records) > MAX_USAGE_RECORDS:
        keep = sorted(records.items(), key=lambda kv: kv[1][0], reverse=True)[:MAX_USAGE_RECORDS]
        records = dict(keep)
    return json.dumps({k: [last, n] for k, (last, n) in records.items()},
                      separators=(",", ":")).encode()


class S3Paths:
    """The paths (``bucket/key``) of one store's objects under ``s3://bucket/prefix``: the only
    spelling of the layout, shared by the store (single entries) and its listing
    (:mod:`fncache.stores._s3_listing`)."""

    __slots__ = ("base", "bucket", "locks", "metas", "snapshot", "usage", "values")

    def __init__(self, bucket: str, prefix: str) -> None:
        self.bucket = bucket
        #: ``bucket/prefix``, under which everything lies
        self.base = f"{bucket}/{prefix}" if prefix else bucket
        self.values = f"{self.base}/v2"
        self.metas = f"{self.base}/f"
        self.usage = f"{self.base}/u"
        self.locks = f"{self.base}/locks"
        #: the cached listing of the metadata names (:mod:`fncache.stores._s3_snapshot`)
        self.snapshot = f"{self.base}/s/metas"

    def value(self, key: str) -> str:
        """Where the value of ``key`` lives."""
        return f"{self.values}/{value_name(key)}"

    def meta(self, key: str, group: str, expires: float | None) -> str:
        """Where the metadata of ``key`` lives, filed under ``group``."""
        return f"{self.metas}/{meta_name(key, group, expires)}"

    def meta_of(self, key: str, metadata: dict[str, str] | None) -> str | None:
        """Where the value at ``key`` says its metadata lives, from the value's user metadata
        (``None`` if that names no valid group: a value fncache did not write)."""
        group = (metadata or {}).get(GROUP_META)
        if not isinstance(group, str) or not GROUP.fullmatch(group):
            return None
        return self.meta(key, group, expires_at(metadata))

    def usage_of(self, group: str) -> str:
        """The usage records of ``group``'s entries."""
        return f"{self.usage}/{group}"

    def lock(self, key: str) -> str:
        """The lease of ``key``'s lock."""
        return f"{self.locks}/{key}"

    @staticmethod
    def split(path: str) -> tuple[str, str]:
        """``(bucket, object key)`` of a path."""
        bucket, _, key = path.partition("/")
        return bucket, key
