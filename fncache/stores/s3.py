"""A store in an S3 bucket (AWS S3 or a compatible server: MinIO, SeaweedFS, Ceph, R2), via s3fs.

Layout under ``s3://bucket/prefix``:

================================  ==================================================================
``prefix/v1/ab/abcdef...``        the value of key ``abcdef...``, one immutable object; the first
                                  two hex digits fan the keys out over 256 "directories"
``prefix/v1/ab/abcdef....json``   its metadata (small JSON), written after the value
``prefix/locks/abcdef...``        a lock lease (JSON: token, created, expires)
================================  ==================================================================

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
* ``entries()`` is one paginated listing plus one small concurrent GET per entry (its metadata);
  ``accessed`` is ``None`` (S3 does not track reads). ``clear()`` deletes in batches of 1000.
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
* What the bucket returns is untrusted. Only objects at ``v1/ab/KEY`` (``KEY`` 32 hex digits,
  starting ``ab``) are entries, so a deletion by key removes exactly the object that was listed;
  metadata over 1 MiB is not fetched; lease records are read up to 1 KiB; JSON nested over 16
  levels or of the wrong types is damage (a damaged lease is taken over, damaged metadata is
  listed as damaged).

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
import re
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from fncache._errors import ConfigError, StoreError
from fncache.stores._base import (
    MAX_JSON_BYTES,
    EntryInfo,
    Store,
    encode_meta,
    entry_info,
    join_parts,
    now,
    parse_meta,
    store_error,
)
from fncache.stores._lock import LeaseLock
from fncache.stores._s3_config import check_options, check_s3, take_secrets

__all__ = ["S3Store"]

log = logging.getLogger("fncache")

_EXPIRES = "fncache-expires"
_LIST_BATCH = 1000
# 412: the object exists (If-None-Match). 409: AWS's answer when another conditional write to the
# same key is in flight; for a content-addressed key that other writer stores the same value.
_EXISTS = (412, 409)
# A lease record is about 100 bytes: only its first KiB is ever read.
_MAX_LEASE = 1024
# Value transfers get this much time per byte on top of the operation deadline (1 s per MiB).
_SECONDS_PER_BYTE = 1 / 2**20
_KEY = re.compile(r"[0-9a-f]{32}")


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status behind an s3fs/botocore error, following ``__cause__`` and ``__context__``.

    s3fs translates a 412 into a plain ``OSError(EINVAL)`` unless the server names the failed
    condition, so the class of the exception says nothing reliable; the status does.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status is None:
                code = response.get("Error", {}).get("Code")
                status = int(code) if isinstance(code, str) and code.isdigit() else None
            if status is not None:
                return int(status)
        todo += [e.__cause__, e.__context__]
    return None


def _error_code(exc: BaseException) -> str | None:
    """The S3 error code (``NoSuchKey``, ``NoSuchBucket``...) behind an s3fs/botocore error."""
    e: BaseException | None = exc
    for _ in range(5):
        if e is None:
            break
        response = getattr(e, "response", None)
        if isinstance(response, dict) and response.get("Error", {}).get("Code"):
            return str(response["Error"]["Code"])
        e = e.__cause__ or e.__context__
    return None


def _is_missing_key(exc: FileNotFoundError) -> bool:
    """A 404 for the object, not for the bucket: only the former is a cache miss."""
    return _error_code(exc) != "NoSuchBucket"


# Clients inherited over fork: never used or closed in this process, only kept from collection.
_ABANDONED: list[Any] = []


def _abandon(fs: Any) -> None:
    """Drop a client inherited from the parent process over ``fork`` without closing it.

    s3fs closes a client's HTTP session when it is garbage-collected, on the client's event loop.
    In a forked child that loop's thread does not exist: the close would stall for a second and
    log "attached to a different loop" errors, and its sockets belong to the parent anyway. So the
    close is cancelled (``weakref.finalize`` entries are found in CPython's registry), and the
    client is kept referenced, since aiohttp warns about sessions collected unclosed.
    """
    _ABANDONED.append(fs)
    registry = getattr(weakref.finalize, "_registry", None)
    for finalizer in list(registry or ()):
        info = finalizer.peek()
        if info is not None and info[0] is fs:
            finalizer.detach()


async def _get_object(
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
        extra = length * _SECONDS_PER_BYTE if isinstance(length, int) and length > 0 else 0.0
        data = await asyncio.wait_for(body.read(), deadline + extra)
    finally:
        body.close()
    return resp.get("Metadata") or {}, data


class S3Store(Store):
    """A store under ``s3://bucket/prefix``; see the module documentation."""

    kind = "s3"

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
        base = f"{bucket}/{self.prefix}" if self.prefix else bucket
        self._values = f"{base}/v1"
        self._locks = f"{base}/locks"
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
                _abandon(self._fs)

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
                raise ConfigError(f"store: invalid S3 option for {self.url!r}: {e}") from e
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
            status = _http_status(e)
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
        return f"{self._values}/{key[:2]}/{key}"

    def _split(self, path: str) -> tuple[str, str]:
        bucket, _, key = path.partition("/")
        return bucket, key

    def _call(self, method: str, *args: Any, transfer: int = 0, **kwargs: Any) -> Any:
        """``fs._<method>(*args, **kwargs)`` run with this store's deadline.

        The deadline (``timeout``, default ``connect_timeout + read_timeout``, plus 1 s per MiB of
        ``transfer``) covers the whole operation, s3fs's and botocore's retries included: at that
        point the request is cancelled and :class:`fsspec.exceptions.FSTimeoutError` raised.
        """
        from fsspec.asyn import sync

        fs = self.fs
        deadline = self.timeout + transfer * _SECONDS_PER_BYTE
        return sync(fs.loop, getattr(fs, "_" + method), *args, timeout=deadline, **kwargs)

    def _head(self, path: str) -> dict[str, Any] | None:
        """The HEAD response of ``path``, or ``None`` if there is no such object."""
        bucket, key = self._split(path)
        try:
            return dict(self._call("call_s3", "head_object", Bucket=bucket, Key=key))
        except FileNotFoundError as e:
            if _is_missing_key(e):
                return None
            raise

    def _list(self) -> Iterator[tuple[str, int, Any]]:
        """``(path, size, last_modified)`` of every object under ``prefix/v1``, page by page.

        Each page is one request under the store's deadline, so a large bucket lists as long as
        it needs while a frozen server fails the listing within the deadline.
        """
        prefix = self._split(self._values)[1] + "/"
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            try:
                page = self._call("call_s3", "list_objects_v2", **kwargs)
            except FileNotFoundError as e:
                if _is_missing_key(e):
                    return
                raise
            for item in page.get("Contents") or ():
                name, size = item.get("Key"), item.get("Size")
                if isinstance(name, str) and isinstance(size, int):
                    yield f"{self.bucket}/{name}", size, item.get("LastModified")
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    @staticmethod
    def _expired(metadata: dict[str, str] | None) -> bool:
        raw = (metadata or {}).get(_EXPIRES)
        try:
            return raw is not None and float(raw) <= now()
        except ValueError:
            return False

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
                metadata, data = sync(fs.loop, _get_object, fs, *self._split(path), self.timeout)
            except FileNotFoundError as e:
                if _is_missing_key(e):
                    return None
                raise
            if self._expired(metadata):
                self._remove([path, path + ".json"])
                return None
            return bytes(data)

    def contains(self, key: str) -> bool:
        with self._guard("lookup"):
            head = self._head(self._value_path(key))
        return head is not None and not self._expired(head.get("Metadata"))

    def get_meta(self, key: str) -> dict[str, Any]:
        """The entry's metadata object: one ranged GET, so nothing over 1 MiB is fetched."""
        path = self._value_path(key) + ".json"
        with self._guard("lookup"):
            try:
                raw = self._call("cat_file", path, start=0, end=MAX_JSON_BYTES + 1)
            except FileNotFoundError as e:
                if _is_missing_key(e):
                    return {}
                raise
        return (parse_meta(raw) if len(raw) <= MAX_JSON_BYTES else None) or {}

    def entries(self) -> Iterator[EntryInfo]:
        """Every live entry: a paginated listing, then the metadata objects in concurrent GETs.

        The listing is untrusted. Only objects at the place fncache writes them (``v1/ab/KEY`` for a
        32-hex-digit ``KEY`` starting ``ab``) are entries, so deleting an entry by its key deletes
        exactly the object listed; anything else under the prefix is ignored here (and removed by
        :meth:`clear`). Sizes are the listed object sizes; metadata larger than 1 MiB is not
        fetched, and metadata of the wrong types marks the entry damaged.
        """
        with self._guard("list"):
            listing = {path: (size, modified) for path, size, modified in self._list()}
        values = {
            p: v for p, v in listing.items()
            if _KEY.fullmatch(p.rsplit("/", 1)[1]) and p == self._value_path(p.rsplit("/", 1)[1])
        }
        names = list(values)
        t = now()
        for i in range(0, len(names), _LIST_BATCH):
            batch = names[i : i + _LIST_BATCH]
            wanted = [p + ".json" for p in batch
                      if 0 < listing.get(p + ".json", (0, None))[0] <= MAX_JSON_BYTES]
            with self._guard("list"):
                metas = self._call("cat", wanted, on_error="omit") if wanted else {}
            for path in batch:
                size, modified = values[path]
                meta_size = listing.get(path + ".json", (0, None))[0]
                meta = parse_meta(metas.get(path + ".json")) if meta_size <= MAX_JSON_BYTES else None
                expires = (meta or {}).get("expires")
                if isinstance(expires, (int, float)) and not isinstance(expires, bool) \
                        and expires <= t:
                    continue
                try:
                    fallback = modified.timestamp() if modified is not None else None
                except (AttributeError, ValueError, OverflowError):
                    fallback = None
                yield entry_info(path.rsplit("/", 1)[1], size, meta, created=fallback,
                                 damaged=meta is None)

    # -- writing ---------------------------------------------------------------------------------
    def add(
        self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None
    ) -> bool:
        """Store ``value`` unless ``key`` exists; a create-only PUT (``If-None-Match: *``).

        Exactly one concurrent add wins on servers that enforce the condition (see the module
        documentation for those that do not). An expired entry in the way is deleted first.
        """
        path = self._value_path(key)
        value = join_parts(value)  # type: ignore[assignment]
        with self._guard("write"):
            for _ in range(2):
                if self._put(path, value, expire, create_only=True):
                    self._put_meta(path, value, meta, expire)
                    return True
                head = self._head(path)
                if head is None or not self._expired(head.get("Metadata")):
                    return False
                # Someone's expired entry: remove it and try once more.
                self._remove([path, path + ".json"])
        return False

    def set(
        self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None
    ) -> None:
        """Store ``value`` at ``key``, replacing any entry; one PUT, so readers see old or new."""
        path = self._value_path(key)
        value = join_parts(value)  # type: ignore[assignment]
        with self._guard("write"):
            self._put(path, value, expire, create_only=False)
            self._put_meta(path, value, meta, expire)

    def _put(self, path: str, value: bytes, expire: float | None, create_only: bool) -> bool:
        """PUT ``value`` (multipart when large); ``False`` if create-only and the object exists."""
        metadata = {} if expire is None else {_EXPIRES: repr(now() + expire)}
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
            if create_only and _http_status(e) in _EXISTS:
                return False
            raise
        return True

    def _put_meta(
        self, path: str, value: bytes, meta: dict[str, Any], expire: float | None
    ) -> None:
        meta = dict(meta, size=len(value), created=meta.get("created") or now())
        if expire is not None:
            meta["expires"] = now() + expire
        self._call("pipe_file", path + ".json", encode_meta(meta))

    def delete(self, key: str) -> bool:
        """Remove the entry; ``True`` if there was one. Idempotent."""
        path = self._value_path(key)
        with self._guard("delete"):
            found = self._head(path) is not None
            self._remove([path, path + ".json"])
        return found

    def clear(self) -> int:
        """Delete every object under ``prefix/v1`` (not the locks); returns the number of entries.

        Not atomic: entries added during the listing may survive.
        """
        with self._guard("clear"):
            paths = [path for path, _, _ in self._list()]
            self._remove(paths)
        return sum(1 for p in paths if not p.endswith(".json"))

    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        """A best-effort lease object; see the module documentation for its limits."""
        path = f"{self._locks}/{key}"

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
                        if _http_status(e) not in _EXISTS:
                            raise
                    held = read_lease()
                    expires = (held or {}).get("expires")
                    if held is not None and isinstance(expires, (int, float)) \
                            and not isinstance(expires, bool) and expires > now():
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
