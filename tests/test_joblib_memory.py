"""fncache.Memory passes for a joblib.Memory where libraries check the type, and still caches the
fncache way: its keys and store, no joblib store beside them."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

import fncache
from tests.helpers import last_json, run_py, write


def test_memory_is_a_joblib_memory_without_a_joblib_store(tmp_path: Path) -> None:
    """With joblib installed, fncache.Memory is an instance of joblib.Memory and fncache.Memory, caches
    in LOCATION/fncache only, and pickles and deep-copies as itself."""
    joblib = pytest.importorskip("joblib")
    import copy

    memory = fncache.Memory(tmp_path / "c", verbose=0)
    assert isinstance(memory, joblib.Memory) and isinstance(memory, fncache.Memory)
    calls = []

    @memory.cache
    def f(x: int) -> int:
        calls.append(x)
        return x + 1

    assert f(1) == f(1) == 2 and calls == [1]
    assert isinstance(f, fncache.Memoized) and f.explain(1).hit
    assert sorted(os.listdir(tmp_path / "c")) == [".gitignore", "fncache"]
    for clone in (pickle.loads(pickle.dumps(memory)), copy.deepcopy(memory)):
        assert isinstance(clone, joblib.Memory) and clone.location == memory.location
        assert clone.cache(f.func)(1) == 2 and calls == [1]
    assert repr(memory) == f"Memory(location={tmp_path / 'c'})"


def test_every_joblib_memory_method_is_fncaches() -> None:
    """Every method joblib.Memory defines is overridden by fncache.Memory, so none of joblib's code
    (which needs the store backend that is never made) runs on the instance."""
    joblib = pytest.importorskip("joblib")
    from fncache.joblib.memory import Memory

    joblib_methods = {n for n, v in vars(joblib.Memory).items() if callable(v) or isinstance(v, property)}
    assert joblib_methods - set(vars(Memory)) == set()


def test_import_fncache_does_not_import_joblib(tmp_path: Path) -> None:
    """import fncache leaves joblib unimported; making a Memory imports it (when installed)."""
    pytest.importorskip("joblib")
    script = write(tmp_path / "imp.py", """
        import json, sys
        import fncache
        before = "joblib" in sys.modules
        fncache.Memory(None)
        print(json.dumps([before, "joblib" in sys.modules]))
    """)
    assert last_json(run_py(script)) == [False, True]


NILEARN_JOB = """
import hashlib, json, sys
import numpy as np
import nibabel as nib
from nilearn.maskers import NiftiMasker

kind, location = sys.argv[1], sys.argv[2]
if kind == "fncache":
    from fncache import Memory
else:
    from joblib import Memory

rng = np.random.default_rng(0)
data = rng.standard_normal((6, 7, 8, 20))
img = nib.Nifti1Image(data, np.eye(4))
mask = nib.Nifti1Image((np.abs(data[..., 0]) < 1.5).astype(np.int8), np.eye(4))
masker = NiftiMasker(mask_img=mask, standardize="zscore_sample", smoothing_fwhm=2.0,
                     memory=Memory(location, verbose=1), memory_level=2)
signals = masker.fit_transform(img)
print(json.dumps({"shape": list(signals.shape), "dtype": str(signals.dtype),
                  "digest": hashlib.sha256(np.ascontiguousarray(signals).tobytes()).hexdigest()}))
"""


@pytest.mark.slow
def test_nilearn_masker_caches_with_fncache_memory(tmp_path: Path) -> None:
    """nilearn's NiftiMasker (which requires a joblib.Memory) accepts fncache.Memory: the signals equal
    joblib's bit for bit, a second run in a new process computes nothing, and no joblib store is made."""
    pytest.importorskip("nilearn")
    script = write(tmp_path / "job.py", NILEARN_JOB)
    location = tmp_path / "cache"
    first = run_py(script, "fncache", str(location), timeout=300)
    assert first.stderr.count("[Memory] Calling") >= 2, first.stderr
    second = run_py(script, "fncache", str(location), timeout=300)
    assert "[Memory] Calling" not in second.stderr, second.stderr
    reference = run_py(script, "joblib", str(tmp_path / "joblib-cache"), timeout=300)
    assert last_json(first) == last_json(second) == last_json(reference)
    assert sorted(os.listdir(location)) == [".gitignore", "fncache"]
    assert json.loads(first.stdout.splitlines()[-1])["shape"] == [20, 298]


