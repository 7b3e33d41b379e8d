"""Stores, chosen by URL.

=====================================  ==========================================================
URL                                    store
=====================================  ==========================================================
``/some/dir``, ``file:///some/dir``    :class:`~fncache.stores.disk.DiskStore` (diskcache, default)
``memory://NAME``                      :class:`~fncache.stores.memory.MemoryStore` (one process)
``redis://host:port/db``               :class:`~fncache.stores.redis.RedisStore` (``fncache[redis]``)
``s3://bucket/prefix``                 :class:`~fncache.stores.s3.S3Store` (``fncache[s3]``)
=====================================  ==========================================================

Backends import lazily: opening a disk store never imports redis or s3fs.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from fncache._errors import ConfigError
from fncache.stores._base import EntryInfo, Store

__all__ = ["EntryInfo", "Store", "default_store_url", "open_store"]

_cache_lock = threading.Lock()
_open: dict[tuple[str, tuple[tuple[str, Any], ...]], Store] = {}


def default_store_url() -> str:
    """``$FNCACHE_STORE``, else ``$FNCACHE_DIR``, else the user cache directory (``~/.cache/fncache``)."""
    url = os.environ.get("FNCACHE_STORE")
    if url:
        return url
    directory = os.environ.get("FNCACHE_DIR")
    if directory:
        return directory
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return str(base / "fncache")


def _create(url: str, options: dict[str, Any]) -> Store:
    if url.startswith("memory://"):
        from fncache.stores.memory import MemoryStore

        return MemoryStore(url, **options)
    if url.startswith(("redis://", "rediss://", "unix://")):
        from fncache.stores.redis import RedisStore

        return RedisStore(url, **options)
    if url.startswith("s3://"):
        from fncache.stores.s3 import S3Store

        return S3Store(url, **options)
    if url.startswith("file://"):
        url = url[len("file://") :]
    elif "://" in url:
        scheme = url.split("://", 1)[0]
        raise ConfigError(
            f"store: unknown URL scheme {scheme!r} in {url!r}; "
            "expected a directory path, file://, memory://, redis:// or s3://"
        )
    from fncache.stores.disk import DiskStore

    return DiskStore(url, **options)


def open_store(store: str | os.PathLike[str] | Store | None = None, **options: Any) -> Store:
    """The store for ``store``: a :class:`Store` as is, else a URL or directory path.

    ``None`` means :func:`default_store_url`. Stores opened with the same URL and options in one process
    are shared, so many memoized functions use one connection pool or one SQLite handle.
    """
    if isinstance(store, Store):
        if options:
            raise ConfigError("store_options: only valid when store is a URL or path, not a Store object")
        return store
    if store is None:
        store = default_store_url()
    if not isinstance(store, (str, os.PathLike)):
        raise ConfigError(
            f"store: expected a path, a URL or a Store, got {type(store).__name__}"
        )
    url = os.fspath(store)
    if not url:
        raise ConfigError("store: empty path or URL")
    if "://" not in url:
        url = os.path.abspath(os.path.expanduser(url))
    ident = (url, tuple(sorted(options.items())))
    try:
        hash(ident)
    except TypeError:
        return _create(url, options)
    with _cache_lock:
        found = _open.get(ident)
        if found is None:
            found = _open[ident] = _create(url, options)
        return found


def _reopen(url: str, options: dict[str, Any]) -> Store:
    """Unpickling hook: a store travels as its URL and options and reconnects where it lands."""
    return open_store(url, **options)
