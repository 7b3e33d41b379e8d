"""What every benchmark shares: timing rounds interleaved and rotated, result rows, file hygiene.

See ``python -m benchmarks --help`` for the method.
"""

from __future__ import annotations

import glob
import os
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

Row = dict[str, Any]


class Stat(NamedTuple):
    """Seconds per call over the rounds of one benchmark."""

    min: float
    median: float
    max: float


def stat(times: list[float]) -> Stat:
    return Stat(min(times), statistics.median(times), max(times))


def touch_memory(nbytes: int) -> None:
    """Write and free a block of memory before a large timed step.

    Freed pages are handed back to the host on some VMs and faulted back in slowly: without this,
    whichever implementation runs first after a free pays for it.
    """
    if nbytes:
        block = bytearray(nbytes)
        block[::4096] = b"\1" * len(range(0, nbytes, 4096))
        del block


def measure(fns: dict[str, Callable[[], Any]], rounds: int, *, number: int = 1,
             touch: int = 0, before: Callable[[], Any] | None = None) -> dict[str, Stat]:
    """Seconds per call of each function: rounds interleaved, their order rotated every round.

    ``touch``: bytes of memory written and freed before each timed step; ``before``: run (not
    timed) before each step. A step's result is freed after the clock stops, not inside it.
    """
    names = list(fns)
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            fn = fns[name]
            if before is not None:
                before()
            touch_memory(touch)
            t = time.perf_counter()
            for _ in range(number - 1):
                fn()
            result = fn()
            times[name].append((time.perf_counter() - t) / number)
            del result
    return {k: stat(v) for k, v in times.items()}


def row(name: str, ours: Stat, base: Stat, base_name: str, target: str, limit: float | None,
         unit: str = "us") -> Row:
    """One line: medians, min/max, the ratio of medians and whether it is within ``limit``
    (``None``: information only)."""
    scale = {"us": 1e6, "ms": 1e3, "s": 1.0, "x": 1.0, "MB": 1.0}[unit]
    ratio = ours.median / base.median if base.median else float("nan")
    return {"name": name, "unit": unit, "ours": ours.median * scale,
            "ours_range": [ours.min * scale, ours.max * scale], "baseline": base.median * scale,
            "baseline_range": [base.min * scale, base.max * scale], "baseline_name": base_name,
            "ratio": ratio, "target": target, "met": limit is None or ratio <= limit}


def const(seconds: float) -> Stat:
    return Stat(seconds, seconds, seconds)


def evict(paths: list[str]) -> None:
    """Drop these files' pages from the page cache (a cold read follows).

    ``posix_fadvise(DONTNEED)`` on clean pages (hence the fsync) drops just these files, without
    root and without emptying the cache of everything else running on the machine.
    """
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def forget(ours: Any, jl: Any, *paths: str) -> None:
    """Delete what earlier store steps wrote (untimed): each store then starts from the same
    state, and none pays for the kernel writing back another's files (deleted files are not)."""
    ours.store.clear()
    jl.clear(warn=False)
    for path in paths:
        for name in glob.glob(path):
            os.remove(name)
