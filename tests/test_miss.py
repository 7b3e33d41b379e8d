"""The miss path (fncache._miss): its store decision, and how often a call hashes what it reads."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading

import pytest

import fncache
from fncache._miss import Verdict, verdict


class Table:
    """A mutable global whose hashing is counted (through a registered handler)."""

    def __init__(self, rows: list[int]) -> None:
        self.rows = rows


HASHES: list[int] = []
TABLE = Table([1, 2, 3])


def _token(table: Table) -> object:
    HASHES.append(1)
    return tuple(table.rows)


@pytest.fixture(autouse=True)
def counted():
    fncache.register(Table, _token)
    HASHES.clear()
    yield HASHES
    fncache.unregister(Table)


def _rows() -> list[int]:  # the global is reached through a helper, as in a real pipeline
    return TABLE.rows


def total(x: int) -> int:
    return x + sum(_rows())


async def atotal(x: int) -> int:
    return x + sum(_rows())


def test_a_hit_hashes_a_mutable_global_once(store, counted):
    """A hit hashes each mutable value the code reads once: to check that it did not change."""
    f = fncache.memoize(store=store)(total)
    assert f(1) == 7
    counted.clear()
    assert f(1) == 7
    assert f.cache_info().hits == 1
    assert len(counted) == 1


_SINGLE_THREADED = """
import json, sys
import fncache


class Table:
    def __init__(self, rows):
        self.rows = rows


HASHES = []
TABLE = Table([1, 2, 3])


def _token(table):
    HASHES.append(1)
    return tuple(table.rows)


fncache.register(Table, _token)


def _rows():
    return TABLE.rows


def total(x):
    return x + sum(_rows())


f = fncache.memoize(store=sys.argv[1])(total)
first = f(1)
on_first = len(HASHES)
HASHES.clear()
second = f(2)
on_miss = len(HASHES)
key = f.key(2)
(entry,) = [e for e in f.store.entries() if e.key == key]
print(json.dumps({"results": [first, second], "first": on_first, "miss": on_miss,
                  "info": list(f.cache_info()),
                  "meta_is_key": entry.meta["components"] == f.call_key(2).components}))
"""


def test_a_miss_hashes_a_mutable_global_once_for_the_key_and_once_after_the_call(tmp_path):
    """A miss in a single-threaded process (a fresh one: a test run leaves threads behind): once
    to make the key (which also serves as the check before the call) and once after it, to see
    whether the call changed it; the stored metadata reuses the key's parts."""
    from tests.helpers import last_json, run_py, write

    script = write(tmp_path / "job.py", _SINGLE_THREADED)
    out = last_json(run_py(script, str(tmp_path / "store")))
    # The first call also computes the fingerprint: hashing the global once is part of that.
    assert out == {"results": [7, 8], "first": 2, "miss": 2, "info": [0, 2, 2, 0],
                   "meta_is_key": True}


_SLOW_GLOBAL = """
import json, logging, sys, time
import fncache

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)


class Table:
    def __init__(self, rows):
        self.rows = rows


HASHES = []
TABLE = Table([1, 2, 3])
ALSO = TABLE


def _token(table):  # over the slow-value report's millisecond, however fast the machine
    HASHES.append(1)
    time.sleep(0.003)
    return tuple(table.rows)


fncache.register(Table, _token)


def total(x):
    return x + sum(TABLE.rows) + len(ALSO.rows)


f = fncache.memoize(store=sys.argv[1])(total)
counts = []
for x in (1, 1, 2):
    HASHES.clear()
    f(x)
    counts.append(len(HASHES))
print(json.dumps(counts))
"""


def test_a_value_slow_to_hash_is_timed_by_the_next_hash_not_an_extra_one(tmp_path):
    """The slow-value report times the first re-hash after the fingerprint's walk (a miss's check
    after the call, or the next call's), rather than hashing the value once more just to time it:
    a first call that misses hashes a 3 ms global twice, as a fast one (here read under two names:
    four times), and the report is still given once for each name."""
    from tests.helpers import run_py, write

    script = write(tmp_path / "job.py", _SLOW_GLOBAL)
    lines = run_py(script, str(tmp_path / "store")).stdout.strip().splitlines()
    reports = [line for line in lines if "re-hashes it on every call" in line]
    assert sorted(r.split(", a ")[0] for r in reports) == ["INFO job:total reads global ALSO",
                                                           "INFO job:total reads global TABLE"], lines
    assert all(r.split(", a ")[1].startswith("__main__.Table, and re-hashes it on every call to see "
                                             "whether it changed: ") for r in reports), reports
    assert json.loads(lines[-1]) == [4, 2, 4]


