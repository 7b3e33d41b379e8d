"""Stores, chosen by URL.

=====================================  ==========================================================
URL                                    store
=====================================  ==========================================================
``/some/dir``, ``file:///some/dir``    :class:`~fncache.stores.disk.DiskStore` (diskcache, default)
``memory://NAME``                      :class:`~fncache.stores.memory.MemoryStore` (one process)
``redis://host:port/db``               :class:`~fncache.stores.redis.RedisStore` (``fncache[redis]``)
``s3://bucket/prefix``                 :class:`~fncache.stores.s3.S3Store` (``fncache[s3]``)
``DIR,s3://bucket/prefix`` or a list   :class:`~fncache.stores.tiered.TieredStore`: tiers tried
                                       nearest first (a local directory in front of a shared one)
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fncache import _forks
from fncache._errors import ConfigError
from fncache.stores._base import EntryInfo, Store, join_parts, store_error
from fncache.stores._lock import LeaseLock

__all__ = [
    "SCHEMES",
    "EntryInfo",
    "LeaseLock",
    "Store",
    "check_store",
    "default_store",
    "default_store_url",
    "env_store_error",
    "join_parts",
    "open_store",
    "public_config",
    "redact",
    "split_tiers",
    "store_class",
    "store_error",
]

# Option names that hold credentials, at any depth of the options (``client_kwargs`` too).
_SECRET_WORDS = ("password", "secret", "token", "credential", "access_key")
_SECRET_EXACT = ("key",)
# Patterns are compiled where used (re.compile's own cache): none of them is needed by a hit, and
# compiled here they cost every import a third of a millisecond.
_USERINFO_PASSWORD = r"(://[^/@?#]*?):[^/@?#]*@"

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


def split_tiers(spec: Any) -> list[Any] | None:
    """The tiers of a store spec (nearest first), or ``None`` for a single store.

    A list or tuple is tiers; so is a string with commas (``"DIR,s3://bucket/prefix"``), split
    only where a comma cannot be inside a URL's userinfo: a password holding a comma
    (``redis://:pa,ss@host``) stays in its tier. A directory whose name holds a comma cannot be
    given in a string: pass a list.
    """
    if isinstance(spec, (list, tuple)):
        return list(spec)
    if isinstance(spec, str) and "," in spec:
        cuts = [i for i, c in enumerate(spec) if c == "," and not _in_credentials(spec, i)]
        if not cuts:
            return None
        bounds = zip([-1, *cuts], [*cuts, len(spec)], strict=True)
        return [spec[a + 1 : b].strip() for a, b in bounds]
    return None


_URL_START = r"\s*[A-Za-z][A-Za-z0-9+.-]*://"


def _in_credentials(spec: str, i: int) -> bool:
    """Whether the comma at ``i`` of ``spec`` may be part of a password: between a ``scheme://``
    and the ``@`` that ends its userinfo (no ``/``, ``?`` or ``#`` before it, an ``@`` after it
    before any of those), or in a secret query value (``?password=``) not followed by another
    URL."""
    start = spec.rfind("://", 0, i)
    if start < 0:
        return False
    before = spec[start + 3 : i]
    if (re.compile(_QUERY_SECRET_NAME).search(before)
            and not re.compile(_URL_START).match(spec, i + 1)):
        return True
    if any(c in before for c in "/?#"):
        return False
    after = spec[i + 1 :]
    end = min([len(after)] + [after.find(c) for c in "/?#" if c in after])
    return "@" in after[:end]


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


_SCHEME_START = r"[A-Za-z][A-Za-z0-9+.-]*://"
_QUERY_SECRET_NAME = r"(?i)[?&][^=&#]*(?:password|secret|token)[^=&#]*="


def _url_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each ``scheme://...`` in ``text``, each running to the next one's scheme."""
    starts = [m.start() for m in re.compile(_SCHEME_START).finditer(text)]
    if not starts:
        return []
    return list(zip(starts, [*starts[1:], len(text)], strict=True))


def _hide(url: str, mask: str) -> str:
    """``text`` with every URL's password (userinfo and secret query values) replaced by ``mask``
    (``"***"``), or removed with its ``:`` (``""``).

    Conservative by design, not the client's parse: a password may hold ``@ # / ? , &`` (given
    unescaped, the client library would read only part of it, and another part would show), so
    the userinfo runs from the ``://`` to the *last* ``@`` before the next URL, and a secret query
    value to the end of its URL. Anything else a URL holds there is hidden too, never the reverse.
    """
    spans = _url_spans(url)
    if not spans:
        return url
    out = [url[: spans[0][0]]]
    for start, end in spans:
        part = url[start:end]
        head = part.index("://") + 3
        m = re.compile(_QUERY_SECRET_NAME).search(part, head)
        if m:
            part = part[: m.end()] + mask if mask else part[: m.start()]
        at = part.rfind("@", head)
        colon = part.find(":", head, at) if at >= 0 else -1
        if colon >= 0 and mask:
            part = part[:colon] + ":" + mask + part[at:]
        elif colon >= 0:  # removed; an empty user goes with its ``@``
            part = part[:colon] + part[at + (colon == head) :]
        out.append(part)
    return "".join(out)


def redact(url: str) -> str:
    """``url`` with any password (``user:PASSWORD@``, ``?password=...``) replaced by ``***``.

    For messages and ``repr``: a URL given by the user is shown this way wherever fncache shows it,
    whatever characters the password holds (see :func:`_hide`). Tiers joined by commas too.
    """
    return _hide(url, "***")


def _strip(options: Any) -> Any:
    if isinstance(options, dict):
        return {k: _strip(v) for k, v in options.items() if not _is_secret(k)}
    if isinstance(options, (list, tuple)):  # a tiered store's options, one dict per tier
        return [_strip(v) for v in options]
    return options


def public_config(
    store: str | os.PathLike[str] | Store | Sequence[Any] | None, options: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """``(store, options)`` without credentials: safe to pickle, log and show.

    A URL loses its password (from the userinfo and the query), the options lose every key that
    names a credential (``password``, ``secret``, ``key``, ``token``, ``aws_secret_access_key``...,
    also inside ``client_kwargs`` and each tier's options). A :class:`Store` is kept: it pickles
    as its own sanitised configuration. Tiers (a list, or URLs joined by commas) are cleaned one
    by one.
    """
    tiers = split_tiers(store)
    if tiers is not None:
        clean = [public_config(t, {})[0] for t in tiers]
        cleaned = ",".join(clean) if isinstance(store, str) else clean
        return cleaned, _strip(dict(options))
    if isinstance(store, str) and "://" in store:
        store = _hide(store, "")  # first: the client-style parse below could keep a part of one
        if store.startswith(("redis://", "rediss://", "unix://")):
            from fncache.stores._redis_config import split_password

            store = split_password(store)[0]
        store = re.compile(_USERINFO_PASSWORD).sub(r"\1@", store)
        store = re.sub(r"(?i)[?&][^=&#]*(?:password|secret|token)[^=&#]*=[^&#]*", "", store)
    return store, _strip(dict(options))

# Re-entrant: opening a tiered store opens its tiers through open_store.
_cache_lock = threading.RLock()
_open: dict[tuple[str, bool, Any], Store] = {}


def _fresh_cache_lock() -> None:
    global _cache_lock
    _cache_lock = threading.RLock()


_forks.on_fork(_fresh_cache_lock)


_WARNED_ENV: set[str] = set()


def _from_env(name: str) -> str | None:
    """``$name`` if it names a store; a blank value is ignored and a relative path used as
    given, each with a WARNING (once per process): both are usually a mistake."""
    value = os.environ.get(name)
    if value is None:
        return None
    problem = None
    if not value.strip():
        problem = "is set but blank: ignored"
    elif "://" not in value and "," not in value and not os.path.isabs(os.path.expanduser(value)):
        problem = (f"is a relative path: the cache is {os.path.abspath(value)!r}, and another in "
                   "every other working directory")
    if problem is not None and name not in _WARNED_ENV:
        import logging

        _WARNED_ENV.add(name)
        logging.getLogger("fncache").warning("%s %s", name, problem)
    return value if value.strip() else None


def default_store_url() -> str:
    """``$FNCACHE_STORE``, else ``$FNCACHE_DIR``, else the user cache directory (``~/.cache/fncache``)."""
    url = _from_env("FNCACHE_STORE")
    if url:
        return url
    directory = _from_env("FNCACHE_DIR")
    if directory:
        return directory
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return str(base / "fncache")


def default_store() -> str | Path:
    """:func:`default_store_url` as a spec: ``$FNCACHE_STORE`` as given (it may name tiers joined by
    commas), a directory (``$FNCACHE_DIR``, the user cache) as a path, whose name may hold a comma."""
    url = default_store_url()
    return url if url == os.environ.get("FNCACHE_STORE") else Path(url)


def env_store_error(e: ConfigError) -> ConfigError:
    """``e`` (raised opening the default store) as the error of the variable that named it."""
    name = "FNCACHE_STORE" if (os.environ.get("FNCACHE_STORE") or "").strip() else "FNCACHE_DIR"
    return ConfigError(f"{name}: {e}")


def _create(url: str, options: dict[str, Any], tiered: bool = False) -> Store:
    if tiered:
        from fncache.stores.tiered import TieredStore

        return TieredStore(url, **options)
    cls = store_class(url)
    if url.startswith("file://"):
        url = url[len("file://") :]
    return cls(url, **options)


def store_class(url: str) -> type[Store]:
    """The class of store a URL or path opens (its module is imported, its backend is not);
    :class:`ConfigError` for a scheme no store has."""
    import importlib

    module, name = SCHEMES[_scheme(url)]
    cls: type[Store] = getattr(importlib.import_module(module), name)
    return cls


def _normalize(spec: str | os.PathLike[str]) -> str:
    """A path or URL as stores are keyed by: paths absolute, ``~`` expanded."""
    url = os.fspath(spec)
    if not url:
        raise ConfigError("store: empty path or URL")
    return url if "://" in url else os.path.abspath(os.path.expanduser(url))


def _freeze(value: Any) -> Any:
    """Options as a hashable value (dicts and lists inside, e.g. a tiered store's per-tier options)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def open_store(store: str | os.PathLike[str] | Store | Sequence[Any] | None = None,
               **options: Any) -> Store:
    """The store for ``store``: a :class:`Store` as is, else a URL or directory path, or tiers.

    ``None`` means :func:`default_store_url`. Stores opened with the same URL and options in one process
    are shared, so many memoized functions use one connection pool or one SQLite handle. Tiers (a
    list of paths, URLs or stores, or one string of them joined by commas, nearest first) open a
    :class:`~fncache.stores.tiered.TieredStore`; its options are ``tiers`` (one dict per tier)
    and ``cooldown``.
    """
    if isinstance(store, Store):
        _refuse_options(options)
        return store
    if store is None:
        store = default_store()
    tiers = split_tiers(store)
    if tiers is not None and any(isinstance(t, Store) for t in tiers):
        from fncache.stores.tiered import TieredStore

        return TieredStore(tiers, **options)
    return _shared(_url_of(store, tiers), options, tiers is not None)


def _refuse_options(options: dict[str, Any]) -> None:
    """Options come with a URL or path only: a :class:`Store` object is already configured."""
    if options:
        raise ConfigError("store_options: only valid when store is a URL or path, not a Store object")


def _url_of(store: Any, tiers: list[Any] | None) -> str:
    """The normalized URL of a path or URL, or of ``tiers`` of them, joined by commas."""
    if tiers is not None:
        if not all(isinstance(t, (str, os.PathLike)) for t in tiers):
            raise ConfigError("store: each tier is a path, a URL or a Store")
        return ",".join(_normalize(t) for t in tiers)
    if isinstance(store, (str, os.PathLike)):
        return _normalize(store)
    raise ConfigError(
        f"store: expected a path, a URL or a Store, got {type(store).__name__}"
    )


def _shared(url: str, options: dict[str, Any], tiered: bool) -> Store:
    """The store already opened in this process with ``url`` and ``options``, else a new one,
    kept for the next (options that cannot be hashed: always a new one)."""
    ident = (url, tiered, _freeze(options))
    try:
        hash(ident)
    except TypeError:
        return _create(url, options, tiered)
    with _cache_lock:
        found = _open.get(ident)
        if found is None:
            found = _open[ident] = _create(url, options, tiered)
        return found


def check_store(store: str | os.PathLike[str] | Store | Sequence[Any] | None,
                options: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` now for a store URL or options that opening it would refuse.

    A remote store (Redis, S3, memory) is opened, which validates its URL and options without
    connecting (connections are lazy). A disk store is not opened (that would create its directory);
    its option names are checked against the settings diskcache takes.
    """
    if isinstance(store, Store):
        _refuse_options(options)
        return
    if store is None:
        if options:
            _check_default_store(options)
        return
    if split_tiers(store) is not None:
        open_store(store, **options)  # opens each tier's configuration; nothing connects or is created
        return
    url = os.fspath(store)  # type: ignore[arg-type]
    if url.startswith("memory://") and options:
        raise ConfigError(
            f"store_options: a memory:// store takes no options, got {', '.join(map(str, options))}"
        )
    if _scheme(url) != "file":
        open_store(url, **options)
        return
    _check_disk_options(options)


def _check_default_store(options: dict[str, Any]) -> None:
    """Check options given in code for the store the environment names.

    That store is not the code's to answer for: a malformed $FNCACHE_STORE is a store failure at
    the first call (a logged miss, or StoreError with on_store_error="raise"), as an unreachable
    one is, not an error of every decoration. Options given in code are still checked now (their
    errors do not start "store:").
    """
    try:
        check_store(default_store(), options)
    except ConfigError as e:
        if not str(e).startswith("store:"):
            raise


def _check_disk_options(options: dict[str, Any]) -> None:
    """A disk store's options: ``size_limit``, ``timeout``, diskcache's settings, ``disk_*``."""
    if not options:  # nothing to check (and diskcache not imported: a store that is only read
        return       # never needs it, see fncache.stores._diskopen.open_settings)
    import diskcache

    from fncache.stores._diskopen import check_wal_autocheckpoint, setting_ok
    from fncache.stores.disk import check_size_limit

    check_size_limit(options.get("size_limit"))
    check_wal_autocheckpoint(options.get("sqlite_wal_autocheckpoint"))
    for name, value in options.items():
        if str(name).startswith("sqlite_") and name != "sqlite_wal_autocheckpoint" \
                and not setting_ok(name, value):
            raise ConfigError(f"store_options: {name}={value!r} is not a value SQLite's "
                              f"PRAGMA {str(name)[7:]} takes")
    known = set(diskcache.DEFAULT_SETTINGS) | {"timeout", "sqlite_wal_autocheckpoint"}
    unknown = sorted(k for k in options if k not in known and not str(k).startswith("disk_"))
    if unknown:
        raise ConfigError(
            f"store_options: unknown option(s) for a disk store: {', '.join(map(str, unknown))}; "
            f"expected size_limit or a diskcache setting ({', '.join(sorted(known))})"
        )


def _reopen(url: str, options: dict[str, Any]) -> Store:
    """Unpickling hook: a store travels as its URL and options and reconnects where it lands."""
    return open_store(url, **options)
