"""Tiers: a near store (a local directory) in front of far ones (a team's bucket or Redis).

``store=[near, far]``, ``store="DIR,s3://bucket/prefix"`` or ``FNCACHE_STORE="DIR,s3://..."``
(nearest first) open a :class:`TieredStore`:

* **Reading** tries each tier in order. A value found in a far tier is copied into every nearer one,
  with its metadata (so ``fncache ls`` and ``explain`` see it locally), but only when the caller's
  ``check`` (the codec's checksum and signature, see :meth:`Store.get_checked`) accepts it: a
  damaged or forged far entry is never copied, and the caller rejects (and deletes) it as it would
  from a single store. A plain :meth:`get` copies nothing (it cannot check).
* **Writing** (``add``) goes to the farthest tier first, the shared arbiter of "first writer wins":
  the nearer tiers get the value only if the farther one took it (or is unavailable). A far tier
  that already holds another writer's value leaves the near tiers alone; the next read copies the
  winner's value. So every tier holds the value the shared tier holds, or the only value stored.
* **A far tier that fails** (unreachable, time-out, any error) is skipped for ``cooldown`` seconds
  (default 30, or ``$FNCACHE_TIER_COOLDOWN``): a circuit breaker, logged once as a WARNING per
  outage. Meanwhile reads are served by the nearer tiers and results are stored there only
  (computed during the outage, they are not uploaded later). After the cool-down one call tries
  the far tier again; if it answers, the tier is used again (logged). A far S3 or Redis tier is
  opened with short time-outs unless its options say otherwise: S3 ``connect_timeout=2``,
  ``read_timeout=5``, ``retries=1``; Redis ``socket_connect_timeout=2``, ``socket_timeout=5``.
* **The nearest tier's** own errors are raised as from a single store (a logged miss for a memoized
  call). It keeps its own size limit and expiry; the far tier's are the team's.
* **Locks** (``lock=True``) are the farthest tier's (shared by every machine), the nearest tier's
  while the far one is skipped.
* ``delete`` removes the entry from every tier it can reach (``reject``, of a value that failed
  its check, only from the tier it was read from); ``clear`` and ``clear_function``
  clear every tier and raise if one fails. ``entries`` lists each key once, nearest tier first.

Failures never give a wrong value: a tier that fails is a miss, and every value read, from any
tier, is checked by the codec before it is used.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import mmap
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from fncache import _forks
from fncache._errors import ConfigError
from fncache.stores import split_tiers
from fncache.stores._base import ORPHAN_GRACE, EntryInfo, Store, entry_info, now

__all__ = ["DEFAULT_COOLDOWN", "TieredStore", "split_tiers"]

log = logging.getLogger("fncache")

#: Seconds a far tier is skipped after a failure (``$FNCACHE_TIER_COOLDOWN`` overrides it).
DEFAULT_COOLDOWN = 30.0
_SKIPPED = object()


def _cooldown(value: Any) -> float:
    if value is None:
        value = os.environ.get("FNCACHE_TIER_COOLDOWN") or DEFAULT_COOLDOWN
        try:
            value = float(value)
        except ValueError:
            raise ConfigError(
                f"FNCACHE_TIER_COOLDOWN: expected seconds, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise ConfigError(f"cooldown: expected a number of seconds >= 0, got {value!r}")
    return float(value)


class _Breaker:
    """Whether one far store is worth trying now; shared by every tiered store that uses it.

    Closed: every operation tries the store. A failure opens it for the cool-down (a WARNING the
    first time per outage); after that, one caller at a time probes the store, and an answer
    closes it again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.retry_at = 0.0  # monotonic time from which the store is tried again
        self.down = False

    def admit(self, cooldown: float) -> bool:
        if not self.down:
            return True
        t = time.monotonic()
        with self._lock:
            if t < self.retry_at:
                return False
            self.retry_at = t + cooldown  # this caller probes; the others keep skipping
            return True

    def failed(self, store: Store, what: str, error: BaseException, cooldown: float) -> None:
        from fncache.stores import redact

        with self._lock:
            self.retry_at = time.monotonic() + cooldown
            first, self.down = not self.down, True
        log.log(logging.WARNING if first else logging.DEBUG,
                "tier %s unavailable (%s failed: %s); for %.0f s, results are read from and "
                "stored in the nearer tier(s) only", redact(store.url), what, error, cooldown)

    def answered(self, store: Store) -> None:
        if self.down:
            from fncache.stores import redact

            with self._lock:
                was, self.down = self.down, False
            if was:
                log.warning("tier %s answers again; results reach it again", redact(store.url))


