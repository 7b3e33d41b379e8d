"""``%%fncache``: a notebook cell cached as a unit, across kernel restarts and cell edits.

Each run executes a small notebook in a fresh IPython kernel of this very interpreter, through
nbclient, as "Restart & Run All" would; a counter file records each time a cached cell's body runs.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, write_kernelspec

nbformat = pytest.importorskip("nbformat", reason="needs the test extra (nbformat)")
nbclient = pytest.importorskip("nbclient", reason="needs the test extra (nbclient)")
pytest.importorskip("ipykernel", reason="needs the test extra (ipykernel)")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

from fncache.notebook.cellcode import cell_inputs  # noqa: E402
from fncache.notebook.magic import CellOptions, parse_options  # noqa: E402

KERNEL = "fncache-magic-test"

SETUP = """\
%load_ext fncache
import os
from IPython.display import Markdown, display

def count():
    with open(os.environ["COUNT_FILE"], "a") as f:
        f.write("run\\n")
"""
DATA = "data = [1, 2, 3, 4]\n"
HELPER = """\
def normalize(xs):
    total = sum(xs)
    return [x / total for x in xs]
"""
CELL = """\
%%fncache -v
count()
shares = normalize(data)
print("shares", shares)
display(Markdown(f"**{len(shares)} shares**"))
len(shares)
"""
REPORT = 'import json\nprint(json.dumps({"shares": shares}))\n'


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    """A kernelspec that starts ipykernel with this interpreter, the test's store and counter file."""
    return write_kernelspec(tmp_path, KERNEL, "fncache magic tests", FNCACHE_VERBOSE="")


def run_notebook(where: Path, cells: list[str]) -> list[Any]:
    """Execute the cells in a new kernel (errors allowed); each cell's outputs, in order."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    km = KernelManager(kernel_name=KERNEL,
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(where / "kernels")]))
    client = nbclient.NotebookClient(nb, km=km, timeout=120, kernel_name=KERNEL, allow_errors=True,
                                     resources={"metadata": {"path": str(where)}})
    try:
        client.execute()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return [c.outputs for c in nb.cells]


def stream(outputs: list[Any], name: str) -> str:
    return "".join(o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == name)


def shown(outputs: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """Everything a cell showed but its stderr (where the verbose lines go), in order."""
    return [(o["output_type"], dict(o.get("data", {})) or o.get("text", ""))
            for o in outputs if not (o["output_type"] == "stream" and o["name"] == "stderr")]


def reported(outputs: list[Any]) -> Any:
    return json.loads(stream(outputs, "stdout").strip().splitlines()[-1])


def runs(where: Path) -> int:
    counts = where / "counts.txt"
    return len(counts.read_text().split()) if counts.exists() else 0


def fncache_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "fncache", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.slow
def test_cell_is_cached_across_restarts_and_keyed_by_what_it_reads(kernel_dir: Path) -> None:
    """A restart hits and replays the cell's output; editing a helper cell or a data cell misses;
    reverting hits the old entry; comments and formatting do not count; the entries are the
    notebook's, for `fncache ls`, `explain` and `clear`; an unknown option is a UsageError naming it."""
    cells = [SETUP, DATA, HELPER, CELL, REPORT]

    first = run_notebook(kernel_dir, cells)
    assert runs(kernel_dir) == 1
    assert reported(first[4]) == {"shares": [0.1, 0.2, 0.3, 0.4]}
    assert "[fncache] miss analysis.ipynb:cell(shares)" in stream(first[3], "stderr")
    assert shown(first[3]) == [
        ("stream", "shares [0.1, 0.2, 0.3, 0.4]\n"),
        ("display_data", {"text/markdown": "**4 shares**",
                          "text/plain": "<IPython.core.display.Markdown object>"}),
        ("execute_result", {"text/plain": "4"}),
    ]

    again = run_notebook(kernel_dir, cells)
    assert runs(kernel_dir) == 1, "the body ran again after a restart"
    assert "[fncache] hit analysis.ipynb:cell(shares)" in stream(again[3], "stderr")
    assert shown(again[3]) == shown(first[3])  # printed, displayed and returned: replayed
    assert reported(again[4]) == {"shares": [0.1, 0.2, 0.3, 0.4]}

    helper_edit = run_notebook(kernel_dir, [SETUP, DATA, HELPER.replace("sum(xs)", "max(xs)"), CELL,
                                            REPORT])
    assert runs(kernel_dir) == 2
    assert reported(helper_edit[4]) == {"shares": [0.25, 0.5, 0.75, 1.0]}
    assert "helper __main__.normalize changed" in stream(helper_edit[3], "stderr")

    data_edit = run_notebook(kernel_dir, [SETUP, "data = [2, 2, 3, 3]\n", HELPER, CELL, REPORT])
    assert runs(kernel_dir) == 3
    assert reported(data_edit[4]) == {"shares": [0.2, 0.2, 0.3, 0.3]}
    assert "global data changed" in stream(data_edit[3], "stderr")

    reverted = run_notebook(kernel_dir, cells)
    assert runs(kernel_dir) == 3, "reverting the edits should hit the first entry"
    assert reported(reverted[4]) == {"shares": [0.1, 0.2, 0.3, 0.4]}

    cosmetic_cell = CELL.replace("shares = normalize(data)",
                                 "# the shares of each item\nshares = normalize( data )\n\n")
    cosmetic = run_notebook(kernel_dir, [SETUP, DATA, "# helper\n" + HELPER, cosmetic_cell, REPORT,
                                         "%%fncache --bogus\nx = 1\n",
                                         'print(json.dumps({"x": "x" in dir()}))'])
    assert runs(kernel_dir) == 3, "a comment or formatting edit should hit"
    assert shown(cosmetic[3]) == shown(first[3])
    # IPython shows a UsageError as its message alone, and the cell's body does not run.
    assert stream(cosmetic[5], "stderr").startswith("UsageError: %%fncache: unknown option '--bogus'")
    assert reported(cosmetic[6]) == {"x": False}

    store = str(kernel_dir / "store")
    listing = json.loads(fncache_cli("ls", "--dir", store, "--json").stdout)
    assert [(r["function"], r["entries"]) for r in listing] == [("analysis.ipynb:cell(shares)", 3)]
    explained = fncache_cli("explain", "analysis.ipynb:cell(shares)", "--dir", store)
    assert explained.returncode == 0, explained.stderr
    assert "3 entries" in explained.stdout
    assert "helper `__main__.normalize`" in explained.stdout and "global `data`" in explained.stdout
    cleared = fncache_cli("clear", "--function", "analysis.ipynb:cell(shares)", "--dir", store, "-y")
    assert "removed 3 entries" in cleared.stdout, cleared.stdout + cleared.stderr


