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
@pytest.mark.parametrize("how", ["wrapper", "option"])
def test_edited_file_misses_and_revert_hits(tmp_path: Path, how: str) -> None:
    """A data file edited between runs gives a new result and the original content hits its old
    entry (v1 -> v2 -> v1 at one path), whether the path is wrapped in fncache.file or declared with
    files=["path"]."""
    script = write(tmp_path / "job.py", SCRIPT if how == "wrapper" else OPTION_SCRIPT)
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


OPTION_SCRIPT = """
import json, sys
import fncache

calls = []

@fncache.memoize(store=sys.argv[1], files=["path"])
def load(path, scale=1):
    calls.append(1)
    with open(path) as f:
        return scale * sum(int(x) for x in f.read().split(","))

print(json.dumps({"result": load(sys.argv[2]), "computed": len(calls)}))
"""


def test_files_option_is_the_same_key_as_the_wrapper(tmp_path: Path) -> None:
    """A path given to a files= parameter is keyed exactly as fncache.file(path) is, str or Path."""
    p = tmp_path / "a.csv"
    p.write_text("1")

    @fncache.memoize(store=str(tmp_path / "s"), files=["path"])
    def f(path: object) -> int:
        return 0

    assert f.key(str(p)) == f.key(p) == f.key(fncache.file(p))
    assert f.key(None) != f.key(str(p))
    assert f.files == ["path"]


