"""``fncache.file``: path arguments keyed by the file's content, in fresh processes."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

import fncache
from tests.helpers import last_json, run_py, write

SCRIPT = """
import json, sys
import fncache

calls = []

@fncache.memoize(store=sys.argv[1])
def load(path):
    calls.append(1)
    with open(path) as f:
        return sum(int(x) for x in f.read().split(","))

print(json.dumps({"result": load(fncache.file(sys.argv[2])), "computed": len(calls)}))
"""


@pytest.mark.slow
def test_edited_file_misses_and_revert_hits(tmp_path: Path) -> None:
    """A data file edited between runs gives a new result; the original content hits its old entry."""
    script = write(tmp_path / "job.py", SCRIPT)
    data = tmp_path / "data.csv"
    store = str(tmp_path / "store")

    def run() -> dict[str, int]:
        return last_json(run_py(script, store, str(data)))  # type: ignore[no-any-return]

    data.write_text("1,2,3")
    assert run() == {"result": 6, "computed": 1}
    assert run() == {"result": 6, "computed": 0}
    data.write_text("1,2,30")
    assert run() == {"result": 33, "computed": 1}
    data.write_text("1,2,3")
    assert run() == {"result": 6, "computed": 0}


@pytest.mark.slow
def test_same_file_elsewhere_shares_the_key(tmp_path: Path) -> None:
    """The key follows the base name and content, not the directory, so another checkout hits."""
    script = write(tmp_path / "job.py", SCRIPT)
    store = str(tmp_path / "store")
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "data.csv").write_text("4,5")
    assert last_json(run_py(script, store, str(tmp_path / "a" / "data.csv")))["computed"] == 1
    assert last_json(run_py(script, store, str(tmp_path / "b" / "data.csv"))) == {"result": 9, "computed": 0}


def test_key_depends_on_name_and_content(tmp_path: Path) -> None:
    """Equal content under another name, or other content under the same name, is another key."""
    (tmp_path / "x.csv").write_text("1")
    (tmp_path / "y.csv").write_text("1")
    kx = fncache.hash(fncache.file(tmp_path / "x.csv"))
    assert kx != fncache.hash(fncache.file(tmp_path / "y.csv"))
    assert kx != fncache.hash(str(tmp_path / "x.csv"))
    (tmp_path / "x.csv").write_text("2")
    os.utime(tmp_path / "x.csv", ns=(1, 1))  # a new mtime, so the size/mtime digest cache is not reused
    assert fncache.hash(fncache.file(tmp_path / "x.csv")) != kx
    missing = fncache.hash(fncache.file(tmp_path / "nope.csv"))
    (tmp_path / "nope.csv").write_text("")
    assert fncache.hash(fncache.file(tmp_path / "nope.csv")) != missing


def test_a_file_argument_is_a_path_everywhere(tmp_path: Path) -> None:
    """open(), pathlib, os.fspath and pickle treat fncache.file(p) as the path p."""
    p = tmp_path / "d.txt"
    p.write_text("hello")
    f = fncache.file(p)
    assert os.fspath(f) == str(p)
    assert open(f).read() == "hello"
    assert Path(f).read_text() == "hello"
    assert pickle.loads(pickle.dumps(f)) == f
    assert repr(f) == f"fncache.file({str(p)!r})"


def test_pandas_reads_a_file_argument(tmp_path: Path) -> None:
    """pandas.read_csv accepts the wrapper as it accepts a path."""
    pd = pytest.importorskip("pandas")
    p = tmp_path / "t.csv"
    p.write_text("a,b\n1,2\n")
    assert pd.read_csv(fncache.file(p)).to_dict("records") == [{"a": 1, "b": 2}]


def test_bad_path_type_names_the_argument() -> None:
    """A non-path argument is refused with a message that names the parameter."""
    with pytest.raises(TypeError, match="path must be"):
        fncache.file(3)  # type: ignore[arg-type]


def test_rewrite_within_the_same_timestamp_is_seen(tmp_path: Path) -> None:
    """A file rewritten with the same size and the same mtime at once is still hashed anew."""
    p = tmp_path / "fast.csv"
    p.write_text("1,2")
    st = p.stat()
    first = fncache.hash(fncache.file(p))
    p.write_text("3,4")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert fncache.hash(fncache.file(p)) != first
