"""The miss path, written once: what happens after a lookup found nothing.

``look again if another computation finished meanwhile -> (lock=True) take the store's lock for the
key and look again -> compute -> store the result unless its inputs moved meanwhile -> release``.

It is one generator, :meth:`MissPath.steps`, that *yields* the two things that differ between a plain
and a coroutine function: entering the store lock (which may wait) and running the function. Two
small drivers answer them: :func:`run` calls them directly, :func:`arun` awaits the coroutine and
waits for the lock in a worker thread so the event loop keeps running. So ``lock=True``, the
re-check and the failure policy are the same code for ``def`` and ``async def`` functions.

Single-flight inside one process is the shells' job (:meth:`MissPath.call` for threads,
:meth:`MissPath.acall` for the tasks of one event loop): the first caller of a key owns the
computation, the others wait for its result.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from fncache import _forks
from fncache._callkey import CallKey, KeyBuilder
from fncache._entries import Entries
from fncache._errors import LockTimeout
from fncache._threads import ThreadMark, alone, quiet_since
from fncache.code.fingerprint import Fingerprint, mark_state
from fncache.stores import LeaseLock

__all__ = ["COMPUTE", "Compute", "Enter", "MissPath", "Verdict", "arun", "run", "verdict"]

log = logging.getLogger("fncache")

class Compute:
    """Yielded by the steps: "run the function now and send me its result (or throw its exception)"."""

    __slots__ = ()


class Enter(NamedTuple):
    """Yielded by the steps: "enter this store lock (it may wait) and send me what it gives"."""

    lock: Any


COMPUTE = Compute()
Steps = Generator[Compute | Enter, Any, Any]


class Verdict(enum.Enum):
    """What becomes of a computed result (see :func:`verdict`)."""

    STORE = "store"  # under the key looked up, described by the parts taken before the call
    STORE_AFRESH = "store afresh"  # the same, described by the key's parts as they stand now
    STATE = "state"  # the function modified values it reads: keyed by name from now on, then stored
    SKIP = "skip"  # returned, not stored: the result may not belong to the key


def verdict(*, drifted: bool, rebound: bool, changed: bool, alone: bool, private: bool) -> Verdict:
    """The store decision after a call, from what differs from before it (a pure function).

    ``drifted``: the inputs no longer gave the key looked up when the call began, or a
    ``depends_on`` input changed during it (never the function's doing); ``rebound``: a name the
    code reads was rebound during the call; ``changed``: a mutable value it reads was modified;
    ``alone``: no other thread or task existed when it began and when it ended (any change is the
    call's own); ``private``: every modified value is reached only through a closure or a default
    (no other code can reach it but by calling the function).
    """
    if drifted:
        return Verdict.SKIP
    if not (rebound or changed):
        return Verdict.STORE
    if not (alone or (not rebound and private)):
        return Verdict.SKIP
    return Verdict.STATE if changed else Verdict.STORE_AFRESH


def run(steps: Steps, compute: Callable[[], Any]) -> Any:
    """Drive the miss steps for a plain function: enter locks and call ``compute`` in place.

    Caution: :func:`arun` is the same loop with ``await`` on both operations; the two cannot share a
    body (a coroutine cannot be driven without awaiting), so a change here goes there too. All
    decisions live in the steps, which both drive.
    """
    send: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = steps.throw(error) if error is not None else steps.send(send)
        except StopIteration as stop:
            return stop.value
        send = error = None
        try:
            send = op.lock.__enter__() if isinstance(op, Enter) else compute()
        except BaseException as e:  # handed to the steps, which re-raise what is not theirs
            error = e


async def arun(steps: Steps, compute: Callable[[], Any]) -> Any:
    """Drive the miss steps for a coroutine function: await ``compute()`` and the store lock."""
    send: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = steps.throw(error) if error is not None else steps.send(send)
        except StopIteration as stop:
            return stop.value
        send = error = None
        try:
            send = await _enter(op.lock) if isinstance(op, Enter) else await compute()
        except BaseException as e:
            error = e


async def _enter(guard: Any) -> Any:
    """Enter a store lock without blocking the event loop.

    A :class:`LeaseLock` (every built-in store's) is tried once at a time with ``asyncio.sleep``
    between attempts, the back-off it uses itself; any other lock waits in a worker thread (a task
    cancelled meanwhile may then leave it taken until it expires).
    """
    import asyncio

    loop = asyncio.get_running_loop()
    if not isinstance(guard, LeaseLock):
        return await loop.run_in_executor(None, guard.__enter__)
    wait, guard.wait = guard.wait, 0.0  # acquire() makes one attempt
    deadline, delay = loop.time() + wait, 0.001
    seen = None
    try:
        while not guard.acquire():
            if seen is None:
                seen = (guard.holder(),)
            if loop.time() >= deadline:
                # As LeaseLock.acquire: a lease that changed hands is waited for anew.
                holder = guard.holder()
                if (holder,) == seen:
                    raise LockTimeout(f"lock not acquired within {wait:.1f}s")
                seen, deadline = (holder,), loop.time() + wait
                continue
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
    finally:
        guard.wait = wait
    return guard


class _Flight:
    """One in-process computation of a key that other threads may wait on.

    The owner holds ``running`` (acquired at creation) until it is done; waiters acquire and release
    it. A bare lock, not an Event: one is made per miss, and an Event costs a Condition and two locks.
    """

    __slots__ = ("running", "value", "ok")

    def __init__(self) -> None:
        self.running = threading.Lock()
        self.running.acquire()
        self.value: Any = None
        self.ok = False

    def wait(self) -> None:
        with self.running:
            pass


class _Before(NamedTuple):
    """What a computation's key was made from, as it stood when the function started."""

    now: CallKey  # the key's parts taken afresh
    depends: bytes | None  # the depends_on digest
    same: bool  # the inputs still gave the key looked up
    alone: bool  # no other thread or task existed


class MissPath:
    """Computes and stores missed keys of one function (see the module docstring)."""

    def __init__(self, func: Callable[..., Any], keys: KeyBuilder, entries: Entries,
                 *, lock: bool = False, lock_timeout: float = 600.0,
                 map_result: bool = False, announce: Callable[..., Any] | None = None) -> None:
        self.func = func
        # Told when a computation starts (verbose lines); what it returns is told the duration.
        self.announce = announce
        self.keys = keys
        self.entries = entries
        self.lock = lock
        self.lock_timeout = lock_timeout
        # Return the stored entry (memory-mapped) rather than the computed value, so the first
        # call and later ones give the same kind of array (the joblib layer's mmap_mode).
        self.map_result = map_result
        self._flights: dict[str, _Flight] = {}
        self._flights_lock = threading.Lock()
        self._aflights: dict[Any, Any] = {}
        self.finished = 0  # computations ended in this process (see steps)
        _forks.track(self)

    def reset_after_fork(self) -> None:
        """In a forked child: no flight of the parent's threads is in progress here (their owners
        were left behind), and a lock they held would never be released."""
        self._flights = {}
        self._flights_lock = threading.Lock()
        self._aflights = {}

    # -- the steps -----------------------------------------------------------------------------
    def steps(self, ck: CallKey, *, finished: int | None = None, loop: Any = None,
              lock: bool = True, overwrite: bool = False, solo: ThreadMark = None,
              call: tuple[tuple[Any, ...], dict[str, Any]] = ((), {})) -> Steps:
        """The miss path of ``ck`` as a generator (see the module docstring); returns the value.

        ``solo``: the threads that ran when ``ck`` was built (:func:`fncache._threads.thread_mark`;
        see :meth:`_before`).
        ``call``: the arguments, for the ``announce`` strategy only.
        """
        found, value = self._finished_meanwhile(ck, finished)
        if found:
            return value
        guard = yield from self._take_lock(ck, lock)
        try:
            found, value = self._look_under_lock(ck) if guard is not None else (False, None)
            if found:
                return value
            self.entries.report("miss", ck.key)
            before = self._before(ck, loop, solo if loop is None or guard is None else None)
            told = self.announce(ck, *call) if self.announce is not None else None
            start = time.perf_counter()
            value = yield COMPUTE
            duration = time.perf_counter() - start
            not_stored = self._store_result(before, ck, value, duration, overwrite, loop)
            if told is not None:
                told(duration, not_stored)
            return self._returned(ck, value)
        finally:
            if guard is not None:
                self._release(guard)

    def _finished_meanwhile(self, ck: CallKey, finished: int | None) -> tuple[bool, Any]:
        """``(True, value)`` if a computation of this function ended since the lookup (``finished``
        computations had ended then) and stored ``ck.key``'s entry; ``(False, None)`` otherwise."""
        if finished is None or finished == self.finished:
            # No computation in between, as in any single-threaded use: this costs nothing.
            return False, None
        # Perhaps of this very key: look again before computing a second time.
        return self.entries.lookup(ck.key)

    def _take_lock(self, ck: CallKey, lock: bool) -> Generator[Enter, Any, Any]:
        """Enter the store's lock for ``ck.key`` (yielded to the driver) if both this call and the
        function take locks; returns the lock, or None when none is taken, it timed out (computing
        too) or the store failed (a miss, see Entries.failed)."""
        if not (lock and self.lock):
            return None
        try:
            guard = self.entries.store.lock(ck.key, self.lock_timeout)
            yield Enter(guard)
        except LockTimeout:
            log.warning("%s: waited %.0fs for another process computing %s; computing too",
                        self.entries.function, self.lock_timeout, ck.key)
            return None
        except Exception as e:  # any store failure is a miss (see Entries.failed)
            self.entries.failed("lock", e)
            return None
        return guard

    def _look_under_lock(self, ck: CallKey) -> tuple[bool, Any]:
        """Look again once the lock is held: someone may have finished meanwhile (a hit)."""
        found, value = self.entries.lookup(ck.key)
        if found:
            self.entries.report("hit", ck.key)
        return found, value

    def _returned(self, ck: CallKey, value: Any) -> Any:
        """What the call returns: the computed value, or with ``map_result`` the stored entry as a
        later call loads it (memory-mapped) if it was stored."""
        if self.map_result:
            found, mapped = self.entries.lookup(ck.key)
            if found:
                return mapped
        return value

    def _release(self, guard: Any) -> None:
        """Leave the store's lock; a store failure is logged (see Entries.failed)."""
        try:
            guard.__exit__(None, None, None)
        except Exception as e:
            self.entries.failed("unlock", e)

    def _before(self, ck: CallKey, loop: Any, solo: ThreadMark) -> _Before:
        """What ``ck`` was made from, taken just before the function runs (see _store_result).

        The inputs may have moved since the lookup (another thread rebound a global): the key of the
        inputs as they stand now is then another one, and this result must not go under ``ck.key``.
        When no thread that could run user code ran besides this one, the main thread, since before
        ``ck`` was built (``solo``; none, or only library service threads: see
        :func:`fncache._threads.quiet_since`), and, for a coroutine, no await happened since (no lock
        was waited for), only this call's own fncache code ran in between: ``ck`` is what the inputs
        give now, and they are not hashed again.
        """
        if solo is not None and threading.current_thread() is threading.main_thread() and \
                quiet_since(solo):
            return _Before(ck, ck.depends_on, True, alone(loop))
        now = self.keys.rebuild(ck.args)
        same = now.fingerprint is None or now.key == ck.key
        return _Before(now, now.depends_on, same, alone(loop))

    def _store_result(self, before: _Before, ck: CallKey, value: Any, duration: float,
                      overwrite: bool, loop: Any) -> str | None:
        """Store a computed value under ``ck.key``, unless what the key was made from changed
        meanwhile in a way the function itself cannot be shown to have caused (see :func:`verdict`).

        The function was *alone* when no other thread (and, for a coroutine, no other task of its
        loop) existed when it began and when it ended: any change seen now was made by the call
        itself. Otherwise only the mutation of values reached privately (closures, defaults) is taken
        as the function's own; a global rebound or mutated meanwhile may be another thread's doing,
        and the function may have read the new value, so the result may not belong to the key. A
        ``depends_on`` input that changed is never the function's doing. Identity checks and one
        re-hash of each mutable value read, as on a hit; with nothing changed, the key's parts taken
        before the call describe the entry (nothing is hashed again for its metadata).

        Returns why the result was not stored (None when the store was tried): also logged, as a
        WARNING the first time for each function and input, since the user sees only ``stores=0``.
        """
        fp: Fingerprint | None = before.now.fingerprint  # None with version=
        rebound, changed, private = fp.changes() if fp is not None and before.same \
            else (False, [], True)
        decided = verdict(drifted=self._drifted(before), rebound=rebound, changed=bool(changed),
                          alone=before.alone and alone(loop), private=private)
        if decided is Verdict.SKIP:
            return self._not_stored(before, fp, changed, loop)
        if decided is Verdict.STORE:
            self.entries.save(ck, value, duration, overwrite, meta_from=before.now)
            return None
        if decided is Verdict.STORE_AFRESH:
            self.entries.save(ck, value, duration, overwrite, meta_from=self.keys.rebuild(ck.args))
            return None
        # The function modified a value it reads (a log list, a counter, a memo dict): that is
        # state it writes, not an input, or no call would ever hit again. Key it by name (for this
        # function only) from now on.
        assert fp is not None  # changed values come from it
        mark_state(self.keys.code, changed, fp)
        log.info("%s: %d global/closure value(s) modified by the function itself are keyed "
                 "by name from now on", self.entries.function, len(changed))
        after = self.keys.rebuild(ck.args)
        self.entries.save(ck, value, duration, overwrite, meta_from=after)
        if not rebound and after.key != ck.key:
            # Also under the key the next call will compute. Not after a rebinding: the new key
            # holds the new value, which this result was not computed from.
            self.entries.save(after, value, duration, overwrite)
        return None

    def _drifted(self, before: _Before) -> bool:
        """Whether the inputs no longer gave the key looked up when the call began, or a
        ``depends_on`` input changed during the call."""
        if not before.same:
            return True
        return before.depends is not None and _depends_changed(self.keys, before.depends)

    def _not_stored(self, before: _Before, fp: Fingerprint | None, changed: list[Any],
                    loop: Any) -> str:
        """Why a result is returned and not stored, in words that name the input and the remedy;
        warned once per function and input (then at INFO)."""
        others = "other tasks" if loop is not None and alone() else "other threads"
        if not before.same:
            what, reason = "inputs", "the inputs changed between the lookup and the call"
        elif fp is not None and (names := fp.changed_names(changed)):
            what = ", ".join(names)
            reason = f"{what} changed during the call while {others} ran"
        else:
            what, reason = "depends_on", "a depends_on input changed during the call"
        names = what.split(", ")
        written = [n.split(" ", 1)[1].rpartition(".")[2] for n in names if n.startswith("global ")]
        if written:
            it = "it" if len(written) == 1 else "them"
            remedy = (f"; if the function writes {it} itself (a log, a counter), "
                      f"memoize(ignore_globals={written!r}) leaves {it} out of the key")
        else:
            remedy = "; pass what another thread changes as an argument instead"
        message = f"not stored: {reason}{remedy}"
        self.entries.warn_once(f"not-stored:{what}", "%s: result returned, %s",
                               self.entries.function, message, later=logging.INFO)
        return message

    # -- the shells ----------------------------------------------------------------------------
    def call(self, ck: CallKey, args: tuple[Any, ...], kwargs: dict[str, Any],
             finished: int | None = None, solo: ThreadMark = None) -> Any:
        """A missed call of a plain function: once per key among this process's threads."""
        with self._flights_lock:
            flight = self._flights.get(ck.key)
            owner = flight is None
            if flight is None:
                flight = self._flights[ck.key] = _Flight()
        if not owner:
            flight.wait()
            if flight.ok:
                self.entries.report("shared", ck.key)
                return flight.value
            # The owner raised (its exception is its caller's alone): the waiters elect a new owner
            # among themselves rather than all computing at once. A waiter that wakes after the new
            # owner already finished finds its result in the store.
            found, value = self.entries.lookup(ck.key)
            if found:
                return value
            return self.call(ck, args, kwargs)
        try:
            value = run(self.steps(ck, finished=finished, solo=solo, call=(args, kwargs)),
                        lambda: self.func(*args, **kwargs))
            flight.value, flight.ok = value, True
            return value
        finally:
            with self._flights_lock:
                self._flights.pop(ck.key, None)
                self.finished += 1
            flight.running.release()

    async def acall(self, ck: CallKey, args: tuple[Any, ...], kwargs: dict[str, Any],
                    finished: int | None = None, solo: ThreadMark = None) -> Any:
        """A missed call of a coroutine function: once per key among the tasks of one loop."""
        import asyncio

        loop = asyncio.get_running_loop()
        fut = self._aflights.get((loop, ck.key))
        if fut is not None:
            ok, value = await asyncio.shield(fut)
            if ok:
                self.entries.report("shared", ck.key)
                return value
            # The owner raised or was cancelled: its exception is its caller's alone, as for
            # threads (see call). The waiters elect a new owner among themselves.
            found, value = self.entries.lookup(ck.key)
            if found:
                return value
            return await self.acall(ck, args, kwargs)
        # The future carries (True, value) or (False, None), never an exception.
        fut = self._aflights[(loop, ck.key)] = loop.create_future()
        done = False
        try:
            value = await arun(self.steps(ck, finished=finished, loop=loop, solo=solo,
                                          call=(args, kwargs)),
                               lambda: self.func(*args, **kwargs))
            fut.set_result((True, value))
            done = True
            return value
        finally:
            if not done:
                fut.set_result((False, None))
            self._aflights.pop((loop, ck.key), None)
            self.finished += 1

    def recompute(self, ck: CallKey, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Compute whatever the store holds and replace the entry (no lock, no single-flight)."""
        return run(self.steps(ck, lock=False, overwrite=True, call=(args, kwargs)),
                   lambda: self.func(*args, **kwargs))

    async def arecompute(self, ck: CallKey, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """:meth:`recompute` of a coroutine function."""
        import asyncio

        steps = self.steps(ck, loop=asyncio.get_running_loop(), lock=False, overwrite=True,
                           call=(args, kwargs))
        return await arun(steps, lambda: self.func(*args, **kwargs))


def _depends_changed(keys: KeyBuilder, before: bytes) -> bool:
    from fncache.code.depends import depends_digest

    return depends_digest(keys.depends) != before
