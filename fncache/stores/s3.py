"""A store in an S3 bucket (AWS S3 or a compatible server: MinIO, SeaweedFS, Ceph, R2), via s3fs.

Layout under ``s3://bucket/prefix`` (names checked by :mod:`fncache.stores._s3_layout`):

===================================  ===============================================================
``prefix/v2/ab/KEY``                 the value of key ``KEY``, one immutable object; the first two
                                     hex digits fan the keys out. Its user metadata names the
                                     function's group (and the expiry, if any)
``prefix/f/GROUP/KEY[~EXPIRES]``     its metadata (small JSON), written after the value, under the
                                     *group* of its function (the function id, percent-encoded):
                                     one function's entries are one prefix listing
``prefix/u/GROUP``                   usage records of the group's entries: ``{KEY: [last, uses]}``
``prefix/s/metas``                   the metadata names as last listed, for ``summary()``
``prefix/locks/KEY``                 a lock lease (JSON: token, created, expires)
===================================  ===============================================================

(The earlier layout, ``prefix/v1/ab/KEY`` with ``KEY.json`` beside it, is not read: such entries
are misses and are recomputed; ``clear`` removes them.)

This module owns the client, the deadline and the reads and writes of single entries. It hands its
error guard, paged listing, batch removal, client and deadline to its listing
(:class:`~fncache.stores._s3_listing.S3Listing`: listings, usage records, batch deletes) and
calls it through its public methods; the paths are :class:`~fncache.stores._s3_layout.S3Paths`
and the names and records of the layout are in :mod:`fncache.stores._s3_layout`, the checks of
the URL and options in :mod:`fncache.stores._s3_config`, and what an s3fs or botocore error means
in :mod:`fncache.stores._s3_errors`.

Guarantees and failure modes:

* ``add`` writes with ``If-None-Match: *``. Where the server enforces it (AWS S3 since 2024, MinIO,
  SeaweedFS, R2) exactly one of concurrent adds wins; the losers get HTTP 412 (recognised by the
  status code, not by an exception class) and return ``False``. Where a server ignores the header,
  every concurrent add returns ``True`` and the last upload wins; keys are content-addressed, so
  the surviving value is still a correct one.
* A value is one object, so readers see all of it or nothing. Values of ``2 * part_size`` bytes or
  more (default part size 50 MiB) are uploaded in parts, and S3 publishes a multipart upload only
  when it completes.
* ``expire`` is kept in the object's user metadata (``x-amz-meta-fncache-expires``) and checked on
  read, since S3 has no per-object expiry (lifecycle rules count whole days): an expired entry
  reads as missing, and is deleted when read or when an ``add`` finds it in its way.
* ``listing()`` (``clear``, ``prune``) is three paginated listings (values, metadata names, usage
  objects; 1000 objects per request) plus one GET per function with usage records, never a request
  per entry; ``summary()`` (``info``, ``ls``) skips the metadata names' listing while their cached
  copy holds the listed values but a few (probed). ``entries()`` adds one small concurrent GET per entry (its
  metadata). ``accessed`` is the last use from the usage records (S3 does not track reads).
  ``clear()`` and ``clear_function()`` delete in batches of 1000.
* ``lock()`` is best effort: a lease object created with ``If-None-Match: *``, taken over by
  deleting it once its ``expires`` time has passed. S3 has no atomic expiry, so two waiters that
  see the same expired lease can both take it, and the expiry is judged by the waiters' clocks.
  A lock only saves duplicate work; correctness never depends on it.
* Network failures, time-outs (``connect_timeout`` 5 s, ``read_timeout`` 60 s), denied access,
  other HTTP errors and any other error of the client raise :class:`fncache.StoreError`. The
  client is created on first use and again in a child process after ``fork``.
* Deadline: one operation (a request with all of s3fs's and botocore's retries, which would
  otherwise multiply the time-outs) is cancelled after ``timeout`` seconds (default
  ``connect_timeout + read_timeout``), plus 1 s per MiB of value transferred, and raises
  :class:`fncache.StoreError`. Listings get that deadline per page of 1000 objects.
* What the bucket returns is untrusted. Only objects at ``v2/ab/KEY`` (``KEY`` 32 hex digits,
  starting ``ab``) are entries and only names of the layout above are used, each checked before
  use (groups against the encoding fncache writes, never ``.`` or ``..``; keys against 32 hex
  digits), so a deletion by key removes exactly the objects that were listed for it. Sizes are the
  listed sizes of the values, never a size a record claims; metadata over 1 MiB is not fetched;
  usage objects are read up to 8 MiB; lease records up to 1 KiB; JSON nested over 16 levels or of
  the wrong types is damage (a damaged lease is taken over, damaged metadata or an entry listed
  under two functions is listed as damaged, a damaged usage record is ignored). A usage record
  only ranks entries for ``ls --sort used`` and cleanup; it never touches a value.

Credentials and secrets: the endpoint and credentials come from the options ``endpoint_url=``,
``key=``, ``secret=``, ``token=`` (and ``client_kwargs=``) or, when not given, from the usual AWS
configuration (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, instance roles). ``key``, ``secret``, ``token`` and their
``client_kwargs`` spellings are kept out of ``options`` and are never pickled: a store unpickled in
another process authenticates with that process's AWS configuration (a warning is logged when a
store given explicit credentials is pickled). Prefer the environment when functions travel.

Other options: ``part_size`` (bytes, default 50 MiB), ``connect_timeout``, ``read_timeout``,
``retries`` (s3fs retries of transient errors, default 3), ``timeout`` (the deadline above); any
other keyword of :class:`s3fs.S3FileSystem` goes to it. Unknown options raise
:class:`fncache.ConfigError` when the store is created.
"""