def test_with_another_thread_the_check_before_the_call_hashes_once_more(store, counted):
    """With another thread that could rebind or modify the global, the inputs are checked again
    just before the call: once more, no more."""
    f = fncache.memoize(store=store)(total)
    f(1)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        counted.clear()
        assert f(2) == 8
        assert len(counted) == 3
        assert f.cache_info().stores == 2
    finally:
        stop.set()
        other.join()


_BESIDE_SERVICE_THREADS = _SINGLE_THREADED.split("f = fncache.memoize")[0] + """
import asyncio, threading
from zmq.utils.garbage import GarbageCollector, gc


async def atotal(x):
    return x + sum(_rows())


f = fncache.memoize(store=sys.argv[1])(total)
g = fncache.memoize(store=sys.argv[1])(atotal)
f(0), asyncio.run(g(0))  # the fingerprints
gc.start()  # pyzmq's garbage collector thread, as a kernel's zero-copy sends start it
counts = {}


def count(name, call):
    HASHES.clear()
    call()
    counts[name] = len(HASHES)


count("first", lambda: f(1))
count("second", lambda: f(2))
count("coroutine", lambda: asyncio.run(g(3)))
stop = threading.Event()
user = threading.Thread(target=stop.wait)
user.start()
count("beside a user thread", lambda: f(4))
count("beside it again", lambda: f(5))
stop.set()
user.join()
count("once it ended", lambda: f(6))
GarbageCollector().start()  # another one
count("a new service thread", lambda: f(7))
count("once it was seen", lambda: f(8))
import fsspec.asyn
fsspec.asyn.get_loop()  # fsspec's I/O thread: its loop could have run a task when the key was begun
count("beside fsspec's thread", lambda: f(9))
print(json.dumps(counts))
"""


def test_beside_library_service_threads_a_miss_hashes_as_with_none(tmp_path):
    """pyzmq's garbage collector thread, like a notebook kernel's threads, never runs user code:
    once a miss has seen it, a miss hashes a mutable global twice, as in a process without threads.
    Beside a thread that could run user code, on the first miss after a service thread started,
    and beside fsspec's I/O thread (whose public loop may have run a user's task when the key was
    begun: nothing records that), three times (once more just before the call)."""
    from tests.helpers import last_json, run_py, write

    pytest.importorskip("zmq")
    pytest.importorskip("fsspec")
    script = write(tmp_path / "job.py", _BESIDE_SERVICE_THREADS)
    out = last_json(run_py(script, str(tmp_path / "store")))
    assert out == {"first": 3, "second": 2, "coroutine": 2, "beside a user thread": 3,
                   "beside it again": 3, "once it ended": 2, "a new service thread": 3,
                   "once it was seen": 2, "beside fsspec's thread": 3}


# Code run while the key is made, between the lookup's start and the call: the token of the key's
# hash of TABLE runs what the script appends to ``during_key`` (once).
_DURING_KEY = """
during_key = []  # run by the token of the key's hash (once)


def _token(table):
    HASHES.append(1)
    token = tuple(table.rows)
    while during_key:
        during_key.pop()()
    return token


fncache.register(Table, _token)
"""

_CHANGED_BY_A_THREAD_THAT_ENDED = _BESIDE_SERVICE_THREADS.split("counts = {}")[0] + """
f(1), f(2)  # the collector's thread seen: a miss no longer hashes again before the call
""" + _DURING_KEY + """go = threading.Event()


def user(start_service):
    go.wait(60)
    TABLE.rows.append(100)  # the key was made from [1, 2, 3]; the call reads [1, 2, 3, 100]
    if start_service:  # and the count of threads is as it was when the key was begun
        GarbageCollector().start()


def let_it_run(thread, look):
    go.set()
    thread.join()
    if look:  # a miss of another function meanwhile, which looks at the threads
        h(9)


h = fncache.memoize(store=sys.argv[1])(lambda x: x)
out = {}
for x, case, start_service, look in ((10, "ended", False, False), (20, "replaced", True, False),
                                     (30, "replaced and seen", True, True)):
    go.clear()
    thread = threading.Thread(target=user, args=(start_service,), daemon=True)
    thread.start()
    during_key.append(lambda: let_it_run(thread, look))
    stores = f.cache_info().stores
    returned = f(x)
    stored = f.cache_info().stores - stores
    TABLE.rows.remove(100)
    out[case] = [returned, stored, f(x)]
print(json.dumps(out))
"""


