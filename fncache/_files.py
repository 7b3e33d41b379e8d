"""``fncache.file(path)``: a path argument keyed by the file's content, not by its spelling.

A memoized ``load(path)`` keyed by the path string returns a stale result once the file is edited.
Wrapping the argument, ``load(fncache.file("data.csv"))``, keys the call by the file's base name and
the digest of its bytes (a directory: every file below it, by relative name), while the function still
receives something ``open``, pathlib and pandas accept (an :class:`os.PathLike`).

The base name, not the full path, is keyed so that the same data in another checkout or on another
machine shares entries; the content digest is reused while the file's size and modification time stay
the same (the cache that ``depends_on=`` uses). The digest is taken when the key is made, just before
the function runs: a file rewritten while the function reads it is the caller's race, as with any input.
"""

from __future__ import annotations

import os
from typing import Any

from fncache import _depends
from fncache._errors import ArgumentTypeError

__all__ = ["File", "file"]


class File(os.PathLike):  # type: ignore[type-arg]
    """A path whose fncache key is the file's name and content. Behaves as the path everywhere else."""

    __slots__ = ("path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if isinstance(path, File):
            path = path.path
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentTypeError(
                f"fncache.file: path must be a str or os.PathLike, got {type(path).__name__}")
        self.path: str = os.fspath(path)

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"fncache.file({self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, File) and other.path == self.path

    def __hash__(self) -> int:
        return hash((File, self.path))

    def __reduce__(self) -> tuple[Any, ...]:
        return (File, (self.path,))

    def __fncache_token__(self) -> tuple[str, bytes]:
        name = os.path.basename(os.path.normpath(self.path))
        return (name, _depends.path_digest(self.path))


def file(path: str | os.PathLike[str]) -> File:
    """Mark ``path`` as a file argument: the call is keyed by the file's name and content.

    A missing path is keyed as missing (so creating the file later gives a new key); the function is
    called as usual and sees the path unchanged (``os.fspath(arg)`` is the original string).
    """
    return File(path)
