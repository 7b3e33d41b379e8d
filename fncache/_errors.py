"""The one exception hierarchy of fncache.

Every error the library raises on purpose derives from :class:`FncacheError`.
Where an error behaves like a builtin one it also derives from that builtin,
so ``except TypeError`` keeps working for code that does not know fncache.
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "ConfigError",
    "FncacheError",
    "IntegrityError",
    "LockTimeout",
    "StoreError",
    "UnhashableArgument",
]


class FncacheError(Exception):
    """Base class of every error fncache raises on purpose."""


class ConfigError(FncacheError, ValueError):
    """An option given to fncache is invalid; the message names the option."""


class ArgumentTypeError(FncacheError, TypeError):
    """A function of fncache's API (``register``, ``ref``, ``track``...) got an argument of the wrong type."""


class UnhashableArgument(FncacheError, TypeError):
    """An argument (or value) cannot be turned into a cache key.

    ``parameter`` names the argument when known, ``type_name`` the offending type.
    """

    def __init__(self, message: str, parameter: str | None = None, type_name: str | None = None):
        super().__init__(message)
        self.parameter = parameter
        self.type_name = type_name


class StoreError(FncacheError, OSError):
    """A store could not be read or written (I/O, network, permissions, full)."""


class IntegrityError(FncacheError, ValueError):
    """A stored entry failed its checksum or signature; it is never unpickled."""


class LockTimeout(FncacheError, TimeoutError):
    """Waiting for another process to finish computing a key took too long."""
