# Optional native kernels (fncache/_speedups.c); absent when the package was installed without a
# C compiler. Every function has a numpy twin in fncache/_values_arrow.py.
from typing import Any

def mask_into(values: Any, bitmap: Any, bit_offset: int, width: int, out: Any, /) -> None: ...
