"""Small helpers for tests that run real Python subprocesses."""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def run_py(
    script: Path | str,
    *args: str,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    seed: str = "random",
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run a Python file in a fresh interpreter; raise with its stderr if it fails."""
    full_env = dict(os.environ)
    full_env["PYTHONHASHSEED"] = seed
    full_env.pop("FNCACHE_DISABLE", None)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=str(cwd) if cwd else None,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{script} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc


def write(path: Path, source: str) -> Path:
    """Write dedented source to path (creating parents) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip())
    return path


def last_json(proc: subprocess.CompletedProcess[str]) -> Any:
    """The JSON document on the last line of a subprocess's stdout."""
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load_harness() -> types.ModuleType:
    """The fixture-project harness (tests/fixtures_code/harness.py), loaded once per process."""
    name = "fncache_code_harness"
    if name not in sys.modules:
        path = Path(__file__).parent / "fixtures_code" / "harness.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def import_source(name: str, source: str, directory: Path, *, keep: bool = True) -> types.ModuleType:
    """Write ``source`` to ``directory/name.py`` and import it as a real module.

    With ``keep=False`` the module leaves ``sys.modules`` again once imported (the object stays usable).
    """
    (directory / f"{name}.py").write_text(source)
    sys.path.insert(0, str(directory))
    # No bytecode cache: a source rewritten within the same second at the same size would be
    # imported from the stale ``.pyc`` (checked by whole-second mtime and size only).
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return importlib.import_module(name)
    finally:
        sys.dont_write_bytecode = writes
        sys.path.remove(str(directory))
        if not keep:
            sys.modules.pop(name, None)


def clear_older_than(store: Any, seconds: float) -> int:
    """Delete what ``fncache clear --older-than`` selects; returns how many were removed."""
    from fncache.stores.prune import select

    return sum(1 for e in select(store, older_than=seconds) if store.delete(e.key))


def clear_larger_than(store: Any, nbytes: int) -> int:
    """Delete what ``fncache clear --larger-than`` selects; returns how many were removed."""
    from fncache.stores.prune import select

    return sum(1 for e in select(store, larger_than=nbytes) if store.delete(e.key))


def prune_to_size(store: Any, max_bytes: int) -> int:
    """Delete what ``fncache prune --max-size`` plans to remove; returns how many were removed."""
    from fncache.stores.prune import plan_prune

    return sum(1 for e in plan_prune(store, max_bytes) if store.delete(e.key))


def fncache_warnings(caplog: Any) -> list[str]:
    """The messages logged at WARNING on the ``fncache`` logger that ``caplog`` captured."""
    return [r.getMessage() for r in caplog.records
            if r.name == "fncache" and r.levelno == logging.WARNING]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m fncache ARGS`` in a subprocess; fail on a traceback."""
    proc = subprocess.run([sys.executable, "-m", "fncache", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


class Plant:
    """Unpickling this creates ``marker``: proof that a planted pickle was loaded (attack tests)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.touch, (Path(self.marker),))


def doctor_failed(proc: subprocess.CompletedProcess[str]) -> set[str]:
    """The checks a ``fncache doctor`` run failed (its ``--json`` or its text report), leaving out
    "free space": the file system the tests write to is the machine's, not the test's (a machine
    with under 5% free would fail every doctor test)."""
    try:
        checks = [(c["name"], c["ok"]) for c in json.loads(proc.stdout)["checks"]]
    except ValueError:
        checks = [(line[5:24].strip(), False) for line in proc.stdout.splitlines()
                  if line.startswith("BAD ")]
    return {name for name, ok in checks if not ok} - {"free space"}


def small_value(x: int) -> dict[str, int]:
    """A small result whose content names its argument (attack tests check the right value came back)."""
    return {"x": x, "double": 2 * x}


def fail_on_pickle_fallback(caplog):  # type: ignore[no-untyped-def]
    """Fail a test whose values silently left the canonical path for the library's own pickle."""
    import logging

    caplog.set_level(logging.DEBUG, logger="fncache")
    yield
    fallbacks = [r.getMessage() for r in caplog.get_records("call")
                 if "through its pickle" in r.getMessage()]
    assert not fallbacks


def require_native() -> None:
    """Skip a test of the native kernels when the package was built without them, unless
    ``FNCACHE_REQUIRE_NATIVE=1`` (CI), where a missing build fails instead: a skipped kernel
    test there would hide that CI tested only the numpy twins."""
    import pytest

    from fncache.values import arrow_streams as _arrow_streams

    if _arrow_streams.speedups is not None:
        return
    if os.environ.get("FNCACHE_REQUIRE_NATIVE") == "1":
        pytest.fail("fncache._speedups was not built, and FNCACHE_REQUIRE_NATIVE=1")
    pytest.skip("fncache._speedups was not built (no C compiler at install)")


TORCH_MISSING = ("torch is not installed: CI installs its CPU build where the package index has one "
                 "(Python 3.11); on 3.13 the index has only the CUDA build, gigabytes, so not there")


def import_torch() -> Any:
    """torch, or a skip that says why it is missing (printed in the test summary)."""
    import pytest

    return pytest.importorskip("torch", reason=TORCH_MISSING)


def write_kernelspec(root: Path, name: str, display_name: str, **env: str) -> Path:
    """A kernelspec under ``root/kernels/name`` that starts ipykernel with this interpreter, the
    test's store (``root/store``), counter file (``root/counts.txt``) and notebook name
    (``root/analysis.ipynb``, what Jupyter tells a kernel); ``env`` adds variables. Returns ``root``."""
    spec = root / "kernels" / name
    spec.mkdir(parents=True)
    full = {
        "FNCACHE_DIR": str(root / "store"),
        "COUNT_FILE": str(root / "counts.txt"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        "FNCACHE_DISABLE": "",
        # What Jupyter tells a kernel about the notebook it runs (ipykernel sets __session__).
        "JPY_SESSION_NAME": str(root / "analysis.ipynb"),
        **env,
    }
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name,
        "language": "python",
        "env": full,
    }))
    return root


def fake_distribution(site: Path, name: str, version: str, record: str,
                      top_level: str | None = None) -> Path:
    """Distribution ``name`` at ``version`` in ``site`` as pip lays one out (its ``.dist-info``
    with ``METADATA``, ``RECORD`` and, if given, ``top_level.txt``), replacing any other version
    of it; returns the metadata directory. The package's own files are the caller's."""
    for old in site.glob(f"{name}-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    meta = site / f"{name}-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (meta / "RECORD").write_text(record)
    if top_level is not None:
        (meta / "top_level.txt").write_text(top_level)
    return meta
