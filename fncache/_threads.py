"""Which threads could run user code while a memoized function's inputs are taken and it runs.

The miss path (:mod:`fncache._miss`) asks twice. Before the call: did any thread that could run user
code run since the key was begun (:func:`thread_mark`, :func:`quiet_since`)? If not, the key is what
the inputs give now, and they are not hashed again. After it: is the function alone (:func:`alone`),
so that a change to what it read is its own doing? Threads that libraries start for their own I/O
(a notebook kernel's, fncache's checkpoint threads; fsspec's while its loop is idle, and only for
the second question) never run user code and do not count: a guess, documented in "What
invalidates a cache entry". fncache's own helper threads of a key's hash (a large frame's or
table's parts digested on two threads, :mod:`fncache.values.ahead`) and of a large load start and
end inside it: neither question ever sees them.
"""

from __future__ import annotations

import _thread
import os
import sys
import threading
import weakref
from typing import Any

from fncache.stores import _checkpoint

__all__ = ["ThreadMark", "alone", "is_service_thread", "quiet_since", "thread_mark",
           "threads_besides_main"]

# How many threads run besides the main thread. ``_thread._count()`` (in CPython since 2.x, counted in
# C from before a thread runs any Python code until after it ran its last): a tenth of the cost of
# ``threading.active_count()``, which takes a lock. Read on every call (see :func:`thread_mark`); a
# test pins what it is assumed to count. Less ``_ghosts[0]``: a forked child keeps its parent's
# count (3.11 to 3.13) though it has none of its threads, which would never end there.
_count = _thread._count
_ghosts = [0]
_checkpointers = _checkpoint.live


def _forget_parents_threads() -> None:
    # In the child, after threading's own hook (registered first) left only this thread listed,
    # and after any other library's registered before fncache's, which may have started a thread
    # here already (threading lists it once it runs): the threads counted but not listed are the
    # parent's.
    _ghosts[0] = max(0, _count() - (len(threading.enumerate()) - 1))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parents_threads)


def threads_besides_main() -> int:
    """Threads besides the main one that could run user code: fncache's checkpoint threads
    (:mod:`fncache.stores._checkpoint`) never do, and are not counted. The two counts are read
    under the lock the checkpoint threads change theirs under (read apart, a thread that started
    in between would be subtracted without having been counted)."""
    if _count() == _ghosts[0]:  # no thread at all: none to subtract
        return 0
    with _checkpoint.live_lock:
        return _count() - _ghosts[0] - _checkpointers[0]


#: What :func:`thread_mark` takes before a key is built, for :func:`quiet_since`: 0 (no thread besides
#: the main one could run user code), ``(threads besides the main one, looks so far)``, or None
#: (nothing to compare with: the inputs are always taken again).
ThreadMark = int | tuple[int, int] | None

# The threads a miss on the main thread has looked at (see quiet_since): a library service thread
# with the number of the look that first saw it, any other thread with -1; weak, so an ended thread
# goes. A thread runs once: one seen by an earlier look and alive now was alive all the while.
_seen: weakref.WeakKeyDictionary[threading.Thread, int] = weakref.WeakKeyDictionary()
_looks = [0]  # the next look's number


def thread_mark() -> ThreadMark:
    """Taken before a key is built (on every call: as cheap as :func:`threads_besides_main`)."""
    if _count() == _ghosts[0]:
        return 0
    with _checkpoint.live_lock:
        besides = _count() - _ghosts[0]
        if besides == _checkpointers[0]:
            return 0
    return (besides, _looks[0])


def quiet_since(mark: ThreadMark) -> bool:
    """Whether no thread that could run user code ran besides this one, the main thread, between
    ``mark`` and now: then nothing but this call's own code ran in between.

    With other threads: only library service threads (:func:`is_service_thread`) run now, each seen
    by a look before the mark (running then, so running and counted all the while since), and as
    many threads were counted at the mark (so none besides them ran then). A thread that started
    and ended in between goes unseen, as it does with no thread at all. This is a look (the threads
    not seen before are told apart and remembered): a service thread started since counts from the
    next miss on.
    """
    if mark is None:
        return False
    if not isinstance(mark, tuple):
        if threads_besides_main() == 0:
            return True
        mark = (-1, 0)  # threads started since: nothing to compare with, but a look for the next calls
    besides, looked = mark
    others, all_seen = _look(looked)
    return all_seen and others == besides and _count() - _ghosts[0] == besides


def _look(looked: int) -> tuple[int, bool]:
    """The threads running besides this one, and whether each is a service thread seen by a look
    numbered below ``looked``; those not seen before are told apart and remembered."""
    me = threading.current_thread()
    others = 0
    all_seen = True
    for t in threading.enumerate():
        if t is not me:
            others += 1
            seen = _seen_as(t)  # every thread: a look remembers each one it has not seen
            if not 0 <= seen < looked:
                all_seen = False
    _looks[0] += 1
    return others, all_seen


def _seen_as(t: threading.Thread) -> int:
    """The number of the look that first saw ``t`` as a service thread (now, if none did), -1 for
    another thread, -2 for one still starting (counted or not yet: not seen until it runs).
    fsspec's threads are others here: whether they were busy when the key was begun is unknown."""
    seen = _seen.get(t)
    if seen is None:
        if not t.is_alive():
            return -2
        seen = _seen[t] = _looks[0] if _is_service_class(t) else -1
    return seen


