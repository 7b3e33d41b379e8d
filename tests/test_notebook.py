"""Functions defined in Jupyter cells: cached across kernel restarts, invalidated by cell edits.

Each run executes a small notebook (built with nbformat) in a fresh IPython kernel of this very
interpreter, through nbclient, as a person pressing "Restart & Run All" would. Cell code gets a file
name that changes with every kernel (``/tmp/ipykernel_<pid>/<hash>.py``); keys must not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_kernelspec

nbformat = pytest.importorskip("nbformat", reason="needs the test extra (nbformat)")
nbclient = pytest.importorskip("nbclient", reason="needs the test extra (nbclient)")
pytest.importorskip("ipykernel", reason="needs the test extra (ipykernel)")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

pytestmark = pytest.mark.slow  # real kernels / worker pools: minutes, not seconds

KERNEL = "fncache-test-python"

SETUP = """\
import json
import os

import fncache
"""

HELPER = """\
def normalize(xs):
    total = sum(xs)
    return [x / total for x in xs]
"""

FEATURES = """\
@fncache.memoize
def features(xs, scale=2.0):
    with open(os.environ["COUNT_FILE"], "a") as f:
        f.write("features\\n")
    return [round(v * scale, 4) for v in normalize(xs)]
"""

REPORT = """\
out = features([1, 2, 3, 4])
print(json.dumps({"out": out, "hits": features.cache_info().hits,
                  "file": features.__wrapped__.__code__.co_filename,
                  "function": features.function_id}))
"""


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    """A kernelspec that starts ipykernel with this interpreter and the test's cache directory."""
    return write_kernelspec(tmp_path, KERNEL, "fncache tests")


def run_notebook(where: Path, cells: list[str]) -> dict[str, Any]:
    """Execute the cells in a new kernel and return the JSON the last cell printed."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    km = KernelManager(kernel_name=KERNEL,
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(where / "kernels")]))
    client = nbclient.NotebookClient(nb, km=km, timeout=120, kernel_name=KERNEL,
                                     resources={"metadata": {"path": str(where)}})
    try:
        client.execute()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o["output_type"] == "stream")
    return json.loads(text.strip().splitlines()[-1])  # type: ignore[no-any-return]


def computations(where: Path) -> int:
    counts = where / "counts.txt"
    return len(counts.read_text().split()) if counts.exists() else 0


def test_notebook_function_is_cached_across_kernel_restarts_and_cell_edits(
    kernel_dir: Path,
) -> None:
    """A cell's function hits after a restart; editing it or a helper misses; reverting hits; its
    entries are recorded under the notebook's name."""
    cells = [SETUP, HELPER, FEATURES, REPORT]
    expected = [0.2, 0.4, 0.6, 0.8]

    first = run_notebook(kernel_dir, cells)
    assert (first["out"], first["hits"], computations(kernel_dir)) == (expected, 0, 1)
    assert first["function"] == "analysis.ipynb:features"  # named after the notebook

    second = run_notebook(kernel_dir, cells)
    assert second["file"] != first["file"], "cell file names should differ between kernels"
    assert (second["out"], second["hits"], computations(kernel_dir)) == (expected, 1, 1)

    # Comments, blank lines and a new unrelated cell above change nothing that counts.
    cosmetic = [SETUP, "print('exploring')\n", "# the helper\n\n" + HELPER,
                FEATURES.replace("    return", "    # scale the shares\n    return"), REPORT]
    assert run_notebook(kernel_dir, cosmetic)["hits"] == 1
    assert computations(kernel_dir) == 1

    edited = FEATURES.replace("round(v * scale, 4)", "round(v * scale, 2)")
    assert run_notebook(kernel_dir, [SETUP, HELPER, edited, REPORT])["hits"] == 0
    assert computations(kernel_dir) == 2

    helper_edit = HELPER.replace("total = sum(xs)", "total = max(xs)")
    result = run_notebook(kernel_dir, [SETUP, helper_edit, FEATURES, REPORT])
    assert (result["out"], result["hits"], computations(kernel_dir)) == ([0.5, 1.0, 1.5, 2.0], 0, 3)

    reverted = run_notebook(kernel_dir, cells)
    assert (reverted["out"], reverted["hits"], computations(kernel_dir)) == (expected, 1, 3)


COUNTED_GLOBAL = """\
class Table:
    def __init__(self, rows):
        self.rows = rows


HASHES = []


def _token(table):
    HASHES.append(1)
    return tuple(table.rows)


fncache.register(Table, _token)
TABLE = Table([1, 2, 3])


@fncache.memoize
def total(x):
    return x + sum(TABLE.rows)
"""

COUNT_MISSES = """\
counts = []
for x in range(1, 5):
    HASHES.clear()
    total(x)
    counts.append(len(HASHES))
print(json.dumps({"counts": counts, "stores": total.cache_info().stores}))
"""


def test_in_a_kernel_a_miss_hashes_a_global_as_in_a_script(kernel_dir: Path) -> None:
    """A kernel's own threads (IOPub, heartbeat, control, shell channel, history, output pipes)
    never run the user's code: from the second miss on, a miss hashes a mutable global twice (for
    the key, and after the call to see whether the call changed it), as in a process without
    threads; the first miss looks at them, and hashes it once more just before the call."""
    out = run_notebook(kernel_dir, [SETUP, COUNTED_GLOBAL, COUNT_MISSES])
    assert out == {"counts": [3, 2, 2, 2], "stores": 4}
