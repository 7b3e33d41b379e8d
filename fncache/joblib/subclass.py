"""``fncache.Memory`` as a ``joblib.Memory``, for libraries that check the type.

Some libraries accept only a ``joblib.Memory`` (nilearn's maskers: ``isinstance(memory,
joblib.Memory)``). When joblib is installed, ``fncache.Memory(...)`` therefore makes an instance of the
class below, a subclass of both: it passes that check, and it caches the fncache way (keys, store,
``explain``), since ``fncache.Memory`` comes first in its method resolution order and overrides every
method ``joblib.Memory`` defines itself (joblib 1.6: ``__init__``, ``cache``, ``clear``,
``reduce_size``, ``eval``, ``__repr__``, ``__getstate__``). ``joblib.Memory.__init__`` is never called,
so no joblib store backend exists and nothing is written to ``LOCATION/joblib``.

Imported only when a ``Memory`` is made and joblib is installed (``import fncache`` never imports
joblib, which imports numpy). Rejected alternatives: ``__class__`` as a property (``type()`` and
``isinstance`` would disagree, and pickle reads ``__class__``) and ABC registration (``joblib.Memory``
is not an ABC). Instances pickle as ``fncache.Memory`` (see ``Memory.__reduce__``), so a process
without joblib can load them.
"""

from __future__ import annotations

from typing import Any

import joblib

__all__ = ["joblib_memory_class"]


def joblib_memory_class(memory: type[Any]) -> type[Any]:
    """``memory`` (:class:`fncache.Memory`) subclassed with ``joblib.Memory``: see the module docstring.

    Given the class rather than importing it, so that this module stays below
    :mod:`fncache.joblib.memory`, which calls it once.
    """

    class Memory(memory, joblib.Memory):  # type: ignore[misc]
        """:class:`fncache.Memory`, also an instance of ``joblib.Memory``: see the module docstring."""

        # joblib.Logger's attributes (its __init__ is never called), for its warn/debug helpers.
        depth = 3
        _name = "joblib"

    Memory.__qualname__ = "Memory"
    return Memory
