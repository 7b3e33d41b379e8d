"""Naming functions: the name entries are recorded under, and a function named on the command line.

Entries are recorded under ``module:qualname``. A script's functions live in ``__main__`` (or
``__mp_main__`` in a worker), which every script shares, so they are recorded under the script's file
name without ``.py`` instead: ``python job.py`` records ``job:step``, as ``import job`` does (one file,
one name; ``python -m pkg.job`` records ``pkg.job:step``). A notebook's functions are recorded under
the notebook's file name where the frontend tells it (Jupyter's ``__session__``, VS Code's
``__vsc_ipynb_file__``): ``analysis.ipynb:step``. Other code of ``__main__`` (``python -c``, a console)
stays ``__main__``. Names group entries for ``ls``, ``clear`` and ``explain``; keys never depend on
them, except a ``version=`` pin, which is keyed by name and version.

On the command line, a function is ``package.module:qualname`` or ``path/to/script.py:qualname``, loaded
by :func:`load_target` for ``fncache explain`` and ``fncache doctor``. A script is run as a script would
be, but not as ``__main__`` (its ``if __name__ == "__main__":`` block stays out), with its directory on
``sys.path`` only while it runs. A module is imported. Either way the user's code runs: an exception it
raises is reported as a :class:`TargetError`.
"""

from __future__ import annotations

import difflib
import importlib
import os
import runpy
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from fncache._errors import FncacheError

__all__ = ["TargetError", "importable", "load_target", "recorded_module", "recorded_name"]

_MAINS = ("__main__", "__mp_main__")


class TargetError(FncacheError, LookupError):
    """A function named on the command line cannot be found or loaded; the message says what is missing."""


def recorded_module(module: str, namespace: Mapping[str, Any] | None) -> str:
    """The module part of the name entries of a function of ``module`` are recorded under.

    ``namespace`` is the function's globals. Only ``__main__``/``__mp_main__`` are renamed: to the
    notebook's file name, the module ``python -m`` ran, or the script's file name without ``.py``.
    """
    if module not in _MAINS or not namespace:
        return module
    notebook = _notebook_of(namespace)
    if notebook is not None:
        return notebook
    spec = namespace.get("__spec__")
    name = getattr(spec, "name", None)
    if isinstance(name, str) and name and name not in _MAINS:
        return name  # python -m pkg.job
    path = namespace.get("__file__")
    if isinstance(path, str) and path.endswith(".py"):
        return os.path.basename(path)[:-3]
    return module


def _notebook_of(namespace: Mapping[str, Any]) -> str | None:
    """The file name of the notebook whose kernel runs ``namespace`` (VS Code's or Jupyter's), or None."""
    for var in ("__vsc_ipynb_file__", "__session__"):
        notebook = namespace.get(var)
        if isinstance(notebook, str) and notebook.endswith(".ipynb"):
            return os.path.basename(notebook)
    return None


def _is_script(where: str) -> bool:
    return where.endswith(".py") or os.sep in where or os.path.isfile(where)


def recorded_name(target: str) -> str:
    """The name entries of ``target`` (as typed on the command line) are recorded under, without
    loading it: ``path/to/job.py:step`` -> ``job:step``, ``work/analysis.ipynb:step`` ->
    ``analysis.ipynb:step``; ``pkg.mod:f`` and ``f`` are unchanged."""
    where, sep, qualname = target.rpartition(":")
    if not sep or not where:
        return target
    if where.endswith(".py"):
        return f"{os.path.basename(where)[:-3]}:{qualname}"
    if where.endswith(".ipynb"):
        return f"{os.path.basename(where)}:{qualname}"
    return target


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


def _walk(names: Mapping[str, Any], qualname: str, where: str) -> Any:
    """The object at ``qualname`` in the namespace ``names``; a TargetError names the missing part
    and the closest name there is."""
    parts = qualname.split(".")
    if parts[0] not in names:
        raise _missing(where, parts[0], names)
    found: Any = names[parts[0]]
    for i, part in enumerate(parts[1:], 1):
        if not hasattr(found, part):
            raise _missing(f"{where}:{'.'.join(parts[:i])}", part, dir(found))
        found = getattr(found, part)
    return found


def _missing(owner: str, part: str, there: Iterable[Any]) -> TargetError:
    """The error for ``owner`` having no ``part``, with the closest of the names ``there``."""
    names = [n for n in there if isinstance(n, str) and not n.startswith("__")]
    close = difflib.get_close_matches(part, names, n=1)
    return TargetError(f"{owner} has no {part!r}" + (f"; did you mean {close[0]!r}?" if close else ""))


def load_target(target: str) -> tuple[Any, str]:
    """(the object ``target`` names, the name its entries are recorded under).

    Raises :class:`TargetError` naming what is missing: the ``:QUALNAME`` part, the script, the
    module, the function (with the closest name defined there), or what loading the code raised.
    """
    where, sep, qualname = target.rpartition(":")
    if not sep or not where or not qualname:
        raise TargetError(f"expected MODULE:FUNCTION or SCRIPT.py:FUNCTION, got {target!r}"
                          + ("" if sep else " (the :FUNCTION part is missing)"))
    if where.endswith(".ipynb"):
        raise TargetError(f"{where}: notebooks cannot be loaded from the command line; use "
                          "f.explain(...) in the notebook, or `fncache ls` to see its entries")
    if _is_script(where):
        namespace = _run_script(where)
        return _walk(namespace, qualname, where), f"{recorded_module('__mp_main__', namespace)}:{qualname}"
    return _walk(vars(_import(where)), qualname, where), target


def _run_script(where: str) -> dict[str, Any]:
    """The namespace of script ``where``, run as ``__mp_main__`` with its folder on ``sys.path``."""
    path = os.path.abspath(where)
    if not os.path.isfile(path):
        raise TargetError(f"no such script: {where}")
    directory = os.path.dirname(path)
    sys.path.insert(0, directory)
    try:
        return runpy.run_path(path, run_name="__mp_main__")
    except (Exception, SystemExit) as e:  # the user's code: whatever it raises
        raise TargetError(f"running {where} raised {type(e).__name__}: {e}") from e
    finally:
        try:
            sys.path.remove(directory)
        except ValueError:  # pragma: no cover - the script removed it itself
            pass


def _import(where: str) -> Any:
    """Module ``where``, imported; a TargetError says whether it is missing or raised."""
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as e:
        if e.name and (where == e.name or where.startswith(e.name + ".")):
            raise TargetError(f"no module named {e.name!r}") from e
        raise TargetError(f"importing {where} raised ModuleNotFoundError: {e}") from e
    except (Exception, SystemExit) as e:  # the user's code
        raise TargetError(f"importing {where} raised {type(e).__name__}: {e}") from e