@pytest.mark.slow
def test_cells_that_cannot_be_cached_run_with_one_line_saying_why(kernel_dir: Path) -> None:
    """An input that cannot be keyed, or a bound name that cannot be stored, runs the cell uncached
    with one line naming it, run after run; a cell that modifies an input in place is stored with
    it and restores it on a hit."""
    cells = [
        SETUP,
        "bad = [(i for i in range(3))]\nitems = [0]\n",
        "%%fncache\ncount()\ntotal = sum(bad[0])\n",
        "%%fncache\ncount()\nimport threading\nlk = threading.Lock()\n",
        "%%fncache\ncount()\nitems.append(len(items))\n",
        'import json\nprint(json.dumps({"total": total, "lk": type(lk).__name__, "items": items}))\n',
    ]
    expected = {"total": 3, "lk": "lock", "items": [0, 1]}

    first = run_notebook(kernel_dir, cells)
    assert (reported(first[5]), runs(kernel_dir)) == (expected, 3)
    lines = [stream(first[i], "stderr").strip() for i in (2, 3, 4)]
    assert lines[0].startswith("[fncache] cell runs uncached: global bad cannot be hashed")
    assert lines[1].startswith("[fncache] cell ran uncached: variable 'lk' (_thread.lock) cannot "
                               "be stored")
    assert lines[2] == ""
    assert all(len(line.splitlines()) <= 1 for line in lines)

    second = run_notebook(kernel_dir, cells)
    assert reported(second[5]) == expected  # items restored as the cell left it
    assert runs(kernel_dir) == 5, "the two uncached cells run again, the stored one does not"


