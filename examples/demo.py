"""fncache in one minute: a miss, a hit in a new process, an edit that invalidates, a revert that hits.

Run: ``python examples/demo.py`` (it needs only fncache itself). It writes a small pipeline script
into a temporary folder and runs it five times as separate processes, on the default kind of store (a
disk store) in a folder of its own (``FNCACHE_DIR`` set for those processes): it never reads or clears
your own cache. The temporary folder is removed at the end; the demo then says what to try next.
"""

from __future__ import annotations

import json
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
        info = json.loads(subprocess.run(
            [sys.executable, "-m", "fncache", "info", "--dir", str(store), "--json"],
            capture_output=True, text=True, check=True).stdout)
    # The store was in the temporary folder, which is gone now: say what it held, not where.
    print(f"\nThe demo's store held {info['entries']} entries of {info['functions']} function "
          f"({info['total_bytes']} bytes) and was removed with its temporary folder.")
    print(NEXT)


NEXT = """
Try next:
  python examples/pipeline.py          # cached steps that call each other (needs numpy)
  python examples/notebook_style.py    # the same, as notebook cells (# %%)
  fncache ls                           # what your own cache holds (fncache --help for more)
  README.md, then the docs: python -m pip install -e ".[docs]" && mkdocs serve"""


if __name__ == "__main__":
    main()
