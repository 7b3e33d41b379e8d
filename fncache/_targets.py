"""Naming a function on the command line: ``package.module:qualname`` or ``path/to/script.py:qualname``.

One loader for ``fncache explain`` and ``fncache doctor``. A script is run as a script would be, but not
as ``__main__`` (its ``if __name__ == "__main__":`` block stays out), with its directory on ``sys.path``
only while it runs; entries made by running the script are filed under ``__main__``. A module is
imported. Either way the user's code runs: any exception it raises propagates.
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys
from typing import Any

__all__ = ["importable", "load_target"]


def importable(obj: Any) -> bool:
    """Whether ``obj`` is what importing ``obj.__module__`` and walking ``obj.__qualname__`` gives:
    then plain pickle can carry it by name. Never for ``__main__`` (another process's main is
    another script)."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if module is None or module.__name__ == "__main__":
        return False
    found: Any = module
    for part in str(getattr(obj, "__qualname__", "<>")).split("."):
        found = getattr(found, part, None)
    return found is obj


def load_target(target: str) -> tuple[Any, str]:
    """(the object ``target`` names, the function id its entries are stored under).

    Raises ``ValueError`` for a target without ``:``, ``FileNotFoundError`` for a missing script.
    """
    where, sep, qualname = target.rpartition(":")
    if not sep or not where or not qualname:
        raise ValueError(f"expected MODULE:QUALNAME or SCRIPT.py:QUALNAME, got {target!r}")
    if where.endswith(".py") or os.sep in where or os.path.isfile(where):
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such script: {where}")
        directory = os.path.dirname(path)
        sys.path.insert(0, directory)
        try:
            namespace = runpy.run_path(path, run_name="__mp_main__")
        finally:
            try:
                sys.path.remove(directory)
            except ValueError:  # pragma: no cover - the script removed it itself
                pass
        parts = qualname.split(".")
        obj: Any = namespace[parts[0]]
        for part in parts[1:]:
            obj = getattr(obj, part)
        return obj, f"__main__:{qualname}"
    obj = importlib.import_module(where)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj, target
