"""The store protocol: bytes in, bytes out, by key.

A store knows nothing about pickling, functions or keys' meaning. It keeps, per key, an opaque value
(``bytes``) and a small metadata dict (JSON-serialisable: function id, sizes, times). The codec turns
results into value bytes and checks them on the way back; the memoize layer decides what to store.

Every store:

* is picklable as its *configuration* (``__reduce__`` returns ``(open_store, (url, options))``) and
  connects lazily, so a memoized function can be shipped to other processes or machines and reconnect
  there; a store never pickles a live connection or a secret in clear;
* raises :class:`fncache.StoreError` (an ``OSError``) for I/O and network failures, never a backend's own
  exception type; the memoize layer turns those into logged misses;
* publishes a value atomically: a reader sees either no entry or the whole value, never a part.

Keys are lowercase hex strings (the xxh3-128 digest of a call); stores may rely on that.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, ClassVar, NamedTuple

from fncache._records import Record

#: Seconds that data no entry references is left alone before it counts as orphaned: a writer
#: writes its data before it publishes the entry, and may be doing so right now.
ORPHAN_GRACE = 3600.0

_set = object.__setattr__  # a frozen record's own __init__ sets its fields

__all__ = [
    "ORPHAN_GRACE",
    "EntryInfo",
    "FunctionSummary",
    "Store",
    "summarize",
    "Use",
    "entry_info",
    "join_parts",
    "parse_use",
    "store_error",
    "value_size",
]

def store_error(store: Store, what: str, error: BaseException, detail: str = "",
                text: str | None = None) -> Exception:
    """The one translation of a backend's failure into :class:`fncache.StoreError`.

    Every store says it the same way, ``"<kind> <what> failed on <url>[ (<detail>)]: <error>"``, with
    the URL's password masked; raise it ``from error`` so the backend's exception stays the cause.
    """
    from fncache._errors import StoreError
    from fncache.stores import redact

    return StoreError(f"{store.kind} {what} failed on {redact(store.url)}{detail}: "
                      f"{text or str(error) or type(error).__name__}")


def join_parts(value: Any) -> bytes | bytearray | memoryview:
    """A value given to :meth:`Store.add`/:meth:`Store.set` as one contiguous buffer.

    Values may come as a list of bytes-like parts (a frame with large buffers left where the result
    holds them); stores that cannot write parts one after another join them here.
    """
    if isinstance(value, (list, tuple)):
        finish = getattr(value, "finish", None)  # a LateFrame's head, checksummed now
        return b"".join(value if finish is None else finish())
    return value  # type: ignore[no-any-return]


def value_size(value: Any) -> int:
    """Size in bytes of a value or of a list of parts."""
    if isinstance(value, (list, tuple)):
        return sum(memoryview(p).nbytes for p in value)
    return memoryview(value).nbytes


@dataclasses.dataclass(init=False, repr=False, eq=False, frozen=True)  # see fncache._records
class EntryInfo(Record):
    """What a store knows about one entry without reading its value.

    ``created`` and ``accessed`` are POSIX timestamps; ``accessed`` is the last use (from the usage
    records, see :meth:`Store.record_use`, or the backend's own read tracking), ``None`` where the
    store knows of none. ``size`` is the size of the stored value in bytes. ``meta`` is the dict given to
    :meth:`Store.add` (``{}`` if it was lost, e.g. after a crash between the two writes of a store that
    keeps them apart).
    """

    key: str
    size: int
    created: float
    accessed: float | None
    meta: dict[str, Any]
    #: the metadata was unreadable or of the wrong types (planted, corrupted): listed, never trusted
    damaged: bool = False
    #: how many uses (hits) the store's usage records count, ``None`` where it has none for the entry
    uses: int | None = None

    def __init__(self, key: str, size: int, created: float, accessed: float | None,
                 meta: dict[str, Any], damaged: bool = False, uses: int | None = None) -> None:
        _set(self, "key", key)
        _set(self, "size", size)
        _set(self, "created", created)
        _set(self, "accessed", accessed)
        _set(self, "meta", meta)
        _set(self, "damaged", damaged)
        _set(self, "uses", uses)

    @property
    def function(self) -> str:
        """``module:qualname`` of the function that produced the entry, or ``""`` if unknown."""
        name = self.meta.get("function", "")
        return name if isinstance(name, str) else ""

    @property
    def python(self) -> str | None:
        """The Python version (``"3.11"``) that wrote the entry, ``None`` where the metadata at hand
        does not say (a listing of Redis or S3 names the function only; see :func:`python_of`)."""
        version = self.meta.get("python")
        return version if isinstance(version, str) and len(version) <= 16 else None


@dataclasses.dataclass(init=False, repr=False, eq=False, frozen=True)  # see fncache._records
class FunctionSummary(Record):
    """The entries of one function written by one Python version: a row of ``fncache info`` / ``ls``.

    ``function`` is ``module:qualname`` (``""`` where unknown); ``damaged`` rows gather entries whose
    metadata is unreadable (their ``function`` and ``python`` are ``""`` and ``None``). ``newest`` and
    ``oldest`` are creation times, ``used`` the last use of any of the entries (``None``: no usage
    records), ``uses`` the sum of their use counts. A store may answer from aggregates it maintains
    instead of reading every entry (see :meth:`Store.summary`).
    """

    function: str
    python: str | None
    entries: int
    size: int
    newest: float
    oldest: float
    used: float | None = None
    uses: int = 0
    damaged: bool = False

    def __init__(self, function: str, python: str | None, entries: int, size: int, newest: float,
                 oldest: float, used: float | None = None, uses: int = 0,
                 damaged: bool = False) -> None:
        _set(self, "function", function)
        _set(self, "python", python)
        _set(self, "entries", entries)
        _set(self, "size", size)
        _set(self, "newest", newest)
        _set(self, "oldest", oldest)
        _set(self, "used", used)
        _set(self, "uses", uses)
        _set(self, "damaged", damaged)


def summarize(entries: Iterator[EntryInfo] | list[EntryInfo]) -> list[FunctionSummary]:
    """Group entries into :class:`FunctionSummary` rows by (function, python, damaged), in a sorted
    order: the definition of what :meth:`Store.summary` must return."""
    groups: dict[tuple[str, str | None, bool], list[Any]] = {}
    for e in entries:
        group = ("", None, True) if e.damaged else (e.function, e.python, False)
        g = groups.get(group)
        if g is None:
            groups[group] = [1, e.size, e.created, e.created, e.accessed, e.uses or 0]
            continue
        g[0] += 1
        g[1] += e.size
        g[2] = max(g[2], e.created)
        g[3] = min(g[3], e.created)
        if e.accessed is not None:
            g[4] = e.accessed if g[4] is None else max(g[4], e.accessed)
        g[5] += e.uses or 0
    return [FunctionSummary(function, python, n, size, newest, oldest, used, uses, damaged)
            for (function, python, damaged), (n, size, newest, oldest, used, uses)
            in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2]))]


def _finite(value: Any) -> float | None:
    """``value`` as a finite, non-negative float, or ``None`` if it is anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) and number >= 0 else None


