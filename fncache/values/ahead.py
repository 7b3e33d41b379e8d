"""A value's large parts digested on two threads: a helper thread started and ended inside one hash.

xxh3 and numpy's kernels let the GIL go while they read a large buffer, so a helper thread and the
caller's can read memory at once: a table's columns (:func:`map_ahead`), or a DataFrame's arrays
while its Arrow-backed columns are digested (:class:`fncache.values.buffers.DigestsAhead`). Each part
is digested by the same code on either thread, so keys do not depend on whether a helper ran (one
usable CPU, a small value, no thread to be had: the caller's thread does it all, as before).

The callers hand over only work that runs no user code (pyarrow's own types, numpy arrays, polars'
plain dtypes). Finalisers would: a collection that ran on the helper would run users' ``__del__``
methods and weak-reference callbacks there, while the caller waits for it, perhaps holding a lock
one of them takes (a re-entrant lock the caller's own thread could take again: a deadlock). So the
cyclic garbage collector is paused from before a helper starts until it has ended (if it was running;
a collection is put off by milliseconds, never skipped; a process forked meanwhile gets it back;
a ``gc.disable()`` another thread makes meanwhile is undone when the last helper ends).
The helper then runs fncache's, numpy's, pyarrow's and polars' code, and a trace or profile function
set for all threads. It starts and ends inside the hash, so the miss path's questions about other
threads (:mod:`fncache._threads`) never see it: it is joined even through an interrupt.
"""

from __future__ import annotations

import collections
import gc
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from fncache import _forks

__all__ = ["MIN_BYTES", "Ahead", "join", "map_ahead", "start", "usable_cpus"]

#: Bytes a value's parts must hold in all for a helper thread to take some (below, the thread's
#: start and the hand-over cost more than they save). A 75 MB frame of ten columns on a 2-vCPU VM
#: was keyed in 6.6 ms on one thread, 4.1-4.8 ms on two.
MIN_BYTES = 16 << 20

_UNDONE: Any = object()


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


# Helpers running now, and whether the collector ran before the first of them paused it.
_paused = [0, False]
_paused_lock = threading.Lock()


def _pause_collector() -> None:
    with _paused_lock:
        if _paused[0] == 0:
            _paused[1] = gc.isenabled()
            gc.disable()
        _paused[0] += 1


def _resume_collector() -> None:
    with _paused_lock:
        _paused[0] -= 1
        if _paused[0] == 0 and _paused[1]:
            gc.enable()


def _reset_after_fork() -> None:
    global _paused_lock
    _paused_lock = threading.Lock()
    if _paused[0] and _paused[1]:
        gc.enable()
    _paused[:] = [0, False]


_forks.on_fork(_reset_after_fork)


def start(target: Callable[..., None], *args: Any,
          stop: Callable[[], None]) -> threading.Thread | None:
    """A started daemon helper thread running ``target(*args)`` with the collector paused, or None
    where none is to be had (interpreter shutdown, a thread limit, memory). Every thread started
    must be given to :func:`join`. Interrupted while it starts, ``stop()`` takes its work away (it
    may still run, and find none) and the interrupt is raised."""
    _pause_collector()
    thread = threading.Thread(target=target, args=args, name="fncache-digests", daemon=True)
    try:
        thread.start()
    except Exception:
        _resume_collector()
        return None
    except BaseException:
        stop()
        _resume_collector()
        raise
    return thread


def join(thread: threading.Thread) -> None:
    """Wait for ``thread`` to end, even through an interrupt (the first one raised once it has
    ended), and let the collector run again."""
    interrupted: BaseException | None = None
    try:
        while True:
            try:
                thread.join()
                break
            except BaseException as e:  # KeyboardInterrupt, or a signal handler's exception
                interrupted = interrupted or e
                if not thread.is_alive():
                    break
    finally:
        _resume_collector()
    if interrupted is not None:
        raise interrupted


def _take_first(fn: Callable[[Any], Any], items: Sequence[Any], results: list[Any],
                pending: Any) -> None:
    """The helper thread: ``fn`` of each item ``pending`` still names, first to last. An item that
    raises is left undone: the caller's thread does it again, and raises as it would have."""
    while True:
        try:
            i = pending.popleft()
        except IndexError:
            return
        try:
            results[i] = fn(items[i])
        except BaseException:
            return


class Ahead:
    """``with Ahead(fn, items) as work: ...``: a helper thread takes the items from the first on
    while the block runs on this thread; at the block's end this thread takes what is left from
    the last on and waits for the helper. ``work.results`` is then ``[fn(x) for x in items]`` (an
    item that raised on the helper done again here: it raises here as it would have). Without a
    thread to be had, this thread does them all at the end. ``fn`` must run no user code and
    change nothing the block or the other items read."""

    __slots__ = ("fn", "items", "pending", "results", "thread")

    def __init__(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> None:
        self.fn, self.items = fn, items
        self.results: list[Any] = [_UNDONE] * len(items)
        self.pending = collections.deque(range(len(items)))
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Ahead:
        self.thread = start(_take_first, self.fn, self.items, self.results, self.pending,
                            stop=self.pending.clear)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        thread, self.thread = self.thread, None
        try:
            if exc_type is None and thread is not None:
                _take_last(self.fn, self.items, self.results, self.pending)
        finally:
            self.pending.clear()
            if thread is not None:
                join(thread)
        if exc_type is None:
            self.results = [self.fn(x) if r is _UNDONE else r
                            for r, x in zip(self.results, self.items, strict=True)]


def map_ahead(fn: Callable[[Any], Any], items: Sequence[Any], sizes: Sequence[int]) -> list[Any]:
    """``[fn(x) for x in items]``: where the items' ``sizes`` add up to :data:`MIN_BYTES` or more,
    on two threads (:class:`Ahead`)."""
    if len(items) < 2 or sum(sizes) < MIN_BYTES or usable_cpus() < 2:
        return [fn(x) for x in items]
    with Ahead(fn, items) as work:
        pass
    return work.results


def _take_last(fn: Callable[[Any], Any], items: Sequence[Any], results: list[Any],
               pending: Any) -> None:
    """The caller's thread: ``fn`` of each item ``pending`` still names, last to first."""
    while True:
        try:
            i = pending.pop()
        except IndexError:
            return
        results[i] = fn(items[i])
