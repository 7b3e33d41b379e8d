"""Names of functions: scripts recorded under their file name, and functions named on the command line.

Every test runs real scripts in fresh interpreters sharing one disk store, and the ``fncache``
command as a subprocess, as a user would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import load_harness, write

harness = load_harness()
pytestmark = pytest.mark.slow  # subprocesses: seconds each

STEP = """
import os
import fncache

@fncache.memoize
def step(x):
    with open(os.environ["COUNT_FILE"], "a") as f:
        f.write("{name}\\n")
    return x * {factor}

@fncache.memoize(version="1")
def pinned(x):
    return x * {factor}

def helper(x):
    return x

if __name__ == "__main__":
    import sys
    for arg in sys.argv[1:]:
        if arg == "clear":
            print(step.clear())
        else:
            step(int(arg))
            pinned(int(arg))
"""


def py(where: Path, *args: str, store: Path) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``where`` on ``store``; fails the test if it fails."""
    env = harness.child_env(store, COUNT_FILE=str(where / "counts.txt"))
    proc = subprocess.run([sys.executable, *args], cwd=where, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def fncache(where: Path, *args: str, store: Path) -> subprocess.CompletedProcess[str]:
    """The ``fncache`` command in ``where``, on ``store`` (``--dir``), stdin not a terminal."""
    env = harness.child_env(None, COUNT_FILE=str(where / "counts.txt"))
    return subprocess.run([sys.executable, "-m", "fncache", *args, "--dir", str(store)], cwd=where,
                          env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def listing(where: Path, store: Path) -> dict[str, int]:
    proc = fncache(where, "ls", "--json", store=store)
    assert proc.returncode == 0, proc.stderr
    return {r["function"]: r["entries"] for r in json.loads(proc.stdout)}


def computed(where: Path) -> list[str]:
    counts = where / "counts.txt"
    return counts.read_text().split() if counts.exists() else []


@pytest.fixture
def two_scripts(tmp_path: Path) -> tuple[Path, Path]:
    """Scripts a.py and b.py, each with its own `step` and `pinned`, run once on one store."""
    write(tmp_path / "a.py", STEP.format(name="a", factor=2))
    write(tmp_path / "b.py", STEP.format(name="b", factor=3))
    store = tmp_path / "store"
    py(tmp_path, "a.py", "1", "2", store=store)
    py(tmp_path, "b.py", "1", store=store)
    return tmp_path, store


def test_two_scripts_are_listed_apart(two_scripts):
    """Each script's functions are recorded under the script's name, not a shared __main__."""
    where, store = two_scripts
    assert listing(where, store) == {"a:step": 2, "a:pinned": 2, "b:step": 1, "b:pinned": 1}
    assert "a:step" in fncache(where, "ls", store=store).stdout


def test_version_pinned_functions_of_two_scripts_do_not_share_entries(two_scripts):
    """Two scripts' functions of one name and one version= pin are two keys: b never reads a's result."""
    where, store = two_scripts
    out = py(where, "-c", "import b; print(b.pinned(2), b.pinned.cache_info().hits)", store=store)
    assert out.stdout.split() == ["6", "0"]


def test_clear_function_by_script_name_removes_only_that_script(two_scripts):
    """clear --function a.py:step (or a:step) removes a's entries of step, and nothing of b."""
    where, store = two_scripts
    proc = fncache(where, "clear", "--function", "a.py:step", "--yes", store=store)
    assert proc.returncode == 0, proc.stderr
    assert "removed 2 entries" in proc.stdout
    assert listing(where, store) == {"a:pinned": 2, "b:step": 1, "b:pinned": 1}
    proc = fncache(where, "clear", "--function", "b:pinned", "--yes", store=store)
    assert listing(where, store) == {"a:pinned": 2, "b:step": 1}


def test_f_clear_in_one_script_leaves_the_other_scripts_entries(two_scripts):
    """step.clear() run by b.py removes b's entries only."""
    where, store = two_scripts
    assert py(where, "b.py", "clear", store=store).stdout.split() == ["1"]
    assert listing(where, store) == {"a:step": 2, "a:pinned": 2, "b:pinned": 1}


def test_script_and_the_same_file_imported_share_hits(two_scripts):
    """`python a.py` and `import a` (and `python -m a`) give one name and one set of keys."""
    where, store = two_scripts
    assert computed(where) == ["a", "a", "b"]
    code = ("import a; print(a.step.function_id, a.step(1), a.step.cache_info().hits, "
            "a.pinned(2), a.pinned.cache_info().hits)")
    assert py(where, "-c", code, store=store).stdout.split() == ["a:step", "2", "1", "4", "1"]
    py(where, "-m", "a", "2", store=store)
    assert computed(where) == ["a", "a", "b"]  # every call since the first runs hit
    assert listing(where, store)["a:step"] == 2


def test_explain_finds_entries_recorded_under_either_name_of_a_file(tmp_path):
    """pkg/job.py run as a script records job:f, imported pkg.job:f; explain by either sees both."""
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "job.py", STEP.format(name="job", factor=2))
    store = tmp_path / "store"
    py(tmp_path, "pkg/job.py", "1", store=store)
    py(tmp_path, "-c", "import pkg.job; pkg.job.step(2)", store=store)
    assert listing(tmp_path, store) == {"job:step": 1, "job:pinned": 1, "pkg.job:step": 1}
    for target in ("pkg/job.py:step", "pkg.job:step"):
        proc = fncache(tmp_path, "explain", target, "--json", store=store)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert (report["entries"], report["status"]) == (2, "current"), (target, report)


@pytest.mark.parametrize("target, message", [
    ("job.py:sumarize", "job.py has no 'sumarize'; did you mean 'summarize'?"),
    ("missing.py:f", "no such script: missing.py"),
    ("job.py:helper", "job.py:helper is not memoized"),
    ("no_such_module:f", "no module named 'no_such_module'"),
    ("job:Nope.f", "job has no 'Nope'"),
    ("broken.py:f", "running broken.py raised ZeroDivisionError"),
])
def test_explain_of_something_missing_fails_naming_it(tmp_path, target, message):
    """A typo, a missing file, module or :FUNC, a plain function or a crashing script exit 1 and
    say what is missing; nothing is created."""
    write(tmp_path / "job.py", "import fncache\n@fncache.memoize\ndef summarize(x):\n    return x\n"
                               "def helper(x):\n    return x\n")
    write(tmp_path / "broken.py", "1 / 0\n")
    store = tmp_path / "store"
    py(tmp_path, "-c", "import job; job.summarize(1)", store=store)
    proc = fncache(tmp_path, "explain", target, store=store)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_explain_of_a_file_without_a_function_is_bad_usage(tmp_path):
    """``explain job.py`` (no ``:FUNC``) is a usage error: exit 2, naming what to write."""
    write(tmp_path / "job.py", "import fncache\n@fncache.memoize\ndef summarize(x):\n    return x\n")
    proc = fncache(tmp_path, "explain", "job.py", store=tmp_path / "store")
    assert proc.returncode == 2 and "write job.py:FUNC" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_explain_and_doctor_store_nothing_while_running_the_script(tmp_path):
    """A script whose top level calls a memoized function is run by explain and doctor without
    storing an entry."""
    write(tmp_path / "eager.py", STEP.format(name="eager", factor=2) + "\nstep(7)\n")
    store = tmp_path / "store"
    py(tmp_path, "-c", "import eager", store=store)  # the import itself stores step(7)
    assert listing(tmp_path, store) == {"eager:step": 1}
    fncache(tmp_path, "clear", "--yes", store=store)
    proc = fncache(tmp_path, "explain", "eager.py:step", store=store)
    assert proc.returncode == 0, proc.stderr
    proc = fncache(tmp_path, "doctor", "eager.py:step", "--seeds", "1,2", store=store)
    assert "key stability" in proc.stdout, proc.stdout + proc.stderr
    assert listing(tmp_path, store) == {}


NOTEBOOK_NAME = """
import fncache

def make(namespace):
    exec("def step(x):\\n    return x\\n", namespace)
    return fncache.memoize(store="memory://names")(namespace["step"]).function_id

print(make({"__name__": "__main__", "__session__": "/home/u/work/analysis.ipynb"}),
      make({"__name__": "__main__", "__vsc_ipynb_file__": "c:/x/report.ipynb",
            "__session__": "ignored.ipynb"}),
      make({"__name__": "__main__", "__session__": "a console"}),
      make({"__name__": "__main__"}))
"""


def test_notebook_functions_are_recorded_under_the_notebook_name(tmp_path):
    """A function of a notebook is named after the notebook its frontend names; without one, __main__."""
    write(tmp_path / "names.py", NOTEBOOK_NAME)
    out = py(tmp_path, "-c", "exec(open('names.py').read())", store=tmp_path / "store").stdout
    assert out.split() == ["analysis.ipynb:step", "report.ipynb:step", "__main__:step",
                           "__main__:step"]


def test_names_typed_on_the_command_line_map_to_recorded_names():
    """A script or notebook path names what its runs record; other names are taken as typed."""
    from fncache.code.targets import recorded_name

    assert recorded_name("some/dir/job.py:Model.fit") == "job:Model.fit"
    assert recorded_name("work/analysis.ipynb:step") == "analysis.ipynb:step"
    assert recorded_name("pkg.job:step") == "pkg.job:step"
    assert recorded_name("step") == "step"
