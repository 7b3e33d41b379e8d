"""Verbose mode: misses say why and how long they computed; Memory(verbose=1) prints joblib's lines;
slow-to-rehash globals are reported once. Each runs in fresh processes, as a user would see it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import fncache
from fncache import _verbose
from tests.helpers import run_py, write

SCORE = """
import sys, time
import fncache

THRESHOLD = float(sys.argv[2])

@fncache.memoize(store=sys.argv[1])
def score(x):
    time.sleep(0.02)
    return x * THRESHOLD

score(1)
score(1)
"""


def _lines(stderr: str, prefix: str = "[fncache]") -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(prefix)]


@pytest.mark.slow
def test_verbose_miss_says_which_global_changed(tmp_path: Path) -> None:
    """FNCACHE_VERBOSE=1: a miss in a new process names the global that differs from the stored
    entry, then the compute duration; the next call is a hit line."""
    script = write(tmp_path / "job.py", SCORE)
    store = str(tmp_path / "store")
    env = {"FNCACHE_VERBOSE": "1"}
    first = _lines(run_py(script, store, "0.5", env=env).stderr)
    assert re.fullmatch(r"\[fncache\] miss job:score [0-9a-f]{12} \(new: no stored entry of this "
                        r"function\)", first[0]), first
    second = _lines(run_py(script, store, "0.7", env=env).stderr)
    assert re.fullmatch(r"\[fncache\] miss job:score [0-9a-f]{12} \(global THRESHOLD changed\)",
                        second[0]), second
    assert re.fullmatch(r"\[fncache\] computed job:score in \d+ ms", second[1]), second
    assert second[2].startswith("[fncache] hit job:score") and len(second) == 3
    assert _lines(run_py(script, store, "0.7").stderr) == []  # off without the variable


def test_verbose_miss_names_the_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """verbose=True: a call with a new argument value says which argument differs."""
    @fncache.memoize(store=str(tmp_path / "s"), verbose=True)
    def f(x: int, y: int = 0) -> int:
        return x + y

    f(1)
    capsys.readouterr()
    f(1, y=5)
    lines = _lines(capsys.readouterr().err)
    assert lines[0].endswith("(argument y changed)"), lines


def test_verbose_reason_reads_a_bounded_part_of_the_store(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """On a store whose listing holds more than SCAN_LIMIT entries before the function's own, the miss
    line says none was seen instead of reading the whole store (bounded work per miss)."""
    store = fncache.open_store(str(tmp_path / "s"))

    @fncache.memoize(store=store)
    def other(i: int) -> int:
        return i

    for i in range(_verbose.SCAN_LIMIT + 1):
        other(i)

    def f(x: int) -> int:
        return x

    fncache.memoize(store=store)(f)(1)  # an entry of f, listed after the others
    g = fncache.memoize(store=store, verbose=True)(f)
    g(2)
    line = _lines(capsys.readouterr().err)[0]
    assert line.endswith("(no earlier entry of this function seen)"), line
    g(3)  # what this process stored is known without reading the store again
    assert _lines(capsys.readouterr().err)[0].endswith("(argument x changed)")


def test_verbose_reason_on_a_tiered_store_reads_the_near_tier(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """With tiers, the reason for a miss is found among the entries of the nearest tier."""
    tiers = [str(tmp_path / "near"), f"memory://{tmp_path.name}-far"]

    def f(x: int) -> int:
        return x

    fncache.memoize(store=tiers)(f)(1)  # stored by another "process": only the store knows it
    g = fncache.memoize(store=tiers, verbose=True)(f)
    g(2)
    assert _lines(capsys.readouterr().err)[0].endswith("(argument x changed)")


MEMORY = """
import sys, time
from fncache import Memory

memory = Memory(sys.argv[1], verbose=int(sys.argv[2]))

@memory.cache
def slow(x, y=2):
    time.sleep(0.15)
    return x * y

