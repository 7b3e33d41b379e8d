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
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["on_fork", "track"]

_resets: list[Callable[[], None]] = []
_objects: weakref.WeakSet[Any] = weakref.WeakSet()


def on_fork(reset: Callable[[], None]) -> None:
    """Call ``reset()`` in every child forked from now on, before it runs anything else."""
    _resets.append(reset)


def track(obj: Any) -> None:
    """Call ``obj.reset_after_fork()`` in every child forked while ``obj`` is alive."""
    _objects.add(obj)


def _after_in_child() -> None:
    for reset in _resets:
        reset()
    for obj in list(_objects):
        obj.reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_in_child)
