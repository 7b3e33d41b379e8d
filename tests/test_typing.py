"""The package ships ``py.typed`` and keeps its signatures for type checkers.

``mypy --strict`` over the package itself runs as a lint step in ``.ci/run``, not as a test.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers import REPO


def test_py_typed_marker_ships():
    """Type checkers only read inline hints of packages that carry py.typed."""
    assert (REPO / "fncache" / "py.typed").exists()


@pytest.mark.slow
def test_memoize_keeps_the_signature_for_type_checkers(tmp_path):
    """A memoized function keeps its parameter and return types (ParamSpec): misuse is an error."""
    pytest.importorskip("mypy")
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import fncache\n\n"
        "@fncache.memoize\n"
        "def f(x: int, y: str = 'a') -> float:\n"
        "    return 1.0\n\n"
        "ok: float = f(1, y='b')\n"
        "bad: str = f('no')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(sample)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 1, out
    assert 'Argument 1 to "__call__" of "Memoized" has incompatible type "str"' in out or \
        'incompatible type "str"; expected "int"' in out, out
    assert 'Incompatible types in assignment (expression has type "float", variable has type "str")' \
        in out, out
    assert "sample.py:7" not in out, out