_breakers: weakref.WeakKeyDictionary[Store, _Breaker] = weakref.WeakKeyDictionary()
_breakers_lock = threading.Lock()


def _fresh_breaker_locks() -> None:
    global _breakers_lock
    _breakers_lock = threading.Lock()
    for breaker in list(_breakers.values()):
        breaker._lock = threading.Lock()


_forks.on_fork(_fresh_breaker_locks)


def _breaker(store: Store) -> _Breaker:
    with _breakers_lock:
        found = _breakers.get(store)
        if found is None:
            found = _breakers[store] = _Breaker()
        return found


def _far_options(spec: Any, options: dict[str, Any]) -> dict[str, Any]:
    """A far tier's options with short time-outs where the user set none (its class's
    :attr:`~fncache.stores.Store.far_tier_options`: a call waits for a failing server at most that
    long once per cool-down)."""
    from fncache.stores import store_class

    if not isinstance(spec, str) or "://" not in spec:
        return options
    return {**store_class(spec).far_tier_options, **options}


def _remaining(meta: dict[str, Any]) -> float | None:
    """Seconds left before a copied entry expires (from its ``expires`` time); ``None``: never;
    ``0.0``: already expired (not copied)."""
    expires = meta.get("expires")
    if isinstance(expires, bool) or not isinstance(expires, (int, float)) \
            or not math.isfinite(expires):
        return None
    return max(float(expires) - now(), 0.0)


def _open_tiers(specs: list[Any], tiers: Any) -> list[Store]:
    """Each tier opened: a :class:`Store` as it is, a path or URL with its options (``tiers``)."""
    if len(specs) < 2:
        raise ConfigError(f"store: a tiered store needs two or more tiers, got {specs!r}")
    tiers = _tier_options(specs, tiers)
    return [_open_tier(spec, options, nearest=i == 0)
            for i, (spec, options) in enumerate(zip(specs, tiers, strict=True))]


def _tier_options(specs: list[Any], tiers: Any) -> list[dict[str, Any]]:
    """``tiers`` checked: one dict of options per tier (none given: empty ones)."""
    if tiers is None:
        return [{} for _ in specs]
    if not isinstance(tiers, (list, tuple)) or len(tiers) != len(specs) \
            or not all(isinstance(o, dict) for o in tiers):
        raise ConfigError(
            f"store_options: tiers= needs one dict of options per tier ({len(specs)})")
    return list(tiers)


def _open_tier(spec: Any, options: dict[str, Any], *, nearest: bool) -> Store:
    """One tier: a :class:`Store` as it is (no options), a path or URL opened with its options."""
    from fncache.stores import open_store

    if isinstance(spec, Store):
        if options:
            raise ConfigError("store_options: tiers= options are for tiers given as a "
                              "path or URL, not a Store object")
        return spec
    if not isinstance(spec, (str, os.PathLike)) or not os.fspath(spec):
        raise ConfigError(f"store: each tier is a path, a URL or a Store, got {spec!r}")
    return open_store(spec, **(dict(options) if nearest else
                               _far_options(os.fspath(spec), options)))


