"""Which code is the user's, and which installed distribution owns a library module (its version
enters the keys of library functions)."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import subprocess
import sys
import textwrap

from fncache.code.usercode import distribution_versions


def test_owners_agree_with_the_full_scan_for_every_installed_module():
    """Looking only where a module is imported from finds the distributions the full scan of every
    installed distribution finds, with the same versions."""
    everything = md.packages_distributions()
    checked = 0
    for top, names in everything.items():
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        expected = tuple(sorted({(n, md.version(n)) for n in names}))
        assert distribution_versions([top]) == expected, top
        checked += 1
    assert checked > 10


def test_standard_library_and_builtin_modules_have_no_distribution():
    assert distribution_versions(["json", "math", "sys", "_thread", "collections"]) == ()


_KEY_SCRIPT = textwrap.dedent("""
    import importlib.metadata as md
    def refuse():
        raise AssertionError("scanned every distribution")
    md.packages_distributions = refuse
    import fncache, fakelib
    fncache.untrack("fakelib")
    m = fncache.memoize(store="memory://", track_versions=True)(fakelib.f)
    print(m.key(1), sorted(m.call_key(1).components))
""")


def _fake_library(root, version: str) -> None:
    for old in root.glob("fakelib-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    pkg = root / "fakelib"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("def f(x):\n    return x\n")
    meta = root / f"fakelib-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakelib\nVersion: {version}\n")
    (meta / "RECORD").write_text("fakelib/__init__.py,,\n"
                                 f"fakelib-{version}.dist-info/METADATA,,\n")


def _key(root) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run([sys.executable, "-c", _KEY_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_library_upgrade_changes_its_functions_keys_without_a_full_scan(tmp_path):
    """A new process keys a library function by its distribution's version, found from the module's
    own directory (the full scan is never run); upgrading the library changes the key."""
    _fake_library(tmp_path, "1.0")
    first = _key(tmp_path)
    assert "version fakelib" in first
    assert _key(tmp_path) == first
    _fake_library(tmp_path, "2.0")
    assert _key(tmp_path) != first
    _fake_library(tmp_path, "1.0")
    assert _key(tmp_path) == first
