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

Credentials never travel with a store's configuration. :func:`public_config` is what a memoized
function carries when it is pickled and what ``repr`` shows: the URL without a password and the
options without any credential. A process that unpickles it takes credentials from its own
environment: ``$REDIS_PASSWORD`` for Redis, the AWS configuration (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, instance roles) for S3, and
``$FNCACHE_STORE`` when no store was given at all.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from fncache._errors import ConfigError
from fncache.stores._base import EntryInfo, Store, join_parts, store_error
from fncache.stores._lock import LeaseLock

__all__ = [
    "SCHEMES",
    "EntryInfo",
    "LeaseLock",
    "Store",
    "check_store",
    "default_store_url",
    "join_parts",
    "open_store",
    "public_config",
    "redact",
    "store_error",
]

# Option names that hold credentials, at any depth of the options (``client_kwargs`` too).
_SECRET_WORDS = ("password", "secret", "token", "credential", "access_key")
_SECRET_EXACT = ("key",)
_USERINFO_PASSWORD = re.compile(r"(://[^/@?#]*?):[^/@?#]*@")
_QUERY_SECRET = re.compile(r"(?i)([?&][^=&#]*(?:password|secret|token)[^=&#]*=)[^&#]*")

#: Every URL scheme a store can be opened by, and the store class it opens (module, class). A
#: directory path without a scheme is a disk store too. The one list: options and the CLI check
#: URLs against it, and its error message names it.
SCHEMES: dict[str, tuple[str, str]] = {
    "file": ("fncache.stores.disk", "DiskStore"),
    "memory": ("fncache.stores.memory", "MemoryStore"),
    "redis": ("fncache.stores.redis", "RedisStore"),
    "rediss": ("fncache.stores.redis", "RedisStore"),
    "unix": ("fncache.stores.redis", "RedisStore"),
    "s3": ("fncache.stores.s3", "S3Store"),
}


def _scheme(url: str) -> str:
    """The scheme of a store URL (``"file"`` for a plain path); raises :class:`ConfigError` for a
    scheme no store has."""
    if "://" not in url:
        return "file"
    scheme = url.split("://", 1)[0]
    if scheme not in SCHEMES:
        raise ConfigError(
            f"store: unknown URL scheme {scheme!r} in {redact(url)!r}; expected a directory path "
            f"or {', '.join(s + '://' for s in SCHEMES)}"
        )
    return scheme


def _is_secret(name: Any) -> bool:
    lowered = str(name).lower()
    return lowered in _SECRET_EXACT or any(word in lowered for word in _SECRET_WORDS)


def redact(url: str) -> str:
    """``url`` with any password (``user:PASSWORD@``, ``?password=``) replaced by ``***``.

    For messages and ``repr``: a URL given by the user is shown this way wherever fncache shows it.
    """
    url = _USERINFO_PASSWORD.sub(r"\1:***@", url)
    return _QUERY_SECRET.sub(r"\1***", url)


def _strip(options: Any) -> Any:
    if isinstance(options, dict):
        return {k: _strip(v) for k, v in options.items() if not _is_secret(k)}
    return options


def public_config(
    store: str | os.PathLike[str] | Store | None, options: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """``(store, options)`` without credentials: safe to pickle, log and show.

    A URL loses its password (from the userinfo and the query), the options lose every key that
    names a credential (``password``, ``secret``, ``key``, ``token``, ``aws_secret_access_key``...,
    also inside ``client_kwargs``). A :class:`Store` is kept: it pickles as its own sanitised
    configuration.
    """
    if isinstance(store, str) and "://" in store:
        if store.startswith(("redis://", "rediss://", "unix://")):
            from fncache.stores._redis_config import split_password

            store = split_password(store)[0]
        store = _USERINFO_PASSWORD.sub(r"\1@", store)
        store = re.sub(r"(?i)[?&][^=&#]*(?:password|secret|token)[^=&#]*=[^&#]*", "", store)
    return store, _strip(dict(options))

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
    import importlib

    scheme = _scheme(url)
    if scheme == "file" and url.startswith("file://"):
        url = url[len("file://") :]
    module, name = SCHEMES[scheme]
    cls: type[Store] = getattr(importlib.import_module(module), name)
    return cls(url, **options)


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


def check_store(store: str | os.PathLike[str] | Store | None, options: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` now for a store URL or options that opening it would refuse.

    A remote store (Redis, S3, memory) is opened, which validates its URL and options without
    connecting (connections are lazy). A disk store is not opened (that would create its directory);
    its option names are checked against the settings diskcache takes.
    """
    if isinstance(store, Store) or (store is None and not options):
        if isinstance(store, Store) and options:
            raise ConfigError("store_options: only valid when store is a URL or path, not a Store object")
        return
    url = os.fspath(store) if store is not None else default_store_url()
    if url.startswith("memory://") and options:
        raise ConfigError(
            f"store_options: a memory:// store takes no options, got {', '.join(map(str, options))}"
        )
    if _scheme(url) != "file":
        open_store(url, **options)
        return
    import diskcache

    known = set(diskcache.DEFAULT_SETTINGS) | {"timeout"}
    unknown = sorted(k for k in options if k not in known and not str(k).startswith("disk_"))
    if unknown:
        raise ConfigError(
            f"store_options: unknown option(s) for a disk store: {', '.join(map(str, unknown))}; "
            f"expected size_limit or a diskcache setting ({', '.join(sorted(known))})"
        )


def _reopen(url: str, options: dict[str, Any]) -> Store:
    """Unpickling hook: a store travels as its URL and options and reconnects where it lands."""
    return open_store(url, **options)