def test_files_option_takes_lists_of_paths(tmp_path: Path) -> None:
    """A files= parameter may take a list of paths (or *args of paths): each is keyed by content."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("1")
    b.write_text("2")

    @fncache.memoize(store=str(tmp_path / "s"), files=["paths"])
    def f(paths: list[str]) -> int:
        return len(paths)

    @fncache.memoize(store=str(tmp_path / "s"), files=["paths"])
    def g(*paths: str) -> int:
        return len(paths)

    before, before_args = f.key([str(a), str(b)]), g.key(str(a), str(b))
    b.write_text("22")
    assert f.key([str(a), str(b)]) != before
    assert g.key(str(a), str(b)) != before_args


@pytest.mark.parametrize(("options", "message"), [
    ({"files": ["nope"]}, r"files: 'nope' is not a parameter of .*parameters: path, scale"),
    ({"files": "path"}, r"files: expected a list of parameter names, not a single string"),
    ({"files": ["path"], "ignore": ["path"]}, r"files: path also listed in ignore="),
    ({"files": [3]}, r"files: expected parameter names"),
])
def test_files_option_is_checked_at_decoration(tmp_path: Path, options: dict[str, object],
                                               message: str) -> None:
    """A files= entry that is not a parameter (or a bare string) fails at decoration, naming files."""
    def load(path: str, scale: int = 1) -> int:
        return scale

    with pytest.raises(fncache.ConfigError, match=message):
        fncache.memoize(store=str(tmp_path / "s"), **options)(load)


def test_files_option_refuses_other_values(tmp_path: Path) -> None:
    """A files= parameter given a number is a TypeError naming the parameter, and nothing runs."""
    @fncache.memoize(store=str(tmp_path / "s"), files=["path"])
    def f(path: object) -> int:
        raise AssertionError("not called")

    with pytest.raises(TypeError, match="argument 'path' is declared in files="):
        f(3)


@pytest.mark.parametrize("mode", ["r", "rb"])
def test_open_file_objects_are_refused_in_both_modes(tmp_path: Path, mode: str) -> None:
    """An open file as an argument is refused in text and binary mode alike, pointing to the path
    forms; the stream is not read (its position is unchanged)."""
    p = tmp_path / "d.txt"
    p.write_text("hello")
    calls = []

    @fncache.memoize(store=str(tmp_path / "s"))
    def read(fh: object) -> object:
        calls.append(1)
        return fh.read()  # type: ignore[attr-defined]

    @fncache.memoize(store=str(tmp_path / "s"), files=["path"])
    def read_path(path: object) -> int:
        calls.append(1)
        return 0

    with open(p, mode) as fh:
        fh.read(2)
        with pytest.raises(fncache.UnhashableArgument, match=r"open file.*fncache\.file\(path\).*files="):
            read(fh)
        with pytest.raises(TypeError, match="declared in files= and got an open file: pass the path"):
            read_path(fh)
        assert fh.tell() == 2
    assert calls == []


def test_in_memory_buffers_are_values(tmp_path: Path) -> None:
    """io.StringIO and io.BytesIO are keyed by their content; sys.stderr as a global by name."""
    import io
    import sys

    @fncache.memoize(store=str(tmp_path / "s"))
    def read(buf: object) -> object:
        print("reading", file=sys.stderr)
        return buf.read()  # type: ignore[attr-defined]

    assert read(io.StringIO("a")) == "a"
    assert read.key(io.BytesIO(b"a")) != read.key(io.BytesIO(b"b"))
    assert read(io.StringIO("a")) == "a" and read.cache_info().hits == 1


def test_file_keys_are_the_recorded_ones(tmp_path: Path) -> None:
    """The key of a file argument is part of the key format: the class is written into the stream
    by reference, so moving ``fncache._files`` would change every such key. Recorded with 0.2's layout;
    the same name and content anywhere give this digest."""
    path = tmp_path / "data.csv"
    path.write_bytes(b"x,y\n1,2\n")
    assert fncache.hash(fncache.file(path)) == "9bff31f437984eefd7e071addf824f37"
    assert fncache.hash(fncache.ref(object(), "tok")) == "3957e84e7c3c6453a1d75793a8f969b9"


def test_a_folder_follows_symlinked_folders_and_never_reads_special_files(tmp_path: Path) -> None:
    """``fncache.file(folder)`` keys every file below it, through a symlinked folder too (a
    function reading ``data/sub/x.csv`` was served the old result after ``x.csv`` changed). A FIFO
    or a broken symlink inside is keyed as what it is, never opened (a FIFO waited for a writer for
    ever); a FIFO given alone, to ``fncache.file`` or ``depends_on=``, is refused, naming it."""
    import subprocess
    import sys
    import textwrap

    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.csv").write_text("1\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "sub").symlink_to(tmp_path / "real", target_is_directory=True)
    (data / ".#lock").symlink_to(tmp_path / "nowhere")
    (data / "loop").symlink_to(data / "loop")  # ELOOP when followed
    os.mkfifo(data / "pipe")
    script = textwrap.dedent(f"""
        import fncache
        load = fncache.memoize(store={str(tmp_path / "store")!r})(
            lambda d: open({str(data / "sub" / "x.csv")!r}).read().strip())
        first = load(fncache.file({str(data)!r}))
        open({str(tmp_path / "real" / "x.csv")!r}, "w").write("2\\n")
        second = load(fncache.file({str(data)!r}))
        try:
            fncache.hash(fncache.file({str(data / "pipe")!r}))
        except fncache.UnhashableArgument as e:
            refused = "not a regular file" in str(e) and "pipe" in str(e)
        uses = fncache.memoize(store={str(tmp_path / "store2")!r},
                               depends_on=[{str(data / "pipe")!r}])(lambda x: x)
        try:
            uses(1)
        except fncache.UnhashableArgument as e:
            refused = refused and str(e).startswith("depends_on:")
        else:
            refused = False
        print(first, second, refused)
    """)
    # In a child with a deadline: the code before waited on the FIFO for ever.
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["1", "2", "True"]


def test_a_broken_symlink_beside_a_glob_does_not_break_the_scan(tmp_path: Path) -> None:
    """A broken symlink under a glob's folder that the pattern does not match (an editor's lock
    file) made every scan unhashable; one it matches is keyed by its target."""
    pl = pytest.importorskip("polars")
    pl.DataFrame({"a": [1]}).write_parquet(tmp_path / "p.parquet")
    before = fncache.hash(pl.scan_parquet(tmp_path / "*.parquet"))
    (tmp_path / ".#notes.txt").symlink_to(tmp_path / "nowhere")
    assert fncache.hash(pl.scan_parquet(tmp_path / "*.parquet")) == before
    (tmp_path / "q.parquet").symlink_to(tmp_path / "gone")
    matched = fncache.hash(pl.scan_parquet(tmp_path / "*.parquet"))
    (tmp_path / "q.parquet").unlink()
    (tmp_path / "q.parquet").symlink_to(tmp_path / "elsewhere")
    assert len({before, matched, fncache.hash(pl.scan_parquet(tmp_path / "*.parquet"))}) == 3


@pytest.mark.slow
def test_a_new_empty_folder_inside_a_folder_changes_its_key_in_a_fresh_process(tmp_path: Path) -> None:
    """Code that lists a folder's subfolders (one per run) sees an empty one added: a key of the
    folder's files alone served the old listing. v1 -> v2 -> v1, each in a fresh process, for
    ``fncache.file`` and ``depends_on=``; an empty folder inside an empty one counts too."""
    root = tmp_path / "runs"
    (root / "run1").mkdir(parents=True)
    (root / "run1" / "metrics.json").write_text("{}")
    script = write(tmp_path / "job.py", """
import json, pathlib, sys
import fncache

def listing(path):
    print("computed", file=sys.stderr)  # (a global counter would be read, and keyed, too)
    return sorted(str(p.relative_to(path)) for p in pathlib.Path(path).rglob("*") if p.is_dir())

by_file = fncache.memoize(store=sys.argv[1])(listing)
by_option = fncache.memoize(store=sys.argv[1] + "-2", depends_on=[sys.argv[2]])(
    lambda: listing(sys.argv[2]))
print(json.dumps({"file": by_file(fncache.file(sys.argv[2])), "option": by_option()}))
""")
    store = str(tmp_path / "store")

    def run() -> dict[str, object]:
        proc = run_py(script, store, str(root))
        return dict(last_json(proc), computed=proc.stderr.count("computed"))

    first = run()
    assert first == {"file": ["run1"], "option": ["run1"], "computed": 2}
    assert run() == dict(first, computed=0)
    (root / "run2").mkdir()
    assert run() == {"file": ["run1", "run2"], "option": ["run1", "run2"], "computed": 2}
    (root / "run2" / "inner").mkdir()
    assert run()["computed"] == 2
    (root / "run2" / "inner").rmdir()
    (root / "run2").rmdir()
    assert run() == dict(first, computed=0)  # as it was: both hit
