"""A store on a Redis server, shared by every process and machine that reaches it.

Layout, for key ``K`` and the default ``prefix="fncache:"``:

=================================  ===============================================================
``fncache:v:K``                    the value, behind a one-byte tag: ``\\x00`` + the bytes, or
                                   ``\\x01`` + a JSON manifest of chunks (below)
``fncache:m:K``                    metadata (JSON), written after the value
``fncache:c:{K}:TOKEN:I``          chunk ``I`` of a large value, all under the hash tag ``{K}``
``fncache:f:FUNCTION``             the function's index, a hash: field ``K`` = creation time,
                                   ``K:u`` = last use, ``K:n`` = number of uses (usage records)
``fncache:s:FUNCTION``             the function's totals, a hash (``n`` entries, ``b`` bytes,
                                   ``new``/``old`` creation times, ``used``, ``uses``): a cache
                                   of its index for ``summary``, kept by the index's scripts
``fncache:l:K``                    a lock lease (``SET NX PX`` with a random token)
=================================  ===============================================================

(Entries written before the index existed list under no function until they are rewritten.)

This module owns the connection and the reads and writes of single entries. It hands its client,
error guard and scripts to its index (:class:`~fncache.stores._redis_index.RedisIndex`: listings,
the index hashes and totals, usage records, batch deletes) and calls it through its public
methods; the key names are :class:`~fncache.stores._redis_keys.RedisKeys`, the scripts
:mod:`fncache.stores._redis_scripts`, the checks of what the server returns
:mod:`fncache.stores._redis_records`, the checks of the URL and options
:mod:`fncache.stores._redis_config`.

Guarantees and failure modes:

* ``add`` is ``SET NX``: of concurrent adds exactly one wins. The value is published by that one
  command, so a reader sees the whole value or nothing; the metadata follows in a second command,
  so a crash in between leaves an entry whose metadata reads as ``{}``.
* A Redis string holds at most 512 MB and a client that sends more is disconnected, so values
  larger than ``chunk_size`` (default 64 MiB) are split into chunks. Chunks are written first with
  a provisional one-hour expiry; one Lua script then publishes the manifest (create-only, like
  ``SET NX``) and makes the chunks permanent or gives them the entry's expiry, atomically. A writer
  that dies before that script leaves chunks that expire by themselves. A chunk that is missing
  anyway (evicted, deleted by hand) makes the entry read as a miss and be removed, so the next
  ``add`` can store it again.
* ``expire`` becomes the keys' TTL: Redis itself forgets the entry (its index fields are removed
  by the next listing that finds the value gone). ``listing()``, ``entries()`` and ``clear()`` use
  ``SCAN``, never ``KEYS``, so they do not block the server; entries written meanwhile may or may
  not be seen. ``listing()`` (``fncache ls``, ``info``, ``clear``, ``prune``) reads no record per
  entry: the index hashes give functions, creation times and usage, one script call per 1000
  values gives their stored lengths; ``entries()`` adds a pipelined ``GET`` of each metadata
  record. ``clear_function`` works from the function's index. ``summary()`` (``info``, ``ls``)
  reads each function's totals and one ``SCAN`` count of the values, and falls back to the
  listing (rewriting the totals) when they disagree.
* Usage records (:meth:`record_use`) are one script call per function, all in one round trip,
  at most once a minute per process (see :mod:`fncache._usage`); a hit never writes.
* A server that cannot be reached, times out, refuses a write at its ``maxmemory`` limit ("OOM
  command not allowed") or rejects a command raises :class:`fncache.StoreError`, as does any other
  error of the client; after a connection error the pool is rebuilt on next use.
* Deadline: every command waits at most ``socket_timeout`` (default 10 s) for its reply, a new
  connection at most ``socket_connect_timeout`` (default 5 s), and a timed-out command is not
  retried (redis-py's default retries would multiply the time-out). An operation fails at its
  first timed-out command, so it takes at most ``socket_connect_timeout + socket_timeout`` against
  a frozen server (one retry on a fresh connection after a broken one).
* What the server returns is untrusted. A chunk manifest is at most 1 KiB of JSON with a 32-hex-digit
  token; its chunk count must match its size and chunk size, at most 65536 chunks and 1 TiB, and the
  chunks' stored lengths must add up to the size before any chunk is fetched. Anything else is
  damage: the entry reads as a miss and is removed. Listings count stored lengths, never the size
  the metadata claims; they take only index fields of the layout holding short ASCII numbers (a
  usage record far in the future is ignored; a usage record only ranks entries, it never touches a
  value), mark an entry indexed under two functions as damaged, and ``entries()`` marks metadata
  that is unreadable, over 1 MiB, nested over 16 levels, of the wrong types or naming another
  function than its index as damaged.
* The connection opens on first use and is rebuilt in a child process after ``fork`` (the parent's
  sockets are never shared).
* The store is written for one Redis server (or a primary behind a proxy), not Redis Cluster:
  the publish script touches the value key and its chunks together.

Secrets: a password is never pickled, shown or logged (see :mod:`fncache.stores._redis_config` for
where it is taken from). A store unpickled in another process reads ``$REDIS_PASSWORD`` there, so set
that variable (rather than writing the password in the URL) when memoized functions travel to
workers; pickling a store whose password came from the URL or an option, while
``$REDIS_PASSWORD`` is unset, logs a warning.

Options: ``prefix`` (key namespace, default ``"fncache:"``), ``chunk_size`` (bytes, default
64 MiB), ``socket_timeout`` and ``socket_connect_timeout`` (seconds, defaults 10 and 5),
``password``; any other keyword of :class:`redis.Redis` goes to :func:`redis.Redis.from_url` (e.g.
``ssl_ca_certs``). The URL and the options are checked when the store is created (before any
connection): a malformed URL or an unknown option raises :class:`fncache.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar

from fncache._errors import ConfigError, StoreError
from fncache.stores import redact
from fncache.stores._base import (
    EntryInfo,
    FunctionSummary,
    Store,
    Use,
    join_parts,
    now,
    store_error,
)
from fncache.stores._lock import LeaseLock
from fncache.stores._meta import MAX_JSON_BYTES, encode_meta, parse_meta
from fncache.stores._redis_config import check_options, check_url, is_secret, split_password
from fncache.stores._redis_index import RedisIndex
from fncache.stores._redis_keys import RedisKeys
from fncache.stores._redis_records import CHUNKED, INLINE, MAX_CHUNK, is_error, parse_manifest
from fncache.stores._redis_scripts import SCRIPTS

__all__ = ["RedisStore"]

log = logging.getLogger("fncache")

_DEFAULT_CHUNK = 64 * 2**20
# Chunks of an add still in flight expire by themselves if the writer dies before publishing.
_PENDING_TTL_MS = 3600 * 1000
_FETCH_BATCH = 16
class RedisStore(Store):
    """A store in a Redis database, e.g. ``RedisStore("redis://localhost:6379/0")``.

    See the module documentation for the key layout, guarantees, failure modes and options.
    """

    kind = "redis"
    lists_cheaply = True  # pipelined: one script call and a few pipelines per 1000 entries
    far_tier_options: ClassVar[dict[str, Any]] = {
        "socket_connect_timeout": 2.0, "socket_timeout": 5.0}

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "fncache:",
        chunk_size: int = _DEFAULT_CHUNK,
        socket_timeout: float = 10.0,
        socket_connect_timeout: float = 5.0,
        password: str | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(prefix, str):
            raise ConfigError(f"prefix: expected a string, got {type(prefix).__name__}")
        if not isinstance(chunk_size, int) or not 0 < chunk_size <= MAX_CHUNK:
            raise ConfigError(
                f"chunk_size: expected a number of bytes in 1..{MAX_CHUNK}, got {chunk_size!r}"
            )
        for name, value in (("socket_timeout", socket_timeout),
                            ("socket_connect_timeout", socket_connect_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0 < value < float("inf"):
                raise ConfigError(f"{name}: expected a positive number of seconds, got {value!r}")
        clean_url, url_password = split_password(url)
        check_url(clean_url)
        secrets = {k: options.pop(k) for k in list(options) if is_secret(k)}
        check_options(options)
        options = dict(
            options,
            prefix=prefix,
            chunk_size=chunk_size,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
        )
        super().__init__(clean_url, **options)
        self.prefix = prefix
        self.chunk_size = chunk_size
        self._password = password or url_password or os.environ.get("REDIS_PASSWORD") or None
        self._explicit_password = (password or url_password) is not None or bool(secrets)
        self._secret_kwargs = secrets
        self._client: Any = None
        self._pid = 0
        self._scripts: dict[str, Any] = {}
        #: the names of the store's keys
        self.keys = RedisKeys(prefix)
        self._index = RedisIndex(self.keys, lambda: self.client, self._guard, self._script)

    # -- connection ------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The :class:`redis.Redis` client, created on first use and again after a fork."""
        if self._client is None or self._pid != os.getpid():
            import redis

            kwargs = {k: v for k, v in self.options.items() if k not in ("prefix", "chunk_size")}
            kwargs.update(self._secret_kwargs)
            # redis-py retries a timed-out command three times by default, which multiplies
            # socket_timeout; one retry of a broken pooled connection (a restarted server) is
            # kept, a time-out is not retried: a store operation gives up within its time-outs.
            kwargs.setdefault("retry", redis.retry.Retry(
                redis.backoff.NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)
            ))
            if self._password is not None:
                kwargs["password"] = self._password
            try:
                client = redis.Redis.from_url(self.url, **kwargs)
            except (ValueError, TypeError) as e:
                raise ConfigError(
                    f"store: invalid Redis URL or option for {redact(self.url)!r}: "
                    f"{type(e).__name__}"
                ) from None
            # Forgetting (not closing) a parent's pool after fork: closing would shut sockets that
            # the parent still uses.
            self._client, self._pid = client, os.getpid()
            self._scripts = {name: client.register_script(text) for name, text in SCRIPTS.items()}
        return self._client

    def _script(self, name: str) -> Any:
        """A registered Lua script (see :mod:`fncache.stores._redis_scripts`), connecting first if needed."""
        self.client  # noqa: B018 - the property connects and registers the scripts
        return self._scripts[name]

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Turn redis-py's and the socket layer's errors into :class:`StoreError`."""
        import redis

        try:
            yield
        except (ConfigError, StoreError):
            raise
        except Exception as e:
            # Not only RedisError and OSError: a connection dropped by a time-out while its reply
            # was being read has surfaced as ``ValueError: I/O operation on closed file``, and a
            # parser may raise anything on bytes from a damaged server. All of it is a store failure.
            if not isinstance(e, redis.exceptions.ResponseError):
                # Start with a fresh pool next time. The old one is dropped, not closed: closing
                # would pull sockets from under other threads' calls in flight (redis-py already
                # disconnected the connection that failed).
                self._client = None
            full = isinstance(e, redis.exceptions.OutOfMemoryError)
            hint = " (server full: maxmemory reached, nothing was stored)" if full else ""
            raise store_error(self, what, e, hint, _describe_error(e)) from e

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._pid == os.getpid():
            try:
                client.close()
            except Exception:  # closing a broken pool must not mask the error that got us here
                pass

    def __reduce__(self) -> tuple[Any, ...]:
        if self._explicit_password and "REDIS_PASSWORD" not in os.environ:
            log.warning(
                "redis store %s: its password is not pickled; set REDIS_PASSWORD where it is "
                "unpickled",
                self.url,
            )
        return super().__reduce__()

    def _read_chunks(self, chunks: list[str], size: int) -> bytes | None:
        """The chunks joined, or ``None`` if any is missing or the lengths do not add up to ``size``.

        Lengths are checked (``STRLEN``) before any chunk is fetched, and chunks are fetched a few
        at a time, so damage is found without reading, and memory never exceeds the value's size.
        """
        lengths = self._index.chunk_lengths(chunks)
        if sum(lengths) != size or not all(lengths):
            return None
        out = bytearray()
        for i in range(0, len(chunks), _FETCH_BATCH):
            parts = self.client.mget(chunks[i : i + _FETCH_BATCH])
            for part, length in zip(parts, lengths[i : i + _FETCH_BATCH], strict=True):
                if part is None or len(part) != length:
                    return None  # replaced or removed meanwhile
                out += part
        return bytes(out)

    # -- reading ---------------------------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        """The value at ``key`` or ``None``; one round trip, two for a chunked value.

        A chunked value whose chunks are not all there reads as ``None`` and is removed.
        """
        import redis

        with self._guard("read"):
            try:
                raw = self.client.get(self.keys.value(key))
            except redis.exceptions.ResponseError as e:
                if "WRONGTYPE" not in str(e):
                    raise
                # A key of another type (a hash, a list) where a value belongs: damage.
                log.warning("redis store %s: entry %s is damaged (not a string); removed",
                            self.url, key)
                self.client.unlink(self.keys.value(key), self.keys.meta(key))
                return None
            if raw is None:
                return None
            tag = raw[:1]
            if tag == INLINE:
                return bytes(raw[1:])
            manifest = parse_manifest(raw)
            if manifest is not None:
                token, n, size = manifest
                chunks = self.keys.chunks(key, token, n)
                value = self._read_chunks(chunks, size)
                if value is not None:
                    return value
            else:
                chunks = []
            log.warning(
                "redis store %s: entry %s is damaged (%s); removed", self.url, key,
                "bad manifest" if manifest is None else "missing or changed chunk",
            )
            self._script("delete_if")(keys=[self.keys.value(key)], args=[raw])
            self.client.unlink(self.keys.meta(key), *chunks)
            return None

    def contains(self, key: str) -> bool:
        with self._guard("lookup"):
            return bool(self.client.exists(self.keys.value(key)))

    def get_meta(self, key: str) -> dict[str, Any]:
        """The entry's metadata record: its length first, so nothing over 1 MiB is fetched."""
        name = self.keys.meta(key)
        with self._guard("lookup"):
            pipe = self.client.pipeline(transaction=False)
            pipe.exists(self.keys.value(key))
            pipe.strlen(name)
            exists, length = pipe.execute(raise_on_error=False)
            if is_error(exists) or is_error(length) or not exists \
                    or not 0 < length <= MAX_JSON_BYTES:
                return {}
            raw = self.client.get(name)
        return parse_meta(raw) or {}

    def listing(self) -> Iterator[EntryInfo]:
        """Every entry from ``SCAN`` and the per-function indexes, with stored sizes in pipelined
        batches of 1000 (``STRLEN`` and the first byte of each value): never a record read per
        entry. ``meta`` is ``{"function": ...}``; ``accessed`` and ``uses`` come from the usage
        records in the index."""
        for row, _ in self._index.scan(with_meta=False):
            yield row

    def entries(self) -> Iterator[EntryInfo]:
        """Every entry with its metadata: :meth:`listing` plus one pipelined ``GET`` of each
        metadata record small enough to be fncache's (1 MiB)."""
        for row, meta in self._index.scan(with_meta=True):
            yield row if meta is None else dataclasses.replace(row, meta=meta)

    # -- usage records ---------------------------------------------------------------------------
    def record_use(self, uses: list[Use]) -> None:
        """Add uses to the index of each function: one script per function, all in one pipelined
        round trip; fields are set only for keys still indexed (a gone entry gets no record)."""
        self._index.record_use(uses)

    # -- writing ---------------------------------------------------------------------------------
    def add(
        self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None
    ) -> bool:
        """Store ``value`` unless ``key`` exists. Atomic (``SET NX``): one concurrent add wins.

        Raises :class:`StoreError` if the server is unreachable or full (``maxmemory``); nothing is
        published then (chunks already written expire within an hour).
        """
        return self._write(key, bytes(join_parts(value)), meta, expire, create_only=True)

    def set(
        self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None
    ) -> None:
        """Store ``value`` at ``key``, replacing any entry; readers see the old or the new value."""
        self._write(key, bytes(join_parts(value)), meta, expire, create_only=False)

    def _write(
        self, key: str, value: bytes, meta: dict[str, Any], expire: float | None, create_only: bool
    ) -> bool:
        ttl_ms = None if expire is None else max(1, int(expire * 1000))
        created = meta.get("created") or now()
        meta_raw = encode_meta(dict(meta, size=len(value), created=created))
        with self._guard("write"):
            inline = len(value) <= self.chunk_size
            if inline:
                written, old = self._write_inline(key, value, ttl_ms, create_only)
            else:
                written, old = self._write_chunked(key, value, meta_raw, ttl_ms, create_only)
            if not written:
                return False
            pipe = self.client.pipeline(transaction=False)
            if inline:  # a chunked value's metadata is published with its manifest
                pipe.set(self.keys.meta(key), meta_raw, px=ttl_ms)
            self._index.add(pipe, key, meta, created, len(value))
            pipe.execute()
            stale = self.keys.manifest_chunks(key, old or None)
            if stale:
                self.client.unlink(*stale)
        return True

    def _write_inline(self, key: str, value: bytes, ttl_ms: int | None,
                      create_only: bool) -> tuple[bool, Any]:
        """The value (its metadata follows); ``(written, the value replaced)``."""
        client, vkey = self.client, self.keys.value(key)
        if create_only:
            if not client.set(vkey, INLINE + bytes(value), nx=True, px=ttl_ms):
                return False, None
            old = None
        else:
            old = client.set(vkey, INLINE + bytes(value), px=ttl_ms, get=True)
        return True, old

    def _write_chunked(self, key: str, value: bytes, meta_raw: bytes, ttl_ms: int | None,
                       create_only: bool) -> tuple[bool, Any]:
        """The chunks, then the manifest and metadata published by one script; ``(written, the
        value replaced)``."""
        client, vkey = self.client, self.keys.value(key)
        if create_only and client.exists(vkey):
            return False, None  # cheap early exit before uploading chunks
        token = uuid.uuid4().hex
        view = memoryview(value)
        n = -(-len(value) // self.chunk_size)
        chunks = self.keys.chunks(key, token, n)
        try:
            for i, name in enumerate(chunks):
                part = view[i * self.chunk_size : (i + 1) * self.chunk_size]
                client.set(name, bytes(part), px=_PENDING_TTL_MS)
            manifest = CHUNKED + json.dumps(
                {"token": token, "n": n, "size": len(value), "chunk": self.chunk_size},
                separators=(",", ":"),
            ).encode()
            won, old = self._script("publish")(
                keys=[vkey, self.keys.meta(key), *chunks],
                args=[manifest, meta_raw, ttl_ms or 0, "add" if create_only else "set"],
            )
        except Exception:
            self._forget(chunks)
            raise
        if not won:
            self._forget(chunks)
        return bool(won), old

    def _forget(self, chunks: list[str]) -> None:
        """Best-effort removal of unpublished chunks (they expire by themselves anyway)."""
        try:
            self.client.unlink(*chunks)
        except Exception:  # the write error that brought us here is the one to report
            pass

    def delete(self, key: str) -> bool:
        """Remove the entry, its chunks and its index fields; ``True`` if there was one. Idempotent.

        Three pipelined round trips (see :meth:`delete_many`): a large value is never fetched.
        """
        return self._index.delete_many([key]) == 1

    def delete_many(self, keys: list[str]) -> int:
        """Remove many entries, their chunks and their index fields, 1000 at a time in three
        pipelined round trips per batch; the number of entries removed. The value is read only if
        it is a manifest (its first byte says so, and it is small), the metadata (to find the
        index) only if it is small enough to be fncache's."""
        return self._index.delete_many(keys)

    def clear_function(self, function: str) -> int:
        """Remove the entries in ``function``'s index (``HSCAN``), their chunks and the index;
        returns the number of entries removed. Not atomic: entries added meanwhile may survive."""
        return self._index.clear_function(function)

    def kept_summary(self) -> list[FunctionSummary] | None:
        """Per function, from the totals kept with each function's index (checked against a count
        of the values; rebuilt from :meth:`listing` where they are missing or off): see
        :meth:`~fncache.stores._redis_index.RedisIndex.summary`. ``python`` is ``None``, as in
        :meth:`listing`."""
        return self._index.summary()

    def clear(self) -> int:
        """Remove every key under ``prefix`` except held locks, in ``SCAN`` batches.

        Returns the number of entries removed. Not atomic: entries added meanwhile may survive.
        """
        lock_prefix = self.keys.kind("l").encode()
        value_prefix = self.keys.value("").encode()
        n = 0
        with self._guard("clear"):
            batch: list[bytes] = []
            for name in self.client.scan_iter(match=self.keys.pattern(), count=1000):
                if name.startswith(lock_prefix):
                    continue
                n += name.startswith(value_prefix)
                batch.append(name)
                if len(batch) >= 1000:
                    self.client.unlink(*batch)
                    batch = []
            if batch:
                self.client.unlink(*batch)
        return n

    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        """A lease ``SET NX PX``; released by an atomic compare-and-delete of our token."""
        name = self.keys.lock(key)
        ttl_ms = max(1, int(timeout * 1000))

        def try_add(token: str, ttl: float) -> bool:
            with self._guard("lock"):
                return bool(self.client.set(name, token, nx=True, px=ttl_ms))

        def read() -> str | None:
            with self._guard("lock"):
                raw = self.client.get(name)
            # A lease is a token we wrote; anything else (planted bytes) is just not our token.
            return None if raw is None else raw.decode("utf-8", "replace")

        def release(token: str) -> None:
            with self._guard("unlock"):
                self._script("delete_if")(keys=[name], args=[token])

        def remove() -> None:
            with self._guard("unlock"):
                self.client.delete(name)

        return LeaseLock(try_add, read, remove, ttl=timeout, release=release)


def _describe_error(e: BaseException) -> str:
    """An error's message for logs: its text, or its type when the text is empty."""
    return str(e) or type(e).__name__