def entry_info(
    key: str, size: int, meta: Any, *, created: float | None = None,
    accessed: float | None = None, damaged: bool = False, uses: int | None = None,
) -> EntryInfo:
    """An :class:`EntryInfo` built from untrusted metadata.

    ``size`` is what the store measured (the stored length), never a size the metadata claims.
    Metadata of the wrong types (``"created": [1]``, ``"function": 5``, not a dict) marks the entry
    ``damaged`` and is dropped, and a damaged entry's creation time is unknown (0.0). ``created`` (a
    time the store knows, e.g. an object's modification time) is the fallback when intact metadata
    has none. A listing built from these never crashes.
    """
    if not isinstance(meta, dict):
        meta, damaged = {}, True
    when = _finite(meta.get("created"))
    if damaged or _wrong_types(meta, when):
        # Unknown, so counted as oldest: `clear --older-than` and `prune` remove damage first.
        meta, when, created, damaged = {}, None, None, True
    return EntryInfo(
        key=key,
        size=max(int(size), 0),
        created=when if when is not None else (_finite(created) or 0.0),
        accessed=_finite(accessed),
        meta=meta,
        damaged=damaged,
        uses=_count(uses),
    )


def _wrong_types(meta: dict[str, Any], when: float | None) -> bool:
    """Whether metadata claims a creation time that is not a finite time (``when``), or a
    function name that is not a string."""
    claimed, function = meta.get("created"), meta.get("function")
    return (claimed is not None and when is None) or (
        function is not None and not isinstance(function, str))


