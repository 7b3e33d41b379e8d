"""A lease lock built on a store's atomic create-only write with expiry.

Used by stores whose backend gives ``add``-with-expiry (diskcache, Redis, memory). The lease
expires by itself after ``ttl`` seconds, so a holder killed with SIGKILL blocks the key for at most
that long. A release deletes the lease only if it is still ours (a token check), so a slow holder
whose lease ran out does not free someone else's. Backends with a server-side compare-and-delete
(Redis) pass it as ``release`` and make that check atomic; the others read, compare, then remove.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from types import TracebackType

__all__ = ["LeaseLock"]

_UNSEEN = object()


class LeaseLock:
    """Context manager: ``with LeaseLock(try_add, read, remove, ttl, wait): ...``.

    ``try_add(token, ttl) -> bool`` creates the lease atomically; ``read() -> token | None`` reads
    it; ``remove()`` deletes it. Entering polls with a growing back-off until the lease is ours or
    ``wait`` seconds passed, then raises :class:`fncache.LockTimeout`. ``release(token)``, if
    given, replaces the read-compare-remove on exit with one atomic "delete if the lease still holds
    ``token``".
    """

    def __init__(
        self,
        try_add: Callable[[str, float], bool],
        read: Callable[[], str | None],
        remove: Callable[[], object],
        ttl: float,
        wait: float | None = None,
        release: Callable[[str], object] | None = None,
    ) -> None:
        self._try_add = try_add
        self._read = read
        self._remove = remove
        self._release = release
        self.ttl = ttl
        self.wait = ttl if wait is None else wait
        self.token = f"{os.getpid()}-{uuid.uuid4().hex}"
        self.acquired = False

    def acquire(self) -> bool:
        """Take the lease, waiting up to ``wait`` seconds for its holder; False if not taken.

        The wait is for one holder: when the lease changes hands meanwhile (its holder died, its
        lease ran out and another waiter took it over), it starts again for the new holder.
        Otherwise every waiter of a holder that died would give up at about the moment the lease
        ran out, and all of them compute the key that one of them is computing already.
        """
        deadline = time.monotonic() + self.wait
        delay = 0.001
        seen: object = _UNSEEN
        while True:
            if self._try_add(self.token, self.ttl):
                self.acquired = True
                return True
            if self.wait <= 0:
                return False
            if seen is _UNSEEN:
                seen = self._read()
            t = time.monotonic()
            if t >= deadline:
                holder = self._read()
                if holder == seen:  # the same holder all along: give up
                    return False
                seen, deadline = holder, t + self.wait
                continue  # at once: the lease is free now, or its new holder is waited for
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def holder(self) -> str | None:
        """The token of the lease's holder now, or None (free, or unreadable)."""
        return self._read()

    def release(self) -> None:
        if self.acquired:
            self.acquired = False
            if self._release is not None:
                self._release(self.token)
                return
            # Not atomic with the read, but the window only matters if our lease expired in between,
            # in which case the worst outcome is one extra computation by another process.
            if self._read() == self.token:
                self._remove()

    def __enter__(self) -> LeaseLock:
        if not self.acquire():
            from fncache._errors import LockTimeout

            raise LockTimeout(f"lock not acquired within {self.wait:.1f}s")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