class TieredStore(Store):
    """Stores tried nearest first; see the module documentation.

    ``TieredStore(url, tiers=[options, ...], cooldown=None)``: ``url`` is the tiers, nearest first,
    as a list (paths, URLs or opened stores) or a comma-separated string; ``tiers`` one dict of
    options per tier given as a path or URL (default none); ``cooldown`` the seconds a failed far
    tier is skipped (default ``$FNCACHE_TIER_COOLDOWN`` or 30).
    """

    kind = "tiered"

    def __init__(self, url: str | Sequence[Any], tiers: Sequence[dict[str, Any]] | None = None,
                 cooldown: float | None = None, **unknown: Any) -> None:
        if unknown:
            raise ConfigError(
                f"store_options: unknown option(s) for a tiered store: {', '.join(unknown)}; "
                "expected tiers (one dict of options per tier) and cooldown")
        self.tiers: list[Store] = _open_tiers(split_tiers(url) or [url], tiers)
        self.cooldown = _cooldown(cooldown)
        options: dict[str, Any] = {"tiers": [dict(t.options) for t in self.tiers]}
        if cooldown is not None:
            options["cooldown"] = self.cooldown
        super().__init__(",".join(t.url for t in self.tiers), **options)
        # Each tier joins parts itself if it must (see join_parts): parts save a join in the others.
        self.accepts_parts = any(t.accepts_parts for t in self.tiers)
        # (key, tier) of this thread's last read: what reject() removes.
        self._served = threading.local()

    @property
    def nearest(self) -> Store:
        """The nearest tier: it holds copies of what this machine used."""
        return self.tiers[0]

    # -- the breaker -----------------------------------------------------------------------------
    def _on(self, index: int, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on tier ``index``; for a far tier, ``_SKIPPED`` when it fails or is being
        skipped (the nearest tier's errors propagate)."""
        if index == 0:
            return fn(*args)
        tier = self.tiers[index]
        breaker = _breaker(tier)
        if not breaker.admit(self.cooldown):
            return _SKIPPED
        try:
            result = fn(*args)
        except Exception as e:  # any failure of a far tier is a skipped tier, never the call's
            breaker.failed(tier, what, e, self.cooldown)
            return _SKIPPED
        breaker.answered(tier)
        return result

    # -- reading ---------------------------------------------------------------------------------
    # Kept sources (explain's diffs) live in the nearest tier: they help the reader who runs explain.
    @property
    def keeps_sources(self) -> bool:  # type: ignore[override]
        return self.tiers[0].keeps_sources

    def put_source(self, address: str, text: bytes) -> None:
        self.tiers[0].put_source(address, text)

    def get_source(self, address: str) -> bytes | None:
        return self.tiers[0].get_source(address)

    def source_sizes(self) -> dict[str, int]:
        return self.tiers[0].source_sizes()

    def delete_sources(self, addresses: Any) -> int:
        return self.tiers[0].delete_sources(addresses)

    def get(self, key: str) -> Any:
        """The value from the nearest tier that has it; nothing is copied (nothing is checked)."""
        return self._find(key, None, False)

    def get_mmap(self, key: str) -> Any:
        return self._find(key, None, True)

    def get_checked(self, key: str, check: Callable[[str, Any], bool],
                    mapped: bool = False) -> Any:
        """The value from the nearest tier that has it; one found in a far tier is copied into
        the nearer tiers (with its metadata) if ``check`` accepts it, and returned either way."""
        return self._find(key, check, mapped)

    def _find(self, key: str, check: Callable[[str, Any], bool] | None, mapped: bool) -> Any:
        near = self.tiers[0]
        value = near.get_mmap(key) if mapped else near.get(key)
        if value is not None:
            self._served.last = (key, 0)
            return value
        for i in range(1, len(self.tiers)):
            tier = self.tiers[i]
            value = self._on(i, "read", tier.get_mmap if mapped else tier.get, key)
            if value is _SKIPPED or value is None:
                continue
            self._served.last = (key, i)
            if check is not None:
                # What is copied is what was checked: a memory map (a file others may write) is
                # copied to private bytes first, then checked, then those bytes are written.
                data = bytes(value) if isinstance(value, mmap.mmap) else value
                if check(key, data):
                    self._copy(i, key, data)
            return value
        return None

    def _copy(self, found_in: int, key: str, value: Any) -> None:
        """Add a checked value read from tier ``found_in`` to every nearer tier, with the metadata
        it has there. Best effort: a failure to copy is logged, and the value is still used."""
        meta = self._on(found_in, "read", self.tiers[found_in].get_meta, key)
        if not isinstance(meta, dict):  # the tier failed: no copy without its metadata
            return
        # Untrusted: metadata of the wrong types is not carried into the near tier's index.
        meta = {} if entry_info(key, 0, meta).damaged else dict(meta)
        expire = _remaining(meta)
        if expire == 0.0:
            return
        for k in ("expires", "size"):  # each store sets its own
            meta.pop(k, None)
        data = value if isinstance(value, (bytes, bytearray, memoryview)) else bytes(value)
        for i in range(found_in - 1, -1, -1):
            try:
                self._on(i, "write", self.tiers[i].add, key, data, meta, expire)
            except Exception as e:  # the near tier's own failure: the value is still good
                from fncache.stores import redact

                log.warning("tier %s: copying entry %s failed: %s", redact(self.tiers[i].url),
                            key, e)

    def get_meta(self, key: str) -> dict[str, Any]:
        for i, tier in enumerate(self.tiers):
            meta = self._on(i, "lookup", tier.get_meta, key)
            if isinstance(meta, dict) and meta:
                return meta
        return {}

    def contains(self, key: str) -> bool:
        return any(self._on(i, "lookup", tier.contains, key) is True
                   for i, tier in enumerate(self.tiers))

    def entries(self) -> Iterator[EntryInfo]:
        """Each key once, from the nearest tier that lists it; a far tier that fails is skipped."""
        seen: set[str] = set()
        for i, tier in enumerate(self.tiers):
            listed = self._on(i, "list", lambda t=tier: list(t.entries()))
            for info in () if listed is _SKIPPED else listed:
                if info.key not in seen:
                    seen.add(info.key)
                    yield info

    def listing(self) -> Iterator[EntryInfo]:
        """:meth:`entries` from each tier's cheap listing (no entry read where the tier has one);
        a key listed by several tiers comes from the nearest, with the latest use any tier knows."""
        found: dict[str, EntryInfo] = {}
        for i, tier in enumerate(self.tiers):
            listed = self._on(i, "list", lambda t=tier: list(t.listing()))
            for info in () if listed is _SKIPPED else listed:
                first = found.get(info.key)
                if first is None:
                    found[info.key] = info
                elif info.accessed is not None and (first.accessed is None
                                                    or info.accessed > first.accessed):
                    found[info.key] = dataclasses.replace(first, accessed=info.accessed,
                                                          uses=info.uses)
        yield from found.values()

    def record_use(self, uses: list[Any]) -> None:
        """Uses reach every tier that answers: a local hit counts for the team's store too, so
        pruning it keeps what any machine still reads."""
        for i, tier in enumerate(self.tiers):
            self._on(i, "write", tier.record_use, uses)

    def delete_many(self, keys: list[str]) -> int:
        """Delete from every tier that answers, in each tier's batches; the count is the largest
        tier's (near tiers hold copies)."""
        counts = [self._on(i, "delete", tier.delete_many, keys) for i, tier in enumerate(self.tiers)]
        return max([c for c in counts if isinstance(c, int)] or [0])

    # -- writing ---------------------------------------------------------------------------------
    def add(self, key: str, value: Any, meta: dict[str, Any], expire: float | None = None) -> bool:
        """Add to the farthest tier that answers, then to each nearer one while the farther took it.

        Atomic as the farthest answering tier's ``add``: its answer is returned; a tier that
        refused (an entry was there) leaves the nearer ones untouched, so no tier holds another
        value than the shared one. Far tiers that fail are skipped (stored nearer only).
        """
        won: bool | None = None
        for i in range(len(self.tiers) - 1, -1, -1):
            result = self._on(i, "write", self.tiers[i].add, key, value, meta, expire)
            if result is _SKIPPED:
                continue
            won = bool(result)
            if not won:
                break
        return bool(won)

    def set(self, key: str, value: Any, meta: dict[str, Any], expire: float | None = None) -> None:
        """Replace the entry in every tier, farthest first (far tiers that fail are skipped)."""
        for i in range(len(self.tiers) - 1, -1, -1):
            self._on(i, "write", self.tiers[i].set, key, value, meta, expire)

    def reject(self, key: str) -> bool:
        """Remove a value that failed its check from the tier this thread read it from: a damaged
        local copy must not cost the team's sound entry (the next read copies that one again). A
        key this thread did not just read is removed from every tier. Returns whether a farther
        tier may hold another copy."""
        last = getattr(self._served, "last", None)
        self._served.last = None
        if last is None or last[0] != key:
            self.delete(key)
            return False
        i: int = last[1]
        self._on(i, "delete", self.tiers[i].delete, key)
        return i + 1 < len(self.tiers)

    def delete(self, key: str) -> bool:
        """Remove the entry from every tier that answers; ``True`` if one had it."""
        found = False
        for i, tier in enumerate(self.tiers):
            found = self._on(i, "delete", tier.delete, key) is True or found
        return found

    def clear(self) -> int:
        """Clear every tier; the count is the largest tier's (near tiers hold copies)."""
        return max([tier.clear() for tier in self.tiers])

    def clear_function(self, function: str) -> int:
        """As :meth:`clear`, for one function's entries."""
        return max([tier.clear_function(function) for tier in self.tiers])

    def refresh(self) -> None:
        for tier in self.tiers:
            tier.refresh()

    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        """The farthest tier's lock (shared by every machine); the nearest's while it is skipped.

        A call looks its key up before it locks, so a far tier that stopped answering is usually
        skipped by then; one that fails the lock itself makes the call compute without the lock.
        """
        far = self.tiers[-1]
        if _breaker(far).down:
            return self.tiers[0].lock(key, timeout)
        return far.lock(key, timeout)

    def orphans(self, grace: float = ORPHAN_GRACE) -> tuple[int, int]:
        counts = [tier.orphans(grace) for tier in self.tiers]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    def sweep_orphans(self, grace: float = ORPHAN_GRACE) -> tuple[int, int]:
        counts = [tier.sweep_orphans(grace) for tier in self.tiers]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    def close(self) -> None:
        for tier in self.tiers:
            tier.close()
