"""Many processes and threads calling the same memoized functions at once.

Every racing process is a real interpreter started with ``subprocess`` that runs a small script
written into the test's directory. A computation is counted by appending one line to a file opened
with ``O_APPEND`` (a module global would not do: a global the function mutates is part of its key).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import fncache
from fncache import _codec
from fncache.stores import open_store

REPO = Path(__file__).resolve().parent.parent
PROCESSES = 8
CALLS = 500
KEYS = 50

# The function every worker memoizes. Its result describes its own argument, so any entry can be
# checked without knowing which call produced it; about a third are large enough (> 32 KiB) to be
# kept in files beside the SQLite database rather than in it.
FUNCTION = '''
import os, time

def log_line(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (text + "\\n").encode())
    finally:
        os.close(fd)

def square(x, log, slow_pid_file=None):
    log_line(log, f"{x} {os.getpid()}")
    if slow_pid_file and os.path.exists(slow_pid_file):
        with open(slow_pid_file) as f:
            if f.read().strip() == str(os.getpid()):
                time.sleep(60)
    time.sleep(0.002)
    return {"x": x, "square": x * x, "blob": bytes([x % 251]) * (x * 1000)}
'''

WORKER = FUNCTION + '''
import json, logging, random, sys, threading
sys.path.insert(0, sys.argv[1])
import fncache

store, log, seed, lock, threads, calls, keys = sys.argv[2:9]
seed, threads, calls, keys = int(seed), int(threads), int(calls), int(keys)
warnings = []

class Collect(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage())

logging.getLogger("fncache").addHandler(Collect(logging.WARNING))
f = fncache.memoize(store=store, lock=lock == "1", lock_timeout=60)(square)
errors, wrong = [], []

def run(index):
    rng = random.Random(seed * 1000 + index)
    for _ in range(calls // threads):
        x = rng.randrange(keys)
        try:
            r = f(x, log)
        except Exception as e:
            errors.append(repr(e))
            continue
        if r != {"x": x, "square": x * x, "blob": bytes([x % 251]) * (x * 1000)}:
            wrong.append(x)

ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps({"errors": errors, "wrong": wrong, "warnings": warnings,
                  "info": list(f.cache_info())}))
'''

SINGLE_CALL = FUNCTION + '''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import fncache

store, log, slow, timeout = sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
f = fncache.memoize(store=store, lock=True, lock_timeout=timeout)(square)
start = time.monotonic()
r = f(7, log, slow)
ok = r == {"x": 7, "square": 49, "blob": bytes([7]) * 7000}
print(json.dumps({"ok": ok, "seconds": time.monotonic() - start}))
'''


def _script(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def _start(script: Path, *args: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONHASHSEED="random")
    env.pop("FNCACHE_DISABLE", None)
    return subprocess.Popen(
        [sys.executable, str(script), str(REPO), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"worker exited {proc.returncode}\n{out}\n{err}"
    return json.loads(out.strip().splitlines()[-1])


def _computations(log: Path) -> Counter[int]:
    if not log.exists():
        return Counter()
    return Counter(int(line.split()[0]) for line in log.read_text().splitlines())


def _expected(x: int) -> dict[str, Any]:
    return {"x": x, "square": x * x, "blob": bytes([x % 251]) * (x * 1000)}


def _assert_store_sound(directory: Path) -> int:
    """Every entry in the store decodes under its own key to a correct value; returns the count."""
    store = open_store(str(directory))
    n = 0
    for info in store.entries():
        frame = store.get(info.key)
        assert frame is not None, info.key
        value, _ = _codec.decode(frame, info.key)
        assert value == _expected(value["x"])
        n += 1
    store.close()
    return n


def _race(tmp_path: Path, lock: bool) -> tuple[list[dict[str, Any]], Counter[int]]:
    script = _script(tmp_path, "worker.py", WORKER)
    store, log = tmp_path / "cache", tmp_path / "computed.log"
    procs = [
        _start(script, store, log, seed, int(lock), 2, CALLS, KEYS) for seed in range(PROCESSES)
    ]
    reports = [_finish(p) for p in procs]
    return reports, _computations(log)


@pytest.mark.slow
def test_processes_and_threads_race_without_locking(tmp_path):
    """8 processes x 2 threads making 500 calls over 50 keys all get correct results, no errors."""
    reports, computed = _race(tmp_path, lock=False)
    for r in reports:
        assert r["errors"] == [] and r["wrong"] == [] and r["warnings"] == []
    assert set(computed) == set(range(KEYS))
    # Without a lock a key may be computed once per process at most: never again after it is stored.
    assert max(computed.values()) <= PROCESSES
    assert sum(r["info"][0] for r in reports) + sum(r["info"][1] for r in reports) == (
        PROCESSES * CALLS
    )
    assert _assert_store_sound(tmp_path / "cache") == KEYS


@pytest.mark.slow
def test_processes_and_threads_race_with_locking_compute_each_key_once(tmp_path):
    """With lock=True, 8 processes x 2 threads over 50 keys compute every key exactly once."""
    reports, computed = _race(tmp_path, lock=True)
    for r in reports:
        assert r["errors"] == [] and r["wrong"] == [] and r["warnings"] == []
    assert computed == Counter({x: 1 for x in range(KEYS)})
    assert _assert_store_sound(tmp_path / "cache") == KEYS


def _wait_for(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


@pytest.mark.slow
def test_waiters_recover_from_a_lock_holder_killed_with_sigkill(tmp_path):
    """When the process computing a key is SIGKILLed, waiters proceed once its lease expires."""
    script = _script(tmp_path, "one.py", SINGLE_CALL)
    store, log, slow = tmp_path / "cache", tmp_path / "computed.log", tmp_path / "slow.pid"
    lease = 3.0
    holder = _start(script, store, log, slow, lease)
    slow.write_text(str(holder.pid))  # only the holder is slow: it sleeps inside the computation
    _wait_for(lambda: _computations(log)[7] == 1)
    acquired = time.monotonic()
    waiters = [_start(script, store, log, slow, lease) for _ in range(4)]
    time.sleep(1.0)  # the waiters are blocked on the lock by now
    assert _computations(log)[7] == 1
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    reports = [_finish(w, timeout=60) for w in waiters]
    elapsed = time.monotonic() - acquired
    assert all(r["ok"] for r in reports)
    # The killed holder's computation plus exactly one more: the others waited and then hit.
    assert _computations(log)[7] == 2
    assert elapsed < lease + 15  # recovered after the lease, not after some longer default
    assert elapsed >= lease - 0.5  # and they did wait for the lease to run out


@pytest.mark.slow
def test_waiter_stops_waiting_for_a_live_but_slow_holder_after_the_timeout(tmp_path):
    """A waiter blocked by a live holder that outlasts lock_timeout computes the value itself."""
    script = _script(tmp_path, "one.py", SINGLE_CALL)
    store, log, slow = tmp_path / "cache", tmp_path / "computed.log", tmp_path / "slow.pid"
    holder = _start(script, store, log, slow, 1.5)
    try:
        slow.write_text(str(holder.pid))
        _wait_for(lambda: _computations(log)[7] == 1)
        report = _finish(_start(script, store, log, slow, 1.5), timeout=60)
        assert report["ok"]
        assert report["seconds"] < 15  # not the holder's 60 s
        assert _computations(log)[7] == 2
    finally:
        holder.kill()
        holder.communicate()


def test_threads_missing_on_one_key_compute_once(tmp_path):
    """Sixteen threads of one process that miss on the same key at once compute it once."""
    log = tmp_path / "computed.log"
    namespace: dict[str, Any] = {}
    exec(compile(FUNCTION, "<square>", "exec"), namespace)
    f = fncache.memoize(store=str(tmp_path / "cache"))(namespace["square"])
    barrier = threading.Barrier(16)
    results: list[Any] = []

    def run() -> None:
        barrier.wait()
        results.append(f(40, str(log)))

    threads = [threading.Thread(target=run) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [_expected(40)] * 16
    assert _computations(log) == Counter({40: 1})


def _flaky(x: int, directory: str) -> int:
    """Fails in the thread named "first" once released, succeeds elsewhere; counts attempts."""
    fd = os.open(os.path.join(directory, "attempts.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, b"x\n")
    os.close(fd)
    if threading.current_thread().name == "first":
        open(os.path.join(directory, "started"), "w").close()
        deadline = time.monotonic() + 10
        while not os.path.exists(os.path.join(directory, "release")):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        raise RuntimeError("first attempt fails")
    return x + 1


def test_threads_waiting_on_a_failed_computation_do_not_receive_its_exception(tmp_path):
    """When the thread computing a key raises, the threads waiting on it compute for themselves."""
    f = fncache.memoize(store="memory://threads-fail")(_flaky)
    errors: list[BaseException] = []
    results: list[int] = []

    def run() -> None:
        try:
            results.append(f(1, str(tmp_path)))
        except BaseException as e:
            errors.append(e)

    first = threading.Thread(target=run, name="first")
    first.start()
    _wait_for((tmp_path / "started").exists)
    others = [threading.Thread(target=run) for _ in range(4)]
    for t in others:
        t.start()
    time.sleep(0.2)  # the others are waiting on the first thread's flight by now
    (tmp_path / "release").touch()
    for t in [first, *others]:
        t.join()
    assert [type(e) for e in errors] == [RuntimeError]
    assert results == [2] * 4
    # The first thread's attempt, then one more: the waiters share the second computation or hit.
    assert (tmp_path / "attempts.log").read_text().count("x") == 2


@pytest.mark.parametrize("lock", [False, True])
def test_an_exception_releases_the_lock_and_is_not_cached(tmp_path, lock):
    """A function that raises leaves no entry and no held lock: the next call runs it again."""
    calls = tmp_path / "calls.log"

    def boom(x: int, path: str) -> int:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, b"x\n")
        os.close(fd)
        raise KeyError(x)

    f = fncache.memoize(store=str(tmp_path / "cache"), lock=lock, lock_timeout=30)(boom)
    for _ in range(2):
        start = time.monotonic()
        with pytest.raises(KeyError):
            f(3, str(calls))
        assert time.monotonic() - start < 20  # did not wait out the 30 s lock
    assert calls.read_text().count("x") == 2
    assert not f.check_call_in_cache(3, str(calls))


ASYNC_CALL = '''
import asyncio, json, os, sys, time
sys.path.insert(0, sys.argv[1])
import fncache

store, log, go = sys.argv[2], sys.argv[3], sys.argv[4]

async def slow_square(x):
    with open(log, "a") as fh:
        fh.write(f"{x} {os.getpid()}\\n")
    await asyncio.sleep(3.0)
    return x * x

f = fncache.memoize(store=store, lock=True, lock_timeout=60)(slow_square)

async def main():
    open(go + "-ready-" + str(os.getpid()), "w").close()
    while not os.path.exists(go):
        await asyncio.sleep(0.01)
    ticks = []

    async def tick():  # the event loop keeps running while the lock is awaited
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.05)

    ticker = asyncio.create_task(tick())
    r = await f(7)
    ticker.cancel()
    print(json.dumps({"result": r, "info": list(f.cache_info()), "ticks": len(ticks)}))

asyncio.run(main())
'''


@pytest.mark.slow
def test_two_processes_awaiting_one_key_with_lock_compute_once(tmp_path):
    """With lock=True, two processes awaiting a coroutine function on one key compute it once."""
    script = _script(tmp_path, "async_one.py", ASYNC_CALL)
    store, log, go = tmp_path / "cache", tmp_path / "computed.log", tmp_path / "go"
    procs = [_start(script, store, log, go) for _ in range(2)]
    deadline = time.monotonic() + 120  # a guard against a hang only
    while len(list(tmp_path.glob("go-ready-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    go.write_text("go")  # both started and waiting: the computation's 3 s leave the waiter time
    reports = [_finish(p) for p in procs]
    assert [r["result"] for r in reports] == [49, 49]
    assert _computations(log) == Counter({7: 1})
    assert sorted(r["info"][2] for r in reports) == [0, 1]  # the waiter stored nothing: it read the entry
    assert min(r["ticks"] for r in reports) >= 10  # neither loop was blocked while it waited


def test_coroutine_waiting_past_lock_timeout_computes_and_warns(tmp_path, caplog):
    """An awaited call whose key another holder keeps locked past lock_timeout computes anyway."""
    import asyncio
    import logging

    import fncache

    runs = []

    @fncache.memoize(store=str(tmp_path / "cache"), lock=True, lock_timeout=0.3)
    async def f(x):
        runs.append(x)
        return -x

    held = f.store.lock(f.key(5), timeout=30)
    held.__enter__()
    try:
        with caplog.at_level(logging.WARNING, logger="fncache"):
            assert asyncio.run(f(5)) == -5
    finally:
        held.__exit__(None, None, None)
    assert runs == [5]
    assert any("computing too" in r.getMessage() for r in caplog.records)


class _Gate:
    """Holds a flaky coroutine's first attempt until released; counts attempts (left out of keys)."""

    def __init__(self) -> None:
        self.attempts = 0
        self.release = asyncio.Event()


async def _flaky_coroutine(x: int, gate: _Gate) -> int:
    gate.attempts += 1
    if gate.attempts == 1:
        await gate.release.wait()
        raise RuntimeError("first attempt fails")
    return x + 1


def test_coroutines_waiting_on_a_failed_computation_do_not_receive_its_exception():
    """When the coroutine computing a key raises, it raises in its own caller only: the tasks
    awaiting the same key compute again (once, shared among them), as threads do."""
    f = fncache.memoize(store="memory://async-fail", ignore=["gate"])(_flaky_coroutine)

    async def main() -> list[Any]:
        gate = _Gate()
        tasks = [asyncio.create_task(f(1, gate)) for _ in range(5)]
        # Every task runs to its first await (the first into the function, the others onto its
        # flight) before the gate opens: nothing between the call and those awaits yields.
        for _ in range(3):
            await asyncio.sleep(0)
        assert gate.attempts == 1
        gate.release.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        return [gate.attempts, *results]

    attempts, first, *others = asyncio.run(main())
    assert isinstance(first, RuntimeError)
    assert others == [2] * 4
    assert attempts == 2
