"""Which code is the user's: fingerprinted by value, while library code enters by reference.

"User code" is code outside the standard library and installed distributions (site-packages): scripts,
``__main__``, notebooks, ``exec``-made functions, local modules, editable installs. :func:`track` and
:func:`untrack` widen or narrow the set; each call bumps a generation number, and every fingerprint made
under an older generation is stale wherever it is held.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
import site
import sys
import sysconfig
import types
from collections.abc import Iterable
from typing import Any

from fncache._errors import ArgumentTypeError

__all__ = ["distribution_versions", "is_user_code", "is_user_module", "track", "untrack"]

log = logging.getLogger("fncache")


def _library_roots() -> tuple[str, ...]:
    roots: set[str] = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(name)
        if p:
            roots.add(os.path.realpath(p))
    try:
        roots.update(os.path.realpath(p) for p in site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site.py
        pass
    user_site = getattr(site, "USER_SITE", None)
    if user_site:
        roots.add(os.path.realpath(user_site))
    for p in sys.path:
        if p and os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"):
            roots.add(os.path.realpath(p))
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))


_LIB_ROOTS = _library_roots()
_overrides: dict[str, bool] = {}
# Bumped by track()/untrack(): fingerprints made before then no longer apply, wherever they are kept.
_generation = [0]
_user_module_cache: dict[str, bool] = {}


def _override(what: str, modules: tuple[str, ...], user: bool) -> None:
    for m in modules:
        if not isinstance(m, str) or not m:
            raise ArgumentTypeError(f"{what}: expected module names, got {m!r}")
    for m in modules:
        _overrides[m] = user
    _user_module_cache.clear()
    # Every fingerprint made before now is stale, wherever it is held (caches, memoized functions).
    _generation[0] += 1


def track(*modules: str) -> None:
    """Treat these modules (and their submodules) as user code: fingerprinted by value.

    For your own package installed into site-packages, e.g. ``fncache.track("mypkg")``.
    """
    _override("track", modules, True)


def untrack(*modules: str) -> None:
    """Treat these modules (and their submodules) as library code: taken by reference only."""
    _override("untrack", modules, False)


def is_user_module(name: str | None) -> bool:
    """Whether code of module ``name`` is fingerprinted by value (see the module docstring)."""
    if not name:
        return True
    found = _user_module_cache.get(name)
    if found is None:
        found = _user_module_cache[name] = _is_user_module(name)
    return found


def _decided(name: str) -> bool | None:
    """What ``track``/``untrack`` decided for module ``name`` or its nearest package (True: user
    code), or None."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        decided = _overrides.get(".".join(parts[:i]))
        if decided is not None:
            return decided
    return None


def _is_user_module(name: str) -> bool:
    parts = name.split(".")
    decided = _decided(name)
    if decided is not None:
        return decided
    if name == "__main__" or name == "__mp_main__":
        return True  # whatever runs as the main script is the user's, even from site-packages
    if parts[0] == "fncache":
        return False
    if name in sys.builtin_module_names:
        return False
    mod = sys.modules.get(name)
    if mod is None:
        # Not importable by that name (exec, a module built by hand): only by value is safe.
        return True
    spec = getattr(mod, "__spec__", None)
    if spec is not None and spec.origin in ("built-in", "frozen"):
        return False
    path = getattr(mod, "__file__", None)
    if not path:
        return True  # notebooks, exec'd namespaces
    real = os.path.realpath(path)
    return not real.startswith(_LIB_ROOTS)


# ---------------------------------------------------------------------------------------------
# Code objects
# ---------------------------------------------------------------------------------------------

def library_location(name: str) -> bool | None:
    """Whether a module not imported yet would be library code (None: not found), without importing.

    Only the top-level package is looked up, so no package's ``__init__`` runs to find out.
    """
    parts = name.split(".")
    decided = _decided(name)
    if decided is not None:
        return not decided
    if parts[0] == "fncache" or parts[0] in sys.builtin_module_names:
        return True
    top = sys.modules.get(parts[0])
    if top is not None:
        return not is_user_module(parts[0])
    return _found_in_library(parts[0])