def test_a_global_changed_by_a_thread_that_ended_before_the_call_is_not_stored(tmp_path):
    """Beside service threads already seen, a thread that ran when the key was begun, changed the
    global before the call and ended (leaving as many threads as before, one of them a new service
    thread, even one another miss has seen since) is not mistaken for absent: the result, computed
    from the changed global, is returned and not stored under the key of the unchanged one, and a
    call with the global as it was computes its own."""
    from tests.helpers import last_json, run_py, write

    pytest.importorskip("zmq")
    script = write(tmp_path / "job.py", _CHANGED_BY_A_THREAD_THAT_ENDED)
    out = last_json(run_py(script, str(tmp_path / "store")))
    assert out == {"ended": [116, 0, 16], "replaced": [126, 0, 26],
                   "replaced and seen": [136, 0, 36]}


_CHANGED_BY_A_LOOP_THREAD = _SINGLE_THREADED.split("f = fncache.memoize")[0] + """
import threading
from tornado.ioloop import IOLoop
""" + _DURING_KEY + """f = fncache.memoize(store=sys.argv[1])(total)
loop = IOLoop(make_current=False)  # the user's own event loop, on a thread of its own
threading.Thread(target=loop.start, daemon=True).start()
f(1), f(2)  # misses that look at the threads
done = threading.Event()


def rows_appended():  # user code, run by the loop's thread between the key and the call
    TABLE.rows.append(100)
    done.set()


out = {}
during_key.append(lambda: (loop.add_callback(rows_appended), done.wait(60)))
returned = f(3)
stores = f.cache_info().stores
TABLE.rows.remove(100)
after = f(3)
TABLE.rows.append(4)
out["between the key and the call"] = [returned, stores, after, f(3)]
TABLE.rows.remove(4)
during_call = []


def waits(x):
    while during_call:
        during_call.pop()()
    return x + sum(TABLE.rows)


g = fncache.memoize(store=sys.argv[1], ignore_globals=["during_call"])(waits)
g(1), g(2)
done.clear()
during_call.append(lambda: (loop.add_callback(rows_appended), done.wait(60)))
returned = g(3)
stores = g.cache_info().stores
TABLE.rows.remove(100)
after = g(3)
TABLE.rows.append(4)
out["during the call"] = [returned, stores, after, g(3)]
print(json.dumps(out))
"""


def test_a_global_changed_by_an_event_loop_thread_is_not_taken_as_the_functions_own(tmp_path):
    """A thread of a library class that runs user code (here an event loop the user runs on its own
    thread, whose callbacks are theirs) is never taken for a service thread: a global it changes
    between the key and the call, or during the call, is not taken as the function's own doing
    (which would key it by name from then on: later changes ignored, stale hits); the result is
    returned and not stored, and the global stays keyed by its content."""
    from tests.helpers import last_json, run_py, write

    pytest.importorskip("tornado")
    script = write(tmp_path / "job.py", _CHANGED_BY_A_LOOP_THREAD)
    assert last_json(run_py(script, str(tmp_path / "store"))) == {
        "between the key and the call": [109, 2, 9, 13], "during the call": [109, 2, 9, 13]}


_CHANGED_DURING_THE_CALL = """
import json, sys, threading
import fncache

TABLE = [1, 2, 3]
started, changed = threading.Event(), threading.Event()


def waits(x):  # reads TABLE while another thread may change it
    started.set()
    changed.wait(60)
    return x + sum(TABLE)


ready = threading.Event()


def change_once():  # the other thread's user code: runs while a call waits
    ready.set()
    started.wait(60)
    TABLE.append(100)
    changed.set()


g = fncache.memoize(store=sys.argv[1], ignore_globals=["started", "changed"])(waits)
changed.set()
g(1), g(2)  # misses that look at the threads
changed.clear()
started.clear()
START_THE_OTHER_THREAD
ready.wait(60)  # it runs when the call begins
returned = g(3)
stores = g.cache_info().stores
TABLE.remove(100)
after = g(3)
TABLE.append(4)
print(json.dumps([returned, stores, after, g(3)]))
"""

_ON_FSSPECS_LOOP = """
import asyncio
import fsspec.asyn


async def leave_a_task():  # run on fsspec's loop with its helper; the task stays behind
    async def watch():
        await asyncio.get_running_loop().run_in_executor(None, change_once)
    asyncio.ensure_future(watch())


fsspec.asyn.sync(fsspec.asyn.get_loop(), leave_a_task)
"""


