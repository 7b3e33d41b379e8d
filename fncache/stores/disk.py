"""The default store: a diskcache ``Cache`` in a local directory.

Layout: the value of key ``K`` is stored at diskcache key ``K``, its metadata (JSON) at ``"m:" + K``,
both tagged with the function id so that clearing one function is one indexed delete. Small values
live in SQLite, values over 32 KiB in files beside it; diskcache writes the file first and publishes
the row in one transaction, so a crash leaves at most an orphan file, never a half-visible entry.

diskcache is safe for many threads and processes on one machine. It is *not* safe on NFS or other
network file systems (SQLite locking): use a Redis or S3 store to share a cache between machines.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from fncache._errors import StoreError
from fncache.stores._base import EntryInfo, Store, decode_meta, encode_meta, now
from fncache.stores._lock import LeaseLock

__all__ = ["DiskStore"]

_META = "m:"
_LOCK = "l:"
# diskcache's default is 1 GiB with silent eviction; a function cache must not drop results unasked.
_UNLIMITED = 2**62


class DiskStore(Store):
    """A diskcache-backed store in ``directory`` (created with mode 0700).

    Options: ``size_limit`` (bytes; least recently used entries are evicted past it, default unlimited),
    and any other keyword is passed to :class:`diskcache.Cache`.
    """

    kind = "disk"

    def __init__(self, url: str, size_limit: int | None = None, **options: Any) -> None:
        if size_limit is not None and (not isinstance(size_limit, int) or size_limit <= 0):
            from fncache._errors import ConfigError

            raise ConfigError(f"size_limit: expected a positive number of bytes, got {size_limit!r}")
        if size_limit is not None:
            options["size_limit"] = size_limit
        super().__init__(url, **options)
        self.directory = url
        self._cache: Any = None

    @property
    def cache(self) -> Any:
        """The underlying :class:`diskcache.Cache`, opened on first use."""
        if self._cache is None:
            import diskcache

            opts = dict(self.options)
            limit = opts.pop("size_limit", None)
            opts.setdefault("eviction_policy", "least-recently-used" if limit else "none")
            try:
                if not os.path.isdir(self.directory):
                    # 0700: loading a pickle runs code, so nobody else may plant entries here.
                    os.makedirs(self.directory, mode=0o700, exist_ok=True)
                self._cache = diskcache.Cache(
                    self.directory, size_limit=limit or _UNLIMITED, tag_index=True, **opts
                )
            except (OSError, sqlite3.Error) as e:
                raise StoreError(f"cannot open cache directory {self.directory!r}: {e}") from e
        return self._cache

    def _guard(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (OSError, sqlite3.Error) as e:
            if isinstance(e, sqlite3.Error) or getattr(e, "errno", None) in (
                errno.ENOENT,
                errno.ESTALE,
            ):
                # The directory vanished or its database broke under us: reopen next time.
                self.close()
            raise StoreError(f"{what} failed on {self.directory!r}: {e}") from e

    def get(self, key: str) -> bytes | None:
        value = self._guard("read", self.cache.get, key, default=None, retry=True)
        return value if isinstance(value, (bytes, bytearray)) else None

    def contains(self, key: str) -> bool:
        return bool(self._guard("lookup", self.cache.__contains__, key))

    def add(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> bool:
        tag = meta.get("function") or None
        added = self._guard(
            "write", self.cache.add, key, bytes(value), expire=expire, tag=tag, retry=True
        )
        if added:
            meta = dict(meta, size=len(value), created=meta.get("created") or now())
            self._guard(
                "write", self.cache.set, _META + key, encode_meta(meta), expire=expire, tag=tag,
                retry=True,
            )
        return bool(added)

    def set(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> None:
        tag = meta.get("function") or None
        meta = dict(meta, size=len(value), created=meta.get("created") or now())
        self._guard(
            "write", self.cache.set, key, bytes(value), expire=expire, tag=tag, retry=True
        )
        self._guard(
            "write", self.cache.set, _META + key, encode_meta(meta), expire=expire, tag=tag, retry=True
        )

    def delete(self, key: str) -> bool:
        found = self._guard("delete", self.cache.delete, key, retry=True)
        self._guard("delete", self.cache.delete, _META + key, retry=True)
        return bool(found)

    def entries(self) -> Iterator[EntryInfo]:
        cache = self.cache
        for k in self._guard("list", lambda: list(cache.iterkeys())):
            if not isinstance(k, str) or not k.startswith(_META):
                continue
            raw = self._guard("read", cache.get, k, default=None, retry=True)
            if raw is None:
                continue
            meta = decode_meta(raw)
            created = float(meta.get("created") or 0.0)
            accessed = meta.get("accessed")
            yield EntryInfo(
                key=k[len(_META) :],
                size=int(meta.get("size") or 0),
                created=created,
                accessed=float(accessed) if accessed else None,
                meta=meta,
            )

    def volume(self) -> int:
        return int(self._guard("stat", self.cache.volume))

    def __len__(self) -> int:
        # Values and their metadata are two rows each; locks are short-lived extras.
        return sum(1 for _ in self.entries())

    def clear(self) -> int:
        n = len(self)
        self._guard("clear", self.cache.clear, retry=True)
        return n

    def clear_function(self, function: str) -> int:
        """Remove every entry of ``function`` (``module:qualname``) in one indexed delete."""
        n = sum(1 for e in self.entries() if e.function == function)
        self._guard("clear", self.cache.evict, function, retry=True)
        return n

    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        cache = self.cache
        name = _LOCK + key

        def try_add(token: str, ttl: float) -> bool:
            return bool(self._guard("lock", cache.add, name, token, expire=ttl, retry=True))

        return LeaseLock(
            try_add,
            lambda: self._guard("lock", cache.get, name, default=None, retry=True),
            lambda: self._guard("lock", cache.delete, name, retry=True),
            ttl=timeout,
        )

    def close(self) -> None:
        cache, self._cache = self._cache, None
        if cache is not None:
            try:
                cache.close()
            except Exception:  # closing a broken handle must not mask the original error
                pass
