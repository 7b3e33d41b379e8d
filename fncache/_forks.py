"""What a process forked by ``os.fork`` must not inherit: held locks and in-flight tables.

A child forked while another thread of the parent holds a lock gets that lock held for good: the
thread that would release it does not exist in the child. The same goes for an in-flight table
entry (``_miss``'s single-flight of a key) whose owner thread was left behind: the child's call of
that key would wait for it forever. So every module-level lock and every object that keeps such
state registers here, and right after a fork the child gets fresh locks and empty tables
(``os.register_at_fork(after_in_child=...)``). The parent is untouched.

Two ways to register: :func:`on_fork` for a module's own reset function, :func:`track` for an
object with a ``reset_after_fork()`` method (kept weakly: registering never keeps it alive).

Rejected: taking every lock before the fork and releasing it after (what ``logging`` does for its
handlers). It keeps the state consistent, but a fork would then wait for any computation that
holds a lock, and the tables would still name flights whose owners are not in the child.

The exception is a store's write transaction (:class:`Section`): SQLite keeps the locks its
connections hold in the process's memory, so a child forked while another thread of the parent was
inside one inherits that write lock, held by a connection no thread of the child will ever end;
each of the child's writes then waited its whole timeout and failed. A fork waits for the sections
in progress to end (they run no user code: milliseconds, or a write lock's busy wait), up to
:data:`FORK_WAIT` seconds, and none starts until the fork is done.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["FORK_WAIT", "Section", "on_fork", "track"]

#: The longest a fork waits for other threads' sections to end (then it forks as it would have).
FORK_WAIT = 30.0

_resets: list[Callable[[], None]] = []
_objects: weakref.WeakSet[Any] = weakref.WeakSet()


def on_fork(reset: Callable[[], None]) -> None:
    """Call ``reset()`` in every child forked from now on, before it runs anything else."""
    _resets.append(reset)


def track(obj: Any) -> None:
    """Call ``obj.reset_after_fork()`` in every child forked while ``obj`` is alive."""
    _objects.add(obj)


class _Sections:
    """The sections in progress, by thread, and the thread forking (whose own sections, if any,
    it does not wait for)."""

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.inside: dict[int, int] = {}
        self.forking: set[int] = set()  # two threads may fork at once


_sections = _Sections()


class Section:
    """``with Section():`` a stretch a fork must not split (a write transaction): it waits while
    another thread forks, and a fork waits for it to end.

    No lock on the way in or out unless a fork is under way: a thread marks itself inside, then
    looks for a fork, and the forking thread marks its fork, then looks for threads inside (each
    step a single operation under the GIL), so one of the two always sees the other.
    """

    __slots__ = ("_state", "_tid")

    def __enter__(self) -> None:
        state = self._state = _sections
        tid = self._tid = threading.get_ident()
        inside, forking = state.inside, state.forking
        while True:
            inside[tid] = inside.get(tid, 0) + 1
            if not forking or forking == {tid}:
                return
            self._leave(state, tid)  # a fork is under way: out of its way until it is done
            with state.cond:
                while forking - {tid}:
                    state.cond.wait()

    def __exit__(self, *exc: Any) -> None:
        state = self._state
        if state is _sections:  # else entered before a fork and left in the child: not its own
            self._leave(state, self._tid)

    @staticmethod
    def _leave(state: _Sections, tid: int) -> None:
        left = state.inside.get(tid, 0) - 1
        if left > 0:
            state.inside[tid] = left
        else:
            state.inside.pop(tid, None)
        if state.forking:
            with state.cond:
                state.cond.notify_all()


def _before() -> None:
    state, me = _sections, threading.get_ident()
    deadline = time.monotonic() + FORK_WAIT
    with state.cond:
        state.forking.add(me)
        while any(tid != me for tid in list(state.inside)):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            state.cond.wait(left)


def _after_in_parent() -> None:
    state = _sections
    with state.cond:
        state.forking.discard(threading.get_ident())
        state.cond.notify_all()


def _after_in_child() -> None:
    global _sections
    _sections = _Sections()  # no other thread is in the child: none is inside one
    for reset in _resets:
        reset()
    for obj in list(_objects):
        obj.reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before, after_in_parent=_after_in_parent,
                        after_in_child=_after_in_child)
