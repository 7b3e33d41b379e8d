"""Shared pytest configuration: fixtures used by several test modules, real-server fixtures
(``tests/servers.py``), opt-in stress runs.

``python -m pytest -m "not slow"`` skips the subprocess-heavy tests (``@pytest.mark.slow``) for a quick
loop; the default ``python -m pytest`` runs everything.
"""

import importlib.util
from typing import Any

import pytest


def _servers_module() -> str:
    # ``tests.servers`` when the repository root is on sys.path (``python -m pytest``, or
    # ``pythonpath = ["."]`` in the pytest configuration); plain ``servers`` when pytest only put
    # this directory there (``pytest`` run while tests/ is not a package).
    try:
        if importlib.util.find_spec("tests.servers") is not None:
            return "tests.servers"
    except ImportError:
        pass
    return "servers"


pytest_plugins = [_servers_module()]


def pytest_configure(config):  # type: ignore[no-untyped-def]
    """Give the run a user cache directory of its own (``$XDG_CACHE_HOME``, inherited by every
    subprocess a test starts): what fncache keeps there (the default store, the remembered
    distribution listings) is then the run's, never read from or left in the user's own."""
    import os
    import tempfile

    config._fncache_cache_home = tempfile.mkdtemp(prefix="fncache-tests-cache-")
    os.environ["XDG_CACHE_HOME"] = config._fncache_cache_home


def pytest_unconfigure(config):  # type: ignore[no-untyped-def]
    import shutil

    home = getattr(config, "_fncache_cache_home", None)
    if home:
        shutil.rmtree(home, ignore_errors=True)


def pytest_addoption(parser):  # type: ignore[no-untyped-def]
    parser.addoption(
        "--run-stress", action="store_true", default=False,
        help="also run the long @pytest.mark.stress tests (or set FNCACHE_STRESS=1)",
    )


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    import os

    import pytest

    if config.getoption("--run-stress") or os.environ.get("FNCACHE_STRESS", "") not in ("", "0"):
        return
    skip = pytest.mark.skip(reason="stress test: run with --run-stress or FNCACHE_STRESS=1")
    for item in items:
        if "stress" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def store(tmp_path: Any) -> str:
    """A fresh disk store directory (its URL) for the test."""
    return str(tmp_path / "cache")


@pytest.fixture(scope="session")
def runs() -> Any:
    """The fixture project run as v1, v2, v1 again and v1 elsewhere (fixtures_code/harness.py)."""
    from .helpers import load_harness

    return load_harness().project_runs()