_GIVEN_UP_ON_FSSPECS_LOOP = """
import asyncio
import fsspec.asyn


async def gives_up():  # on fsspec's loop: stops waiting for its executor work, which goes on
    work = asyncio.get_running_loop().run_in_executor(None, change_once)
    while not ready.is_set():  # it runs (a queued item would be cancelled with the wait)
        await asyncio.sleep(0.001)
    work.cancel()


fsspec.asyn.sync(fsspec.asyn.get_loop(), gives_up)
"""


@pytest.mark.parametrize("other", ["a task left on fsspec's loop", "executor work fsspec's loop gave up on",
                                   "a thread started with _thread"])
def test_a_global_changed_during_the_call_by_code_threading_does_not_list_as_user_code(tmp_path,
                                                                                        other):
    """fsspec's I/O loop is a public event loop: while a task a user's coroutine left on it runs, or
    its executor runs work (which may outlive the task that submitted it), its threads are not
    service threads. A thread ``threading`` does not list (started with
    ``_thread``, or hidden by a debugger, as pydevd hides its own and a kernel's subshells) counts
    too: as many threads must be listed as ``_thread`` counts. A global either changes during the
    call is not taken as the function's own (keyed by name from then on: stale hits)."""
    from tests.helpers import last_json, run_py, write

    if "fsspec" in other:
        pytest.importorskip("fsspec")
        start = _ON_FSSPECS_LOOP if other.startswith("a task") else _GIVEN_UP_ON_FSSPECS_LOOP
    else:
        start = "import _thread\n_thread.start_new_thread(change_once, ())"
    script = write(tmp_path / "job.py",
                   _CHANGED_DURING_THE_CALL.replace("START_THE_OTHER_THREAD", start))
    assert last_json(run_py(script, str(tmp_path / "store"))) == [109, 2, 9, 13]


_FORKED_BESIDE_A_THREAD = """
import json, os, sys, threading

HOOKS = []
GO = threading.Event()
if sys.argv[2] != "no hook":  # a library's at-fork hooks, run before fncache's: its worker thread
    worker = [threading.Thread(target=GO.wait, daemon=True)]  # ends once GO is set


    def stop():  # before the fork, in the parent: stopped (and a new one made)
        GO.set()
        worker[0].join()
        GO.clear()
        worker[0] = threading.Thread(target=GO.wait, daemon=True)


    def restart(where):
        worker[0] = threading.Thread(target=GO.wait, daemon=True)
        worker[0].start()
        HOOKS.append(worker[0]) if where == "child" else None


    if sys.argv[2] == "restart":
        worker[0].start()
        os.register_at_fork(before=stop, after_in_parent=lambda: restart("parent"),
                            after_in_child=lambda: restart("child"))
    else:
        os.register_at_fork(after_in_child=lambda: restart("child"))
import fncache

LOG = []


def appends(x):  # writes state: stored when it runs alone
    LOG.append(x)
    return x


f = fncache.memoize(store=sys.argv[1])(appends)
idle = threading.Event()
threading.Thread(target=idle.wait, daemon=True).start()  # the parent's (a kernel's, a pool's)
r, w = os.pipe()
pid = os.fork()
if pid == 0:  # the child has only the thread that forked (and the hook's, which ends)
    GO.set()
    for hooked in HOOKS:
        hooked.join()
    f(1), f(1)
    info = f.cache_info()
    os.write(w, json.dumps([info.hits, info.stores, threading.active_count()]).encode())
    os._exit(0)
os.waitpid(pid, 0)
print(os.read(r, 1000).decode())
"""


@pytest.mark.parametrize("hook", ["no hook", "hook", "restart"])
def test_a_child_forked_beside_threads_is_alone_without_them(tmp_path, hook):
    """A forked child has none of its parent's threads, though ``_thread`` still counts them there
    (3.11 to 3.13): a function that writes state is stored and hits in the child, as in a process
    that never had threads (in such a child no miss skipped the hash before the call, and with the
    check after the call counting what ``_thread`` counts, none would store: multiprocessing's fork
    workers from a notebook, from a process that used the S3 store, a pool's replacement workers).
    A thread
    another library's at-fork hook starts in the child before fncache's runs (one it stopped before
    the fork, or not) is not taken for one of the parent's."""
    from tests.helpers import last_json, run_py, write

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    script = write(tmp_path / "job.py", _FORKED_BESIDE_A_THREAD)
    # [hits, stores, threads]: what a process that never had threads gives.
    assert last_json(run_py(script, str(tmp_path / "store"), hook)) == [1, 2, 1]


