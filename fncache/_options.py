"""The options of a memoized function: one frozen value, validated once.

:class:`Options` is made by :meth:`Options.make` from the keyword options of ``memoize`` (every check
in one place, each error a :class:`~fncache.ConfigError` naming the option); ``fncache.Memoized``,
``fncache.Memory`` and ``fncache.key_for`` all use it, and :meth:`Options.pickled` is what travels
when a memoized function is pickled (configuration only: never a secret given in code).

Also here: the process-wide switch ``FNCACHE_DISABLE``, read once at import (reading the environment
on every call cost about a tenth of a hit) and changed at run time with :func:`disable` and
:func:`enable`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fncache import _codec
from fncache._errors import ConfigError
from fncache.stores import Store, check_store, public_config

__all__ = ["Options", "disable", "disabled", "enable", "unknown_options"]

_ON_UNHASHABLE = ("raise", "call")
_ON_STORE_ERROR = ("log", "raise")


def env_flag(name: str) -> bool:
    """Whether environment variable ``name`` is set to something other than empty/0/false/no/off."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


# Read once per process: a memoized call looks at this list, never at the environment.
_DISABLED = [env_flag("FNCACHE_DISABLE")]


def disable() -> None:
    """Turn caching off in this process: every memoized call runs the function, nothing is stored.

    The same as starting the process with ``FNCACHE_DISABLE=1`` (read once, at import).
    """
    _DISABLED[0] = True


def enable() -> None:
    """Turn caching back on in this process (after :func:`disable` or ``FNCACHE_DISABLE=1``)."""
    _DISABLED[0] = False


def disabled() -> bool:
    """Whether caching is off in this process."""
    return _DISABLED[0]


def secrets_from(secret: Any) -> tuple[bytes, ...]:
    """Every accepted key, the signing one first: ``secret`` (one, or a list ``[new, old, ...]``
    for a rotation) or ``$FNCACHE_SECRET``; empty when none is set."""
    if isinstance(secret, (list, tuple)):
        if not secret:
            raise ConfigError("secret: expected a non-empty str or bytes, or a non-empty list of them")
        return tuple(secret_from(s) or b"" for s in secret)
    one = secret_from(secret)
    return () if one is None else (one,)


def secret_from(secret: str | bytes | None) -> bytes | None:
    """The signing key: ``secret`` or ``$FNCACHE_SECRET``, as bytes; None when neither is set."""
    if secret is None:
        secret = os.environ.get("FNCACHE_SECRET") or None
    if secret is None:
        return None
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, bytes) or not secret:
        raise ConfigError("secret: expected a non-empty str or bytes")
    return secret


