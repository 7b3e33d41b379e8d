"""The Redis store's operations over many entries: listings, per-function indexes, usage records
and batch deletes.

They live apart from :mod:`fncache.stores.redis` (which owns the connection, the key names and the
single-entry reads and writes) because they are a subsystem of their own: ``SCAN`` of value and
index names, the index hashes ``fncache:f:FUNCTION`` (field ``K`` = creation time, ``K:u`` = last
use, ``K:n`` = number of uses), the Lua scripts that read sizes and index pages and write usage
records in one round trip each, and pipelined deletes of 1000 keys at a time. Each function takes
the :class:`~fncache.stores.redis.RedisStore` it works for and goes through its ``_guard``,
``_script`` and key names, so errors, connections and the layout stay the store's.

Everything read here is untrusted (see :mod:`fncache.stores._redis_records` for the checks): sizes
are stored lengths, index fields are checked against the layout, and a ``SCAN`` never blocks the
server the way ``KEYS`` would; entries written meanwhile may or may not be seen.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fncache.stores._base import MAX_JSON_BYTES, EntryInfo, Use, now, parse_meta
from fncache.stores._redis_records import (
    _CHUNKED,
    _INLINE,
    _KEY,
    _MAX_MANIFEST,
    is_error,
    parse_index,
    parse_manifest,
    stored_size,
)

if TYPE_CHECKING:
    from fncache.stores.redis import RedisStore

__all__ = [
    "INDEX_PAGE",
    "MAX_FUNCTION",
    "SIZES",
    "UNINDEX",
    "USE",
    "clear_function",
    "delete_many",
    "glob_escape",
    "record_use",
    "scan",
]

_SCAN_BATCH = 1000
_LIST_BATCH = 1000
# Function ids longer than this get no index (their entries list under no function).
MAX_FUNCTION = 1024

# ARGV: the value key prefix, then the keys (32 hex digits each) as one string: one argument
# packs and sends far faster than thousands. For each: its stored length * 4 + its kind (0 inline, 1
# chunked, 2 anything else), or -1 if it is gone, -2 if it is not a string (a planted hash, list);
# as one JSON array, which parses far faster than as many integer replies.
SIZES = """
local out = {}
local keys = ARGV[2]
for i = 1, #keys, 32 do
  local name = ARGV[1] .. string.sub(keys, i, i + 31)
  local n = redis.pcall('STRLEN', name)
  if type(n) == 'table' then
    out[#out + 1] = -2
  elseif n == 0 then
    out[#out + 1] = -1
  else
    local head = string.byte(redis.call('GETRANGE', name, 0, 0))
    local kind = 2
    if head == 0 then kind = 0 elseif head == 1 then kind = 1 end
    out[#out + 1] = n * 4 + kind
  end
end
return cjson.encode(out)
"""
# KEYS: an index. ARGV: an HSCAN cursor. One page of the index, as JSON [cursor, [field, value...]]:
# a JSON string parses in C, a long reply of Redis strings in Python (the bulk of a listing's time).
INDEX_PAGE = """
return cjson.encode(redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', 1000))
"""
_GONE = -1

# KEYS: an index. ARGV: the value key prefix, then keys whose fields go if their value is gone.
UNINDEX = """
local n = 0
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. ARGV[i]) == 0 then
    n = n + redis.call('HDEL', KEYS[1], ARGV[i], ARGV[i] .. ':u', ARGV[i] .. ':n')
  end
end
return n
"""
# KEYS: an index. ARGV: (key, last use, uses) triples. Only keys still indexed get a record; the
# last use only moves forward; a planted non-number reads as 0 rather than failing the script.
USE = """
for i = 1, #ARGV, 3 do
  local k = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], k) == 1 then
    local last = tonumber(redis.call('HGET', KEYS[1], k .. ':u') or '') or 0
    if tonumber(ARGV[i + 1]) > last then redis.call('HSET', KEYS[1], k .. ':u', ARGV[i + 1]) end
    local n = tonumber(redis.call('HGET', KEYS[1], k .. ':n') or '') or 0
    if n ~= n or n < 0 or n > 2^52 then n = 0 end
    redis.call('HSET', KEYS[1], k .. ':n', string.format('%d', math.floor(n) + tonumber(ARGV[i + 2])))
  end
end
return 0
"""


def scan(store: RedisStore, with_meta: bool) -> Iterator[tuple[EntryInfo, dict[str, Any] | None]]:
    """Listed entries, and their metadata when ``with_meta`` (``None`` for a damaged entry).

    Everything read here is untrusted: sizes are stored lengths (of the value, or the sum of a
    chunked value's chunks), never a size the metadata or manifest claims; index names and
    fields are checked against the layout (:func:`parse_index`); a key listed in two
    functions' indexes, a value of another type than fncache writes, or metadata of the wrong
    types, too large or naming another function than its index marks the entry damaged.
    """
    t = now()
    with store._guard("list"):
        values, indexes = list_names(store)
        index: dict[str, tuple[str, list[Any]]] = {}
        ambiguous: set[str] = set()
        stale: dict[str, list[str]] = {}
        for function, name in indexes:
            for key, record in read_index(store, name, t).items():
                if key not in values:
                    stale.setdefault(name, []).append(key)
                elif key in index:
                    ambiguous.add(key)
                else:
                    index[key] = (function, record)
        keys = list(values)
        for i in range(0, len(keys), _LIST_BATCH):
            batch = keys[i : i + _LIST_BATCH]
            for key, size, damaged, meta in describe(store, batch, with_meta):
                function, (created, last, uses) = index.get(key, ("", [None, None, None]))
                damaged = damaged or key in ambiguous
                if with_meta and meta is not None and function \
                        and meta.get("function") != function:
                    damaged = True
                # Every part is checked already (parse_index, the stored length): no second
                # pass through entry_info, which costs a listing a fifth of its time.
                info = EntryInfo(key, size, 0.0 if damaged else created or 0.0, last,
                                 {} if damaged or not function else {"function": function},
                                 damaged, uses)
                yield info, (None if damaged or meta is None else meta)
        drop_stale(store, stale)


def read_index(store: RedisStore, name: str, t: float) -> dict[str, list[Any]]:
    """One function's index (``HSCAN``), checked; a key of another type is no index."""
    import redis

    try:
        return parse_index(index_fields(store, name), t)
    except redis.exceptions.ResponseError as e:
        if "WRONGTYPE" not in str(e):
            raise
        return {}


def index_fields(store: RedisStore, name: str) -> Iterator[tuple[str, str]]:
    """``(field, value)`` pairs of an index, a page at a time (see ``INDEX_PAGE``); a page
    that is not valid JSON (planted bytes that are not UTF-8) is read again as plain
    ``HSCAN`` replies."""
    cursor = "0"
    while True:
        raw = store._script("index_page")(keys=[name], args=[cursor])
        try:
            page = json.loads(raw)
            cursor, flat = str(page[0]), page[1]
            pairs = list(zip(flat[::2], flat[1::2], strict=True))
        except (ValueError, TypeError, IndexError, KeyError, AttributeError):
            next_cursor, fields = store.client.hscan(name, cursor, count=1000)
            cursor = str(int(next_cursor))
            pairs = [(f.decode("utf-8", "replace"), v.decode("utf-8", "replace"))
                     for f, v in fields.items()]
        yield from pairs
        if cursor == "0":
            return


def list_names(store: RedisStore) -> tuple[dict[str, None], list[tuple[str, str]]]:
    """Value keys (an ordered set) and ``(function, name)`` of each index, by ``SCAN``. Names
    that are not UTF-8 or not of the layout are skipped (``clear`` removes
    them)."""
    values: dict[str, None] = {}
    indexes = []
    # Two scans matching the value and index names: the server filters, and the metadata and
    # chunk names (half the keys or more) never cross the wire.
    for kind in ("v:", "f:"):
        start = store.prefix + kind
        for raw in store.client.scan_iter(match=glob_escape(start) + "*", count=_SCAN_BATCH):
            try:
                name = raw.decode() if isinstance(raw, bytes) else raw
            except UnicodeDecodeError:
                continue
            if kind == "v:":
                values[name[len(start):]] = None
            elif 0 < len(name) - len(start) <= MAX_FUNCTION:
                indexes.append((name[len(start):], name))
    return values, indexes


def describe(store: RedisStore, keys: list[str], with_meta: bool
             ) -> Iterator[tuple[str, int, bool, dict[str, Any] | None]]:
    """``(key, size, damaged, metadata)`` for a batch of value keys; a key removed since the
    scan is left out.

    One script call gives each value's stored length and kind (its first byte) as one
    integer, so a batch costs one round trip and one small reply, not two commands per entry;
    chunked values' manifests and chunk lengths, and with ``with_meta`` the metadata records,
    take pipelined round trips of their own.
    """
    hexkeys = [k for k in keys if _KEY.fullmatch(k)]
    codes = dict(zip(hexkeys, json_list(store._script("sizes")(
        args=[store._value_key(""), "".join(hexkeys)])), strict=True)) if hexkeys else {}
    if len(hexkeys) < len(keys):
        # Names fncache never writes (planted): damage, with their stored length.
        other = [k for k in keys if k not in codes]
        pipe = store.client.pipeline(transaction=False)
        for k in other:
            pipe.strlen(store._value_key(k))
        for k, n in zip(other, pipe.execute(raise_on_error=False), strict=True):
            codes[k] = -2 if is_error(n) else -1 if not n else n * 4 + 2
    kinds = [(int(c) // 4, int(c) % 4) if isinstance(c, int) and c >= 0 else (c, -1)
             for c in (codes[k] for k in keys)]
    manifests: dict[int, Any] = {}
    metas: dict[int, Any] = {}
    wanted = [i for i, (strlen, tag) in enumerate(kinds) if tag == 1 and strlen <= _MAX_MANIFEST]
    metalens: list[Any] = []
    if with_meta:
        pipe = store.client.pipeline(transaction=False)
        for k in keys:
            pipe.strlen(store._meta_key(k))
        metalens = pipe.execute(raise_on_error=False)
    small = [i for i, n in enumerate(metalens) if not is_error(n) and 0 < n <= MAX_JSON_BYTES]
    if wanted or small:
        pipe = store.client.pipeline(transaction=False)
        for i in wanted:
            pipe.get(store._value_key(keys[i]))
        for i in small:
            pipe.get(store._meta_key(keys[i]))
        replies = [None if is_error(r) else r for r in pipe.execute(raise_on_error=False)]
        manifests = {i: parse_manifest(r or None) for i, r in zip(wanted, replies, strict=False)}
        metas = dict(zip(small, replies[len(wanted):], strict=True))
    chunk_names = {i: store._chunk_keys(keys[i], m[0], m[1])
                   for i, m in manifests.items() if m is not None}
    flat = [c for names in chunk_names.values() for c in names]
    lengths = iter(store._chunk_lengths(flat) if flat else [])
    chunk_lengths = {i: [next(lengths) for _ in names] for i, names in chunk_names.items()}
    for i, key in enumerate(keys):
        strlen, tag = kinds[i]
        if tag < 0:
            if strlen == _GONE:
                continue  # removed since the scan saw it
            yield key, 0, True, None  # not a string (planted): damage
            continue
        head = _INLINE if tag == 0 else _CHUNKED if tag == 1 else b"?"
        size, damaged = stored_size(strlen, head, manifests.get(i), chunk_lengths.get(i, []))
        damaged = damaged or not _KEY.fullmatch(key)  # a name fncache never writes
        meta = None
        if with_meta:
            metalen = metalens[i]
            meta = None if is_error(metalen) or metalen > MAX_JSON_BYTES \
                else parse_meta(metas.get(i))
            damaged = damaged or meta is None
        yield key, size, damaged, meta


def drop_stale(store: RedisStore, stale: dict[str, list[str]]) -> None:
    """Remove index fields of entries that are gone (expired, deleted by hand), each only if
    its value is still missing (one script per index: a concurrent add keeps its field)."""
    if not stale:
        return
    pipe = store.client.pipeline(transaction=False)
    for name, keys in stale.items():
        store._script("unindex")(keys=[name], args=[store._value_key(""), *keys], client=pipe)
    pipe.execute(raise_on_error=False)


def record_use(store: RedisStore, uses: list[Use]) -> None:
    """Add uses to the index of each function: one script per function, all in one pipelined
    round trip; fields are set only for keys still indexed (a gone entry gets no record)."""
    by_function: dict[str, list[Any]] = {}
    for use in uses:
        if use.function and _KEY.fullmatch(use.key):
            by_function.setdefault(use.function, []).extend(
                [use.key, repr(float(use.last)), int(use.times)])
    if not by_function:
        return
    with store._guard("usage"):
        pipe = store.client.pipeline(transaction=False)
        for function, args in by_function.items():
            store._script("use")(keys=[store._index_key(function)], args=args, client=pipe)
        pipe.execute()


def delete_many(store: RedisStore, keys: list[str]) -> int:
    """:meth:`RedisStore.delete` for many keys, 1000 at a time in three pipelined round trips per batch;
    the number of entries there were."""
    n = 0
    for i in range(0, len(keys), _LIST_BATCH):
        n += delete_batch(store, keys[i : i + _LIST_BATCH])
    return n


def delete_batch(store: RedisStore, keys: list[str]) -> int:
    names = [(store._value_key(k), store._meta_key(k)) for k in keys]
    with store._guard("delete"):
        pipe = store.client.pipeline(transaction=False)
        for vkey, mkey in names:
            pipe.getrange(vkey, 0, 0)
            pipe.strlen(vkey)
            pipe.strlen(mkey)
        first = pipe.execute(raise_on_error=False)
        rows = [first[3 * i : 3 * i + 3] for i in range(len(keys))]
        pipe = store.client.pipeline(transaction=False)
        for (vkey, mkey), (head, strlen, metalen) in zip(names, rows, strict=True):
            chunked = head == _CHUNKED and not is_error(strlen) and strlen <= _MAX_MANIFEST
            pipe.get(vkey) if chunked else pipe.echo(b"")
            small = not is_error(metalen) and 0 < metalen <= MAX_JSON_BYTES
            pipe.get(mkey) if small else pipe.echo(b"")
        second = [None if is_error(r) else r for r in pipe.execute(raise_on_error=False)]
        pipe = store.client.pipeline(transaction=False)
        n = 0
        for i, (key, (vkey, mkey)) in enumerate(zip(keys, names, strict=True)):
            strlen = rows[i][1]
            n += bool(is_error(strlen) or strlen)
            raw, raw_meta = second[2 * i], second[2 * i + 1]
            pipe.unlink(vkey, mkey, *store._manifest_chunks(key, raw or None))
            function = (parse_meta(raw_meta) or {}).get("function") if raw_meta else None
            if isinstance(function, str) and function:
                pipe.hdel(store._index_key(function), key, f"{key}:u", f"{key}:n")
        pipe.execute(raise_on_error=False)
    return n


def clear_function(store: RedisStore, function: str) -> int:
    """Remove the entries in ``function``'s index (``HSCAN``), their chunks and the index;
    returns the number of entries removed. Not atomic: entries added meanwhile may survive."""
    name = store._index_key(function)
    n = 0
    with store._guard("clear"):
        keys = list(read_index(store, name, now()))
        for i in range(0, len(keys), _LIST_BATCH):
            batch = keys[i : i + _LIST_BATCH]
            pipe = store.client.pipeline(transaction=False)
            for k in batch:
                pipe.strlen(store._value_key(k))
                pipe.getrange(store._value_key(k), 0, 0)
            replies = pipe.execute(raise_on_error=False)
            pipe = store.client.pipeline(transaction=False)
            for j, k in enumerate(batch):
                strlen, head = replies[2 * j], replies[2 * j + 1]
                if head == _CHUNKED and not is_error(strlen) and strlen <= _MAX_MANIFEST:
                    pipe.get(store._value_key(k))
                else:
                    pipe.echo(b"")
            raws = pipe.execute(raise_on_error=False)
            doomed = []
            for j, k in enumerate(batch):
                strlen = replies[2 * j]
                n += bool(is_error(strlen) or strlen)
                raw = None if is_error(raws[j]) else raws[j]
                doomed += [store._value_key(k), store._meta_key(k),
                           *store._manifest_chunks(k, raw or None)]
            store.client.unlink(*doomed)
        store.client.unlink(name)
    return n


def json_list(raw: Any) -> list[Any]:
    """A JSON array returned by a script (Lua's cjson writes an empty table as ``{}``)."""
    value = json.loads(raw)
    return value if isinstance(value, list) else []


def glob_escape(text: str) -> str:
    """``text`` with Redis glob metacharacters escaped, for ``SCAN MATCH``."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
