"""Where a joblib-style ``location`` keeps its entries, how they are read, and result handles.

Part of the ``fncache.Memory`` layer (:mod:`fncache.joblib.memory`): a path ``location`` holds a disk store in
``LOCATION/fncache``; a store URL is used as it is. Entries are read plain or memory-mapped
(``mmap_mode="r"``), after checking that a disk store's directory was not deleted meanwhile.
:class:`MemorizedResult` is a picklable handle on one cached result.
"""

from __future__ import annotations

import functools
import mmap
import os
from pprint import pformat
from typing import Any

from fncache import _codec
from fncache._errors import ConfigError, IntegrityError
from fncache._options import secret_from
from fncache.stores import Store, open_store, split_tiers

__all__ = ["MemorizedResult", "NotMemorizedResult"]

#: Subdirectory of a path ``location`` that holds the store (joblib uses ``LOCATION/joblib``).
SUBDIR = "fncache"
_MMAP_MODES = (None, "r", "r+", "w+", "c")


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------


def location_store(location: Any) -> str | Store | tuple[str | Store, ...]:
    """The store behind a joblib ``location``: a path gets the ``fncache`` subdirectory.

    A list of locations (or one string of them joined by commas) is tiers, nearest first, each
    taken as a location is (see :mod:`fncache.stores.tiered`).
    """
    if isinstance(location, Store):
        return location
    tiers = split_tiers(location)
    if tiers is not None:
        if len(tiers) < 2:
            raise ConfigError(f"location: tiers need two or more locations, got {location!r}")
        return tuple(location_store(t) for t in tiers)  # type: ignore[misc]
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not isinstance(location, str) or not location:
        raise ConfigError(
            f"location: expected a directory path, a store URL or None, got {location!r}"
        )
    if "://" in location:
        return location
    return os.path.join(os.path.abspath(os.path.expanduser(location)), SUBDIR)


def check_mmap_mode(mmap_mode: Any) -> str | None:
    if mmap_mode not in _MMAP_MODES:
        raise ConfigError(f"mmap_mode: expected one of {_MMAP_MODES}, got {mmap_mode!r}")
    return mmap_mode  # type: ignore[no-any-return]


def check_backend(backend: Any) -> None:
    if backend != "local":
        raise ConfigError(
            f"backend: only 'local' is supported, got {backend!r}; for a shared cache pass an "
            "fncache store URL (redis://..., s3://...) as location"
        )


def backend_store_options(backend_options: dict[str, Any] | None) -> dict[str, Any]:
    # joblib's local backend reads compress/mmap_mode/verbose from here too; fncache takes those
    # from the Memory arguments, and hands the rest (e.g. size_limit) to the store.
    opts = dict(backend_options or {})
    for name in ("compress", "mmap_mode", "verbose"):
        opts.pop(name, None)
    return opts


# ---------------------------------------------------------------------------------------------
# Reading entries: memory maps, and a disk store whose directory was deleted
# ---------------------------------------------------------------------------------------------

def revive(store: Store) -> None:
    """Reopen a disk store whose directory was deleted (or replaced) since the last look."""
    store.refresh()


def read_entry(store: Store, key: str, check: Any, mmap_mode: str | None) -> Any:
    """The frame at ``key`` (``None`` if absent); with ``mmap_mode="r"`` a memory map if possible.

    Stores that keep values in files (disk: values over 32 KiB) map them; smaller values and other
    stores' values are read into memory. ``"c"``, ``"r+"`` and ``"w+"`` read a private, writable
    copy: an entry is checksummed and immutable, so writes must never reach it. ``check`` as
    :meth:`Store.get_checked` takes it.
    """
    store.refresh()
    return store.get_checked(key, check, mmap_mode == "r")


def result_metadata(header: _codec.Header) -> dict[str, Any]:
    """joblib's metadata dict for an entry: when it was computed and how long that took."""
    return {"duration": header.duration, "time": header.created}


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


class MemorizedResult:
    """A small, picklable handle on one cached result; :meth:`get` loads it.

    Safe to send to other processes: it holds the store's configuration, not a connection.
    :meth:`get` raises ``KeyError`` once the entry is gone (cleared, evicted) or fails its checksum.
    """

    def __init__(
        self,
        location: Any,
        call_id: tuple[str, str],
        backend: str = "local",
        mmap_mode: str | None = None,
        verbose: int = 0,
        timestamp: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        check_backend(backend)
        self.store = open_store(location_store(location))
        self.func_id, self.args_id = call_id
        self.mmap_mode = check_mmap_mode(mmap_mode)
        self.verbose = verbose
        self.timestamp = timestamp
        self._metadata = metadata

    @property
    def location(self) -> str:
        return self.store.url

    @property
    def metadata(self) -> dict[str, Any]:
        """``{"duration": ..., "time": ...}`` of the entry, or ``{}`` if it is gone."""
        if self._metadata is None:
            frame = self.store.get(self.args_id)
            try:
                return result_metadata(_codec.read_header(frame)) if frame is not None else {}
            except IntegrityError:
                return {}
        return self._metadata

    @property
    def duration(self) -> float | None:
        return self.metadata.get("duration")

    def get(self) -> Any:
        """The cached value. Raises ``KeyError`` if it is no longer in the cache."""
        secret = secret_from(None)
        check = functools.partial(_codec.verify, secret=secret)
        frame = read_entry(self.store, self.args_id, check, self.mmap_mode)
        if frame is None:
            raise KeyError(f"{self.func_id}: result {self.args_id} is not in the cache")
        try:
            # As in Memoized._lookup: a mapped frame's array bytes are left unread.
            return _codec.decode(frame, self.args_id, secret=secret,
                                 verify_buffers=type(frame) is not mmap.mmap)[0]
        except IntegrityError as e:
            raise KeyError(f"{self.func_id}: result {self.args_id} is damaged: {e}") from e

    def clear(self) -> None:
        """Remove the result from the cache; a later :meth:`get` raises ``KeyError``."""
        self.store.delete(self.args_id)

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, timestamp=None)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(location="{self.location}", func="{self.func_id}", '
                f'args_id="{self.args_id}")')


class NotMemorizedResult:
    """A result held in memory, for when caching is off (``Memory(None)``)."""

    __slots__ = ("value", "valid")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.valid = True

    def get(self) -> Any:
        if not self.valid:
            raise KeyError("No value stored.")
        return self.value

    def clear(self) -> None:
        self.valid, self.value = False, None

    def __getstate__(self) -> dict[str, Any]:
        return {"valid": self.valid, "value": self.value}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.valid, self.value = state["valid"], state["value"]

    def __repr__(self) -> str:
        if self.valid:
            return f"{type(self).__name__}({pformat(self.value)})"
        return f"{type(self).__name__} with no value"
