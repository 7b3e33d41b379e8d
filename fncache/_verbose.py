"""What verbose mode prints: each call's outcome, why a miss missed, and how long it computed.

``memoize(verbose=True)`` (default ``$FNCACHE_VERBOSE``) writes to stderr, one line per event::

    [fncache] hit job:score 3f2a9c01b2d4
    [fncache] miss job:score 51bcee2d3d88 (global THRESHOLD changed)
    [fncache] computed job:score in 1.24 s

Lines go to stderr rather than through ``logging`` because verbose mode is for watching a notebook or
a terminal without configuring anything; the ``fncache`` logger gets the same events at DEBUG.

The reason in a miss line is what :func:`fncache.explain` would say first (:mod:`fncache._explain`'s
comparison), against the nearest entry *known* here, with bounded work so that it can stay on: the
entries this process stored, plus the first :data:`SCAN_LIMIT` entries of the store listing, read once
per function and process at its first miss (never for stores whose listing is remote and unbounded:
S3). On a store larger than that the nearest entry may be missed: the line then names what differs from
the nearest one seen, or says that none was seen; ``f.explain(...)`` compares with all of them.

:class:`JoblibLines` prints what ``joblib.Memory(verbose=1)`` prints for a computation (the call, then
the duration), for :class:`fncache.Memory`.

Nothing here may fail a call: any error while finding a reason becomes the reason.
"""

from __future__ import annotations

import itertools
import logging
import reprlib
import sys
import threading
from collections.abc import Callable
from typing import Any

from fncache import _forks
from fncache._callkey import CallKey

__all__ = ["SCAN_LIMIT", "JoblibLines", "MissReasons", "Verbose", "format_seconds"]

log = logging.getLogger("fncache")

#: Entries of the store listing read (once per function and process) to find the nearest entry.
SCAN_LIMIT = 2000
#: Entries of one function kept in memory to compare misses with (the newest).
KEEP = 32
#: Differences named in one miss line.
SHOWN = 3
# Only stores that list cheaply (Store.lists_cheaply: read lazily, in batches, close by) are
# scanned: cut off after SCAN_LIMIT entries costs about that much. S3's listing pages through the
# whole prefix (and fetches metadata) before the first entry, so it is never read here.


def format_seconds(seconds: float) -> str:
    """``"12 ms"``, ``"1.24 s"``, ``"3 min 05 s"``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def _short(d: Any) -> str:
    """One difference in a few words: ``global THRESHOLD changed``."""
    if d.kind == "python":
        return f"Python {d.old} -> {d.new}"
    if d.kind == "version":
        return f"version= {d.old!r} -> {d.new!r}"
    if d.kind == "depends_on":
        return "a depends_on input changed"
    if d.kind == "unrecorded":
        return "what differs is not recorded"
    return f"{d.kind} {d.name} {d.change}"


class MissReasons:
    """The nearest known entry of one function, and why a missed call differs from it.

    Thread-safe (the known entries are replaced, never mutated in place, under a lock).
    ``store()`` gives the function's store (opened lazily by the caller).
    """

    def __init__(self, function: str, store: Callable[[], Any]) -> None:
        self.function = function
        self.root = function.rpartition(":")[2]
        self._store = store
        self._known: list[tuple[float, str, Any]] = []  # (created, key, side), newest first
        self._scanned = False
        self._complete = False  # the scan saw the whole store
        self._lock = threading.Lock()
        _forks.track(self)

    def reset_after_fork(self) -> None:
        """A forked child starts with a free lock (a parent thread may have held it)."""
        self._lock = threading.Lock()

    def remember(self, ck: CallKey, created: float) -> None:
        """Keep the side of an entry just stored by this process."""
        from fncache._differences import Side

        side = Side.of_entry(ck.meta())
        with self._lock:
            known = [k for k in self._known if k[1] != ck.key]
            self._known = [(created, ck.key, side), *known][:KEEP]

    def _scan(self) -> None:
        from fncache._differences import Side

        # A tiered store's nearest tier holds copies of what this machine used.
        store = self._store().nearest
        found: list[tuple[float, str, Any]] = []
        if store.lists_cheaply:
            seen = 0
            for e in itertools.islice(store.entries(), SCAN_LIMIT):
                seen += 1
                if e.function == self.function:
                    found.append((float(e.created or 0), e.key, Side.of_entry(e.meta)))
            self._complete = seen < SCAN_LIMIT
        found.sort(key=lambda k: -k[0])
        with self._lock:
            keys = {k[1] for k in self._known}
            merged = self._known + [k for k in found if k[1] not in keys]
            merged.sort(key=lambda k: -k[0])
            self._known = merged[:KEEP]

    def reason(self, ck: CallKey) -> str:
        """Why ``ck`` missed, in a few words; never raises."""
        try:
            return self._reason(ck)
        except Exception as e:  # a reason is a courtesy: a failing store listing must not fail the call
            return f"reason unknown: {type(e).__name__}: {e}"

    def _reason(self, ck: CallKey) -> str:
        from fncache._differences import Side, differences

        if not self._scanned:
            self._scanned = True
            self._scan()
        known = self._known
        if not known:
            return "new: no stored entry of this function" if self._complete else \
                "no earlier entry of this function seen"
        if any(key == ck.key for _, key, _ in known):
            return "its entry expired, was removed or could not be read"
        now = Side.of_entry(ck.meta())
        # Newest first: the first of the fewest differences wins ties.
        best = min((differences(side, now, self.root) for _, _, side in known), key=len)
        if not best:
            return "same inputs as a stored entry: it expired, was removed or could not be read"
        return _words(best)


def _words(diffs: list[Any]) -> str:
    """A miss line's reason: the first few differences, and where to see a code diff."""
    words = [_short(d) for d in diffs[:SHOWN]]
    if len(diffs) > SHOWN:
        words.append(f"+{len(diffs) - SHOWN} more")
    if any(d.kind in ("function", "helper", "method") and d.change == "changed" for d in diffs):
        words.append("explain() shows the diff")
    return ", ".join(words)


