"""The S3 store's listing: the operations over many entries (listings, usage records and batch
deletes).

:class:`S3Listing` puts paginated listings of values, metadata names and usage objects together
into entries (``scan``, ``entries``), merges uses into the usage objects ``u/GROUP`` with
conditional PUTs (``record_use``), and finds deletes by listing rather than by one request per
entry (``delete_many``, ``clear_function``), with the concurrent asyncio GETs and PUTs they run on
s3fs's event loop. It works over what the store (:mod:`fncache.stores.s3`, which owns the client,
the deadline and the reads and writes of single entries) hands it: the layout's paths
(:class:`~fncache.stores._s3_layout.S3Paths`), the store's error guard, its paged listing and
batch removal, its client and its deadline, so errors, deadlines and the layout stay the store's;
the store calls it through its public methods only.

The bucket is untrusted: only names of the layout count (checked by
:mod:`fncache.stores._s3_layout`), sizes are listed sizes, metadata over 1 MiB and usage objects
over 8 MiB are never fetched, and a usage record only ranks entries; it never touches a value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from fncache.stores import _s3_snapshot as snapshot
from fncache.stores._base import EntryInfo, FunctionSummary, Use, entry_info, now, summarize
from fncache.stores._meta import MAX_JSON_BYTES, parse_meta
from fncache.stores._s3_config import SECONDS_PER_BYTE
from fncache.stores._s3_errors import EXISTS, http_status
from fncache.stores._s3_layout import (
    GROUP,
    KEY,
    MAX_USAGE_BYTES,
    S3Paths,
    encode_usage,
    function_of,
    group_of,
    parse_meta_name,
    parse_usage,
    value_name,
)
from fncache.stores._s3_snapshot import MAX_SNAPSHOT_BYTES, Refs

__all__ = ["S3Listing"]

log = logging.getLogger("fncache")

_LIST_BATCH = 1000
# A summary probes values the cached metadata listing lacks (two HEADs each, 64 at a time) while
# they are at most this many, or this share of the values (1/50); more, and it lists the names.
_PROBE_MIN = 256
_PROBE_SHARE = 50


def _timestamp(modified: Any) -> float | None:
    """A listed LastModified as a POSIX time (``None`` if the server sent something else)."""
    try:
        return float(modified.timestamp()) if modified is not None else None
    except (AttributeError, ValueError, OverflowError, TypeError):
        return None


class _Row:
    """One listed entry while a listing is put together."""

    __slots__ = ("key", "size", "created", "function", "damaged", "meta_path", "meta_size", "use")

    def __init__(self, key: str, size: int, created: float | None) -> None:
        self.key, self.size, self.created = key, size, created
        self.function, self.damaged = "", False
        self.meta_path: str | None = None
        self.meta_size = 0
        self.use: tuple[float, int] | None = None

    def info(self, meta: Any) -> EntryInfo:
        use = self.use
        return entry_info(self.key, self.size, meta, created=self.created, damaged=self.damaged,
                          accessed=None if use is None else use[0],
                          uses=None if use is None else use[1])


async def _cat_many(fs: Any, paths: list[str], limit: int, deadline: float) -> list[bytes]:
    """The bodies of small objects, 64 requests at a time: one ranged GET each (s3fs's
    ``_cat_file`` sends a HEAD first). Missing, empty or over ``limit`` bytes gives ``b""``."""
    import asyncio

    gate = asyncio.Semaphore(64)

    async def one(path: str) -> bytes:
        bucket, _, key = path.partition("/")
        async with gate:
            try:
                return (await _get_small(fs, bucket, key, limit, deadline))[1] or b""
            except FileNotFoundError:
                return b""

    return list(await asyncio.gather(*(one(p) for p in paths)))


async def _head_many(fs: Any, paths: list[str], deadline: float) -> list[dict[str, Any] | None]:
    """The HEAD responses of objects, 64 requests at a time; ``None`` for one that is missing."""
    import asyncio

    gate = asyncio.Semaphore(64)

    async def one(path: str) -> dict[str, Any] | None:
        bucket, _, key = path.partition("/")
        async with gate:
            try:
                return dict(await asyncio.wait_for(
                    fs._call_s3("head_object", Bucket=bucket, Key=key), deadline))
            except FileNotFoundError:
                return None

    return list(await asyncio.gather(*(one(p) for p in paths)))


async def _get_small(
    fs: Any, bucket: str, key: str, limit: int, deadline: float
) -> tuple[str | None, bytes | None]:
    """The ETag and the whole body of a small object, or ``(etag, None)`` if it is empty or
    larger than ``limit`` bytes (only the first ``limit + 1`` are ever transferred)."""
    import asyncio

    try:
        resp = await asyncio.wait_for(
            fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes=0-{limit}"), deadline)
    except OSError as e:
        if http_status(e) != 416:  # an empty object: no range of it exists
            raise
        head = await asyncio.wait_for(fs._call_s3("head_object", Bucket=bucket, Key=key), deadline)
        return head.get("ETag"), None
    body = resp["Body"]
    # The body's time: 1 s per MiB of what the ranged response announces (at most limit + 1 bytes).
    length = resp.get("ContentLength")
    length = min(length, limit + 1) if isinstance(length, int) and length >= 0 else limit + 1
    try:
        data = await asyncio.wait_for(body.read(), deadline + length * SECONDS_PER_BYTE)
    finally:
        body.close()
    return resp.get("ETag"), data if 0 < len(data) <= limit else None


async def _merge_all(fs: Any, paths: dict[tuple[str, str], dict[str, tuple[float, int]]],
                     t: float, deadline: float) -> int:
    """Merge records into each usage object ``(bucket, key)``, 16 at a time; how many gave up."""
    import asyncio

    gate = asyncio.Semaphore(16)

    async def one(where: tuple[str, str], records: dict[str, tuple[float, int]]) -> bool:
        async with gate:
            return await _merge_usage(fs, *where, records, t, deadline)

    done = await asyncio.gather(*(one(where, r) for where, r in paths.items()))
    return sum(not ok for ok in done)


async def _merge_usage(fs: Any, bucket: str, key: str, records: dict[str, tuple[float, int]],
                       t: float, deadline: float) -> bool:
    """Read, merge and conditionally write one usage object; False if other writers kept winning
    (three tries). The stored records are untrusted (:func:`parse_usage`)."""
    import asyncio

    for _ in range(3):
        match: dict[str, Any] = {"IfNoneMatch": "*"}
        stored: dict[str, tuple[float, int]] = {}
        try:
            etag, raw = await _get_small(fs, bucket, key, MAX_USAGE_BYTES, deadline)
            match = {"IfMatch": etag} if isinstance(etag, str) else {}
            if raw is not None:  # else too large or empty: damage, rewritten from this batch
                stored = parse_usage(raw, t)
        except FileNotFoundError:
            pass
        for k, (last, count) in records.items():
            old_last, old_count = stored.get(k, (0.0, 0))
            stored[k] = (max(old_last, last), old_count + count)
        try:
            await asyncio.wait_for(fs._call_s3("put_object", Bucket=bucket, Key=key,
                                               Body=encode_usage(stored), **match), deadline)
            return True
        except Exception as e:
            if http_status(e) not in (*EXISTS, 404):
                raise
    return False


class S3Listing:
    """The listing of one S3 store: ``S3Listing(paths, guard=, list_objects=, remove=, fs=,
    timeout=)``.

    ``guard(what)`` turns the client's errors into :class:`fncache.StoreError`;
    ``list_objects(under)`` yields ``(name, size, last_modified)`` of the objects under a path,
    page by page under the store's deadline; ``remove(paths)`` deletes objects in batches;
    ``fs()`` is the connected :class:`s3fs.S3FileSystem`; ``timeout`` the store's deadline.
    """

    def __init__(self, paths: S3Paths, *, guard: Callable[[str], AbstractContextManager[None]],
                 list_objects: Callable[[str], Iterator[tuple[str, int, Any]]],
                 remove: Callable[[list[str]], None], fs: Callable[[], Any],
                 timeout: float) -> None:
        self.paths = paths
        self._guard = guard
        self._list = list_objects
        self._remove = remove
        self._fs = fs
        self.timeout = timeout

    # -- listings -------------------------------------------------------------------------------
    def listing(self) -> Iterator[EntryInfo]:
        """:meth:`fncache.stores.s3.S3Store.listing`: every live entry, ``meta`` naming its
        function only."""
        for row in self.scan():
            yield row.info({"function": row.function} if row.function else {})

    def entries(self) -> Iterator[EntryInfo]:
        """Every live entry with its metadata: :meth:`listing`, then the metadata objects in
        concurrent GETs (1000 at a time).

        The bucket is untrusted. Only objects at the places fncache writes them (see
        :mod:`fncache.stores._s3_layout`) count, so deleting an entry by its key deletes exactly
        the objects listed for it; anything else under the prefix is ignored here (and removed by
        :meth:`S3Store.clear`). Metadata over 1 MiB is not fetched; metadata of the wrong types, or
        naming another function than the group it is listed under, marks the entry damaged; an
        entry listed under two groups is damaged.
        """
        rows = list(self.scan())
        for i in range(0, len(rows), _LIST_BATCH):
            batch = rows[i : i + _LIST_BATCH]
            wanted = [r.meta_path for r in batch
                      if r.meta_path and 0 < r.meta_size <= MAX_JSON_BYTES]
            with self._guard("list"):
                metas = self.cat(wanted)
            for row in batch:
                meta = parse_meta(metas.get(row.meta_path)) if row.meta_path else {}
                if meta is None or (row.meta_path and meta.get("function", "") != row.function):
                    meta, row.damaged = None, True
                yield row.info(meta)

    def summary(self) -> list[FunctionSummary]:
        """:meth:`fncache.stores.s3.S3Store.summary`: the rows of :meth:`listing`, summarised,
        with the metadata names taken from their cached listing where it holds the listed values
        (:mod:`fncache.stores._s3_snapshot`), else listed (and cached again)."""
        return summarize(r.info({"function": r.function} if r.function else {})
                         for r in self.scan(cached=True))

    def scan(self, *, cached: bool = False) -> Iterator[_Row]:
        """The rows of :meth:`listing`, checked against the layout. ``cached``: the metadata
        names from their cached listing where it holds the listed values, else listed and cached
        again."""
        t = now()
        with self._guard("list"):
            values = self._values()
            refs = self._cached_refs(values, t) if cached else None
            if refs is None:
                refs = self._refs(values)
                if cached:
                    self._cache_refs(values, refs, t)
            usage_sizes = {name: size for name, size, _ in self._list(self.paths.usage)
                           if GROUP.fullmatch(name) and 0 < size <= MAX_USAGE_BYTES}
        return self._rows(values, refs, usage_sizes, t)

    def _rows(self, values: dict[str, tuple[int, float | None]], refs: Refs,
              usage_sizes: dict[str, int], t: float) -> Iterator[_Row]:
        groups = {ref[0] for found in refs.values() for ref in found}
        names = self.group_names(groups, refs)
        usage = self._usage(g for g in groups if g in usage_sizes)
        for key, (size, created) in values.items():
            row = self._row(key, size, created, refs.get(key, []), names, usage, t)
            if row is not None:
                yield row

    def _values(self) -> dict[str, tuple[int, float | None]]:
        """``{key: (size, modified)}`` of every value at a name of the layout."""
        values = {}
        for name, size, modified in self._list(self.paths.values):
            key = name.rpartition("/")[2]
            if KEY.fullmatch(key) and name == value_name(key):
                values[key] = (size, _timestamp(modified))
        return values

    def _refs(self, values: dict[str, Any]) -> Refs:
        """``{key: [(group, expires, name, size)...]}``: the metadata objects of listed values."""
        refs: Refs = {}
        for name, size, _ in self._list(self.paths.metas):
            parsed = parse_meta_name(name)
            if parsed is not None and parsed[1] in values:
                group, key, expires = parsed
                refs.setdefault(key, []).append((group, expires, name, size))
        return refs

    def _cached_refs(self, values: dict[str, tuple[int, float | None]], t: float) -> Refs | None:
        """:meth:`_refs` from the cached listing, for the values it holds with the size and time
        listed now; the others (written since) probed one by one (:meth:`_probe`) and the listing
        cached again, if they are few; ``None`` if they are many (then only a listing will do)."""
        from fsspec.asyn import sync

        fs = self._fs()
        try:
            raw = sync(fs.loop, _get_small, fs, *self.paths.split(self.paths.snapshot),
                       MAX_SNAPSHOT_BYTES, self.timeout,
                       timeout=self.timeout * 2 + MAX_SNAPSHOT_BYTES * SECONDS_PER_BYTE)[1]
        except FileNotFoundError:
            return None
        except Exception as e:  # unreadable here (denied, a time-out): the listing answers
            log.debug("s3 store s3://%s: cached metadata listing not read: %s", self.paths.base, e)
            return None
        cached = snapshot.decode(raw)
        if cached is None:
            return None
        refs: Refs = {}
        unknown = []
        for key, (size, created) in values.items():
            row = cached.get(key)
            if row is None or row[0] != size or row[1] != created:
                unknown.append(key)
            elif row[2]:
                refs[key] = row[2]
        if len(unknown) > max(_PROBE_MIN, len(values) // _PROBE_SHARE):
            return None
        if unknown:
            refs.update(self._probe(unknown))
            self._cache_refs(values, refs, t)
        return refs

    def _probe(self, keys: list[str]) -> Refs:
        """The metadata names of values the cached listing does not hold as listed (written since
        it was): where each value's user metadata says its metadata object is, if it is there. Two
        concurrent HEADs per value instead of a listing of every metadata name."""
        from fsspec.asyn import sync

        fs = self._fs()
        wait = self.timeout * (2 + len(keys) // 64)
        heads = sync(fs.loop, _head_many, fs, [self.paths.value(k) for k in keys], self.timeout,
                     timeout=wait)
        wanted = {}
        for key, head in zip(keys, heads, strict=True):
            path = self.paths.meta_of(key, (head or {}).get("Metadata")) if head else None
            if path is not None:
                wanted[key] = path
        found = sync(fs.loop, _head_many, fs, list(wanted.values()), self.timeout, timeout=wait)
        refs: Refs = {}
        for (key, path), head in zip(wanted.items(), found, strict=True):
            name = path[len(self.paths.metas) + 1:]
            size = (head or {}).get("ContentLength")
            parsed = parse_meta_name(name)
            if head is not None and isinstance(size, int) and size >= 0 and parsed is not None:
                refs[key] = [(parsed[0], parsed[2], name, size)]
        return refs

    def _cache_refs(self, values: dict[str, tuple[int, float | None]], refs: Refs,
                    t: float) -> None:
        """Write the cached listing; a failure only costs the next summary a listing."""
        from fsspec.asyn import sync

        body = snapshot.encode(values, refs, t)
        try:
            fs = self._fs()
            bucket, key = self.paths.split(self.paths.snapshot)
            sync(fs.loop, fs._call_s3, "put_object", Bucket=bucket, Key=key, Body=body,
                 timeout=self.timeout + len(body) * SECONDS_PER_BYTE)
        except Exception as e:  # bookkeeping: never fails the summary
            log.debug("s3 store s3://%s: cached metadata listing not written: %s",
                      self.paths.base, e)

    def _usage(self, groups: Iterator[str]) -> dict[str, dict[str, tuple[float, int]]]:
        """The usage records of ``groups`` (one concurrent GET each), checked."""
        t = now()
        with self._guard("list"):
            raw_usage = self.cat([self.paths.usage_of(g) for g in groups])
        return {path.rpartition("/")[2]: parse_usage(raw, t) for path, raw in raw_usage.items()
                if isinstance(raw, bytes)}

    def _row(self, key: str, size: int, created: float | None, found: list[Any],
             names: dict[str, str | None], usage: dict[str, dict[str, tuple[float, int]]],
             t: float) -> _Row | None:
        """The row of one listed value; ``None`` if it is expired (it reads as missing)."""
        row = _Row(key, size, created)
        if len({ref[0] for ref in found}) > 1:
            row.damaged = True  # listed under two functions: believe neither
            return row
        if not found:
            return row
        group = found[0][0]
        ends = [ref[1] for ref in found]
        if None not in ends and max(e for e in ends if e is not None) <= t:
            return None
        function = names.get(group)
        row.function, row.damaged = function or "", function is None
        if len(found) == 1:
            row.meta_path, row.meta_size = f"{self.paths.metas}/{found[0][2]}", found[0][3]
        row.use = usage.get(group, {}).get(key)
        return row

    def group_names(self, groups: set[str], refs: dict[str, list[Any]]) -> dict[str, str | None]:
        """The function each group names; a hashed group's from one of its metadata records,
        believed only if that function hashes to the group."""
        names = {g: function_of(g) for g in groups}
        hashed = {g for g, name in names.items() if name is None and len(g) == 33}
        if not hashed:
            return names
        sample: dict[str, str] = {}
        for found in refs.values():
            for group, _, name, size in found:
                if group in hashed and group not in sample and 0 < size <= MAX_JSON_BYTES:
                    sample[group] = f"{self.paths.metas}/{name}"
        with self._guard("list"):
            metas = self.cat(list(sample.values()))
        for group, path in sample.items():
            function = (parse_meta(metas.get(path)) or {}).get("function")
            if isinstance(function, str) and group_of(function) == group:
                names[group] = function
        return names

    # -- usage records --------------------------------------------------------------------------
    def record_use(self, uses: list[Use]) -> None:
        """Merge uses into each function's usage object ``u/GROUP``: one ranged GET and one
        conditional PUT per function (``If-Match`` its ETag, or ``If-None-Match: *`` when new),
        the functions concurrently (16 at a time), each retried twice when another writer got in
        between; where a server ignores the condition the last writer wins and some counts are
        lost (never a value)."""
        from fsspec.asyn import sync

        t = now()
        by_group: dict[str, dict[str, tuple[float, int]]] = {}
        for use in uses:
            if KEY.fullmatch(use.key):
                records = by_group.setdefault(group_of(use.function), {})
                last, count = records.get(use.key, (0.0, 0))
                records[use.key] = (max(last, use.last), count + use.times)
        if not by_group:
            return
        paths = {self.paths.split(self.paths.usage_of(g)): r for g, r in by_group.items()}
        with self._guard("usage"):
            fs = self._fs()
            lost = sync(fs.loop, _merge_all, fs, paths, t, self.timeout,
                        timeout=self.timeout * 3 + len(paths) * MAX_USAGE_BYTES * SECONDS_PER_BYTE)
        if lost:
            log.debug("s3 store s3://%s: usage records of %d functions lost to concurrent writers",
                      self.paths.base, lost)

    # -- deletes --------------------------------------------------------------------------------
    def delete_many(self, keys: list[str]) -> int:
        """Remove many entries with two listings (values, metadata names) and ``DeleteObjects``
        of 1000 objects a request, never a request per entry. Returns how many of ``keys`` had a
        value."""
        wanted = {k for k in keys if KEY.fullmatch(k)}
        with self._guard("delete"):
            found = {key for key in (name.rpartition("/")[2] for name, _, _ in
                                     self._list(self.paths.values) if name == value_name(name[3:]))
                     if key in wanted}
            paths = [self.paths.value(k) for k in found]
            for name, _, _ in self._list(self.paths.metas):
                parsed = parse_meta_name(name)
                if parsed is not None and parsed[1] in wanted:
                    paths.append(f"{self.paths.metas}/{name}")
            self._remove(paths)
        return len(found)

    def clear_function(self, function: str) -> int:
        """Remove the entries of ``function``: one prefix listing of its group, deletes in
        batches of 1000, and its usage object. Returns the number of entries listed.

        Not atomic: entries added during the listing may survive.
        """
        group = group_of(function)
        with self._guard("clear"):
            paths, keys = [], set()
            for name, _, _ in self._list(f"{self.paths.metas}/{group}"):
                parsed = parse_meta_name(f"{group}/{name}")
                if parsed is not None:
                    keys.add(parsed[1])
                    paths += [self.paths.value(parsed[1]), f"{self.paths.metas}/{group}/{name}"]
            self._remove(paths + [self.paths.usage_of(group)])
        return len(keys)

    def cat(self, paths: list[str]) -> dict[str, bytes]:
        """The bodies of small objects, fetched concurrently (one GET each, no HEAD first as
        s3fs's ``cat`` of a list does); objects that are gone read as ``b""``."""
        if not paths:
            return {}
        from fsspec.asyn import sync

        fs = self._fs()
        limit = max(MAX_JSON_BYTES, MAX_USAGE_BYTES)
        deadline = self.timeout + len(paths) * limit * SECONDS_PER_BYTE / 64
        found = sync(fs.loop, _cat_many, fs, paths, limit, self.timeout, timeout=deadline)
        return dict(zip(paths, found, strict=True))