# Threads that libraries start for their own I/O and never hand user code to, named exactly: the
# thread's class, or for a plain ``threading.Thread`` the class of the object whose method it runs. A
# Jupyter kernel's IOPub thread, output-pipe watchers, heartbeat, control (see docs/invalidation.md
# for what a front end can make it run), shell-channel (which only routes requests to the thread
# that runs them), parent poller and history threads; pyzmq's garbage collector; tornado's selector
# thread (a kernel's on Windows: it only waits in ``select``); fncache's own checkpoint threads. Not
# a kernel's subshell threads, IPython's background jobs or any event loop's thread (those run user
# code), nor a subclass of a class named here. A notebook always has them, so counting them would
# keep every function that writes state from ever storing, and make every miss hash the inputs
# again before the call.
_SERVICE_THREAD_CLASSES = frozenset({
    "fncache.stores._checkpoint.Checkpointer",
    "ipykernel.iostream.IOPubThread",
    "ipykernel.iostream.OutStream",
    "ipykernel.heartbeat.Heartbeat",
    "ipykernel.control.ControlThread",
    "ipykernel.shellchannel.ShellChannelThread",
    "ipykernel.parentpoller.ParentPollerUnix",
    "ipykernel.parentpoller.ParentPollerWindows",
    "IPython.core.history.HistorySavingThread",
    "tornado.platform.asyncio.SelectorThread",
    "zmq.utils.garbage.GarbageCollectorThread",
})
# fsspec's I/O loop (the S3 store's), by the name fsspec gives it, and its loop's executor threads:
# service threads for :func:`alone` (taken before and after the call) only while the loop runs no
# task and no executor worker runs an item, and never for skipping the hash before the call
# (:func:`quiet_since`: whether they were idle when the key was begun is not known). It is a public
# event loop: a task a user's coroutine left on it (``fsspec.asyn.sync`` runs users' coroutines
# there) runs user code.
_SERVICE_THREAD_NAMES = frozenset({"fsspecIO"})


def _fsspec_loop() -> Any:
    asyn = sys.modules.get("fsspec.asyn")
    return (getattr(asyn, "loop", None) or [None])[0]


def _is_fsspec_thread(t: threading.Thread) -> bool:
    """fsspec's I/O thread, or one of its loop's default executor's (DNS look-ups)."""
    if "fsspec" not in sys.modules:
        return False
    if t.name in _SERVICE_THREAD_NAMES:
        return True
    executor = getattr(_fsspec_loop(), "_default_executor", None)
    return t in getattr(executor, "_threads", ())


def _fsspec_idle() -> bool:
    """Whether fsspec's event loop runs no task now, and its default executor no work (which can
    outlive the task that submitted it: a time-out, a cancellation)."""
    loop = _fsspec_loop()
    if loop is None:
        return True
    executor = getattr(loop, "_default_executor", None)
    if executor is not None and not _executor_idle(executor):
        return False
    import asyncio

    try:
        return not asyncio.all_tasks(loop)
    except RuntimeError:  # the set kept changing under the copy: tasks come and go
        return False


def _executor_idle(executor: Any) -> bool:
    """Whether no worker of a ``ThreadPoolExecutor`` runs a work item, and none is queued: each
    worker's innermost Python frame is its loop (``_worker``: waiting for the queue, or between
    taking an item and running it, a few bytecodes). Its idle semaphore is no count of work in
    flight (3.11 releases it after every item)."""
    queue = getattr(executor, "_work_queue", None)
    if queue is None or not queue.empty():
        return False
    frames = sys._current_frames()
    for t in list(getattr(executor, "_threads", ())):
        frame = frames.get(t.ident) if t.ident is not None else None
        if frame is not None and frame.f_code.co_name != "_worker":
            return False
    return True


def _is_service_class(t: threading.Thread) -> bool:
    kind: type = type(t)
    if kind is threading.Thread:
        # Private, but stable since Python 2 (deleted once the target returns: then not service).
        owner = getattr(getattr(t, "_target", None), "__self__", None)
        if owner is None or isinstance(owner, type):
            return False
        kind = type(owner)
    return f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', '')}" in \
        _SERVICE_THREAD_CLASSES


def is_service_thread(t: threading.Thread) -> bool:
    """Whether ``t`` is a library's service thread now: of a class in
    :data:`_SERVICE_THREAD_CLASSES`, or fsspec's while its loop and executor are idle."""
    if _is_fsspec_thread(t):
        return _fsspec_idle()
    return _is_service_class(t)


def _others_exist() -> bool:
    """Whether threading or ``_thread`` counts another thread than this one and the checkpoint
    threads (each counts itself only while both count it; all read under its lock). A debugger
    hides threads from ``threading`` (pydevd: its own and those marked as its own, a kernel's
    subshell threads among them); ``_thread`` still counts them."""
    if _count() == _ghosts[0] and threading.active_count() == 1:
        return False
    with _checkpoint.live_lock:
        checkpointers = _checkpointers[0]
        return threading.active_count() - checkpointers != 1 or \
            _count() - _ghosts[0] != checkpointers


def alone(loop: Any = None) -> bool:
    """Whether no other thread that can run user code exists (and, given an event loop, the current
    task is the loop's only one): then no other code can change what the function reads meanwhile.

    Library service threads (:func:`is_service_thread`) do not count: a guess, documented in the
    docs ("What invalidates a cache entry"), that they never run the user's code. A thread that
    ``threading`` does not list (one a debugger hides, or started with ``_thread``) counts: as many
    threads must be listed besides the main one as ``_thread`` counts.
    """
    if _others_exist():
        shown = threading.enumerate()
        if len(shown) != _count() - _ghosts[0] + 1:
            return False
        me = threading.current_thread()
        if any(t is not me and not is_service_thread(t) for t in shown):
            return False
    if loop is None:
        return True
    import asyncio

    return len(asyncio.all_tasks(loop)) <= 1
