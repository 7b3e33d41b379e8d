"""File digest records kept in the store: a fresh process keys an unchanged file without reading
it; a damaged, planted or unsigned record is never trusted; records are listed under their own
name and cleared with the rest."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fncache import _codec
from fncache._digest_records import RECORDS_FUNCTION, record_key
from fncache.stores import open_store
from fncache.values import digests
from tests.helpers import cli, last_json, run_py, write

SCRIPT = """
import json, os, sys
import fncache

store, path, secret = sys.argv[1:4]
opened = []
sys.addaudithook(lambda event, args: event == "open" and args[0] == path and opened.append(1))


@fncache.memoize(store=store, secret=secret or None)
def size(f):
    with open(os.path.join(os.path.dirname(store), "calls.txt"), "a") as out:
        out.write("x")
    return len(open(f, "rb").read())


calls = os.path.join(os.path.dirname(store), "calls.txt")
before = os.path.getsize(calls) if os.path.exists(calls) else 0
opened_before_call = len(opened)
result = size(fncache.file(path))
computed = (os.path.getsize(calls) if os.path.exists(calls) else 0) - before
# Reads of the file to key it: the function's own read counts once when it computes.
print(json.dumps({"result": result, "computed": computed,
                  "key_reads": len(opened) - opened_before_call - computed}))
"""


def _settled(path: Path) -> None:
    """Wait until ``path`` is older than the timestamp granularity, so its digest is recorded."""
    st = os.stat(path)
    while time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) <= 2_100_000_000:  # the granularity
        time.sleep(0.05)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, str, Path]:
    data = tmp_path / "data.bin"
    data.write_bytes(b"abc" * 400_000)  # above the size records are kept for
    _settled(data)
    return write(tmp_path / "job.py", SCRIPT), str(tmp_path / "store"), data


def _run(script: Path, store: str, data: Path, secret: str = "") -> dict[str, int]:
    return last_json(run_py(script, store, str(data), secret))  # type: ignore[no-any-return]


def _record(store: str, data: Path) -> str:
    return record_key(str(data), digests.signature(os.stat(data)))


def test_fresh_process_keys_an_unchanged_file_without_reading_it(setup: tuple[Path, str, Path]) -> None:
    """The first process reads the file to key it; a fresh one finds the record and only stats it."""
    script, store, data = setup
    assert _run(script, store, data) == {"result": 1_200_000, "computed": 1, "key_reads": 1}
    assert _run(script, store, data) == {"result": 1_200_000, "computed": 0, "key_reads": 0}


def test_rewritten_file_is_read_again(setup: tuple[Path, str, Path]) -> None:
    """A rewrite changes the stat signature (ctime), so the old record is not used."""
    script, store, data = setup
    _run(script, store, data)
    before = os.stat(data)
    data.write_bytes(b"xyz" * 400_000)
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    _settled(data)
    assert _run(script, store, data) == {"result": 1_200_000, "computed": 1, "key_reads": 1}
    assert _run(script, store, data) == {"result": 1_200_000, "computed": 0, "key_reads": 0}


def test_damaged_record_is_ignored_and_replaced(setup: tuple[Path, str, Path]) -> None:
    """A record whose frame fails its check is removed, the file read again, and a sound record
    written in its place."""
    script, store, data = setup
    _run(script, store, data)
    s = open_store(store)
    key = _record(store, data)
    frame = bytearray(s.get(key))
    frame[-1] ^= 0xFF
    s.set(key, bytes(frame), {"function": RECORDS_FUNCTION})
    assert _run(script, store, data) == {"result": 1_200_000, "computed": 0, "key_reads": 1}
    assert _run(script, store, data) == {"result": 1_200_000, "computed": 0, "key_reads": 0}


def test_planted_records_never_give_a_wrong_digest(setup: tuple[Path, str, Path]) -> None:
    """A sound frame under the record's key that holds another path's record, or, with a secret, a
    record not signed with it, is not used: the file is read and the right result returned."""
    script, store, data = setup
    _run(script, store, data, secret="k1")
    s = open_store(store)
    key = _record(store, data)
    sig = digests.signature(os.stat(data))
    wrong = b"\0" * 16
    for value, secret in (((str(data) + "x", sig, wrong), b"k1"), ((str(data), sig, wrong), None),
                          ((str(data), sig, wrong), b"k2")):
        s.set(key, _codec.encode(value, key, created=time.time(), duration=0.0, secret=secret),
              {"function": RECORDS_FUNCTION})
        assert _run(script, store, data, secret="k1") == {"result": 1_200_000, "computed": 0,
                                                          "key_reads": 1}


def test_small_files_are_not_recorded(tmp_path: Path) -> None:
    """A file under 1 MiB is read again in a fresh process rather than looked up in the store."""
    data = tmp_path / "small.bin"
    data.write_bytes(b"abc")
    _settled(data)
    script, store = write(tmp_path / "job.py", SCRIPT), str(tmp_path / "store")
    assert _run(script, store, data) == {"result": 3, "computed": 1, "key_reads": 1}
    assert _run(script, store, data) == {"result": 3, "computed": 0, "key_reads": 1}
    assert open_store(store).get(_record(store, data)) is None


def test_records_are_listed_by_name_and_cleared(setup: tuple[Path, str, Path]) -> None:
    """``fncache ls`` shows the records under their own name, and ``fncache clear`` removes them."""
    script, store, data = setup
    _run(script, store, data)
    rows = json.loads(cli("ls", "--store", store, "--json").stdout)
    text = json.dumps(rows)
    assert RECORDS_FUNCTION in text
    cli("clear", "--store", store, "--yes")
    assert open_store(store).get(_record(store, data)) is None
