"""A mixed, hostile workload for minutes: racing processes, SIGKILLs, damage, eviction, pruning.

Run it with ``python -m pytest tests/stress --run-stress -q -s`` (or ``FNCACHE_STRESS=1``);
``FNCACHE_STRESS_SECONDS`` sets the duration (default 180) and ``FNCACHE_STRESS_WORKERS`` the
number of worker processes (default 6, two threads each). What must hold throughout: every call
returns the exact value, no call raises, and afterwards every entry left in the store decodes to a
correct value.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from fncache import _codec
from fncache._errors import IntegrityError
from fncache.stores import open_store

from ..helpers import clear_older_than, prune_to_size

REPO = Path(__file__).resolve().parent.parent.parent
SECONDS = float(os.environ.get("FNCACHE_STRESS_SECONDS", "180"))
WORKERS = int(os.environ.get("FNCACHE_STRESS_WORKERS", "6"))
KEYS = 200
LIMIT = 200_000_000  # bytes: the size-limited store evicts all through the run

WORKER = '''
import json, logging, os, random, sys, threading, time
sys.path.insert(0, sys.argv[1])
import fncache

plain_store, limited_store = sys.argv[2], sys.argv[3]
seed, seconds = int(sys.argv[4]), float(sys.argv[5])
limit, keys = int(sys.argv[6]), int(sys.argv[7])

def value(x):
    size = 100 if x % 3 == 0 else (x * 7919) % 3_000_000 + 40_000
    return {"x": x, "data": bytes([x % 251]) * size}

def compute(x, kind):
    time.sleep(random.random() * 0.01)
    return value(x)

warnings = []
class Collect(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage()[:200])
logging.getLogger("fncache").addHandler(Collect(logging.WARNING))

functions = [
    fncache.memoize(store=plain_store)(compute),
    fncache.memoize(store=plain_store, lock=True, lock_timeout=5)(compute),
    fncache.memoize(store=limited_store, store_options={"size_limit": limit})(compute),
    fncache.memoize(store=plain_store, expire=2.0, secret=b"stress")(compute),
]
end = time.monotonic() + seconds
stats = {"calls": 0, "errors": [], "wrong": 0}
lock = threading.Lock()

def run(index):
    rng = random.Random(seed * 100 + index)
    while time.monotonic() < end:
        which = rng.randrange(len(functions))
        f, x = functions[which], rng.randrange(keys)
        try:
            r = f.call(x, which) if rng.random() < 0.02 else f(x, which)
            ok = r == value(x)
        except Exception as e:
            with lock:
                stats["errors"].append(repr(e)[:300])
            continue
        with lock:
            stats["calls"] += 1
            stats["wrong"] += not ok

threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
stats["warnings"] = len(warnings)
stats["warning_samples"] = warnings[:5]
stats["info"] = [list(f.cache_info()) for f in functions]
print(json.dumps(stats))
'''


def _start(script: Path, plain: Path, limited: Path, seed: int, seconds: float) -> Any:
    env = dict(os.environ, PYTHONHASHSEED="random")
    env.pop("FNCACHE_DISABLE", None)
    return subprocess.Popen(
        [sys.executable, str(script), str(REPO), str(plain), str(limited), str(seed),
         str(seconds), str(LIMIT), str(KEYS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _damage_one(directory: Path, rng: random.Random) -> str | None:
    """Flip a byte of a random entry, inline or in its file; returns what was done."""
    con = sqlite3.connect(directory / "cache.db", timeout=30)
    try:
        rows = con.execute(
            "SELECT key, filename FROM Cache WHERE raw = 1 AND key NOT LIKE 'l:%'"
        ).fetchall()
        if not rows:
            return None
        key, filename = rng.choice(rows)
        if filename:
            path = directory / filename
            try:
                with open(path, "r+b") as f:
                    size = os.fstat(f.fileno()).st_size
                    if not size:
                        return None
                    f.seek(rng.randrange(size))
                    byte = f.read(1)
                    f.seek(-1, os.SEEK_CUR)
                    f.write(bytes([byte[0] ^ 0xFF]))
            except FileNotFoundError:
                return None
            return "file"
        row = con.execute("SELECT value FROM Cache WHERE key = ? AND raw = 1", (key,)).fetchone()
        if not row or not row[0]:
            return None
        data = bytearray(row[0])
        data[rng.randrange(len(data))] ^= 0xFF
        con.execute("UPDATE Cache SET value = ? WHERE key = ? AND raw = 1", (bytes(data), key))
        con.commit()
        return "inline"
    except sqlite3.OperationalError:
        return None  # busy: skip this round
    finally:
        con.close()


def _expected(x: int) -> dict[str, Any]:
    size = 100 if x % 3 == 0 else (x * 7919) % 3_000_000 + 40_000
    return {"x": x, "data": bytes([x % 251]) * size}


@pytest.mark.stress
def test_mixed_hostile_workload_keeps_every_result_exact(tmp_path):
    """Minutes of racing, killing, damaging, evicting and pruning never yield a wrong value."""
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    plain, limited = tmp_path / "plain", tmp_path / "limited"
    rng = random.Random(9)
    end = time.monotonic() + SECONDS
    workers = {i: _start(script, plain, limited, i, SECONDS) for i in range(WORKERS)}
    seed = WORKERS
    kills = damages = prunes = 0
    reports: list[dict[str, Any]] = []
    time.sleep(3)  # let the stores be created
    while time.monotonic() < end - 10:
        time.sleep(rng.uniform(0.2, 1.0))
        action = rng.random()
        if action < 0.3:
            i = rng.choice(list(workers))
            workers[i].send_signal(signal.SIGKILL)
            workers[i].communicate()
            workers[i] = _start(script, plain, limited, seed, end - time.monotonic())
            seed += 1
            kills += 1
        elif action < 0.8:
            damages += _damage_one(rng.choice([plain, limited]), rng) is not None
        else:
            store = open_store(str(plain))
            if rng.random() < 0.5:
                prune_to_size(store, rng.randrange(50_000_000, 300_000_000))
            else:
                clear_older_than(store, rng.uniform(5, 60))
            prunes += 1
    for p in workers.values():
        out, err = p.communicate(timeout=max(60.0, SECONDS))
        assert p.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    calls = sum(r["calls"] for r in reports)
    summary = {
        "seconds": SECONDS, "workers": WORKERS, "calls_by_survivors": calls, "kills": kills,
        "damages": damages, "prunes": prunes,
        "warnings": sum(r["warnings"] for r in reports),
    }
    print("stress summary:", json.dumps(summary))
    assert all(r["errors"] == [] for r in reports), [r["errors"][:3] for r in reports]
    assert sum(r["wrong"] for r in reports) == 0
    assert calls > 0
    # Afterwards: every entry still in either store is exact, or is damage a reader would reject.
    for directory in (plain, limited):
        store = open_store(str(directory))
        for info in store.entries():
            frame = store.get(info.key)
            if frame is None:
                continue
            for secret in (None, b"stress"):
                try:
                    value, _ = _codec.decode(frame, info.key, secret=secret)
                except IntegrityError:
                    continue
                assert value == _expected(value["x"])
                break
        assert store.volume() >= 0
        store.close()
