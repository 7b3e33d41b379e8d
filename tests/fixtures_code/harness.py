"""Write versions of the fixture project to real directories and run them in fresh interpreters.

Shared by the subprocess tests of fingerprints and explanations: :func:`project_runs` runs the
project once per test session (version 1, version 2, version 1 again at the same path, and version 1
copied to a second directory), each run in a fresh process with its own ``PYTHONHASHSEED``, all
sharing one store.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "project"
REPO = HERE.parents[1]
_TAG = re.compile(r"\s*#@(v\d+)$")


def render(text: str, version: str) -> str:
    """The text of one version of a template (see README.md for the tags)."""
    out = []
    for line in text.splitlines():
        m = _TAG.search(line)
        if m is not None:
            if m.group(1) != version:
                continue
            line = line[: m.start()]
        out.append(line)
    return "\n".join(out) + "\n"


def write_project(dest: Path, version: str, template: Path = PROJECT) -> Path:
    """Write ``version`` of the template tree to ``dest``, ``.in`` suffixes dropped; gives dest."""
    for src in sorted(template.rglob("*.in")):
        target = dest / src.relative_to(template).with_suffix("")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(src.read_text(), version))
    return dest


def child_env(store: Path | None = None, seed: int | str = 0, **extra: str) -> dict[str, str]:
    """The environment of a child interpreter: this checkout importable, no bytecode caches.

    No ``.pyc`` files: a file rewritten within the same second with the same size would otherwise be
    run from its stale cache, and a "same key" verdict would be luck.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONHASHSEED"] = str(seed)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for name in ("FNCACHE_STORE", "FNCACHE_DISABLE", "FNCACHE_VERBOSE", "FNCACHE_SECRET"):
        env.pop(name, None)
    if store is not None:
        env["FNCACHE_DIR"] = str(store)
    env.update(extra)
    return env


def run_json(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> Any:
    """Run a child interpreter and parse the JSON it prints; fail with its stderr."""
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} in {cwd} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout)


def tempdir(prefix: str) -> Path:
    """A temporary directory removed when the test process ends."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, d, True)
    return d


@functools.cache
def project_runs() -> dict[str, Any]:
    """Run the project: v1, v2, v1 again at one path, then v1 in a second checkout directory.

    Returns ``{run: {"keys", "components", "explain", "results"}}`` for the runs ``"v1"``, ``"v2"``,
    ``"v1_again"`` and ``"v1_elsewhere"`` (plus ``"paths"``). Computed once per test session.
    """
    root = tempdir("fncache-code-")
    store = root / "cache"
    a, b = root / "checkout-a" / "project", root / "elsewhere" / "b" / "project"
    runs: dict[str, Any] = {"paths": [str(a), str(b)]}
    for name, version, where, seed in [("v1", "v1", a, 1), ("v2", "v2", a, 2),
                                       ("v1_again", "v1", a, 3), ("v1_elsewhere", "v1", b, 4)]:
        write_project(where, version)
        runs[name] = run_json(["main.py"], where, child_env(store, seed))
    return runs
