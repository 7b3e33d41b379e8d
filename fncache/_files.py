"""The class of ``fncache.file(path)`` values, alone in a module: its name is part of the key format.

A :class:`File` argument is keyed as ``(_Token, ("token", File, (name, digest)))``, and the class is
pickled there by reference: the bytes ``fncache._files`` / ``File`` are in the key of every call that
takes one. Moving or renaming this module or the class changes those keys (a key-format change, see
:mod:`fncache._hasher`). What files are and how they are keyed is :mod:`fncache.values.files`.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from fncache._errors import ArgumentTypeError
from fncache.values import digests as _digests

__all__ = ["File"]


class File(str):
    """A path whose fncache key is the file's name and content. Behaves as the path everywhere else.

    A ``str`` subclass (and an :class:`os.PathLike`): readers that accept only ``str`` or
    ``pathlib.Path`` (polars' ``read_parquet``/``scan_parquet``, numpy's memory maps) take it as the
    path it spells; it compares and hashes as that string.
    """

    __slots__ = ()

    def __new__(cls, path: str | os.PathLike[str]) -> File:
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentTypeError(
                f"fncache.file: path must be a str or os.PathLike, got {type(path).__name__}")
        return super().__new__(cls, str.__str__(path) if isinstance(path, str) else os.fspath(path))

    @property
    def path(self) -> str:
        """The path as a plain ``str``."""
        return str.__str__(self)

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"fncache.file({self.path!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (File, (self.path,))

    def resolve(self, strict: bool = False) -> pathlib.Path:
        """The absolute path, as ``pathlib.Path.resolve`` gives it (numpy's ``memmap`` asks)."""
        return pathlib.Path(self.path).resolve(strict=strict)

    def __fncache_token__(self) -> tuple[str, bytes]:
        name = os.path.basename(os.path.normpath(self.path))
        return (name, _digests.path_digest(self.path))