def _found_in_library(top: str) -> bool | None:
    """Whether the top-level package ``top``, found but not imported, is library code (None: not
    found)."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin in ("built-in", "frozen"):
        return True
    where = spec.origin or next(iter(spec.submodule_search_locations or ()), None)
    if not where:
        return False  # a namespace package without a location: treat as the user's
    return os.path.realpath(where).startswith(_LIB_ROOTS)


def submodule(package: str, name: str) -> None:
    """Import ``package.name`` if it is a user submodule that exists (a name only read otherwise)."""
    full = f"{package}.{name}"
    if full in sys.modules or not name.isidentifier():
        return
    try:
        spec = importlib.util.find_spec(full)
    except (ImportError, ValueError):
        return
    if spec is not None and spec.origin and not _library_file(spec.origin):
        imported(full)


def imported(name: str) -> types.ModuleType | None:
    """The module an import in a function body names, imported now if it is user code.

    The function imports it when it runs anyway (the key is made just before); importing it here is
    what lets its code count in the key of the very first call. Library modules are never imported
    here: they count by name.
    """
    mod = sys.modules.get(name)
    if mod is not None or library_location(name) is not False:
        return mod
    try:
        return importlib.import_module(name)
    except Exception as e:  # the function's own import would fail the same way, or is guarded
        log.debug("fingerprint: could not import %s: %s", name, e)
        return sys.modules.get(name)


def is_user_code(obj: Any) -> bool:
    """Whether a function or class is fingerprinted by value.

    A function whose globals are not its module's dict was rebuilt by value (cloudpickle, a worker
    process): it is the user's whatever its ``__module__`` says, or a worker whose ``__main__`` is a
    library's would key it by name alone.
    """
    module = getattr(obj, "__module__", None)
    if is_user_module(module):
        return True
    if isinstance(obj, types.FunctionType):
        mod = sys.modules.get(module or "")
        if mod is not None and obj.__globals__ is getattr(mod, "__dict__", None):
            return False
        # ``collections.abc.MutableMapping.clear`` lives in ``_collections_abc``: code of a library
        # file under another module's name is still a library's.
        return not _library_file(obj.__code__.co_filename)
    return False


_library_files: dict[str, bool] = {}


def _library_file(filename: str) -> bool:
    found = _library_files.get(filename)
    if found is None:
        found = _library_files[filename] = filename.startswith("<frozen ") or (
            os.path.isabs(filename) and os.path.realpath(filename).startswith(_LIB_ROOTS))
    return found


def wrapped_user_code(value: Any) -> Any:
    """The user function or class a library's wrapper object stands for (``__wrapped__``), or None.

    ``functools.cache``/``lru_cache`` wrappers, numba dispatchers and the like pickle by name (or by a
    per-process id): wherever one is reached, in a global or inside a value, the code it wraps is
    what counts. Instances of user classes are left alone: they are hashed by content, which holds
    the function itself.
    """
    if isinstance(value, (types.FunctionType, type, types.MethodType)) or not callable(value):
        return None  # a bound method's attributes are its function's: its instance counts too
    try:
        inner = vars(value).get("__wrapped__")
    except TypeError:  # no __dict__
        return None
    if isinstance(inner, (types.FunctionType, type)) and not is_user_code(type(value)) \
            and is_user_code(inner):
        return inner
    return None


def compile_options(value: Any) -> tuple[Any, ...] | None:
    """What a numba dispatcher was compiled with, besides its Python function; None for others.

    The options (``fastmath``, ``parallel``, ``boundscheck``...), the ``locals=`` types and the
    signatures given up front (which fix the types the function is called with) change results; the
    signatures compiled lazily so far and the dispatcher's per-process id do not.
    """
    if not (getattr(type(value), "__module__", None) or "").startswith("numba.") \
            or not hasattr(value, "py_func"):
        return None
    options = getattr(value, "targetoptions", None) or {}
    given = () if getattr(value, "_can_compile", True) else tuple(
        str(s) for s in getattr(value, "signatures", ()))
    local_types = getattr(value, "locals", None) or {}
    return (tuple(sorted((str(k), repr(v)) for k, v in options.items())),
            tuple(sorted((str(k), repr(v)) for k, v in local_types.items())), given)


def unwrap_memoized(obj: Any) -> Any:
    # A memoized function read as a helper is fingerprinted as the function it wraps.
    inner = getattr(type(obj), "__fncache_wraps__", None)
    if inner is not None:
        return inner(obj)
    return obj



# ---------------------------------------------------------------------------------------------
# Distributions: which installed distribution owns a library module, and its version
# ---------------------------------------------------------------------------------------------
#
# ``importlib.metadata.packages_distributions()`` answers this for every module at once by reading
# the metadata of every installed distribution (a second or more in a large environment, paid by the
# first library function keyed in each process). Only the directory a module is imported from can
# hold the distribution that installed it, so only that directory's metadata is read (its
# ``top_level.txt`` files, or ``RECORD`` where there is none: the same rule as the full scan), once
# per process and directory. A module found outside any directory holding distribution metadata (an
# editable install, a library untracked from a source tree) falls back to the full scan. Versions are
# read from the owner's metadata on every computation (an upgrade in a running process is seen: it
# replaces the metadata directory, whose name carries the version), never remembered across processes.

_STDLIB_DIRS = frozenset(
    os.path.realpath(os.path.join(p, sub))
    for name in ("stdlib", "platstdlib") if (p := sysconfig.get_paths().get(name))
    for sub in ("", "lib-dynload"))
_owners: dict[str, tuple[str, ...]] = {}  # top-level module -> metadata directories owning it
_listed: dict[str, list[str]] = {}  # directory -> the metadata directories in it
_provided: dict[str, frozenset[str]] = {}  # metadata directory -> the top-level modules it provides


def distribution_versions(top_level: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``(name, version)`` of the installed distributions that own these top-level modules, sorted.

    A module of the standard library, a built-in one or one no distribution owns gives nothing.
    """
    out: set[tuple[str, str]] = set()
    for top in top_level:
        for _ in range(2):
            found = _versions_of(_owners_of(top))
            if found is not None:
                out.update(found)
                break
            # A metadata directory went away (an upgrade or an uninstall): look again, once.
            _owners.pop(top, None)
            _listed.clear()
            _provided.clear()
    return tuple(sorted(out))


