"""What an s3fs or botocore error means to the S3 store: its HTTP status, its S3 error code, and
whether a 404 is a missing object (a cache miss) or a missing bucket (a store failure).

These live apart from :mod:`fncache.stores.s3` because both the store and its listing and usage
code (:mod:`fncache.stores._s3_listing`) judge errors the same way, by the status behind them and
never by the exception's class, which s3fs does not keep reliable.
"""

from __future__ import annotations

__all__ = ["EXISTS", "error_code", "http_status", "is_missing_key"]

# 412: the object exists (If-None-Match). 409: AWS's answer when another conditional write to the
# same key is in flight; for a content-addressed key that other writer stores the same value.
EXISTS = (412, 409)


def http_status(exc: BaseException) -> int | None:
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


def error_code(exc: BaseException) -> str | None:
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


def is_missing_key(exc: FileNotFoundError) -> bool:
    """A 404 for the object, not for the bucket: only the former is a cache miss."""
    return error_code(exc) != "NoSuchBucket"
