"""The Redis store's index: listings, per-function indexes and totals, usage records and batch
deletes, over many entries.

:class:`RedisIndex` owns the index hashes ``fncache:f:FUNCTION`` (field ``K`` = creation time,
``K:u`` = last use, ``K:n`` = number of uses) and the totals ``fncache:s:FUNCTION`` (entries,
bytes, newest, oldest, last use, uses: see :meth:`RedisIndex.summary`). It works over a client,
the store's key layout (:class:`~fncache.stores._redis_keys.RedisKeys`), the store's error
guard and its registered scripts (:mod:`fncache.stores._redis_scripts`), all handed to it by the
store (:mod:`fncache.stores.redis`), which keeps the connection and the single-entry reads and
writes; the store calls the index through its public methods only.

Everything read here is untrusted (see :mod:`fncache.stores._redis_records` for the checks): sizes
are stored lengths, index fields are checked against the layout, and a ``SCAN`` never blocks the
server the way ``KEYS`` would; entries written meanwhile may or may not be seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from fncache.stores._base import EntryInfo, FunctionSummary, Use, now, summarize
from fncache.stores._meta import MAX_JSON_BYTES, parse_meta
from fncache.stores._redis_keys import RedisKeys
from fncache.stores._redis_records import (
    CHUNKED,
    INLINE,
    KEY,
    MAX_MANIFEST,
    is_error,
    number,
    parse_index,
    parse_manifest,
    stored_size,
)

__all__ = ["RedisIndex", "json_list", "parse_totals"]

_SCAN_BATCH = 1000
_LIST_BATCH = 1000
_GONE = -1
_NOT_A_STRING = -2


def json_list(raw: Any) -> list[Any]:
    """A JSON array returned by a script (Lua's cjson writes an empty table as ``{}``)."""
    value = json.loads(raw)
    return value if isinstance(value, list) else []


class RedisIndex:
    """The index of one Redis store: ``RedisIndex(keys, client, guard, script)``.

    ``keys`` names the store's keys; ``client()`` returns the connected :class:`redis.Redis`;
    ``guard(what)`` is a context manager turning the client's errors into
    :class:`fncache.StoreError`; ``script(name)`` a registered script of
    :data:`~fncache.stores._redis_scripts.SCRIPTS`.
    """

    def __init__(self, keys: RedisKeys, client: Callable[[], Any],
                 guard: Callable[[str], AbstractContextManager[None]],
                 script: Callable[[str], Any]) -> None:
        self.keys = keys
        self._client = client
        self._guard = guard
        self._script = script

    # -- kept with each write and delete (queued on the caller's pipeline) -------------------------
    def add(self, pipe: Any, key: str, meta: dict[str, Any], created: float, size: int) -> None:
        """Queue the index entry of ``key`` under its function and its count in the function's
        totals (one script: both or neither)."""
        function = meta.get("function")
        if isinstance(function, str) and self.keys.indexed(function):
            self._script("index")(keys=[self.keys.index(function), self.keys.totals(function)],
                                  args=[key, repr(float(created)), int(size)], client=pipe)

    def remove(self, pipe: Any, key: str, function: Any) -> None:
        """Queue the removal of ``key``'s index fields; its function's totals go with them (they
        are rebuilt by the next :meth:`summary`)."""
        if isinstance(function, str) and function:
            pipe.hdel(self.keys.index(function), key, f"{key}:u", f"{key}:n")
            pipe.unlink(self.keys.totals(function))

    def chunk_lengths(self, chunks: list[str]) -> list[int]:
        """The stored length of each chunk (0 for a missing one), in one pipelined round trip."""
        pipe = self._client().pipeline(transaction=False)
        for name in chunks:
            pipe.strlen(name)
        # A chunk of another type (WRONGTYPE) counts as missing.
        return [0 if is_error(n) else int(n) for n in pipe.execute(raise_on_error=False)]

    # -- listings -------------------------------------------------------------------------------
    def scan(self, with_meta: bool) -> Iterator[tuple[EntryInfo, dict[str, Any] | None]]:
        """Listed entries, and their metadata when ``with_meta`` (``None`` for a damaged entry).

        Everything read here is untrusted: sizes are stored lengths (of the value, or the sum of a
        chunked value's chunks), never a size the metadata or manifest claims; index names and
        fields are checked against the layout (:func:`parse_index`); a key listed in two
        functions' indexes, a value of another type than fncache writes, or metadata of the wrong
        types, too large or naming another function than its index marks the entry damaged.
        """
        t = now()
        with self._guard("list"):
            values, indexes = self.list_names()
            index, ambiguous, stale = self._read_indexes(indexes, values, t)
            keys = list(values)
            for i in range(0, len(keys), _LIST_BATCH):
                for key, size, damaged, meta in self.describe(keys[i : i + _LIST_BATCH], with_meta):
                    function, (created, last, uses) = index.get(key, ("", [None, None, None]))
                    damaged = damaged or key in ambiguous or bool(
                        with_meta and meta is not None and function
                        and meta.get("function") != function)
                    # Every part is checked already (parse_index, the stored length): no second
                    # pass through entry_info, which costs a listing a fifth of its time.
                    info = EntryInfo(key, size, 0.0 if damaged else created or 0.0, last,
                                     {} if damaged or not function else {"function": function},
                                     damaged, uses)
                    yield info, (None if damaged or meta is None else meta)
            self.drop_stale(stale)

    def _read_indexes(self, indexes: list[tuple[str, str]], values: dict[str, None], t: float
                      ) -> tuple[dict[str, tuple[str, list[Any]]], set[str], dict[str, list[str]]]:
        """Every index read: ``{key: (function, record)}``, the keys indexed under two functions,
        and the fields of entries that are gone (by index name)."""
        index: dict[str, tuple[str, list[Any]]] = {}
        ambiguous: set[str] = set()
        stale: dict[str, list[str]] = {}
        for function, name in indexes:
            for key, record in self.read_index(name, t).items():
                if key not in values:
                    stale.setdefault(name, []).append(key)
                elif key in index:
                    ambiguous.add(key)
                else:
                    index[key] = (function, record)
        return index, ambiguous, stale

    def read_index(self, name: str, t: float) -> dict[str, list[Any]]:
        """One function's index (``HSCAN``), checked; a key of another type is no index."""
        import redis

        try:
            return parse_index(self.index_fields(name), t)
        except redis.exceptions.ResponseError as e:
            if "WRONGTYPE" not in str(e):
                raise
            return {}

    def index_fields(self, name: str) -> Iterator[tuple[str, str]]:
        """``(field, value)`` pairs of an index, a page at a time (see the ``index_page`` script);
        a page that is not valid JSON (planted bytes that are not UTF-8) is read again as plain
        ``HSCAN`` replies."""
        cursor = "0"
        while True:
            raw = self._script("index_page")(keys=[name], args=[cursor])
            try:
                page = json.loads(raw)
                following, flat = str(page[0]), page[1]
                # The last page of a large index is often empty, which Lua's cjson writes as {}.
                flat = [] if flat == {} else flat
                pairs = list(zip(flat[::2], flat[1::2], strict=True))
            except (ValueError, TypeError, IndexError, KeyError, AttributeError):
                # Read again from the same cursor: a page is retried whole, never skipped or
                # restarted from the first one (which would never end).
                next_cursor, fields = self._client().hscan(name, cursor, count=1000)
                following = str(int(next_cursor))
                pairs = [(f.decode("utf-8", "replace"), v.decode("utf-8", "replace"))
                         for f, v in fields.items()]
            cursor = following
            yield from pairs
            if cursor == "0":
                return

    def list_names(self) -> tuple[dict[str, None], list[tuple[str, str]]]:
        """Value keys (an ordered set) and ``(function, name)`` of each index, by ``SCAN``. Names
        that are not UTF-8 or not of the layout are skipped (``clear`` removes them)."""
        values: dict[str, None] = {}
        indexes = []
        # Two scans matching the value and index names: the server filters, and the metadata and
        # chunk names (half the keys or more) never cross the wire.
        for kind in ("v", "f"):
            start = self.keys.kind(kind)
            for raw in self._client().scan_iter(match=self.keys.pattern(kind), count=_SCAN_BATCH):
                try:
                    name = raw.decode() if isinstance(raw, bytes) else raw
                except UnicodeDecodeError:
                    continue
                if kind == "v":
                    values[name[len(start):]] = None
                elif self.keys.indexed(name[len(start):]):
                    indexes.append((name[len(start):], name))
        return values, indexes

    def describe(self, keys: list[str], with_meta: bool
                 ) -> Iterator[tuple[str, int, bool, dict[str, Any] | None]]:
        """``(key, size, damaged, metadata)`` for a batch of value keys; a key removed since the
        scan is left out.

        One script call gives each value's stored length and kind (its first byte) as one
        integer, so a batch costs one round trip and one small reply, not two commands per entry;
        chunked values' manifests and chunk lengths, and with ``with_meta`` the metadata records,
        take pipelined round trips of their own.
        """
        kinds = self._kinds(keys)
        metalens = self._meta_lengths(keys) if with_meta else []
        manifests, metas = self._records(keys, kinds, metalens)
        chunk_lengths = self._manifest_lengths(keys, manifests)
        for i, key in enumerate(keys):
            strlen, tag = kinds[i]
            if tag < 0:
                if strlen != _GONE:  # else removed since the scan saw it
                    yield key, 0, True, None  # not a string (planted): damage
                continue
            head = INLINE if tag == 0 else CHUNKED if tag == 1 else b"?"
            size, damaged = stored_size(strlen, head, manifests.get(i), chunk_lengths.get(i, []))
            damaged = damaged or not KEY.fullmatch(key)  # a name fncache never writes
            meta = None
            if with_meta:
                metalen = metalens[i]
                meta = None if is_error(metalen) or metalen > MAX_JSON_BYTES \
                    else parse_meta(metas.get(i))
                damaged = damaged or meta is None
            yield key, size, damaged, meta

    def _kinds(self, keys: list[str]) -> list[tuple[int, int]]:
        """``(stored length, kind)`` of each value (kind 0 inline, 1 chunked, 2 other; -1 with
        the length ``_GONE`` or ``_NOT_A_STRING``)."""
        hexkeys = [k for k in keys if KEY.fullmatch(k)]
        codes = dict(zip(hexkeys, json_list(self._script("sizes")(
            args=[self.keys.value(""), "".join(hexkeys)])), strict=True)) if hexkeys else {}
        if len(hexkeys) < len(keys):
            # Names fncache never writes (planted): damage, with their stored length.
            other = [k for k in keys if k not in codes]
            pipe = self._client().pipeline(transaction=False)
            for k in other:
                pipe.strlen(self.keys.value(k))
            for k, n in zip(other, pipe.execute(raise_on_error=False), strict=True):
                codes[k] = _NOT_A_STRING if is_error(n) else _GONE if not n else n * 4 + 2
        return [(int(c) // 4, int(c) % 4) if isinstance(c, int) and c >= 0 else (c, -1)
                for c in (codes[k] for k in keys)]

    def _meta_lengths(self, keys: list[str]) -> list[Any]:
        """The stored length of each metadata record (or the error reading it)."""
        pipe = self._client().pipeline(transaction=False)
        for k in keys:
            pipe.strlen(self.keys.meta(k))
        return list(pipe.execute(raise_on_error=False))

    def _records(self, keys: list[str], kinds: list[tuple[int, int]], metalens: list[Any]
                 ) -> tuple[dict[int, Any], dict[int, Any]]:
        """The manifests of chunked values and the metadata records small enough to be fncache's,
        by position in ``keys``, in one pipelined round trip."""
        wanted = [i for i, (strlen, tag) in enumerate(kinds) if tag == 1 and strlen <= MAX_MANIFEST]
        small = [i for i, n in enumerate(metalens) if not is_error(n) and 0 < n <= MAX_JSON_BYTES]
        if not wanted and not small:
            return {}, {}
        pipe = self._client().pipeline(transaction=False)
        for i in wanted:
            pipe.get(self.keys.value(keys[i]))
        for i in small:
            pipe.get(self.keys.meta(keys[i]))
        replies = [None if is_error(r) else r for r in pipe.execute(raise_on_error=False)]
        manifests = {i: parse_manifest(r or None) for i, r in zip(wanted, replies, strict=False)}
        return manifests, dict(zip(small, replies[len(wanted):], strict=True))

    def _manifest_lengths(self, keys: list[str], manifests: dict[int, Any]) -> dict[int, list[int]]:
        """The stored lengths of the chunks each valid manifest names, in one round trip."""
        names = {i: self.keys.chunks(keys[i], m[0], m[1])
                 for i, m in manifests.items() if m is not None}
        flat = [c for chunks in names.values() for c in chunks]
        lengths = iter(self.chunk_lengths(flat) if flat else [])
        return {i: [next(lengths) for _ in chunks] for i, chunks in names.items()}

    def drop_stale(self, stale: dict[str, list[str]]) -> None:
        """Remove index fields of entries that are gone (expired, deleted by hand), each only if
        its value is still missing (one script per index: a concurrent add keeps its field)."""
        if not stale:
            return
        pipe = self._client().pipeline(transaction=False)
        start = len(self.keys.kind("f"))
        for name, keys in stale.items():
            self._script("unindex")(keys=[name, self.keys.totals(name[start:])],
                                    args=[self.keys.value(""), *keys], client=pipe)
        pipe.execute(raise_on_error=False)

    # -- usage records --------------------------------------------------------------------------
    def record_use(self, uses: list[Use]) -> None:
        """Add uses to the index of each function (and its totals): one script per function, all
        in one pipelined round trip; fields are set only for keys still indexed (a gone entry gets
        no record)."""
        by_function: dict[str, list[Any]] = {}
        for use in uses:
            if use.function and KEY.fullmatch(use.key):
                by_function.setdefault(use.function, []).extend(
                    [use.key, repr(float(use.last)), int(use.times)])
        if not by_function:
            return
        with self._guard("usage"):
            pipe = self._client().pipeline(transaction=False)
            for function, args in by_function.items():
                self._script("use")(keys=[self.keys.index(function), self.keys.totals(function)],
                                    args=args, client=pipe)
            pipe.execute()

    # -- deletes --------------------------------------------------------------------------------
    def delete_many(self, keys: list[str]) -> int:
        """Remove entries, their chunks and their index fields, 1000 at a time in three pipelined
        round trips per batch; the number of entries this call removed.

        The value is read only if it is a manifest (its first byte says so, and it is small), so
        deleting a large value does not fetch it; the metadata (to find the index) only if it is
        small enough to be fncache's. Idempotent; not atomic as a whole.
        """
        n = 0
        for i in range(0, len(keys), _LIST_BATCH):
            with self._guard("delete"):
                n += self._delete_batch(keys[i : i + _LIST_BATCH])
        return n

    def _delete_batch(self, keys: list[str]) -> int:
        heads = self._heads(keys)
        raws, metas = self._reads(keys, heads, with_meta=True)
        pipe = self._client().pipeline(transaction=False)
        unlinks = []
        for i, key in enumerate(keys):
            unlinks.append(len(pipe))
            pipe.unlink(self.keys.value(key), self.keys.meta(key),
                        *self.keys.manifest_chunks(key, raws[i]))
            self.remove(pipe, key, (parse_meta(metas[i]) or {}).get("function") if metas[i] else None)
        replies = pipe.execute(raise_on_error=False)
        # A value of another type (planted) has no length but is an entry all the same.
        return sum(bool(is_error(head[1]) or head[1]) and not is_error(replies[at]) and replies[at] > 0
                   for head, at in zip(heads, unlinks, strict=True))

    def _heads(self, keys: list[str]) -> list[list[Any]]:
        """``[first byte, stored length, metadata length]`` of each entry, in one round trip."""
        pipe = self._client().pipeline(transaction=False)
        for k in keys:
            pipe.getrange(self.keys.value(k), 0, 0)
            pipe.strlen(self.keys.value(k))
            pipe.strlen(self.keys.meta(k))
        replies = pipe.execute(raise_on_error=False)
        return [replies[3 * i : 3 * i + 3] for i in range(len(keys))]

    def _reads(self, keys: list[str], heads: list[list[Any]], with_meta: bool
               ) -> tuple[list[bytes | None], list[bytes | None]]:
        """The manifests of chunked values and (``with_meta``) the metadata records small enough
        to be fncache's, ``None`` elsewhere, in one round trip."""
        pipe = self._client().pipeline(transaction=False)
        for k, (head, strlen, metalen) in zip(keys, heads, strict=True):
            chunked = head == CHUNKED and not is_error(strlen) and strlen <= MAX_MANIFEST
            pipe.get(self.keys.value(k)) if chunked else pipe.echo(b"")
            small = with_meta and not is_error(metalen) and 0 < metalen <= MAX_JSON_BYTES
            pipe.get(self.keys.meta(k)) if small else pipe.echo(b"")
        replies = [None if is_error(r) else r or None for r in pipe.execute(raise_on_error=False)]
        return replies[::2], replies[1::2]

    def clear_function(self, function: str) -> int:
        """Remove the entries in ``function``'s index (``HSCAN``), their chunks, the index and its
        totals; the number of entries removed. Not atomic: entries added meanwhile may survive."""
        name = self.keys.index(function)
        n = 0
        with self._guard("clear"):
            keys = list(self.read_index(name, now()))
            for i in range(0, len(keys), _LIST_BATCH):
                batch = keys[i : i + _LIST_BATCH]
                heads = self._heads(batch)
                raws, _ = self._reads(batch, heads, with_meta=False)
                doomed = []
                for k, (_, strlen, _), raw in zip(batch, heads, raws, strict=True):
                    n += bool(is_error(strlen) or strlen)
                    doomed += [self.keys.value(k), self.keys.meta(k),
                               *self.keys.manifest_chunks(k, raw)]
                self._client().unlink(*doomed)
            self._client().unlink(name, self.keys.totals(function))
        return n

    # -- totals ---------------------------------------------------------------------------------
    def summary(self) -> list[FunctionSummary]:
        """Per function: entries, bytes, newest, oldest, last use and uses, from the totals kept
        with the index, checked against a count of the values; rebuilt from :meth:`scan` when any
        total is missing, unreadable or off.

        The totals are a cache, never trusted over the entries. One ``SCAN`` (answered by a script
        as a count per page: no value name crosses the wire) counts the values, and the totals are
        used only if they are all well-formed and add up to exactly that count: an entry expired,
        evicted, removed by hand or written by anything but fncache, a function's totals dropped by
        a delete (oldest and newest cannot be counted down), or totals planted or damaged, make the
        count disagree, and the rows are then :func:`summarize` of the listing, written back as the
        new totals. An error that keeps the count (a planted total moving entries from one function
        to another) can only misstate ``info`` and ``ls``: ``clear`` and ``prune`` always decide
        on listed entries. Entries listed under no function or as damaged have no totals, so a
        store holding them is summarised from its listing each time. Same concurrency as
        :meth:`scan`: a rebuild that misses a concurrent write is found off by the next summary.
        """
        with self._guard("list"):
            count, names = self._count()
            rows = self._read_totals(names)
        if rows is not None and sum(r.entries for r in rows) == count:
            return rows
        rows = summarize(info for info, _ in self.scan(with_meta=False))
        with self._guard("list"):
            self._write_totals(rows, names)
        return rows

    def _count(self) -> tuple[int, list[str]]:
        """The number of values under the prefix and the names of every function's totals."""
        count, names, cursor = 0, [], "0"
        args = [self.keys.pattern(), self.keys.kind("v"), self.keys.kind("s")]
        while True:
            page = self._script("count_page")(args=[cursor, *args])
            cursor, count = str(int(page[0])), count + int(page[1])
            for raw in page[2:]:
                try:
                    names.append(raw.decode() if isinstance(raw, bytes) else str(raw))
                except UnicodeDecodeError:
                    continue  # not a name fncache writes: no total
            if cursor == "0":
                return count, names

    def _read_totals(self, names: list[str]) -> list[FunctionSummary] | None:
        """The rows the totals at ``names`` give, sorted as :func:`summarize` sorts them; ``None``
        if any of them is not well-formed."""
        start = len(self.keys.kind("s"))
        pipe = self._client().pipeline(transaction=False)
        for name in names:
            pipe.hgetall(name)
        rows = []
        for name, fields in zip(names, pipe.execute(raise_on_error=False), strict=True):
            row = None if is_error(fields) else parse_totals(name[start:], fields)
            if row is None:
                return None
            rows.append(row)
        return sorted(rows, key=lambda r: r.function)

    def _write_totals(self, rows: list[FunctionSummary], names: list[str]) -> None:
        """Replace the totals at ``names`` by those of ``rows`` (one transaction)."""
        pipe = self._client().pipeline(transaction=True)
        if names:
            pipe.unlink(*names)
        for row in rows:
            if not row.damaged and self.keys.indexed(row.function):
                pipe.hset(self.keys.totals(row.function), mapping={
                    "n": row.entries, "b": row.size, "new": repr(row.newest),
                    "old": repr(row.oldest), "used": repr(row.used or 0), "uses": row.uses})
        pipe.execute()


def parse_totals(function: str, fields: Any) -> FunctionSummary | None:
    """A function's totals as read back (untrusted): a row if every field is a short ASCII number
    of the layout and they agree with one another (an entry at least, newest not before oldest),
    else ``None``."""
    if not RedisKeys.indexed(function) or not isinstance(fields, dict) or len(fields) != 6:
        return None
    values = {}
    for name in ("n", "b", "new", "old", "used", "uses"):
        raw = fields.get(name.encode())
        found = number(raw.decode("ascii", "replace")) if isinstance(raw, bytes) else None
        if found is None or not 0 <= found < 2**53:
            return None
        values[name] = found
    n, size, uses = values["n"], values["b"], values["uses"]
    if not all(type(v) is int for v in (n, size, uses)) or n < 1 \
            or values["old"] > values["new"]:
        return None
    return FunctionSummary(function, None, int(n), int(size), float(values["new"]),
                           float(values["old"]), float(values["used"]) or None, int(uses))