def test_without_joblib_memory_is_plain_and_loads_joblib_pickles(tmp_path: Path) -> None:
    """In a process where joblib cannot be imported, Memory is a plain fncache.Memory, and a Memory
    pickled where joblib was installed loads there as one."""
    pytest.importorskip("joblib")
    pickled = tmp_path / "memory.pkl"
    pickled.write_bytes(pickle.dumps(fncache.Memory(tmp_path / "c", verbose=0)))
    script = write(tmp_path / "nojoblib.py", """
        import json, pickle, sys
        sys.modules["joblib"] = None  # import joblib now fails, as if it were not installed
        import fncache
        m = fncache.Memory(sys.argv[1])
        loaded = pickle.loads(open(sys.argv[2], "rb").read())
        f = loaded.cache(lambda x: x * 2)
        print(json.dumps([type(m) is fncache.Memory, type(loaded) is fncache.Memory, f(4)]))
    """)
    assert last_json(run_py(script, str(tmp_path / "c"), str(pickled))) == [True, True, 8]


def _git_ignores(repo: Path, path: Path) -> bool:
    """Whether git, in the repository ``repo``, ignores ``path`` (``git check-ignore``)."""
    import subprocess

    proc = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=repo, capture_output=True)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode == 0


@pytest.mark.parametrize("existing", [False, True], ids=["new-location", "existing-location"])
def test_memory_location_exists_at_construction_with_joblibs_gitignore(tmp_path: Path,
                                                                       existing: bool) -> None:
    """As joblib 1.6's, Memory(location) creates the location when it is built (before any call)
    and writes a .gitignore of the same two lines into it, so that git ignores the cache."""
    joblib = pytest.importorskip("joblib")
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    if existing:
        ours.mkdir()
        theirs.mkdir()
    fncache.Memory(ours, verbose=0)
    joblib.Memory(theirs, verbose=0)
    assert ours.is_dir() and (ours / "fncache").is_dir()
    gitignore = (ours / ".gitignore").read_text()
    assert gitignore.splitlines()[1:] == (theirs / ".gitignore").read_text().splitlines()[1:] == ["*"]
    assert gitignore.startswith("# Created by fncache automatically.")

    @fncache.Memory(ours, verbose=0).cache
    def f(x: int) -> int:
        return x + 1

    assert f(1) == 2
    assert _git_ignores(tmp_path, ours / "fncache" / "cache.db")
    assert _git_ignores(tmp_path, ours / ".gitignore")


def test_memory_keeps_an_existing_gitignore(tmp_path: Path) -> None:
    """A .gitignore already in the location is left as it is (joblib's rule too)."""
    (tmp_path / ".gitignore").write_text("# mine\n")
    fncache.Memory(tmp_path, verbose=0).cache(abs)(-1)
    assert (tmp_path / ".gitignore").read_text() == "# mine\n"


def test_a_memoize_store_directory_fncache_creates_gets_a_gitignore(tmp_path: Path) -> None:
    """A disk store whose directory fncache creates gets the same .gitignore; a directory the user
    made is not given one (it may be a folder of theirs that git should see)."""
    made = tmp_path / "made-by-fncache"
    fncache.memoize(store=str(made))(abs)(-1)
    lines = (made / ".gitignore").read_text().splitlines()
    assert lines == ["# Created by fncache automatically.", "*"]
    users = tmp_path / "users"
    users.mkdir()
    fncache.memoize(store=str(users))(abs)(-1)
    assert (users / "cache.db").exists() and not (users / ".gitignore").exists()
