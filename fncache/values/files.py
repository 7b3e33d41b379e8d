"""``fncache.file(path)``: a path argument keyed by the file's content, not by its spelling.

A memoized ``load(path)`` keyed by the path string returns a stale result once the file is edited.
Wrapping the argument, ``load(fncache.file("data.csv"))``, keys the call by the file's base name and
the digest of its bytes (a directory: every file below it, by relative name), while the function still
receives something ``open``, pathlib, pandas, polars and numpy accept (a ``str`` that is also an
:class:`os.PathLike`).

The base name, not the full path, is keyed so that the same data in another checkout or on another
machine shares entries; the content digest is reused while the file's stat signature (size, mtime,
ctime, inode, device) stays the same: the table of :mod:`fncache.values.digests`, shared with
``depends_on=`` and the lazy readers. The digest is taken when the key is made, just before the
function runs: a file rewritten while the function reads it is the caller's race, as with any input.

``memoize(files=["path"])`` does the same for parameters that always take files: their values are
wrapped here (:func:`file_argument`) when the key is made, and the function still gets them as passed.

An *open file object* is never keyed, in any mode, anywhere in a value (:func:`refuse_stream`): hashing
it would mean reading it, which moves or consumes the stream the function is about to read (a pipe, a
socket file, ``sys.stdin`` cannot be rewound at all), and its content may change after the key is made.
The path, wrapped or declared, is what to pass. In-memory buffers (``io.BytesIO``, ``io.StringIO``) are
values and are keyed by content; ``sys.stdout`` and ``sys.stderr`` by name.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

from fncache._errors import ArgumentTypeError, UnhashableArgument
from fncache._files import File

__all__ = ["File", "file", "file_argument", "is_stream", "refuse_stream"]

_STREAM_HINT = ("pass its path as fncache.file(path), or declare the parameter with "
                "@fncache.memoize(files=[...]); reading a stream to key it would consume it")


def file(path: str | os.PathLike[str]) -> File:
    """Mark ``path`` as a file argument: the call is keyed by the file's name and content.

    A missing path is keyed as missing (so creating the file later gives a new key); the function is
    called as usual and sees the path unchanged (``os.fspath(arg)`` is the original string).
    """
    return File(path)


def file_argument(value: Any, parameter: str) -> Any:
    """The value of a parameter declared in ``files=``, as it is keyed: a path becomes a
    :class:`File`; a list or tuple of paths, a list or tuple of them; None stays None (an optional
    file). Anything else raises :class:`~fncache.ArgumentTypeError` naming the parameter."""
    if value is None or isinstance(value, File):
        return value
    if isinstance(value, (str, os.PathLike)):
        return File(value)
    if type(value) in (list, tuple):
        return type(value)(file_argument(v, parameter) for v in value)
    if is_stream(value):
        raise ArgumentTypeError(
            f"argument {parameter!r} is declared in files= and got an open file: pass the path "
            f"({getattr(value, 'name', '...')!r}) instead; reading a stream to key it would consume it")
    raise ArgumentTypeError(
        f"argument {parameter!r} is declared in files=: expected a path (str or os.PathLike), a list "
        f"of paths or None, got {type(value).__name__}")


def is_stream(value: Any) -> bool:
    """Whether ``value`` is an open file object (an ``io`` stream that is not an in-memory buffer)."""
    return isinstance(value, io.IOBase) and not isinstance(value, (io.BytesIO, io.StringIO))


def refuse_stream(value: Any) -> Any:
    """The hasher's answer for a stream: ``NotImplemented`` (pickled by name) for ``sys.stdout``
    and ``sys.stderr``, else :class:`~fncache.UnhashableArgument` pointing to the path forms."""
    if any(value is s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)):
        return NotImplemented
    t = type(value)
    raise UnhashableArgument(
        f"an open file ({t.__module__}.{t.__qualname__} {getattr(value, 'name', '')!r}) is not keyed: "
        + _STREAM_HINT, type_name=t.__qualname__)
