"""Redis store configuration: its URL, its options and where its password comes from.

A password is never pickled, shown or logged. It is taken, at open time, from the ``password=``
option, else from the URL (``redis://:PASSWORD@host`` or ``?password=``), else from
``$REDIS_PASSWORD``; the URL the store keeps has everything the user gave *except* the password.
The URL and the options are checked when the store is created, before any connection.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from fncache._errors import ConfigError

__all__ = ["check_options", "check_url", "is_secret", "split_password"]

# Keyword options that hold credentials: used to connect, never kept in ``options`` (which are
# pickled and shown), never logged.
_SECRET_WORDS = ("password", "secret", "token", "credential")


def split_password(url: str) -> tuple[str, str | None]:
    """``url`` without its password (userinfo or ``?password=``), and the password or ``None``.

    Rebuilt by hand rather than with ``urlunsplit``, which drops the ``//`` of ``unix://`` URLs.
    """
    parts = urlsplit(url)
    password = None if parts.password is None else unquote(parts.password)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in query if k != "password"]
    if len(kept) != len(query):
        password = password or dict(query)["password"]
    if password is None:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    netloc = f"{user}@{host}" if user else host
    scheme = url.split("://", 1)[0]
    clean = f"{scheme}://{netloc}{parts.path}"
    if kept:
        clean += "?" + urlencode(kept)
    return clean, password


def is_secret(option: str) -> bool:
    return any(word in option.lower() for word in _SECRET_WORDS)


def check_url(url: str) -> None:
    """Raise :class:`ConfigError` for a URL redis-py would refuse (checked now, not at first use)."""
    from redis.connection import parse_url

    from fncache.stores import redact

    try:
        parsed = parse_url(url)  # type: ignore[no-untyped-call]
        parts = urlsplit(url)
        if not url.startswith("unix://"):
            parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
            if not parts.hostname:
                raise ValueError("no host")
    except (ValueError, TypeError) as e:
        # The message of the parser may quote the URL; ours quotes it without its password.
        # (Not ``e`` itself: the parser's message may quote a part of an unescaped password.)
        raise ConfigError(f"store: invalid Redis URL {redact(url)!r}: {_reason(e)}") from None
    if not isinstance(parsed, dict):  # pragma: no cover - parse_url always returns a dict
        raise ConfigError(f"store: invalid Redis URL {redact(url)!r}")


def _reason(e: Exception) -> str:
    text = str(e)
    if "port" in text.lower():
        return "the port is not a number (a password with @ # / ? , must be percent-encoded)"
    return "not a Redis URL" if "'" in text else text


def check_options(options: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` naming any option :class:`redis.Redis` does not take."""
    import inspect

    import redis

    known = set(inspect.signature(redis.Redis.__init__).parameters) - {
        "self", "host", "port", "db", "connection_pool", "unix_socket_path", "single_connection_client"
    }
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"store_options: unknown option(s) for a Redis store: {', '.join(unknown)}; expected "
            "prefix, chunk_size, socket_timeout, socket_connect_timeout, password or an option of "
            "redis.Redis"
        )