class Verbose:
    """Verbose mode of one memoized function: the ``report`` and ``announce`` strategies."""

    def __init__(self, function: str, store: Callable[[], Any]) -> None:
        self.function = function
        self.reasons = MissReasons(function, store)

    def report(self, what: str, key: str) -> None:
        """A hit or a result shared with another thread (misses are announced instead)."""
        if what != "miss":
            _say(f"[fncache] {what} {self.function} {key[:12]}")
        log.debug("%s %s %s", what, self.function, key)

    def announce(self, ck: CallKey, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Callable[[float, str | None], None]:
        """Print the miss and its reason; the returned function prints the duration and, when the
        result was not stored, why (``not stored: global CALLS changed during the call while other
        threads ran; ...``)."""
        _say(f"[fncache] miss {self.function} {ck.key[:12]} ({self.reasons.reason(ck)})")

        def done(seconds: float, not_stored: str | None = None) -> None:
            import time

            _say(f"[fncache] computed {self.function} in {format_seconds(seconds)}")
            if not_stored is None:
                self.reasons.remember(ck, time.time())
            else:
                _say(f"[fncache] {self.function} {not_stored}")

        return done


_ARG_REPR = reprlib.Repr()
_ARG_REPR.maxstring = _ARG_REPR.maxother = 200
_ARG_REPR.maxlist = _ARG_REPR.maxtuple = _ARG_REPR.maxdict = _ARG_REPR.maxset = 10


def _format_arg(value: Any) -> str:
    try:
        return _ARG_REPR.repr(value)
    except Exception:  # a broken __repr__ must not fail the call
        return f"<{type(value).__qualname__}>"


class JoblibLines:
    """``joblib.Memory(verbose>=1)``'s lines for a computation, on stderr::

        ________________________________________________________________________________
        [Memory] Calling job.score...
        score(3, alpha=0.5)
        ___________________________________________________________score - 1.2s, 0.0min
    """

    def __init__(self, function: str, name: str) -> None:
        self.path = function.replace(":", ".")
        self.name = name

    def announce(self, ck: CallKey, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Callable[[float, str | None], None]:
        call = ", ".join([*(_format_arg(a) for a in args),
                          *(f"{k}={_format_arg(v)}" for k, v in kwargs.items())])
        _say(f"{'_' * 80}\n[Memory] Calling {self.path}...\n{self.name}({call})")

        def done(seconds: float, not_stored: str | None = None) -> None:
            msg = f"{self.name} - {seconds:.1f}s, {seconds / 60:.1f}min"
            _say("_" * max(0, 80 - len(msg)) + msg)

        return done


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