def _versions_of(owners: tuple[str, ...]) -> list[tuple[str, str]] | None:
    """The versions of these owners, read now; None if a metadata directory is gone."""
    import importlib.metadata as md
    import pathlib

    out = []
    for path in owners:
        if path.startswith("\0"):  # found by the full scan: by name
            try:
                out.append((path[1:], md.version(path[1:])))
            except md.PackageNotFoundError:  # pragma: no cover - removed meanwhile
                pass
            continue
        if not os.path.isdir(path):
            return None
        dist = md.PathDistribution(pathlib.Path(path))
        name, version = dist.metadata["Name"], dist.version
        if not name or not version:
            return None
        out.append((name, version))
    return out


def _owners_of(top: str) -> tuple[str, ...]:
    found = _owners.get(top)
    if found is None:
        found = _owners[top] = _find_owners(top)
    return found


def _find_owners(top: str) -> tuple[str, ...]:
    """The metadata directories of the distributions owning ``top`` (``"\\0name"``: found by the
    full scan, by name)."""
    dirs = _module_dirs(top)
    if not dirs:
        return ()
    found: list[str] = []
    indexed = False
    for d in dirs:
        metas = _metadata_dirs(d)
        indexed = indexed or bool(metas)
        found.extend(m for m in metas if _owns(m, top))
    if found or indexed:
        return tuple(dict.fromkeys(found))
    return tuple("\0" + name for name in dict.fromkeys(_all_distributions().get(top, ())))