def test_library_threads_that_run_user_code_are_not_service_threads():
    """Only the named classes of threads that never run user code count as service threads: not a
    kernel's subshell threads (which run cells), IPython's background jobs, an event loop's thread
    or a user's subclass of a service thread's class; tornado's selector thread and a kernel's
    heartbeat are."""
    from fncache._threads import is_service_thread

    pytest.importorskip("tornado")
    pytest.importorskip("IPython")
    from IPython.lib.backgroundjobs import BackgroundJobFunc
    from tornado.ioloop import IOLoop
    from tornado.platform.asyncio import SelectorThread

    loop = IOLoop(make_current=False)
    try:
        assert not is_service_thread(threading.Thread(target=loop.start))
    finally:
        loop.close()
    # tornado's selector thread (a kernel's on Windows) only waits in select(): a service thread.
    assert is_service_thread(threading.Thread(target=object.__new__(SelectorThread)._run_select))
    job = BackgroundJobFunc.__new__(BackgroundJobFunc)  # (its __init__ needs a running IPython)
    threading.Thread.__init__(job)
    assert not is_service_thread(job)
    heartbeat = pytest.importorskip("ipykernel.heartbeat")

    class Mine(heartbeat.Heartbeat):
        pass

    import zmq

    context = zmq.Context()
    try:
        assert is_service_thread(heartbeat.Heartbeat(context))
        assert not is_service_thread(Mine(context))
        subshell = pytest.importorskip("ipykernel.subshell")
        assert not is_service_thread(subshell.SubshellThread("a", context))
    finally:
        context.term()


def test_a_coroutine_miss_hashes_as_a_plain_one(store, counted):
    """The async miss path is the same steps: a key, then one check after the call (and the check
    before it, once more, where a thread that could run user code is running: one is started here,
    as a test run leaves threads behind that may or may not be such)."""
    f = fncache.memoize(store=store)(atotal)
    assert asyncio.run(f(1)) == 7
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        counted.clear()
        assert asyncio.run(f(2)) == 8
        assert len(counted) == 3
    finally:
        stop.set()
        other.join()
    counted.clear()
    assert asyncio.run(f(2)) == 8
    assert len(counted) == 1


def test_a_global_modified_by_another_thread_during_the_call_is_not_stored(store):
    """The check after the call still sees what another thread did meanwhile."""
    started, done = threading.Event(), threading.Event()

    def slow(x: int) -> int:
        started.set()
        done.wait(60)
        return x + sum(_rows())

    f = fncache.memoize(store=store)(slow)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(f(1)))
    worker.start()
    try:
        assert started.wait(60)
        TABLE.rows.append(4)
        done.set()
        worker.join(60)
        assert f.cache_info().stores == 0
    finally:
        TABLE.rows.remove(4)
        done.set()
        worker.join(60)


def test_a_global_rebound_between_two_calls_still_gives_a_new_key(store):
    """Skipping the second check before the call never reuses a key the inputs no longer give."""
    global TABLE
    f = fncache.memoize(store=store)(total)
    assert f(1) == 7
    saved, TABLE = TABLE, Table([10])
    try:
        assert f(1) == 11
        assert f.cache_info() == (0, 2, 2, 0)
    finally:
        TABLE = saved
    assert f(1) == 7
    assert f.cache_info().hits == 1


@pytest.mark.parametrize("drifted,rebound,changed,alone,private",
                         list(itertools.product((False, True), repeat=5)))
def test_verdict_truth_table(drifted, rebound, changed, alone, private):
    """Store unless the inputs drifted or something changed that may be another thread's doing."""
    got = verdict(drifted=drifted, rebound=rebound, changed=changed, alone=alone, private=private)
    if drifted:
        expected = Verdict.SKIP
    elif not rebound and not changed:
        expected = Verdict.STORE
    elif alone or (not rebound and private):
        expected = Verdict.STATE if changed else Verdict.STORE_AFRESH
    else:
        expected = Verdict.SKIP
    assert got is expected


def test_the_thread_count_it_reads_counts_a_running_thread_until_it_ends():
    """What the one-step check before the call relies on: a started thread counts from before it
    runs Python code until it has ended."""
    from fncache._threads import threads_besides_main

    assert threading.current_thread() is threading.main_thread()
    before = threads_besides_main()  # a test run may leave threads of its own behind
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    assert threads_besides_main() == before + 1
    stop.set()
    other.join()
    assert threads_besides_main() == before
