"""State a function writes, keyed by name: the tokens that stand for it in a fingerprint, and the
first value that goes with them.

A global the function's code rebinds (``global n; n += 1``, a lazily made ``_client``) and a value
memoize saw the function modify while it ran (a log list, a sorted list; see
:func:`fncache.code.fingerprint.mark_state`) are keyed by the name they are read under, or no call
could hit again. A modified value's token is followed by the digest it had before the function
first modified it in this process: state is not an input while the process runs, but that first
value is the program's (``WEIGHTS = [3, 1, 2]`` edited to ``[3, 1, 5]`` in the source is another
program), and the first call of every process was keyed by it already. A rebound global is keyed by
its name alone: its value when the key is first made may be a lazily made object (a client, a
model, made earlier or not at all), which would give every process its own key.
``memoize(ignore_globals=...)`` is the user's word and keys the name alone.
"""

from __future__ import annotations

__all__ = ["BY_NAME", "IGNORED", "MISSING", "REBOUND", "SLOW_REHASH", "STATE"]

MISSING = object()  # a name not bound (a global not set, an empty closure cell)
#: A mutable value read by the code is re-hashed on every call (to see whether it changed); one that
#: takes longer than this (seconds) is reported once, with the remedies (see Fingerprint.slow).
SLOW_REHASH = 0.001

STATE = ("state",)  # modified by the function while it ran (mark_state)
REBOUND = ("state", "rebound")  # rebound by the function's own code (STORE_GLOBAL)
IGNORED = ("state", "ignored")  # named in memoize(ignore_globals=[...])
#: Why each is keyed by name, as ``Fingerprint.by_name`` says it.
BY_NAME = {STATE: "modified by the function", REBOUND: "rebound by the function",
           IGNORED: "left out by ignore_globals="}