def _module_dirs(top: str) -> list[str]:
    """The directories ``top`` is imported from (several for a namespace package), without
    importing it; none for a built-in, frozen or standard-library module."""
    spec = _spec_of(top)
    if spec is None or spec.origin in ("built-in", "frozen"):
        return []
    if spec.submodule_search_locations:
        places = list(spec.submodule_search_locations)
    elif spec.origin:
        places = [spec.origin]
    else:
        return []
    dirs = [os.path.dirname(os.path.realpath(p)) for p in places]
    return [d for d in dict.fromkeys(dirs) if d not in _STDLIB_DIRS]


def _spec_of(top: str) -> Any:
    """The import spec of ``top``: the imported module's, else the one the finders give (without
    importing it); None if there is none."""
    mod = sys.modules.get(top)
    spec = getattr(mod, "__spec__", None) if mod is not None else None
    if spec is not None:
        return spec
    try:
        return importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None


def _metadata_dirs(directory: str) -> list[str]:
    """The distribution metadata directories in ``directory`` (listed once per process)."""
    found = _listed.get(directory)
    if found is None:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            names = []
        found = _listed[directory] = [os.path.join(directory, n) for n in names
                                      if n.endswith((".dist-info", ".egg-info"))]
    return found


def _owns(meta: str, top: str) -> bool:
    """Whether one distribution provides top-level module ``top`` (see :func:`_provides`)."""
    found = _provided.get(meta)
    if found is None:
        found = _provided[meta] = _provides(meta)
    return top in found


def _provides(meta: str) -> frozenset[str]:
    """The top-level modules one distribution provides: its ``top_level.txt``, else the first part
    of each path its ``RECORD`` lists, as ``importlib.metadata`` infers them (string operations on
    the lines; the CSV parser only for the rare quoted ones: a large library lists thousands)."""
    declared = _declared_tops(meta)
    if declared:
        return declared
    firsts = _record_firsts(meta)
    return frozenset() if firsts is None else _top_names(firsts)


def _declared_tops(meta: str) -> frozenset[str]:
    """The names in the distribution's ``top_level.txt``; none if it has no readable one."""
    try:
        with open(os.path.join(meta, "top_level.txt"), encoding="utf-8") as f:
            return frozenset(f.read().split())
    except OSError:
        return frozenset()


def _record_firsts(meta: str) -> set[str] | None:
    """The first part of each path the distribution's ``RECORD`` lists (a file at the top keeps
    its ``,sha256=...`` tail); None if it has no readable ``RECORD``."""
    try:
        with open(os.path.join(meta, "RECORD"), encoding="utf-8", newline="") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    firsts = {line.partition("/")[0] for line in lines if line and line[0] != '"'}
    _add_quoted_firsts(firsts, [line for line in lines if line.startswith('"')])
    return firsts


def _add_quoted_firsts(firsts: set[str], quoted: list[str]) -> None:
    """Add to ``firsts`` the first parts of the quoted ``RECORD`` lines, read as CSV (those of a
    malformed one and after are left out)."""
    import csv

    try:
        firsts.update(row[0].replace("\\", "/").partition("/")[0] + ("" if "/" in row[0] else ",")
                      for row in csv.reader(quoted) if row)
    except csv.Error:
        pass


def _top_names(firsts: set[str]) -> frozenset[str]:
    """The module names among the first parts of ``RECORD`` paths (``name.py,...`` is ``name``;
    ``x.dist-info`` and other dotted names are none)."""
    import inspect

    out = set()
    for first in firsts:
        if "," in first:  # a file at the top: "name.py,sha256=...,size"
            path = first.partition(",")[0]
            first = inspect.getmodulename(path) or path
        if "." not in first:
            out.add(first)
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def _all_distributions() -> Any:
    import importlib.metadata as md

    return md.packages_distributions()
