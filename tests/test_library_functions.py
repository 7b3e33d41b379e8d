"""A memoized function of an installed library is keyed by the library's version."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.helpers import fake_distribution


def _install(root, version: str) -> None:
    """A tiny distribution ``fakelib`` at ``version``, as pip would lay it out."""
    pkg = root / "fakelib"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    fake_distribution(root, "fakelib", version, "fakelib/__init__.py,,\n", top_level="fakelib\n")


_RUN = textwrap.dedent("""
    import sys, fncache
    fncache.untrack("fakelib")  # installed code, as it would be in site-packages
    import fakelib
    f = fncache.memoize(store=sys.argv[1])(fakelib.double)
    f(21)
    print(f.cache_info().misses)
""")


def test_library_upgrade_gives_new_keys(tmp_path):
    """v1 → v2 → v1 of an installed library: the upgrade recomputes, the downgrade hits again."""
    site = tmp_path / "site"
    site.mkdir()
    store = str(tmp_path / "store")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))

    def run() -> str:
        return subprocess.run([sys.executable, "-c", _RUN, store], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    _install(site, "1.0")
    assert run() == "1"
    assert run() == "0"  # same version: a hit
    _install(site, "2.0")
    assert run() == "1"  # upgraded: its code may differ, so a new key
    _install(site, "1.0")
    assert run() == "0"
