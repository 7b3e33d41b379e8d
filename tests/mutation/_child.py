"""The oracle's half inside a corpus program: print one call's key and output as JSON.

Copied next to each program as ``_oracle.py`` (a program ends with ``report(entry, *args)``). Not
part of what is mutated. Run as ``python _oracle.py --trace OUT main.py`` it runs the program and
writes the qualified names of the program's own functions that ran, per file: the functions the
mutator may mutate.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import runpy
import sys
from typing import Any


def plain(value: Any) -> Any:
    """A JSON form of ``value`` that shows every difference ``==`` on results would show."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)  # exact, and nan/inf survive
    if isinstance(value, enum.Enum):
        return {"enum": f"{type(value).__qualname__}.{value.name}", "value": plain(value.value)}
    if isinstance(value, dict):
        return {"dict": [[plain(k), plain(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [plain(v) for v in value]]
    if isinstance(value, (set, frozenset)):
        return ["set", sorted((plain(v) for v in value), key=json.dumps)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"dataclass": type(value).__qualname__,
                "fields": plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})}
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):  # pandas frames and series
        return {"frame": type(value).__name__, "data": plain(to_dict())}
    return {"repr": repr(value)}


def report(entry: Any, *args: Any, **kwargs: Any) -> None:
    """Print ``{"key", "output", "hits"}`` for ``entry(*args, **kwargs)``, the key made before the call.

    The store is whatever the environment names (``memory://`` for the oracle, so the call computes).
    An exception from the call is part of the output; one from the key is reported as ``key_error``.
    """
    out: dict[str, Any] = {}
    try:
        out["key"] = entry.key(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the oracle reports every failure of the key
        out["key_error"] = f"{type(e).__name__}: {e}"
    try:
        out["output"] = {"value": plain(entry(*args, **kwargs))}
    except Exception as e:  # noqa: BLE001 - an exception is an output like any other
        out["output"] = {"raised": f"{type(e).__name__}: {e}"}
    out["hits"] = entry.cache_info().hits
    sys.stdout.write("\n" + json.dumps(out) + "\n")


def _trace(out_path: str, script: str) -> None:
    root = os.path.dirname(os.path.abspath(script)) + os.sep
    seen: dict[str, set[str]] = {}

    def tracer(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(root):
            seen.setdefault(code.co_filename[len(root):], set()).add(code.co_qualname)

    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    sys.settrace(tracer)
    try:
        runpy.run_path(os.path.abspath(script), run_name="__main__")
    finally:
        sys.settrace(None)
        with open(out_path, "w") as f:
            json.dump({k: sorted(v) for k, v in seen.items()}, f)


if __name__ == "__main__" and sys.argv[1:2] == ["--trace"]:
    _trace(sys.argv[2], sys.argv[3])
