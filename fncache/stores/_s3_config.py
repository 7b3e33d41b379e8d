"""S3 store configuration: the URL, the numeric options, the deadline per byte transferred, and
credentials kept out of ``options``.

Credentials (``key``, ``secret``, ``token``... and the ``aws_*`` client keyword arguments) are used to
connect but never kept in the options a store pickles and shows: a store unpickled in another process
takes them from that process's AWS configuration. Everything is checked when the store is created,
before any connection.
"""

from __future__ import annotations

from typing import Any

from fncache._errors import ConfigError

__all__ = ["SECONDS_PER_BYTE", "check_options", "check_s3", "take_secrets"]

# Value transfers get this much time per byte on top of the operation deadline (1 s per MiB).
SECONDS_PER_BYTE = 1 / 2**20

_SECRET_OPTIONS = ("key", "secret", "token", "username", "password")
_SECRET_CLIENT_KWARGS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
# Options of s3fs.S3FileSystem beyond its explicit parameters (passed to fsspec or aiobotocore).
_EXTRA_FS_OPTIONS = ("profile", "session_vars", "listings_expiry_time", "max_paths")


def check_options(options: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` naming any option :class:`s3fs.S3FileSystem` does not take."""
    import inspect

    import s3fs

    known = set(inspect.signature(s3fs.S3FileSystem.__init__).parameters)
    known = (known | set(_EXTRA_FS_OPTIONS)) - {"self", "kwargs", "asynchronous", "loop"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"store_options: unknown option(s) for an S3 store: {', '.join(unknown)}; expected "
            "part_size, connect_timeout, read_timeout, retries, timeout or an option of "
            "s3fs.S3FileSystem"
        )


def check_s3(url: str, part_size: Any, connect_timeout: Any, read_timeout: Any, timeout: Any,
              retries: Any) -> tuple[str, str]:
    """(bucket, prefix) of an S3 store URL, after checking it and the numeric options."""
    bucket, prefix = _bucket_prefix(url)
    if not isinstance(part_size, int) or part_size < 5 * 2**20:
        raise ConfigError(
            f"part_size: expected at least 5 MiB (S3's minimum), got {part_size!r}"
        )
    _check_seconds("connect_timeout", connect_timeout)
    _check_seconds("read_timeout", read_timeout)
    if timeout is not None:
        _check_seconds("timeout", timeout)
    if type(retries) is not int or retries < 1:
        raise ConfigError(f"retries: expected a positive number of attempts, got {retries!r}")
    return bucket, prefix


def _bucket_prefix(url: str) -> tuple[str, str]:
    """(bucket, prefix) of an ``s3://bucket/prefix`` URL; the error shows the URL redacted."""
    from fncache.stores import redact

    if not url.startswith("s3://"):
        raise ConfigError(f"store: expected an s3://bucket/prefix URL, got {redact(url)!r}")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise ConfigError(f"store: no bucket in {redact(url)!r}")
    return bucket, prefix


def _check_seconds(name: str, value: Any) -> None:
    """Option ``name`` must be a positive, finite number of seconds (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0 < value < float("inf"):
        raise ConfigError(f"{name}: expected a positive number of seconds, got {value!r}")


def take_secrets(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Remove the credentials from ``options`` (in place, ``client_kwargs`` too): (the secret
    options, the secret client keyword arguments), kept by the store and never pickled."""
    secrets = {k: options.pop(k) for k in _SECRET_OPTIONS if options.get(k) is not None}
    for k in _SECRET_OPTIONS:
        options.pop(k, None)
    client_kwargs = dict(options.pop("client_kwargs", None) or {})
    secret_client = {
        k: client_kwargs.pop(k) for k in _SECRET_CLIENT_KWARGS if k in client_kwargs
    }
    if client_kwargs:
        options["client_kwargs"] = client_kwargs
    return secrets, secret_client
