"""Values prepared once by the runner and returned by benchmarked functions.

The runner calls ``fncache.untrack`` on this module, so a function that reads ``VALUE`` is keyed by
its code only: the benchmark then measures storing and loading a result, not computing or hashing it.
"""

from typing import Any

VALUE: Any = None