@dataclass(frozen=True)
class Options:
    """Validated options of one memoized function (see :func:`fncache.memoize` for each)."""

    store: Any = None  # a path, a URL, a Store or a tuple of them (tiers); None: the default store
    ignore: tuple[str, ...] = ()
    ignore_globals: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    version: str | None = None
    expire: float | None = None
    lock: bool = False
    lock_timeout: float = 600.0
    secret: bytes | None = dataclasses.field(default=None, repr=False)
    #: every secret an entry may be signed with (``secret`` first, then older ones): for reading
    accepted: tuple[bytes, ...] = dataclasses.field(default=(), repr=False)
    #: a secret was configured where the function was made; without one here it is not cached
    signed: bool = False
    compress: str | None = None
    on_unhashable: str = "raise"
    on_store_error: str = "log"
    depends_on: tuple[Any, ...] = ()
    track_versions: bool = False
    store_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    verbose: bool = False
    mmap_mode: str | None = None

    @classmethod
    def make(
        cls,
        *,
        store: str | os.PathLike[str] | Store | list[Any] | tuple[Any, ...] | None = None,
        ignore: Iterable[str] = (),
        files: Iterable[str] = (),
        version: str | None = None,
        expire: float | None = None,
        lock: bool = False,
        lock_timeout: float = 600.0,
        secret: str | bytes | list[str | bytes] | tuple[str | bytes, ...] | None = None,
        ignore_globals: Iterable[str] = (),
        compress: Any = None,
        on_unhashable: str = "raise",
        on_store_error: str = "log",
        depends_on: Iterable[Any] = (),
        track_versions: bool = False,
        store_options: dict[str, Any] | None = None,
        verbose: bool | None = None,
        mmap_mode: str | None = None,
        signed: bool = False,
    ) -> Options:
        """Check every option and return them as one frozen value; raises :class:`ConfigError`."""
        for name, names in (("ignore", ignore), ("files", files), ("ignore_globals", ignore_globals)):
            if isinstance(names, str):
                raise ConfigError(f"{name}: expected a list of "
                                  f"{'global' if name == 'ignore_globals' else 'parameter'} names, "
                                  f"not a single string; write {name}=[{names!r}]")
        ignore_globals = _check_global_names(ignore_globals)
        if version is not None and not isinstance(version, str):
            raise ConfigError(f"version: expected a str, got {type(version).__name__}")
        if expire is not None and not _positive_seconds(expire):
            raise ConfigError(f"expire: expected a positive number of seconds, got {expire!r}")
        if not _positive_seconds(lock_timeout):
            raise ConfigError(f"lock_timeout: expected a positive number of seconds, got {lock_timeout!r}")
        for name, flag in (("lock", lock), ("track_versions", track_versions)):
            if not isinstance(flag, bool):  # lock="no" would mean True
                raise ConfigError(f"{name}: expected True or False, got {flag!r}")
        if verbose is not None and not isinstance(verbose, bool):
            raise ConfigError(f"verbose: expected True, False or None, got {verbose!r}")
        depends_on = _check_depends_on(depends_on)
        _one_of("on_unhashable", on_unhashable, _ON_UNHASHABLE)
        _one_of("on_store_error", on_store_error, _ON_STORE_ERROR)
        if mmap_mode not in (None, "r"):
            raise ConfigError(f"mmap_mode: expected None or 'r', got {mmap_mode!r}")
        _check_store(store, store_options)
        accepted = secrets_from(secret)
        signing = accepted[0] if accepted else None
        if not isinstance(signed, bool):
            raise ConfigError(f"signed: expected True or False, got {signed!r}")
        if signing is not None and mmap_mode == "r":
            warn_mapped_and_signed()
        return cls(
            store=tuple(store) if isinstance(store, list) else store,
            ignore=tuple(sorted(ignore)),
            ignore_globals=ignore_globals,
            files=tuple(sorted(files)),
            version=version,
            expire=expire,
            lock=lock,
            lock_timeout=float(lock_timeout),
            secret=signing,
            accepted=accepted,
            signed=signed or signing is not None,
            compress=_codec.check_compress(compress),
            on_unhashable=on_unhashable,
            on_store_error=on_store_error,
            depends_on=tuple(depends_on),
            track_versions=track_versions,
            store_options=dict(store_options or {}),
            verbose=env_flag("FNCACHE_VERBOSE") if verbose is None else verbose,
            mmap_mode=mmap_mode,
        )

    def pickled(self, store: Store | None = None) -> dict[str, Any]:
        """The keyword options that rebuild these in another process (:meth:`make` accepts them).

        A secret given in code is left out (it would travel in clear): workers take theirs from
        ``$FNCACHE_SECRET``. So are store credentials (a password in the URL or store_options, an S3
        secret): workers take them from their environment ($REDIS_PASSWORD, AWS_*), see
        :mod:`fncache.stores`. ``store``: the opened store, sent instead of a Store option (a store
        pickles as its URL and options).
        """
        spec = store if isinstance(self.store, Store) and store is not None else self.store
        public_store, public_options = public_config(spec, self.store_options)
        return {
            "store": public_store,
            "ignore": list(self.ignore),
            "ignore_globals": list(self.ignore_globals),
            "files": list(self.files),
            "version": self.version,
            "expire": self.expire,
            "lock": self.lock,
            "lock_timeout": self.lock_timeout,
            "compress": self.compress,
            "on_unhashable": self.on_unhashable,
            "on_store_error": self.on_store_error,
            "depends_on": self.depends_on,
            "track_versions": self.track_versions,
            "store_options": public_options,
            "verbose": self.verbose,
            "mmap_mode": self.mmap_mode,
            # Never the secret: whether there was one, so that a worker without it does not
            # silently read and write unsigned entries for this function.
            "signed": self.signed,
        }

    def replace(self, **changes: Any) -> Options:
        """A copy with some fields changed (already-validated values only)."""
        return dataclasses.replace(self, **changes)


