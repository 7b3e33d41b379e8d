"""Why a call missed: compare it with the stored entries of the same function and say what differs.

Every entry's metadata records the digest of each *component* of the code fingerprint
(``function normalize``, ``global THRESHOLD``, ...), of each argument, the Python version, a pinned
``version`` and the ``depends_on`` digest. A miss is explained against the *nearest* entry of the
same function (the fewest differences; the newest on a tie), in words: "helper `normalize`
changed", "argument `df` changed". Only digests are stored, so an explanation says *what* changed,
never the old value.

Two entry points: :func:`explain_call` (``Memoized.explain(*args)``) for one call, and
:func:`explain_function` (``fncache explain MODULE:QUALNAME``) for a function's current code against
all its entries. Both read the store and never write it.

Not for: diffing source code; keep your version control for that.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from fncache._differences import Difference, Side, Texts, differences, with_texts
from fncache.code.targets import TargetError, load_target, recorded_name
from fncache.values.hasher import digest

__all__ = [
    "CodeVersion",
    "Difference",
    "Explanation",
    "FunctionExplanation",
    "explain_call",
    "explain_function",
    "format_explanation",
]

HIT, MISS, NEW = "hit", "miss", "new function"


def _secret_of(m: Any) -> Any:
    if m is not None:
        return m.options.secret
    from fncache._options import secret_from

    try:
        return secret_from(None)
    except Exception:  # a malformed $FNCACHE_SECRET: sources cannot be checked, so none is shown
        return b"\0"


def _current_side(m: Any, args: tuple[Any, ...] | None = None,
                  kwargs: dict[str, Any] | None = None) -> tuple[Side, str | None]:
    """(the side of memoized function ``m`` for this call, its key); no call: code only.

    Read from the call's :class:`~fncache._callkey.CallKey`, the object the key is made of.
    """
    if args is None:
        ck = m.code_key()
        side = Side.of_entry(ck.meta())
        side.args = None
        return side, None
    ck = m._built("explain", args, kwargs or {})  # a method's missing instance named for explain
    return Side.of_entry(ck.meta()), ck.key


def _root(function_id: str) -> str:
    return function_id.rpartition(":")[2]


def _entries_of(store: Any, names: str | set[str]) -> list[Any]:
    wanted = {names} if isinstance(names, str) else names
    return [e for e in store.entries() if e.function in wanted]


def _when(t: float | None) -> str:
    if not t:
        return "?"
    try:
        return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):  # a time no clock gives (planted metadata)
        return repr(t)


# ---------------------------------------------------------------------------------------------
# One call
# ---------------------------------------------------------------------------------------------

@dataclass
class Explanation:
    """Why one call is a hit or a miss.

    ``status`` is ``"hit"`` (an entry exists at ``key``), ``"miss"`` (entries of the function exist,
    none at ``key``; ``differences`` says what sets ``key`` apart from the ``nearest`` entry) or
    ``"new function"`` (no entry of this function in the store). ``by_name`` maps the fingerprint
    components keyed by name rather than content (state the function writes) to why, as
    ``Fingerprint.by_name`` does: changes to those values never cause a miss.
    """

    function: str
    key: str
    status: str
    nearest: str | None = None
    nearest_created: float | None = None
    entries: int = 0
    differences: list[Difference] = field(default_factory=list)
    by_name: dict[str, str] = field(default_factory=dict)

    @property
    def hit(self) -> bool:
        return self.status == HIT

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reasons"] = [str(x) for x in self.differences]
        return d

    def __str__(self) -> str:
        head = f"{self.function} [{self.key[:12]}]"
        if self.status == HIT:
            lines = [f"{head}: hit"]
        elif self.status == NEW:
            lines = [f"{head}: miss, new function (no stored entry)"]
        else:
            n = self.entries
            lines = [f"{head}: miss; nearest of {n} entr{'y' if n == 1 else 'ies'}"
                     f" is {(self.nearest or '?')[:12]} ({_when(self.nearest_created)}):"]
            for d in self.differences:
                lines.append(f"  - {d}")
                lines += [f"      {line}" for line in d.diff]
        for label, why in sorted(self.by_name.items()):
            kind, _, name = label.partition(" ")
            lines.append(f"  note: {kind} `{name}` is keyed by name, not content ({why})")
        return "\n".join(lines)


def explain_call(m: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Explanation:
    """Explain ``m(*args, **kwargs)`` for the memoized function ``m`` against its store.

    Reads the store only (listing its entries: slower on large remote stores). Raises what computing
    the key raises (:class:`fncache.UnhashableArgument`) and the store's errors.
    """
    side, key = _current_side(m, args, kwargs)
    assert key is not None
    by_name = m._fingerprint().by_name if m.version is None else {}
    store = m.store
    if store.contains(key):
        return Explanation(m.function_id, key, HIT, nearest=key, by_name=by_name)
    entries = _entries_of(store, _names(m, m.function_id))
    if not entries:
        return Explanation(m.function_id, key, NEW, by_name=by_name)
    nearest, diffs = _nearest(entries, side, _root(m.function_id))
    if m.version is None:
        secret = _secret_of(m)
        diffs = with_texts(diffs, Texts(store, secret, meta=nearest.meta),
                            Texts(store, secret, fp=m._fingerprint()))
    if not diffs:
        diffs = [Difference(
            "unrecorded", "code, arguments and Python version all match the entry: what differs "
            "is not recorded in entries (the `ignore` list, or an entry of an older fncache)",
            None, None)]
    return Explanation(m.function_id, key, MISS, nearest=nearest.key,
                       nearest_created=nearest.created, entries=len(entries), differences=diffs,
                       by_name=by_name)


def _nearest(entries: list[Any], side: Side, root: str) -> tuple[Any, list[Difference]]:
    """The entry nearest to ``side`` (the fewest differences; the newest on a tie), and those."""
    best: tuple[bool, int, float, Any, list[Difference]] | None = None
    for e in entries:
        diffs = differences(Side.of_entry(e.meta), side, root)
        # An entry of another Python differs in one reason only, which says nothing of the code: an
        # entry of this interpreter is nearer whatever its differences.
        other_python = bool(diffs) and diffs[0].kind == "python"
        score = (other_python, len(diffs), -float(e.created or 0))
        if best is None or score < best[:3]:
            best = (*score, e, diffs)
    assert best is not None
    return best[3], best[4]


# ---------------------------------------------------------------------------------------------
# A function's current code against all its entries
# ---------------------------------------------------------------------------------------------

@dataclass
class CodeVersion:
    """Entries made by one version of a function's code (same components, version pin, depends_on).

    ``differences`` compares this version with the current code (with the newest version when the
    current code is unknown); empty for the current code itself.
    """

    ident: str
    entries: int
    newest: float
    current: bool
    differences: list[Difference] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reasons"] = [str(x) for x in self.differences]
        return d


@dataclass
class FunctionExplanation:
    """A function's stored entries grouped by code version, each compared with the current code.

    ``status``: ``"current"`` (some entries were made by the current code and can hit), ``"stale"``
    (entries exist, none from the current code), ``"new function"`` (no entries) or ``"unknown"``
    (the function could not be imported: versions are compared with the newest one instead).
    """

    function: str
    status: str
    entries: int
    versions: list[CodeVersion] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"function": self.function, "status": self.status, "entries": self.entries,
                "error": self.error, "versions": [v.as_dict() for v in self.versions]}

    def __str__(self) -> str:
        n = self.entries
        head = f"{self.function}: {n} entr{'y' if n == 1 else 'ies'}"
        if self.status == NEW:
            return f"{head}; new function (nothing stored yet)"
        lines = [head + {"current": "; the current code has entries",
                         "stale": "; none made by the current code (every call will miss)",
                         "unknown": f"; current code unknown ({self.error}); compared with the"
                                    " newest version"
                         }.get(self.status, "")]
        for v in self.versions:
            what = f"  {v.entries} entr{'y' if v.entries == 1 else 'ies'} of code {v.ident[:8]}" \
                   f" (newest {_when(v.newest)})"
            if v.current:
                lines.append(f"{what}: current code")
            elif not v.differences:
                lines.append(f"{what}: same as the reference")
            else:
                lines.append(f"{what}:")
                for d in v.differences:
                    lines.append(f"      - {d}")
                    lines += [f"          {line}" for line in d.diff]
        return "\n".join(lines)


def _memoized(obj: Any) -> Any:
    """``obj`` if it is a memoized function (or a bound method of one), else None.

    Known by what explaining uses (``code_key``, ``function_id``, ``options``), not by class:
    this module is below ``fncache._memoize`` (whose ``Memoized.explain`` calls it).
    """
    obj = getattr(obj, "__func__", obj)  # a memoized classmethod, loaded bound
    is_memoized = callable(getattr(type(obj), "code_key", None)) and hasattr(obj, "function_id") \
        and hasattr(obj, "options")
    return obj if is_memoized else None


def _resolve(target: Any, import_code: bool) -> tuple[Any, str, str | None]:
    """(the memoized function or None, the function id, why the code could not be loaded)."""
    if not isinstance(target, str):
        m = _memoized(target)
        if m is None:
            raise TypeError(f"explain_function: expected a memoized function or a name, got "
                            f"{type(target).__name__} (memoize it first: fncache.memoize(f))")
        return m, m.function_id, None
    if not import_code:
        return None, recorded_name(target), None
    try:
        obj, function_id = load_target(target)
    except Exception as e:  # an import runs user code: any failure means "unknown"
        return None, recorded_name(target), str(e) if isinstance(e, TargetError) \
            else f"{type(e).__name__}: {e}"
    m = _memoized(obj)
    if m is None:
        return None, function_id, f"{target} is not memoized (no @fncache.memoize on it)"
    return m, m.function_id, None


def _names(m: Any, function_id: str) -> set[str]:
    """The names a function's entries may be recorded under: its own and the others of its file.
    ``pkg/job.py`` gives ``job:f`` when run as a script and ``pkg.job:f`` when imported as part of
    its package (the folders up to the first without ``__init__.py``)."""
    names = {function_id}
    code = getattr(m, "__wrapped__", None)
    namespace = getattr(code, "__globals__", None)
    path = namespace.get("__file__") if isinstance(namespace, dict) else None
    if not isinstance(path, str) or not path.endswith(".py"):
        return names
    qualname = _root(function_id)
    stem = os.path.basename(path)[:-3]
    parts = [] if stem == "__init__" else [stem]
    if parts:
        names.add(f"{stem}:{qualname}")
    folder = os.path.dirname(os.path.abspath(path))
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        names.add(f"{'.'.join(parts)}:{qualname}")
        folder = os.path.dirname(folder)
    return names


def _code_versions(entries: list[Any]) -> tuple[dict[str, list[Any]], dict[str, Side]]:
    """Entries grouped by what made their code part (components, version, inputs, Python)."""
    groups: dict[str, list[Any]] = {}
    sides: dict[str, Side] = {}
    for entry in entries:
        side = Side.of_entry(entry.meta)
        side.args = None
        ident = digest((sorted(side.components.items()), side.version, side.depends_on,
                        side.python)).hex()
        groups.setdefault(ident, []).append(entry)
        sides[ident] = side
    return groups, sides


def explain_function(store: Any, target: Any, *, import_code: bool = True) -> FunctionExplanation:
    """Compare a function's current code with every stored entry of it, grouped by code version.

    ``target`` is a memoized function, ``MODULE:QUALNAME`` or
    ``path/to/script.py:QUALNAME`` (imported, or run with ``__name__ != "__main__"``, to learn its
    current code: the user's code runs), or any ``function id`` as stored when ``import_code`` is
    false or the import fails. Entries recorded under either name of the function's file count
    (``job:f`` from ``python job.py``, ``pkg.job:f`` from ``import pkg.job``). ``store`` may be
    ``None`` for a memoized function's own store. Reads the store only.
    """
    m, function_id, error = _resolve(target, import_code)
    if store is None:
        if m is None:
            raise ValueError("explain_function: a store is needed to explain a function by name")
        store = m.store
    assert function_id is not None
    entries = _entries_of(store, _names(m, function_id))
    if not entries:
        return FunctionExplanation(function_id, NEW, 0, error=error)
    versions = _versions(store, m, entries, _root(function_id))
    if m is None:
        status = "unknown"
    else:
        status = "current" if any(v.current for v in versions) else "stale"
    return FunctionExplanation(function_id, status, len(entries), versions, error=error)


def _versions(store: Any, m: Any, entries: list[Any], root: str) -> list[CodeVersion]:
    """The code versions of ``entries``, newest first, each compared with ``m``'s current code (or,
    without ``m``, with the newest version)."""
    groups, sides = _code_versions(entries)
    newest = {i: max(float(e.created or 0) for e in es) for i, es in groups.items()}
    order = sorted(groups, key=lambda i: -newest[i])
    secret = _secret_of(m)
    latest = {i: max(es, key=lambda e: float(e.created or 0)) for i, es in groups.items()}
    if m is not None:
        reference, _ = _current_side(m)
        now = Texts(store, secret, fp=m._fingerprint() if m.version is None else None)
    else:
        reference = sides[order[0]]
        now = Texts(store, secret, meta=latest[order[0]].meta)
    versions = []
    for ident in order:
        diffs = with_texts(differences(sides[ident], reference, root),
                           Texts(store, secret, meta=latest[ident].meta), now)
        versions.append(CodeVersion(ident, len(groups[ident]), newest[ident],
                                    current=m is not None and not diffs, differences=diffs))
    return versions


def format_explanation(x: Explanation | FunctionExplanation | Iterable[Any]) -> str:
    """Readable text of one explanation (or several, one after the other)."""
    if isinstance(x, (Explanation, FunctionExplanation)):
        return str(x)
    return "\n".join(str(i) for i in x)