def _count(uses: Any) -> int | None:
    """A number of uses if it is one (an int from 0 below 2**53), else None."""
    return uses if type(uses) is int and 0 <= uses < 2**53 else None


class Use(NamedTuple):
    """Uses of one entry recorded in this process: the last time (POSIX) and how many."""

    key: str
    function: str
    last: float
    times: int


#: Usage records claiming a last use further ahead of the clock than this are not believed.
MAX_CLOCK_SKEW = 86400.0


def parse_use(last: Any, count: Any, t: float) -> tuple[float, int] | None:
    """A usage record read from a store, checked: it is untrusted (anyone who can write the store
    can write it). ``(last, count)`` with a finite time not far in the future and a count that is a
    non-negative int, else ``None``. A record only ever ranks an entry; it never touches a value."""
    when = _finite(last)
    if when is None or when > t + MAX_CLOCK_SKEW:
        return None
    if type(count) is not int or not 0 <= count < 2**53:
        return None
    return when, count


class Store:
    """Base class and documentation of the store protocol.

    Subclasses implement the methods that raise ``NotImplementedError`` (``get``, ``entries``,
    ``add``, ``set``, ``delete``, ``lock``); the others have defaults written in terms of those, which
    a store overrides where its backend does better (``contains`` without reading the value,
    ``get_mmap`` from a file, ``get_meta`` by key, ``clear_function`` through an index). ``url`` is
    the canonical URL the store was opened with; ``options`` the keyword options (never secrets)
    needed to reopen it.
    ``tests/test_stores.py``'s ``StoreContract`` is what every store must pass.
    """

    #: short name of the kind of store, shown by ``fncache info``
    kind: str = "abstract"
    #: Called by a store's bulk removals (:meth:`clear`, :meth:`clear_function`) that work in
    #: batches, with the number of entries removed so far (the command line's progress counter);
    #: None: nothing is called. Stores that remove all at once do not call it.
    progress: Callable[[int], None] | None = None
    #: whether add/set take a list of parts and write them without joining them first
    accepts_parts: bool = False
    #: whether add/set take a large frame that is checksummed while it is written to a file
    #: (:class:`fncache._framedigests.LateFrame`: its head is filled in by the write); only
    #: with ``accepts_parts``
    writes_late: bool = False
    #: whether :meth:`entries` is cheap enough to read on a miss (no request of its own per
    #: entry), so that ``verbose`` may scan it for a function's earlier entries. Default: no.
    lists_cheaply: bool = False
    #: options a store of this class opened by URL as a far tier (see
    #: :mod:`fncache.stores.tiered`) gets where its own options do not set them: time-outs short
    #: enough that a call waits for a failing server briefly, once per cool-down. Default: none.
    far_tier_options: ClassVar[dict[str, Any]] = {}

    def __init__(self, url: str, **options: Any) -> None:
        self.url = url
        self.options = options

    # -- where the store is -----------------------------------------------------------------------
    @property
    def local_directory(self) -> str | None:
        """The directory on this machine that holds the store (``doctor`` checks its permissions
        and free space), ``None`` for a store kept elsewhere. Default: ``None``."""
        return None

    @property
    def nearest(self) -> Store:
        """The store this machine reads first, whose entries are the ones it used: the store
        itself, or a tiered store's nearest tier. Default: the store itself."""
        return self

    def database_bytes(self) -> int:
        """Bytes the store's own database takes beside its values (a disk store's SQLite files,
        shown by ``fncache info``). Default: 0."""
        return 0

    # -- reading ---------------------------------------------------------------------------------
    def get(self, key: str) -> bytes | bytearray | memoryview | None:
        """The value stored at ``key``, or ``None``. Never a partial value."""
        raise NotImplementedError

    def get_mmap(self, key: str) -> Any:
        """The value at ``key`` as a read-only memory map where the store keeps it in a file, else
        as :meth:`get` returns it; ``None`` if absent. Default: :meth:`get`."""
        return self.get(key)

    def contains(self, key: str) -> bool:
        """Whether an entry exists at ``key`` (it may still fail its checksum when read).

        Default: :meth:`get` is not ``None`` (reads the value; stores override it).
        """
        return self.get(key) is not None

    def get_checked(self, key: str, check: Callable[[str, Any], bool],
                    mapped: bool = False) -> Any:
        """The value at ``key`` as :meth:`get` (``mapped``: :meth:`get_mmap`) returns it, or ``None``.

        ``check(key, value)`` says whether a value is sound (its checksum and signature hold). A
        store that copies values it reads from one place into another (a tiered store filling its
        near tier from its far one) copies only values ``check`` accepts, and returns the others
        as read, uncopied, for the caller to reject. Default: :meth:`get` (or :meth:`get_mmap`).
        """
        return self.get_mmap(key) if mapped else self.get(key)

    def reject(self, key: str) -> bool:
        """The value this thread just read at ``key`` failed its check: remove it where it was
        read from. Returns whether another copy may be read at ``key`` now (a store that reads
        from several places, tiers, removes it from the one that gave it and leaves sound copies
        elsewhere). Default: :meth:`delete`, and ``False``."""
        self.delete(key)
        return False

    def get_meta(self, key: str) -> dict[str, Any]:
        """The metadata stored with the entry at ``key``: ``{}`` if there is no entry, or its
        metadata was lost or is damaged. Untrusted, as in :meth:`entries`; never a large read.

        Default: one pass over :meth:`entries` (stores override it with a direct read).
        """
        for info in self.entries():
            if info.key == key:
                return {} if info.damaged else dict(info.meta)
        return {}

    def entries(self) -> Iterator[EntryInfo]:
        """Every entry with its metadata, in no particular order.

        Safe against concurrent writers: entries added or removed meanwhile may or may not be listed.
        """
        raise NotImplementedError

    def listing(self) -> Iterator[EntryInfo]:
        """Every entry as the store can list it cheaply: key, size, creation time, last use, function.

        For the admin commands (``fncache ls``, ``info``, ``clear``, ``prune``): a store whose
        :meth:`entries` reads one record per entry (Redis, S3) lists from an index here and fills
        ``meta`` with ``{"function": ...}`` only. Default: :meth:`entries`. Same concurrency as
        :meth:`entries`.
        """
        return self.entries()

    def summary(self) -> list[FunctionSummary]:
        """Per (function, Python version): entries, bytes, newest, oldest, last use and uses.

        For ``fncache info`` and ``ls``: the same rows as :func:`summarize` over :meth:`listing`
        (the default), which a store may answer from aggregates it keeps up to date with its entries,
        so that a large store is summarised without reading every entry. Aggregates are a cache of
        the listing, never trusted over it: a store that finds them missing or inconsistent rebuilds
        them from its entries. Same concurrency as :meth:`listing`. Default: :meth:`kept_summary`,
        else :func:`summarize` over :meth:`listing`."""
        kept = self.kept_summary()
        return summarize(self.listing()) if kept is None else kept

    def kept_summary(self) -> list[FunctionSummary] | None:
        """:meth:`summary` as the store's own aggregates answer it (checked, and rebuilt where they
        are off, as :meth:`summary` says); ``None`` where it keeps none, or cannot answer from them
        now (then only a listing can). ``prune`` asks it first: a store within its limits is then
        pruned without listing an entry. Default: ``None``."""
        return None

    def volume(self) -> int:
        """Total bytes of stored values (an estimate where the backend only knows approximately)."""
        return sum(e.size for e in self.listing())

    def __len__(self) -> int:
        return sum(1 for _ in self.listing())

    # -- writing ---------------------------------------------------------------------------------
    def add(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> bool:
        """Store ``value`` at ``key`` unless an entry is there already.

        ``value`` is bytes-like, or a list of bytes-like parts stored one after another (see
        :func:`join_parts`).

        Operation is atomic: of concurrent ``add`` calls for one key exactly one succeeds and returns
        ``True``; the others return ``False`` and leave the first value in place. ``expire`` is a
        lifetime in seconds after which the entry reads as missing (and may be removed).
        """
        raise NotImplementedError

    def set(self, key: str, value: bytes, meta: dict[str, Any], expire: float | None = None) -> None:
        """Store ``value`` at ``key``, replacing any entry. Atomic: readers see the old or the new value."""
        raise NotImplementedError

    def delete(self, key: str) -> bool:
        """Remove the entry at ``key``; ``True`` if there was one. Idempotent."""
        raise NotImplementedError

    def delete_many(self, keys: list[str]) -> int:
        """Remove the entries at ``keys`` (those of a listing, for ``clear`` and ``prune``); the
        number there were. Idempotent; not atomic as a whole. Default: :meth:`delete` each; stores
        whose backend deletes in batches override it."""
        return sum(bool(self.delete(key)) for key in keys)

    def clear(self) -> int:
        """Remove every entry of this store; returns how many were removed (an estimate for some)."""
        n = 0
        for info in list(self.listing()):
            n += self.delete(info.key)
        return n

    def clear_function(self, function: str) -> int:
        """Remove every entry whose metadata names ``function`` (``module:qualname``); the count.

        Default: one pass over :meth:`listing`; entries added meanwhile may or may not be removed.
        """
        n = 0
        for info in list(self.listing()):
            if info.function == function:
                n += self.delete(info.key)
        return n

    def record_use(self, uses: list[Use]) -> None:
        """Add the uses of entries (hits, batched in-process by :mod:`fncache._usage`) to the
        store's usage records: each entry's last use becomes the later of the two, its count grows.

        Bookkeeping only: records of entries that are gone are dropped, concurrent writers may lose
        one another's counts (never a value), and failures raise :class:`fncache.StoreError` for
        the caller to log. Default: nothing is recorded.
        """

    def refresh(self) -> None:
        """Notice that the backend was removed or replaced under this process (a deleted cache
        directory) and reconnect on next use. Default: nothing to notice."""

    def lock(self, key: str, timeout: float) -> AbstractContextManager[Any]:
        """A lock for computing ``key``, shared by every process that uses this store.

        The lock expires by itself after ``timeout`` seconds, so a holder that died does not block others
        for longer than that. Entering waits until the lock is free.
        """
        raise NotImplementedError

    # -- kept sources (explain's diffs, see fncache.code.sources) ------------------------------------
    #: Whether the store keeps function sources beside its entries. Default: no (``explain`` then
    #: names a changed function without its lines); the disk and memory stores do.
    keeps_sources: bool = False

    def put_source(self, address: str, text: bytes) -> None:
        """Keep ``text`` at ``address`` (32 lowercase hex characters, the text's content address).

        Idempotent, atomic: a reader sees the whole text or nothing. Never an entry (``entries``,
        ``listing`` and ``len`` do not show it). Default: nothing is kept."""

    def get_source(self, address: str) -> bytes | None:
        """The text kept at ``address``, or ``None``. Untrusted: the caller checks it against its
        address. Never larger than the caller's limit (``fncache.code.sources.MAX_SOURCE``)."""
        return None

    def source_sizes(self) -> dict[str, int]:
        """Every kept source: ``{address: bytes}``."""
        return {}

    def delete_sources(self, addresses: Iterator[str] | list[str]) -> int:
        """Remove the sources at ``addresses`` (absent ones are skipped); how many were removed."""
        return 0

    def orphans(self, grace: float = ORPHAN_GRACE) -> tuple[int, int]:
        """(count, bytes) of stored data that belongs to no entry and is older than ``grace``
        seconds (left by writers killed mid-write); ``(0, 0)`` where a store cannot leave any."""
        return (0, 0)

    def sweep_orphans(self, grace: float = ORPHAN_GRACE) -> tuple[int, int]:
        """Remove what :meth:`orphans` counts; returns (count, bytes) removed."""
        return (0, 0)

    def close(self) -> None:
        """Drop connections and handles; the store reconnects on next use."""

    # -- pickling as configuration --------------------------------------------------------------
    def __reduce__(self) -> tuple[Any, ...]:
        from fncache.stores import _reopen

        return (_reopen, (self.url, self.options))

    def __repr__(self) -> str:
        from fncache.stores import redact

        return f"{type(self).__name__}({redact(self.url)!r})"


def now() -> float:
    """The wall clock used for entry times (one place, so tests can reason about it)."""
    return time.time()
