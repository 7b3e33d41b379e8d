"""An in-process store, for tests and for caching within one run.

``memory://NAME`` stores opened in one process with the same name share their entries; a copy
unpickled in another process starts empty (there is nothing to connect to).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from fncache import _forks
from fncache.stores._base import EntryInfo, Store, Use, join_parts, now
from fncache.stores._lock import LeaseLock

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A dict guarded by a lock. Every operation is atomic with respect to other threads."""

    kind = "memory"
    lists_cheaply = True

    def __init__(self, url: str = "memory://", **options: Any) -> None:
        super().__init__(url, **options)
        self._lock = threading.Lock()
        _forks.track(self)
        # key -> (value, meta, created, expires_at or None)
        self._data: dict[str, tuple[bytes, dict[str, Any], float, float | None]] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        # key -> (last use, number of uses), from record_use
        self._uses: dict[str, tuple[float, int]] = {}
        self._sources: dict[str, bytes] = {}

    keeps_sources = True

    def put_source(self, address: str, text: bytes) -> None:
        with self._lock:
            self._sources.setdefault(address, bytes(text))

    def get_source(self, address: str) -> bytes | None:
        with self._lock:
            return self._sources.get(address)

    def source_sizes(self) -> dict[str, int]:
        with self._lock:
            return {a: len(t) for a, t in self._sources.items()}

    def delete_sources(self, addresses: Any) -> int:
        with self._lock:
            return sum(self._sources.pop(a, None) is not None for a in list(addresses))

    def reset_after_fork(self) -> None:
        """A forked child: a fresh lock, and no lease (their holders are the parent's threads,
        which the child does not have: waiting for them would wait for nothing)."""
        self._lock = threading.Lock()
        self._leases = {}

    def _live(self, key: str) -> tuple[bytes, dict[str, Any], float, float | None] | None:
        item = self._data.get(key)
        if item is not None and item[3] is not None and item[3] <= now():
            del self._data[key]
            return None
        return item

    def get(self, key: str) -> bytes | None:
        with self._lock:
            item = self._live(key)
        return None if item is None else item[0]

    def contains(self, key: str) -> bool:
        with self._lock:
            return self._live(key) is not None

    def get_meta(self, key: str) -> dict[str, Any]:
        with self._lock:
            item = self._live(key)
        return {} if item is None else dict(item[1])

    def add(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> bool:
        with self._lock:
            if self._live(key) is not None:
                return False
            self._put(key, value, meta, expire)
            return True

    def set(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> None:
        with self._lock:
            self._put(key, value, meta, expire)

    def _put(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None) -> None:
        t = now()
        value = bytes(join_parts(value))
        meta = dict(meta, size=len(value), created=meta.get("created") or t)
        self._data[key] = (bytes(value), meta, t, None if expire is None else t + expire)

    def delete(self, key: str) -> bool:
        with self._lock:
            self._uses.pop(key, None)
            return self._data.pop(key, None) is not None

    def record_use(self, uses: list[Use]) -> None:
        with self._lock:
            for use in uses:
                if use.key in self._data:
                    last, count = self._uses.get(use.key, (0.0, 0))
                    self._uses[use.key] = (max(last, use.last), count + use.times)

    def entries(self) -> Iterator[EntryInfo]:
        with self._lock:
            items = [(k, self._live(k), self._uses.get(k)) for k in list(self._data)]
        for key, item, use in items:
            if item is not None:
                value, meta, created, _ = item
                yield EntryInfo(key, len(value), float(meta.get("created", created)),
                                None if use is None else use[0], meta,
                                uses=None if use is None else use[1])

    def clear(self) -> int:
        with self._lock:
            n = len(self._data)
            self._data.clear()
            self._uses.clear()
            self._sources.clear()
            return n

    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        def try_add(token: str, ttl: float) -> bool:
            with self._lock:
                held = self._leases.get(key)
                if held is not None and held[1] > now():
                    return False
                self._leases[key] = (token, now() + ttl)
                return True

        def read() -> str | None:
            with self._lock:
                held = self._leases.get(key)
                return held[0] if held else None

        def remove() -> None:
            with self._lock:
                self._leases.pop(key, None)

        return LeaseLock(try_add, read, remove, ttl=timeout)
