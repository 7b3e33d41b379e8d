"""Shared pytest configuration: the real-server fixtures of ``tests/servers.py``."""

import importlib.util


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