from __future__ import annotations

import logging
import os
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
from fncache.stores._s3_client import abandon, get_object
from fncache.stores._s3_config import SECONDS_PER_BYTE, check_options, check_s3, take_secrets
from fncache.stores._s3_errors import EXISTS, http_status, is_missing_key
from fncache.stores._s3_layout import EXPIRES_META, GROUP_META, S3Paths, expires_at, group_of
from fncache.stores._s3_listing import S3Listing

__all__ = ["S3Store"]

log = logging.getLogger("fncache")

# A lease record is about 100 bytes: only its first KiB is ever read.
_MAX_LEASE = 1024


def _function(meta: dict[str, Any]) -> str:
    function = meta.get("function")
    return function if isinstance(function, str) else ""



def _filed_meta(raw: Any, metadata: Any) -> dict[str, Any]:
    """The metadata object ``raw`` parsed, if it is at most 1 MiB and names the function of the
    group its value is filed under (``metadata``), else ``{}`` (damage, as in listings)."""
    meta = (parse_meta(raw) if len(raw) <= MAX_JSON_BYTES else None) or {}
    if meta and group_of(_function(meta)) != (metadata or {}).get(GROUP_META):
        return {}
    return meta


class S3Store(Store):
    """A store under ``s3://bucket/prefix``; see the module documentation."""

    kind = "s3"
    far_tier_options: ClassVar[dict[str, Any]] = {
        "connect_timeout": 2.0, "read_timeout": 5.0, "retries": 1}

    def __init__(
        self,
        url: str,
        *,
        part_size: int = 50 * 2**20,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        retries: int = 3,
        timeout: float | None = None,
        **options: Any,
    ) -> None:
        bucket, prefix = check_s3(url, part_size, connect_timeout, read_timeout, timeout, retries)
        check_options(options)
        secrets, secret_client = take_secrets(options)
        options.update(
            part_size=part_size,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries=retries,
        )
        if timeout is not None:
            options["timeout"] = timeout
        #: total seconds one operation may take (value transfers add 1 s per MiB); then StoreError
        self.timeout = float(timeout if timeout is not None else connect_timeout + read_timeout)
        super().__init__(url, **options)
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        #: the paths of the store's objects
        self.paths = S3Paths(bucket, self.prefix)
        self._listing = S3Listing(self.paths, guard=self._guard, list_objects=self._list,
                                  remove=self._remove, fs=lambda: self.fs, timeout=self.timeout)
        self._secrets = secrets
        self._secret_client_kwargs = secret_client
        self._fs: Any = None
        self._pid = 0

    # -- connection ------------------------------------------------------------------------------
    @property
    def fs(self) -> Any:
        """The :class:`s3fs.S3FileSystem`, created on first use and again after a fork."""
        if self._fs is None or self._pid != os.getpid():
            import s3fs

            if self._fs is not None:
                abandon(self._fs)

            opts = dict(self.options)
            part_size = opts.pop("part_size")
            retries = opts.pop("retries")
            opts.pop("timeout", None)
            config = dict(opts.pop("config_kwargs", None) or {})
            config.setdefault("connect_timeout", opts.pop("connect_timeout"))
            config.setdefault("read_timeout", opts.pop("read_timeout"))
            # botocore's own retries come on top of s3fs's: keep them few, so a dead server fails
            # within seconds instead of minutes.
            config.setdefault("retries", {"max_attempts": 2, "mode": "standard"})
            client_kwargs = dict(
                opts.pop("client_kwargs", None) or {}, **self._secret_client_kwargs
            )
            try:
                self._fs = s3fs.S3FileSystem(
                    **self._secrets,
                    **opts,
                    client_kwargs=client_kwargs,
                    config_kwargs=config,
                    default_block_size=part_size,
                    # A private instance: fsspec's instance cache would hand the same client to
                    # stores with other options, and listings must never come from a stale cache.
                    skip_instance_cache=True,
                    use_listings_cache=False,
                )
            except (TypeError, ValueError, KeyError) as e:
                raise ConfigError(f"store: invalid S3 option for {redact(self.url)!r}: {e}") from e
            # A class attribute in s3fs, not a constructor argument.
            self._fs.retries = retries
            self._pid = os.getpid()
        return self._fs

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Turn s3fs's, botocore's and aiohttp's errors into :class:`StoreError`.

        Every exception, not a list of known ones: s3fs, aiobotocore and aiohttp raise many kinds
        (and time-outs surface as ``FSTimeoutError`` or ``asyncio.TimeoutError``), and none of them
        may reach the caller of a memoized function.
        """
        try:
            yield
        except (ConfigError, StoreError):
            raise
        except Exception as e:
            status = http_status(e)
            raise store_error(self, what, e, f" (HTTP {status})" if status else "") from e

    def close(self) -> None:
        # s3fs closes its session when the filesystem is garbage-collected; dropping it is enough.
        self._fs = None

    def __reduce__(self) -> tuple[Any, ...]:
        if self._secrets or self._secret_client_kwargs:
            log.warning(
                "s3 store %s: its credentials are not pickled; the unpickled store uses the AWS "
                "configuration (environment, profile) of the process that loads it",
                self.url,
            )
        return super().__reduce__()

    # -- paths -----------------------------------------------------------------------------------
    def _value_path(self, key: str) -> str:
        return self.paths.value(key)

    def _meta_path(self, key: str, group: str, expires: float | None) -> str:
        return self.paths.meta(key, group, expires)

    def _meta_path_of(self, key: str, metadata: dict[str, str] | None) -> str | None:
        """The metadata object of the value at ``key`` (:meth:`S3Paths.meta_of`)."""
        return self.paths.meta_of(key, metadata)

    def _split(self, path: str) -> tuple[str, str]:
        return self.paths.split(path)

    def _call(self, method: str, *args: Any, transfer: int = 0, **kwargs: Any) -> Any:
        """``fs._<method>(*args, **kwargs)`` run with this store's deadline.

        The deadline (``timeout``, default ``connect_timeout + read_timeout``, plus 1 s per MiB of
        ``transfer``) covers the whole operation, s3fs's and botocore's retries included: at that
        point the request is cancelled and :class:`fsspec.exceptions.FSTimeoutError` raised.
        """
        from fsspec.asyn import sync

        fs = self.fs
        deadline = self.timeout + transfer * SECONDS_PER_BYTE
        return sync(fs.loop, getattr(fs, "_" + method), *args, timeout=deadline, **kwargs)

    def _head(self, path: str) -> dict[str, Any] | None:
        """The HEAD response of ``path``, or ``None`` if there is no such object."""
        bucket, key = self._split(path)
        try:
            return dict(self._call("call_s3", "head_object", Bucket=bucket, Key=key))
        except FileNotFoundError as e:
            if is_missing_key(e):
                return None
            raise

    def _list(self, under: str) -> Iterator[tuple[str, int, Any]]:
        """``(name, size, last_modified)`` of every object under the path ``under`` (``name``
        relative to it), page by page.

        Each page is one request under the store's deadline, so a large bucket lists as long as
        it needs while a frozen server fails the listing within the deadline.
        """
        prefix = self._split(under)[1] + "/"
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            try:
                page = self._call("call_s3", "list_objects_v2", **kwargs)
            except FileNotFoundError as e:
                if is_missing_key(e):
                    return
                raise
            for item in page.get("Contents") or ():
                name, size = item.get("Key"), item.get("Size")
                if isinstance(name, str) and name.startswith(prefix) and isinstance(size, int) \
                        and size >= 0:
                    yield name[len(prefix):], size, item.get("LastModified")
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    @staticmethod
    def _expired(metadata: dict[str, str] | None) -> bool:
        expires = expires_at(metadata)
        return expires is not None and expires <= now()

    def _remove(self, paths: list[str]) -> None:
        """Delete objects in batches of 1000 (S3's limit); missing ones are no error."""
        for i in range(0, len(paths), 1000):
            objects = [{"Key": self._split(p)[1]} for p in paths[i : i + 1000]]
            self._call(
                "call_s3", "delete_objects", Bucket=self.bucket,
                Delete={"Objects": objects, "Quiet": True},
            )

    # -- reading ---------------------------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        """The value at ``key`` or ``None``: one GET. An expired value reads as ``None``."""
        from fsspec.asyn import sync

        path = self._value_path(key)
        with self._guard("read"):
            fs = self.fs
            try:
                # The deadline is applied inside, to the request and then to the body by its length.
                metadata, data = sync(fs.loop, get_object, fs, *self._split(path), self.timeout)
            except FileNotFoundError as e:
                if is_missing_key(e):
                    return None
                raise
            if self._expired(metadata):
                self._remove([path, *filter(None, [self._meta_path_of(key, metadata)])])
                return None
            return bytes(data)

    def contains(self, key: str) -> bool:
        with self._guard("lookup"):
            head = self._head(self._value_path(key))
        return head is not None and not self._expired(head.get("Metadata"))

    def get_meta(self, key: str) -> dict[str, Any]:
        """The entry's metadata object, found through the group its value names (one HEAD), then
        one ranged GET: nothing over 1 MiB is fetched. Metadata naming another function than the
        group it is filed under is damage (``{}``), as in :meth:`entries`."""
        with self._guard("lookup"):
            path, metadata = self._meta_path_for(key)
            if path is None:
                return {}
            raw = self._fetch_meta(path)
            if raw is None:
                return {}
        return _filed_meta(raw, metadata)

    def _meta_path_for(self, key: str) -> tuple[str | None, Any]:
        """(the path of an entry's metadata object, its value's S3 metadata) from one HEAD of the
        value; no path if the value is missing or expired."""
        head = self._head(self._value_path(key))
        metadata = None if head is None else head.get("Metadata")
        if head is None or self._expired(metadata):
            return None, metadata
        return self._meta_path_of(key, metadata), metadata

    def _fetch_meta(self, path: str) -> Any:
        """The first MiB (and a byte) of a metadata object, or None if it is missing."""
        try:
            return self._call("cat_file", path, start=0, end=MAX_JSON_BYTES + 1)
        except FileNotFoundError as e:
            if is_missing_key(e):
                return None
            raise

    def listing(self) -> Iterator[EntryInfo]:
        """Every live entry from three paginated listings (values, metadata names, usage objects)
        and one GET per function that has usage records: never a request per entry.

        Sizes and creation times are the listed values' sizes and modification times, the function
        is the group its metadata object is listed under, expiry is in that object's name, the
        last use and count come from the group's usage object. ``meta`` is ``{"function": ...}``.
        """
        return self._listing.listing()

    def summary(self) -> list[FunctionSummary]:
        """:meth:`Store.summary`, the metadata names from their cached listing and probes of the few
        values it lacks (:mod:`~fncache.stores._s3_snapshot`), else listed and cached again."""
        return self._listing.summary()

    def entries(self) -> Iterator[EntryInfo]:
        """Every live entry with its metadata: :meth:`listing`, then the metadata objects in
        concurrent GETs (1000 at a time).

        The bucket is untrusted. Only objects at the places fncache writes them (see
        :mod:`fncache.stores._s3_layout`) count, so deleting an entry by its key deletes exactly
        the objects listed for it; anything else under the prefix is ignored here (and removed by
        :meth:`clear`). Metadata over 1 MiB is not fetched; metadata of the wrong types, or naming
        another function than the group it is listed under, marks the entry damaged; an entry
        listed under two groups is damaged.
        """
        return self._listing.entries()

    # -- usage records ---------------------------------------------------------------------------
    def record_use(self, uses: list[Use]) -> None:
        """Merge uses into each function's usage object ``u/GROUP``: one ranged GET and one
        conditional PUT per function (``If-Match`` its ETag, or ``If-None-Match: *`` when new),
        the functions concurrently (16 at a time), each retried twice when another writer got in
        between; where a server ignores the condition the last writer wins and some counts are
        lost (never a value)."""
        self._listing.record_use(uses)

    # -- writing ---------------------------------------------------------------------------------
    def add(
        self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None
    ) -> bool:
        """Store ``value`` unless ``key`` exists; a create-only PUT (``If-None-Match: *``), then
        the metadata object.

        Exactly one concurrent add wins on servers that enforce the condition (see the module
        documentation for those that do not). An expired entry in the way is deleted first.
        """
        path = self._value_path(key)
        value = join_parts(value)  # type: ignore[assignment]
        group = group_of(_function(meta))
        with self._guard("write"):
            for _ in range(2):
                expires = None if expire is None else now() + expire
                if self._put(path, value, group, expires, create_only=True):
                    self._put_meta(key, group, value, meta, expires)
                    return True
                head = self._head(path)
                if head is None or not self._expired(head.get("Metadata")):
                    return False
                # Someone's expired entry: remove it and try once more.
                self._remove([path, *filter(None, [self._meta_path_of(key, head.get("Metadata"))])])
        return False

    def set(
        self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None
    ) -> None:
        """Store ``value`` at ``key``, replacing any entry; one PUT, so readers see old or new.
        The old entry's metadata object goes after the new one is written, if its name differs."""
        path = self._value_path(key)
        value = join_parts(value)  # type: ignore[assignment]
        group = group_of(_function(meta))
        expires = None if expire is None else now() + expire
        with self._guard("write"):
            head = self._head(path)
            old = None if head is None else self._meta_path_of(key, head.get("Metadata"))
            self._put(path, value, group, expires, create_only=False)
            new = self._put_meta(key, group, value, meta, expires)
            if old is not None and old != new:
                self._remove([old])

    def _put(self, path: str, value: bytes, group: str, expires: float | None,
             create_only: bool) -> bool:
        """PUT ``value`` (multipart when large); ``False`` if create-only and the object exists."""
        metadata = {GROUP_META: group}
        if expires is not None:
            metadata[EXPIRES_META] = repr(expires)
        try:
            self._call(
                "pipe_file",
                path,
                bytes(value),
                transfer=len(value),
                mode="create" if create_only else "overwrite",
                chunksize=self.options["part_size"],
                Metadata=metadata,
            )
        except Exception as e:  # s3fs raises OSError subclasses or botocore errors; re-raised
            if create_only and http_status(e) in EXISTS:
                return False
            raise
        return True

    def _put_meta(self, key: str, group: str, value: bytes, meta: dict[str, Any],
                  expires: float | None) -> str:
        meta = dict(meta, size=len(value), created=meta.get("created") or now())
        if expires is not None:
            meta["expires"] = expires
        path = self._meta_path(key, group, expires)
        self._call("pipe_file", path, encode_meta(meta))
        return path

    def delete(self, key: str) -> bool:
        """Remove the entry (its value, and the metadata object its value names); ``True`` if
        there was one. Idempotent."""
        path = self._value_path(key)
        with self._guard("delete"):
            head = self._head(path)
            meta = None if head is None else self._meta_path_of(key, head.get("Metadata"))
            self._remove([path, *filter(None, [meta])])
        return head is not None

    def delete_many(self, keys: list[str]) -> int:
        """Remove many entries in batches: below 100 keys one :meth:`delete` each, else two
        listings (values, metadata names) and ``DeleteObjects`` of 1000 objects a request, never a
        request per entry. Returns how many of ``keys`` had a value."""
        if len(keys) < 100:
            return super().delete_many(keys)
        return self._listing.delete_many(keys)

    def clear_function(self, function: str) -> int:
        """Remove the entries of ``function``: one prefix listing of its group, deletes in
        batches of 1000, and its usage object. Returns the number of entries listed.

        Not atomic: entries added during the listing may survive.
        """
        return self._listing.clear_function(function)

    def clear(self) -> int:
        """Delete every object under ``prefix/v2``, ``f``, ``u``, ``s`` (and the earlier layout's
        ``v1``), not the locks; returns the number of values.

        Not atomic: entries added during the listing may survive.
        """
        n = 0
        with self._guard("clear"):
            for under in (self.paths.values, self.paths.metas, self.paths.usage,
                          f"{self.paths.base}/s", f"{self.paths.base}/v1"):
                paths = [f"{under}/{name}" for name, _, _ in self._list(under)]
                n += len(paths) if under == self.paths.values else 0
                self._remove(paths)
        return n

    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        """A best-effort lease object; see the module documentation for its limits."""
        path = self.paths.lock(key)

        def read_lease() -> dict[str, Any] | None:
            # Untrusted: only its first KiB is read; unreadable or oversized reads as ``{}``,
            # which has no valid expiry and is taken over.
            try:
                raw = self._call("cat_file", path, start=0, end=_MAX_LEASE + 1)
            except FileNotFoundError:
                return None
            return (parse_meta(raw) if len(raw) <= _MAX_LEASE else None) or {}

        def try_add(token: str, ttl: float) -> bool:
            t = now()
            lease = encode_meta({"token": token, "created": t, "expires": t + ttl})
            with self._guard("lock"):
                for _ in range(2):
                    try:
                        self._call("pipe_file", path, lease, mode="create")
                        return True
                    except Exception as e:
                        if http_status(e) not in EXISTS:
                            raise
                    held = read_lease()
                    if held is None:
                        # Gone since the create was refused (released), or not found for a moment
                        # (a server that just said it exists): create again, never delete what
                        # may be a live holder's lease.
                        continue
                    expires = held.get("expires")
                    if isinstance(expires, (int, float)) and not isinstance(expires, bool) \
                            and expires > now():
                        return False
                    # Expired or unreadable: its holder died or overran; take the lease over.
                    self._remove([path])
            return False

        def read() -> str | None:
            with self._guard("lock"):
                held = read_lease()
            token = None if held is None else held.get("token")
            return None if held is None else token if isinstance(token, str) else ""

        def remove() -> None:
            with self._guard("unlock"):
                self._remove([path])

        return LeaseLock(try_add, read, remove, ttl=timeout)
