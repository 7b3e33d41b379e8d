"""The S3 store's cached metadata listing (``prefix/s/metas``): which function each value is filed
under, so that ``summary()`` (``fncache info``, ``ls``) lists the values and not their metadata too.

A summary needs two things per entry: its size and time, which only the values' listing gives (sizes
are listed sizes, never a size a record claims), and its function and expiry, which the metadata
names under ``f/GROUP/`` give. The second listing is as long as the first. This object keeps what
it found, per value: the value's listed size and modification time, and the metadata names listed
for it. A later summary lists the values and takes each value's metadata names from here *only if
the value is listed with the same size and time*. A value that is not in the object or was
rewritten since (an entry added, or replaced) is probed instead: its user metadata says where its
metadata object is, and a HEAD says whether it is there (two requests per value, 64 at a time), and
the object is written again; past a few such values (256, or a fiftieth of the values) the summary
lists the metadata names instead. A value that is gone is simply not listed, and expiry is in the
names kept, judged when read. So a summary answered from here gives the rows the full listing gives,
for entries written and removed through fncache.

What it cannot see, since it is only consulted for values it already knows and a probe looks
where the value points: a metadata object removed or added while its value stays (a delete that
failed half-way, a name planted beside a value), or an entry removed and written again within the
second its value was written (the same listed size and time; keys name their content, so only its
expiry can differ). Such an entry is shown as it was until a summary lists the metadata names
again (many new values, or a damaged object). A value listed without any metadata is kept that
way only once it is older than :data:`SETTLE` seconds (its metadata is written right after the
value; younger, it may be on its way), so a summary cannot freeze an entry that is being written
as function-less.

The bucket is untrusted and so is this object: it is bounded in size (compressed and not), and
anything in it that is not exactly the shape written here (names of the layout, keys of 32 hex
digits, sizes and times of the right types, metadata names that parse back to the same group, key
and expiry) makes the whole object ignored, as if it were missing. A planted object that passes can
move entries between functions in ``info`` and ``ls``; it cannot change the number of entries,
their sizes or times, which are listed, nor reach a value: it names metadata, which is only read
to rank entries. ``prune`` decides which entries to remove from the full listing, never from here.
"""

from __future__ import annotations

import json
import math
import zlib
from typing import Any

from fncache.stores._meta import load_json
from fncache.stores._s3_layout import GROUP, KEY, meta_name, parse_meta_name

__all__ = ["MAX_SNAPSHOT_BYTES", "SETTLE", "Refs", "decode", "encode"]

#: The object is read up to this many bytes, and decompressed up to :data:`_MAX_PLAIN`; larger is
#: damage (ignored; the next summary lists the metadata and writes a new one).
MAX_SNAPSHOT_BYTES = 256 * 2**20
_MAX_PLAIN = 4 * MAX_SNAPSHOT_BYTES
#: Seconds after which a value listed without metadata is taken to have none (see the module).
SETTLE = 600.0
_FORMAT = 1
_MAGIC = b"fncache-s3-metas\n"

#: ``{key: [(group, expires, metadata name, metadata size), ...]}``: the metadata names listed for
#: each value (:meth:`fncache.stores._s3_listing.S3Listing._refs`).
Refs = dict[str, list[tuple[str, int | None, str, int]]]


def encode(values: dict[str, tuple[int, float | None]], refs: Refs, t: float) -> bytes:
    """The object for a listing at time ``t``: every value with a known time, with its metadata
    names (none only if it is older than :data:`SETTLE`)."""
    groups: dict[str, int] = {}
    rows: dict[str, list[Any]] = {}
    for key, (size, created) in values.items():
        found = refs.get(key, [])
        if created is None or (not found and created > t - SETTLE):
            continue  # no time to check it by, or its metadata may still be on its way
        out = []
        for group, expires, name, meta_size in found:
            ref: list[Any] = [groups.setdefault(group, len(groups)), expires, meta_size]
            if name != meta_name(key, group, expires):
                ref.append(name)  # a listed spelling other than fncache's own (leading zeros)
            out.append(ref)
        rows[key] = [size, created, out]
    body = json.dumps({"format": _FORMAT, "groups": list(groups), "values": rows},
                      separators=(",", ":")).encode()
    return _MAGIC + zlib.compress(body, 1)


def decode(raw: bytes | None) -> dict[str, tuple[int, float, list[Any]]] | None:
    """``{key: (size, modified, refs)}`` from the object, or ``None`` if it is missing, too large
    or anything but the exact shape :func:`encode` writes."""
    if not raw or not raw.startswith(_MAGIC) or len(raw) > MAX_SNAPSHOT_BYTES:
        return None
    try:
        inflate = zlib.decompressobj()
        body = inflate.decompress(memoryview(raw)[len(_MAGIC):], _MAX_PLAIN)
        if inflate.unconsumed_tail or not inflate.eof:
            return None  # over the bound, or truncated
        data = load_json(body, max_bytes=_MAX_PLAIN)
    except (zlib.error, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return None
    groups, rows = data.get("groups"), data.get("values")
    if not isinstance(groups, list) or not isinstance(rows, dict) or \
            not all(isinstance(g, str) and GROUP.fullmatch(g) for g in groups):
        return None
    out = {}
    for key, row in rows.items():
        checked = _row(key, row, groups)
        if checked is None:
            return None
        out[key] = checked
    return out


def _row(key: str, row: Any, groups: list[str]) -> tuple[int, float, list[Any]] | None:
    if not KEY.fullmatch(key) or not isinstance(row, list) or len(row) != 3:
        return None
    size, created, found = row
    if not _count(size) or isinstance(created, bool) or not isinstance(created, (int, float)) \
            or not math.isfinite(created) or not isinstance(found, list):
        return None
    refs = []
    for ref in found:
        if not isinstance(ref, list) or len(ref) not in (3, 4):
            return None
        index, expires, meta_size = ref[:3]
        if not _count(index) or index >= len(groups) or not _count(meta_size) or \
                not (expires is None or _count(expires)):
            return None
        group = groups[index]
        name = ref[3] if len(ref) == 4 else meta_name(key, group, expires)
        if not isinstance(name, str) or parse_meta_name(name) != (group, key, expires):
            return None
        refs.append((group, expires, name, meta_size))
    return size, float(created), refs


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0
