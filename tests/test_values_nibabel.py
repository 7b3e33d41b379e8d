"""nibabel images loaded lazily are keyed by their file's content, not its name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

np = pytest.importorskip("numpy")
nib = pytest.importorskip("nibabel")

import fncache  # noqa: E402


def _save(path: str, fill: float) -> None:
    nib.save(nib.Nifti1Image(np.full((4, 4, 4), fill, np.float32), np.eye(4)), path)


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_image_rewritten_in_place_gets_a_new_key(tmp_path, suffix):
    """A memoized function of a loaded image recomputes after the image file is rewritten (v1 → v2 → v1)."""
    path = str(tmp_path / f"brain{suffix}")
    calls = []

    @fncache.memoize(store=str(tmp_path / "store"))
    def mean(img):
        calls.append(1)
        return float(img.get_fdata().mean())

    _save(path, 1.0)
    assert mean(nib.load(path)) == 1.0
    _save(path, 2.0)
    assert mean(nib.load(path)) == 2.0  # a stale hit would return 1.0
    _save(path, 1.0)
    assert mean(nib.load(path)) == 1.0
    assert len(calls) == 2  # v1 again is a hit


def test_proxy_key_follows_content_not_the_file_name(tmp_path):
    """Two files with equal content give one proxy key; different content gives another."""
    a, b, c = (str(tmp_path / n) for n in ("a.nii", "b.nii", "c.nii"))
    _save(a, 1.0)
    _save(b, 1.0)
    _save(c, 3.0)
    keys = [fncache.hash(nib.load(p).dataobj) for p in (a, b, c)]
    assert keys[0] == keys[1] != keys[2]


def test_proxy_key_is_the_same_in_fresh_processes(tmp_path):
    """The key of a loaded image's proxy does not depend on the process or its hash seed."""
    path = str(tmp_path / "a.nii")
    _save(path, 5.0)
    code = textwrap.dedent(f"""
        import nibabel, fncache
        print(fncache.hash(nibabel.load({path!r}).dataobj))
    """)
    out = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out.add(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                               capture_output=True, text=True).stdout)
    assert len(out) == 1
