"""fncache in one minute: a miss, a hit in a new process, an edit that invalidates, a revert that hits.

Run: ``python examples/demo.py``. It writes a small pipeline script into a temporary folder and runs it
four times as separate processes, using the default store (``$FNCACHE_DIR`` or ``~/.cache/fncache``).
"""

from __future__ import annotations

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
        if sys.argv[1:] == ["clear"]:
            features.clear()
        else:
            t = time.perf_counter()
            out = features([1, 2, 3, 4])
            dt = time.perf_counter() - t
            print(f"{'hit ' if features.cache_info().hits else 'miss'} {dt:6.3f}s  {out}")
    '''
)


def run(script: Path, *args: str) -> str:
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "pipeline.py"
        script.write_text(PIPELINE)
        run(script, "clear")  # start from a clean slate for this demo function

        print("1. first run computes:                 ", run(script))
        print("2. a new process reads it back:        ", run(script))

        script.write_text(PIPELINE.replace("# pretend", "# a comment edit: still cached;  pretend"))
        print("3. comment-only edit, still a hit:     ", run(script))

        script.write_text(PIPELINE.replace("return [x / total for x in xs]",
                                           "return [x / max(xs) for x in xs]"))
        print("4. edit the helper `normalize`: miss:  ", run(script))

        script.write_text(PIPELINE)
        print("5. revert the edit: the old entry hits:", run(script))
    subprocess.run([sys.executable, "-m", "fncache", "info"], check=True)


if __name__ == "__main__":
    main()