@pytest.mark.parametrize(("source", "inputs"), [
    ("y = x + 1", {"x"}),
    ("x = 1\ny = x + 1", set()),  # bound before it is read
    ("x = x + 1", {"x"}),
    ("x += 1", {"x"}),
    ("if c:\n    x = 1\ny = x", {"c", "x"}),  # a branch may not bind it
    ("def f():\n    return g()\ng = 1\nf()", {"g"}),  # read by a function, whenever it runs
    ("import json\njson.dumps(d)", {"d"}),
    ("x = 1\ndel x\nprint(x)", {"print", "x"}),
    ("for i in items:\n    t = i\nprint(t)", {"items", "print", "t"}),  # the loop may not run
    ("with open(p) as f:\n    s = f.read()", {"open", "p"}),
    ("ys = [x * k for x in xs if x]", {"k", "xs"}),
    ("m = {k: v for k, v in pairs}\nn = len(m)", {"pairs", "len"}),
])
def test_cell_inputs_are_the_names_read_before_the_cell_binds_them(source: str, inputs: set[str]) -> None:
    """A name counts as an input unless an earlier top-level statement certainly bound it."""
    assert cell_inputs(ast.parse(source)) == inputs


@pytest.mark.parametrize(("line", "options"), [
    ("", CellOptions()),
    ("-v", CellOptions(verbose=True)),
    ("--store /tmp/c --verbose", CellOptions("/tmp/c", True)),
    ("--store='/tmp/my cache'", CellOptions("/tmp/my cache")),
])
def test_magic_line_options(line: str, options: CellOptions) -> None:
    """The magic line takes --store DIR_OR_URL (or --store=...) and -v/--verbose."""
    assert parse_options(line) == options


@pytest.mark.parametrize(("line", "named"), [
    ("--bogus", "unknown option '--bogus'"),
    ("-v results", "unknown option 'results'"),
    ("--store", "--store needs a directory or a URL"),
    ("--store=", "--store needs a directory or a URL"),
])
def test_magic_line_refuses_what_it_does_not_know(line: str, named: str) -> None:
    """An unknown or incomplete option is a UsageError that names it."""
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=named):
        parse_options(line)


SHELL_SCRIPT = """\
import json, os, sys
from IPython.core.interactiveshell import InteractiveShell

ip = InteractiveShell.instance()
for cell in json.loads(sys.argv[1]):
    ip.run_cell(cell)
"""


def run_shell(where: Path, cells: list[str]) -> tuple[Any, str]:
    """Run the cells in an IPython shell of a new process: (the JSON the last cell printed, stderr)."""
    env = {**os.environ, "FNCACHE_DIR": str(where / "store"), "COUNT_FILE": str(where / "counts.txt"),
           "FNCACHE_DISABLE": "", "FNCACHE_VERBOSE": "",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", SHELL_SCRIPT, json.dumps(cells)], capture_output=True,
                          text=True, env=env, timeout=120, cwd=where)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_hit_restores_what_the_cell_left_from_what_it_found(tmp_path: Path) -> None:
    """A global that a notebook function rebinds for the cell is keyed by content (a new start
    value misses); a function and a class's method the cell defined read the notebook's globals
    after a hit; names the cell deleted are deleted again; magics and eval() run uncached with a
    line saying so."""
    def cells(start: int) -> list[str]:
        return [
            SETUP,
            f"counter = {start}\ntmp = 1\n"
            "def bump():\n    global counter\n    counter += 1\n    return counter\n",
            "%%fncache\ncount()\nv = bump()\ndel tmp\ndef scaled(x):\n    return x * SCALE\n"
            "class Scaler:\n    def __call__(self, x):\n        return x * SCALE\n",
            "%%fncache\ncount()\n%time y = 1\n",
            "%%fncache\ncount()\nz = eval('1')\n",
            "SCALE = 3\nimport json\nprint(json.dumps({'v': v, 'counter': counter, "
            "'tmp': 'tmp' in dir(), 'scaled': [scaled(2), Scaler()(2)]}))\n",
        ]

    first, err = run_shell(tmp_path, cells(0))
    assert (first, runs(tmp_path)) == ({"v": 1, "counter": 1, "tmp": False, "scaled": [6, 6]}, 3)
    assert "[fncache] cell runs uncached: it uses IPython magics or shell commands (line 2)" in err
    assert "[fncache] cell runs uncached: it calls eval() (line 2)" in err

    again, _ = run_shell(tmp_path, cells(0))
    assert (again, runs(tmp_path)) == (first, 5)  # the first cell hit; the other two ran

    other_start, _ = run_shell(tmp_path, cells(10))
    assert (other_start, runs(tmp_path)) == ({"v": 11, "counter": 11, "tmp": False, "scaled": [6, 6]}, 8)


def test_import_fncache_does_not_import_ipython() -> None:
    """The extension hook imports IPython lazily."""
    done = subprocess.run([sys.executable, "-c", "import sys, fncache; "
                           "print(callable(fncache.load_ipython_extension), 'IPython' in sys.modules)"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.split() == ["True", "False"], done.stderr