slow(1, y=3)
slow(1, y=3)
"""


@pytest.mark.slow
def test_memory_verbose_prints_joblib_lines(tmp_path: Path) -> None:
    """Memory(verbose=1) prints joblib's lines for a computation (rule, "[Memory] Calling", the call,
    the name and duration) on stderr, once; verbose=0 prints nothing."""
    script = write(tmp_path / "job.py", MEMORY)
    proc = run_py(script, str(tmp_path / "c"), "1")
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[:3] == ["_" * 80, "[Memory] Calling job.slow...", "slow(1, y=3)"], lines
    # The duration as joblib formats it (at least the 0.15 s slept; more on a loaded machine).
    assert re.fullmatch(r"_{60,}slow - \d+\.\ds, \d+\.\dmin", lines[3]) and len(lines[3]) == 80, lines
    assert float(lines[3].split(" - ")[1].split("s,")[0]) >= 0.1, lines
    assert len(lines) == 4
    assert run_py(script, str(tmp_path / "c2"), "0").stderr == ""


BIG_GLOBAL = """
import logging, sys
import numpy as np
import fncache

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
# 200 MB of ones, re-hashed on every call: real pages (np.zeros maps every page to the kernel's one
# zero page, which hashes from the CPU cache in about a millisecond, the report's threshold).
BIG = np.ones(200_000_000 // 8)
SMALL = np.zeros(100)

@fncache.memoize(store=sys.argv[1])
def f(i):
    return float(BIG[i] + SMALL[0])

for i in range(4):
    f(i)
BIG[0] = 2.0   # changed: the fingerprint is made again, nothing reported twice
f(0)
"""


@pytest.mark.slow
def test_large_global_is_reported_once(tmp_path: Path) -> None:
    """A 200 MB global array the function reads is reported once at INFO with its cost and remedies;
    a small one is not."""
    pytest.importorskip("numpy")
    script = write(tmp_path / "job.py", BIG_GLOBAL)
    err = run_py(script, str(tmp_path / "s")).stderr
    reports = [line for line in err.splitlines() if "re-hashes it on every call" in line]
    assert len(reports) == 1, err
    assert re.match(r"INFO job:f reads global BIG, a numpy\.ndarray \(200\.0 MB\), and re-hashes it on "
                    r"every call to see whether it changed: \d+\.\d ms a call\. If it does not change, pass "
                    r"it as an argument, key it with fncache\.ref\(value, token\), or pin", reports[0])
    assert "SMALL" not in err


CALL_LOG = """
import asyncio, sys, threading
import fncache

CALLS = []
idle = threading.Event()
threading.Thread(target=idle.wait, daemon=True).start()  # an idle thread, as a pool leaves behind

@fncache.memoize(store=sys.argv[1], verbose=True)
def logged(x):
    CALLS.append(x)
    return x * 2

@fncache.memoize(store=sys.argv[1], verbose=True, ignore_globals=["CALLS"])
def told(x):
    CALLS.append(x)
    return x * 3

memory = fncache.Memory(sys.argv[1] + "-joblib", verbose=0)

@memory.cache(ignore_globals=["CALLS"])
def joblib_style(x):
    CALLS.append(x)
    return x * 4

for _ in range(3):
    logged(1)
told(1), told(1), joblib_style(1), joblib_style(1)
print(logged.cache_info().stores, told.cache_info().stores, told.cache_info().hits,
      joblib_style.cache_info().hits)
print(sorted(told.explain(1).by_name.items()))
"""


@pytest.mark.slow
def test_not_stored_is_said_and_ignore_globals_stores(tmp_path: Path) -> None:
    """A function that appends to a global while another thread exists computes and does not store:
    the verbose line and a WARNING (once per function and global) say which global, why and the
    remedy; with ignore_globals=["CALLS"] (memoize or Memory.cache) it stores and hits, and explain
    lists the global as left out."""
    script = write(tmp_path / "job.py", CALL_LOG)
    proc = run_py(script, str(tmp_path / "store"))
    said = ("not stored: global CALLS changed during the call while other threads ran; if the "
            "function writes it itself (a log, a counter), memoize(ignore_globals=['CALLS']) leaves "
            "it out of the key")
    assert _lines(proc.stderr).count(f"[fncache] job:logged {said}") == 3
    warnings = [line for line in proc.stderr.splitlines() if not line.startswith("[fncache]")]
    assert warnings == [f"job:logged: result returned, {said}"]  # once (logging's last resort)
    assert not any("job:told" in line and "not stored" in line for line in _lines(proc.stderr))
    out = proc.stdout.splitlines()
    assert out[0] == "0 1 1 1"
    assert out[1] == "[('global CALLS', 'left out by ignore_globals=')]"


def test_ignore_globals_is_checked(tmp_path: Path) -> None:
    """ignore_globals takes a list of identifiers; a bare string or a non-name is refused by name."""
    with pytest.raises(fncache.ConfigError, match=r"ignore_globals: .*write ignore_globals=\['CALLS'\]"):
        fncache.memoize(lambda x: x, ignore_globals="CALLS")
    with pytest.raises(fncache.ConfigError, match="ignore_globals: expected global names"):
        fncache.memoize(lambda x: x, ignore_globals=["a.b"])
    with pytest.raises(fncache.ConfigError, match="ignore_globals: expected a list"):
        fncache.Memory(str(tmp_path)).cache(lambda x: x, ignore_globals=5)


ASYNC_LOG = """
import asyncio, sys
import fncache

CALLS = []

@fncache.memoize(store=sys.argv[1], verbose=True)
async def fetch(x):
    CALLS.append(x)
    await asyncio.sleep(0)
    return x * 2

async def main():
    return await asyncio.gather(fetch(1), fetch(2))

print(asyncio.run(main()), fetch.cache_info().stores)
"""


@pytest.mark.slow
def test_not_stored_under_gather_names_the_other_tasks(tmp_path: Path) -> None:
    """Coroutines run together by asyncio.gather that append to a global: the line says other tasks
    ran (no other thread exists), and the results are returned."""
    proc = run_py(write(tmp_path / "job.py", ASYNC_LOG), str(tmp_path / "store"))
    assert proc.stdout.split() == ["[2,", "4]", "0"]
    lines = [line for line in _lines(proc.stderr) if "not stored" in line]
    assert len(lines) == 2
    assert all("global CALLS changed during the call while other tasks ran" in line for line in lines)


@pytest.mark.slow
def test_verbose_miss_after_a_code_edit_points_to_explain_for_the_diff(tmp_path: Path) -> None:
    """A miss because a helper's code changed keeps its short reason and points to explain(),
    which shows the changed lines; a miss for a changed global does not."""
    source = SCORE.replace("return x * THRESHOLD", "return helper(x) * THRESHOLD").replace(
        "@fncache.memoize", "def helper(x):\n    return x + 1\n\n@fncache.memoize")
    script = write(tmp_path / "job.py", source)
    store = str(tmp_path / "store")
    env = {"FNCACHE_VERBOSE": "1"}
    run_py(script, store, "0.5", env=env)
    write(tmp_path / "job.py", source.replace("return x + 1", "return x + 2"))
    miss = _lines(run_py(script, store, "0.5", env=env).stderr)[0]
    assert miss.endswith("(helper helper changed, explain() shows the diff)"), miss
    other = _lines(run_py(script, store, "0.9", env=env).stderr)[0]
    assert other.endswith("(global THRESHOLD changed)"), other
