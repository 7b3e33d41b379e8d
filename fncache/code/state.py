"""State a function writes, keyed by name: the tokens that stand for it in a fingerprint, and the
first value that goes with them.

A global the function's code rebinds (``global n; n += 1``) and a value memoize saw the function
modify while it ran (a log list, a sorted list; see :func:`fncache.code.fingerprint.mark_state`) are
keyed by the name they are read under, or no call could hit again. The token is followed by the
digest the value had when this process first keyed it so: state is not an input while the process
runs, but its first value is the program's, and ``WEIGHTS = [3, 1, 2]`` edited to ``[3, 1, 5]`` in
the source is another program. ``memoize(ignore_globals=...)`` is the user's word and keys the name
alone.
"""

from __future__ import annotations

from typing import Any

from fncache.values import hasher as _hasher

__all__ = ["BY_NAME", "IGNORED", "REBOUND", "STATE", "first_digest", "first_rebound"]

STATE = ("state",)  # modified by the function while it ran (mark_state)
REBOUND = ("state", "rebound")  # rebound by the function's own code (STORE_GLOBAL)
IGNORED = ("state", "ignored")  # named in memoize(ignore_globals=[...])
#: Why each is keyed by name, as ``Fingerprint.by_name`` says it.
BY_NAME = {STATE: "modified by the function", REBOUND: "rebound by the function",
           IGNORED: "left out by ignore_globals="}

# (id(module dict), name) -> (the dict, the first value's token). Bounded (functions unpickled by
# value each bring a namespace): past the bound it starts again, and a value read afresh can only
# give another key, never another's.
_first_rebound: dict[tuple[int, str], tuple[Any, Any]] = {}
_FIRST_REBOUND_MAX = 4096


def first_digest(value: Any) -> Any:
    """The token of the value a global or object had when it was first keyed by name (by type
    where it cannot be hashed: a lock, a connection)."""
    try:
        return ("value", _hasher.digest(value))
    except Exception:
        return ("unhashable", type(value).__module__, type(value).__qualname__)


def first_rebound(g: dict[str, Any], name: str) -> Any:
    """The token of global ``name`` of namespace ``g`` as a walk of this process first met it rebound
    by the code; the same on every later walk."""
    key = (id(g), name)
    found = _first_rebound.get(key)
    if found is None:
        if len(_first_rebound) >= _FIRST_REBOUND_MAX:
            _first_rebound.clear()
        found = _first_rebound.setdefault(key, (g, first_digest(g.get(name))))
    return found[1]
