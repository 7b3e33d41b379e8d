"""fncache in one minute: a miss, a hit in a new process, an edit that invalidates, a revert that hits.

Run: ``python examples/demo.py`` (it needs only fncache itself). It writes a small pipeline script
into a temporary folder and runs it five times as separate processes, on the default kind of store (a
disk store) in a folder of its own (``FNCACHE_DIR`` set for those processes): it never reads or clears
your own cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PIPELINE = textwrap.dedent(
    '''
    import time
    import fncache

    SCALE = 2.0

    def normalize(xs):
        total = sum(xs)
        return [x / total for x in xs]

    @fncache.memoize
    def features(xs):
        time.sleep(1.0)  # pretend this is expensive
        return [round(v * SCALE, 4) for v in normalize(xs)]

    if __name__ == "__main__":
        import sys
        t = time.perf_counter()
        out = features([1, 2, 3, 4])
        dt = time.perf_counter() - t
        print(f"{'hit ' if features.cache_info().hits else 'miss'} {dt:6.3f}s  {out}")
    '''
)


def run(script: Path, store: Path) -> str:
    env = dict(os.environ, FNCACHE_DIR=str(store))
    env.pop("FNCACHE_STORE", None)  # FNCACHE_STORE would take precedence over FNCACHE_DIR
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "pipeline.py"
        store = Path(tmp) / "cache"
        script.write_text(PIPELINE)

        print("1. first run computes:                 ", run(script, store))
        print("2. a new process reads it back:        ", run(script, store))

        script.write_text(PIPELINE.replace("# pretend", "# a comment edit: still cached;  pretend"))
        print("3. comment-only edit, still a hit:     ", run(script, store))

        script.write_text(PIPELINE.replace("return [x / total for x in xs]",
                                           "return [x / max(xs) for x in xs]"))
        print("4. edit the helper `normalize`: miss:  ", run(script, store))

        script.write_text(PIPELINE)
        print("5. revert the edit: the old entry hits:", run(script, store))
        subprocess.run([sys.executable, "-m", "fncache", "info", "--dir", str(store)], check=True)


if __name__ == "__main__":
    main()