_WARNED_MAPPED: list[bool] = []


def warn_mapped_and_signed() -> None:
    """Say once per process what a secret cannot protect under ``mmap_mode="r"``.

    Kept rather than refused or silently copied: mapping is what the option is for, and what a
    writer of the file can still do to a mapped array (change its numbers, truncate the file) runs
    no code. The pickle is always verified and loaded from a private copy (see ``_codec._split``).
    """
    if _WARNED_MAPPED:
        return
    _WARNED_MAPPED.append(True)
    import logging

    logging.getLogger("fncache").warning(
        "mmap_mode='r' with a secret: the signature is checked when an entry is loaded, but the "
        "mapped array bytes stay shared with the store's file; anyone who can write that file "
        "can change the array's values afterwards, or truncate it and kill this process with "
        "SIGBUS (no code can run). Leave mmap_mode unset where others can write the store.")


#: The names ``memoize`` accepts as options.
NAMES = frozenset(f.name for f in dataclasses.fields(Options)) - {"accepted"}


def unknown_options(where: str, given: Iterable[str], names: Iterable[str]) -> str | None:
    """The message refusing the names in ``given`` that are not in ``names``, each with the
    nearest valid one (``memoize: unknown option 'expir'; did you mean 'expire'?``), or None."""
    import difflib

    valid = sorted(names)
    unknown = sorted(set(given) - set(valid))
    if not unknown:
        return None
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=1)
        parts.append(repr(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"{where}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(parts)}"


def _one_of(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name}: expected one of {allowed}, got {value!r}")


def _check_store(store: Any, store_options: Any) -> None:
    tiers = store if isinstance(store, (list, tuple)) else [store]
    if not tiers:
        raise ConfigError("store: an empty list of tiers")
    for tier in tiers:
        alone_none = tier is None and len(tiers) == 1  # None: the default store
        if not alone_none and not isinstance(tier, (str, os.PathLike, Store)):
            raise ConfigError(
                f"store: expected a path, a URL, a Store or a list of them (tiers, nearest first), "
                f"got {type(tier).__name__}")
    if store_options is not None and not isinstance(store_options, dict):
        raise ConfigError("store_options: expected a dict")
    limit = (store_options or {}).get("size_limit")
    if limit is not None and (type(limit) is not int or limit <= 0):
        raise ConfigError(f"size_limit: expected a positive number of bytes, got {limit!r}")
    # An unknown URL scheme, a bad Redis URL, chunk_size=0 or an unknown option fails here, not at
    # the first call.
    check_store(store, dict(store_options or {}))


def _check_global_names(names: Any) -> tuple[str, ...]:
    """``ignore_globals`` as a sorted tuple of identifiers; a ConfigError naming the option else."""
    try:
        given = list(names)
    except TypeError:
        raise ConfigError(f"ignore_globals: expected a list of global names, got "
                          f"{type(names).__name__}") from None
    for name in given:
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"ignore_globals: expected global names (identifiers), got {name!r}")
    return tuple(sorted(set(given)))


def _positive_seconds(value: Any) -> bool:
    """Whether ``value`` is a finite positive number (not a bool, not NaN, not infinity)."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value > 0)


def _check_depends_on(depends_on: Any) -> tuple[Any, ...]:
    """``depends_on`` as a tuple; a bare string or path is refused rather than guessed at.

    A string is iterable, so ``depends_on="data.csv"`` would depend on the files ``d``, ``a``, ...
    (and ``"."`` on the whole working directory): refused, with the list spelling as the hint.
    """
    if isinstance(depends_on, (str, bytes, os.PathLike)):
        raise ConfigError(
            f"depends_on: expected a list of paths or objects, got the single {type(depends_on).__name__} "
            f"{depends_on!r}; write depends_on=[{depends_on!r}]"
        )
    try:
        return tuple(depends_on)
    except TypeError:
        raise ConfigError(
            f"depends_on: expected a list of paths or objects, got {type(depends_on).__name__}"
        ) from None
